"""Multi-agent engine speed: PettingZoo envs with random actions, side by side in one run.

simple_spread_v3 x 64 envs (3 agents) and pistonball_v6 x 8 envs (20 agents, pixels):
one PettingZoo env in a plain loop (one core), SuperSuit's `concat_vec_envs_v1` (num_cpus 0, 1, 2),
seedpool's PettingZoo path (`native=False`, backend auto and process) and, for simple_spread,
seedpool's native family at 64 and 256 envs. Medians of repeats; agent steps/s and env steps/s.
Writes benchmarks/results/multiagent_speed.md.

    python benchmarks/multiagent_speed.py [--seconds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from seedpool.bench.report import cpu_model

RESULTS = Path(__file__).parent / "results"


def _factory(task: str):
    if task == "simple_spread_v3":
        from mpe2 import simple_spread_v3

        return simple_spread_v3.parallel_env
    from pettingzoo.butterfly import pistonball_v6

    return pistonball_v6.parallel_env


def _timed(step, seconds: float) -> tuple[int, float]:
    for _ in range(3):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n, time.perf_counter() - t0


def plain_loop(task: str, num_envs: int, seconds: float) -> tuple[float, float]:
    """One env on one core; (agent steps/s, env steps/s)."""
    env = _factory(task)()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    agents_stepped = [0]

    def step():
        if not env.agents:
            env.reset()
        agents_stepped[0] += len(env.agents)
        env.step({a: env.action_space(a).sample() if task != "simple_spread_v3" else int(rng.integers(5))
                  for a in env.agents})

    n, dt = _timed(step, seconds)
    env.close()
    return agents_stepped[0] / dt, n / dt


def supersuit(task: str, num_envs: int, seconds: float, num_cpus: int) -> tuple[float, float]:
    import supersuit as ss

    vec = ss.pettingzoo_env_to_vec_env_v1(_factory(task)())
    envs = ss.concat_vec_envs_v1(vec, num_envs, num_cpus=num_cpus, base_class="gymnasium")
    envs.reset(seed=0)
    rows = envs.num_envs
    space = envs.single_action_space if hasattr(envs, "single_action_space") else envs.action_space
    acts = [np.stack([space.sample() for _ in range(rows)]) for _ in range(8)]
    k = [0]

    def step():
        envs.step(acts[k[0] % 8])
        k[0] += 1

    n, dt = _timed(step, seconds)
    envs.close()
    return n * rows / dt, n * num_envs / dt


def seedpool_pool(task: str, num_envs: int, seconds: float, native: bool, backend: str = "auto"):
    import seedpool

    pool = seedpool.make(task, num_envs=num_envs, seed=0, native=native, backend=backend)
    pool.reset()
    space = pool.single_action_space
    acts = [np.stack([space.sample() for _ in range(pool.num_rows)]) for _ in range(8)]
    k = [0]

    def step():
        pool.step(acts[k[0] % 8])
        k[0] += 1

    n, dt = _timed(step, seconds)
    desc = repr(getattr(pool, "engine", pool))
    pool.close()
    return n * pool.num_rows / dt, n * num_envs / dt, desc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shared", default="", help="what else ran on the machine")
    args = ap.parse_args()
    cases = [
        ("simple_spread_v3", 64, "one mpe2 env, plain loop", lambda s: plain_loop("simple_spread_v3", 1, s)),
        ("simple_spread_v3", 64, "SuperSuit num_cpus=0", lambda s: supersuit("simple_spread_v3", 64, s, 0)),
        ("simple_spread_v3", 64, "SuperSuit num_cpus=1", lambda s: supersuit("simple_spread_v3", 64, s, 1)),
        ("simple_spread_v3", 64, "SuperSuit num_cpus=2", lambda s: supersuit("simple_spread_v3", 64, s, 2)),
        ("simple_spread_v3", 64, "seedpool PettingZoo path, auto",
         lambda s: seedpool_pool("simple_spread_v3", 64, s, False)),
        ("simple_spread_v3", 64, "seedpool PettingZoo path, process",
         lambda s: seedpool_pool("simple_spread_v3", 64, s, False, "process")),
        ("simple_spread_v3", 64, "seedpool native", lambda s: seedpool_pool("simple_spread_v3", 64, s, True)),
        ("simple_spread_v3", 256, "seedpool native", lambda s: seedpool_pool("simple_spread_v3", 256, s, True)),
        ("pistonball_v6", 8, "one pistonball env, plain loop", lambda s: plain_loop("pistonball_v6", 1, s)),
        ("pistonball_v6", 8, "SuperSuit num_cpus=0", lambda s: supersuit("pistonball_v6", 8, s, 0)),
        ("pistonball_v6", 8, "SuperSuit num_cpus=2", lambda s: supersuit("pistonball_v6", 8, s, 2)),
        ("pistonball_v6", 8, "seedpool PettingZoo path, auto", lambda s: seedpool_pool("pistonball_v6", 8, s, False)),
        ("pistonball_v6", 8, "seedpool PettingZoo path, process",
         lambda s: seedpool_pool("pistonball_v6", 8, s, False, "process")),
    ]
    results = {}
    for rep in range(args.repeats):  # repeats interleaved, so drift hits every case alike
        for task, n, name, fn in cases:
            out = fn(args.seconds)
            results.setdefault((task, n, name), []).append(out)
            print(rep, task, n, name, f"{out[0]:,.0f} agent steps/s", flush=True)
    import mpe2
    import pettingzoo
    import supersuit as ss_mod

    lines = [
        "# Multi-agent engine speed (random actions)",
        "",
        f"`python benchmarks/multiagent_speed.py --seconds {args.seconds} --repeats {args.repeats}`, "
        f"{time.strftime('%Y-%m-%d')}; {cpu_model()} x {os.cpu_count()} vCPU; Python {sys.version.split()[0]}, pettingzoo {pettingzoo.__version__}, "
        f"mpe2 {getattr(mpe2, '__version__', '?')}, supersuit {getattr(ss_mod, '__version__', '?')}. "
        f"Medians of {args.repeats} interleaved repeats of {args.seconds} s. {args.shared}",
        "",
        "| task | envs | what | agent steps/s | env steps/s | vs plain loop | repeats (agent steps/s) | layout |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = {}
    for (task, n, name), outs in results.items():
        agent = statistics.median(o[0] for o in outs)
        envs = statistics.median(o[1] for o in outs)
        if "plain loop" in name:
            base[task] = agent
        layout = outs[0][2] if len(outs[0]) > 2 else ""
        spread = f"{min(o[0] for o in outs):,.0f}-{max(o[0] for o in outs):,.0f}"
        lines.append(f"| {task} | {n} | {name} | {agent:,.0f} | {envs:,.0f} | {agent / base[task]:.2f}x | {spread} | {layout} |")
    lines += [
        "",
        "PufferLib's PettingZoo emulation (pufferlib-core 3.0.23) is not installed here (it pulls its own",
        "CUDA torch); the issue's measurement on this machine type (2026-12-01) put it at 13.0k agent",
        "steps/s Serial and 10.0k Multiprocessing on simple_spread x 64, against 11.9k for the plain",
        "loop of that run: 1.09x the plain loop. The goal \"1.5x the best of SuperSuit and PufferLib\"",
        "is therefore about 1.64x this table's plain loop (same-run ratios; absolute numbers move with",
        "the machine).",
        "",
        "Where mpe2's discrete envs are PettingZoo's converter over only its order and bounds checking",
        "wrappers, the PettingZoo path steps the converter over the raw env (the engine makes those checks",
        "once per batch) and builds `state()` from the step's observations (seedpool/envs/agents/shortcuts.py);",
        "the plain loop and SuperSuit step the env as its factory made it. Profile: multiagent_profile.md.",
        "",
    ]
    (RESULTS / "multiagent_speed.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
