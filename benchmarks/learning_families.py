"""Learning curves of issue 48's families, and the runs their trainers' defaults were chosen from.

    python benchmarks/learning_families.py run TASK VARIANT [--minutes 10] [--seed 1] [--torch-threads 1]
    python benchmarks/learning_families.py report TASK --out benchmarks/results/NAME.md [--note NOTE]

``run`` trains one variant: ``seedpool train ALGO --env ENV`` with the variant's options on top
of the env's defaults (each variant names every setting it differs in, so a record means the
same after the defaults change), until its step budget or ``--minutes`` of wall clock, then
evaluates the final policy greedily and with its own sampling, and writes a record
(``benchmarks/results/learning_families/TASK__VARIANT.json``): the curve (mean of the last 20
episodes against env steps and seconds, thinned to at most 400 points), the final 20-episode
mean, the evaluations, steps/s and the load average before and after. ``report`` writes one
table and one plot (return against env steps and against wall clock, one line per variant)
from the records of a task.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seedpool.bench.report import machine_info, write_markdown

RECORDS = Path(__file__).parent / "results" / "learning_families"
RUNS = Path("/tmp/seedpool_learning_families")
RETURN = "charts/episodic_return"


@dataclass
class Task:
    algo: str
    env: str
    variants: dict[str, list[str]]
    about: dict[str, str]
    target: float | None = None
    every: int = 100_000
    eval_episodes: int = 20
    extra: list[str] = field(default_factory=list)


# Settings every SAC variant spells out (the rest are the trainer's: 256-256 ReLU MLPs, one env,
# one update per env step, 1M replay, gamma 0.99, target entropy -6).
_SAC_PAPER = ["--sac.q-lr", "1e-3", "--sac.policy-lr", "3e-4", "--sac.tau", "0.005", "--sac.alpha", "0.2",
              "--sac.learning-starts", "5000", "--sac.minibatch-size", "256"]
_JAXRL = ["--sac.q-lr", "3e-4", "--sac.policy-lr", "3e-4", "--sac.tau", "0.005", "--sac.alpha", "1.0",
          "--sac.learning-starts", "10000", "--sac.minibatch-size", "256"]
_FAST = ["--sac.q-lr", "1e-3", "--sac.policy-lr", "1e-3", "--sac.tau", "0.01", "--sac.alpha", "0.1",
         "--sac.learning-starts", "5000", "--sac.minibatch-size", "256"]

# rl-starter-files' PPO (scripts/train.py): 16 envs x 128 steps, 4 epochs of 256-row minibatches,
# Adam 1e-3 (eps 1e-8, no decay), entropy 0.01, value loss 0.5 clipped, advantages not normalised.
_RL_STARTER = ["--num-envs", "16", "--ppo.num-steps", "128", "--ppo.num-minibatches", "8",
               "--ppo.update-epochs", "4", "--ppo.learning-rate", "1e-3", "--ppo.no-anneal-lr",
               "--ppo.adam-eps", "1e-8", "--ppo.gamma", "0.99", "--ppo.gae-lambda", "0.95",
               "--ppo.clip-coef", "0.2", "--ppo.clip-vloss", "--ppo.ent-coef", "0.01", "--ppo.vf-coef", "0.5",
               "--ppo.max-grad-norm", "0.5", "--ppo.no-norm-adv"]

TASKS = {
    "ppo-doorkey": Task(
        "ppo", "MiniGrid-DoorKey-8x8-v0", target=0.9, every=200_000, eval_episodes=100,
        extra=["--total-timesteps", "2000000"],
        variants={
            "rl-starter-cnn": _RL_STARTER + ["--model.kind", "cnn", "--model.cnn", "grid"],
            "rl-starter-mlp": _RL_STARTER + ["--model.kind", "mlp", "--model.hidden-sizes", "64", "64"],
            "cnn-normadv-anneal": _RL_STARTER + ["--model.kind", "cnn", "--model.cnn", "grid", "--ppo.norm-adv",
                                                 "--ppo.anneal-lr"],
        },
        about={
            "rl-starter-cnn": "rl-starter-files' PPO settings and its CNN (2x2 convolutions 16-32-64, 64-wide tanh heads) over the 7x7x3 view",
            "cnn-normadv-anneal": "rl-starter-cnn with advantages normalised per minibatch and the learning rate decayed linearly to 0 over 2M steps (CleanRL's and seedpool's other PPO defaults)",
            "rl-starter-mlp": "the same PPO settings, separate 64-64 tanh MLPs over the flattened 7x7x3 view (147 raw codes)",
        }),
    "sac-cheetahrun": Task(
        "sac", "CheetahRun-v1", every=10_000, eval_episodes=10,
        extra=["--total-timesteps", "1000000"],
        variants={"sac-paper": _SAC_PAPER, "jaxrl": _JAXRL, "fast": _FAST},
        about={
            "sac-paper": "the SAC paper's and CleanRL's MuJoCo settings (seedpool's SAC defaults before this family had its own): critic Adam 1e-3, actor and temperature 3e-4, tau 0.005, initial alpha 0.2, 5k random steps, minibatch 256",
            "jaxrl": "jaxrl's SAC (Kostrikov; its dm_control state runs, action repeat 1): Adam 3e-4 for critic, actor and temperature, tau 0.005, initial alpha 1.0, 10k random steps, minibatch 256",
            "fast": "SAC-AE's dm_control learning rates and target rate: Adam 1e-3 for critic, actor and temperature, tau 0.01, initial alpha 0.1, 5k random steps, minibatch 256",
        }),
}


def _thin(steps: np.ndarray, times: np.ndarray, mean20: np.ndarray, points: int = 400) -> list[list[float]]:
    idx = np.unique(np.linspace(0, len(steps) - 1, min(points, len(steps))).round().astype(int))
    return [[int(steps[i]), round(float(times[i]), 2), round(float(mean20[i]), 4)] for i in idx]


def run(task_name: str, variant: str, minutes: float, seed: int, threads: int) -> Path:
    """Train, evaluate and record one variant."""
    from seedpool.experiment.evaluate import evaluate_run
    from seedpool.experiment.metrics import series
    from seedpool.experiment.plot import smooth
    from seedpool.runs import build_run

    task = TASKS[task_name]
    options = ["--env", task.env, *task.extra, *task.variants[variant], "--seed", str(seed),
               "--torch-threads", str(threads), "--runs-dir", str(RUNS), "--progress", "off"]
    load_before = os.getloadavg()
    training = build_run(task.algo, options)
    start = time.monotonic()
    training.advance(until=lambda _: time.monotonic() - start > minutes * 60)
    result = training.finish()
    load_after = os.getloadavg()
    steps, times, values = (np.asarray(a, float) for a in series(result.run_dir / "metrics.csv", RETURN))
    mean20 = smooth(values)
    evals = {}
    for name, greedy in (("greedy", True), ("sampled", False)):
        ev = evaluate_run(result.run_dir, episodes=task.eval_episodes, deterministic=greedy)
        evals[name] = {"mean": ev.mean, "std": ev.std, "episodes": len(ev.returns),
                       "mean_length": float(np.mean(ev.lengths))}
    record = {
        "task": task_name, "variant": variant, "algo": task.algo, "env": task.env, "options": options,
        "run_dir": result.run_dir.name, "seed": seed, "torch_threads": threads, "minutes_cap": minutes,
        "env_steps": result.step, "seconds": result.time_s, "sps": result.sps, "episodes": len(values),
        "final_mean20": float(mean20[-1]) if len(mean20) else None, "interrupted_by_clock": result.step <
        json.loads((result.run_dir / "config.json").read_text())["config"]["total_timesteps"],
        "eval": evals, "load_before": load_before, "load_after": load_after,
        "time_shares": result.time_shares, "machine": {**machine_info(), **_family_versions()},
        "curve": _thin(steps, times, mean20) if len(steps) else [],
    }
    RECORDS.mkdir(parents=True, exist_ok=True)
    out = RECORDS / f"{task_name}__{variant}__seed{seed}.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}: {result.step:,} steps in {result.time_s / 60:.1f} min, final 20-episode mean "
          f"{record['final_mean20']}, greedy {evals['greedy']['mean']:.3f}, sampled {evals['sampled']['mean']:.3f}")
    return out


def _family_versions() -> dict[str, str]:
    """Versions of the families' packages (machine_info lists the engine's)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("minigrid", "dm-control", "mujoco"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _first(curve: list[list[float]], target: float | None) -> str:
    if target is None:
        return ""
    for i, (step, sec, mean) in enumerate(curve):
        if mean >= target:
            return f"{int(step):,} steps, {sec / 60:.1f} min"
    return "not reached"


def _at(curve: list[list[float]], column: int, mark: float, width: float) -> str:
    """The 20-episode mean of the last curve point at or before ``mark`` (env steps or seconds);
    a run that ended within the ``width`` before ``mark`` gives its last point, a shorter one nothing."""
    if not curve or curve[-1][column] <= mark - width:
        return ""
    before = [p for p in curve if p[column] <= mark]
    return f"{before[-1][2]:.3f}" if before else ""


def report(task_name: str, out: Path, note: str) -> None:
    """The table and the plot of every recorded variant of a task."""
    task = TASKS[task_name]
    records = [json.loads(p.read_text()) for p in sorted(RECORDS.glob(f"{task_name}__*.json"))]
    if not records:
        raise SystemExit(f"no records for {task_name} in {RECORDS}")
    records.sort(key=lambda r: (list(task.variants).index(r["variant"]), r["seed"]))
    for r in records:
        r["label"] = f"{r['variant']} seed {r['seed']}"
    first = records[0]
    lines = [f"# {task.algo.upper()} on {task.env}: learning curves of the settings its defaults were chosen from", "",
             f"Written by `python benchmarks/learning_families.py report {task_name} --out {out}` from the records "
             f"of `python benchmarks/learning_families.py run {task_name} VARIANT --minutes M` "
             f"(`benchmarks/results/learning_families/{task_name}__*.json`).", ""]
    for key, value in first["machine"].items():
        lines.append(f"- **{key}:** {value}" + (" (of the first run; each record has its own)" if key == "date" else ""))
    if note:
        lines.append(f"- **note:** {note}")
    lines += ["", "| variant | settings | env steps | minutes | steps/s | episodes | final 20-episode mean | "
              + ("first 20-episode mean >= %g | " % task.target if task.target is not None else "")
              + "greedy eval | sampled eval | load avg before / after |",
              "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if task.target is not None else "") + "---:|---:|---:|"]
    for r in records:
        g, s = r["eval"]["greedy"], r["eval"]["sampled"]
        cells = [f"`{r['label']}`", task.about.get(r["variant"], ""), f"{r['env_steps']:,}",
                 f"{r['seconds'] / 60:.1f}", f"{r['sps']:.0f}", f"{r['episodes']:,}", f"{r['final_mean20']:.3f}"]
        if task.target is not None:
            cells.append(_first(r["curve"], task.target))
        cells += [f"{g['mean']:.3f} +- {g['std']:.3f} ({g['episodes']} ep., mean length {g['mean_length']:.0f})",
                  f"{s['mean']:.3f} +- {s['std']:.3f} ({s['episodes']} ep., mean length {s['mean_length']:.0f})",
                  f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Mean of the last 20 episodes against env steps:", "",
              "| env steps | " + " | ".join(f"`{r['label']}`" for r in records) + " |",
              "|---:|" + "---:|" * len(records)]
    longest = max(r["env_steps"] for r in records)
    for mark in range(task.every, longest + task.every, task.every):
        lines.append(f"| {min(mark, longest):,} | " + " | ".join(_at(r["curve"], 0, mark, task.every) for r in records) + " |")
    lines += ["", "Mean of the last 20 episodes against wall clock (the run's own clock):", "",
              "| minutes | " + " | ".join(f"`{r['label']}`" for r in records) + " |",
              "|---:|" + "---:|" * len(records)]
    longest_s = max(r["seconds"] for r in records)
    step_s = 60.0 if longest_s <= 1200 else 120.0
    for mark in np.arange(step_s, longest_s + step_s, step_s):
        lines.append(f"| {mark / 60:.0f} | " + " | ".join(_at(r["curve"], 1, mark, step_s) for r in records) + " |")
    lines += ["", "Each variant's options on top of the env's defaults:", ""]
    lines += [f"- `{r['label']}` (run `{r['run_dir']}`): `{' '.join(r['options'])}`" for r in records]
    write_markdown(out, lines)
    _plot(task, records, out.with_suffix(".png"))


def _plot(task: Task, records: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for r in records:
        c = np.asarray(r["curve"], float)
        if len(c):
            ax_steps.plot(c[:, 0], c[:, 2], label=r["label"])
            ax_time.plot(c[:, 1] / 60, c[:, 2], label=r["label"])
    ax_steps.set_xlabel("env steps")
    ax_time.set_xlabel("wall-clock minutes")
    ax_steps.set_ylabel("episodic return (mean of last 20)")
    fig.suptitle(f"{task.algo.upper()} on {task.env}")
    for ax in (ax_steps, ax_time):
        ax.grid(alpha=0.3)
    ax_steps.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run")
    p_run.add_argument("task", choices=sorted(TASKS))
    p_run.add_argument("variant")
    p_run.add_argument("--minutes", type=float, default=10.0)
    p_run.add_argument("--seed", type=int, default=1)
    p_run.add_argument("--torch-threads", type=int, default=1)
    p_rep = sub.add_parser("report")
    p_rep.add_argument("task", choices=sorted(TASKS))
    p_rep.add_argument("--out", type=Path, required=True)
    p_rep.add_argument("--note", default="")
    args = parser.parse_args()
    if args.command == "run":
        if args.variant not in TASKS[args.task].variants:
            raise SystemExit(f"{args.task} has variants {sorted(TASKS[args.task].variants)}, not {args.variant!r}")
        run(args.task, args.variant, args.minutes, args.seed, args.torch_threads)
    else:
        report(args.task, args.out, args.note)


if __name__ == "__main__":
    main()
