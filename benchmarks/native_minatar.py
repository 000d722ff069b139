"""Native MinAtar against the `minatar` package stepped in a loop and seedpool's Python-env
path; writes `benchmarks/results/native_minatar.md`.

    .venv/bin/python benchmarks/native_minatar.py             # 1 s warm-up, 5 x 1 s windows per case
    .venv/bin/python benchmarks/native_minatar.py --repeats 7 --window 2
    .venv/bin/python benchmarks/native_minatar.py --quick     # smoke run (not written unless --out)

Every case of a group is alive at once and timed in interleaved windows (seedpool.bench's
harness), so the ratios compare engines under the same load. `minatar_loop` is a Python loop
over N `minatar.Environment`s, as a user of the package writes it: `act`, then `state()` (the
observation), `reset()` when the episode ends. `seedpool_python` is the id with `native=False`
(minatar's games behind the pool, backend "auto"), `seedpool_native` the native family (the
default for MinAtar ids). Actions are uniform over each game's minimal action set.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from seedpool.bench.cases import Target
from seedpool.bench.harness import Case, Group, Stepper, Timing, Unavailable, reap_leftovers, run_group
from seedpool.bench.report import machine_info, render
from seedpool.bench.steppers import AsyncStepper, SyncStepper, closing_on_error
from seedpool.envs.families.minatar.factory import GAMES

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "native_minatar.md"
N = 64
TARGETS = (
    Target("breakout-64", "seedpool_native", "minatar_loop", 10.0, "issue 19"),
    *(Target(f"{game.lower()}-{n}", "seedpool_native", "seedpool_python", 1.0, "auto picks native")
      for n in (1, 2, N) for game in GAMES),
)


class MinAtarLoop:
    """N `minatar.Environment`s stepped one after another with pre-drawn actions."""

    def __init__(self, module: str, n: int, seed: int = 0) -> None:
        try:
            from minatar import Environment
        except ImportError as err:
            raise Unavailable("minatar is not installed") from err
        self.envs = [Environment(module) for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.seed(seed + i)
            env.reset()
        self.env_steps = n
        minimal = self.envs[0].minimal_action_set()
        rng = np.random.default_rng(seed)
        self._actions = [[minimal[k] for k in row] for row in rng.integers(len(minimal), size=(1024, n)).tolist()]
        self._row = 0
        self.obs = np.zeros((n, *self.envs[0].state_shape()), np.bool_)

    def step(self) -> None:
        """Step every game once (its observation into a preallocated array); reset ended ones."""
        actions = self._actions[self._row]
        self._row = (self._row + 1) % len(self._actions)
        for i, env in enumerate(self.envs):
            _, terminal = env.act(actions[i])
            if terminal:
                env.reset()
            self.obs[i] = env.state()

    def close(self) -> None:
        """Nothing to release."""


def minatar_loop_case(game: str, n: int) -> Case:
    return Case("minatar_loop", functools.partial(MinAtarLoop, GAMES[game], n), n)


def seedpool_case(task: str, batch: int, native: bool, asynchronous: bool = False) -> Case:
    """A seedpool pool of `task`, native or on the Python-env path (backend "auto")."""
    num_envs = 2 * batch if asynchronous else batch

    def setup() -> Stepper:
        import seedpool

        build = functools.partial(seedpool.make, task, num_envs=num_envs, batch_size=batch, seed=0, native=native)

        def start(pool: Any) -> Stepper:
            if asynchronous:
                pool.async_reset()
                return AsyncStepper(pool, pool.single_action_space, batch)
            pool.reset(seed=0)
            return SyncStepper(pool, pool.single_action_space, batch)

        return closing_on_error(build, start)

    name = f"seedpool_{'native' if native else 'python'}" + ("_async" if asynchronous else "")
    return Case(name, setup, num_envs)


def game_group(game: str, n: int, full: bool) -> Group:
    """One game at N envs; `full` adds the async cases."""
    task = f"MinAtar/{game}-v1"
    cases = [minatar_loop_case(game, n), seedpool_case(task, n, native=False), seedpool_case(task, n, native=True)]
    if full:
        cases += [seedpool_case(task, n, native=False, asynchronous=True),
                  seedpool_case(task, n, native=True, asynchronous=True)]
    return Group(f"{game.lower()}-{n}", f"{task}, N={n}", cases, baselines=("minatar_loop", "seedpool_python"))


def small_group(game: str, n: int) -> Group:
    """A few envs: the native family against the Python-env path (each family's `native_from`)."""
    task = f"MinAtar/{game}-v1"
    cases = [seedpool_case(task, n, native=False), seedpool_case(task, n, native=True)]
    return Group(f"{game.lower()}-{n}", f"{task}, N={n}", cases, baselines=("seedpool_python",))


def family_share(task: str, n: int, timing: Timing) -> str:
    """A note: how much of a native pool's sync step is the family's fused step (one numba
    call: the game, the engine's bookkeeping and autoreset), both timed here in turn, medians of
    `timing.repeats` windows; the rest is the pool's front (actions checked and written, results
    copied out)."""
    import time

    import seedpool

    pool = seedpool.make(task, num_envs=n, seed=0)
    try:
        pool.reset(seed=0)
        actions = np.random.default_rng(0).integers(pool.single_action_space.n, size=(1024, n))
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

        pool.step(actions[0])  # every env reset: the fused step applies from here on
        if not executor.family.can_fuse():
            return f"{task}, N={n}: the family has no fused step; not timed."
        pool_us, fused_us = per_step(pool.step), per_step(fused)
    finally:
        pool.close()
    return (f"{task}, N={n}, timed in turn after the groups: the family's fused step (one numba call: sticky "
            f"actions, the game, the engine's bookkeeping and autoreset) takes {fused_us:.1f} µs of the native "
            f"pool's {pool_us:.1f} µs per sync step; the rest is the pool's front (actions checked and written, "
            "results and infos copied out).")


def main(argv: list[str]) -> int:
    """Run the groups and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1 repeat of 0.3 s: a smoke run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    timing = Timing(0.2, 0.3, 1) if args.quick else Timing(args.warmup, args.window, args.repeats)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    load_before = os.getloadavg()
    groups = [game_group("Breakout", N, full=True)] + [game_group(g, N, full=False) for g in GAMES if g != "Breakout"]
    groups.append(game_group("Breakout", 4 * N, full=False))  # where the pool's fixed cost per step is spread thinner
    groups += [small_group(g, n) for n in (1, 2) for g in GAMES]  # behind each family's native_from
    measured = [(g, run_group(g, timing)) for g in groups]
    leaked = reap_leftovers()
    share = family_share("MinAtar/Breakout-v1", N, timing)
    load_after = os.getloadavg()
    info = machine_info()
    info["load average (1 min) before / after"] = f"{load_before[0]:.1f} / {load_after[0]:.1f}"
    notes = [
        ("**Taken on a loaded machine** (2 cores shared with other jobs; the load averages above): "
         "absolute figures are low and noisy, the interleaved ratios within a group are what to read."
         if max(load_before[0], load_after[0]) >= 2.0 else
         "Taken on a quiet machine (the load averages above); the interleaved ratios within a group are what "
         "to read."),
        "minatar_loop: a Python loop over the package's `Environment`s (act, state(), reset at the end); "
        "seedpool_python: the same games behind the pool (native=False, backend auto); seedpool_native: "
        "every env of the pool in one numba call (seedpool/envs/families/minatar/; each game's step, "
        "bookkeeping and autoreset are one fused call; Breakout's updates the pool's observation rows in "
        "place), "
        "identical episodes (tests/test_native_minatar.py). Numba compiles on first use; the warm-up takes that out.",
        share,
    ]
    if leaked:
        notes.append(f"leaked worker processes, killed: {leaked}")
    text = render(info, timing, measured, TARGETS, notes).replace(
        "# seedpool engine benchmark", "# Native MinAtar: benchmark", 1)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
