"""Native MuJoCo families against EnvPool's MuJoCo, gymnasium's vector envs and seedpool's
Python-env path; writes `benchmarks/results/native_mujoco.md`.

    .venv/bin/python benchmarks/native_mujoco.py                  # 1 s warm-up, 5 x 1 s windows per case
    .venv/bin/python benchmarks/native_mujoco.py --repeats 7 --window 2 --note "quiet machine"
    .venv/bin/python benchmarks/native_mujoco.py --quick          # smoke run (not written unless --out)
    .venv/bin/python benchmarks/native_mujoco.py --tasks Hopper-v5,Walker2d-v5,HumanoidStandup-v5,Swimmer-v5,InvertedPendulum-v5 \
        --out benchmarks/results/native_mujoco_more.md            # the other native tasks

HalfCheetah-v5, Ant-v5 and Humanoid-v5, 8 envs sync and 16 envs / batch 8 async (issue 18's
shape). Every
case of a group is alive at once and timed in interleaved windows (seedpool.bench's harness),
so the ratios compare engines under the same load. `seedpool_native` is the native family
as `make` builds it by default (`threads=None`: sync, the batch split over one thread per core
or not, call by call, by which measured faster; async, one background thread per core
beside the caller, taking the envs of the batches as they are sent; `_t1`: the calling thread alone;
`_t2`: always 2 threads), `seedpool_python` the
same id with `native=False` (gymnasium's envs, backend "auto"). gymnasium's AsyncVectorEnv
has no batch mode: `gym_async` steps 8 envs in 8 processes. EnvPool runs its own C++ tasks
of the same names, with one thread per core.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.bench.cases import Target, envpool_case, gym_case
from seedpool.bench.harness import Case, Group, Stepper, Timing, reap_leftovers, run_group
from seedpool.bench.report import machine_info, render
from seedpool.bench.steppers import AsyncStepper, SyncStepper, closing_on_error

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "native_mujoco.md"
TASKS = ("HalfCheetah-v5", "Ant-v5", "Humanoid-v5")  # the default run
MORE_TASKS = ("Hopper-v5", "Walker2d-v5", "HumanoidStandup-v5", "Swimmer-v5", "InvertedPendulum-v5")  # --tasks
N = 8


def _targets(task: str) -> list[Target]:
    key = f"{task.split('-')[0].lower()}-{N}"
    return [
        Target(key, "seedpool_native", "envpool_sync", 1.0, "issue 18: 8 envs sync"),
        Target(key, "seedpool_native_async", "envpool_async", 1.0, "issue 18: 16 envs, batch 8"),
        Target(key, "seedpool_native", "gym_async", 2.0, "issue 18"),
        Target(key, "seedpool_native_async", "gym_async", 2.0, "issue 18"),
        Target(key, "seedpool_native", "seedpool_python", 1.0, "auto picks native"),
    ]


def seedpool_case(task: str, batch: int, native: bool, asynchronous: bool, suffix: str = "", **options: Any) -> Case:
    """A seedpool pool of `task` (backend "auto"), native or on the Python-env path."""
    num_envs = 2 * batch if asynchronous else batch

    def setup() -> Stepper:
        import seedpool

        build = functools.partial(seedpool.make, task, num_envs=num_envs, batch_size=batch, seed=0, native=native,
                                  **options)
        if asynchronous:
            def start(pool: Any) -> Stepper:
                pool.async_reset()
                return AsyncStepper(pool, pool.single_action_space, batch)
        else:
            def start(pool: Any) -> Stepper:
                pool.reset(seed=0)
                return SyncStepper(pool, pool.single_action_space, batch)
        return closing_on_error(build, start)

    name = f"seedpool_{'native' if native else 'python'}{suffix}" + ("_async" if asynchronous else "")
    # Native families may start MuJoCo's threads in this process: set up after the forking engines.
    return Case(name, setup, num_envs, threaded=native)


def group(task: str) -> Group:
    """Every engine on `task` at N: sync, and async with 2N envs and batch N."""
    make_env = functools.partial(gym.make, task)
    cases = [
        gym_case(make_env, N, asynchronous=False),
        gym_case(make_env, N, asynchronous=True),
        envpool_case(task, N, asynchronous=False),
        envpool_case(task, N, asynchronous=True),
        seedpool_case(task, N, native=False, asynchronous=False),
        seedpool_case(task, N, native=False, asynchronous=True),
        seedpool_case(task, N, native=True, asynchronous=False),
        seedpool_case(task, N, native=True, asynchronous=True),
    ]
    for threads in (1, 2):
        cases += [seedpool_case(task, N, native=True, asynchronous=False, suffix=f"_t{threads}", threads=threads),
                  seedpool_case(task, N, native=True, asynchronous=True, suffix=f"_t{threads}", threads=threads)]
    return Group(f"{task.split('-')[0].lower()}-{N}", f"{task}, N={N}", cases,
                 baselines=("envpool_sync", "gym_async"))


def _in_process_engines(task: str) -> dict[str, Any]:
    """The sync engines whose whole work runs in this process (so its CPU time is theirs)."""
    import seedpool

    engines: dict[str, Any] = {"gym_sync": gym.vector.SyncVectorEnv([functools.partial(gym.make, task)] * N)}
    try:
        import envpool

        for nt in (1, 2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                engines[f"envpool_sync_t{nt}"] = envpool.make(task, env_type="gymnasium", num_envs=N, num_threads=nt,
                                                              seed=0)
    except ImportError:
        pass
    engines["seedpool_native"] = seedpool.make(task, num_envs=N, seed=0)
    for threads in (1, 2):
        engines[f"seedpool_native_t{threads}"] = seedpool.make(task, num_envs=N, seed=0, threads=threads)
    return engines


def cpu_table(task: str, rounds: int, steps: int = 100) -> list[str]:
    """Process CPU time (all threads) per env step of the in-process sync engines, in rounds that
    alternate over engines built side by side: what a step costs, whatever share of the cores the
    machine's other jobs leave to the process."""
    engines = _in_process_engines(task)
    try:
        nu = engines["seedpool_native"].single_action_space.shape[0]
        actions = np.random.default_rng(0).uniform(-1, 1, (64, N, nu)).astype(np.float32)
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
        rate = statistics.median(r for _, r in runs)
        lines.append(f"| {name} | {cpu:,.0f} | {cpu / base:.2f} | {rate:,.0f} |")
    return lines + [""]


