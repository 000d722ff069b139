"""IMPALA's learner: V-trace targets for off-policy unrolls, a baseline loss and entropy.

Two policy objectives share the V-trace value targets:

- **IMPALA** (``clip_coef=None``): the paper's policy gradient,
  ``-rho_t * (r_t + gamma v_{t+1} - V(x_t)) * log pi(a_t|x_t)`` with truncated ``rho_t``.
- **APPO** (``clip_coef`` set): PPO's clipped surrogate on the behaviour-policy ratio
  ``pi / mu``, with the advantage ``r_t + gamma v_{t+1} - V(x_t)`` (V-trace's ``v``, no rho:
  the ratio does the importance weighting), as Sample Factory's APPO does. Targets are
  computed once per batch, so several epochs and minibatches can reuse a batch safely.

A recurrent policy (``--model.core lstm|gru``) learns through time over whole unrolls from
the state each started with (`seedpool.algos.impala_recurrent`); V-trace is unchanged.

The learner consumes batches of time-major unrolls (`seedpool.records.Unrolls`) and keeps
a version number that increases with every update, so the inference server can tag each
sample with the parameters that chose it and the learner can log the policy lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import nn

from seedpool.algos.batching import frames_last, take_rows
from seedpool.algos.gradient import NonFiniteLossError, Precision  # noqa: F401 (re-exported)
from seedpool.algos.impala_recurrent import evaluate_recurrent, recurrent_tensors, unroll_axis
from seedpool.algos.learner import GradientLearner, linear_decay, set_learning_rate
from seedpool.algos.vtrace import vtrace
from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, float32
from seedpool.models.recurrent import is_recurrent
from seedpool.records import ActOutput, Unrolls

Batch = dict[str, torch.Tensor]


@dataclass
class ImpalaConfig:
    """IMPALA / APPO learner settings (names as in CleanRL and Stable-Baselines3)."""

    LIVE: ClassVar[tuple[str, ...]] = ("learning_rate", "ent_coef", "vf_coef", "clip_coef")
    """Fields the learner reads at every update: `Training.set_hyperparameters` may change them."""

    unroll_length: int = 20
    """T: steps per unroll sent from the inference server to the learner."""
    unrolls_per_batch: int = 32
    """Unrolls per learner update (the update sees T x unrolls_per_batch steps)."""
    gamma: float = 0.99
    """Discount factor."""
    reward_scale: float = 1.0
    """Multiply rewards by this before the targets are computed (as PPO's ``reward_scale``): keeps
    value errors, and with them the clipped gradient, in range where returns run into the hundreds."""
    learning_rate: float = 6e-4
    """Learning rate at the start of training."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run's total steps."""
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """Adam (eps 1e-5), or RMSprop as in the IMPALA paper (alpha 0.99, eps 0.01)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the baseline loss (which is 0.5 x the squared error to the V-trace target)."""
    max_grad_norm: float = 40.0
    """Clip the global gradient norm to this value."""
    clip_rho: float = 1.0
    """rho-bar: truncation of the importance weights in the value targets."""
    clip_pg_rho: float = 1.0
    """Truncation of the importance weights in IMPALA's policy-gradient advantages."""
    clip_c: float = 1.0
    """c-bar: truncation of the trace-cutting weights."""
    vtrace_lambda: float = 1.0
    """lambda of V-trace (1.0 in the paper)."""
    norm_adv: bool = False
    """Normalise the policy-gradient advantages over each minibatch."""
    clip_coef: float | None = None
    """PPO clip range on the ratio pi/mu (APPO); None: IMPALA's plain policy gradient."""
    anneal_clip: bool = False
    """Decay the clip range linearly to zero over the run, like rl-zoo3's lin_ schedules."""
    update_epochs: int = 1
    """Passes over each batch of unrolls."""
    num_minibatches: int = 1
    """Minibatches per pass; the batch's unrolls are split between them."""


def policy_act(model: ActorCritic, obs: torch.Tensor, state, first: torch.Tensor,
               slots: torch.Tensor | None = None) -> ActOutput:
    """The inference server's act function for a feed-forward actor-critic: sample, keep log-prob."""
    action, logp, _ = model.act(obs)
    return ActOutput(actions=action, logp=logp, state=state)


def make_optimizer(model: nn.Module, cfg: ImpalaConfig) -> torch.optim.Optimizer:
    """The optimizer `cfg.optimizer` names, stepping every parameter in one fused (Adam) or
    multi-tensor (RMSprop) call: torch's default on a CPU is a Python loop over the parameters,
    which was 13% of a recurrent APPO learner's time on CartPole."""
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=fused)
    if cfg.optimizer == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=cfg.learning_rate, alpha=0.99, eps=0.01, foreach=True)
    raise ConfigError(f"optimizer must be 'adam' or 'rmsprop', got {cfg.optimizer!r}")


