"""`make_vec`: the engine as a `gymnasium.vector.VectorEnv`, for existing Gymnasium code."""

from __future__ import annotations

import multiprocessing
import warnings
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError

from seedpool.envs import calls
from seedpool.envs.errors import WaitTimeout
from seedpool.envs.infos import ENGINE_KEYS, batch_infos
from seedpool.envs.make import env_count, make
from seedpool.envs.pool import EnvPool

# The pool's own bookkeeping, which gymnasium's vector envs do not return ("final_obs" they do).
_POOL_KEYS = tuple(k for k in ENGINE_KEYS if k != "final_obs")


class SeedpoolVectorEnv(gym.vector.VectorEnv):
    """A synchronous VectorEnv backed by an EnvPool (any backend)."""

    def __init__(self, pool: EnvPool, engine_info: bool = False):
        """`engine_info`: keep the pool's own info entries (env_id, elapsed_step,
        episode_return, episode_length) beside the envs' own."""
        if pool.is_async:
            raise ValueError("a VectorEnv is synchronous: build the pool without batch_size < num_envs")
        self.pool = pool
        self.engine_info = engine_info
        self.num_envs = pool.num_envs
        self.single_observation_space = pool.single_observation_space
        self.single_action_space = pool.single_action_space
        # Gymnasium's batched spaces (the pool's own follow EnvPool: the single env's).
        self.observation_space = self._batched_observation_space(pool)
        self.action_space = gym.vector.utils.batch_space(pool.single_action_space, pool.num_envs)
        # As SyncVectorEnv: a copy of env 0's metadata (never the env's own dict), its render mode.
        self.metadata = {**pool.task.metadata, "autoreset_mode": pool.metadata["autoreset_mode"]}
        self.render_mode = pool.task.render_mode
        # What SyncVectorEnv exposes besides (TorchRL's GymWrapper reads autoreset_mode). Its
        # `envs` and `env_fns` have no counterpart: the envs may live in worker processes.
        self.autoreset_mode = self.metadata["autoreset_mode"]
        self.observation_mode = pool.task.observation_mode
        self.copy = True  # every step returns fresh arrays, as gymnasium's copy=True
        self._pending: str | None = None  # "reset" or "step" between *_async and *_wait
        self._resetting: np.ndarray | None = None
        self._seed_batched_spaces()

    def _batched_observation_space(self, pool: EnvPool) -> gym.Space:
        """As gymnasium's vector envs batch it for the pool's observation_mode."""
        mode = pool.task.observation_mode
        if isinstance(mode, tuple):  # (batched, single), given by the caller, as gymnasium takes it
            self.single_observation_space = mode[1]
            return mode[0]
        if mode == "different":  # each env's own bounds, asked where the env lives
            return gym.vector.utils.batch_differing_spaces(pool.env_call(calls.get_attr, "observation_space"))
        return gym.vector.utils.batch_space(pool.single_observation_space, pool.num_envs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs (or those of `options["reset_mask"]`); env i gets seed + i, and the
        spaces are seeded again from `seed`."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: int | list[int] | None = None, options: dict[str, Any] | None = None) -> None:
        """Start the reset (AsyncVectorEnv's spelling); collect it with `reset_wait`."""
        self._refuse_pending("reset_async")
        self._resetting = self.pool.start_reset(seed=seed, options=options)
        self._pending = "reset"
        if seed is not None:
            self._seed_batched_spaces()

    def reset_wait(self, timeout: float | None = None, **kwargs: Any):
        """(obs, info) of the reset `reset_async` started; `multiprocessing.TimeoutError` after
        `timeout` seconds (the reset goes on: call again)."""
        obs, info = self._collect("reset", lambda: self.pool.finish_reset(self._resetting, timeout), timeout)
        info.pop("final_obs", None)  # the same-step buffer: nothing ended in a reset
        return obs, self._own(info)

    def _collect(self, kind: str, receive: Callable[[], Any], timeout: float | None) -> Any:
        """`receive()` the results of the pending `kind` ("step" or "reset") call, with
        gymnasium's errors: no such call, or still running after `timeout` seconds (the call
        goes on: ask again); an env that raised ends the call (the pool dropped it)."""
        if self._pending != kind:
            raise NoAsyncCallError(f"Calling `{kind}_wait` without any prior call to `{kind}_async`.", kind)
        try:
            out = receive()
        except WaitTimeout:  # still pending: the envs stay in flight
            raise multiprocessing.TimeoutError(
                f"The call to `{kind}_wait` has timed out after {timeout} second(s).") from None
        except BaseException:
            self._pending = None
            raise
        self._pending = None
        return out

    def _refuse_pending(self, caller: str) -> None:
        if self._pending is not None:
            raise AlreadyPendingCallError(
                f"Calling `{caller}` while waiting for a pending call to `{self._pending}` to complete",
                str(self._pending))

    def _seed_batched_spaces(self) -> None:
        """Seed the batched spaces as the pool seeded its single ones (its first env's seed)."""
        if self.pool.space_seed is not None:
            self.action_space.seed(self.pool.space_seed)
            self.observation_space.seed(self.pool.space_seed)

    def step(self, actions: Any):
        """Step all envs with one batched action (the pool's own sync step: no pending call is
        recorded between the halves, which `step_async`/`step_wait` need)."""
        self._refuse_pending("step_async")
        return self._gym_step(self.pool.step(actions))

    def step_async(self, actions: Any) -> None:
        """Start stepping every env (AsyncVectorEnv's spelling): the envs in workers step
        while the caller does something else; collect the results with `step_wait`."""
        self._refuse_pending("step_async")
        self.pool.send(actions)
        self._pending = "step"

    def step_wait(self, timeout: float | None = None, **kwargs: Any):
        """The results of `step_async`; `multiprocessing.TimeoutError` after `timeout` seconds
        (the step goes on: call again)."""
        return self._gym_step(self._collect("step", lambda: self.pool.recv(timeout), timeout))

    def _gym_step(self, out: tuple) -> tuple:
        """A pool step's results as gymnasium's vector envs return them."""
        obs, rew, term, trunc, info = out
        if "final_obs" in info:  # same-step autoreset
            final = info.pop("final_obs")
            done = term | trunc
            if done.any():
                # As SyncVectorEnv: each ended env's last observation, batched by gymnasium's
                # own rule (an object array), and a final_info for each, empty or not.
                space = self.pool.single_observation_space
                ended = [(i, {"final_obs": _element(space, final, i)}) for i in np.flatnonzero(done).tolist()]
                info.update(batch_infos(ended, self.num_envs))
                info.setdefault("final_info", {})
                info["_final_info"] = done
        return obs, rew, term, trunc, self._own(info)

    def _own(self, info: dict[str, Any]) -> dict[str, Any]:
        """The info gymnasium returns: without the pool's bookkeeping unless asked for."""
        if not self.engine_info:
            for key in _POOL_KEYS:
                info.pop(key, None)
        return info

    # -- per-env calls, run where each env lives (see seedpool/envs/calls.py) ----------------
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each env's attribute `name` (through its wrappers), called with the arguments if callable."""
        return tuple(self.pool.env_call(calls.call_attr, name, args, kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Each env's attribute `name`, looked up through its wrappers."""
        return tuple(self.pool.env_call(calls.get_attr, name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set `name` on every env: one value for all, or a list or tuple of one per env."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"values must be a list or tuple of one value per env ({self.num_envs}), "
                             f"got {len(values)}")
        self.pool.env_call_each(calls.set_attr, [(name, v) for v in values])

    def render(self) -> tuple[Any, ...] | None:
        """Each env's `render()` (its frame for render_mode='rgb_array')."""
        return tuple(self.pool.env_call(calls.render))

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """Each env's `np_random_seed`, as gymnasium's vector envs report it."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[Any, ...]:
        """Each env's `np_random` generator (copies, for envs in worker processes)."""
        return self.get_attr("np_random")

    def __repr__(self) -> str:
        """The pool's repr: its backend and, when `auto` chose it, why."""
        return f"{type(self).__name__}({self.pool!r})"

    def close_extras(self, **kwargs: Any) -> None:
        """Close the pool (workers and envs), saying so if a call was still pending."""
        if self._pending is not None:
            warnings.warn(f"Calling `close` while waiting for a pending call to `{self._pending}` to complete.",
                          stacklevel=3)
        self.pool.close()


def _element(space: gym.Space, batch: Any, i: int) -> Any:
    """Env i's element of a batch of `space` (gymnasium's `iterate` knows no Graph)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: _element(s, batch[k], i) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_element(s, b, i) for s, b in zip(space.spaces, batch))
    return batch[i]  # a row of an array, or an object of a tuple over the envs


def make_vec(task: Any, num_envs: int | None = None, engine_info: bool = False,
             seed: int | list[int | None] | None = None, **kwargs: Any) -> SeedpoolVectorEnv:
    """`seedpool.make(...)` wrapped as a gymnasium VectorEnv (synchronous).

    `task` is an id, one env factory for every env, or, as `SyncVectorEnv(env_fns)` takes
    it, a list of zero-argument callables, env i built by `env_fns[i]` with its wrappers
    (in its worker, for worker processes). Every entry of the envs' `info` comes back batched
    as gymnasium batches it, and nothing else unless `engine_info=True` (the pool's env_id,
    elapsed_step, episode_return, episode_length). Seeding is gymnasium's: by default
    (`seed=None`) nothing is seeded until `reset(seed=...)`, which gives env i `seed + i` and
    seeds the spaces; `seed=s` seeds the envs' first reset and the spaces as `seedpool.make`
    does. `call`, `get_attr`, `set_attr` and `render` reach each env where it lives, on every
    backend.
    """
    n = env_count(task, num_envs)
    if kwargs.get("batch_size") not in (None, n):
        raise ValueError("make_vec builds a synchronous VectorEnv: batch_size must equal num_envs")
    pool = make(task, num_envs=num_envs, seed=seed, **kwargs)
    pool.engine_counts = engine_info  # its own pool: the counts it would drop are not computed
    return SeedpoolVectorEnv(pool, engine_info=engine_info)


__all__ = ["make_vec", "SeedpoolVectorEnv"]
