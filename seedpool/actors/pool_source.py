"""An engine pool as an inference `Source`, in a module that imports no torch.

A Ray actor group runs this and nothing of the inference server, so its process starts
without loading torch (a group restarted on another node is stepping again sooner).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from seedpool.actors.actions import env_actions
from seedpool.actors.episodes import EpisodeTracker
from seedpool.envs.pool import EnvPool
from seedpool.records import EnvBatch


class SourceRetired(Exception):
    """Raised by a source's `recv` when it has no envs left to give (a Ray actor group lost for good):
    its actor loop ends quietly and the other sources go on."""


class PoolSource:
    """An engine pool in async mode (batch_size < num_envs) as an inference `Source`."""

    def __init__(self, pool: EnvPool) -> None:
        if not pool.is_async:
            raise ValueError(f"a SEED source needs an async pool (batch_size < num_envs), got {pool!r}")
        self.pool = pool
        self.num_envs = pool.num_envs
        self.batch_size = pool.batch_size
        self.episodes = EpisodeTracker(pool.num_envs)  # whole Atari games across lives

    @property
    def single_observation_space(self) -> gym.Space:
        """One env's observation space."""
        return self.pool.single_observation_space

    @property
    def single_action_space(self) -> gym.Space:
        """One env's action space."""
        return self.pool.single_action_space

    def start(self) -> None:
        """Reset every env; the first recv returns reset observations."""
        self.pool.async_reset()

    def recv(self) -> EnvBatch:
        """The next batch of envs that finished a step."""
        obs, rew, term, trunc, info = self.pool.recv()
        restarted = info.get("restarted")
        env_ids = info["env_id"].astype(np.int64)
        done, returns, lengths = self.episodes.finished(term, trunc, info, env_ids)
        return EnvBatch(
            env_ids=env_ids, obs=obs, rewards=rew, terminated=term, truncated=trunc,
            restarted=np.zeros(len(rew), bool) if restarted is None else restarted,
            episode_done=done, episode_returns=returns, episode_lengths=lengths,
        )

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        """Step those envs with those actions (Box actions clipped to the bounds)."""
        self.pool.send(env_actions(actions, self.pool.single_action_space), env_ids)

    def worker_restarts(self) -> int:
        """Dead env workers replaced so far."""
        return self.pool.worker_restarts

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()
