"""What a policy reads of a pool whose observations are a Dict (EnvPool's MiniGrid and dm_control faces).

seedpool's networks and buffers take one array per step, so a Dict observation is turned into
one, the same way in training and in `seedpool eval` (`policy_view`):

- exactly one part is an image (uint8, three axes): that image alone, as the env gives it.
  MiniGrid's ``image`` is the agent's egocentric 7x7 view, [H, W, 3] codes of object, colour
  and state; its ``direction`` and ``mission`` are left out, as rl-starter-files' models leave
  them (the mission of a DoorKey or Empty task never changes; a BabyAI mission would need a
  text encoder, which seedpool has not);
- otherwise every part, flattened and concatenated in the Dict's order as float32 (a Discrete
  part one-hot): dm_control's ``position``, ``velocity``, ... as one state vector, as the
  DrQ/SAC-state baselines flatten dm_control's observation.

The pool a user hands in is never changed: the view holds it and converts what it returns.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.errors import ConfigError


def policy_view(pool: Any) -> Any:
    """``pool`` itself when its observations are one array, else a `DictObservations` over it."""
    if isinstance(pool.single_observation_space, gym.spaces.Dict):
        return DictObservations(pool)
    return pool


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


class DictObservations:
    """A pool with Dict observations behind the one-array pool API (see the module docstring)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        parts = dict(pool.single_observation_space.spaces)
        images = [key for key, space in parts.items() if _is_image(space)]
        for key, space in parts.items():
            if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
                raise ConfigError(f"the policy reads Box and Discrete parts of a Dict observation; "
                                  f"part {key!r} is {space}")
        if len(images) == 1:
            self.keys: tuple[str, ...] = (images[0],)
            self.single_observation_space = parts[images[0]]
            self._image = True
        else:
            self.keys = tuple(parts)
            self._sizes = {k: int(s.n) if isinstance(s, gym.spaces.Discrete) else int(np.prod(s.shape))
                           for k, s in parts.items()}
            self._discrete = {k: (int(s.start), int(s.n)) for k, s in parts.items()
                              if isinstance(s, gym.spaces.Discrete)}
            width = sum(self._sizes.values())
            self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
            self._image = False
        self.single_action_space = pool.single_action_space
        self.num_envs, self.batch_size, self.is_async = pool.num_envs, pool.batch_size, pool.is_async

    def convert(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """A batch of Dict observations as the policy reads them (``[B, ...]``)."""
        if self._image:
            return obs[self.keys[0]]
        n = len(obs[self.keys[0]])
        out = np.empty((n, self.single_observation_space.shape[0]), np.float32)
        col = 0
        for key in self.keys:
            width = self._sizes[key]
            if key in self._discrete:
                start, _ = self._discrete[key]
                block = out[:, col:col + width]
                block[:] = 0.0
                block[np.arange(n), np.asarray(obs[key]).astype(np.int64) - start] = 1.0
            else:
                out[:, col:col + width] = np.asarray(obs[key]).reshape(n, width)
            col += width
        return out

    def reset(self, *args: Any, **kwargs: Any):
        obs, info = self.pool.reset(*args, **kwargs)
        return self.convert(obs), info

    def step(self, action: Any, env_id: Any = None):
        obs, rew, term, trunc, info = self.pool.step(action, env_id)
        return self.convert(obs), rew, term, trunc, info

    def async_reset(self) -> None:
        self.pool.async_reset()

    def send(self, action: Any, env_id: Any = None) -> None:
        self.pool.send(action, env_id)

    def recv(self, *args: Any, **kwargs: Any):
        obs, rew, term, trunc, info = self.pool.recv(*args, **kwargs)
        return self.convert(obs), rew, term, trunc, info

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "DictObservations":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._image:
            return f"{self.pool!r}, the policy reading its {self.keys[0]!r}"
        return f"{self.pool!r}, the policy reading {'+'.join(self.keys)} as one float32 vector"
