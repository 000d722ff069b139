"""Metric sinks: a tidy ``metrics.csv`` (step, time_s, name, value) and TensorBoard events.

Names follow the common convention: ``charts/episodic_return``, ``charts/SPS``,
``losses/*``, ``time/*``. ``time_s`` is training wall-clock time, continued across resumes,
so curves can be drawn against steps or time.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable, Mapping

from seedpool.errors import ConfigError
from seedpool.experiment.tb_events import EventFileWriter

HEADER = ["step", "time_s", "name", "value"]


class MetricsWriter:
    """Appends scalars to metrics.csv and, optionally, TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_step: int | None = None) -> None:
        self.path = Path(run_dir) / "metrics.csv"
        if resume_step is not None and self.path.exists():
            # Rows written after the checkpoint we resume from would be logged again: drop them.
            truncate_after(self.path, resume_step)
        new = not self.path.exists()
        self._file = open(self.path, "a", newline="")
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(HEADER)
        self._tb = None
        if tensorboard:  # seedpool's own scalar writer: SummaryWriter costs far more CPU per scalar (tb_events.py)
            purge = None if resume_step is None else resume_step + 1
            self._tb = EventFileWriter(Path(run_dir) / "tb", purge_step=purge)

    def write(self, step: int, time_s: float, scalars: Mapping[str, float]) -> None:
        """Record scalars at an env step; NaNs are skipped."""
        for name, value in scalars.items():
            value = float(value)
            if math.isnan(value):
                continue
            self._csv.writerow([step, f"{time_s:.3f}", name, f"{value:.6g}"])
            if self._tb is not None:
                self._tb.add_scalar(name, value, step)

    def flush(self) -> None:
        """Push buffered rows to disk."""
        self._file.flush()
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Flush and close both sinks."""
        self.flush()
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: Path) -> Iterable[tuple[int, float, str, float]]:
    """Rows of a metrics.csv as (step, time_s, name, value)."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != HEADER:
            raise ConfigError(f"{path} is not a seedpool metrics file (header {header}, expected {HEADER})")
        for row in reader:
            if len(row) == 4:  # a row cut short by a crash is skipped
                yield int(row[0]), float(row[1]), row[2], float(row[3])


def series(path: Path, name: str) -> tuple[list[int], list[float], list[float]]:
    """(steps, times, values) of one metric."""
    steps, times, values = [], [], []
    for step, t, n, v in read_metrics(path):
        if n == name:
            steps.append(step)
            times.append(t)
            values.append(v)
    return steps, times, values


def truncate_after(path: Path, step: int) -> None:
    """Keep only the rows at or before ``step`` (atomic rewrite)."""
    rows = [r for r in read_metrics(path) if r[0] <= step]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows([s, f"{t:.3f}", n, f"{v:.6g}"] for s, t, n, v in rows)
    tmp.replace(path)
