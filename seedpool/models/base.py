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
        x = F.conv2d(obs.to(torch.float32, memory_format=memory_format), weight, conv.bias,
                     conv.stride, conv.padding, conv.dilation, conv.groups)
    return trunk[1:](x)


class FramesConvolution(torch.autograd.Function):
    """A network's first convolution over frames under autocast: the forward in float32 (exact
    ReLU masks, see `scaled_trunk`), the output and the weight gradient in ``dtype``.

    The frames need no gradient. Their pixel values (integers up to 255) are exact in bf16 and
    fp16, so the weight gradient's only rounding is the incoming gradient's, as in every other
    layer under autocast. Taken in bf16 over pixel blocks (`_blocked_weight_grad`) it costs 4.7 ms
    for 256 frames against 7.1 in float32 (the block copy included; in bf16 over the 4 input
    channels directly: 5.6; AVX-512 BF16 Zen 5), and the float32 pre-activations are never kept."""

    @staticmethod
    def forward(ctx, frames, weight, bias, conv, memory_format, dtype):
        x = frames.to(torch.float32, memory_format=memory_format)
        out = F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups)
        ctx.save_for_backward(frames, weight)
        ctx.conv, ctx.memory_format, ctx.dtype = conv, memory_format, dtype
        return out.to(ctx.dtype)

    @staticmethod
    def backward(ctx, grad):
        frames, weight = ctx.saved_tensors
        conv = ctx.conv
        grad = grad.to(ctx.dtype)
        if _blocks_apply(conv):
            weight_grad, bias_grad = _blocked_weight_grad(frames, grad, weight, conv.stride[0])
        else:
            x = frames.to(ctx.dtype, memory_format=ctx.memory_format)
            _, weight_grad, bias_grad = torch.ops.aten.convolution_backward(
                grad, x, weight.to(ctx.dtype), [weight.shape[0]], conv.stride, conv.padding,
                conv.dilation, False, [0, 0], conv.groups, [False, True, conv.bias is not None])
        bias_grad = None if bias_grad is None or conv.bias is None else bias_grad.to(weight.dtype)
        return None, weight_grad.to(weight.dtype), bias_grad, None, None, None


def _blocks_apply(conv: nn.Conv2d) -> bool:
    (kh, kw), (sh, sw) = conv.kernel_size, conv.stride
    return (sh == sw > 1 and kh == kw and kh % sh == 0 and tuple(conv.padding) == (0, 0)
            and tuple(conv.dilation) == (1, 1) and conv.groups == 1)


def _blocked_weight_grad(frames: torch.Tensor, grad: torch.Tensor, weight: torch.Tensor, s: int):
    """The weight and bias gradients of a k x k stride-s convolution computed as those of a
    (k/s) x (k/s) stride-1 convolution over s x s pixel blocks (space-to-depth): the same sums,
    over s*s*C input channels instead of C, which bf16 convolutions run ~2x as fast."""
    n, c, _, _ = frames.shape
    o, k = weight.shape[0], weight.shape[-1]
    kb = k // s
    rows, cols = grad.shape[-2] + kb - 1, grad.shape[-1] + kb - 1
    pixels = frames[:, :, :rows * s, :cols * s].permute(0, 2, 3, 1)  # [N, H, W, C]
    blocks = pixels.reshape(n, rows, s, cols, s, c).permute(0, 1, 3, 2, 4, 5)  # [N, a, b, i, j, C]
    x = torch.empty(blocks.shape, dtype=grad.dtype, device=grad.device).copy_(blocks)
    x = x.view(n, rows, cols, s * s * c).permute(0, 3, 1, 2)  # channels-last [N, (i, j, C), a, b]
    w = weight.view(o, c, kb, s, kb, s).permute(0, 3, 5, 1, 2, 4).reshape(o, s * s * c, kb, kb)
    _, w_grad, b_grad = torch.ops.aten.convolution_backward(
        grad, x, w.to(grad.dtype).contiguous(memory_format=torch.channels_last), [o], [1, 1], [0, 0],
        [1, 1], False, [0, 0], 1, [False, True, True])
    return w_grad.reshape(o, s, s, c, kb, kb).permute(0, 3, 4, 1, 5, 2).reshape(o, c, k, k), b_grad
