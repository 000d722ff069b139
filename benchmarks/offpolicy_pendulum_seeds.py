"""SAC / TD3 on Pendulum-v1 across seeds: does the mean of the last 20 episodes reach -250 and hold?

    python benchmarks/offpolicy_pendulum_seeds.py sac 1,2,3 [STEPS]   # STEPS: the budget (default: the trainer's)
    python benchmarks/offpolicy_pendulum_seeds.py table               # -> results/offpolicy_pendulum_seeds.md

Each run uses the trainer's Pendulum defaults on the threaded engine (what
`tests/test_learning_offpolicy.py` runs, one seed there) and appends its record to
results/offpolicy_pendulum_seeds.jsonl: the last-20 mean at the end, the first env step
from which the last-20 mean stayed >= -250 to the end, wall time, and the load average
of the machine before and after (other jobs share it; the times are only comparable
between runs with similar load).
"""
import csv
import dataclasses
import os
import sys
import tempfile
import time
from collections import deque

from sweep_records import RESULTS, append_record, provenance, read_records, table, write_table_file

from seedpool.trainers.sac import sac_defaults, train_sac
from seedpool.trainers.td3 import td3_defaults, train_td3

ALGOS = {"sac": (sac_defaults, train_sac), "td3": (td3_defaults, train_td3)}
THRESHOLD = -250.0
DATA = RESULTS / "offpolicy_pendulum_seeds.jsonl"
NOTES = RESULTS / "offpolicy_pendulum_seeds.notes.md"
OUT = RESULTS / "offpolicy_pendulum_seeds.md"


def held_from(run_dir, threshold: float = THRESHOLD) -> int | None:
    """First env step from which the mean of the last 20 episodes stayed >= threshold to the end."""
    window: deque[float] = deque(maxlen=20)
    since = None
    with open(run_dir / "metrics.csv") as f:
        for row in csv.DictReader(f):
            if row["name"] != "charts/episodic_return":
                continue
            window.append(float(row["value"]))
            good = len(window) == 20 and sum(window) / 20 >= threshold
            since = (since or int(row["step"])) if good else None
    return since


def run_one(algo: str, seed: int, steps: int | None) -> dict:
    """Train once with the Pendulum defaults on the threaded engine; the run's record."""
    defaults, train = ALGOS[algo]
    cfg = dataclasses.replace(defaults("Pendulum-v1"), runs_dir=tempfile.mkdtemp(), progress="off",
                              tensorboard=False, seed=seed, backend="thread")
    if steps:
        cfg = dataclasses.replace(cfg, total_timesteps=steps)
    load_before = os.getloadavg()[0]
    t0 = time.time()
    result = train(cfg)
    return {"steps": result.step, "last20": result.final_return, "held_from": held_from(result.run_dir),
            "seconds": time.time() - t0, "load_before": load_before, "load_after": os.getloadavg()[0]}


def write_table() -> None:
    """Rewrite results/offpolicy_pendulum_seeds.md from every record and the notes file."""
    records = read_records(DATA)
    lines = ["# SAC / TD3 on Pendulum-v1: mean of the last 20 episodes at the end of the budget, per seed", ""]
    lines += provenance(records, DATA, NOTES, "offpolicy_pendulum_seeds.py")
    lines += ["", f"\"held from\" is the first env step from which the last-20 mean stayed >= {THRESHOLD:.0f} to the "
              "end (- : it did not). The load average (1 min) of the 2-core machine before and after each run "
              "says how much other jobs slowed it: wall times are not a quiet machine's.", ""]
    rows = [[r["algo"], str(r["seed"]), f"{r['steps']:,}", f"{r['last20']:.1f}",
             "-" if r["held_from"] is None else f"{r['held_from']:,}", f"{r['seconds']:.0f}",
             f"{r['load_before']:.1f} / {r['load_after']:.1f}"] for r in records]
    lines += table(["algo", "seed", "env steps", "last 20 at the end", "held from", "wall s", "load before / after"],
                   rows, "lrrrrrr")
    write_table_file(OUT, lines, NOTES, records)


def main() -> None:
    if sys.argv[1:] == ["table"]:
        write_table()
        return
    algo, seeds = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else None
    for seed in seeds:
        record = {"algo": algo, "seed": seed, **run_one(algo, seed, steps)}
        append_record(DATA, record)
        print(f"RESULT {algo} seed={seed} last20={record['last20']:.1f} held_from={record['held_from']} "
              f"steps={record['steps']} time={record['seconds']:.0f}s load={record['load_before']:.1f}/"
              f"{record['load_after']:.1f}", flush=True)


if __name__ == "__main__":
    main()
