"""A recurrent policy's memory in the synchronous sampler: each env's state between steps.

:class:`PolicyMemory` holds, for the ``B`` envs of a sync pool, the state entering their next
observation, whether that observation opens an episode (``first``), and the previous action
and reward. At the start of every rollout it copies the state into the rollout
(``Rollout.start_state``); at every step it records what the policy was given (``first``,
previous action and reward), so the learner can replay the policy through the rollout
exactly as it acted.

Episode starts under the engine's ``autoreset="next_step"``: a step that ends an episode
returns its final observation (stored with ``valid=False``); the step after it is the reset,
whose observation opens the next episode. So ``first`` for an observation is "the
observation before it was invalid", and the state is reset there, not at the final
observation (whose value bootstraps a truncated episode with the episode's own memory).
"""
from __future__ import annotations

import numpy as np
import torch

from seedpool.models.recurrent import RecurrentActorCritic
from seedpool.records import Rollout


class PolicyMemory:
    """The state of ``B`` envs between a recurrent policy's steps (see the module docstring)."""

    def __init__(self, policy: RecurrentActorCritic, num_envs: int, action_shape: tuple, action_dtype: torch.dtype,
                 device: str | torch.device) -> None:
        self.policy, self.B, self.device = policy, num_envs, device
        self.state = policy.initial_state(num_envs, device)
        self.first = torch.ones(num_envs, dtype=torch.bool, device=device)
        self.prev_action = torch.zeros((num_envs, *action_shape), dtype=action_dtype, device=device)
        self.prev_reward = torch.zeros(num_envs, device=device)

    def reset(self) -> None:
        """Every env starts a fresh episode at its next observation."""
        self.state = self.policy.initial_state(self.B, self.device)
        self.first.fill_(True)
        self.prev_action.zero_()
        self.prev_reward.zero_()

    def begin(self, buf: Rollout) -> None:
        """Record the state entering the rollout's first observation."""
        for k, v in self.state.items():
            buf.start_state[k].copy_(v)

    def act(self, obs: torch.Tensor, t: int = 0, buf: Rollout | None = None, deterministic: bool = False,
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The policy's step on ``obs``: record its inputs as row t of ``buf`` (unless None), keep its next state."""
        if buf is not None:
            buf.first[t] = self.first
            buf.prev_actions[t] = self.prev_action
            buf.prev_rewards[t] = self.prev_reward
        action, logprob, value, self.state = self.policy.act_step(obs, self.state, self.first, self.prev_action,
                                                                   self.prev_reward, deterministic)
        self.prev_action = action
        return action, logprob, value

    def observe(self, rewards: np.ndarray, acted_valid: np.ndarray) -> None:
        """After the env step: the reward is the next step's previous reward, and the observation
        after an invalid (final) one opens an episode."""
        self.prev_reward = torch.as_tensor(rewards, device=self.device).float()
        self.first = torch.as_tensor(~acted_valid, device=self.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values ``[B]`` of ``obs`` with the current state (the bootstrap); the state is not advanced."""
        _, value, _ = self.policy.step(obs, self.state, self.first, self.prev_action, self.prev_reward)
        return value.float()

    def state_dict(self) -> dict:
        """What an exact resume restores after replaying the envs (copies)."""
        return {"state": {k: v.detach().cpu().clone() for k, v in self.state.items()},
                "first": self.first.cpu().clone(), "prev_action": self.prev_action.cpu().clone(),
                "prev_reward": self.prev_reward.cpu().clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.state = {k: v.to(self.device) for k, v in state["state"].items()}
        self.first = state["first"].to(self.device)
        self.prev_action = state["prev_action"].to(self.device)
        self.prev_reward = state["prev_reward"].to(self.device)
