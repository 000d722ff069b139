"""Recurrent APPO (central inference) on CartPole without velocities, across seeds.

    nice -n 5 python benchmarks/recurrent_appo_cartpole_novel.py [VARIANTS_JSON] SEEDS [--total N] [--stop R]
    python benchmarks/recurrent_appo_cartpole_novel.py table

The env is `pomdp_envs:CartPoleNoVel-v0` (tests/pomdp_envs.py: only the cart position and the
pole angle). Each variant overrides the setting of `tests/test_recurrent_appo_learning.py`
(`BASE` below: `impala_defaults("CartPole-v1")` reshaped as recurrent PPO's measured setting,
8 envs, unrolls of 32 steps, 8 unrolls per batch, 20 epochs, an LSTM of 64 reading the
observations and a second one for the value head) with "impala" (ImpalaConfig fields),
"model" (ModelConfig fields), "run" (run options such as num_envs) and ``"threaded": true``
(the threaded system instead of the serial twin). Each run appends one record to
``results/recurrent_appo_cartpole_novel.jsonl`` (machine, versions, load average at its start
and end); ``table`` rewrites ``results/recurrent_appo_cartpole_novel.md`` from the records.

The issue's bar is a mean of the last 20 episodes >= 400 within 300k env steps, held to the
end; the CI test asserts it at the end of 300k steps on the threaded system (feed-forward
APPO, the ``feed-forward`` variant, does not come near it).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file  # noqa: E402

from seedpool.experiment.metrics import series  # noqa: E402
from seedpool.models import ModelConfig  # noqa: E402
from seedpool.trainers.impala import impala_defaults, train_impala  # noqa: E402

ENV = "pomdp_envs:CartPoleNoVel-v0"
DATA = RESULTS / "recurrent_appo_cartpole_novel.jsonl"
NOTES = RESULTS / "recurrent_appo_cartpole_novel.notes.md"
OUT = RESULTS / "recurrent_appo_cartpole_novel.md"
BARS = (100, 400)
BASE = {"impala": {"unroll_length": 32, "unrolls_per_batch": 8, "update_epochs": 20},
        "model": {"core": "lstm", "core_size": 64, "hidden_sizes": [], "critic_core": True},
        "run": {"num_envs": 8}}
DEFAULT_VARIANTS = {"lstm 64 + critic core (the CI test's setting)": {},
                    "feed-forward": {"model": {"core": "none", "hidden_sizes": [64, 64], "critic_core": False}}}


def make_config(overrides: dict, seed: int, total: int, stop: float | None, runs_dir: str):
    """`impala_defaults("CartPole-v1")` with `BASE` and then `overrides` applied, on the serial twin
    unless ``overrides["threaded"]``."""
    cfg = impala_defaults("CartPole-v1")
    merged = {k: {**BASE.get(k, {}), **overrides.get(k, {})} for k in ("impala", "model", "run")}
    model = {k: tuple(v) if isinstance(v, list) else v for k, v in merged["model"].items()}
    threaded = bool(overrides.get("threaded", False))
    return dataclasses.replace(
        cfg, env=ENV, seed=seed, total_timesteps=total, stop_at_return=stop, runs_dir=runs_dir, progress="off",
        tensorboard=False, backend="serial", acting=dataclasses.replace(cfg.acting, serial=not threaded),
        impala=dataclasses.replace(cfg.impala, **merged["impala"]), model=ModelConfig(**model), **merged["run"])


def run_one(overrides: dict, seed: int, total: int, stop: float | None) -> dict:
    """Train once; the run's record (final and best 20-episode means, first steps at the bars)."""
    load_start = os.getloadavg()[0]
    t0 = time.time()
    result = train_impala(make_config(overrides, seed, total, stop, tempfile.mkdtemp()))
    seconds = time.time() - t0
    steps, _, values = series(result.run_dir / "metrics.csv", "charts/episodic_return")
    steps, values = np.asarray(steps), np.asarray(values)
    mean20 = np.convolve(values, np.ones(20) / 20, "valid") if len(values) >= 20 else np.zeros(0)
    first = {str(b): int(steps[19:][mean20 >= b][0]) if (mean20 >= b).any() else -1 for b in BARS}
    return {"budget": total, "stop": stop, "steps": result.step, "final": result.final_return,
            "best": float(mean20.max()) if len(mean20) else float("nan"), "first": first, "seconds": seconds,
            "load_start": load_start, "load_end": os.getloadavg()[0]}


