"""Native MiniGrid against EnvPool's C++ MiniGrid and the `minigrid` package in a loop, at 64
envs; writes `benchmarks/results/minigrid_speed.md`.

    .venv/bin/python benchmarks/minigrid_speed.py              # 1 s warm-up, 7 x 1 s windows per case
    .venv/bin/python benchmarks/minigrid_speed.py --repeats 9 --window 2
    .venv/bin/python benchmarks/minigrid_speed.py --quick      # smoke run (not written unless --out)

For each id (MiniGrid-Empty-8x8-v0, MiniGrid-DoorKey-8x8-v0, BabyAI-GoToLocal-v0) three cases
are alive at once and timed in interleaved windows (seedpool.bench's harness), medians
reported, so the ratios compare engines under the same load. `seedpool_native`: the id's
native family (`seedpool.make(id, num_envs=64)`, sync; every env in one numba call).
`envpool_sync`: `envpool.make(id, env_type="gymnasium", num_envs=64)` stepped sync, one
thread per core. `minigrid_loop`: 64 of the package's envs in a Python loop, as a user of the
package writes it: step, reset at an episode's end, the image and direction copied into
preallocated arrays. Actions are uniform over the seven, drawn up front.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from seedpool.bench.cases import Target, envpool_case
from seedpool.bench.harness import Case, Group, Stepper, Timing, Unavailable, reap_leftovers, run_group
from seedpool.bench.report import machine_info, render
from seedpool.bench.steppers import SyncStepper, closing_on_error, random_actions

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "minigrid_speed.md"
N = 64
IDS = {"empty": "MiniGrid-Empty-8x8-v0", "doorkey": "MiniGrid-DoorKey-8x8-v0", "gotolocal": "BabyAI-GoToLocal-v0"}
TARGETS = tuple(
    target
    for key in IDS
    for target in (Target(f"{key}-{N}", "seedpool_native", "envpool_sync", 2.0, "issue 48"),
                   Target(f"{key}-{N}", "seedpool_native", "minigrid_loop", 20.0, "issue 48"))
)


class MiniGridLoop:
    """N of the package's envs stepped one after another with pre-drawn actions."""

    def __init__(self, task_id: str, n: int, seed: int = 0) -> None:
        try:
            import gymnasium as gym
            import minigrid  # noqa: F401 - registers the ids
        except ImportError as err:
            raise Unavailable("minigrid is not installed") from err
        self.envs = [gym.make(task_id).unwrapped for _ in range(n)]
        self.env_steps = n
        self._out = io.StringIO()  # BabyAI's levels print a line each time they draw one again
        with contextlib.redirect_stdout(self._out):
            first = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
        self.image = np.stack([o["image"] for o in first])
        self.direction = np.array([o["direction"] for o in first])
        self._actions = random_actions(self.envs[0].action_space, n, seed).tolist()
        self._row = 0

    def step(self) -> None:
        """Step every env once (its observation into the arrays); reset ended ones."""
        actions = self._actions[self._row]
        self._row = (self._row + 1) % len(self._actions)
        with contextlib.redirect_stdout(self._out):
            for i, env in enumerate(self.envs):
                obs, _, terminated, truncated, _ = env.step(actions[i])
                if terminated or truncated:
                    obs, _ = env.reset()
                self.image[i] = obs["image"]
                self.direction[i] = obs["direction"]
        self._out.seek(0)
        self._out.truncate()

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


def native_case(task_id: str, n: int) -> Case:
    """The id's native family, sync."""

    def setup() -> Stepper:
        import seedpool

        build = functools.partial(seedpool.make, task_id, num_envs=n, seed=0, native=True)

        def start(pool: Any) -> Stepper:
            pool.reset(seed=0)
            return SyncStepper(pool, pool.single_action_space, n)

        return closing_on_error(build, start)

    return Case("seedpool_native", setup, n)


