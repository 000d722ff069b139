"""`make_vec`: the engine as a `gymnasium.vector.VectorEnv`, for existing Gymnasium code."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from seedpool.envs.make import make
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
        self.observation_space = pool.observation_space
        self.action_space = pool.action_space
        mode = AutoresetMode.SAME_STEP if pool.autoreset == "same_step" else AutoresetMode.NEXT_STEP
        self.metadata = {"autoreset_mode": mode}
        self.render_mode = None

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs; env i gets seed + i."""
        return self.pool.reset(seed=seed, options=options)

    def step(self, actions: Any):
        """Step all envs with one batched action."""
        obs, rew, term, trunc, info = self.pool.step(actions)
        if "final_obs" in info:
            info["_final_obs"] = term | trunc
        return obs, rew, term, trunc, info

    def close_extras(self, **kwargs: Any) -> None:
        """Close the pool (workers and envs)."""
        self.pool.close()


def make_vec(task: Any, num_envs: int = 1, **kwargs: Any) -> SeedpoolVectorEnv:
    """`seedpool.make(...)` wrapped as a gymnasium VectorEnv (synchronous)."""
    if kwargs.get("batch_size") not in (None, num_envs):
        raise ValueError("make_vec builds a synchronous VectorEnv: batch_size must equal num_envs")
    return SeedpoolVectorEnv(make(task, num_envs=num_envs, **kwargs))


__all__ = ["make_vec", "SeedpoolVectorEnv"]
