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
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seedpool.algos.batching import take_rows
from seedpool.algos.gradient import GradientStep, Precision
from seedpool.algos.learner import GradientLearner, linear_decay, set_learning_rate
from seedpool.algos import ppo_numpy
from seedpool.algos.ppo_numpy import numpy_step_fn
from seedpool.algos.reward_norm import ReturnNormalizer
from seedpool.algos.returns import gae
from seedpool.models.base import ActorCritic
from seedpool.models.flat import flatten_parameters
from seedpool.models.recurrent import is_recurrent
from seedpool.records import Rollout


@dataclass
class PPOConfig:
    """PPO hyperparameters (per-env defaults come from ``seedpool.trainers.ppo.ppo_defaults``)."""

    num_steps: int = 128
    """Steps collected per env between updates (rollout length T)."""
    num_minibatches: int = 4
    """Minibatches per epoch; the rollout of T x num_envs steps is split into this many."""
    update_epochs: int = 4
    """Passes over each rollout."""
    learning_rate: float = 2.5e-4
    """Adam learning rate at the start of training."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to zero over the run."""
    adam_eps: float = 1e-5
    """Adam epsilon (1e-5 as in the PPO baselines, not torch's 1e-8)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda (1.0: Monte-Carlo returns bootstrapped at the rollout end)."""
    reward_scale: float = 1.0
    """Multiply rewards by this before computing returns (keeps value targets near unit scale)."""
    reward_norm: bool = False
    """Divide rewards by the running std of each env's discounted return, clipped to +-10 (VecNormalize's
    reward half; `seedpool.algos.reward_norm`); applied before ``reward_scale``."""
    clip_coef: float | None = 0.2
    """Policy ratio clip range epsilon; None disables clipping (A2C)."""
    anneal_clip: bool = False
    """Decay the clip range linearly to zero over the run, like rl-zoo3's lin_ schedules."""
    clip_vloss: bool = False
    """Clip the value update to clip_coef around the old values."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient; the value loss is the plain mean squared error, as in SB3."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: float | None = None
    """Stop the epochs of an update early once the approximate KL exceeds this; None: never."""
    numpy_update: bool = True
    """Run gradient steps in NumPy (same results, about 2x faster for small CPU MLPs); unsupported policies use torch."""


def a2c_config(base: PPOConfig) -> PPOConfig:
    """A2C as PPO's special case: one epoch, one minibatch, no clipping, raw advantages."""
    return dataclasses.replace(
        base, update_epochs=1, num_minibatches=1, clip_coef=None, clip_vloss=False,
        norm_adv=False, target_kl=None,
    )


@dataclass
class PPOBatch:
    """Flat ``[N, ...]`` training data: only valid steps, with advantages and returns."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def __len__(self) -> int:
        return self.obs.shape[0]

    def take(self, idx: torch.Tensor) -> PPOBatch:
        """Rows ``idx`` (int64 indices) of every field."""
        return PPOBatch(*(take_rows(getattr(self, f.name), idx) for f in dataclasses.fields(self)))


def make_batch(rollout, gamma: float, gae_lambda: float, reward_scale: float = 1.0) -> PPOBatch:
    """GAE over a time-major rollout, then drop masked steps and flatten ``[T, B] -> [N]``.

    ``rollout`` is a :class:`seedpool.records.Rollout` (any object with its fields).
    """
    rewards = rollout.rewards if reward_scale == 1.0 else rollout.rewards * reward_scale
    advantages = gae(
        rewards, rollout.values, rollout.terminated, rollout.truncated, gamma, gae_lambda
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


def ppo_objective(
    logprob: torch.Tensor, entropy: torch.Tensor, value: torch.Tensor, old_logprobs: torch.Tensor,
    old_values: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor, cfg: PPOConfig,
    clip_coef: float | None, normalized: bool = False, with_stats: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO objective from the policy's new ``logprob``, ``entropy`` and ``value`` of N steps and
    what the rollout stored for them (all flat ``[N]``); feed-forward and recurrent PPO share it."""
    logratio = logprob - old_logprobs
    ratio = logratio.exp()
    adv = advantages
    if cfg.norm_adv and not normalized and adv.numel() > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss = adv * ratio
    if clip_coef is not None:
        pg_loss = torch.min(pg_loss, adv * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef))
    pg_loss = -pg_loss.mean()
    if cfg.clip_vloss and clip_coef is not None:
        v_clipped = old_values + (value - old_values).clamp(-clip_coef, clip_coef)
        v_loss = torch.max((value - returns).pow(2), (v_clipped - returns).pow(2)).mean()
    else:
        v_loss = F.mse_loss(value, returns)
    loss = pg_loss + cfg.vf_coef * v_loss
    if cfg.ent_coef:
        loss = loss - cfg.ent_coef * entropy.mean()
    stats: dict[str, torch.Tensor] = {}
    if with_stats:
        with torch.no_grad():
            stats = {
                "policy_loss": pg_loss.detach(),
                "value_loss": v_loss.detach(),
                "entropy": entropy.detach().mean(),
                "approx_kl": ((ratio - 1.0) - logratio).mean(),
                "clipfrac": ((ratio - 1.0).abs() > (clip_coef or float("inf"))).float().mean(),
            }
    return loss, stats


