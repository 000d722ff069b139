"""Where time goes: named phase accumulators (read by runs as ``time/<phase>`` metrics)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class PhaseTimer:
    """Accumulates wall-clock seconds per phase (env, inference, learn, ...)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        """Add seconds to a phase (for hot loops that time themselves with perf_counter)."""
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed block as phase ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def fractions(self, total: float) -> dict[str, float]:
        """Share of ``total`` seconds spent in each phase, plus "other" for the rest."""
        if total <= 0:
            return {}
        shares = {k: v / total for k, v in self.seconds.items()}
        shares["other"] = max(0.0, 1.0 - sum(shares.values()))
        return shares

    def state_dict(self) -> dict[str, float]:
        """The accumulated seconds (kept across resumes)."""
        return dict(self.seconds)

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Continue from saved seconds."""
        self.seconds = {str(k): float(v) for k, v in state.items()}
