"""DQN / Ape-X on CartPole across seeds: does the greedy policy end at >= 475?

    python benchmarks/value_cartpole_seeds.py dqn '{"name": {"dqn": {...}, "apex": {...}, "run": {...}}}' 1,2,3

Each variant overrides the algorithm's CartPole defaults ("dqn": DQNConfig fields, "apex":
ApexConfig fields, "model": QModelConfig fields, "run": run options) and trains once per
seed, one after another. Per run it prints one RESULT line: the greedy evaluation of the
final policy over 20 episodes (what the learning tests assert), the last 20 training
episodes' mean, and the wall time. Results of the runs that chose the defaults:
results/value_cartpole_seeds.md.
"""
import dataclasses
import json
import sys
import tempfile
import time

from seedpool.experiment.evaluate import evaluate_run
from seedpool.trainers.apex import apex_defaults, train_apex
from seedpool.trainers.dqn import dqn_defaults, train_dqn

ALGOS = {"dqn": (dqn_defaults, train_dqn), "apex": (apex_defaults, train_apex)}


def run_one(algo: str, overrides: dict, seed: int) -> str:
    """Train once with the defaults plus `overrides`, evaluate greedily; one RESULT line."""
    defaults, train = ALGOS[algo]
    cfg = dataclasses.replace(defaults("CartPole-v1"), runs_dir=tempfile.mkdtemp(), progress="off",
                              tensorboard=False, seed=seed)
    for section in ("dqn", "apex", "model"):
        if section in overrides:
            setattr(cfg, section, dataclasses.replace(getattr(cfg, section), **overrides[section]))
    cfg = dataclasses.replace(cfg, **overrides.get("run", {}))
    t0 = time.time()
    result = train(cfg)
    evaluation = evaluate_run(result.run_dir, episodes=20)
    return (f"greedy={evaluation.mean:.1f}+-{evaluation.std:.1f} train_last20={result.final_return:.1f} "
            f"steps={result.step} time={time.time() - t0:.0f}s")


def main() -> None:
    algo = sys.argv[1]
    variants = json.loads(sys.argv[2])
    seeds = [int(s) for s in sys.argv[3].split(",")]
    for name, overrides in variants.items():
        for seed in seeds:
            print(f"RESULT {algo} {name} seed={seed} {run_one(algo, overrides, seed)}", flush=True)


if __name__ == "__main__":
    main()
