"""Recurrent PPO: learning through time over whole env sequences from their stored start state.

A rollout of a recurrent policy holds, per env, T consecutive steps, the state entering the
first of them (``Rollout.start_state``) and what the policy was given at each step
(``first``, previous action and reward). An update keeps the ``[T, B]`` layout: a minibatch
is a set of whole env columns, which the policy re-runs from their start state through all
T steps (resetting where ``first`` is set, exactly as it acted), and the PPO objective
(`seedpool.algos.ppo.ppo_objective`) is taken over the valid steps. Shuffling steps would
cut the sequences the state runs along, so only env columns are shuffled.

The NumPy kernel of `seedpool.kernels.ppo_numpy` is for feed-forward MLPs; this path always
takes autograd's gradient through the learner's `GradientStep`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from seedpool.algos.gradient import GradientStep
from seedpool.algos.ppo_objective import PPOConfig, PPOSteps, ppo_epochs, ppo_objective, update_means
from seedpool.algos.returns import gae
from seedpool.errors import ConfigError
from seedpool.models.recurrent import RecurrentActorCritic
from seedpool.records import Rollout


@dataclass
class SequenceBatch(PPOSteps):
    """Time-major ``[T, B]`` training data of B whole env sequences, with advantages and returns."""

    valid: torch.Tensor
    first: torch.Tensor
    prev_actions: torch.Tensor
    prev_rewards: torch.Tensor
    start_state: dict[str, torch.Tensor]
    """The state entering obs[0] of each env, tensors [B, ...]."""

    @property
    def num_envs(self) -> int:
        return self.first.shape[1]

    def columns(self, idx: torch.Tensor) -> SequenceBatch:
        """The sequences of envs ``idx`` (every field's env axis)."""
        fields = {f.name: getattr(self, f.name)[:, idx] for f in dataclasses.fields(self) if f.name != "start_state"}
        return SequenceBatch(**fields, start_state={k: v[idx] for k, v in self.start_state.items()})


def make_sequence_batch(rollout: Rollout, gamma: float, gae_lambda: float, reward_scale: float = 1.0) -> SequenceBatch:
    """GAE over a recurrent policy's rollout, keeping its ``[T, B]`` layout and stored state."""
    if rollout.start_state is None or rollout.first is None:
        raise ValueError("a recurrent PPO update needs a rollout with the recurrent fields (start_state, first, "
                         "prev_actions, prev_rewards): collect it with the sync sampler and a recurrent policy")
    rewards = rollout.rewards if reward_scale == 1.0 else rollout.rewards * reward_scale
    advantages = gae(rewards, rollout.values, rollout.terminated, rollout.truncated, gamma, gae_lambda)
    return SequenceBatch(
        obs=rollout.obs, actions=rollout.actions, logprobs=rollout.logprobs, values=rollout.values[:-1],
        advantages=advantages, returns=advantages + rollout.values[:-1], valid=rollout.valid,
        first=rollout.first, prev_actions=rollout.prev_actions, prev_rewards=rollout.prev_rewards,
        start_state=rollout.start_state,
    )


def recurrent_loss(policy: RecurrentActorCritic, mb: SequenceBatch, cfg: PPOConfig, clip_coef: float | None,
                   with_stats: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO objective over the valid steps of whole sequences, re-run from their start state."""
    logprob, entropy, value = policy.evaluate_sequence(mb.obs, mb.actions, mb.start_state, mb.first,
                                                       mb.prev_actions, mb.prev_rewards)
    v = mb.valid
    return ppo_objective(logprob[v], entropy[v], value[v], mb.logprobs[v], mb.values[v], mb.advantages[v],
                         mb.returns[v], cfg, clip_coef, normalized=False, with_stats=with_stats)


def recurrent_ppo_update(policy: RecurrentActorCritic, step: GradientStep, batch: SequenceBatch, cfg: PPOConfig,
                         clip_coef: float | None = None, version: int = 0) -> dict[str, float]:
    """``update_epochs`` passes, each over ``num_minibatches`` groups of whole env sequences; returns
    statistics averaged over the last epoch's minibatches (as `seedpool.algos.ppo.ppo_update`)."""
    B = batch.num_envs
    if cfg.num_minibatches > B:
        raise ConfigError(f"recurrent PPO splits the {B} env sequences of a rollout into minibatches: "
                          f"--ppo.num-minibatches must be at most --num-envs ({B}), got {cfg.num_minibatches}")
    clip = cfg.clip_coef if clip_coef is None or cfg.clip_coef is None else clip_coef

    def minibatch_step(idx: torch.Tensor | None, whole: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        mb = batch if idx is None else batch.columns(idx.to(batch.first.device))
        with step.autocast():
            loss, stats = recurrent_loss(policy, mb, cfg, clip, with_stats=with_stats)
        step(loss, version)
        return stats

    epochs_done, history = ppo_epochs(minibatch_step, cfg, B, cfg.num_minibatches == 1)
    v = batch.valid
    return update_means(history, epochs_done, batch.values[v], batch.returns[v])
