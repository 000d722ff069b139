"""Libraries' own EnvPool loops on envpool 1.2.5 and on seedpool (`install_as_envpool()`).

rl-games' envpool vecenv (`step(actions)` on Pong-v5), Tianshou's Collector
(`collect(n_step=...)` with integer random actions) and skrl's gymnasium wrapper
(`wrap_env(envpool.make_gymnasium(...))`, `step`) run in a child process per run (the shim
and the real envpool cannot share one), interleaved envpool, seedpool, envpool, ... so that
load from elsewhere hits both; after one untimed warm-up step loop, each run times STEPS
batched steps of N_ENVS envs. The summary takes medians over repeats; the ratio is
seedpool's steps/s over envpool's. The shim's pools use `backend="auto"`, what a user gets.

    .venv/bin/python benchmarks/envpool_libraries.py [--repeats 3] [--steps 1000]

writes benchmarks/results/envpool_libraries.md (machine, versions, load, per-run rows, medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "envpool_libraries.md"
TASK, N_ENVS = "Pong-v5", 8


def rlgames(steps: int) -> float:
    """Seconds for `steps` steps of rl-games' envpool vecenv."""
    from rl_games.envs.envpool import create_envpool

    env = create_envpool(env_name=TASK, num_actors=N_ENVS, seed=0)
    env.reset()
    acts = np.random.default_rng(0).integers(0, 6, (steps + 50, N_ENVS)).astype(np.int32)
    for a in acts[:50]:  # warm-up
        env.step(a)
    start = time.perf_counter()
    for a in acts[50:]:
        env.step(a)
    return time.perf_counter() - start


def tianshou(steps: int) -> float:
    """Seconds for Tianshou's Collector to collect `steps` x N_ENVS transitions."""
    import envpool
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch, Collector, VectorReplayBuffer

    class Random(Policy):
        def forward(self, batch, state=None, **kwargs):
            return Batch(act=np.random.randint(0, 6, len(batch.obs)), state=state)

    envs = envpool.make_gymnasium(TASK, num_envs=N_ENVS, seed=0)
    collector = Collector(Random(envs.action_space), envs, VectorReplayBuffer(4096, buffer_num=N_ENVS))
    collector.collect(n_step=50 * N_ENVS, reset_before_collect=True)  # warm-up
    start = time.perf_counter()
    collector.collect(n_step=steps * N_ENVS)
    return time.perf_counter() - start


def skrl(steps: int) -> float:
    """Seconds for `steps` steps of skrl's gymnasium wrapper on `envpool.make_gymnasium`."""
    import envpool
    import torch
    from skrl.envs.wrappers.torch import wrap_env

    env = wrap_env(envpool.make_gymnasium(TASK, num_envs=N_ENVS, seed=0), wrapper="gymnasium")
    env.reset()
    acts = torch.as_tensor(np.random.default_rng(0).integers(0, 6, (steps + 50, N_ENVS, 1)))
    for a in acts[:50]:  # warm-up
        env.step(a)
    start = time.perf_counter()
    for a in acts[50:]:
        env.step(a)
    return time.perf_counter() - start


LIBS = {"rlgames": rlgames, "tianshou": tianshou, "skrl": skrl}


def child(lib: str, backend: str, steps: int) -> None:
    """In a fresh process: install the shim if asked, time one run, print the seconds."""
    if backend == "seedpool":
        import seedpool

        seedpool.install_as_envpool(quiet=True)
    print(LIBS[lib](steps))


def run(lib: str, backend: str, steps: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", lib, backend, str(steps)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    """CPU, cores, load and versions."""
    from importlib.metadata import version

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    libs = ", ".join(f"{p} {version(p)}" for p in ("envpool", "rl-games", "tianshou", "skrl", "gymnasium", "ale-py", "torch"))
    return f"{cpu}, {os.cpu_count()} logical CPUs; Python {sys.version.split()[0]}; {libs}"


def main() -> None:
    """Interleaved runs, medians, the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    load_before = os.getloadavg()
    rows, sps = [], {}
    for rep in range(args.repeats):
        for lib in LIBS:
            for backend in ("envpool", "seedpool"):
                seconds = run(lib, backend, args.steps)
                rate = args.steps * N_ENVS / seconds
                sps.setdefault((lib, backend), []).append(rate)
                rows.append(f"| {rep} | {lib} | {backend} | {seconds:.2f} | {rate:,.0f} |")
    load_after = os.getloadavg()
    lines = ["# Libraries' EnvPool loops: envpool 1.2.5 vs seedpool through install_as_envpool()", "",
             f"Written by `benchmarks/envpool_libraries.py --repeats {args.repeats} --steps {args.steps}`; "
             f"{TASK}, {N_ENVS} envs, env steps per second of the library's own loop.", "",
             f"Machine: {machine()}.", "",
             f"Notes: load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (runs interleaved, "
             "so that load from elsewhere hits both; read the ratios). TorchRL is not here: its EnvPool "
             "path (`MultiThreadedEnv`) fails on envpool 1.2.5 itself, so there is nothing to compare.", "",
             "| library | envpool median steps/s | seedpool median steps/s | seedpool / envpool |", "|---|---|---|---|"]
    for lib in LIBS:
        a, b = statistics.median(sps[(lib, "envpool")]), statistics.median(sps[(lib, "seedpool")])
        lines.append(f"| {lib} | {a:,.0f} | {b:,.0f} | {b / a:.2f}x |")
    lines += ["", "| repeat | library | engine | seconds | steps/s |", "|---|---|---|---|---|", *rows, ""]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
