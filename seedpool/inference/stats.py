"""Thread-safe counters for the inference server, read and reset once per metrics window."""

from __future__ import annotations

import threading

import numpy as np


class InferenceStats:
    """Batch-size histogram, compute and idle time, and parameter swaps since the last read."""

    def __init__(self, max_batch: int) -> None:
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._reset()
        self.total_batches = 0
        self.total_rows = 0

    def _reset(self) -> None:
        self.hist = np.zeros(self.max_batch + 1, dtype=np.int64)
        self.compute_s = 0.0
        self.idle_s = 0.0
        self.blocked_s = 0.0
        self.swaps = 0

    def add_batch(self, rows: int, compute_s: float) -> None:
        """Count one served batch of `rows` rows."""
        with self._lock:
            self.hist[rows] += 1
            self.compute_s += compute_s
            self.total_batches += 1
            self.total_rows += rows

    def add_idle(self, seconds: float) -> None:
        """Time the server spent waiting for requests."""
        with self._lock:
            self.idle_s += seconds

    def add_blocked(self, seconds: float) -> None:
        """Time the server waited to hand unrolls to a full learner queue (back-pressure)."""
        with self._lock:
            self.blocked_s += seconds

    def add_swap(self) -> None:
        """Count one parameter swap."""
        with self._lock:
            self.swaps += 1

    def histogram(self) -> np.ndarray:
        """Batches served per batch size (index = rows) in the current window."""
        with self._lock:
            return self.hist.copy()

    def read(self, reset: bool = True) -> dict[str, float]:
        """Window metrics: batch size mean/p10/p50/p90/fill; seconds computing, idle and blocked."""
        with self._lock:
            hist, compute_s, idle_s, swaps = self.hist.copy(), self.compute_s, self.idle_s, self.swaps
            blocked_s = self.blocked_s
            if reset:
                self._reset()
        out = {"inference/compute_s": compute_s, "inference/idle_s": idle_s,
               "inference/blocked_s": blocked_s,
               "inference/param_swaps": float(swaps), "inference/batches": float(hist.sum())}
        if hist.sum() > 0:
            sizes = np.arange(len(hist))
            cdf = np.cumsum(hist) / hist.sum()
            mean = float((sizes * hist).sum() / hist.sum())
            out.update({
                "inference/batch_mean": mean,
                "inference/batch_p10": float(np.searchsorted(cdf, 0.1)),
                "inference/batch_p50": float(np.searchsorted(cdf, 0.5)),
                "inference/batch_p90": float(np.searchsorted(cdf, 0.9)),
                "inference/batch_fill": mean / self.max_batch,
            })
        return out
