"""Learning curves of one or several runs: return against env steps and against wall time."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from seedpool.experiment.metrics import series
from seedpool.experiment.run import RunDirError, read_run_config

RETURN = "charts/episodic_return"


def smooth(values: np.ndarray, window: int = 20) -> np.ndarray:
    """Trailing mean over up to ``window`` episodes (the "last 20 episodes" of the progress line)."""
    if len(values) == 0:
        return values
    c = np.cumsum(np.insert(values.astype(np.float64), 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(0, idx - window)
    return (c[idx] - c[lo]) / (idx - lo)


def load_curve(run_dir: Path) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(label, steps, seconds, smoothed returns) of a run folder."""
    algo, cfg = read_run_config(run_dir)
    metrics = Path(run_dir) / "metrics.csv"
    if not metrics.is_file():
        raise RunDirError(f"{run_dir} has no metrics.csv yet: nothing to plot")
    steps, times, values = series(metrics, RETURN)
    label = f"{cfg.get('env', '?')} {algo}"
    return label, np.asarray(steps, float), np.asarray(times, float), smooth(np.asarray(values, float))


def _band(ax, xs: list[np.ndarray], ys: list[np.ndarray], label: str) -> None:
    """One line per group: the mean over runs, shaded between the lowest and highest run."""
    if len(xs) == 1:
        ax.plot(xs[0], ys[0], label=label)
        return
    hi = min(x[-1] for x in xs)
    grid = np.linspace(max(x[0] for x in xs), hi, 200)
    stacked = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys)])
    (line,) = ax.plot(grid, stacked.mean(0), label=f"{label} ({len(xs)} runs)")
    ax.fill_between(grid, stacked.min(0), stacked.max(0), color=line.get_color(), alpha=0.25)


def plot_runs(run_dirs: list[Path], out: Path) -> Path:
    """Draw every run's curve into ``out`` (PNG); runs with the same env and algo share a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = defaultdict(list)
    for run_dir in run_dirs:
        label, steps, times, returns = load_curve(Path(run_dir))
        if len(steps):
            groups[label].append((steps, times, returns))
    if not groups:
        raise RunDirError(f"no finished episodes in {', '.join(map(str, run_dirs))}: nothing to plot yet")
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for label, curves in groups.items():
        _band(ax_steps, [c[0] for c in curves], [c[2] for c in curves], label)
        _band(ax_time, [c[1] for c in curves], [c[2] for c in curves], label)
    ax_steps.set_xlabel("env steps")
    ax_time.set_xlabel("wall-clock seconds")
    ax_steps.set_ylabel("episodic return (mean of last 20)")
    for ax in (ax_steps, ax_time):
        ax.grid(alpha=0.3)
    ax_steps.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
