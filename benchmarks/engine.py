"""Run the full engine benchmark and write `benchmarks/results/engine.md`.

    .venv/bin/python benchmarks/engine.py            # every task, 1 s warm-up, 7 x 2 s windows
    .venv/bin/python benchmarks/engine.py --quick    # smoke run
    .venv/bin/python benchmarks/engine.py --tasks pong --repeats 5

Extra flags are those of `seedpool bench` (`--help`); `--out` overrides the default path.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seedpool.bench import main

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "engine.md"

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        argv += ["--out", str(DEFAULT_OUT)]
    sys.exit(main(argv))
