"""Engine benchmark: seedpool's backends against a for-loop, gymnasium, EnvPool and ale-py.

`main(argv)` is what `seedpool bench` runs; `benchmarks/engine.py` runs the full table.
"""

from seedpool.bench.run import BenchArgs, main, run

__all__ = ["BenchArgs", "main", "run"]
