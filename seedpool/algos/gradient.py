"""The one gradient step every learner takes.

    loss -> backward -> clip the global gradient norm -> non-finite check -> optimizer step

A learner computes its loss (inside :meth:`GradientStep.autocast`, where the precision
asks for it) and hands it to its :class:`GradientStep`; everything after the loss is done
here, the same way for PPO, IMPALA/APPO and DQN/Ape-X:

- gradients are cleared before the backward pass (a flat parameter's in place: its gradient
  holds views that must stay alive, `seedpool.models.flat`);
- the loss and the gradient norm are checked for NaN/inf in one host sync **before** the
  optimizer steps: a non-finite step raises :class:`NonFiniteLossError` with the
  parameters and the optimizer state exactly as they were (the gradients are zeroed);
- the step keeps the learner's profile: gradient steps taken and the seconds spent in
  backward and in the optimizer (clip and check included), read by :meth:`profile`.

Precision: master weights, optimizer state, losses and returns stay float32. ``"bf16"``
runs the forward passes under ``torch.autocast`` with bfloat16 (the `autocast` of
`seedpool.models.precision`, which acting uses too); bf16 has float32's exponent range, so
no loss scaling is needed. The models hand float32 to the distributions and losses.
Choosing the precision per machine is the run's job (`resolve_precision`); this module
carries out the one it is given.
"""
from __future__ import annotations

import contextlib
import math
import time

import torch

from seedpool.errors import ConfigError
from seedpool.models.flat import clip_grad_norm, zero_grads
from seedpool.models.precision import PRECISIONS, Precision, autocast


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``; a fused Adam whose state exists calls its kernel directly.

    torch's ``Optimizer.step`` wraps the kernel in Python: profiler hooks, a gradient-mode
    switch, a loop over the parameters to find their state, a regrouping by device and dtype.
    For one flat parameter that is ~130 us of a ~200 us step on a 2-core CPU (the kernel
    ~70 us), paid by every critic, actor and temperature step of the off-policy learners.
    Here the same two operations run (the step counts' increment, then ``_fused_adam_``) on the
    same state tensors, so checkpoints and ``load_state_dict`` see no difference; anything else
    (the first step, which creates the state; AMSGrad, AdamW, a tensor learning rate, mixed
    devices or dtypes, a parameter without gradient) takes torch's own ``step``."""
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


class NonFiniteLossError(FloatingPointError):
    """The loss or the gradient went NaN/inf; training must stop before a checkpoint could save it.

    Raised before the optimizer steps, so the parameters and the optimizer state are those
    of the last good step."""


class GradientStep:
    """Backward, clip, check and step for one optimizer (see the module docstring).

    ``name`` prefixes error messages (``"PPO"``, ``"IMPALA"``, ``"DQN TD"``);
    ``max_grad_norm`` None or inf turns clipping off (the norm is still checked).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, max_grad_norm: float | None, name: str,
                 precision: Precision = "fp32") -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.max_grad_norm = float("inf") if max_grad_norm is None else float(max_grad_norm)
        self.name = name
        self.precision = precision
        self.device_type = self.params[0].device.type if self.params else "cpu"
        self.steps = 0
        self._seconds = {"backward": 0.0, "optimizer": 0.0}

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context the learner computes its forward passes and loss in."""
        return autocast(self.precision, self.device_type)

    def __call__(self, loss: torch.Tensor, version: int) -> torch.Tensor:
        """Take one step on ``loss``; returns the gradient norm before clipping (a 0-d tensor).

        ``version`` is the learner's version, named in the error of a non-finite step."""
        start = time.perf_counter()
        self._zero_grads()
        loss.backward()
        return self.apply(loss, version, start)

    def apply(self, loss: torch.Tensor, version: int, started: float) -> torch.Tensor:
        """Clip, check and step on gradients already in the parameters' ``.grad``: the rest of
        `__call__`, for learners that compute gradients by hand (`seedpool.algos.offpolicy_gradients`).

        ``started`` is the `time.perf_counter` reading when the gradient computation began
        (counted as backward time); returns the gradient norm before clipping."""
        start, mid = started, time.perf_counter()
        norm = clip_grad_norm(self.params, self.max_grad_norm)
        self.check(loss.detach(), norm, version)
        optimizer_step(self.optimizer)
        self.steps += 1
        end = time.perf_counter()
        self._seconds["backward"] += mid - start
        self._seconds["optimizer"] += end - mid
        return norm

    def check(self, loss: torch.Tensor | None, grad_norm: torch.Tensor | float, version: int) -> None:
        """Raise NonFiniteLossError (gradients zeroed) unless the loss and gradient norm are finite.

        Learners whose gradients are computed elsewhere (the NumPy PPO kernel) call this
        between their backward pass and their optimizer update, with a float norm."""
        # One host sync for both: a NaN or inf in either makes the sum non-finite (and a sum
        # that overflows float32 from finite parts is no step worth taking either).
        total = grad_norm if loss is None else loss.float() + grad_norm
        if math.isfinite(float(total)):
            return
        self._zero_grads()
        loss_text = "" if loss is None else f"{self.name} loss is {float(loss):.4g}, "
        raise NonFiniteLossError(
            f"{loss_text}{self.name} gradient norm is {float(grad_norm):.4g}: not finite at learner version "
            f"{version}; the step was refused and the parameters and optimizer state are those of the "
            "last good step. Check the rewards and observations fed to the learner, or lower the "
            "learning rate")

    def _zero_grads(self) -> None:
        # A flat parameter's gradient holds the views its layers accumulate into: zero it in
        # place. Separate tensors: drop the gradients, so backward writes them instead of adding.
        if len(self.params) == 1:
            zero_grads(self.params)
        else:
            self.optimizer.zero_grad(set_to_none=True)

    def record(self, seconds: float) -> None:
        """Count a step taken outside :meth:`__call__` (the NumPy PPO kernel) and its seconds."""
        self.steps += 1
        self._seconds["optimizer"] += seconds

    def profile(self) -> dict[str, float]:
        """The learner profile: gradient steps and cumulative seconds per part of the step."""
        return {"charts/gradient_steps": float(self.steps),
                **{f"time/learner_{k}": v for k, v in self._seconds.items()}}

