"""IMPALA's learner: policy gradient with V-trace advantages, a baseline loss and entropy.

The learner consumes batches of time-major unrolls (`seedpool.inference.Unrolls`) and
keeps a version number that increases with every update, so the inference server can tag
each sample with the parameters that chose it and the learner can log the policy lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from seedpool.algos.vtrace import vtrace
from seedpool.inference.server import ActOutput
from seedpool.inference.unrolls import Unrolls
from seedpool.models.base import ActorCritic


class NonFiniteLossError(FloatingPointError):
    """The loss or the gradient went NaN/inf; the parameters were left untouched."""


@dataclass
class ImpalaConfig:
    """IMPALA learner settings."""

    unroll_length: int = 20
    """T: steps per unroll sent from the inference server to the learner."""
    batch_size: int = 32
    """Unrolls per learner update (the update sees T x batch_size steps)."""
    gamma: float = 0.99
    """Discount factor."""
    lr: float = 6e-4
    """Learning rate."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run's total steps."""
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """Adam, or RMSprop as in the IMPALA paper (alpha 0.99, eps 0.01)."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus."""
    value_coef: float = 0.5
    """Weight of the baseline (value) loss."""
    max_grad_norm: float = 40.0
    """Clip the global gradient norm to this value."""
    clip_rho: float = 1.0
    """rho-bar: truncation of the importance weights in the value targets."""
    clip_pg_rho: float = 1.0
    """Truncation of the importance weights in the policy-gradient advantages."""
    clip_c: float = 1.0
    """c-bar: truncation of the trace-cutting weights."""
    vtrace_lambda: float = 1.0
    """lambda of V-trace (1.0 in the paper)."""
    clip_rewards: bool = False
    """Clip rewards to [-1, 1] in the loss (the usual choice for Atari)."""
    norm_adv: bool = False
    """Normalise the policy-gradient advantages over each batch (not in the paper; steadies small tasks)."""


def policy_act(model: ActorCritic, obs: torch.Tensor, state, first: torch.Tensor) -> ActOutput:
    """The inference server's act function for a feed-forward actor-critic: sample, keep log-prob."""
    action, logp, _ = model.act(obs)
    return ActOutput(actions=action, logp=logp, state=state)


def make_optimizer(model: nn.Module, cfg: ImpalaConfig) -> torch.optim.Optimizer:
    """The optimizer `cfg.optimizer` names."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, eps=1e-5)
    if cfg.optimizer == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=cfg.lr, alpha=0.99, eps=0.01)
    raise ValueError(f"optimizer must be 'adam' or 'rmsprop', got {cfg.optimizer!r}")


def unrolls_to_tensors(u: Unrolls, device: torch.device) -> dict[str, torch.Tensor]:
    """Move a batch of unrolls to the learner's device, as [T(+1), B] tensors."""
    out = {name: torch.from_numpy(np.ascontiguousarray(getattr(u, name))).to(device)
           for name in ("obs", "actions", "logp", "rewards", "terminated", "valid")}
    return out


def impala_loss(model: ActorCritic, batch: dict[str, torch.Tensor],
                cfg: ImpalaConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss and its parts for one batch of unrolls (means over valid steps)."""
    obs, actions = batch["obs"], batch["actions"]
    T, B = actions.shape[:2]
    params, values = model(obs.flatten(0, 1))  # T+1 observations: the last one bootstraps
    values = values.view(T + 1, B)
    params_t = params[: T * B] if isinstance(params, torch.Tensor) else tuple(p[: T * B] for p in params)
    target_logp = model.head.log_prob(params_t, actions.flatten(0, 1)).view(T, B)
    entropy = model.head.entropy(params_t).view(T, B)

    rewards = batch["rewards"].float()
    if cfg.clip_rewards:
        rewards = rewards.clamp(-1.0, 1.0)
    mask = batch["valid"].float()
    discounts = cfg.gamma * (1.0 - batch["terminated"].float())
    vt = vtrace(batch["logp"].float(), target_logp.detach(), rewards, values[:T].detach(),
                values[T].detach(), discounts, clip_rho=cfg.clip_rho, clip_pg_rho=cfg.clip_pg_rho,
                clip_c=cfg.clip_c, lambda_=cfg.vtrace_lambda, mask=mask)
    n = mask.sum().clamp(min=1.0)
    adv = vt.pg_advantages
    if cfg.norm_adv:
        mean = (adv * mask).sum() / n
        std = (((adv - mean) * mask).pow(2).sum() / n).sqrt()
        adv = (adv - mean) / (std + 1e-8)
    pg_loss = -(adv * target_logp * mask).sum() / n
    value_loss = 0.5 * ((vt.vs - values[:T]).pow(2) * mask).sum() / n
    entropy_mean = (entropy * mask).sum() / n
    loss = pg_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy_mean
    ratio = (target_logp.detach() - batch["logp"]).exp()
    return loss, {
        "losses/policy_loss": pg_loss.detach(),
        "losses/value_loss": value_loss.detach(),
        "losses/entropy": entropy_mean.detach(),
        "losses/importance_ratio": (ratio * mask).sum() / n,
        "losses/vtrace_target_mean": (vt.vs * mask).sum() / n,
    }


class ImpalaLearner:
    """Owns the model and optimizer; `update` takes one batch of unrolls, bumps the version."""

    def __init__(self, model: ActorCritic, cfg: ImpalaConfig, device: str | torch.device = "cpu",
                 total_steps: int | None = None) -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.cfg = cfg
        self.optimizer = make_optimizer(self.model, cfg)
        self.total_steps = total_steps
        self.version = 0
        self.steps_trained = 0

    def update(self, unrolls: Unrolls) -> dict[str, float]:
        """One gradient step; raises NonFiniteLossError (parameters untouched) on NaN/inf."""
        self._set_lr()
        batch = unrolls_to_tensors(unrolls, self.device)
        self.model.train()
        loss, parts = impala_loss(self.model, batch, self.cfg)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"IMPALA loss is {loss.item()} at learner version {self.version}: "
                                     f"{ {k: float(v) for k, v in parts.items()} }")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        if not torch.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(f"gradient norm is {grad_norm.item()} at learner version {self.version}")
        self.optimizer.step()
        lag = self.version - unrolls.versions
        self.version += 1
        self.steps_trained += unrolls.actions.shape[0] * unrolls.actions.shape[1]
        metrics = {k: float(v) for k, v in parts.items()}
        metrics.update({
            "losses/loss": float(loss.detach()),
            "losses/grad_norm": float(grad_norm),
            "charts/learning_rate": self.optimizer.param_groups[0]["lr"],
            "charts/policy_lag_mean": float(lag.mean()),
            "charts/policy_lag_max": float(lag.max()),
        })
        return metrics

    def _set_lr(self) -> None:
        if self.cfg.anneal_lr and self.total_steps:
            frac = max(0.0, 1.0 - self.steps_trained / self.total_steps)
            for group in self.optimizer.param_groups:
                group["lr"] = self.cfg.lr * frac

    def state_dict(self) -> dict:
        """Model, optimizer and counters, for checkpoints."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "version": self.version, "steps_trained": self.steps_trained}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` saved."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = int(state["version"])
        self.steps_trained = int(state["steps_trained"])
