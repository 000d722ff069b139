"""Steps a set of envs and writes their results into the engine's buffers.

The same runner runs in the pool's own process (serial backend, or the share of envs the
main process steps itself), in threads and in worker processes, so every backend has the
same semantics: autoreset, the engine's time limit, episode statistics and forwarded info.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs import spaces
from seedpool.envs.buffers import OK, RESTARTED, Buffers
from seedpool.envs.channel import RESET, STEP
from seedpool.envs.infos import ENGINE_KEYS, undeclared
from seedpool.envs.spec import TaskSpec


def action_reader(space: gym.Space, buf: spaces.Tree) -> Callable[[int], Any]:
    """A function returning env i's action from the action buffer, as the env expects it."""
    if isinstance(space, gym.spaces.Discrete):
        # A numpy integer: gymnasium's Discrete.contains checks it faster than a Python int.
        return buf.__getitem__
    if type(buf) is spaces.Nested:  # Dict or Tuple, nested to any depth
        return buf.row_copy
    if type(buf) is spaces.Objects:  # a space of no fixed shape: the object itself
        return buf.__getitem__
    if buf.ndim == 1:  # a scalar space (Box of shape ()): a numpy scalar, as gymnasium iterates it
        return buf.__getitem__
    return lambda i: buf[i].copy()  # the env may keep it; the buffer is reused