def ppo_update(
    policy: ActorCritic,
    step: GradientStep | torch.optim.Optimizer,
    batch: PPOBatch,
    cfg: PPOConfig,
    clip_coef: float | None = None,
    version: int = 0,
) -> dict[str, float]:
    """Run ``update_epochs`` x ``num_minibatches`` gradient steps; returns statistics.

    ``step``: the learner's `GradientStep` (an optimizer is wrapped in one, clipping at
    ``cfg.max_grad_norm``); ``version`` is named in the error of a non-finite step.
    ``clip_coef`` overrides ``cfg.clip_coef`` (for annealing); pass None to use the config's.
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
    numpy_step = _numpy_step_fn(policy, step, batch, cfg, clip, version) if cfg.numpy_update else None
    minibatch_step = numpy_step or _torch_step_fn(policy, step, batch, cfg, clip, version)
    with ppo_numpy.update_scope() if numpy_step else contextlib.nullcontext():
        epochs_done, history = _epochs(minibatch_step, cfg, n, whole)
    means = {k: float(torch.stack([h[k] for h in history]).mean()) for k in history[0]}
    means["explained_variance"] = explained_variance(batch.values, batch.returns)
    means["epochs"] = float(epochs_done)
    return means


def _epochs(minibatch_step, cfg: PPOConfig, n: int, whole: bool) -> tuple[int, list[dict]]:
    """Run the epochs of minibatch steps over ``n`` rows; returns the epochs done and the last
    epoch's statistics (an epoch past ``target_kl`` is the last)."""
    epochs_done, history = 0, []
    for epoch in range(cfg.update_epochs):
        chunks = [None] if whole else torch.randperm(n).chunk(cfg.num_minibatches)
        last_epoch = epoch == cfg.update_epochs - 1
        history = []
        for k, idx in enumerate(chunks):
            want_stats = last_epoch or (cfg.target_kl is not None and k == len(chunks) - 1)
            stats = minibatch_step(idx, whole, want_stats)
            if stats:
                history.append(stats)
        epochs_done += 1
        if cfg.target_kl is not None and float(history[-1]["approx_kl"]) > cfg.target_kl:
            break
    return epochs_done, history


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


def _numpy_step_fn(policy, step: GradientStep, batch: PPOBatch, cfg: PPOConfig, clip: float | None,
                   version: int):
    """The NumPy kernel's step (fp32 only), checked and profiled by ``step``; None when unsupported."""
    if step.precision != "fp32":
        return None
    kernel = numpy_step_fn(policy, step.optimizer, batch, cfg, clip, lambda norm: step.check(None, norm, version))
    if kernel is None:
        return None

    def minibatch_step(idx: torch.Tensor | None, normalized: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        start = time.perf_counter()
        stats = kernel(idx, normalized, with_stats)
        step.record(time.perf_counter() - start)
        return stats

    return minibatch_step


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target]; NaN when the target is constant."""
    var = target.var()
    return float("nan") if float(var) == 0.0 else float(1.0 - (target - predicted).var() / var)


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
            # Imported here: ppo_recurrent builds on this module's batch and objective.
            from seedpool.algos.ppo_recurrent import make_sequence_batch, recurrent_ppo_update

            # Learning through time from the stored start state: always the autograd path.
            seqs = make_sequence_batch(rollout, cfg.gamma, cfg.gae_lambda, cfg.reward_scale)
            stats = recurrent_ppo_update(self.model, self.gradient, seqs, cfg, clip, self.version)
            seen = seqs.obs[seqs.valid]
        else:
            batch = make_batch(rollout, cfg.gamma, cfg.gae_lambda, cfg.reward_scale)
            stats = ppo_update(self.model, self.gradient, batch, cfg, clip, self.version)
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
