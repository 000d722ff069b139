"""`make_vec`: the engine as a `gymnasium.vector.VectorEnv`, for existing Gymnasium code."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from seedpool.envs.make import env_count, make
from seedpool.envs.pool import EnvPool


class SeedpoolVectorEnv(gym.vector.VectorEnv):
    """A synchronous VectorEnv backed by an EnvPool (any backend)."""

    def __init__(self, pool: EnvPool):
        if pool.is_async:
            raise ValueError("a VectorEnv is synchronous: build the pool without batch_size < num_envs")
        self.pool = pool
        self.num_envs = pool.num_envs
        self.single_observation_space = pool.single_observation_space
        self.single_action_space = pool.single_action_space
        # Gymnasium's batched spaces (the pool's own follow EnvPool: the single env's).
        self.observation_space = gym.vector.utils.batch_space(pool.single_observation_space, pool.num_envs)
        self.action_space = gym.vector.utils.batch_space(pool.single_action_space, pool.num_envs)
        mode = AutoresetMode.SAME_STEP if pool.autoreset == "same_step" else AutoresetMode.NEXT_STEP
        self.metadata = {"autoreset_mode": mode}
        self.render_mode = None
        self._seed_batched_spaces()

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs; env i gets seed + i, and the spaces are seeded again from `seed`."""
        out = self.pool.reset(seed=seed, options=options)
        if seed is not None:
            self._seed_batched_spaces()
        return out

    def _seed_batched_spaces(self) -> None:
        """Seed the batched spaces as the pool seeded its single ones (its first env's seed)."""
        if self.pool.space_seed is not None:
            self.action_space.seed(self.pool.space_seed)
            self.observation_space.seed(self.pool.space_seed)

    def step(self, actions: Any):
        """Step all envs with one batched action."""
        obs, rew, term, trunc, info = self.pool.step(actions)
        if "final_obs" in info:
            done = term | trunc
            info["_final_obs"] = done
            if done.any():  # SyncVectorEnv gives every ended env a final_info, empty or not
                info.setdefault("final_info", {})
                info["_final_info"] = done
        return obs, rew, term, trunc, info

    def close_extras(self, **kwargs: Any) -> None:
        """Close the pool (workers and envs)."""
        self.pool.close()


def make_vec(task: Any, num_envs: int | None = None, **kwargs: Any) -> SeedpoolVectorEnv:
    """`seedpool.make(...)` wrapped as a gymnasium VectorEnv (synchronous).

    `task` is an id, one env factory for every env, or, as `SyncVectorEnv(env_fns)` takes
    it, a list of zero-argument callables, env i built by `env_fns[i]` with its wrappers
    (in its worker, for worker processes). Every entry of the envs' `info` comes back batched
    as gymnasium batches it; spaces are seeded from `seed` (and again by `reset(seed=...)`).
    """
    n = env_count(task, num_envs)
    if kwargs.get("batch_size") not in (None, n):
        raise ValueError("make_vec builds a synchronous VectorEnv: batch_size must equal num_envs")
    return SeedpoolVectorEnv(make(task, num_envs=num_envs, **kwargs))


__all__ = ["make_vec", "SeedpoolVectorEnv"]
