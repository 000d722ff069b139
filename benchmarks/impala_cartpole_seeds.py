"""IMPALA/APPO on CartPole across seeds on the threaded system: does a setting hold 475?

    python benchmarks/impala_cartpole_seeds.py '{"name": {"impala": {...}, "run": {...}}}' 1,2,3,4,5

Each variant overrides `impala_defaults("CartPole-v1")` ("impala": ImpalaConfig fields,
"run": run options such as total_timesteps) and runs once per seed, one after another.
Per run it prints one RESULT line: the final mean of the last 20 episodes (what the
learning test asserts), the lowest 20-episode mean after first reaching 475, the step it
first got there, and the wall time, and appends the run's record (with the machine and
versions) to results/impala_cartpole_seeds.jsonl. Run two copies side by side to load the
machine as a test suite does. The table is written from those records, one row per variant
and budget:

    python benchmarks/impala_cartpole_seeds.py table     # -> results/impala_cartpole_seeds.md
"""
import dataclasses
import json
import sys
import tempfile
import time

import numpy as np
from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file

from seedpool.experiment.metrics import series
from seedpool.trainers.impala import impala_defaults, train_impala



DATA = RESULTS / "impala_cartpole_seeds.jsonl"
NOTES = RESULTS / "impala_cartpole_seeds.notes.md"
OUT = RESULTS / "impala_cartpole_seeds.md"
COLUMNS = ["variant", "budget", "runs with final ≥ 475", "finals below 475",
           "runs that fell below 450 after reaching 475", "first reached 475 (median)"]


def run_one(overrides: dict, seed: int) -> dict:
    """Train once with the defaults plus `overrides`; the run's record."""
    cfg = impala_defaults("CartPole-v1")
    cfg = dataclasses.replace(cfg, runs_dir=tempfile.mkdtemp(), progress="off", tensorboard=False, seed=seed)
    cfg.impala = dataclasses.replace(cfg.impala, **overrides.get("impala", {}))
    cfg = dataclasses.replace(cfg, **overrides.get("run", {}))
    t0 = time.time()
    result = train_impala(cfg)
    steps, _, values = series(result.run_dir / "metrics.csv", "charts/episodic_return")
    steps, values = np.asarray(steps), np.asarray(values)
    mean20 = np.convolve(values, np.ones(20) / 20, "valid")
    reached = mean20 >= 475
    first = int(steps[19:][reached][0]) if reached.any() else -1
    low_after = float(mean20[reached.argmax():].min()) if reached.any() else -1.0
    return {"budget": cfg.total_timesteps, "final": result.final_return, "min_after_first475": low_after,
            "first475": first, "seconds": time.time() - t0}


def summarize(runs: list[dict]) -> list[str]:
    """One table row from the runs of one variant and budget."""
    finals = [r["final"] for r in runs]
    below = [f"{r['final']:.1f}" + (" (never reached)" if r["first475"] < 0 else "") for r in runs if r["final"] < 475]
    reached = [r for r in runs if r["first475"] >= 0]
    fell = [r["min_after_first475"] for r in reached if r["min_after_first475"] < 450]
    fell_cell = "—" if not reached else f"{len(fell)}/{len(reached)}" + (f" (lowest {min(fell):.0f})" if fell else "")
    first_cell = f"{np.median([r['first475'] for r in reached]) / 1000:.0f}k" if reached else "—"
    return [runs[0]["variant"], f"{runs[0]['budget'] // 1000}k", f"{sum(f >= 475 for f in finals)}/{len(finals)}",
            ", ".join(below), fell_cell, first_cell]


def write_table() -> None:
    """Rewrite results/impala_cartpole_seeds.md: transcribed summary rows as they are, and one row
    per variant and budget summarizing the per-run records."""
    records = read_records(DATA)
    rows, groups = [], {}
    for r in records:
        if "row" in r:  # a summary transcribed from the old hand-made table
            rows.append(r["row"])
        else:
            key = (r["variant"], r["budget"])
            if key not in groups:
                groups[key] = []
                rows.append(groups[key])  # filled below; keeps first-seen order
            groups[key].append(r)
    rows = [summarize(row) if isinstance(row[0], dict) else row for row in rows]
    lines = ["# IMPALA / APPO on CartPole-v1: which settings hold a mean return of 475 on the threaded system", ""]
    lines += provenance(records, DATA, NOTES, "impala_cartpole_seeds.py")
    lines += ["", "- **method:** the threaded central-inference system (1 pool of 16 envs, recv 8, one inference "
              "thread, one learner thread), `impala_defaults(\"CartPole-v1\")` with each variant's overrides, one "
              "run per seed. **final** = mean of the last 20 episodes at the end of the budget (what "
              "`tests/test_learning_impala.py` asserts); **fell below 450** counts, among the runs that reached "
              "475, those whose 20-episode mean later dropped below 450.", ""]
    lines += table(COLUMNS, rows, "lrrlrr")
    write_table_file(OUT, lines, NOTES, records)


def main() -> None:
    if sys.argv[1:] == ["table"]:
        write_table()
        return
    variants = json.loads(sys.argv[1])
    seeds = [int(s) for s in sys.argv[2].split(",")]
    for name, overrides in variants.items():
        for seed in seeds:
            record = {"variant": name, "overrides": overrides, "seed": seed, **run_one(overrides, seed)}
            append_record(DATA, record)
            print(f"RESULT {name} seed={seed} final={record['final']:.1f} "
                  f"min_after_first475={record['min_after_first475']:.1f} first475={record['first475']} "
                  f"time={record['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
