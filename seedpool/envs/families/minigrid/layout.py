"""EnvPool's face of MiniGrid: its observation space and mission bytes, and the wrapper that
gives a `minigrid` package env that face (the Python-env path, `native=False`).

EnvPool (1.2.5) returns a Dict of `direction` (int32), `image` (uint8 [V, V, 3], MiniGrid's
encoding) and `mission`: the mission string's UTF-8 bytes, zero-padded to `mission_bytes`
(96 for MiniGrid ids, 512 for BabyAI's). At the step that reaches `max_steps` it reports a
truncation, not a termination, even where the agent reached its goal on it (the reward is
kept); the package reports both. docs/compat.md lists these differences.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def observation_space(view: int, mission_bytes: int) -> gym.spaces.Dict:
    """EnvPool's MiniGrid observation space, with int32 directions as its arrays hold them."""
    return gym.spaces.Dict({
        "direction": gym.spaces.Discrete(4, dtype=np.int32),
        "image": gym.spaces.Box(0, 255, (view, view, 3), np.uint8),
        "mission": gym.spaces.Box(0, 255, (mission_bytes,), np.uint8),
    })


def encode_mission(text: str, mission_bytes: int) -> np.ndarray:
    """A mission as EnvPool holds it: UTF-8, zero-padded (cut at `mission_bytes`)."""
    out = np.zeros(mission_bytes, np.uint8)
    raw = np.frombuffer(text.encode("utf-8"), np.uint8)[:mission_bytes]
    out[: len(raw)] = raw
    return out


def decode_mission(mission: np.ndarray) -> str | np.ndarray:
    """EnvPool's `decode_mission`: the string of one mission row, or an object array of them."""
    arr = np.asarray(mission, np.uint8)
    if arr.ndim == 1:
        zero = np.flatnonzero(arr == 0)
        return arr[: int(zero[0]) if zero.size else arr.size].tobytes().decode("utf-8")
    return np.array([decode_mission(row) for row in arr], dtype=object)


class EnvPoolLayout(gym.Wrapper):
    """A `minigrid` package env with EnvPool's observations and time-limit rule."""

    def __init__(self, env: gym.Env, mission_bytes: int):
        super().__init__(env)
        view = env.unwrapped.agent_view_size
        self.mission_bytes = mission_bytes
        self.observation_space = observation_space(view, mission_bytes)
        self._mission: tuple[str, np.ndarray] = ("", encode_mission("", mission_bytes))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated:  # EnvPool: the time limit's step is a truncation
            terminated = False
        return self._observation(obs), float(reward), bool(terminated), bool(truncated), info

    def _observation(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        text = obs["mission"]
        if text != self._mission[0]:
            self._mission = (text, encode_mission(text, self.mission_bytes))
        return {"direction": np.int32(obs["direction"]), "image": obs["image"], "mission": self._mission[1]}