def unrolls_to_tensors(u: Unrolls, device: torch.device, recurrent: bool = False) -> Batch:
    """Move a batch of unrolls to the learner's device, as [T(+1), B] tensors (``recurrent``:
    also ``first`` [T + 1, B] and the start state, see `seedpool.algos.impala_recurrent`)."""
    batch = {name: torch.from_numpy(np.ascontiguousarray(getattr(u, name))).to(device)
             for name in ("obs", "actions", "logp", "rewards", "terminated", "valid")}
    # Frames once in the layout the convolutions want, not once per epoch and minibatch.
    batch["obs"] = frames_last(batch["obs"])
    if recurrent:
        batch.update(recurrent_tensors(u, device))
    return batch


def _evaluate(model: ActorCritic, batch: Batch, bootstrap: bool):
    """(target log-probs [T, B], entropies [T, B], values [T(+1), B]) under the current model."""
    if "first" in batch:  # a recurrent policy: through time from each unroll's start state
        return evaluate_recurrent(model, batch, bootstrap)
    obs, actions = batch["obs"], batch["actions"]
    T, B = actions.shape[:2]
    steps = T + 1 if bootstrap else T
    params, values = float32(model(obs[:steps].flatten(0, 1)))
    params_t = params[: T * B] if isinstance(params, torch.Tensor) else tuple(p[: T * B] for p in params)
    logp = model.head.log_prob(params_t, actions.flatten(0, 1)).view(T, B)
    entropy = model.head.entropy(params_t).view(T, B)
    return logp, entropy, values.view(steps, B)


def _vtrace(batch: Batch, target_logp: torch.Tensor, values: torch.Tensor, cfg: ImpalaConfig):
    """V-trace on a batch, given the current model's log-probs and values [T + 1, B]."""
    T = batch["actions"].shape[0]
    discounts = cfg.gamma * (1.0 - batch["terminated"].float())
    return vtrace(batch["logp"].float(), target_logp.detach(), batch["rewards"].float(),
                  values[:T].detach(), values[T].detach(), discounts, clip_rho=cfg.clip_rho,
                  clip_pg_rho=cfg.clip_pg_rho, clip_c=cfg.clip_c, lambda_=cfg.vtrace_lambda,
                  mask=batch["valid"].float()), discounts


