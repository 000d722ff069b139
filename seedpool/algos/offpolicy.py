"""What SAC and TD3 (and DDPG) share: replay options, the critics' TD target and loss, Polyak
targets, and the learner's optimizers (`ActorCriticLearner`).

Both learn from replay minibatches as `NStepWriter` writes them, with actions in the unit
box (`seedpool.models.continuous`)::

    batch = {"obs": [n, ...], "action": [n, A], "reward": [n], "discount": [n],
             "next_obs": [n, ...], "weights": [n], "indices": [n]}

The target of every critic is ``reward + discount * (min_k Q'_k(next_obs, a') + bonus)``,
with ``a'`` the algorithm's next action (SAC: a fresh policy draw and bonus ``-alpha log pi``;
TD3: the target actor's action plus clipped noise) and ``Q'`` the Polyak-averaged critics.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn

from seedpool.algos.gradient import GradientStep, Precision
from seedpool.algos.learner import GradientLearner
from seedpool.errors import ConfigError
from seedpool.models.flat import flatten_parameters


@dataclass
class OffPolicyConfig:
    """Replay, targets and pacing shared by SAC and TD3 (names as CleanRL's and SB3's)."""

    gamma: float = 0.99
    """Discount factor."""
    tau: float = 0.005
    """Polyak rate of the target networks: target <- tau * online + (1 - tau) * target."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions."""
    learning_starts: int = 5_000
    """Env steps of uniformly random actions before the first update (and before the policy acts)."""
    minibatch_size: int = 256
    """Transitions per gradient step (SB3 and CleanRL call it batch_size)."""
    utd_ratio: float = 1.0
    """Update-to-data ratio: gradient steps (critic updates, one minibatch each) per env step,
    summed over envs (docs/training.md "Learning per env step")."""
    train_frequency: int = 1
    """Env steps per env in each round the sampler hands the learner (which then takes
    utd_ratio x the round's env steps gradient steps, fractions carried)."""
    policy_frequency: int = 2
    """Critic steps per actor step (TD3's delayed policy updates; 1 updates the actor every step)."""
    target_network_frequency: int = 1
    """Critic steps between Polyak updates of the targets."""
    n_step: int = 1
    """Steps per TD return (the replay folds them into each row)."""
    max_grad_norm: float | None = None
    """Clip each network's global gradient norm to this value (None: no clipping, as the papers)."""
    hand_gradients: bool = True
    """Compute the gradients by hand (`seedpool.kernels.offpolicy_gradients`: the same gradients as
    autograd's, without its per-operation cost; bf16 products as autocast's); False: autograd."""


def batch_tensors(batch: Mapping[str, Any], device: torch.device) -> dict[str, torch.Tensor]:
    """A replay minibatch as float32 tensors on the learner's device."""
    out = {k: torch.as_tensor(batch[k], device=device) for k in ("obs", "next_obs")}
    for k in ("action", "reward", "discount", "weights"):
        if batch.get(k) is not None:
            out[k] = torch.as_tensor(batch[k], device=device, dtype=torch.float32)
    return out


def td_target(reward: torch.Tensor, discount: torch.Tensor, next_value: torch.Tensor) -> torch.Tensor:
    """``reward + discount * next_value``; rows whose episode ended take no bootstrap at all
    (their next_obs may be anything the replay left there, even NaN, and 0 * NaN is NaN)."""
    return reward + torch.where(discount > 0, discount * next_value, torch.zeros_like(next_value))


def critic_loss(q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """Sum over critics of each one's (IS-weighted) mean squared TD error; ``q`` is ``[K, n]``."""
    per_row = (q - target.unsqueeze(0)).pow(2)
    if weights is not None:
        per_row = per_row * weights
    return per_row.mean(-1).sum()


class PolyakTarget:
    """A frozen copy of a network, moved toward it by ``lerp`` on one flat tensor.

    The online network must have been flattened (`flatten_parameters`); its flat tensor is
    ``online_flat``.
    """

    def __init__(self, online: nn.Module, online_flat: torch.Tensor) -> None:
        self.net = copy.deepcopy(online)
        self.flat = flatten_parameters(self.net).requires_grad_(False)
        for p in (self.flat, *self.net.parameters()):
            p.grad = None  # a target never takes a gradient
        self.net.requires_grad_(False)
        self.online_flat = online_flat

    @torch.no_grad()
    def update(self, tau: float) -> None:
        """target <- tau * online + (1 - tau) * target."""
        self.flat.lerp_(self.online_flat, tau)


def adam(params: torch.Tensor, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam over one (flat) tensor, with torch's fused kernel on the devices that have one."""
    return torch.optim.Adam([params], lr=lr, fused=device.type in ("cpu", "cuda"))


class ActorCriticLearner(GradientLearner):
    """What SAC's and TD3's learners build alike: the agent on the device, one flat tensor per
    network (so that Adam and the Polyak update are one op each), the critics' Polyak target,
    the critics' Adam (the `GradientLearner`'s) and the actor's with its own `GradientStep`."""

    def __init__(self, agent: nn.Module, name: str, critic_lr: float, actor_lr: float,
                 max_grad_norm: float | None, total_steps: int | None, device: str | torch.device,
                 precision: Precision) -> None:
        self.device = torch.device(device)
        agent = agent.to(self.device)
        critic_params = flatten_parameters(agent.critic)
        self.actor_params = flatten_parameters(agent.actor)
        self.target_critic = PolyakTarget(agent.critic, critic_params)
        super().__init__(agent, adam(critic_params, critic_lr, self.device), total_steps, name=f"{name} critic",
                         max_grad_norm=max_grad_norm, precision=precision)
        self.actor_optimizer = adam(self.actor_params, actor_lr, self.device)
        self.actor_step = GradientStep(self.actor_optimizer, max_grad_norm, f"{name} actor", precision)
        self._actor_metrics: dict[str, float] = {}


class frozen:
    """Context: the module's parameters take no gradient inside (the actor's loss goes through the
    critics, whose gradients would only be computed to be thrown away)."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __enter__(self) -> None:
        self.module.requires_grad_(False)

    def __exit__(self, *exc) -> None:
        self.module.requires_grad_(True)


def check_config(cfg: OffPolicyConfig) -> None:
    """Raise ValueError for settings that cannot work, saying which."""
    if not 0.0 < cfg.tau <= 1.0:
        raise ConfigError(f"tau must be in (0, 1], got {cfg.tau}")
    if not 0.0 <= cfg.gamma <= 1.0:
        raise ConfigError(f"gamma must be in [0, 1], got {cfg.gamma}")
    if cfg.policy_frequency < 1 or cfg.target_network_frequency < 1:
        raise ConfigError(f"policy_frequency and target_network_frequency must be >= 1, got "
                          f"{cfg.policy_frequency}, {cfg.target_network_frequency}")
    if cfg.utd_ratio <= 0:
        raise ConfigError(f"utd_ratio (gradient steps per env step) must be > 0, got {cfg.utd_ratio}")


def merged_profile(*profiles: dict[str, float]) -> dict[str, float]:
    """The learner profile of several gradient steps (actor, critics, temperature) summed."""
    out: dict[str, float] = {}
    for profile in profiles:
        for k, v in profile.items():
            out[k] = out.get(k, 0.0) + v
    return out