def summarize(runs: list[dict]) -> list[str]:
    """One table row from the runs of one variant, budget and stop."""
    runs = sorted(runs, key=lambda r: r["seed"])
    r0 = runs[0]
    cells = [r0["variant"], f"{r0['budget'] // 1000}k" + (f", stop at {r0['stop']:g}" if r0["stop"] else ""),
             ", ".join(str(r["seed"]) for r in runs),
             ", ".join(f"{r['final']:.0f}" for r in runs), ", ".join(f"{r['best']:.0f}" for r in runs)]
    def first(r: dict, bar: int) -> str:
        if r["first"][str(bar)] >= 0:
            return f"{r['first'][str(bar)] / 1000:.1f}k"
        return "— (stopped before)" if r["stop"] is not None and bar > r["stop"] else "never"

    for b in BARS:
        cells.append(", ".join(first(r, b) for r in runs))
    cells.append(", ".join(f"{r['seconds']:.0f}" for r in runs))
    loads = [r["load_start"] for r in runs] + [r["load_end"] for r in runs]
    cells.append(f"{min(loads):.1f}-{max(loads):.1f}")
    return cells


def write_table() -> None:
    """Rewrite the results table from every record, one row per variant, budget and stop."""
    records = read_records(DATA)
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["variant"], r["budget"], r["stop"]), []).append(r)
    lines = ["# Recurrent APPO on CartPole without velocities (central inference), across seeds", ""]
    lines += provenance(records, DATA, NOTES, "recurrent_appo_cartpole_novel.py")
    lines += ["", "- **method:** `train_impala` on `pomdp_envs:CartPoleNoVel-v0`, the serial twin of the "
              "central-inference system (deterministic per seed) unless the variant says threaded; the "
              "settings are `BASE` in the script plus the variant's overrides; learning rate and clip annealed "
              "over the budget. **final** = mean of the last 20 episodes when the run ended (at the budget, or "
              "at the stop return); **best** = the highest 20-episode mean; **first ≥ R** = env steps when "
              "the 20-episode mean first reached R. Wall seconds and the load average (1 min, at the runs' "
              "starts and ends) are those of a shared 2-core machine: compare settings, not absolute times.", ""]
    header = ["variant", "budget", "seeds", "final", "best"] + [f"first ≥ {b}" for b in BARS] + ["wall s", "load"]
    lines += table(header, [summarize(g) for g in groups.values()], "llllrllrl")
    write_table_file(OUT, lines, NOTES, records)


def main() -> None:
    args = sys.argv[1:]
    if args == ["table"]:
        write_table()
        return
    total, stop = 300_000, None
    if "--total" in args:
        i = args.index("--total")
        total = int(args[i + 1])
        del args[i:i + 2]
    if "--stop" in args:
        i = args.index("--stop")
        stop = float(args[i + 1])
        del args[i:i + 2]
    variants = json.loads(args[0]) if len(args) == 2 else DEFAULT_VARIANTS
    seeds = [int(s) for s in args[-1].split(",")]
    for name, overrides in variants.items():
        for seed in seeds:
            record = {"variant": name, "overrides": overrides, "seed": seed, **run_one(overrides, seed, total, stop)}
            append_record(DATA, record)
            print(f"RESULT {name} seed={seed} final={record['final']:.1f} best={record['best']:.1f} "
                  f"first={record['first']} steps={record['steps']} time={record['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
