"""Acting of the continuous agents (SAC, TD3, DDPG) in NumPy, for a CPU float32 actor.

One env's row through a small MLP is a dozen torch operations whose fixed cost is most of the
work; the same arithmetic in NumPy, reading the actor's parameters in place, skips it. The noise
is still torch's draw from the sampler's generator, so runs stay reproducible from their seed,
and the actions are the torch actor's to float32 rounding (tests/test_offpolicy.py). Samplers
reach it through `seedpool.kernels.continuous_acting`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from seedpool.kernels.mlp_grad import Layers, linear_layers
from seedpool.models.continuous import ContinuousAgent, log_std_of

UnitAction = Callable[..., torch.Tensor]
"""``unit_action(obs, deterministic=False, generator=None) -> unit actions [B, A]``, as
`ContinuousAgent.unit_action`."""


def numpy_unit_action(agent: ContinuousAgent) -> UnitAction | None:
    """`ContinuousAgent.unit_action` in NumPy for this agent, or None when its actor is not a CPU
    float32 MLP of Linear layers with one ReLU or Tanh between them."""
    try:
        layers = linear_layers(agent.actor.net)
    except ValueError:
        return None
    if any(m.weight.dtype != torch.float32 or m.weight.device.type != "cpu" for m in layers[0]):
        return None

    def unit_action(obs: torch.Tensor, deterministic: bool = False,
                    generator: torch.Generator | None = None) -> torch.Tensor:
        if obs.device.type != "cpu" or torch.is_autocast_enabled("cpu"):
            return agent.unit_action(obs, deterministic, generator)  # bf16 acting stays in torch
        x = agent.normalize(obs).flatten(1).float().numpy()
        return torch.from_numpy(_unit_action(layers, x, agent.stochastic, deterministic, generator))

    return unit_action


def numpy_forward(layers: Layers, x: np.ndarray) -> np.ndarray:
    """The MLP on float32 rows ``x`` in NumPy, reading a CPU float32 MLP's parameters in place: the
    same arithmetic as `seedpool.kernels.mlp_grad.mlp_forward`, to float32 rounding."""
    linears, act = layers
    for i, layer in enumerate(linears):
        x = x @ layer.weight.detach().numpy().T
        x += layer.bias.detach().numpy()
        if i < len(linears) - 1:
            if act is nn.ReLU:
                np.maximum(x, 0.0, out=x)
            else:
                np.tanh(x, out=x)
    return x


def _unit_action(layers: Layers, x: np.ndarray, stochastic: bool, deterministic: bool,
                 generator: torch.Generator | None) -> np.ndarray:
    """The actor's unit actions for normalised float32 rows ``x``."""
    out = numpy_forward(layers, x)
    if not stochastic:
        return np.tanh(out)
    mean, raw = np.split(out, 2, axis=1)
    if deterministic:
        return np.tanh(mean)
    log_std = log_std_of(np.tanh(raw))
    noise = torch.randn(mean.shape, generator=generator).numpy()
    return np.tanh(mean + np.exp(log_std) * noise)