def group(key: str, n: int) -> Group:
    task_id = IDS[key]
    cases = [Case("minigrid_loop", functools.partial(MiniGridLoop, task_id, n), n), native_case(task_id, n),
             envpool_case(task_id, n, asynchronous=False)]
    return Group(f"{key}-{n}", f"{task_id}, N={n}", cases, baselines=("envpool_sync", "minigrid_loop"))


def family_share(task_id: str, n: int, timing: Timing) -> str:
    """A note from a profile: how much of the native pool's sync step is the family's fused
    numba call (the level's step, the engine's bookkeeping and autoreset), both timed in turn,
    medians of `timing.repeats` windows; the rest is the pool's front (actions checked and
    written, results and infos copied out)."""
    import seedpool

    pool = seedpool.make(task_id, num_envs=n, seed=0, native=True)
    try:
        pool.reset(seed=0)
        actions = np.random.default_rng(0).integers(7, size=(1024, n))
        executor = pool._exec  # the native executor: its buffers and bookkeeping, as its own step uses them
        rows = np.arange(n)
        buffers, final_obs = executor.b, executor._final_obs

        def fused(a: np.ndarray) -> None:
            buffers.action[:] = a
            executor.family.step_autoreset(rows, buffers.action, buffers.obs, final_obs, executor.book)

        def per_step(step: Any) -> float:
            windows = []
            for _ in range(timing.repeats):
                k, start = 0, time.perf_counter()
                while time.perf_counter() - start < timing.window:
                    step(actions[k % 1024])
                    k += 1
                windows.append((time.perf_counter() - start) / k)
            return float(np.median(windows)) * 1e6

        pool.step(actions[0])  # every env has its generator: the fused step applies from here on
        pool_us, fused_us = per_step(pool.step), per_step(fused)
    finally:
        pool.close()
    return (f"{task_id}, N={n}, profiled after the groups: the family's fused numba call takes {fused_us:.1f} µs "
            f"of the native pool's {pool_us:.1f} µs per sync step; the rest is the pool's front.")


def main(argv: list[str]) -> int:
    """Run the groups and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1 repeat of 0.3 s: a smoke run")
    parser.add_argument("--shared", action="store_true", help="say in the notes that the machine was shared")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    timing = Timing(0.2, 0.3, 1) if args.quick else Timing(args.warmup, args.window, args.repeats)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    load_before = os.getloadavg()
    measured = [(g, run_group(g, timing)) for g in (group(key, N) for key in IDS)]
    leaked = reap_leftovers()
    shares = [family_share(task_id, N, timing) for task_id in IDS.values()]
    load_after = os.getloadavg()
    info = machine_info()
    import minigrid
    import numba

    info["minigrid"], info["numba"] = minigrid.__version__, numba.__version__
    info["load average (1 min) before / after"] = f"{load_before[0]:.1f} / {load_after[0]:.1f}"
    loaded = args.shared or max(load_before[0], load_after[0]) >= 2.0
    notes = [
        ("**Taken on a shared machine** (2 cores, other jobs running: the load averages above); absolute "
         "figures are low and noisy, the interleaved ratios within a group are what to read."
         if loaded else
         "Taken on a quiet machine (the load averages above); the interleaved ratios within a group are what "
         "to read."),
        "seedpool_native: seedpool/envs/families/minigrid/ (numba, one fused call per step, EnvPool's Dict "
        "observations written into the pool's buffers), the package's episodes for the same seeds "
        "(tests/test_minigrid.py); envpool_sync: EnvPool's C++ pool, sync, one thread per core; "
        "minigrid_loop: the package's envs in a Python loop. Numba compiles on first use (cached after); "
        "the warm-up takes that out.",
        *shares,
    ]
    if leaked:
        notes.append(f"leaked worker processes, killed: {leaked}")
    text = render(info, timing, measured, TARGETS, notes).replace(
        "# seedpool engine benchmark", "# Native MiniGrid: benchmark", 1)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
