"""CPU time per env step of seedpool's PettingZoo path, and where it goes.

CPU time (`time.process_time`, and the workers' from /proc) rather than wall-clock
throughput, so that the figures hold on a machine shared with other runs. For one task:

- the plain loop: one PettingZoo env stepped with a dict of actions;
- the pool on the serial backend (every env in this process), its total, and the same run
  split by timing wrappers: PettingZoo's converter step, `state()`, resets, the adapter's own
  work, and the rest (engine runner, RowBook, AgentPool);
- the pool on backend auto: this process's and each worker's CPU, and the wall time.

    python benchmarks/multiagent_profile.py [--task simple_spread_v3] [--envs 64] [--trials 7]

Prints a markdown table; run it under two checkouts (PYTHONPATH) for a before/after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def _factory(task: str):
    if task == "simple_spread_v3":
        from mpe2 import simple_spread_v3

        return simple_spread_v3.parallel_env
    from pettingzoo.butterfly import pistonball_v6

    return pistonball_v6.parallel_env


def plain(task: str, steps: int) -> float:
    """CPU seconds per step of one env in a plain loop."""
    env = _factory(task)()
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def action(a):
        return int(rng.integers(5)) if task == "simple_spread_v3" else env.action_space(a).sample()

    t = time.process_time()
    for _ in range(steps):
        if not env.agents:
            env.reset()
        env.step({a: action(a) for a in env.agents})
    out = (time.process_time() - t) / steps
    env.close()
    return out


def _pool(task: str, envs: int, backend: str):
    import seedpool

    pool = seedpool.make(task, num_envs=envs, seed=0, native=False, backend=backend)
    pool.reset()
    space = pool.single_action_space
    acts = [np.stack([space.sample() for _ in range(pool.num_rows)]) for _ in range(8)]
    return pool, acts


def serial(pool, acts, batches: int) -> float:
    """CPU seconds per env step of the serial pool."""
    t = time.process_time()
    for i in range(batches):
        pool.step(acts[i % 8])
    return (time.process_time() - t) / batches / pool.num_envs


class Split:
    """Timing wrappers around the parts of a step (seconds summed per part)."""

    def __init__(self):
        from pettingzoo.utils import conversions

        from seedpool.envs.agents import adapter, pool

        self.acc: dict[str, float] = {}
        self.undo = []
        self._wrap(conversions.aec_to_parallel_wrapper, "step", "env step")
        self._wrap(conversions.aec_to_parallel_wrapper, "reset", "env reset")
        self._wrap(adapter.ParallelAgentsEnv, "step", "adapter step")
        self._wrap(pool.AgentPool, "step", "pool step")
        try:
            from mpe2._mpe_utils.simple_env import SimpleEnv

            self._wrap(SimpleEnv, "state", "env state()")
        except ImportError:
            pass

    def _wrap(self, cls, name, key):
        f = cls.__dict__[name]
        acc = self.acc

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                acc[key] = acc.get(key, 0.0) + time.perf_counter() - t

        setattr(cls, name, timed)
        self.undo.append((cls, name, f))

    def close(self):
        for cls, name, f in self.undo:
            setattr(cls, name, f)

    def parts(self, env_steps: int) -> dict[str, float]:
        g = lambda k: self.acc.get(k, 0.0) / env_steps  # noqa: E731
        return {
            "env step (PettingZoo converter)": g("env step"),
            "env state()": g("env state()"),
            "env reset": g("env reset"),
            "adapter, own": g("adapter step") - g("env step") - g("env state()"),
            "engine + RowBook + AgentPool": g("pool step") - g("adapter step") - g("env reset"),
        }


def _cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def parallel(task: str, envs: int, seconds: float) -> dict[str, float]:
    """Per env step on backend auto: this process's CPU, the workers', and the wall time."""
    pool, acts = _pool(task, envs, "auto")
    for i in range(3):
        pool.step(acts[i % 8])
    pids = list(pool.worker_pids)
    w0 = [_cpu_of(p) for p in pids]
    m0, t0, n = time.process_time(), time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        pool.step(acts[n % 8])
        n += 1
    wall, main = time.perf_counter() - t0, time.process_time() - m0
    workers = sum(_cpu_of(p) - a for p, a in zip(pids, w0))
    pool.close()
    steps = n * envs
    return {"this process": main / steps, "workers": workers / steps, "wall": wall / steps}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="simple_spread_v3")
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    import seedpool

    heavy = args.task != "simple_spread_v3"
    steps, batches = (40, 3) if heavy else (400, 8)
    pool, acts = _pool(args.task, args.envs, "serial")
    pool.step(acts[0])
    plains, pools = [], []
    for _ in range(args.trials):  # interleaved, so drift hits both alike
        plains.append(plain(args.task, steps))
        pools.append(serial(pool, acts, batches))
    split = Split()
    n = 0
    for i in range(batches * args.trials):
        pool.step(acts[i % 8])
        n += pool.num_envs
    parts = split.parts(n)
    split.close()
    pool.close()
    par = parallel(args.task, args.envs, 2.0 if not heavy else 4.0)
    us = lambda x: f"{x * 1e6:,.1f}"  # noqa: E731
    print(f"{args.label} ({os.path.dirname(seedpool.__file__)}), {args.task} x {args.envs}, {args.trials} trials; "
          "CPU us per env step (median / min of trials)")
    print("| what | CPU us per env step |\n|---|---|")
    print(f"| plain loop, one env | {us(statistics.median(plains))} / {us(min(plains))} |")
    print(f"| pool, serial backend, total | {us(statistics.median(pools))} / {us(min(pools))} |")
    for k, v in parts.items():
        print(f"| - {k} (timed run) | {us(v)} |")
    print(f"| pool, backend auto: this process | {us(par['this process'])} |")
    print(f"| pool, backend auto: workers | {us(par['workers'])} |")
    print(f"| pool, backend auto: wall per env step | {us(par['wall'])} |")


if __name__ == "__main__":
    main()
