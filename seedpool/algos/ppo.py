"""Proximal Policy Optimisation (clipped objective); A2C is its one-epoch unclipped case.

``ppo_update(policy, step, batch, cfg)`` runs the epochs and minibatches of one update
through the learner's `GradientStep` and returns averaged statistics; :class:`PPOLearner`
is PPO behind the common `Learner` face (seedpool.algos.learner): it owns the optimizer,
anneals the learning rate and clip range with its own progress, and refuses a non-finite
gradient step before it changes any parameter.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING

import torch

import seedpool.kernels as kernels
from seedpool.algos.gradient import GradientStep, Precision
from seedpool.algos.learner import GradientLearner, linear_decay, set_learning_rate
from seedpool.algos.ppo_objective import (
    PPOBatch, PPOConfig, a2c_config, explained_variance, ppo_epochs, ppo_objective, update_means,
)
from seedpool.algos.ppo_recurrent import make_sequence_batch, recurrent_ppo_update
from seedpool.algos.reward_norm import ReturnNormalizer
from seedpool.algos.returns import gae
from seedpool.models.base import ActorCritic
from seedpool.models.flat import flatten_parameters
from seedpool.models.recurrent import is_recurrent
from seedpool.records import Rollout

if TYPE_CHECKING:
    from seedpool.kernels.ppo_numpy import NumpyPPOStep

__all__ = ["PPOBatch", "PPOConfig", "PPOLearner", "a2c_config", "explained_variance", "make_batch", "ppo_loss",
           "ppo_objective", "ppo_update"]


def make_batch(rollout, gamma: float, gae_lambda: float, reward_scale: float = 1.0) -> PPOBatch:
    """GAE over a time-major rollout, then drop masked steps and flatten ``[T, B] -> [N]``.

    ``rollout`` is a :class:`seedpool.records.Rollout` (any object with its fields).
    """
    rewards = rollout.rewards if reward_scale == 1.0 else rollout.rewards * reward_scale
    advantages = gae(
        rewards, rollout.values, rollout.terminated, rollout.truncated, gamma, gae_lambda, rollout.valid
    )
    returns = advantages + rollout.values[:-1]
    steps = PPOBatch(
        obs=rollout.obs.flatten(0, 1),
        actions=rollout.actions.flatten(0, 1),
        logprobs=rollout.logprobs.flatten(0, 1),
        values=rollout.values[:-1].flatten(0, 1),
        advantages=advantages.flatten(0, 1),
        returns=returns.flatten(0, 1),
    )
    valid = rollout.valid.flatten()
    # An index gather instead of a boolean mask: masks are a slow copy of the frames.
    return steps.take(valid.nonzero().squeeze(1))


def ppo_loss(
    policy: ActorCritic, mb: PPOBatch, cfg: PPOConfig, clip_coef: float | None,
    normalized: bool = False, with_stats: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO objective on one minibatch: (loss to minimise, detached statistics).

    ``normalized``: the advantages are already normalised (done once for a whole batch).
    """
    logprob, entropy, value = policy.evaluate(mb.obs, mb.actions)
    return ppo_objective(logprob, entropy, value, mb.logprobs, mb.values, mb.advantages, mb.returns, cfg,
                         clip_coef, normalized, with_stats)


def ppo_update(
    policy: ActorCritic,
    step: GradientStep | torch.optim.Optimizer,
    batch: PPOBatch,
    cfg: PPOConfig,
    clip_coef: float | None = None,
    version: int = 0,
    kernel: NumpyPPOStep | None = None,
) -> dict[str, float]:
    """Run ``update_epochs`` x ``num_minibatches`` gradient steps; returns statistics.

    ``step``: the learner's `GradientStep` (an optimizer is wrapped in one, clipping at
    ``cfg.max_grad_norm``); ``version`` is named in the error of a non-finite step.
    ``clip_coef`` overrides ``cfg.clip_coef`` (for annealing); pass None to use the config's.
    ``kernel``: the fast path `seedpool.kernels.ppo_update` gave for this policy and ``step``'s
    optimizer, or None for autograd (also taken when the kernel no longer fits).
    Statistics are averaged over the last epoch's minibatches (computing them every step
    would cost as much as a small network's forward pass).
    """
    if not isinstance(step, GradientStep):
        step = GradientStep(step, cfg.max_grad_norm, "PPO")
    clip = cfg.clip_coef if clip_coef is None or cfg.clip_coef is None else clip_coef
    n = len(batch)
    whole = cfg.num_minibatches == 1
    if whole and cfg.norm_adv and n > 1:
        # One minibatch is the whole batch: normalise once, and skip shuffling (order is irrelevant).
        adv = batch.advantages
        batch = dataclasses.replace(batch, advantages=(adv - adv.mean()) / (adv.std() + 1e-8))
    kernel_step = None if kernel is None else _kernel_step_fn(kernel, step, batch, cfg, clip, version)
    minibatch_step = kernel_step or _torch_step_fn(policy, step, batch, cfg, clip, version)
    with kernel.scope() if kernel_step else contextlib.nullcontext():
        epochs_done, history = ppo_epochs(minibatch_step, cfg, n, whole)
    return update_means(history, epochs_done, batch.values, batch.returns)


