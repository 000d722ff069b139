"""A run's learning curve as a committed table: mean of the last 20 whole episodes per step.

    python benchmarks/learning_curve.py RUN_DIR --out benchmarks/results/NAME.md [--target 15] [--every 100000]
        [--metric charts/episodic_return/eps_0.0723-0.0201 --metric charts/episodic_return ...]

Reads the run's metrics.csv (returns of whole games: Atari runs log them across lives),
writes a markdown table of the 20-episode mean at every ``--every`` env steps, with the
training minutes of the last episode counted there (one column
per ``--metric``: Ape-X logs each epsilon group's returns apart), the first step the first
metric's mean reached ``--target`` (if it did), steps/s and wall-clock, with the machine
and versions, and copies the run's plot beside it (NAME.png).
"""
import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from seedpool.bench.report import machine_info
from seedpool.experiment.metrics import series
from seedpool.experiment.plot import plot_runs, smooth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--target", type=float, default=None)
    parser.add_argument("--every", type=int, default=100_000)
    parser.add_argument("--note", default="")
    parser.add_argument("--metric", action="append", default=None,
                        help="episode-return series to tabulate (default charts/episodic_return); repeatable")
    args = parser.parse_args()
    names = args.metric or ["charts/episodic_return"]
    curves = [_curve(args.run_dir / "metrics.csv", name) for name in names]
    steps, times, mean20 = curves[0]
    saved = json.loads((args.run_dir / "config.json").read_text())
    cfg = saved["config"]
    lines = [f"# {saved['algo'].upper()} on {cfg['env']}: learning curve of `{args.run_dir.name}`", ""]
    for key, value in machine_info().items():
        lines.append(f"- **{key}:** {value}")
    last = len(steps) - 1
    lines += [
        f"- **episodes (`{names[0]}`):** {len(steps)} over {int(steps[last]):,} env steps in {times[last] / 3600:.2f} h "
        f"({steps[last] / times[last]:.0f} steps/s on average)",
        f"- **config:** `{json.dumps({k: v for k, v in cfg.items() if k not in ('runs_dir', 'resume')})}`",
    ]
    if args.note:
        lines.append(f"- **note:** {args.note}")
    if args.target is not None:
        hit = np.flatnonzero((mean20 >= args.target) & (np.arange(len(mean20)) >= 19))
        lines.append(f"- **target {args.target:g} (`{names[0]}`, mean of the last 20 episodes):** " +
                     (f"first reached at {int(steps[hit[0]]):,} env steps, {times[hit[0]] / 60:.1f} min of training"
                      if hit.size else "not reached in this run"))
    header = ["env steps", "training minutes", "episodes so far"] + [f"mean of last 20: `{n}`" for n in names]
    header.append("best 20-episode mean so far")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for mark in range(args.every, int(steps[last]) + args.every, args.every):
        at = [int(np.searchsorted(s, mark, side="right")) - 1 for s, _, _ in curves]  # last episode by `mark`
        i = at[0]
        if i < 0:
            continue
        cells = [f"{min(mark, int(steps[last])):,}", f"{times[i] / 60:.1f}", str(i + 1)]
        cells += [f"{m[j]:.1f}" if j >= 0 else "" for (_, _, m), j in zip(curves, at)]
        cells.append(f"{mean20[: i + 1].max():.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    png = plot_runs([args.run_dir], args.run_dir / "curves.png")
    shutil.copy(png, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


def _curve(metrics, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, seconds, 20-episode trailing mean) of one episode-return series."""
    steps, times, returns = (np.asarray(a) for a in series(metrics, name))
    if len(steps) == 0:
        raise SystemExit(f"{metrics} has no {name!r} rows")
    return steps, times, smooth(returns)


if __name__ == "__main__":
    main()
