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

import seedpool.kernels as kernels
from seedpool.errors import ConfigError
from seedpool.models.flat import clip_grad_norm, zero_grads
from seedpool.models.precision import PRECISIONS, Precision, autocast


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
        # Asked for once: a fused Adam's kernel called directly, else optimizer.step (both read
        # the learning rate and the other settings from the param groups at every step).
        self._optimizer_step = kernels.optimizer_step(optimizer)
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
        `__call__`, for learners that compute gradients by hand (`seedpool.kernels.offpolicy_gradients`).

        ``started`` is the `time.perf_counter` reading when the gradient computation began
        (counted as backward time); returns the gradient norm before clipping."""
        start, mid = started, time.perf_counter()
        norm = clip_grad_norm(self.params, self.max_grad_norm)
        self.check(loss.detach(), norm, version)
        self._optimizer_step()
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

