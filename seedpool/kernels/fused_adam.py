"""Fused Adam called directly: ``optimizer.step()`` without torch's Python wrapper around the kernel.

torch's ``Optimizer.step`` wraps the fused kernel in Python: profiler hooks, a gradient-mode
switch, a loop over the parameters to find their state, a regrouping by device and dtype. For one
flat parameter that wrapper is a large part of a small step, paid by every critic, actor and
temperature step of the off-policy learners (``benchmarks/offpolicy_update.py`` measures those
updates). Here
the same two operations run (the step counts' increment, then ``_fused_adam_``) on the same state
tensors, so checkpoints and ``load_state_dict`` see no difference. Every hyperparameter (``lr``,
``betas``, ``eps``, ``weight_decay``, ``maximize``) is read from the param groups at each step.
"""
from __future__ import annotations

from typing import Callable

import torch


def fused_adam_step(optimizer: torch.optim.Optimizer) -> Callable[[], None] | None:
    """A step function for a fused `torch.optim.Adam` (None for any other optimizer): it calls the
    kernel directly when it can, else torch's own ``step``."""
    if type(optimizer) is not torch.optim.Adam or not all(g.get("fused") for g in optimizer.param_groups):
        return None
    return lambda: optimizer_step(optimizer)


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``; a fused Adam whose state exists calls its kernel directly.

    Anything else (the first step, which creates the state; AMSGrad, AdamW, a tensor learning
    rate, mixed devices or dtypes, a parameter without gradient) takes torch's own ``step``."""
    if type(optimizer) is not torch.optim.Adam:
        optimizer.step()
        return
    groups = []
    for group in optimizer.param_groups:
        params = group["params"]
        states = [optimizer.state.get(p) for p in params]
        if (not group.get("fused") or group["amsgrad"] or group.get("capturable") or group.get("differentiable")
                or group.get("decoupled_weight_decay") or isinstance(group["lr"], torch.Tensor)
                or not all(states) or any(p.grad is None for p in params)
                or len({(p.device, p.dtype) for p in params}) > 1):
            optimizer.step()
            return
        groups.append((group, params, states))
    for group, params, states in groups:
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                           [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False, lr=group["lr"], beta1=beta1,
                           beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                           maximize=group["maximize"], grad_scale=None, found_inf=None)
