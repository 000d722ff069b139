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

    The first convolution's forward computes in float32 even under bf16 autocast. A trained Atari
    policy can set its first layer so that the constant background sits just at the ReLU
    threshold; bf16's rounding of the weights (~0.4%) then moves those pre-activations across it,
    and the background positions pass gradients they should not, or block ones they should: on a
    trained Pong policy 2.1% of the first layer's ReLUs flipped and its weight gradient was 28-44%
    away from float32's (2.5% with this layer in float32; `benchmarks/precision_gradients.py`).
    Under autocast only that forward is float32 (`FramesConvolution`): its output, the ReLU after
    it and its weight gradient are in the autocast dtype, as every other layer's."""
    conv = trunk[0]
    device_type = obs.device.type
    weight = conv.weight * scale
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        with torch.autocast(device_type, enabled=False):
            x = FramesConvolution.apply(obs, weight, conv.bias, conv, memory_format, dtype)
    else:
        x = float32_convolution(conv, obs, weight, conv.bias, memory_format)
    return trunk[1:](x)


def float32_convolution(conv: nn.Conv2d, frames: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                        memory_format: torch.memory_format) -> torch.Tensor:
    """``conv``'s geometry with ``weight`` and ``bias`` over the frames as float32 in ``memory_format``."""
    x = frames.to(torch.float32, memory_format=memory_format)
    return F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)


class FramesConvolution(torch.autograd.Function):
    """A network's first convolution over frames under autocast: the forward in float32 (exact
    ReLU masks, see `scaled_trunk`), the output and the weight gradient in ``dtype``.

    The frames need no gradient. Their pixel values (integers up to 255) are exact in bf16 and
    fp16, so the weight gradient's only rounding is the incoming gradient's, as in every other
    layer under autocast. In bf16 it costs less than the float32 layer on bf16 hardware (the
    frames' cast included), and the float32 pre-activations are never kept. (Taken over 4x4
    pixel blocks, space-to-depth, it gained nothing at 256 frames and lost at DQN's 32: not
    used.)"""

    @staticmethod
    def forward(ctx, frames, weight, bias, conv, memory_format, dtype):
        out = float32_convolution(conv, frames, weight, bias, memory_format)
        ctx.save_for_backward(frames, weight)
        ctx.conv, ctx.memory_format, ctx.dtype = conv, memory_format, dtype
        return out.to(ctx.dtype)

    @staticmethod
    def backward(ctx, grad):
        frames, weight = ctx.saved_tensors
        conv = ctx.conv
        x = frames.to(ctx.dtype, memory_format=ctx.memory_format)
        _, weight_grad, bias_grad = torch.ops.aten.convolution_backward(
            grad.to(ctx.dtype), x, weight.to(ctx.dtype), [weight.shape[0]], conv.stride, conv.padding,
            conv.dilation, False, [0, 0], conv.groups, [False, True, conv.bias is not None])
        bias_grad = None if bias_grad is None else bias_grad.to(weight.dtype)
        return None, weight_grad.to(weight.dtype), bias_grad, None, None, None
