"""What feeds the inference server: a small Protocol any group of envs can satisfy.

Locally a source wraps one engine pool in async mode (`seedpool.actors.seed`); later a
Ray actor group on another node satisfies the same Protocol, one message per batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class EnvBatch:
    """One `recv` from a source: the envs that finished stepping, in completion order."""

    env_ids: np.ndarray
    """The source's own env ids, int64 [n]."""
    obs: np.ndarray
    """[n, *obs_shape]."""
    rewards: np.ndarray
    """float32 [n]."""
    terminated: np.ndarray
    """bool [n]."""
    truncated: np.ndarray
    """bool [n]."""
    restarted: np.ndarray
    """bool [n]: the env was reset because its worker died (its trajectory is cut)."""
    episode_done: np.ndarray
    """bool [n]: an episode as users count it ended on this row (Atari: the whole game, not a life)."""
    episode_returns: np.ndarray
    """float64 [n]: return of the episode that ended on this row (valid where episode_done)."""
    episode_lengths: np.ndarray
    """int64 [n]: length of the episode that ended on this row (valid where episode_done)."""


class Source(Protocol):
    """A group of envs stepped elsewhere: recv a batch, send its actions back."""

    num_envs: int

    def start(self) -> None:
        """Start every env (the first recv returns reset observations)."""

    def recv(self) -> EnvBatch:
        """Block until the next batch of envs has finished a step."""

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        """Step exactly the envs of the last batch with these actions."""

    def worker_restarts(self) -> int:
        """How many env workers have died and been restarted so far."""

    def close(self) -> None:
        """Release the envs (no child process left behind)."""