class EnvRunner:
    """Owns the envs with the given global ids; `step(i)` and `reset(i)` write row i."""

    def __init__(
        self,
        spec: TaskSpec,
        env_ids: list[int],
        num_envs: int,
        buffers: Buffers,
        autoreset: str,
        envs: dict[int, gym.Env] | None = None,
        restarted: bool = False,
    ):
        """`autoreset`: "next_step", "same_step" or "disabled" (an ended env is stepped on)."""
        self.b = buffers
        self.same_step = autoreset == "same_step"
        self.autoreset = autoreset != "disabled"
        self.limit = spec.max_episode_steps
        self.env_ids = list(env_ids)
        # Indexed by global env id so the hot path does no dict lookups.
        self.envs: list[gym.Env | None] = [None] * num_envs
        self._build_envs(spec, dict(envs or {}))
        self.needs_reset = [True] * num_envs
        self.options_required = [_requires_options(env) for env in self.envs]
        self.reset_options: dict[int, dict] = {}  # env id -> options for its next RESET
        self.elapsed = [0] * num_envs
        self.returns = [0.0] * num_envs
        self.read_action = action_reader(spec.action_space, buffers.action)
        self.info_items = list(buffers.info.items())
        self.declared = ENGINE_KEYS | frozenset(buffers.info)
        self.put_extra = buffers.extra.writer()  # undeclared info: see infos.py
        # After a worker restart, each env's first reset reports its old episode truncated.
        self.restart_marks = set(env_ids) if restarted else set()

    def reset(self, i: int, asked: bool = True) -> int:
        """Reset env i (with the seed left in the seed buffer and the options left in
        `reset_options`, if any) and write row i. `asked`: a reset the caller asked for, not
        an autoreset; an env that tells them apart (Atari under episodic_life: an asked reset
        starts a new game, an autoreset after a lost life continues it, as in EnvPool) has
        an `on_explicit_reset()` method, called first."""
        self.restart_marks.discard(i)
        if asked:
            hook = getattr(self.envs[i].unwrapped, "on_explicit_reset", None)
            if hook is not None:
                hook()
        b = self.b
        seed: int | None = int(b.seed[i])
        if seed >= 0:
            b.seed[i] = -1
        else:
            seed = None
        # By keyword, as gymnasium's and SB3's vector envs call it: `seed` always, `options` when
        # there are some (SB3's way) or when the env's reset requires it (gymnasium always passes it).
        options = self.reset_options.pop(i, None)
        if options is not None or self.options_required[i]:
            obs, info = self.envs[i].reset(seed=seed, options=options)
        else:
            obs, info = self.envs[i].reset(seed=seed)
        self.needs_reset[i] = False
        self.elapsed[i] = 0
        self.returns[i] = 0.0
        b.reward[i] = 0.0
        b.terminated[i] = False
        b.truncated[i] = False
        b.elapsed_step[i] = 0
        b.episode_return[i] = 0.0
        b.extra.clear(i)  # a reset's row holds only what this reset returned
        if info:
            self._take_info(i, info)
        spaces.write(b.obs, i, obs)
        return OK

    def recover(self, i: int) -> int:
        """Reset env i after a fault: the row reports the interrupted episode truncated, and
        the next step resets again so that callers see an ordinary episode boundary."""
        self.reset(i)
        self.b.truncated[i] = True
        self.needs_reset[i] = True
        return RESTARTED

    def run(self, op: int, i: int) -> int:
        """Run one command (STEP, RESET or RECOVER) on env i; returns the row's status."""
        if op == STEP:
            return self.step(i)
        if op == RESET:
            return self.reset(i)
        self.reset_options.pop(i, None)  # options belong to a reset the user asked for
        return self.recover(i)

    def step(self, i: int) -> int:
        """Step env i with the action in its action row and write row i; returns its status."""
        self.step_all((i,))
        return int(self.b.status[i])

    def step_all(self, ids: list[int] | tuple[int, ...]) -> None:
        """Step each env with the action in its action row and write its row.

        One loop with the per-env work inlined (the serial hot path). A reset step writes
        its status (OK or RESTARTED); an ordinary step leaves OK, which every row holds
        again after the reset that follows RESTARTED or FAILED. If an env raises, the
        exception carries `env_id` and the envs after it are not run.
        """
        b = self.b
        reward, terminated, truncated = b.reward, b.terminated, b.truncated
        elapsed_step, episode_return = b.elapsed_step, b.episode_return
        envs, needs_reset, elapsed, returns = self.envs, self.needs_reset, self.elapsed, self.returns
        read_action, limit, same_step = self.read_action, self.limit, self.same_step
        write_obs = b.obs.write if type(b.obs) is spaces.Nested else b.obs.__setitem__
        take_info, put_extra, declared = self._take_info, self.put_extra, self.declared
        # No declared info arrays: an info of only the env's own keys (a MuJoCo env's, every
        # step) goes to its slot as it is, without the general path's lookups.
        no_arrays = not self.info_items
        i = -1
        try:
            for i in ids:
                if needs_reset[i]:
                    self.b.status[i] = self.recover(i) if i in self.restart_marks else self.reset(i, False)
                    continue
                obs, rew, term, trunc, info = envs[i].step(read_action(i))
                n = elapsed[i] + 1
                ret = returns[i] + rew
                elapsed[i] = n
                returns[i] = ret
                if n == limit and not term:
                    trunc = True
                reward[i] = rew
                terminated[i] = term
                truncated[i] = trunc
                elapsed_step[i] = n
                episode_return[i] = ret
                if info:  # most envs return an empty dict: then nothing more is done
                    if no_arrays and declared.isdisjoint(info):
                        put_extra(i, info)
                    else:
                        take_info(i, info)
                if term or trunc:
                    if same_step:
                        spaces.write(b.final_obs, i, obs)
                        final_info = info
                        obs, info = envs[i].reset()
                        if info or final_info:
                            self._same_step_info(i, final_info, info)
                        elapsed[i] = 0
                        returns[i] = 0.0
                    elif self.autoreset:
                        needs_reset[i] = True
                write_obs(i, obs)
        except Exception as exc:
            exc.env_id = i  # type: ignore[attr-defined]
            raise

    def mark_for_reset(self, i: int) -> None:
        """After an env error: its next step is a reset that reports the episode truncated."""
        self.needs_reset[i] = True
        self.restart_marks.add(i)

    def _take_info(self, i: int, info: dict[str, Any]) -> None:
        """Write env i's declared info entries into their arrays; leave the rest in its slot."""
        for key, arr in self.info_items:
            value = info.get(key)
            if value is not None:
                arr[i] = value
        extra = undeclared(info, self.declared)
        if extra:
            self.put_extra(i, extra)

    def _same_step_info(self, i: int, final_info: dict[str, Any], reset_info: dict[str, Any]) -> None:
        """After a same-step autoreset, as gymnasium: the reset's entries, and the last step's
        under "final_info" (declared keys keep the last step's values, as before)."""
        extra = undeclared(reset_info, self.declared)
        last = undeclared(final_info, self.declared)
        if extra or last:
            self.put_extra(i, {**extra, "final_info": last})
        else:
            self.b.extra.clear(i)

    def _build_envs(self, spec: TaskSpec, given: dict[int, gym.Env]) -> None:
        """Build (or take from `given`) each env; if one fails, close the others and raise."""
        try:
            built: dict[int, int] = {}  # id of each env's unwrapped object -> its env id
            for i in self.env_ids:
                env = given.pop(i) if i in given and spec.probe_fits(i) else None
                env = self.envs[i] = env if env is not None else spec.build(i)
                first = built.setdefault(id(env.unwrapped), i)
                if first != i:  # as SB3's DummyVecEnv refuses it: the envs would step as one
                    self.envs[i] = None
                    raise ValueError(f"the factories of envs {first} and {i} returned the same env instance; "
                                     "each factory must build a new env (e.g. lambda: MyEnv(), not lambda: env)")
        except BaseException:
            self.close()
            raise
        finally:
            for env in given.values():  # a probe that cannot serve as one of our envs
                env.close()

    def close(self) -> None:
        """Close every env, ignoring errors of envs that are already broken."""
        for i in self.env_ids:
            env = self.envs[i]
            if env is not None:
                try:
                    env.close()
                except Exception:  # noqa: BLE001 - closing must not mask the real error
                    pass
                self.envs[i] = None


