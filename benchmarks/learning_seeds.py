"""Every CI learning test, unchanged, on more seeds: a threshold that one seed misses is a bug in the defaults.

    .venv/bin/python benchmarks/learning_seeds.py --seeds 1 2 3          # every test marked slow
    .venv/bin/python benchmarks/learning_seeds.py --seeds 2 3 -k impala  # a subset (pytest -k)

Each seed is one pytest run of the suite's learning tests (those marked ``slow``) with
``SEEDPOOL_LEARNING_SEED`` set, which the tests' ``learning_seed`` fixture reads (CI runs seed 1),
on two workers in the suite's own two groups, as ``make test`` runs them: the threaded systems
learn beside another run, as in CI. Writes ``results/learning_seeds_<tag>.md`` with every
test's outcome and time per seed, the assertion message of each failure, and the machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from seedpool.bench.report import machine_info

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TESTS = ["tests/test_learning_ppo.py", "tests/test_learning_impala.py", "tests/test_learning_dqn.py",
         "tests/test_learning_offpolicy.py", "tests/test_learning_recurrent.py",
         "tests/test_recurrent_appo_learning.py", "tests/test_r2d2_learning.py"]


def run_seed(seed: int, select: str | None, workers: int) -> tuple[list[tuple[str, str, float, str]], float]:
    """(test, outcome, seconds, message) for every learning test run with ``seed``, and the wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider", f"--junitxml={xml}",
               "-n", str(workers), "--dist", "loadgroup", *TESTS]
        if select:
            cmd += ["-k", select]
        t0 = time.monotonic()
        subprocess.run(cmd, cwd=ROOT, env={**os.environ, "SEEDPOOL_LEARNING_SEED": str(seed)})
        wall = time.monotonic() - t0
        rows = []
        for case in ET.parse(xml).getroot().iter("testcase"):
            failed = case.find("failure") if case.find("failure") is not None else case.find("error")
            skipped = case.find("skipped")
            outcome = "failed" if failed is not None else "skipped" if skipped is not None else "passed"
            message = (failed.get("message") or "").splitlines()[0][:160] if failed is not None else ""
            rows.append((f"{case.get('classname').split('.')[-1]}::{case.get('name')}", outcome,
                         float(case.get("time", 0)), message))
        return rows, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("-k", dest="select", default=None, help="pytest -k expression")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tag", default=time.strftime("%Y-%m-%d"))
    args = parser.parse_args()
    lines = [f"# CI learning tests on seeds {', '.join(map(str, args.seeds))}", "",
             "`benchmarks/learning_seeds.py`: each seed is one run of the suite's learning tests, unchanged, "
             f"with `SEEDPOOL_LEARNING_SEED` set, on {args.workers} pytest workers as `make test` runs them.", "",
             *[f"- {k}: {v}" for k, v in machine_info().items()], ""]
    failures = 0
    for seed in args.seeds:
        rows, wall = run_seed(seed, args.select, args.workers)
        failures += sum(outcome == "failed" for _, outcome, _, _ in rows)
        lines += [f"## Seed {seed} ({wall / 60:.1f} min)", "", "| test | outcome | s | failure |", "|---|---|---|---|"]
        lines += [f"| {name} | {outcome} | {secs:.0f} | {message} |" for name, outcome, secs, message in rows]
        lines.append("")
        print("\n".join(lines[-len(rows) - 3:]), flush=True)
    out = RESULTS / f"learning_seeds_{args.tag}.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}; {failures} failure(s)")


if __name__ == "__main__":
    main()
