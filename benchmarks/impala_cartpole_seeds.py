"""IMPALA/APPO on CartPole across seeds on the threaded system: does a setting hold 475?

    python benchmarks/impala_cartpole_seeds.py '{"name": {"impala": {...}, "run": {...}}}' 1,2,3,4,5

Each variant overrides `impala_defaults("CartPole-v1")` ("impala": ImpalaConfig fields,
"run": run options such as total_timesteps) and runs once per seed, one after another.
Per run it prints one RESULT line: the final mean of the last 20 episodes (what the
learning test asserts), the lowest 20-episode mean after first reaching 475, the step it
first got there, and the wall time. Run two copies side by side to load the machine as a
test suite does. Results of the runs that chose the defaults: results/impala_cartpole_seeds.md.
"""
import dataclasses
import json
import sys
import tempfile
import time

import numpy as np

from seedpool.experiment.metrics import series
from seedpool.trainers.impala import impala_defaults, train_impala



def run_one(overrides: dict, seed: int) -> str:
    """Train once with the defaults plus `overrides`; one RESULT line."""
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
    return (f"final={result.final_return:.1f} min_after_first475={low_after:.1f} first475={first} "
            f"time={time.time() - t0:.0f}s")


def main() -> None:
    variants = json.loads(sys.argv[1])
    seeds = [int(s) for s in sys.argv[2].split(",")]
    for name, overrides in variants.items():
        for seed in seeds:
            print(f"RESULT {name} seed={seed} {run_one(overrides, seed)}", flush=True)


if __name__ == "__main__":
    main()
