"""From how many envs a native family beats the Python-env path, per classic control id:
the table behind each family's `native_from` (the smallest pool `auto` makes native).
Writes `benchmarks/results/native_crossover.md`.

    .venv/bin/python benchmarks/native_crossover.py            # 3 x 0.5 s windows per case (~4 min)

Each (id, N) pair is one group of two cases, timed interleaved by seedpool.bench's harness:
the native family and the Python-env path (`native=False`, backend "auto"), both sync.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from native_envs import OTHERS, seedpool_case  # benchmarks/ is on the path: it holds this script

from seedpool.bench.harness import Group, Timing, reap_leftovers, run_group
from seedpool.bench.report import machine_info

OUT = Path(__file__).resolve().parent / "results" / "native_crossover.md"
SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


def main(argv: list[str]) -> int:
    """Time every (id, N) pair and write the table of native / Python-env ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=float, default=0.5)
    args = parser.parse_args(argv)
    timing = Timing(0.3, args.window, args.repeats)
    load_before = os.getloadavg()[0]
    lines = ["| task | " + " | ".join(f"N={n}" for n in SIZES) + " |", "| --- |" + " ---: |" * len(SIZES)]
    for task in ("CartPole-v1", *OTHERS):
        cells = []
        for n in SIZES:
            group = Group(f"{task}-{n}", f"{task}, N={n}", [seedpool_case(task, n, native=True, asynchronous=False),
                                                           seedpool_case(task, n, native=False, asynchronous=False)])
            native, python = run_group(group, timing)
            ok = native.median and python.median
            cells.append(f"{native.median / python.median:.2f}" if ok else "n/a")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    reap_leftovers()
    info = machine_info()
    info["load average (1 min) before / after"] = f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"
    out = ["# Native families: from how many envs they win", ""]
    out += [f"- **{k}:** {v}" for k, v in info.items()]
    out += [f"- **method:** per (task, N), the native pool and the Python-env pool (`native=False`, backend "
            f"\"auto\"), sync, 0.3 s warm-up then {args.repeats} interleaved windows of {args.window:g} s; the "
            "cell is the ratio of their median steps/s (> 1: native wins).", "",
            "## native / Python-env steps/s", "", *lines, "",
            "## Notes", "",
            "- **Taken on a loaded machine** (2 cores shared with other jobs; load averages above).",
            "- Each family's `native_from` (seedpool/envs/families/) is set from this table: the first N "
            "from which native wins by a clear margin."]
    OUT.write_text("\n".join(out) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
