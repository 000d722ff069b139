"""The synchronous sampler of value-based agents: epsilon-greedy steps of every env, as Unrolls.

It steps all envs in lockstep (the engine's sync mode) for ``num_steps`` steps per
`collect` and hands back the steps in the same time-major record the central-inference
system cuts (:class:`~seedpool.records.Unrolls`, one unroll per env), so one replay learner
inserts both DQN's and Ape-X's experience. The engine's ``autoreset="next_step"``
contract holds as in the rollout samplers: the step after an episode end is a reset whose
action is ignored, stored with ``valid=False``.
"""
from __future__ import annotations

import time
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from seedpool.actors.episodes import EpisodeTracker
from seedpool.records import Episode, Unrolls
from seedpool.models.precision import Precision, autocast
from seedpool.timing import PhaseTimer

Chooser = Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]
"""choose(q_values [B, A], epsilon, generator) -> actions [B]."""


class EpsilonGreedySampler:
    """``collect()`` -> (Unrolls of ``num_steps`` x num_envs, finished episodes)."""

    def __init__(self, pool, q_net: torch.nn.Module, num_steps: int, epsilon: Callable[[int], float],
                 choose: Chooser, device: str | torch.device = "cpu", timer: PhaseTimer | None = None,
                 seed: int = 0, precision: Precision = "fp32") -> None:
        if not isinstance(pool.single_action_space, gym.spaces.Discrete):
            raise ValueError(f"value-based agents need a Discrete action space, got {pool.single_action_space}")
        self.pool, self.q_net, self.T, self.device = pool, q_net, num_steps, torch.device(device)
        self.precision = precision
        self.B = pool.num_envs
        self.epsilon, self.choose = epsilon, choose
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(self.B)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.env_steps = 0
        space = pool.single_observation_space
        self._obs = np.zeros((num_steps + 1, self.B, *space.shape), space.dtype)
        self.next_obs: np.ndarray | None = None
        self.next_valid = np.ones(self.B, dtype=bool)

    def start(self) -> None:
        """Reset every env (the pool's seeds apply)."""
        t0 = time.perf_counter()
        self.next_obs, _ = self.pool.reset()
        self.next_valid[:] = True
        self.timer.add("env", time.perf_counter() - t0)

    def state_dict(self) -> dict:
        """The env step counter (a resumed run starts fresh episodes on new env seeds)."""
        return {"env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting from a checkpoint; the envs start new episodes."""
        self.start()
        self.env_steps = int(state["env_steps"])

    def collect(self) -> tuple[Unrolls, list[Episode]]:
        """Step every env ``num_steps`` times; returns the steps and the episodes that ended."""
        if self.next_obs is None:
            self.start()
        T, B = self.T, self.B
        actions = np.zeros((T, B), np.int64)
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
            with torch.inference_mode(), autocast(self.precision, self.device.type):
                q = self.q_net(torch.as_tensor(obs, device=self.device))
                a = self.choose(q, self.epsilon(self.env_steps), self.generator).cpu().numpy()
            t1 = time.perf_counter()
            obs, rew, term, trunc, info = self.pool.step(a)
            t2 = time.perf_counter()
            actions[t], rewards[t], terminated[t], truncated[t] = a, rew, term, trunc
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
