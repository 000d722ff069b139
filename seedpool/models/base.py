"""The actor-critic interface every seedpool policy network implements."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seedpool.models.distributions import ActionHead, Params


def layer_init(layer: nn.Linear | nn.Conv2d, std: float = float(np.sqrt(2)), bias: float = 0.0):
    """Orthogonal weights and constant bias: the PPO-paper initialisation."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class ActorCritic(nn.Module):
    """A policy and a value function over a batch of observations.

    Subclasses implement :meth:`forward`; everything an algorithm needs is built on it:
    ``forward(obs) -> (params, value)``, ``act(obs) -> (action, logprob, value)``,
    ``evaluate(obs, action) -> (logprob, entropy, value)``.
    """

    head: ActionHead
    recurrent = False
    """True for policies that carry state between steps (`seedpool.models.recurrent`)."""

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Distribution params and state values ``[B]`` for a batch of observations."""
        raise NotImplementedError

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``[B]``."""
        return self.forward(obs)[1].float()

    def act(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; returns ``(action, logprob, value)``."""
        params, value = float32(self.forward(obs))
        action, logprob = self.head.sample_log_prob(params, deterministic)
        return action, logprob, value

    def evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Re-score stored actions; returns ``(logprob, entropy, value)``."""
        params, value = float32(self.forward(obs))
        logprob, entropy = self.head.log_prob_entropy(params, action)
        return logprob, entropy, value


def float32(outputs):
    """A network's outputs (tensors, possibly nested in tuples) as float32: under bf16 autocast
    the last layer computes in bfloat16, but distributions, losses and stored log-probs do not."""
    if isinstance(outputs, torch.Tensor):
        return outputs.float()
    return tuple(float32(o) for o in outputs)


def scaled_trunk(trunk: nn.Sequential, obs: torch.Tensor, scale: torch.Tensor,
                 memory_format: torch.memory_format) -> torch.Tensor:
    """``trunk(obs * scale)`` for a trunk that opens with a convolution, with the scale folded
    into that convolution's weights: scaling a few thousand weights instead of every pixel
    leaves one uint8 -> float copy of the frames (no copy of the layout too when they are
    already channels-last).

    The first convolution computes in float32 even under bf16 autocast. A trained Atari policy
    can set its first layer so that the constant background sits just at the ReLU threshold;
    bf16's rounding of the weights (~0.4%) then moves those pre-activations across it, and the
    background positions pass gradients they should not, or block ones they should: on a trained
    Pong policy 2.1% of the first layer's ReLUs flipped and its weight gradient was 28-44% away from
    float32's (2.5% with this layer in float32; `benchmarks/precision_gradients.py`). The frames
    need no input gradient, so this costs one float32 forward and weight gradient (a 256-frame
    update ~1.1x)."""
    conv = trunk[0]
    x = obs.to(torch.float32, memory_format=memory_format)
    with torch.autocast(x.device.type, enabled=False):
        x = F.conv2d(x, conv.weight * scale, conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups)
    return trunk[1:](x)
