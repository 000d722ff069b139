"""What feeds the inference server: a small Protocol any group of envs can satisfy.

Locally a source wraps one engine pool in async mode (`seedpool.actors.actor_loop`); later a
Ray actor group on another node satisfies the same Protocol, one message per batch.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from seedpool.records import EnvBatch


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
