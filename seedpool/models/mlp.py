"""MLP actor-critic for flat vector observations (CartPole, Pendulum, MuJoCo-like tasks)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from seedpool.models.base import ActorCritic, layer_init
from seedpool.models.distributions import CategoricalHead, GaussianHead, Params

_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


class MLPActorCritic(ActorCritic):
    """Separate policy and value MLPs (as SB3 and CleanRL use for vector observations).

    The two hidden stacks have the same shape, so they are stored as one stack of paired
    weights ``[2, in, out]`` and evaluated with batched matrix products: the same maths as two
    networks, in half the tensor operations (what limits small networks on a CPU).
    """

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
        self.activation = _ACTIVATIONS[activation]
        sizes = [obs_dim, *hidden]
        self.weights = nn.ParameterList(_paired_orthogonal(i, o) for i, o in zip(sizes[:-1], sizes[1:]))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(2, 1, o)) for o in sizes[1:])
        # Iterating a ParameterList costs microseconds per item; the forward pass runs per env step.
        self._layers = list(zip(self.weights, self.biases))
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
        h = x.unsqueeze(0).expand(2, *x.shape)  # the same input to both stacks
        for w, b in self._layers:
            h = self.activation(torch.baddbmm(b, h, w))
        out = self.pi_head(h[0])
        value = F.linear(h[1], self.vf_head.weight, self.vf_head.bias).squeeze(-1)
        if self.continuous:
            return (out, self.log_std.expand_as(out)), value
        return out, value


def _paired_orthogonal(fan_in: int, fan_out: int) -> nn.Parameter:
    """Two independent orthogonal ``[fan_in, fan_out]`` matrices with gain sqrt(2)."""
    w = torch.empty(2, fan_out, fan_in)
    for k in range(2):
        nn.init.orthogonal_(w[k], math.sqrt(2))
    return nn.Parameter(w.transpose(1, 2).contiguous())
