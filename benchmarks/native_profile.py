"""Where one `pool.step` of native CartPole spends its time: cProfile of sync and async
pools and `make_vec`, at N=32 and 256, each function's own time put in one of a few parts
(the pool's front, the native executor, the family's Python, compiled calls, NumPy).
Prints a Markdown table (benchmarks/results/native_profile.md quotes runs of it).

    .venv/bin/python benchmarks/native_profile.py [--steps 3000]

cProfile adds a fixed cost to every Python call, so parts made of many small calls look
larger than they are: read the shares together with the unprofiled µs/call column.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from typing import Any, Callable

import numpy as np

import seedpool

PARTS = (
    ("pool front", ("envs/pool.py", "envs/validate.py", "envs/rows.py", "envs/spaces.py", "envs/vector.py",
                    "envs/infos.py")),
    ("native executor", ("native/executor.py", "native/threads.py")),
    ("family (Python)", ("classic/control.py", "classic/acrobot.py", "native/base.py")),
    ("compiled calls", ("classic/kernels.py", "native/bookkeeping.py", "native/pcg64.py")),
)


def _part(filename: str, name: str) -> str:
    for part, files in PARTS:
        if any(filename.endswith(f) for f in files):
            return part
    if "numpy" in filename or "ufunc" in name or "ndarray" in name or "numpy" in name:
        return "NumPy calls"
    return "other (builtins, the loop)"


def stepper(kind: str, n: int) -> tuple[Callable[[int], None], Any]:
    """A function that makes k pool calls of `kind` with random actions, and the pool."""
    acts = np.random.default_rng(0).integers(0, 2, (64, n))
    if kind == "async":
        pool = seedpool.make("CartPole-v1", num_envs=2 * n, batch_size=n, seed=0)
        pool.async_reset()

        def go(k: int) -> None:
            for t in range(k):
                info = pool.recv()[4]
                pool.send(acts[t % 64], info["env_id"])
    else:
        pool = seedpool.make_vec("CartPole-v1", num_envs=n, seed=0) if kind == "make_vec" else \
            seedpool.make("CartPole-v1", num_envs=n, seed=0)
        pool.reset(seed=0)

        def go(k: int) -> None:
            for t in range(k):
                pool.step(acts[t % 64])
    return go, pool


def profile(kind: str, n: int, steps: int) -> tuple[float, dict[str, float]]:
    """(µs per call unprofiled, {part: µs per call under cProfile})."""
    go, pool = stepper(kind, n)
    go(300)
    t0 = time.perf_counter()
    go(steps)
    plain = (time.perf_counter() - t0) / steps * 1e6
    prof = cProfile.Profile()
    prof.enable()
    go(steps)
    prof.disable()
    pool.close()
    parts: dict[str, float] = {}
    for (filename, _, name), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        part = _part(filename, name)
        parts[part] = parts.get(part, 0.0) + tottime / steps * 1e6
    return plain, parts


def _per_call(fn: Callable[[], Any], k: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t0) / k * 1e6


def pieces(n: int, k: int) -> dict[str, float]:
    """µs per call of the pieces of a sync step, each timed alone (no profiler)."""
    from seedpool.envs import validate

    pool = seedpool.make("CartPole-v1", num_envs=n, seed=0)
    pool.reset(seed=0)
    action = np.random.default_rng(0).integers(0, 2, n)
    ex, space = pool._exec, pool.single_action_space
    out = {
        "pool.step": _per_call(lambda: pool.step(action), k),
        "validate.actions": _per_call(lambda: validate.actions(space, action, n), k),
        "pool._batch (results, infos)": _per_call(lambda: pool._batch(None, pool._all32.copy()), k),
    }
    if hasattr(ex, "book"):  # the fused step (not in older versions)
        b = pool._b
        out["fused step call"] = _per_call(
            lambda: ex.family.step_autoreset(ex._rows, b.action, b.obs, ex._final_obs, ex.book), k)
    pool.close()
    return out


def main(argv: list[str]) -> int:
    """Profile each case and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args(argv)
    names = [p for p, _ in PARTS] + ["NumPy calls", "other (builtins, the loop)"]
    print("| case | µs/call | µs/call profiled | " + " | ".join(names) + " |")
    print("| --- | ---: | ---: |" + " ---: |" * len(names))
    for kind in ("sync", "async", "make_vec"):
        for n in (32, 256):
            plain, parts = profile(kind, n, args.steps)
            total = sum(parts.values())
            cells = [f"{parts.get(p, 0):.1f} ({parts.get(p, 0) / total:.0%})" for p in names]
            print(f"| {kind} N={n} | {plain:.1f} | {total:.1f} | " + " | ".join(cells) + " |", flush=True)
    print()
    print("| sync, pieces timed alone (µs/call) | N=32 | N=256 |")
    print("| --- | ---: | ---: |")
    small, large = pieces(32, args.steps), pieces(256, args.steps)
    for name in small:
        print(f"| {name} | {small[name]:.1f} | {large[name]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
