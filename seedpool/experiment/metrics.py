"""Metric sinks: a tidy ``metrics.csv`` (step, time_s, name, value), TensorBoard events,
Weights & Biases (``--track``) and any function a caller adds (`Training.add_sink`).

Names follow the common convention: ``charts/episodic_return``, ``charts/SPS``,
``losses/*``, ``time/*``. ``time_s`` is training wall-clock time, continued across resumes,
so curves can be drawn against steps or time.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol

from seedpool.errors import ConfigError
from seedpool.experiment.tb_events import EventFileWriter

HEADER = ["step", "time_s", "name", "value"]


class Sink(Protocol):
    """Where logged rows go besides metrics.csv."""

    def write(self, step: int, time_s: float, scalars: Mapping[str, float]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class CallbackSink:
    """Calls ``fn(step, time_s, scalars)`` with each logged row (NaNs already left out)."""

    def __init__(self, fn: Callable[[int, float, dict[str, float]], Any]) -> None:
        self.fn = fn

    def write(self, step: int, time_s: float, scalars: Mapping[str, float]) -> None:
        self.fn(step, time_s, dict(scalars))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class WandbSink:
    """Weights & Biases, as CleanRL's ``--track`` logs: every scalar against ``global_step``
    (env steps), the run's config, and the run folder's name as the W&B run name. Offline
    runs (``WANDB_MODE=offline``) write under the run folder for ``wandb sync`` later."""

    def __init__(self, run_dir: Path, project: str, entity: str | None, config: dict[str, Any],
                 resumed: bool) -> None:
        try:
            import wandb
        except ImportError:
            from seedpool.errors import ConfigError

            raise ConfigError("--track logs to Weights & Biases: pip install 'seedpool[wandb]'") from None
        run_dir = Path(run_dir)
        # The id is the folder's name, so a resumed run continues the same W&B run.
        self._run = wandb.init(project=project, entity=entity, name=run_dir.name, id=_wandb_id(run_dir.name),
                               config=config, dir=str(run_dir), resume="allow" if resumed else None,
                               reinit="create_new")
        self._run.define_metric("global_step")
        self._run.define_metric("*", step_metric="global_step")

    def write(self, step: int, time_s: float, scalars: Mapping[str, float]) -> None:
        self._run.log({**scalars, "global_step": step, "time_s": time_s})

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._run.finish()


def _wandb_id(name: str) -> str:
    """A W&B run id from a run folder name (W&B ids allow letters, digits, - and _)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[-128:]


def metric_sinks(cfg: Any, run_dir: Path, algo: str, resumed: bool) -> list[Sink]:
    """The sinks a run's options ask for besides metrics.csv and TensorBoard."""
    if not getattr(cfg, "track", False):
        return []
    from seedpool.experiment.config import config_to_dict

    config = {"algo": algo, **config_to_dict(cfg)}
    return [WandbSink(run_dir, cfg.wandb_project_name, cfg.wandb_entity, config, resumed)]


class MetricsWriter:
    """Appends scalars to metrics.csv and, optionally, TensorBoard and further sinks."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_step: int | None = None,
                 sinks: Iterable[Sink] = ()) -> None:
        self.sinks: list[Sink] = list(sinks)
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

    def add(self, sink: Sink) -> None:
        """Send every row logged from now on to ``sink`` too."""
        self.sinks.append(sink)

    def write(self, step: int, time_s: float, scalars: Mapping[str, float]) -> None:
        """Record scalars at an env step; NaNs are skipped."""
        kept = {}
        for name, value in scalars.items():
            value = float(value)
            if math.isnan(value):
                continue
            kept[name] = value
            self._csv.writerow([step, f"{time_s:.3f}", name, f"{value:.6g}"])
            if self._tb is not None:
                self._tb.add_scalar(name, value, step)
        if kept:
            for sink in self.sinks:
                sink.write(step, time_s, kept)

    def flush(self) -> None:
        """Push buffered rows to disk."""
        self._file.flush()
        if self._tb is not None:
            self._tb.flush()
        for sink in self.sinks:
            sink.flush()

    def close(self) -> None:
        """Flush and close every sink."""
        self.flush()
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        for sink in self.sinks:
            sink.close()


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
