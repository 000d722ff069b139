"""A run's learning curve as a committed table: mean of the last 20 whole episodes per step.

    python benchmarks/learning_curve.py RUN_DIR --out benchmarks/results/NAME.md [--target 15] [--every 100000]

Reads the run's metrics.csv (returns of whole games: Atari runs log them across lives),
writes a markdown table of the 20-episode mean at every ``--every`` env steps, the first
step the mean reached ``--target`` (if it did), steps/s and wall-clock, with the machine
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
    args = parser.parse_args()
    metrics = args.run_dir / "metrics.csv"
    steps, times, returns = (np.asarray(a) for a in series(metrics, "charts/episodic_return"))
    mean20 = smooth(returns)
    saved = json.loads((args.run_dir / "config.json").read_text())
    cfg = saved["config"]
    lines = [f"# {saved['algo'].upper()} on {cfg['env']}: learning curve of `{args.run_dir.name}`", ""]
    for key, value in machine_info().items():
        lines.append(f"- **{key}:** {value}")
    last = len(steps) - 1
    lines += [
        f"- **episodes:** {len(returns)} over {int(steps[last]):,} env steps in {times[last] / 3600:.2f} h "
        f"({steps[last] / times[last]:.0f} steps/s on average)",
        f"- **config:** `{json.dumps({k: v for k, v in cfg.items() if k not in ('runs_dir', 'resume')})}`",
    ]
    if args.note:
        lines.append(f"- **note:** {args.note}")
    if args.target is not None:
        hit = np.flatnonzero((mean20 >= args.target) & (np.arange(len(mean20)) >= 19))
        lines.append(f"- **target {args.target:g} (mean of the last 20 episodes):** " +
                     (f"first reached at {int(steps[hit[0]]):,} env steps" if hit.size else "not reached in this run"))
    lines += ["", "| env steps | episodes so far | mean of last 20 | best 20-episode mean so far |", "|---:|---:|---:|---:|"]
    for mark in range(args.every, int(steps[last]) + args.every, args.every):
        i = min(int(np.searchsorted(steps, mark, side="right")) - 1, last)
        if i < 0:
            continue
        lines.append(f"| {min(mark, int(steps[last])):,} | {i + 1} | {mean20[i]:.1f} | {mean20[: i + 1].max():.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    png = plot_runs([args.run_dir], args.run_dir / "curves.png")
    shutil.copy(png, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