def async_cpu_table(task: str, rounds: int, batches: int = 100) -> list[str]:
    """Process CPU time (all threads) per env step of the in-process async engines (2N envs,
    batch N, the send/recv loop of `AsyncStepper`), in alternating rounds: what the background
    threads cost beside what they buy."""
    import seedpool

    engines: dict[str, Any] = {}
    try:
        import envpool

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            engines["envpool_async"] = envpool.make(task, env_type="gymnasium", num_envs=2 * N, batch_size=N,
                                                    num_threads=2, seed=0)
    except ImportError:
        pass
    engines["seedpool_native_async"] = seedpool.make(task, num_envs=2 * N, batch_size=N, seed=0)
    engines["seedpool_native_t1_async"] = seedpool.make(task, num_envs=2 * N, batch_size=N, seed=0, threads=1)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
    try:
        steppers = {}
        for name, env in engines.items():
            env.async_reset()
            steppers[name] = AsyncStepper(env, env.action_space, N)
            for _ in range(batches):  # warm-up
                steppers[name].step()
        for _ in range(rounds):
            for name, stepper in steppers.items():
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(batches):
                    stepper.step()
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                got[name].append((1e6 * cpu / (batches * N), batches * N / wall))
    finally:
        for env in engines.values():
            env.close()
    base = statistics.median(c for c, _ in got["seedpool_native_t1_async"])
    lines = [f"## {task}, {2 * N} envs, batch {N}: CPU time per env step (in-process async engines, median "
             f"of {rounds} alternating rounds)", "",
             "| engine | CPU µs / env step | × seedpool_native_t1_async | steps/s (median) |",
             "| --- | ---: | ---: | ---: |"]
    for name, runs in got.items():
        cpu = statistics.median(c for c, _ in runs)
        lines.append(f"| {name} | {cpu:,.0f} | {cpu / base:.2f} | {statistics.median(r for _, r in runs):,.0f} |")
    return lines + [""]


