"""End-to-end training throughput: SEED-style IMPALA vs synchronous PPO vs per-actor inference.

Three ways to train on the same task with the same number of envs and the Nature CNN:

- `seed`: `seedpool train impala` — actors only step envs (engine async mode); one
  inference server batches their observations; a learner thread trains concurrently.
- `sync_ppo`: `seedpool train ppo --sampler sync` — step all envs, run the policy, repeat;
  learn when the rollout is full (acting and learning take turns).
- `baseline`: IMPALA's original layout (`per_actor_baseline.py`) — actor processes each
  run their own CPU copy of the policy on their few envs and ship unrolls to the learner.

Method: each case runs in a fresh process; the trainers run as users run them (their
CLI) and are stopped with Ctrl-C after warm-up + window; their steady rate is read from
metrics.csv rows inside the window (env steps / seconds). Cases are interleaved over the
repeats and the median is reported. Frames/s = env steps/s x 4 (frame skip).

    .venv/bin/python benchmarks/seed_vs_sync.py                 # full: 3 repeats, 20 s + 60 s
    .venv/bin/python benchmarks/seed_vs_sync.py --quick         # sanity run, 1 repeat, short

writes benchmarks/results/seed_vs_sync.md (machine, versions, per-run rows, medians, ratios).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "seed_vs_sync.md"
PY = sys.executable
CASES = ("seed", "sync_ppo", "baseline")
FRAME_SKIP = 4
# --learner impala: the plain V-trace policy gradient with the IMPALA paper's Atari shape
# (one gradient step per batch; the Atari default before APPO). --learner appo: today's
# Atari defaults (PPO's clip and 4 epochs x 4 minibatches: the learning work per env step of PPO).
PLAIN_IMPALA = {"unroll_length": 20, "unrolls_per_batch": 32, "learning_rate": 6e-4, "max_grad_norm": 40.0,
                "clip_coef": None, "update_epochs": 1, "num_minibatches": 1, "norm_adv": False}


def learner_overrides(a: argparse.Namespace) -> dict:
    """ImpalaConfig fields that --learner sets on top of the trainer's Atari defaults."""
    return PLAIN_IMPALA if a.learner == "impala" else {}


def trainer_cmd(case: str, a: argparse.Namespace, runs_dir: str) -> list[str]:
    """The `seedpool train` command line of a case."""
    common = ["--env", a.env, "--num-envs", str(a.num_envs), "--total-timesteps", "1000000000",
              "--runs-dir", runs_dir, "--progress", "off", "--no-tensorboard",
              "--checkpoint-every-s", "1e9", "--device", a.device,
              "--torch-threads", str(a.torch_threads)]  # each trainer's Atari defaults
    if case == "seed":
        flags = []
        for k, v in learner_overrides(a).items():
            name = k.replace("_", "-")
            if isinstance(v, bool):  # tyro's boolean flags
                flags.append(f"--impala.{name}" if v else f"--impala.no-{name}")
            else:
                flags += [f"--impala.{name}", "None" if v is None else str(v)]
        return [PY, "-m", "seedpool.cli", "train", "impala", *common,
                "--acting.max-wait-ms", str(a.max_wait_ms), *flags]
    return [PY, "-m", "seedpool.cli", "train", "ppo", *common, "--sampler", "sync", "--replay-limit", "0"]


def run_trainer(case: str, a: argparse.Namespace) -> dict:
    """Run one trainer for warm-up + window, Ctrl-C it, and read its rate from metrics.csv."""
    from seedpool.experiment.metrics import series

    with tempfile.TemporaryDirectory() as runs_dir:
        proc = subprocess.Popen(trainer_cmd(case, a, runs_dir), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        csv = wait_for_metrics(proc, Path(runs_dir), a.warmup_s + a.window_s)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if csv is None:
            raise RuntimeError(f"{case} wrote no metrics; stderr:\n{err[-2000:]}")
        steps, times, _ = series(csv, "charts/SPS")
        inside = [(s, t) for s, t in zip(steps, times) if t >= a.warmup_s]
        if len(inside) < 2:
            raise RuntimeError(f"{case}: fewer than 2 updates inside the window; lengthen --window-s")
        (s0, t0), (s1, t1) = inside[0], inside[-1]
        row = {"case": case, "steps_per_s": (s1 - s0) / (t1 - t0), "seconds": t1 - t0}
        if case == "seed":
            _, ftimes, fills = series(csv, "inference/batch_fill")
            window = [f for f, t in zip(fills, ftimes) if t >= a.warmup_s]
            row["batch_fill"] = statistics.mean(window) if window else float("nan")
        return row


def wait_for_metrics(proc: subprocess.Popen, runs_dir: Path, seconds: float) -> Path | None:
    """Sleep until the run has trained `seconds` (its clock starts when the run folder appears)."""
    start = None
    while proc.poll() is None:
        csvs = list(runs_dir.glob("*/metrics.csv"))
        if csvs and start is None:
            start = time.monotonic()
        if start is not None and time.monotonic() - start >= seconds:
            return csvs[0]
        time.sleep(0.5)
    return None


def run_baseline_case(a: argparse.Namespace) -> dict:
    """The per-actor-inference baseline in a fresh process (this script, --case baseline)."""
    cmd = [PY, __file__, "--case", "baseline", "--env", a.env, "--num-envs", str(a.num_envs),
           "--baseline-actors", str(a.baseline_actors), "--warmup-s", str(a.warmup_s),
           "--window-s", str(a.window_s), "--torch-threads", str(a.torch_threads), "--learner", a.learner]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=a.warmup_s + a.window_s + 300)
    if out.returncode != 0:
        raise RuntimeError(f"baseline failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_main(a: argparse.Namespace) -> None:
    """Child process body of the baseline case: prints one JSON line."""
    import torch

    import dataclasses

    from per_actor_baseline import run_baseline  # beside this script, which is on sys.path
    from seedpool.trainers.impala import impala_defaults

    torch.set_num_threads(a.torch_threads)  # the learner's; each actor process uses 1
    cfg = impala_defaults(a.env)
    impala = dataclasses.replace(cfg.impala, **learner_overrides(a))
    r = run_baseline(a.env, a.num_envs, a.baseline_actors, impala, cfg.model, a.warmup_s, a.window_s,
                     env_options=cfg.env_options)
    print(json.dumps({"case": "baseline", "steps_per_s": r.env_steps_per_s, "seconds": r.seconds}))


def machine() -> list[str]:
    """Hardware, versions and load, for the table's header."""
    import gymnasium
    import numpy
    import torch

    import seedpool

    try:
        import ale_py
        ale = ale_py.__version__
    except ImportError:
        ale = "not installed"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu}), GPU: {gpu}, load average {os.getloadavg()}",
            f"- Versions: Python {platform.python_version()}, seedpool {seedpool.__version__}, torch "
            f"{torch.__version__}, numpy {numpy.__version__}, gymnasium {gymnasium.__version__}, ale-py {ale}"]


