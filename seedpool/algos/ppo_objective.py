"""PPO's hyperparameters, its flat training batch, its objective and its loop of epochs and
minibatches: what feed-forward PPO (`seedpool.algos.ppo`), recurrent PPO
(`seedpool.algos.ppo_recurrent`) and the NumPy kernel (`seedpool.kernels.ppo_numpy`) share."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F

from seedpool.algos.batching import take_rows


@dataclass
class PPOConfig:
    """PPO hyperparameters (per-env defaults come from ``seedpool.trainers.ppo.ppo_defaults``)."""

    LIVE: ClassVar[tuple[str, ...]] = ("learning_rate", "ent_coef", "vf_coef", "clip_coef", "gae_lambda",
                                       "update_epochs", "target_kl")
    """Fields the learner reads at every update: `Training.set_hyperparameters` may change them."""

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
    """Take the NumPy kernel's gradient steps where one fits (`seedpool.kernels.ppo_update`: the same
    results, faster for small CPU MLPs, benchmarks/results/ppo_numpy_update.md); others use torch."""


def a2c_config(base: PPOConfig) -> PPOConfig:
    """A2C as PPO's special case: one epoch, one minibatch, no clipping, raw advantages."""
    return dataclasses.replace(
        base, update_epochs=1, num_minibatches=1, clip_coef=None, clip_vloss=False,
        norm_adv=False, target_kl=None,
    )


@dataclass
class PPOSteps:
    """What the PPO objective reads of each step: its observation and action, the behaviour
    policy's log-probability and value there, its advantage and return (flat ``[N]`` in
    `PPOBatch`, time-major ``[T, B]`` in recurrent PPO's `SequenceBatch`)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    """Values the behaviour policy computed (a rollout's bootstrap row dropped)."""
    advantages: torch.Tensor
    returns: torch.Tensor


@dataclass
class PPOBatch(PPOSteps):
    """Flat ``[N, ...]`` training data: only valid steps, with advantages and returns."""

    def __len__(self) -> int:
        return self.obs.shape[0]

    def take(self, idx: torch.Tensor) -> PPOBatch:
        """Rows ``idx`` (int64 indices) of every field."""
        return PPOBatch(*(take_rows(getattr(self, f.name), idx) for f in dataclasses.fields(self)))


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


MinibatchStep = Callable[[torch.Tensor | None, bool, bool], dict[str, torch.Tensor]]
"""``step(idx, whole, with_stats)``: one gradient step on rows ``idx`` (None: all of them, and
``whole`` says so); returns the minibatch's statistics when ``with_stats``, else an empty dict."""


def ppo_epochs(minibatch_step: MinibatchStep, cfg: PPOConfig, n: int, whole: bool
               ) -> tuple[int, list[dict[str, torch.Tensor]]]:
    """Run the epochs of minibatch steps over ``n`` rows (steps, or env columns of recurrent PPO),
    shuffled into ``num_minibatches`` chunks each epoch unless ``whole``; returns the epochs done
    and the last epoch's statistics (an epoch past ``target_kl`` is the last)."""
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


def update_means(history: list[dict[str, torch.Tensor]], epochs_done: int, values: torch.Tensor,
                 returns: torch.Tensor) -> dict[str, float]:
    """An update's statistics: the last epoch's averaged over its minibatches, the explained
    variance of the stored ``values`` against ``returns``, and the epochs done."""
    means = {k: float(torch.stack([h[k] for h in history]).mean()) for k in history[0]}
    means["explained_variance"] = explained_variance(values, returns)
    means["epochs"] = float(epochs_done)
    return means


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target]; NaN when the target is constant."""
    var = target.var()
    return float("nan") if float(var) == 0.0 else float(1.0 - (target - predicted).var() / var)
