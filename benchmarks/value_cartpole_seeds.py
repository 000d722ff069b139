"""DQN / Ape-X on CartPole across seeds: does the greedy policy end at >= 475?

    python benchmarks/value_cartpole_seeds.py dqn '{"name": {"dqn": {...}, "apex": {...}, "run": {...}}}' 1,2,3

Each variant overrides the algorithm's CartPole defaults ("dqn": DQNConfig fields for dqn, QLearningConfig fields for apex; "apex":
ApexConfig fields, "model": QModelConfig fields, "run": run options) and trains once per
seed, one after another. Per run it prints one RESULT line: the greedy evaluation of the
final policy over 20 episodes (what the learning tests assert), the last 20 training
episodes' mean, and the wall time, and appends the run's record (with the machine and
versions) to results/value_cartpole_seeds.jsonl. The table is written from those records:

    python benchmarks/value_cartpole_seeds.py table     # -> results/value_cartpole_seeds.md
"""
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file

from seedpool.algos.dqn import POLICY_AVERAGE
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.experiment.evaluate import evaluate_run
from seedpool.experiment.run import CHECKPOINT_FILE
from seedpool.trainers.apex import apex_defaults, train_apex
from seedpool.trainers.dqn import dqn_defaults, train_dqn

ALGOS = {"dqn": (dqn_defaults, train_dqn), "apex": (apex_defaults, train_apex)}


DATA = RESULTS / "value_cartpole_seeds.jsonl"
NOTES = RESULTS / "value_cartpole_seeds.notes.md"
OUT = RESULTS / "value_cartpole_seeds.md"


def run_one(algo: str, overrides: dict, seed: int) -> dict:
    """Train once with the defaults plus `overrides`, evaluate greedily; the run's record."""
    defaults, train = ALGOS[algo]
    cfg = dataclasses.replace(defaults("CartPole-v1"), runs_dir=tempfile.mkdtemp(), progress="off",
                              tensorboard=False, seed=seed)
    for section in ("dqn", "apex", "model"):
        if section in overrides:
            setattr(cfg, section, dataclasses.replace(getattr(cfg, section), **overrides[section]))
    cfg = dataclasses.replace(cfg, **overrides.get("run", {}))
    t0 = time.time()
    result = train(cfg)
    seconds = time.time() - t0
    evaluation = evaluate_run(result.run_dir, episodes=20)
    record = {"greedy_mean": evaluation.mean, "greedy_std": evaluation.std, "train_last20": result.final_return,
              "steps": result.step, "seconds": seconds, "run_dir": str(result.run_dir)}
    online = evaluate_online_weights(Path(result.run_dir))
    if online is not None:
        record.update(greedy_online_mean=online.mean, greedy_online_std=online.std)
    return record


def evaluate_online_weights(run_dir: Path):
    """Where the run's policy is an average of the online weights (QLearningConfig.policy_average):
    the same greedy evaluation of the online network at the last step, from a copy of the run folder
    whose checkpoint drops the average. None where there is no average."""
    state = load_checkpoint(run_dir / CHECKPOINT_FILE)
    if POLICY_AVERAGE not in (state.get("learner") or {}):
        return None
    del state["learner"][POLICY_AVERAGE]
    online_dir = run_dir.with_name(run_dir.name + "-online")
    shutil.copytree(run_dir, online_dir)
    torch.save(state, online_dir / CHECKPOINT_FILE)
    return evaluate_run(online_dir, episodes=20)


def write_table() -> None:
    """Rewrite results/value_cartpole_seeds.md from every record and the notes file."""
    records = read_records(DATA)
    lines = ["# DQN / Ape-X on CartPole-v1: greedy policy at the end of the budget, per seed", ""]
    lines += provenance(records, DATA, NOTES, "value_cartpole_seeds.py")
    lines += ["", '"greedy" is `seedpool eval RUN --episodes 20` of the final checkpoint (its policy; what '
              "`tests/test_learning_dqn.py` asserts, >= 475); \"train\" is the mean of the last 20 training "
              "episodes (with exploration); \"online weights\" the greedy evaluation of the online network at the "
              "last step where the run's policy is an average of its weights (the same run); - where a run did "
              "not record it. \"same\" repeats the row above's "
              "variant.", ""]
    rows, previous = [], None
    for r in records:
        variant = "same" if r["variant"] == previous else r["variant"]
        previous = r["variant"]
        train = "-" if r["train_last20"] is None else f"{r['train_last20']:.1f}"
        online = (f"{r['greedy_online_mean']:.1f} +- {r['greedy_online_std']:.1f}"
                  if "greedy_online_mean" in r else "-")
        rows.append([r["algo"], variant, str(r["seed"]), f"{r['greedy_mean']:.1f} +- {r['greedy_std']:.1f}", online,
                     train])
    lines += table(["algo", "variant", "seed", "greedy (20 episodes)", "online weights, greedy", "train last 20"],
                   rows, "llrrrr")
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
            online = f" online={record['greedy_online_mean']:.1f}" if "greedy_online_mean" in record else ""
            print(f"RESULT {algo} {name} seed={seed} greedy={record['greedy_mean']:.1f}+-{record['greedy_std']:.1f}{online} "
                  f"train_last20={record['train_last20']:.1f} steps={record['steps']} "
                  f"time={record['seconds']:.0f}s run={record['run_dir']}", flush=True)


if __name__ == "__main__":
    main()
