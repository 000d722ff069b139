"""One MinAtar game as a gymnasium env with channels-first observations."""

from __future__ import annotations

import colorsys
from typing import Any

import gymnasium as gym
import numpy as np
# The top-level minatar package (this module is seedpool.envs.families.minatar.env).
from minatar import Environment

_CELL_PIXELS = 16  # rendered size of one grid cell: 160x160 frames suit video encoders


class MinAtarEnv(gym.Env):
    """A MinAtar game whose observations are ``bool [C, 10, 10]``, minatar's grid transposed.

    Observations stay bool, as minatar returns them: one byte per cell like uint8, and the
    dtype tells them apart from uint8 pixel frames (seedpool's Q networks pick MinAtar's small
    CNN for 3-D bool observations, the Nature CNN for 3-D uint8). Dynamics, sticky actions and
    seeding are minatar's own: ``reset(seed=s)`` reseeds the game's RandomState with ``s``,
    exactly as ``minatar.gym``'s envs do, so both give the same episodes for the same seed.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, game: str, minimal_action_set: bool = True, sticky_action_prob: float = 0.1,
                 difficulty_ramping: bool = True, render_mode: str | None = None) -> None:
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"MinAtar envs render 'rgb_array' (or None), got render_mode={render_mode!r}")
        self.game = Environment(game, sticky_action_prob=sticky_action_prob,
                                difficulty_ramping=difficulty_ramping)
        self.render_mode = render_mode
        self._actions = list(self.game.minimal_action_set()) if minimal_action_set \
            else list(range(self.game.num_actions()))
        height, width, channels = self.game.state_shape()
        self.observation_space = gym.spaces.Box(0, 1, (channels, height, width), np.bool_)
        self.action_space = gym.spaces.Discrete(len(self._actions))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode; a seed reseeds the game (and its sticky actions)."""
        super().reset(seed=seed)
        if seed is not None:
            self.game.seed(seed)
        self.game.reset()
        return self._observation(), {}

    def step(self, action):
        """Act; MinAtar never truncates (Freeway's time limit is a termination in minatar)."""
        reward, terminated = self.game.act(self._actions[int(action)])
        return self._observation(), float(reward), bool(terminated), False, {}

    def render(self) -> np.ndarray | None:
        """An RGB frame ``[160, 160, 3]``: each cell coloured by its highest set channel."""
        if self.render_mode != "rgb_array":
            return None
        grid = self.game.state()
        channels = grid.shape[-1]
        layer = (grid * np.arange(1, channels + 1)).max(axis=-1)  # 0: empty, as minatar draws it
        image = _palette(channels)[layer]
        return image.repeat(_CELL_PIXELS, axis=0).repeat(_CELL_PIXELS, axis=1)

    def _observation(self) -> np.ndarray:
        return np.ascontiguousarray(self.game.state().transpose(2, 0, 1))


def _palette(channels: int) -> np.ndarray:
    """uint8 colours ``[channels + 1, 3]``: black for empty cells, then evenly spaced hues."""
    hues = [colorsys.hsv_to_rgb(k / channels, 0.7, 1.0) for k in range(channels)]
    return (np.array([(0.0, 0.0, 0.0), *hues]) * 255).astype(np.uint8)