def _requires_options(env: gym.Env | None) -> bool:
    """Whether the env's `reset` has an `options` parameter without a default."""
    if env is None:
        return False
    try:
        param = inspect.signature(env.reset).parameters.get("options")
    except (TypeError, ValueError):
        return False
    return param is not None and param.default is inspect.Parameter.empty


def probe_step_cost(spec: TaskSpec, steps: int = 32, repeats: int = 5) -> float:
    """Seconds per step of an extra env with random actions (for `backend="auto"`).

    The env is built for the probe alone (the task's factory called once more) and closed
    after it: never `spec.probe`, which the pool may keep as env 0, nor any env a user's
    factory built for the pool. Stepping one of those would change what the user's run starts
    from (a wrapper's running statistics, an env's counters, its seeding).

    The least of several timed runs, after a warm-up: the env's own cost, not the noise of
    a busy machine (a single noisy probe once flipped CartPole x 8 from serial to hybrid).
    Where Linux reports it, the time this thread spent runnable but waiting for a core is
    taken off each run: on a machine loaded by other jobs every run is preempted, and the
    least wall time alone still overstated HalfCheetah's cost (benchmarks/results/loop_why.md).
    """
    env = spec.env_fn()
    try:
        return _timed_steps(env, steps, repeats)
    finally:
        env.close()


def _timed_steps(env: gym.Env, steps: int, repeats: int) -> float:
    """The least of `repeats` timed runs of `steps` random steps of `env` (see probe_step_cost)."""
    import time

    # A copy of the space: the env's own may be shared with other envs (a class attribute).
    space = copy.deepcopy(env.action_space)
    space.seed(0)
    actions = [space.sample() for _ in range(steps)]
    if isinstance(space, gym.spaces.Discrete):
        actions = [np.int64(a) for a in actions]  # what the engine hands envs
    env.reset(seed=0)
    best = float("inf")
    for rep in range(repeats + 1):
        t0, c0 = time.perf_counter(), time.thread_time()
        q0 = _runqueue_wait_s()  # read inside the timed span: a wait while reading is in both
        for a in actions:
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                env.reset()
        q1 = _runqueue_wait_s()
        t1, c1 = time.perf_counter(), time.thread_time()
        if rep:  # the first run is the warm-up
            # Never below the thread's own CPU time: the kernel books a wait when the thread is
            # switched back in, which may fall just outside a span.
            best = min(best, max(t1 - t0 - (q1 - q0), c1 - c0) / steps)
    return best


def _runqueue_wait_s() -> float:
    """Seconds this thread has spent runnable but waiting for a core (Linux's schedstat; 0.0
    where there is none, so that a probe then counts wall time)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return 0.0