def _torch_step_fn(policy, step: GradientStep, batch: PPOBatch, cfg: PPOConfig, clip: float | None,
                   version: int):
    """One autograd gradient step over rows ``idx`` of the batch (None: all of it)."""

    def minibatch_step(idx: torch.Tensor | None, normalized: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        mb = batch if idx is None else batch.take(idx.to(batch.obs.device))
        with step.autocast():
            loss, stats = ppo_loss(policy, mb, cfg, clip, normalized=normalized, with_stats=with_stats)
        step(loss, version)
        return stats

    return minibatch_step


def _kernel_step_fn(kernel: NumpyPPOStep, step: GradientStep, batch: PPOBatch, cfg: PPOConfig,
                    clip: float | None, version: int):
    """The kernel's step for this update, checked and profiled by ``step``; None when it no longer fits."""
    kernel_step = kernel.bind(batch, cfg, clip, lambda norm: step.check(None, norm, version))
    if kernel_step is None:
        return None

    def minibatch_step(idx: torch.Tensor | None, normalized: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        start = time.perf_counter()
        stats = kernel_step(idx, normalized, with_stats)
        step.record(time.perf_counter() - start)
        return stats

    return minibatch_step


class PPOLearner(GradientLearner):
    """PPO as a `Learner`: ``update(rollout)`` is one PPO update (all epochs and minibatches).

    A recurrent policy learns through time over whole env sequences
    (`seedpool.algos.ppo_recurrent`); a feed-forward one from shuffled steps."""

    def __init__(self, model: ActorCritic, cfg: PPOConfig, total_steps: int, precision: Precision = "fp32") -> None:
        # One flat tensor holds every parameter: fused Adam and clipping touch one buffer.
        self.params = flatten_parameters(model)
        optimizer = torch.optim.Adam([self.params], lr=cfg.learning_rate, eps=cfg.adam_eps, fused=True)
        super().__init__(model, optimizer, total_steps, name="PPO", max_grad_norm=cfg.max_grad_norm,
                         precision=precision)
        self.cfg = cfg
        self.reward_norm = ReturnNormalizer(cfg.gamma) if cfg.reward_norm else None
        # The fast path, asked for once; it reads `self.cfg` and the optimizer at every step.
        self.kernel = kernels.ppo_update(model, optimizer, self.params.device, precision) if cfg.numpy_update else None

    def update(self, rollout: Rollout) -> dict[str, float]:
        """One PPO update; raises NonFiniteLossError before a non-finite step changes anything."""
        cfg = self.cfg
        lr = linear_decay(cfg.learning_rate, self.progress, cfg.anneal_lr)
        set_learning_rate(self.optimizer, lr)
        clip = None if cfg.clip_coef is None else linear_decay(cfg.clip_coef, self.progress, cfg.anneal_clip)
        if self.reward_norm is not None:
            rewards = self.reward_norm(rollout.rewards, rollout.terminated | rollout.truncated, rollout.valid)
            rollout = dataclasses.replace(rollout, rewards=rewards)
        if is_recurrent(self.model):
            # Learning through time from the stored start state: always the autograd path.
            seqs = make_sequence_batch(rollout, cfg.gamma, cfg.gae_lambda, cfg.reward_scale)
            stats = recurrent_ppo_update(self.model, self.gradient, seqs, cfg, clip, self.version)
            seen = seqs.obs[seqs.valid]
        else:
            batch = make_batch(rollout, cfg.gamma, cfg.gae_lambda, cfg.reward_scale)
            stats = ppo_update(self.model, self.gradient, batch, cfg, clip, self.version,
                               self.kernel if cfg.numpy_update else None)
            seen = batch.obs
        # Observation statistics move only between updates: acting and learning of one
        # rollout read the same ones, so the first epoch's probability ratios start at 1.
        observe = getattr(self.model, "observe", None)
        if observe is not None:
            observe(seen)
        self._advance(rollout.num_steps)
        scalars = {f"losses/{k}": v for k, v in stats.items()}
        scalars["charts/learning_rate"] = lr
        return {**scalars, **self.gradient.profile()}

    def state_dict(self) -> dict:
        """Model, optimizer, counters and (with ``reward_norm``) the return statistics."""
        state = super().state_dict()
        if self.reward_norm is not None:
            state["reward_norm"] = self.reward_norm.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        super().load_state_dict(state)
        if self.reward_norm is not None and "reward_norm" in state:
            self.reward_norm.load_state_dict(state["reward_norm"])
