"""Partially observed envs for the recurrent-policy tests, reachable as ``--env pomdp_envs:ID``.

Importing this module registers them with gymnasium (``gymnasium.make("pomdp_envs:CartPoleNoVel-v0")``
imports it first), so every trainer reaches them the way it reaches a user's own env.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class CartPoleNoVelocity(CartPoleEnv):
    """CartPole-v1 that shows only the cart position and the pole angle: the velocities must be
    remembered (inferred from successive observations), so a feed-forward policy cannot balance it."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        high = self.observation_space.high[[0, 2]]
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = super().reset(seed=seed, options=options)
        return obs[[0, 2]], info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[[0, 2]], reward, terminated, truncated, info


if "CartPoleNoVel-v0" not in gym.registry:
    gym.register("CartPoleNoVel-v0", entry_point=CartPoleNoVelocity, max_episode_steps=500, reward_threshold=475.0)
