"""What feeds the inference server: a small Protocol any group of envs can satisfy.

Two kinds satisfy it today, and the server, the actor loops and the learner do not know
which one they are fed by:

- `seedpool.actors.pool_source.PoolSource`: one engine pool in async mode on this machine
  (`recv` is the pool's next batch); `seedpool.runners.acting.make_sources` builds them.
- `seedpool.distributed.source.RayGroupSource` (with ``--ray-address``): an actor group on
  a Ray node holding one engine pool, one message per batch, two batches in flight.

Each `seedpool.actors.actor_loop.ActorLoop` drives one source. Beyond this Protocol,
`seedpool.runners.central.CentralSystem` reads a source's ``batch_size`` and
``single_observation_space`` / ``single_action_space``. A source whose envs are gone for
good raises `seedpool.actors.pool_source.SourceRetired` from `recv`: its actor loop ends
and the other sources go on.
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
