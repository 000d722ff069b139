"""PBT with four members on a MinAtar game, against the same four members without PBT and against
the default configuration, for the same total env steps.

    .venv/bin/python benchmarks/pbt_minatar.py [--game Breakout] [--steps 1000000] [--population 4]

1. `seedpool tune ppo --env MinAtar/<Game>-v1 --pbt` as a user runs it (a subprocess), over the
   learning rate, the entropy coefficient and the clip range, each member ``--steps`` env steps.
2. The same members without PBT: each member's first hyperparameters (the experiment's
   tune.json, drawn with the same seed) and seed, ``--steps`` env steps, no exploit or explore.
3. The default configuration (``ppo_defaults``) with the members' seeds, ``--steps`` each.

Groups 2 and 3 train ``--jobs`` runs at a time (default: the cores). Each group's total is
population x steps. Writes results/pbt_minatar_<game>.md (final 20-episode means per member,
best and mean per group, wall time, the best PBT member's hyperparameter history, the machine)
and results/pbt_minatar_<game>.png (every member's curve, by group).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from seedpool.bench.report import machine_info, write_markdown
from seedpool.experiment.metrics import series
from seedpool.experiment.plot import RETURN, smooth

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SPACE = ["learning_rate=loguniform(3e-5,3e-3)", "ent_coef=choice(0,0.001,0.01,0.03)", "clip_coef=uniform(0.1,0.3)"]


def curve(run_dir: Path) -> tuple[list[int], list[float]]:
    """(env steps, mean of the last 20 episodes) of a run folder's episodes."""
    steps, _, values = series(Path(run_dir) / "metrics.csv", RETURN)
    return steps, smooth(np.asarray(values, float)).tolist()


def train_alone(cfg) -> dict:
    """One run to its budget (a worker process): its folder, final 20-episode mean, seconds."""
    from seedpool.runs import build_run

    t0 = time.monotonic()
    run = build_run("ppo", cfg)
    try:
        run.advance()
        final = run.recent_return
    finally:
        run.close()
    return {"run_dir": str(run.dir), "final": final, "seconds": time.monotonic() - t0}


def run_tune(args, runs: Path) -> tuple[Path, float]:
    """The PBT experiment through the command line; its folder and wall seconds."""
    cmd = [sys.executable, "-m", "seedpool.cli", "tune", "ppo", "--env", f"MinAtar/{args.game}-v1", "--pbt",
           "--population", str(args.population), "--total-timesteps", str(args.steps),
           "--perturbation-interval", str(args.steps // args.reports), "--seed", str(args.seed),
           "--runs-dir", str(runs), "--no-tensorboard", "--tune.space", *SPACE]
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    (folder,) = runs.glob("tune__*")
    return folder, time.monotonic() - t0


def run_group(configs: list, jobs: int) -> tuple[list[dict], float]:
    t0 = time.monotonic()
    # spawn: a fork of this process (torch imported, its threads started) may hang in the child.
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(train_alone, configs))
    return done, time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps per member")
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--reports", type=int, default=20, help="reports per member (the perturbation interval)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=None,
                        help="report path without suffix (default results/pbt_minatar_<game>)")
    args = parser.parse_args()

    from seedpool.trainers.ppo import ppo_defaults
    from seedpool.tune import results
    from seedpool.tune.options import ExperimentSpec

    with tempfile.TemporaryDirectory(prefix="pbt-minatar-") as tmp:
        runs = args.keep or Path(tmp)
        folder, pbt_s = run_tune(args, runs / "pbt")
        spec = ExperimentSpec.load(folder)
        reports = results.load_reports(folder)
        finals = results.final_reports(reports)
        best = json.loads((folder / results.BEST).read_text())
        alone_cfgs = [dataclasses.replace(spec.member_config(k, values), runs_dir=runs / "alone" / str(k),
                                          progress="off", tensorboard=False)
                      for k, values in enumerate(spec.initial)]
        alone, alone_s = run_group(alone_cfgs, args.jobs)
        default = ppo_defaults(f"MinAtar/{args.game}-v1")
        default_cfgs = [dataclasses.replace(default, seed=c.seed, total_timesteps=args.steps, torch_threads=1,
                                            runs_dir=runs / "default" / str(k), progress="off", tensorboard=False)
                        for k, c in enumerate(alone_cfgs)]
        defaults, default_s = run_group(default_cfgs, args.jobs)
        groups = {
            "PBT": [(m, finals[m]["metric"], curve(finals[m]["run_dir"])) for m in sorted(finals)],
            "same members without PBT": [(k, r["final"], curve(r["run_dir"])) for k, r in enumerate(alone)],
            "default configuration": [(k, r["final"], curve(r["run_dir"])) for k, r in enumerate(defaults)],
        }
        out = args.out or RESULTS / f"pbt_minatar_{args.game.lower()}"
        png = out.with_suffix(".png")
        _plot(groups, png, args)
        _report(args, spec, groups, best, {"PBT": pbt_s, "same members without PBT": alone_s,
                                           "default configuration": default_s}, out, default)


