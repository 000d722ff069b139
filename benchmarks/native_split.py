"""From which batch size a native family's fused step, split over two threads, beats one
thread: the table behind `split_from` (seedpool/envs/native/threads.py), which `make` uses to choose.
Writes `benchmarks/results/native_split.md`.

    .venv/bin/python benchmarks/native_split.py             # 3 x 0.5 s windows per case (~2 min)

Each N is one group of two sync pools of native CartPole-v1, timed interleaved by
seedpool.bench's harness: one thread (`num_workers=1`) and two (a CartPole subclass whose
`split_from` is 1, so every batch is split).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

import seedpool
from seedpool.bench.harness import Case, Group, Stepper, Timing, reap_leftovers, run_group
from seedpool.bench.report import machine_info
from seedpool.bench.steppers import SyncStepper, closing_on_error
from seedpool.envs.families.classic.control import CartPole
from seedpool.envs.native.threads import available_cores

OUT = Path(__file__).resolve().parent / "results" / "native_split.md"
SIZES = (64, 256, 1024, 4096, 16384)


class SplitCartPole(CartPole):
    """CartPole whose every batch is split over the threads."""

    split_from = 1


def case(n: int, threads: int) -> Case:
    """A sync native CartPole pool of n envs stepped by `threads` threads."""
    task: Any = SplitCartPole if threads > 1 else "CartPole-v1"

    def setup() -> Stepper:
        build = functools.partial(seedpool.make, task, num_envs=n, seed=0, num_workers=threads)

        def start(pool: Any) -> Stepper:
            if pool.num_workers != threads:
                raise RuntimeError(f"asked for {threads} threads, the pool has {pool.num_workers}")
            pool.reset(seed=0)
            return SyncStepper(pool, pool.single_action_space, n)

        return closing_on_error(build, start)

    return Case(f"{threads}_thread{'s' if threads > 1 else ''}", setup, n)


def main(argv: list[str]) -> int:
    """Time one and two threads per N and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=float, default=0.5)
    args = parser.parse_args(argv)
    if available_cores() < 2:
        print("needs 2 cores", file=sys.stderr)
        return 1
    timing = Timing(0.3, args.window, args.repeats)
    load_before = os.getloadavg()[0]
    lines = ["| N | 1 thread steps/s | 2 threads steps/s | 2 / 1 |", "| ---: | ---: | ---: | ---: |"]
    for n in SIZES:
        one, two = run_group(Group(f"split-{n}", f"CartPole-v1, N={n}", [case(n, 1), case(n, 2)]), timing)
        ratio = f"{two.median / one.median:.2f}" if one.median and two.median else "n/a"
        lines.append(f"| {n} | {one.median or 0:,.0f} | {two.median or 0:,.0f} | {ratio} |")
    reap_leftovers()
    info = machine_info()
    info["load average (1 min) before / after"] = f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"
    out = ["# Native CartPole: one thread or two", ""]
    out += [f"- **{k}:** {v}" for k, v in info.items()]
    out += [f"- **method:** per N, a sync native CartPole-v1 pool stepped by one thread and one split over "
            f"two (random actions), 0.3 s warm-up then {args.repeats} interleaved windows of {args.window:g} s; "
            "medians.", "", *lines, "", "## Notes", "",
            "- **Taken on a loaded machine** (2 cores shared with other jobs; load averages above): a second "
            "thread only helps when a second core is free, so these ratios understate a quiet machine's.",
            f"- `CartPole.split_from` is {CartPole.split_from}: the first N from which two threads won here."]
    OUT.write_text("\n".join(out) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