def physics_table(task: str, rounds: int, calls: int = 200) -> list[str]:
    """The step of N envs alone, in this process: MuJoCo's `mujoco.batch.Batch` (the physics
    only) on one thread and on its own pool of 2, and the native family's compiled step
    (physics, observations and rewards) on one thread and split over two (`RowThreads`).
    Rounds alternate over the four, built side by side."""
    from mujoco.batch import Batch

    from seedpool.envs import registry

    ref = gym.make(task).unwrapped
    model, nstep = ref.model, ref.frame_skip
    one, pool2 = Batch(model, N, nthread=1), Batch(model, N, nthread=2)
    family_class = registry.family_class(task)
    kernel1, kernel2 = family_class(N, threads=1), family_class(N, threads=2)
    ctrl = np.zeros((N, model.nu), np.float32)
    for family in (kernel1, kernel2):
        family.reset(np.arange(N), None)
    runs = {"Batch, nthread=1 (physics only)": lambda: one.step(None, nstep=nstep),
            "Batch, nthread=2 (MuJoCo's pool)": lambda: pool2.step(None, nstep=nstep),
            "compiled step, one thread": lambda: kernel1.step(slice(None), ctrl),
            "compiled step, caller + helper thread": lambda: kernel2.step(slice(None), ctrl)}
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    try:
        for run in runs.values():  # warm-up: compiled code loaded, helper threads started
            run()
        for _ in range(rounds):
            for name, run in runs.items():
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    run()
                cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                got[name].append((1e6 * cpu / (calls * N), 1e6 * wall / (calls * N)))
    finally:
        kernel1.close()
        kernel2.close()
    lines = [f"## {task}, N={N}: physics alone (median of {rounds} alternating rounds of {calls} calls)", "",
             "| physics | CPU µs / env step | wall µs / env step |", "| --- | ---: | ---: |"]
    for name, runs_ in got.items():
        lines.append(f"| {name} | {statistics.median(c for c, _ in runs_):.1f} | "
                     f"{statistics.median(w for _, w in runs_):.1f} |")
    return lines + [""]


def main(argv: list[str]) -> int:
    """Run the groups and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {TASKS + MORE_TASKS}")
    parser.add_argument("--quick", action="store_true", help="1 repeat of 0.3 s: a smoke run")
    parser.add_argument("--note", default="", help="a line for the notes (what else ran on the machine)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    timing = Timing(0.2, 0.3, 1) if args.quick else Timing(args.warmup, args.window, args.repeats)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    tasks = [t for t in args.tasks.split(",") if t]
    load_before = os.getloadavg()
    groups = [group(t) for t in tasks]
    measured = [(g, run_group(g, timing)) for g in groups]
    rounds = 1 if args.quick else 2 * args.repeats + 1
    cpu = [line for t in tasks for line in cpu_table(t, rounds) + async_cpu_table(t, rounds)]
    if "HalfCheetah-v5" in tasks:
        cpu += physics_table("HalfCheetah-v5", rounds)
    leaked = reap_leftovers()
    load_after = os.getloadavg()
    info = machine_info()
    info["load average (1 min) before / after"] = f"{load_before[0]:.1f} / {load_after[0]:.1f}"
    notes = [
        "**Load:** the machine's 2 cores are shared with other jobs unless the note below says otherwise "
        "(see the load averages above): absolute figures are low and noisy; read the ratios, which come "
        "from windows interleaved in one run.",
        "seedpool_native: each env is one MjData; a batch is one compiled call (numba, without the GIL) "
        "that sets each env's controls, calls MuJoCo's mj_step from its C library (Ant and Humanoid also "
        "mj_rnePostConstraint) and computes observations, rewards, terminations and the engine's "
        "bookkeeping (`seedpool/envs/families/mujoco/kernels.py`). With 2 threads, a batch's envs are "
        "posted to a ring of parts, one env each (`seedpool/envs/native/part_ring.py`), that a helper "
        "thread running a compiled loop without the GIL and the caller (in `step`, or while it waits in "
        "`recv`) claim and step; async (`_async`, except `_t1_async`) posts a batch as soon as it is sent. "
        "Sync with `auto` threads: split or not, as measured. `_t1_async` steps a batch in the calling "
        "thread when `recv` asks for it.",
        "EnvPool's tasks are its own C++ implementations with its own MuJoCo build.",
    ]
    if args.note:
        notes.append(f"note: {args.note}")
    if leaked:
        notes.append(f"leaked worker processes, killed: {leaked}")
    targets = [t for task in tasks for t in _targets(task)]
    text = render(info, timing, measured, targets, notes).replace(
        "# seedpool engine benchmark", "# Native MuJoCo families: benchmark", 1)
    text = text.replace("## Targets", "\n".join(cpu) + "\n## Targets", 1)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
