"""MLP actor-critic for flat vector observations (CartPole, Pendulum, MuJoCo-like tasks)."""
from __future__ import annotations

import torch
from torch import nn

from seedpool.models.base import ActorCritic, layer_init
from seedpool.models.distributions import CategoricalHead, GaussianHead, Params

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _stack(in_dim: int, hidden: tuple[int, ...], activation: str) -> nn.Sequential:
    """Linear + activation layers of the given widths."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [layer_init(nn.Linear(in_dim, width)), _ACTIVATIONS[activation]()]
        in_dim = width
    return nn.Sequential(*layers)


class MLPActorCritic(ActorCritic):
    """Separate policy and value MLPs, as SB3 and CleanRL use for vector observations."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        continuous: bool,
        hidden: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        init_log_std: float = 0.0,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        if not hidden:
            raise ValueError("hidden_sizes needs at least one layer")
        self.pi = _stack(obs_dim, hidden, activation)
        self.vf = _stack(obs_dim, hidden, activation)
        # Small policy-head init keeps the first policy close to uniform (PPO paper, CleanRL).
        self.pi_head = layer_init(nn.Linear(hidden[-1], action_dim), std=0.01)
        self.vf_head = layer_init(nn.Linear(hidden[-1], 1), std=1.0)
        self.continuous = continuous
        self.head = GaussianHead() if continuous else CategoricalHead()
        if continuous:
            # State-independent log std: the usual choice for PPO on continuous control.
            self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Distribution params and values ``[B]``."""
        x = obs.flatten(1).float()
        out = self.pi_head(self.pi(x))
        value = self.vf_head(self.vf(x)).squeeze(-1)
        if self.continuous:
            return (out, self.log_std.expand_as(out)), value
        return out, value
