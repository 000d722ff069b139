"""The synchronous sampler of value-based agents: epsilon-greedy steps of every env, as Unrolls.

The round itself (every env stepped ``num_steps`` times per `collect`, handed back as
:class:`~seedpool.records.Unrolls`, so one replay learner inserts both DQN's and Ape-X's
experience) is `seedpool.actors.lockstep.LockstepSampler`'s; this sampler chooses the actions.
"""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from seedpool.actors.lockstep import LockstepSampler
from seedpool.errors import ConfigError
from seedpool.models.precision import Precision, autocast
from seedpool.timing import PhaseTimer

Chooser = Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]
"""choose(q_values [B, A], epsilon, generator) -> actions [B]."""


class EpsilonGreedySampler(LockstepSampler):
    """``collect()`` -> (Unrolls of ``num_steps`` x num_envs, finished episodes)."""

    def __init__(self, pool, q_net: torch.nn.Module, num_steps: int, epsilon: Callable[[int], float],
                 choose: Chooser, device: str | torch.device = "cpu", timer: PhaseTimer | None = None,
                 seed: int = 0, precision: Precision = "fp32") -> None:
        if not isinstance(pool.single_action_space, gym.spaces.Discrete):
            raise ConfigError(f"value-based agents need a Discrete action space, got {pool.single_action_space}")
        super().__init__(pool, num_steps, (), np.int64, device, timer, seed, precision)
        self.q_net, self.epsilon, self.choose = q_net, epsilon, choose

    def state_dict(self) -> dict:
        """The env step counter (a resumed run starts fresh episodes on new env seeds)."""
        return {"env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting from a checkpoint; the envs start new episodes."""
        self.start()
        self.env_steps = int(state["env_steps"])

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy actions on the Q-network's values (stored as the envs get them)."""
        with torch.inference_mode(), autocast(self.precision, self.device.type):
            q = self.q_net(torch.as_tensor(obs, device=self.device))
            a = self.choose(q, self.epsilon(self.env_steps), self.generator).cpu().numpy()
        return a, a
