"""Watch a trainer's run from the outside: what its `Training` holds when it starts and ends."""
from __future__ import annotations

from typing import Any, Callable

from seedpool.experiment.training import Training


def spy_training(monkeypatch, start: Callable[[Training], Any], end: Callable[[Training], Any]) -> None:
    """Call ``start(training)`` when `Training.train` begins (after any restore) and
    ``end(training)`` when it returns (after the last checkpoint)."""
    real = Training.train

    def train(self: Training):
        start(self)
        result = real(self)
        end(self)
        return result

    monkeypatch.setattr(Training, "train", train)
