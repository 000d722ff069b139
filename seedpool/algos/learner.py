"""The face every learner shows to the runners, and what all of them share.

A runner (the synchronous sampler loop, or the central-inference system) drives any
algorithm through these calls only, so the algorithm file holds just its mathematics:

    metrics = learner.update(batch)        # one update on a batch (a Rollout, Unrolls, ...)
    learner.version                         # bumped by every update; tags acting parameters
    learner.model                           # the network acting uses
    learner.state_dict() / load_state_dict(state)   # model, optimizer, counters

Schedules (learning rate, and anything else annealed) are owned by the learner and read
its own `progress`, the fraction of the run's env steps it has trained on. Every gradient
step goes through the learner's `GradientStep` (`seedpool.algos.gradient`): backward, clip,
non-finite check, optimizer step, and the learner profile.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from seedpool.algos.gradient import GradientStep, NonFiniteLossError, Precision

__all__ = ["GradientLearner", "GradientStep", "Learner", "NonFiniteLossError", "linear_decay",
           "set_learning_rate"]


class Learner(Protocol):
    """An algorithm's update, as runners see it."""

    model: nn.Module
    version: int

    def update(self, batch: Any) -> dict[str, float]:
        """Learn from one batch; returns namespaced scalars (``losses/...``, ``charts/...``)."""

    def state_dict(self) -> dict:
        """Everything a resumed run needs: model, optimizer, counters."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""


class GradientLearner:
    """What every gradient-based learner keeps: model, optimizer, its gradient step, version,
    env steps trained on.

    Subclasses write `update`: compute a loss inside ``self.gradient.autocast()``, hand it to
    ``self.gradient(loss, self.version)``, and call `_advance(env_steps)` once an update succeeded.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, total_steps: int | None, *,
                 name: str, max_grad_norm: float | None, precision: Precision = "fp32") -> None:
        self.model = model
        self.optimizer = optimizer
        self.gradient = GradientStep(optimizer, max_grad_norm, name, precision)
        self.total_steps = total_steps
        self.version = 0
        self.steps_trained = 0

    @property
    def progress(self) -> float:
        """Fraction of the run's env steps trained on so far (drives the schedules)."""
        return self.steps_trained / self.total_steps if self.total_steps else 0.0

    def _advance(self, env_steps: int) -> None:
        self.version += 1
        self.steps_trained += env_steps

    def state_dict(self) -> dict:
        """Model, optimizer and counters."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "version": self.version, "steps_trained": self.steps_trained}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = int(state["version"])
        self.steps_trained = int(state["steps_trained"])


def linear_decay(initial: float, progress: float, enabled: bool = True) -> float:
    """``initial`` at progress 0, falling linearly to 0 at progress 1 (constant when not enabled)."""
    if not enabled:
        return initial
    return initial * max(0.0, 1.0 - progress)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every parameter group's learning rate."""
    for group in optimizer.param_groups:
        group["lr"] = lr