def report(a: argparse.Namespace, rows: list[dict], header: list[str]) -> str:
    """The markdown table: per-run rows, then medians and the target ratios."""
    med = {c: statistics.median(r["steps_per_s"] for r in rows if r["case"] == c) for c in CASES
           if any(r["case"] == c for r in rows)}
    fills = [r["batch_fill"] for r in rows if r["case"] == "seed"]
    lines = [f"# SEED vs synchronous PPO vs per-actor inference: {a.env}, {a.num_envs} envs, Nature CNN", "",
             *header, f"- Method: fresh process per case, warm-up {a.warmup_s:g} s, window {a.window_s:g} s, "
             f"{a.repeats} interleaved repeat(s), medians; baseline: {a.baseline_actors} actor processes; "
             f"SEED: one async pool, recv batch {a.num_envs // 2}, max inference batch {a.num_envs // 2}, "
             f"deadline {a.max_wait_ms:g} ms; device {a.device}; learner torch threads {a.torch_threads}; "
             f"IMPALA learner: {a.learner} ({learner_overrides(a) or 'the Atari defaults'}).", "",
             "| case | env steps/s (median) | frames/s | runs |", "|---|---:|---:|---|"]
    for c, v in med.items():
        runs = ", ".join(f"{r['steps_per_s']:,.0f}" for r in rows if r["case"] == c)
        lines.append(f"| {c} | {v:,.0f} | {FRAME_SKIP * v:,.0f} | {runs} |")
    lines.append("")
    if "seed" in med and "sync_ppo" in med:
        lines.append(f"- SEED / sync PPO: **{med['seed'] / med['sync_ppo']:.2f}x** (target >= 1.3x)")
    if "seed" in med and "baseline" in med:
        lines.append(f"- SEED / per-actor-inference baseline: **{med['seed'] / med['baseline']:.2f}x** "
                     "(target >= 1.5x)")
    if fills:
        lines.append(f"- SEED mean inference batch / configured max: **{statistics.median(fills):.0%}** "
                     "(target >= 75%)")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="Pong-v5")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--baseline-actors", type=int, default=8)
    p.add_argument("--max-wait-ms", type=float, default=2.0)
    p.add_argument("--device", default="auto")
    p.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads of each learner")
    p.add_argument("--warmup-s", type=float, default=20.0)
    p.add_argument("--window-s", type=float, default=60.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--learner", choices=["impala", "appo"], default="impala",
                   help="IMPALA cases' learner: the plain V-trace policy gradient, or today's APPO Atari defaults")
    p.add_argument("--quick", action="store_true", help="1 repeat, 10 s warm-up, 20 s window")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--case", choices=["baseline"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.case == "baseline":
        return baseline_main(a)
    if a.quick:
        a.repeats, a.warmup_s, a.window_s = 1, 10.0, 20.0
    header = machine()
    rows = []
    for rep in range(a.repeats):
        cases = a.cases.split(",")
        for case in cases[rep % len(cases):] + cases[:rep % len(cases)]:  # rotate the order
            row = run_baseline_case(a) if case == "baseline" else run_trainer(case, a)
            print(f"repeat {rep + 1}: {case}: {row['steps_per_s']:,.0f} steps/s", flush=True)
            rows.append(row)
    header[-1:] = [header[-1], f"- Load average after: {os.getloadavg()}"]
    text = report(a, rows, header)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
