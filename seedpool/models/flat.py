"""One contiguous tensor for all of a network's parameters (and one for their gradients).

Small networks on a CPU are limited by per-tensor overhead, not arithmetic: Adam, gradient
clipping and zeroing on one flat tensor cost a few operations instead of a few per layer.
The module keeps its parameters (as views into the flat tensor), so ``state_dict`` and
``load_state_dict`` work as before.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def flatten_parameters(module: nn.Module) -> nn.Parameter:
    """Re-home every parameter of ``module`` (and its gradient) into one flat tensor; returns it.

    Call after moving the module to its device. Autograd then accumulates gradients in place
    into the views, so zero them with ``flat.grad.zero_()`` rather than setting them to None.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the module has no trainable parameters to flatten")
    for p in params:
        if not _dense(p):
            raise ValueError(f"cannot flatten a parameter with strides {p.stride()} (not dense)")
    total = sum(p.numel() for p in params)
    flat = nn.Parameter(torch.empty(total, dtype=params[0].dtype, device=params[0].device))
    flat.grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        # Views keep each parameter's memory layout (channels-last convolutions stay so).
        view = flat.data.as_strided(p.shape, p.stride(), offset)
        view.copy_(p.detach())
        p.data = view
        p.grad = flat.grad.as_strided(p.shape, p.stride(), offset)
        offset += p.numel()
    return flat


def _dense(t: torch.Tensor) -> bool:
    """True if ``t`` fills exactly ``numel`` elements in some order of its dims (no gaps)."""
    expected = 1
    for d in sorted(range(t.dim()), key=t.stride):
        if t.size(d) != 1 and t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale gradients so that their global L2 norm is at most ``max_norm``; returns the norm before."""
    grads = [p.grad for p in params if p.grad is not None]
    if len(grads) == 1:  # a flat parameter: three tensor operations
        norm = torch.linalg.vector_norm(grads[0])
        if max_norm != math.inf:  # no clipping (SAC's and TD3's default): the norm alone
            grads[0].mul_((max_norm / (norm + 1e-6)).clamp_(max=1.0))
        return norm
    if grads:
        return nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    return torch.zeros(())


def zero_grads(params: list[torch.Tensor]) -> None:
    """Zero gradients in place (keeps flat-gradient views alive)."""
    for p in params:
        if p.grad is not None:
            p.grad.zero_()
