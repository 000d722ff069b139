"""The lockstep round both replay samplers share: every env stepped ``num_steps`` times, as Unrolls.

It steps all envs in lockstep (the engine's sync mode) and hands back the steps in the same
time-major record the central-inference system cuts (:class:`~seedpool.records.Unrolls`, one
unroll per env), so one replay learner inserts every sampler's experience. The engine's
``autoreset="next_step"`` contract holds as in the rollout samplers: the step after an
episode end is a reset whose action is ignored, stored with ``valid=False``. Subclasses say
only how actions are chosen (`act`) and, optionally, who sees each observation (`seen`).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from seedpool.actors.episodes import EpisodeTracker
from seedpool.models.precision import Precision
from seedpool.records import Episode, Unrolls
from seedpool.timing import PhaseTimer


class LockstepSampler:
    """``collect()`` -> (Unrolls of ``num_steps`` x num_envs, finished episodes)."""

    def __init__(self, pool, num_steps: int, action_shape: tuple[int, ...], action_dtype: type,
                 device: str | torch.device, timer: PhaseTimer | None, seed: int, precision: Precision) -> None:
        self.pool, self.T, self.device, self.precision = pool, num_steps, torch.device(device), precision
        self.B = pool.num_envs
        self.action_shape, self.action_dtype = action_shape, action_dtype
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(self.B)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.env_steps = 0
        space = pool.single_observation_space
        self._obs = np.zeros((num_steps + 1, self.B, *space.shape), space.dtype)
        self.next_obs: np.ndarray | None = None
        self.next_valid = np.ones(self.B, dtype=bool)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the actions to store, the actions the envs get) for a batch of observations."""
        raise NotImplementedError

    def seen(self, obs: np.ndarray) -> None:
        """Called with every observation the envs return (nothing by default)."""

    def start(self) -> None:
        """Reset every env (the pool's seeds apply)."""
        t0 = time.perf_counter()
        self.next_obs, _ = self.pool.reset()
        self.next_valid[:] = True
        self.seen(self.next_obs)
        self.timer.add("env", time.perf_counter() - t0)

    def collect(self) -> tuple[Unrolls, list[Episode]]:
        """Step every env ``num_steps`` times; returns the steps and the episodes that ended."""
        if self.next_obs is None:
            self.start()
        T, B = self.T, self.B
        actions = np.zeros((T, B, *self.action_shape), self.action_dtype)
        rewards = np.zeros((T, B), np.float32)
        terminated = np.zeros((T, B), bool)
        truncated = np.zeros((T, B), bool)
        valid = np.zeros((T, B), bool)
        episodes: list[Episode] = []
        infer_s = env_s = 0.0
        obs = self.next_obs
        for t in range(T):
            t0 = time.perf_counter()
            self._obs[t] = obs
            valid[t] = self.next_valid
            stored, env_action = self.act(obs)
            t1 = time.perf_counter()
            obs, rew, term, trunc, info = self.pool.step(env_action)
            t2 = time.perf_counter()
            self.seen(obs)
            actions[t], rewards[t], terminated[t], truncated[t] = stored, rew, term, trunc
            self.env_steps += B
            self.next_valid = ~(term | trunc)
            episodes += self.episodes.update(self.env_steps, term, trunc, info)
            infer_s += t1 - t0
            env_s += t2 - t1
        self._obs[T] = obs
        self.next_obs = obs
        self.timer.add("inference", infer_s)
        self.timer.add("env", env_s)
        zeros = np.zeros((T, B), np.int64)
        return Unrolls(obs=self._obs.copy(), actions=actions, logp=np.zeros((T, B), np.float32),
                       rewards=rewards, terminated=terminated, truncated=truncated, valid=valid,
                       first=np.zeros((T, B), bool), versions=zeros, slots=np.arange(B, dtype=np.int64)), episodes
