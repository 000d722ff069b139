"""Policy actions as the env takes them."""
from __future__ import annotations

import gymnasium as gym
import numpy as np


def env_actions(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Box actions clipped to the space's bounds; other actions unchanged.

    Gaussian policies are unbounded: the env gets the clipped action, while trajectories
    keep the unclipped one so that log-probabilities stay exact.
    """
    if isinstance(space, gym.spaces.Box):
        return np.clip(actions, space.low, space.high)
    return actions