def _normalized(adv: torch.Tensor, mask: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    mean = (adv * mask).sum() / n
    std = (((adv - mean) * mask).pow(2).sum() / n).sqrt()
    return (adv - mean) / (std + 1e-8)


def _parts(pg_loss, value_loss, entropy_mean, ratio, vs, mask, n, cfg: ImpalaConfig):
    loss = pg_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy_mean
    return loss, {
        "losses/policy_loss": pg_loss.detach(),
        "losses/value_loss": value_loss.detach(),
        "losses/entropy": entropy_mean.detach(),
        "losses/importance_ratio": (ratio * mask).sum() / n,
        "losses/vtrace_target_mean": (vs * mask).sum() / n,
    }


def impala_loss(model: ActorCritic, batch: Batch, cfg: ImpalaConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """IMPALA's total loss and its parts for one batch of unrolls (means over valid steps)."""
    T = batch["actions"].shape[0]
    target_logp, entropy, values = _evaluate(model, batch, bootstrap=True)
    vt, _ = _vtrace(batch, target_logp, values, cfg)
    mask = batch["valid"].float()
    n = mask.sum().clamp(min=1.0)
    adv = _normalized(vt.pg_advantages, mask, n) if cfg.norm_adv else vt.pg_advantages
    pg_loss = -(adv * target_logp * mask).sum() / n
    value_loss = 0.5 * ((vt.vs - values[:T]).pow(2) * mask).sum() / n
    ratio = (target_logp.detach() - batch["logp"]).exp()
    return _parts(pg_loss, value_loss, (entropy * mask).sum() / n, ratio, vt.vs, mask, n, cfg)


@torch.no_grad()
def appo_targets(model: ActorCritic, batch: Batch, cfg: ImpalaConfig) -> dict[str, torch.Tensor]:
    """V-trace value targets ``vs`` and advantages ``r + gamma v_{t+1} - V(x_t)`` [T, B],
    computed once with the parameters the update starts from."""
    T = batch["actions"].shape[0]
    target_logp, _, values = _evaluate(model, batch, bootstrap=True)
    vt, discounts = _vtrace(batch, target_logp, values, cfg)
    next_vs = torch.cat([vt.vs[1:], values[T:]], dim=0)
    adv = (batch["rewards"].float() + discounts * next_vs - values[:T]) * batch["valid"].float()
    return {"vs": vt.vs, "adv": adv}


def appo_loss(model: ActorCritic, batch: Batch, targets: dict[str, torch.Tensor], cfg: ImpalaConfig,
              clip_coef: float | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped objective on V-trace targets for one (mini)batch of unrolls
    (``clip_coef`` overrides ``cfg.clip_coef``, for annealing)."""
    clip = cfg.clip_coef if clip_coef is None else clip_coef
    logp, entropy, values = _evaluate(model, batch, bootstrap=False)
    mask = batch["valid"].float()
    n = mask.sum().clamp(min=1.0)
    adv = _normalized(targets["adv"], mask, n) if cfg.norm_adv else targets["adv"]
    ratio = (logp - batch["logp"].float()).exp()
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip)
    pg_loss = -(torch.min(adv * ratio, adv * clipped) * mask).sum() / n
    value_loss = 0.5 * ((targets["vs"] - values).pow(2) * mask).sum() / n
    return _parts(pg_loss, value_loss, (entropy * mask).sum() / n, ratio.detach(), targets["vs"], mask, n, cfg)


class ImpalaLearner(GradientLearner):
    """Owns the model and optimizer; `update` learns from one batch of unrolls, bumps the version."""

    def __init__(self, model: ActorCritic, cfg: ImpalaConfig, device: str | torch.device = "cpu",
                 total_steps: int | None = None, precision: Precision = "fp32") -> None:
        if cfg.num_minibatches < 1 or cfg.update_epochs < 1:
            raise ConfigError("update_epochs and num_minibatches must be >= 1")
        if cfg.num_minibatches > cfg.unrolls_per_batch:
            raise ConfigError(f"num_minibatches={cfg.num_minibatches} exceeds unrolls_per_batch="
                              f"{cfg.unrolls_per_batch}: a minibatch needs at least one unroll")
        self.device = torch.device(device)
        model = model.to(self.device)
        super().__init__(model, make_optimizer(model, cfg), total_steps, name="IMPALA",
                         max_grad_norm=cfg.max_grad_norm, precision=precision)
        self.cfg = cfg

    def update(self, unrolls: Unrolls) -> dict[str, float]:
        """One update (epochs x minibatches of gradient steps); raises NonFiniteLossError
        (`seedpool.algos.gradient`) with the parameters of the failing gradient step untouched."""
        lr = linear_decay(self.cfg.learning_rate, self.progress, self.cfg.anneal_lr)
        set_learning_rate(self.optimizer, lr)
        batch = unrolls_to_tensors(unrolls, self.device, is_recurrent(self.model))
        if self.cfg.reward_scale != 1.0:
            batch["rewards"] = batch["rewards"] * self.cfg.reward_scale
        self.model.train()
        clip = None if self.cfg.clip_coef is None else linear_decay(self.cfg.clip_coef, self.progress,
                                                                    self.cfg.anneal_clip)
        if clip is None:
            targets = None
        else:
            with self.gradient.autocast():
                targets = appo_targets(self.model, batch, self.cfg)
        B = batch["actions"].shape[1]
        for _ in range(self.cfg.update_epochs):
            order = torch.randperm(B, device=self.device) if self.cfg.num_minibatches > 1 else torch.arange(B)
            for idx in order.chunk(self.cfg.num_minibatches):
                loss, parts, grad_norm = self._step(batch, targets, idx, clip)
        # Observation statistics (--model.obs-norm) move between updates, and reach the actors
        # with the weights (the server is published the whole state_dict, buffers included).
        observe = getattr(self.model, "observe", None)
        if observe is not None:
            observe(batch["obs"][:-1][batch["valid"]])
        lag = self.version - unrolls.versions
        self._advance(unrolls.actions.shape[0] * unrolls.actions.shape[1])
        metrics = {k: float(v) for k, v in parts.items()}
        metrics.update({
            "losses/loss": float(loss.detach()),
            "losses/grad_norm": float(grad_norm),
            "charts/learning_rate": lr,
            "charts/policy_lag_mean": float(lag.mean()),
            "charts/policy_lag_max": float(lag.max()),
            **self.gradient.profile(),
        })
        return metrics

    def _step(self, batch: Batch, targets: dict | None, idx: torch.Tensor, clip: float | None):
        """One gradient step on the unrolls (columns) ``idx``."""
        whole = len(idx) == batch["actions"].shape[1]
        mb = batch if whole else {k: take_rows(v, idx, dim=unroll_axis(k)) for k, v in batch.items()}
        with self.gradient.autocast():
            if targets is None:
                loss, parts = impala_loss(self.model, mb, self.cfg)
            else:
                mb_targets = targets if whole else {k: take_rows(v, idx, dim=1) for k, v in targets.items()}
                loss, parts = appo_loss(self.model, mb, mb_targets, self.cfg, clip)
        grad_norm = self.gradient(loss, self.version)
        return loss, parts, grad_norm
