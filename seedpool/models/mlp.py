"""MLP actor-critic for flat vector observations (CartPole, Pendulum, MuJoCo-like tasks)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, layer_init
from seedpool.models.distributions import CategoricalHead, GaussianHead, Params
from seedpool.models.normalize import RunningNorm

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
_FUNCTIONS = {"tanh": torch.tanh, "relu": torch.relu}


Linear = tuple[torch.Tensor, torch.Tensor]
"""A linear layer's ``(weight [out, in], bias [out])``."""


@dataclass(frozen=True)
class MLPLayers:
    """Every tensor of :meth:`MLPActorCritic.forward` (but a Gaussian policy's ``log_std``)."""

    policy: tuple[Linear, ...]
    """The policy network's layers, input first, the action head (logits or means) last."""
    value: tuple[Linear, ...]
    """The value network's layers, input first, the value head (one output) last."""
    activation: str
    """"tanh" or "relu", applied after every layer but the heads."""


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
        obs_norm: bool = False,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        if not hidden:
            raise ConfigError("hidden_sizes needs at least one layer")
        self.pi = _stack(obs_dim, hidden, activation)
        self.vf = _stack(obs_dim, hidden, activation)
        # Small policy-head init keeps the first policy close to uniform (PPO paper, CleanRL).
        self.pi_head = layer_init(nn.Linear(hidden[-1], action_dim), std=0.01)
        self.vf_head = layer_init(nn.Linear(hidden[-1], 1), std=1.0)
        self.activation = activation
        # The forward pass calls the layers' tensors directly: nn.Module calls cost several
        # microseconds each, as much as the arithmetic of a 64-wide layer on a small batch.
        self._act_fn = _FUNCTIONS[activation]
        self._cache_layers()
        self.continuous = continuous
        self.head = GaussianHead() if continuous else CategoricalHead()
        # Running observation statistics (None: the networks read observations as they come).
        self.obs_norm = RunningNorm((obs_dim,)) if obs_norm else None
        if continuous:
            # State-independent log std: the usual choice for PPO on continuous control.
            self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Distribution params and values ``[B]``."""
        x = self.features(obs)
        out = self._mlp(x, self._pi_layers)
        value = self._mlp(x, self._vf_layers).squeeze(-1)
        if self.continuous:
            return (out, self.log_std.expand_as(out)), value
        return out, value

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """What both networks read: observations flattened to ``[B, D]`` float32, standardised
        by the running statistics when the policy keeps them."""
        x = obs.flatten(1).float()
        return x if self.obs_norm is None else self.obs_norm(x)

    def observe(self, obs: torch.Tensor) -> None:
        """Merge observations ``[N, ...]`` into the running statistics (no-op without them). PPO
        calls it after each update, so that acting and learning of one rollout read the same ones."""
        if self.obs_norm is not None:
            self.obs_norm.update(obs.detach().flatten(1))

    def linear_layers(self) -> MLPLayers:
        """The live weights and biases of both networks, for code that computes them another way.

        ``forward(obs)`` is exactly, per network from ``x = self.features(obs)``:
        ``x = act(x @ w.T + b)`` for each layer but the last, then ``x @ w.T + b``. The
        tensors are the module's parameters themselves, not copies: a fast path (the NumPy
        PPO step in ``seedpool.kernels.ppo_numpy``) reads and trains them in place. Ask again
        after ``.to()``, which may replace them.
        """
        return MLPLayers(tuple(self._pi_layers), tuple(self._vf_layers), self.activation)

    def _cache_layers(self) -> None:
        self._pi_layers = [(m.weight, m.bias) for m in [*self.pi[::2], self.pi_head]]
        self._vf_layers = [(m.weight, m.bias) for m in [*self.vf[::2], self.vf_head]]

    def _apply(self, fn, recurse=True):
        # .to()/.cuda() may replace parameter objects: refresh the cached references.
        out = super()._apply(fn, recurse)
        self._cache_layers()
        return out

    def _mlp(self, x: torch.Tensor, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """The same computation as the Sequential stack plus its head."""
        for w, b in layers[:-1]:
            x = self._act_fn(F.linear(x, w, b))
        w, b = layers[-1]
        return F.linear(x, w, b)
