"""Native dm_control tasks (seedpool/envs/families/dmc_native/) against EnvPool's own C++
dm_control tasks and seedpool's package path; writes `benchmarks/results/dmc_native.md`.

    .venv/bin/python benchmarks/dmc_native.py                  # 1 s warm-up, 5 x 1 s windows per case
    .venv/bin/python benchmarks/dmc_native.py --repeats 7 --window 2 --note "quiet machine"
    .venv/bin/python benchmarks/dmc_native.py --quick          # smoke run (not written unless --out)

CheetahRun-v1 and WalkerWalk-v1, 8 envs sync and 16 envs / batch 8 async (the shape of
native_mujoco.py). Every case of a group is alive at once and timed in interleaved windows
(seedpool.bench's harness), so the ratios compare engines under the same load.
`seedpool_native` is the family as `make` builds it by default (`threads=None`: sync, each
call split over the cores or not by which measured faster; async, the compiled ring of parts
on one thread per core), `_t1` the calling thread alone; `seedpool_package` is the same id
with `native=False` (dm_control's Python envs, backend "auto": worker processes). EnvPool
runs its own port of the tasks with one thread per core (envpool.make_gymnasium). A table of
CPU time per env step of the in-process sync engines follows.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_mujoco import seedpool_case  # noqa: E402 - the same seedpool cases as the Gymnasium tasks'

from seedpool.bench.cases import Target, envpool_case  # noqa: E402
from seedpool.bench.harness import Group, Timing, reap_leftovers, run_group  # noqa: E402
from seedpool.bench.report import machine_info, render  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "dmc_native.md"
TASKS = ("CheetahRun-v1", "WalkerWalk-v1")
N = 8


def _key(task: str) -> str:
    return f"{task.split('-')[0].lower()}-{N}"


def _targets(task: str) -> list[Target]:
    return [Target(_key(task), "seedpool_native", "envpool_sync", 1.0, "issue 48: >= EnvPool, 8 envs sync"),
            Target(_key(task), "seedpool_native_async", "envpool_async", 1.0, "issue 48: >= EnvPool, 16 envs, batch 8"),
            Target(_key(task), "seedpool_native", "seedpool_package", 1.0, "make picks native")]


def group(task: str) -> Group:
    """Every engine on `task` at N: sync, and async with 2N envs and batch N."""
    cases = [envpool_case(task, N, asynchronous=False), envpool_case(task, N, asynchronous=True)]
    package = seedpool_case(task, N, native=False, asynchronous=False)
    cases.append(dataclasses.replace(package, name="seedpool_package"))
    cases += [seedpool_case(task, N, native=True, asynchronous=False),
              seedpool_case(task, N, native=True, asynchronous=True),
              seedpool_case(task, N, native=True, asynchronous=False, suffix="_t1", threads=1),
              seedpool_case(task, N, native=True, asynchronous=True, suffix="_t1", threads=1)]
    return Group(_key(task), f"{task}, N={N}", cases, baselines=("envpool_sync", "envpool_async"))


def _in_process_engines(task: str) -> dict[str, Any]:
    """The sync engines whose whole work runs in this process (so its CPU time is theirs)."""
    import seedpool

    engines: dict[str, Any] = {}
    try:
        import envpool

        for nt in (1, 2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                engines[f"envpool_sync_t{nt}"] = envpool.make_gymnasium(task, num_envs=N, num_threads=nt, seed=0)
    except ImportError:
        pass
    engines["seedpool_native"] = seedpool.make(task, num_envs=N, seed=0)
    for threads in (1, 2):
        engines[f"seedpool_native_t{threads}"] = seedpool.make(task, num_envs=N, seed=0, threads=threads)
    return engines


def cpu_table(task: str, rounds: int, steps: int = 200) -> list[str]:
    """Process CPU time (all threads) per env step of the in-process sync engines, in rounds that
    alternate over engines built side by side: what a step costs, whatever share of the cores the
    machine's other jobs leave to the process."""
    engines = _in_process_engines(task)
    try:
        nu = engines["seedpool_native"].single_action_space.shape[0]
        actions = np.random.default_rng(0).uniform(-1, 1, (64, N, nu))
        for env in engines.values():  # reset, and a warm-up
            env.reset()
            for j in range(steps):
                env.step(actions[j % 64])
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
        for _ in range(rounds):
            for name, env in engines.items():
                c0, t0 = time.process_time(), time.perf_counter()
                for j in range(steps):
                    env.step(actions[j % 64])
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                got[name].append((1e6 * cpu / (steps * N), steps * N / wall))
    finally:
        for env in engines.values():
            env.close()
    base = statistics.median(c for c, _ in got["seedpool_native"])
    lines = [f"## {task}, N={N}: CPU time per env step (in-process sync engines, median of {rounds} "
             "alternating rounds)", "", "| engine | CPU µs / env step | × seedpool_native | steps/s (median) |",
             "| --- | ---: | ---: | ---: |"]
    for name, runs in got.items():
        cpu = statistics.median(c for c, _ in runs)
        lines.append(f"| {name} | {cpu:,.1f} | {cpu / base:.2f} | {statistics.median(r for _, r in runs):,.0f} |")
    return lines + [""]


def main(argv: list[str]) -> int:
    """Run the groups and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--quick", action="store_true", help="1 repeat of 0.3 s: a smoke run")
    parser.add_argument("--note", default="", help="a line for the notes (what else ran on the machine)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")  # the package path's dm_control, without a display
    timing = Timing(0.2, 0.3, 1) if args.quick else Timing(args.warmup, args.window, args.repeats)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    tasks = [t for t in args.tasks.split(",") if t]
    load_before = os.getloadavg()
    measured = [(g, run_group(g, timing)) for g in (group(t) for t in tasks)]
    rounds = 1 if args.quick else 2 * args.repeats + 1
    cpu = [line for t in tasks for line in cpu_table(t, rounds)]
    leaked = reap_leftovers()
    load_after = os.getloadavg()
    info = machine_info()
    info["dm-control / mujoco / numba"] = " / ".join(_versions("dm-control", "mujoco", "numba"))
    info["load average (1 min) before / after"] = f"{load_before[0]:.1f} / {load_after[0]:.1f}"
    notes = [
        "**Load:** read the load averages above; the ratios come from windows interleaved in one run.",
        "seedpool_native: each env is one MjData of dm_control's own model; a batch is one compiled call "
        "(numba, without the GIL) that sets each env's controls, runs dm_control's legacy step (mj_step2, "
        "mj_step for the other sub-steps, mj_step1) from MuJoCo's C library, computes dm_control's "
        "observations and rewards and the engine's bookkeeping, and resets the envs at the time limit "
        "(`seedpool/envs/families/dmc_native/kernels.py`). Split over threads, a batch's envs go to the "
        "ring of parts of the native MuJoCo families (`seedpool/envs/native/part_ring.py`).",
        "EnvPool's tasks are its own C++ port of dm_control's with its own MuJoCo build; seedpool_package "
        "steps dm_control's Python envs in worker processes.",
    ]
    if args.note:
        notes.append(f"note: {args.note}")
    if leaked:
        notes.append(f"leaked worker processes, killed: {leaked}")
    targets = [t for task in tasks for t in _targets(task)]
    text = render(info, timing, measured, targets, notes).replace(
        "# seedpool engine benchmark", "# Native dm_control tasks: benchmark", 1)
    text = text.replace("## Targets", "\n".join(cpu) + "\n## Targets", 1)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _versions(*packages: str) -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in packages:
        try:
            found.append(version(name))
        except PackageNotFoundError:
            found.append("not installed")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
