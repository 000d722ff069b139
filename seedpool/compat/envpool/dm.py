"""`envpool.make_dm(...)`: a seedpool pool behind dm_env's `TimeStep` API (Acme-style code).

The pool autoresets as EnvPool does (the step after an episode's last starts the next), so
the TimeStep of that step is FIRST; `discount` is the env's `info["discount"]` where it
reports one (Atari, as EnvPool's), else 0 where the episode terminated and 1 elsewhere. `observation` is a named tuple: the env's
observation under `obs` (a Dict observation's keys as fields of their own, after the ids, as
EnvPool's), then `env_id`, `players.env_id` and the pool's info entries.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

import dm_env
import numpy as np

from seedpool.compat.envpool.actions import cast_discrete
from seedpool.compat.envpool.spec import EnvSpec, Players
from seedpool.envs.pool import EnvPool


class DMPool(dm_env.Environment):
    """dm_env's API on a seedpool pool: reset/step give batched `TimeStep`s; send/recv too."""

    def __init__(self, pool: EnvPool, spec: EnvSpec):
        """Wrap `pool` (built by `make_dm`, which owns it: close() closes it)."""
        self.pool = pool
        self.spec = spec
        self._first = np.zeros(pool.num_envs, np.bool_)  # reset sent: the next row is FIRST
        self._ended = np.zeros(pool.num_envs, np.bool_)  # last row ended an episode
        self._types: dict[tuple[str, ...], Any] = {}  # info keys -> observation named tuple

    # -- dm_env.Environment -------------------------------------------------------------------
    def reset(self, env_id: Any = None) -> dm_env.TimeStep:
        """Reset every env (or those of `env_id`); a TimeStep of FIRST steps."""
        self._mark_reset(env_id)
        obs, info = self.pool.reset(env_id)
        n = len(info["env_id"])
        return self._timestep(obs, np.zeros(n, np.float32), np.zeros(n, np.bool_), np.zeros(n, np.bool_), info)

    def step(self, action: Any, env_id: Any = None) -> dm_env.TimeStep:
        """send(action, env_id) then recv()."""
        self.send(action, env_id)
        return self.recv()

    def observation_spec(self) -> Any:
        """dm_env's observation spec (the observation is under `.obs`)."""
        return self.spec.observation_spec()

    def action_spec(self) -> Any:
        """dm_env's spec of one action."""
        return self.spec.action_spec()

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()

    # -- EnvPool's async API and attributes ----------------------------------------------------
    def async_reset(self) -> None:
        """Start resetting every env; recv() gives the FIRST steps."""
        self._mark_reset(None)
        self.pool.async_reset()

    def send(self, action: Any, env_id: Any = None) -> None:
        """Step `env_id` (default all) with `action`, or with EnvPool's action dict
        ({"action": ..., "env_id": ..., "players.env_id": ...}); integer-valued float
        actions for a Discrete space are cast, as EnvPool casts them (actions.py)."""
        if isinstance(action, dict):
            self._check_raw(action)
            env_id = action.get("env_id", env_id)
            action = action["action"]
        self.pool.send(cast_discrete(self.pool.single_action_space, action), env_id)

    def _check_raw(self, action: dict[str, Any]) -> None:
        """EnvPool's action dict is its engine's raw layout: each array has the dtype of its
        array spec exactly (EnvPool raises RuntimeError otherwise; no cast is guessed)."""
        for key, spec in self.spec.action_array_spec.items():
            if key in action and not isinstance(spec, (dict, tuple)):
                got = np.asarray(action[key]).dtype
                if got != spec.dtype:
                    raise RuntimeError(f"action[{key!r}] must have dtype {spec.dtype} (EnvPool's raw "
                                       f"action layout), got {got}; or pass the action array alone")

    def recv(self) -> dm_env.TimeStep:
        """The next batch of results as a TimeStep."""
        obs, rew, term, trunc, info = self.pool.recv()
        return self._timestep(obs, rew, term, trunc, info)

    def seed(self, seed: Any = None) -> None:
        """As in EnvPool: seeds are given to make(); this only warns."""
        warnings.warn("seed() does nothing: pass seed=... to make_dm(...), as in EnvPool", stacklevel=2)

    def xla(self) -> Any:
        """EnvPool's JAX hook: not available (see seedpool's EnvPool.xla)."""
        return self.pool.xla()

    def __len__(self) -> int:
        return self.pool.num_envs

    @property
    def config(self) -> dict[str, Any]:
        """The pool's settings and task options."""
        return self.pool.config

    @property
    def is_async(self) -> bool:
        """Whether batch_size < num_envs."""
        return self.pool.is_async

    @property
    def all_env_ids(self) -> np.ndarray:
        """Every env id, as int32."""
        return np.arange(self.pool.num_envs, dtype=np.int32)

    def __repr__(self) -> str:
        return f"DMEnvPool({self.pool!r})"

    # -- internals -----------------------------------------------------------------------------
    def _mark_reset(self, env_id: Any) -> None:
        ids = slice(None) if env_id is None else np.asarray(env_id, dtype=np.int64)
        self._first[ids] = True

    def _timestep(self, obs: Any, rew: np.ndarray, term: np.ndarray, trunc: np.ndarray,
                  info: dict[str, Any]) -> dm_env.TimeStep:
        ids = info["env_id"].astype(np.int64)
        first = self._first[ids] | self._ended[ids]
        ended = np.logical_or(term, trunc)
        self._first[ids] = False
        self._ended[ids] = ended
        step_type = np.where(first, dm_env.StepType.FIRST,
                             np.where(ended, dm_env.StepType.LAST, dm_env.StepType.MID)).astype(np.int32)
        # An env that reports EnvPool's discount (seedpool's Atari: 0 at any episode end, the
        # time limit included) gives it; otherwise 0 where the episode terminated.
        given = info.get("discount")
        discount = (np.asarray(given, np.float32) if given is not None
                    else (~np.asarray(term, np.bool_)).astype(np.float32))
        return dm_env.TimeStep(step_type, np.asarray(rew, np.float32), discount, self._observation(obs, info))

    def _observation(self, obs: Any, info: dict[str, Any]) -> Any:
        """obs, env_id, players.env_id, then the info entries whose names can be fields
        (not gymnasium's `_key` masks of which envs reported `key`: a field cannot start with _)."""
        env_id = info["env_id"].astype(np.int32)
        # A Dict observation's keys are fields of their own, after the ids, as in EnvPool's State.
        keys = tuple(obs) if isinstance(obs, dict) else ()
        extra = tuple(k for k in info if k.isidentifier() and not k.startswith("_")
                      and k not in ("obs", "env_id", "players", *keys))
        kind = self._types.get(keys + extra)
        if kind is None:
            names = ("env_id", "players", *keys) if keys else ("obs", "env_id", "players")
            kind = self._types[keys + extra] = collections.namedtuple("State", (*names, *extra), rename=True)
        if keys:
            return kind(env_id, Players(env_id), *obs.values(), *(info[k] for k in extra))
        return kind(obs, env_id, Players(env_id), *(info[k] for k in extra))
