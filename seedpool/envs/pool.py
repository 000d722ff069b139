"""`EnvPool`: many environments behind one batched API, sync (`step`) or async (`send`/`recv`)."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from seedpool.envs import rows, spaces, validate
from seedpool.envs.buffers import RESTARTED, Buffers
from seedpool.envs.channel import RECOVER, RESET, STEP
from seedpool.envs.envpool_api import EnvPoolSurface, PoolSpec, pool_config
from seedpool.envs.errors import ActionBatchError, ClosedError, EnvPoolError, EnvStepError
from seedpool.envs.executor import Executor, ExecutorConfig
from seedpool.envs.seeds import env_seeds  # noqa: F401 - also imported from here (make.py)
from seedpool.envs.spec import TaskSpec

# "disabled": an env whose episode ended is stepped on as it is until the caller resets it
# (gymnasium's AutoresetMode.DISABLED, with reset(options={"reset_mask": ...})).
AUTORESET_MODES = ("next_step", "same_step", "disabled")
_MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP,
          "disabled": AutoresetMode.DISABLED}


class EnvPool(EnvPoolSurface, gym.vector.VectorEnv, gym.Env):
    """A batch of environments; build it with `seedpool.make`.

    As EnvPool's pools, it is a `gymnasium.Env` (so `gymnasium.Wrapper` subclasses wrap it)
    and a `VectorEnv` whose `observation_space`/`action_space` are the single env's. The base
    classes only add methods and class attributes: nothing runs per step.
    """

    is_vector_env = True  # EnvPool's flag, read by older vector-aware wrappers

    def __init__(
        self,
        spec: TaskSpec,
        num_envs: int,
        batch_size: int,
        seeds: list[int],
        autoreset: str,
        executor_cfg: ExecutorConfig,
        made_with: dict[str, Any] | None = None,
    ):
        """Allocate buffers and start workers; `made_with`: the make() arguments `config` reports."""
        self.task = spec
        self.num_envs = num_envs
        self.batch_size = batch_size
        self.is_async = batch_size < num_envs
        self.autoreset = autoreset
        self.backend = executor_cfg.kind if executor_cfg.kind != "process" or executor_cfg.local_envs == 0 else "process+main"
        self.num_workers = executor_cfg.num_workers
        self.layout_reason = executor_cfg.reason  # why backend="auto" chose this layout, "" if forced
        self.single_observation_space = spec.observation_space
        self.single_action_space = spec.action_space
        # EnvPool's convention (scripts test `isinstance(envs.action_space, Discrete)`), not
        # gymnasium's batched one: make_vec's VectorEnv has the batched spaces.
        self.observation_space = spec.observation_space
        self.action_space = spec.action_space
        self.config = pool_config(spec, num_envs, batch_size, self.backend, self.num_workers, autoreset,
                                  made_with or {})
        self.spec = PoolSpec.of(spec, self.config)
        self.metadata = {"render_modes": [], "autoreset_mode": _MODES[autoreset]}
        self.autoreset_mode = _MODES[autoreset]  # gymnasium's vector envs' attribute
        self._restart_info = executor_cfg.restart_workers
        # The per-episode counts of every recv()'s info (elapsed_step, episode_return,
        # episode_length); make_vec turns them off when its caller does not want them, which
        # saves their copies on every step of a user's loop.
        self.engine_counts = True
        # Where a Dict/Tuple action's batch size is read from (its first leaf); None: flat.
        nested = isinstance(spec.action_space, spaces.COMPOSITE)
        self._action_path = spaces.leaves(spec.action_space)[0][0] if nested else None
        shared = executor_cfg.kind == "process"
        self._b = Buffers.allocate(spec, num_envs, shared=shared, same_step=autoreset == "same_step")
        self._b.seed[:] = seeds
        self.space_seed: int | None = None
        self._seed_spaces(seeds)
        self._in_flight = np.zeros(num_envs, np.bool_)
        self._n_in_flight = 0
        self._all = np.arange(num_envs, dtype=np.int64)
        self._all_list = self._all.tolist()
        self._all32 = self._all.astype(np.int32)
        self._closed = False
        self._whole_steps = False
        self._action_writer = None
        if spec.native is not None:  # imported here: it loads numba, which other pools never need
            from seedpool.envs.native.executor import NativeExecutor

            self._exec = NativeExecutor(spec, num_envs, self._b, autoreset, executor_cfg)
            self._whole_steps = not self.is_async  # NativeExecutor.step_whole
            self._action_writer = self._exec.action_writer
        else:
            self._exec = Executor(spec, num_envs, self._b, autoreset, executor_cfg)
        self._finalizer = weakref.finalize(self, self._exec.close)

    # -- sync API ---------------------------------------------------------------------------
    def reset(self, env_id: Any = None, *, seed: int | Sequence[int | None] | None = None,
              options: dict | None = None):
        """Reset every env (env i gets seed + i when a seed is given, and `options`, which
        must be picklable for the process backend); returns (obs, info). `seed` and `options`
        are keyword-only, as in gymnasium, so that EnvPool's positional `env_id` is never read
        as seeds.

        `env_id` (EnvPool's subset reset, positional or keyword): reset only those envs, the
        others may be in flight; as `step(action, env_id)`, sync mode returns their rows in
        env_id order and async mode the first `batch_size` envs to finish.
        `options={"reset_mask": mask}` (gymnasium's partial reset, a bool array of one entry
        per env) resets only the envs where `mask` is True, each with its own seed and the
        other options; the observations of the others are their latest, and the info holds
        only what the reset envs returned."""
        if env_id is not None:
            return self._reset_some(env_id, seed, options)
        ids = self.start_reset(seed=seed, options=options)
        return self.finish_reset(ids)

    def _reset_some(self, env_id: Any, seed: Any, options: dict | None):
        """EnvPool's `reset(env_id)`: submit resets of `env_id`, receive as `step` does."""
        self._check_open()
        ids = validate.env_ids(env_id, self.num_envs)
        if options is not None and "reset_mask" in options:
            raise ValueError("pass env_id or options['reset_mask'] to reset(), not both")
        busy = self._in_flight[ids]
        if busy.any():
            raise EnvPoolError(f"reset() of env_id {ids[busy].tolist()}, which are in flight: "
                               "recv() their results first")
        if seed is not None:  # env i gets seed + i (or seed[i]), as in a reset of every env
            self._b.seed[ids] = np.asarray(env_seeds(seed, self.num_envs))[ids]
        if options is not None:
            self._exec.set_reset_options(options, ids.tolist())
        self._submit(ids, RESET)
        n = self.batch_size if self.is_async else len(ids)
        obs, _, _, _, info = self._receive(n, ordered=not self.is_async, order=ids)
        return obs, info

    def start_reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None,
                    env_options: Sequence[dict | None] | None = None) -> np.ndarray:
        """The first half of `reset`: start resetting the envs (all, or those of a reset
        mask); returns their ids for `finish_reset`. `env_options`: instead of `options`,
        one options dict (or None) per env, as SB3 keeps them."""
        self._check_open()
        if self._n_in_flight:
            raise EnvPoolError(f"reset() while {self._n_in_flight} envs are in flight: recv() them first")
        seeds = None if seed is None else env_seeds(seed, self.num_envs)  # checked before any effect
        ids = self._all
        if options is not None and "reset_mask" in options:
            ids = np.flatnonzero(validate.reset_mask(options["reset_mask"], self.num_envs))
            options = {k: v for k, v in options.items() if k != "reset_mask"}  # not the caller's dict
        if options is not None:
            self._exec.set_reset_options(options, ids.tolist())
        if env_options is not None:
            if len(env_options) != self.num_envs:
                raise ValueError(f"env_options needs one entry per env ({self.num_envs}), got {len(env_options)}")
            groups: dict[int, tuple[dict, list[int]]] = {}  # one message per distinct dict
            for i, opt in enumerate(env_options):
                if opt is not None:
                    groups.setdefault(id(opt), (opt, []))[1].append(i)
            for opt, members in groups.values():
                self._exec.set_reset_options(opt, members)
        if seeds is not None:
            self._b.seed[ids] = np.asarray(seeds)[ids]
            self._seed_spaces(seeds)
        self._submit(ids, RESET)
        return ids

    def finish_reset(self, ids: np.ndarray, timeout: float | None = None):
        """The second half of `reset`: (obs, info) once the envs `ids` are reset. With
        `timeout`, WaitTimeout if worker envs take longer (they stay in flight: call again)."""
        if ids is self._all:
            out = self._receive(self.num_envs, ordered=True, timeout=timeout)
        else:
            out = self._receive_partial_reset(len(ids), timeout)
        return out[0], out[4]

    def _receive_partial_reset(self, n: int, timeout: float | None):
        """Every env's row after a reset of `n` of them (their results are in the rows)."""
        self._check_open()
        got = self._wait(n, timeout)
        self._in_flight[got] = False
        return self._batch(None, self._all32.copy())

    def _wait(self, n: int, timeout: float | None) -> np.ndarray:
        """The ids of the next `n` envs to finish; an env's error first puts the pool back in order."""
        try:
            got = self._exec.wait(n, timeout)
        except EnvStepError as err:
            self._recover(err.env_id)
            raise
        self._n_in_flight -= n
        return got

    def step(self, action: Any, env_id: Any = None):
        """send(action, env_id) then recv(); in sync mode the results follow env_id's order
        (as given, as in EnvPool)."""
        if self._whole_steps and env_id is None and not self._n_in_flight:
            self._check_open()
            if self._exec.step_whole(action):  # a native family's sync step of every env, one call
                return self._batch(None, self._all32.copy())
        ids = self._send(action, env_id)
        if self.is_async:
            return self._receive(self.batch_size, ordered=False)
        return self._receive(len(ids), ordered=True, order=ids)

    # -- async API --------------------------------------------------------------------------
    def async_reset(self) -> None:
        """Start resetting every env; collect them with recv()."""
        self._check_open()
        if self._n_in_flight:
            raise EnvPoolError(f"async_reset() while {self._n_in_flight} envs are in flight: recv() them first")
        self._submit(self._all, RESET)

    def send(self, action: Any, env_id: Any = None) -> None:
        """Start stepping the envs `env_id` (default: all) with `action` (leading dim = len(env_id))."""
        self._send(action, env_id)

    def recv(self, timeout: float | None = None):
        """The first `batch_size` envs to finish: (obs, rew, terminated, truncated, info).
        With `timeout` (seconds), WaitTimeout if worker envs take longer; they stay in
        flight and a later recv() returns them (envs stepped in this process cannot time out)."""
        return self._receive(self.batch_size, ordered=not self.is_async, timeout=timeout)

    # -- per-env calls ----------------------------------------------------------------------
    def env_call(self, fn: Callable[..., Any], *args: Any, env_ids: Any = None) -> list[Any]:
        """`fn(env, *args)` for each env of `env_ids` (default all), run where the env lives;
        the results in `env_ids` order. `fn` and `args` must be picklable for worker
        processes (a module-level function). Only between steps: no env may be in flight."""
        ids = self._call_ids(env_ids)
        return [self._exec.call(i, fn, args) for i in ids]

    def env_call_each(self, fn: Callable[..., Any], args: Sequence[tuple], env_ids: Any = None) -> list[Any]:
        """As `env_call`, with its own arguments for each env: `fn(env_i, *args[k])`."""
        ids = self._call_ids(env_ids)
        if len(args) != len(ids):
            raise ValueError(f"env_call_each needs one argument tuple per env ({len(ids)}), got {len(args)}")
        return [self._exec.call(i, fn, a) for i, a in zip(ids, args)]

    def in_process_envs(self) -> list[Any] | None:
        """The env objects themselves, in env_id order, when every env is stepped in this
        process (``backend="serial"``); None when some live in worker threads or processes.
        Touch them only between steps, as with `env_call`."""
        self._check_open()
        local = self._exec.local
        if local is None or len(local.env_ids) != self.num_envs:
            return None
        return list(local.envs)

    def _call_ids(self, env_ids: Any) -> list[int]:
        self._check_open()
        if self._n_in_flight:
            raise EnvPoolError(f"a per-env call while {self._n_in_flight} envs are in flight: recv() them first")
        return self._all_list if env_ids is None else validate.env_ids(env_ids, self.num_envs).tolist()

    # -- internals --------------------------------------------------------------------------
    def _send(self, action: Any, env_id: Any) -> np.ndarray:
        self._check_open()
        if env_id is None:
            path = self._action_path
            if path is None:
                n = rows.leading_dim(action)
            else:
                n = rows.nested_leading_dim(action, path, self.single_action_space)
            if n != self.num_envs:
                if path is None and np.ndim(action) == 0 and not isinstance(action, (tuple, list)):
                    raise ActionBatchError(f"send() without env_id needs a batch of one action per env "
                                           f"({self.num_envs}), got a single {type(action).__name__}")
                raise ValueError(
                    f"send() without env_id needs one action per env ({self.num_envs}), got {n}; "
                    "pass env_id=info['env_id'] from recv()"
                )
            ids = self._all
        else:
            ids = validate.env_ids(env_id, self.num_envs)
        if self._n_in_flight:
            busy = self._in_flight[ids]
            if busy.any():
                raise EnvPoolError(
                    f"env_id {ids[busy].tolist()} already in flight: recv() their results before sending again"
                )
        writer = self._action_writer  # a native pool's compiled check and copy; it declines what it cannot take
        if writer is None or not writer.write(action, None if ids is self._all else ids):
            act = validate.actions(self.single_action_space, action, len(ids))
            rows.write(self._b.action, ids, act, ids is self._all)
        self._submit(ids, STEP)
        return ids

    def _submit(self, ids: np.ndarray, op: int) -> None:
        if ids is self._all:
            self._in_flight.fill(True)
            id_list = self._all_list
        else:
            self._in_flight[ids] = True
            id_list = ids.tolist()
        self._n_in_flight += len(id_list)
        self._exec.submit(id_list, op)

    def _receive(self, n: int, ordered: bool, timeout: float | None = None, order: np.ndarray | None = None):
        """The next `n` envs' rows: as they finish, or (`ordered`) by env id, or in `order`
        where the caller's env_id list is not ascending."""
        self._check_open()
        if self._n_in_flight < n:
            raise EnvPoolError(
                f"recv() needs {n} envs in flight, but {self._n_in_flight} are: send() actions first"
            )
        got = self._wait(n, timeout)
        if n == self.num_envs and ordered:  # every env came back (sync mode): no gather
            self._in_flight.fill(False)
            return self._batch(None, self._all32.copy())
        if ordered and order is not None and n > 1 and (order[1:] < order[:-1]).any():
            self._in_flight[order] = False
            return self._batch(order, order.astype(np.int32))
        lo = min(got)
        if max(got) - lo == n - 1:
            # A contiguous run of env ids (every sync step; the halves of a serial async pool):
            # return it in env_id order, copied with slices instead of gathered.
            sel = slice(lo, lo + n)
            self._in_flight[sel] = False
            return self._batch(sel, self._all32[sel].copy())
        if ordered:
            got.sort()
        idx = np.asarray(got, dtype=np.int64)
        self._in_flight[idx] = False
        return self._batch(idx, idx.astype(np.int32))

    def _recover(self, env_id: int) -> None:
        """After an env raised: sync mode drops the failed step; async mode restarts the env."""
        self._in_flight[env_id] = False
        self._n_in_flight -= 1
        if self.is_async:  # it comes back from a later recv(), reset and reported truncated
            self._submit(np.array([env_id]), RECOVER)
        else:
            dropped = self._exec.drop_leftover()
            for i in dropped:  # their undeclared info must not come back with a later step
                self._b.extra.clear(i)
            self._in_flight[dropped] = False
            self._n_in_flight -= len(dropped)

    def _batch(self, sel: np.ndarray | slice | None, env_id: np.ndarray):
        """Fresh arrays of the rows `sel`: an index array, a slice of consecutive envs, or all."""
        b = self._b
        take = spaces.taker(sel)
        info: dict[str, Any] = {"env_id": env_id}
        if self.engine_counts:
            elapsed = take(b.elapsed_step)
            info["elapsed_step"] = elapsed
            info["episode_return"] = take(b.episode_return)
            info["episode_length"] = elapsed.copy()  # the same count, its own array
        # Declared info keys; an env that declares its own elapsed_step (Atari: the game's
        # steps across lives, as EnvPool counts them) replaces the engine's per-episode count.
        for k, arr in b.info.items():
            info[k] = take(arr)
        if b.final_obs is not None:
            info["final_obs"] = spaces.gather(b.final_obs, sel)
        if self._restart_info:
            info["restarted"] = take(b.status) == RESTARTED
        if b.extra.pending():  # some env returned undeclared info: forward it (see infos.py)
            info = b.extra.add_to(info, env_id, whole=sel is None)
        return spaces.gather(b.obs, sel), take(b.reward), take(b.terminated), take(b.truncated), info

    def _seed_spaces(self, seeds: list[int]) -> None:
        """Seed the spaces with the first env's seed (none if unseeded), so that
        `action_space.sample()` exploration repeats run to run with the same seed."""
        seed = next((s for s in seeds if s >= 0), None)
        if seed is not None:
            self.space_seed = seed  # make_vec seeds its batched spaces with it too
            for space in (self.single_action_space, self.action_space,
                          self.single_observation_space, self.observation_space):
                space.seed(seed)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this pool is closed")

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def worker_restarts(self) -> int:
        """How many dead workers were replaced (with on_worker_death='restart')."""
        return self._exec.restart_count

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes (empty for serial and thread backends)."""
        return [w.handle.pid for w in self._exec.workers if w.handle.pid is not None]

    @property
    def closed(self) -> bool:
        """Whether close() was called (gymnasium's VectorEnv flag)."""
        return self._closed

    def close(self, **kwargs: Any) -> None:
        """Stop workers and close envs; safe to call twice (`kwargs`: VectorEnv's, unused)."""
        if not self._closed:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = f"async batch_size={self.batch_size}" if self.is_async else "sync"
        why = f", auto: {self.layout_reason}" if self.layout_reason else ""
        return (f"EnvPool({self.task.name!r}, num_envs={self.num_envs}, {mode}, "
                f"backend={self.backend!r}, num_workers={self.num_workers}{why})")

    __str__ = __repr__  # gymnasium.Env's would print only the spec id
