"""An actor group: one engine pool on a Ray node that exchanges whole batches with the driver.

`ActorGroup` is plain Python; `seedpool.distributed.launch` makes it a Ray actor with
`ray.remote`, so the same object also runs (and is tested) in one process. Each call
carries one batch: a `recv` result out, the actions of an earlier batch in.
"""
from __future__ import annotations

import collections
import os
import pickle
import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import seedpool
from seedpool.actors.pool_source import PoolSource


@dataclass
class GroupInfo:
    """What the driver learns from a group once its pool is built."""

    num_envs: int
    batch_size: int
    observation_space: gym.Space
    action_space: gym.Space
    node_id: str
    """The Ray node it runs on (hex id; empty outside Ray)."""
    pid: int
    restarted: bool
    """This is a restarted life of the group (Ray re-ran the constructor)."""


class ActorGroup:
    """One engine pool in async mode; `exchange` answers the oldest open batch and returns the next one.

    Batches leave pickled into one bytes object: Ray moves a bytes object with less work per
    message than a record of nine arrays, and the per-message cost is what limits a group
    of cheap envs. Actions come back in the order the batches left, so their env ids stay here.
    """

    def __init__(self, make_kwargs: dict[str, Any], seed: int) -> None:
        self.node_id, self.restarted = _ray_place()
        if self.restarted:
            # Fresh seeds, so that the envs of a restarted group do not replay the run's first episodes.
            seed = int(np.random.SeedSequence().generate_state(1)[0] % 2**30)
        self.source = PoolSource(seedpool.make(**make_kwargs, seed=seed))
        self._open: collections.deque[np.ndarray] = collections.deque()  # env ids of batches sent out

    def ready(self) -> GroupInfo:
        """The pool's shape and where it runs (the driver's first call: it waits for placement)."""
        s = self.source
        return GroupInfo(s.num_envs, s.batch_size, s.single_observation_space, s.single_action_space,
                         self.node_id, os.getpid(), self.restarted)

    def start(self) -> None:
        """Start (reset) every env."""
        self.source.start()

    def recv(self) -> bytes:
        """The next batch of envs that finished a step and the pool's env workers restarted so
        far, as pickled ``(EnvBatch, int)``."""
        batch = self.source.recv()
        self._open.append(batch.env_ids)
        return pickle.dumps((batch, self.source.worker_restarts()), protocol=pickle.HIGHEST_PROTOCOL)

    def exchange(self, actions: np.ndarray) -> bytes:
        """Step the envs of the oldest open batch with these actions, then `recv` (one message each way)."""
        env_ids = self._open.popleft()
        if len(actions) != len(env_ids):
            raise ValueError(f"{len(actions)} actions for a batch of {len(env_ids)} envs")
        self.source.send(actions, env_ids)
        return self.recv()

    def close(self) -> None:
        """Close the pool (its worker processes exit)."""
        self.source.close()


def _ray_place() -> tuple[str, bool]:
    """(node id, restarted by Ray) when running as a Ray actor; ("", False) in a plain process."""
    try:
        import ray
    except ImportError:
        return "", False
    if not ray.is_initialized():
        return "", False
    ctx = ray.get_runtime_context()
    if ctx.get_actor_id() is None:
        return ctx.get_node_id(), False
    with warnings.catch_warnings():  # Ray's property reads its own deprecated attribute
        warnings.simplefilter("ignore", DeprecationWarning)
        return ctx.get_node_id(), bool(ctx.was_current_actor_reconstructed)
