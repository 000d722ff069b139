"""The lockstep sampler of recurrent value-based agents (R2D2 ``--lockstep``): per-env epsilons, per-env state.

R2D2 acts on the central-inference system by default; this sampler is its in-process layout.
Every env is stepped ``num_steps`` times per `collect` (`LockstepSampler`'s round). The act
function (`seedpool.algos.r2d2.RecurrentEpsilonGreedyAct`, the same callable the inference
server runs) sees each env's state entering its observation and whether that
observation opens an episode; the returned `Unrolls` carry both per step (``first``, and the
entering state in ``aux``), which is what sequence replay stores.

``first`` follows the engine's ``autoreset="next_step"``: the observation after an invalid
(final) one opens an episode, and so does every env's first observation of a run.
"""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from seedpool.actors.lockstep import LockstepSampler
from seedpool.errors import ConfigError
from seedpool.models.precision import Precision, autocast
from seedpool.records import ActOutput, Episode, Unrolls
from seedpool.timing import PhaseTimer

ActFn = Callable[..., ActOutput]
"""act(model, obs, state, first, slots) -> ActOutput (``aux``: the entering state)."""


class RecurrentQSampler(LockstepSampler):
    """``collect()`` -> (Unrolls with ``first`` and entering states in ``aux``, finished episodes)."""

    def __init__(self, pool, q_net: torch.nn.Module, num_steps: int, act: ActFn, device: str | torch.device = "cpu",
                 timer: PhaseTimer | None = None, seed: int = 0, precision: Precision = "fp32") -> None:
        if not isinstance(pool.single_action_space, gym.spaces.Discrete):
            raise ConfigError(f"value-based agents need a Discrete action space, got {pool.single_action_space}")
        super().__init__(pool, num_steps, (), np.int64, device, timer, seed, precision)
        self.q_net, self.act_fn = q_net, act
        self.slots = torch.arange(self.B, device=self.device)
        self.reset_memory()

    def reset_memory(self) -> None:
        """Every env opens an episode at its next observation, from a zero state."""
        self.state = self.q_net.initial_state(self.B, self.device)
        self.first = torch.ones(self.B, dtype=torch.bool, device=self.device)
        self._aux: list[np.ndarray] = []
        self._first: list[np.ndarray] = []

    def state_dict(self) -> dict:
        """The env step counter (a resumed run starts fresh episodes on new env seeds)."""
        return {"env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting from a checkpoint; the envs start new episodes from a zero state."""
        self.start()
        self.reset_memory()
        self.env_steps = int(state["env_steps"])

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Epsilon-greedy actions of the recurrent Q network; records ``first`` and the entering state."""
        with torch.inference_mode(), autocast(self.precision, self.device.type):
            out = self.act_fn(self.q_net, torch.as_tensor(obs, device=self.device), self.state, self.first,
                              self.slots)
        self._aux.append(out.aux.float().cpu().numpy())
        self._first.append(self.first.cpu().numpy())
        self.state = out.state
        # The observation after an invalid (final) one opens an episode.
        self.first = torch.as_tensor(~self.next_valid, device=self.device)
        a = out.actions.cpu().numpy()
        return a, a

    def collect(self) -> tuple[Unrolls, list[Episode]]:
        """One lockstep round, with each step's ``first`` and entering state filled in."""
        self._aux, self._first = [], []
        unrolls, episodes = super().collect()
        unrolls.aux = np.stack(self._aux)
        unrolls.first = np.stack(self._first)
        return unrolls, episodes