def _plot(groups: dict, png: Path, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (name, members), color, z in zip(groups.items(), ("C0", "C1", "C2"), (3, 2, 1)):
        for i, (_, _, (steps, values)) in enumerate(members):  # PBT on top: until an exploit its
            ax.plot(steps, values, color=color, alpha=0.8, lw=1.2, zorder=z,  # members are the others
                    label=name if i == 0 else None)
    ax.set_xlabel("env steps (each member's)")
    ax.set_ylabel("episodic return (mean of last 20)")
    ax.set_title(f"PPO on MinAtar/{args.game}-v1: {args.population} members x {args.steps:,} env steps per group")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)


def _report(args, spec, groups: dict, best: dict, seconds: dict, out: Path, default) -> None:
    from seedpool.tune.results import fmt

    total = args.population * args.steps
    lines = [f"# PBT on MinAtar/{args.game}-v1: PPO, {args.population} members, {total:,} env steps per group", "",
             f"`benchmarks/pbt_minatar.py --game {args.game} --steps {args.steps} --population {args.population} "
             f"--reports {args.reports} --seed {args.seed}`; ranges: {' '.join(SPACE)}; a report (PBT: an "
             f"exploit/explore decision) every {spec.perturbation_interval:,} env steps.", "",
             "Final value: the mean return of each run's last 20 episodes at the end of its budget.", "",
             "| group | final per member | best | mean | wall-clock |", "|---|---|---|---|---|"]
    for name, members in groups.items():
        finals = [f for _, f, _ in members]
        lines.append(f"| {name} | {', '.join(f'{f:.2f}' for f in finals)} | {max(finals):.2f} | "
                     f"{np.mean(finals):.2f} | {seconds[name] / 60:.1f} min |")
    lines += ["", f"Default configuration: learning_rate {default.ppo.learning_rate}, ent_coef {default.ppo.ent_coef}, "
              f"clip_coef {default.ppo.clip_coef}.", "",
              f"Members' first hyperparameters (tune.json): "
              + "; ".join(f"{k}: " + ", ".join(f"{n.split('.')[-1]} {fmt(v)}" for n, v in values.items())
                          for k, values in enumerate(spec.initial)), "",
              f"Best PBT member: {best['member']} ({best['metric']:.2f}); its weights' hyperparameters over training:", ""]
    for h in best["history"]:
        values = ", ".join(f"{n.split('.')[-1]} {fmt(v)}" for n, v in h["hyperparameters"].items())
        lines.append(f"- env steps {h['from_env_steps']:,} to {h['to_env_steps']:,}, member {h['member']}: {values}")
    png = out.with_suffix(".png")
    lines += ["", f"Curves: `{png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}`.", "", "Machine:", ""]
    lines += [f"- {k}: {v}" for k, v in machine_info().items()]
    write_markdown(out.with_suffix(".md"), lines)


if __name__ == "__main__":
    main()
