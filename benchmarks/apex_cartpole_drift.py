"""Ape-X on CartPole: how often does a run end with a greedy policy that drifts off the track?

    python benchmarks/apex_cartpole_drift.py run NAME '{"apex": {...}, "dqn": {...}}' 1,2,3,...
    python benchmarks/apex_cartpole_drift.py table      # -> results/apex_cartpole_drift.md

The CI test (`tests/test_learning_dqn.py`, Ape-X) asserts the greedy return over 20 episodes of
500 steps. A policy that lets the cart creep to one side passes it on most start states and
fails it now and then (results/apex_cartpole_flake.md), so counting test failures needs many
runs. Each run here is trained exactly as the test trains it (the CartPole defaults plus the
variant's overrides, through `value_cartpole_seeds.run_one`), then checked three ways:

- **test**: `evaluate_run(episodes=20)`, what the test asserts (>= 475);
- **96 at 500**: 96 greedy episodes from other start states (eval seed 20,000): the lowest return;
- **to 2,000**: 20 greedy episodes on `CartPole-v1` with `max_episode_steps=2000` (eval seed
  30,000): how many reach 2,000 and how many end before 500. A policy that drifts ends early
  here even where the test passes, so this check tells the variants apart in fewer runs.

A run counts as **drifting** when any of its to-2,000 episodes ends before 2,000 steps.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file
from value_cartpole_seeds import run_one

from seedpool.experiment.evaluate import evaluate_run
from seedpool.experiment.run import CONFIG_FILE

DATA = RESULTS / "apex_cartpole_drift.jsonl"
OUT = RESULTS / "apex_cartpole_drift.md"
NOTES = RESULTS / "apex_cartpole_drift.notes.md"
LONG = 2000


def long_episodes(run_dir: Path, episodes: int = 20, seed: int = 30_000):
    """Greedy episodes of the run's final policy on CartPole with a 2,000-step limit, from a copy
    of the run folder whose task options say so (the run folder itself is left as it was)."""
    copy = run_dir.with_name(run_dir.name + "-long")
    shutil.copytree(run_dir, copy)
    config_path = copy / CONFIG_FILE
    config = json.loads(config_path.read_text())
    config["config"]["env_options"] = {**(config["config"].get("env_options") or {}), "max_episode_steps": LONG}
    config_path.write_text(json.dumps(config))
    return evaluate_run(copy, episodes=episodes, seed=seed)


def check(run_dir: Path) -> dict:
    wide = evaluate_run(run_dir, episodes=96, seed=20_000)
    long = long_episodes(run_dir)
    return {"min_96": min(wide.returns), "mean_96": wide.mean,
            "long_reached": sum(r >= LONG for r in long.returns), "long_below_500": sum(r < 500 for r in long.returns),
            "long_returns": long.returns}


def run(name: str, overrides: dict, seeds: list[int]) -> None:
    for seed in seeds:
        record = {"algo": "apex", "variant": name, "overrides": overrides, "seed": seed,
                  **run_one("apex", overrides, seed)}
        record.update(check(Path(record["run_dir"])))
        append_record(DATA, record)
        print(f"RESULT {name} seed={seed} test={record['greedy_mean']:.1f} min96={record['min_96']:.0f} "
              f"to2000={record['long_reached']}/20 below500={record['long_below_500']} "
              f"time={record['seconds']:.0f}s", flush=True)


def write_table() -> None:
    records = read_records(DATA)
    lines = ["# Ape-X on CartPole-v1: drifting greedy policies per variant", ""]
    lines += provenance(records, DATA, NOTES, "apex_cartpole_drift.py")
    lines += ["", "Per variant: runs, runs whose test (20 greedy episodes, >= 475) fails, runs that drift (a greedy "
              "episode of the 2,000-step task ends before 2,000), and the lowest return over 96 other 500-step "
              "episodes. Each run is a fresh draw: past the first updates, thread timing decides the rest "
              "(apex_cartpole_flake.md).", ""]
    by_variant: dict[str, list[dict]] = {}
    for r in records:
        by_variant.setdefault(r["variant"], []).append(r)
    rows = []
    for name, rs in by_variant.items():
        rows.append([name, json.dumps(rs[0]["overrides"]), str(len(rs)),
                     str(sum(r["greedy_mean"] < 475 for r in rs)), str(sum(r["long_reached"] < 20 for r in rs)),
                     f"{min(r['min_96'] for r in rs):.0f}",
                     f"{sum(r['seconds'] for r in rs) / len(rs):.0f}"])
    lines += table(["variant", "overrides", "runs", "test fails", "drifting", "lowest of 96", "mean wall s"],
                   rows, "llrrrrr")
    lines += ["", "## Every run", ""]
    lines += table(["variant", "seed", "test (20)", "lowest of 96", "to 2,000 reached / below 500", "train last 20",
                    "wall s"],
                   [[r["variant"], str(r["seed"]), f"{r['greedy_mean']:.1f}", f"{r['min_96']:.0f}",
                     f"{r['long_reached']} / {r['long_below_500']}", f"{r['train_last20']:.1f}", f"{r['seconds']:.0f}"]
                    for r in records], "lrrrrrr")
    write_table_file(OUT, lines, NOTES, records)


def main() -> None:
    if sys.argv[1:] == ["table"]:
        write_table()
        return
    _, name, overrides, seeds = sys.argv[1:]
    run(name, json.loads(overrides), [int(s) for s in seeds.split(",")])


if __name__ == "__main__":
    main()
