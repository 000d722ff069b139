"""R2D2 and feed-forward DQN on CartPole without velocities: the greedy policy at the end of the budget.

    python benchmarks/r2d2_cartpole_novel.py r2d2 '{"defaults": {"run": {"total_timesteps": 300000}}}' 1,2,3
    python benchmarks/r2d2_cartpole_novel.py dqn '{"defaults": {"run": {"total_timesteps": 300000}}}' 1

The issue's bar: ``seedpool train r2d2`` reaches a greedy evaluation of >= 400 (20 episodes)
within 300k env steps on ``pomdp_envs:CartPoleNoVel-v0``; feed-forward agents cannot (they see
positions only). Each variant overrides the algorithm's defaults for the task ("r2d2":
R2D2Config fields or "dqn": DQNConfig fields; "model": the model config's fields; "run":
run options) and trains once per seed. Per run it prints a RESULT line and appends a record
(machine, versions, commit) to results/r2d2_cartpole_novel.jsonl; the table comes from the records:

    python benchmarks/r2d2_cartpole_novel.py table     # -> results/r2d2_cartpole_novel.md
"""
import dataclasses
import json
import sys
import tempfile
import time

from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file

from seedpool.experiment.evaluate import evaluate_run
from seedpool.trainers.dqn import dqn_defaults, train_dqn
from seedpool.trainers.r2d2 import r2d2_defaults, train_r2d2

ENV = "pomdp_envs:CartPoleNoVel-v0"
ALGOS = {"r2d2": (r2d2_defaults, train_r2d2, "r2d2"), "dqn": (dqn_defaults, train_dqn, "dqn")}
DATA = RESULTS / "r2d2_cartpole_novel.jsonl"
NOTES = RESULTS / "r2d2_cartpole_novel.notes.md"
OUT = RESULTS / "r2d2_cartpole_novel.md"


def run_one(algo: str, overrides: dict, seed: int) -> dict:
    """Train once with the task's defaults plus `overrides`, evaluate greedily; the run's record."""
    defaults, train, section = ALGOS[algo]
    cfg = dataclasses.replace(defaults(ENV), runs_dir=tempfile.mkdtemp(), progress="off", tensorboard=False,
                              seed=seed)
    for name in (section, "model"):
        if name in overrides:
            setattr(cfg, name, dataclasses.replace(getattr(cfg, name), **overrides[name]))
    cfg = dataclasses.replace(cfg, **overrides.get("run", {}))
    t0 = time.time()
    result = train(cfg)
    evaluation = evaluate_run(result.run_dir, episodes=20)
    return {"greedy_mean": evaluation.mean, "greedy_std": evaluation.std, "train_last20": result.final_return,
            "steps": result.step, "seconds": time.time() - t0}


def write_table() -> None:
    """Rewrite results/r2d2_cartpole_novel.md from every record and the notes file."""
    records = read_records(DATA)
    lines = ["# R2D2 and feed-forward DQN on CartPole without velocities: greedy policy at the end", ""]
    lines += provenance(records, DATA, NOTES, "r2d2_cartpole_novel.py")
    lines += ["", '"greedy" is `seedpool eval RUN --episodes 20` of the final checkpoint; "train" the mean of the '
              "last 20 training episodes (with each env's exploration); \"wall\" the run's seconds on the "
              "machine in its record (shared and loaded where the notes say so).", ""]
    rows = [[r["algo"], r["variant"], str(r["seed"]), f"{r['steps']:,}",
             f"{r['greedy_mean']:.1f} +- {r['greedy_std']:.1f}", f"{r['train_last20']:.1f}", f"{r['seconds']:.0f}"]
            for r in records]
    lines += table(["algo", "variant", "seed", "env steps", "greedy (20 episodes)", "train last 20", "wall s"], rows,
                   "lllrrrr")
    write_table_file(OUT, lines, NOTES, records)


def main() -> None:
    if sys.argv[1:] == ["table"]:
        write_table()
        return
    algo = sys.argv[1]
    variants = json.loads(sys.argv[2])
    seeds = [int(s) for s in sys.argv[3].split(",")]
    for name, overrides in variants.items():
        for seed in seeds:
            record = {"algo": algo, "variant": name, "overrides": overrides, "seed": seed,
                      **run_one(algo, overrides, seed)}
            append_record(DATA, record)
            print(f"RESULT {algo} {name} seed={seed} greedy={record['greedy_mean']:.1f}+-{record['greedy_std']:.1f} "
                  f"train_last20={record['train_last20']:.1f} steps={record['steps']} "
                  f"time={record['seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
