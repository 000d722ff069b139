"""What forwarding env info costs: make_vec steps/s with and without it, interleaved medians.

    .venv/bin/python benchmarks/info_forwarding.py                      # this tree only
    git archive HEAD seedpool | tar -x -C /tmp/sp_base                  # a tree to compare with
    .venv/bin/python benchmarks/info_forwarding.py --baseline /tmp/sp_base --out results/x.md

Each tree (this one, and `--baseline`: a folder holding another `seedpool` package, e.g. the
last commit, which drops undeclared info) runs in its own process that builds every case
once; the controller then takes `--repeats` windows per case round-robin, alternating the
trees within each case, so that load from elsewhere hits both alike. Medians are reported.

Cases (8 envs, make_vec, random actions drawn up front):
- cartpole / pong: envs whose info holds nothing undeclared (the hot path must not change).
- xinfo_*: CartPole whose info holds a float every step: forwarded (this tree), dropped (a
  baseline without forwarding), or declared with `info_keys` (shared arrays, both trees).
- res_*: CartPole inside RecordEpisodeStatistics: an `episode` dict at each episode end.
- gym_sync_*: gymnasium's SyncVectorEnv on the same envs (which batches every info too).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

N = 8
CASES = {
    "cartpole_auto": "make_vec('CartPole-v1', num_envs=N)",
    "pong_auto": "make_vec('Pong-v5', num_envs=N)",
    "xinfo_serial": "make_vec(XInfo, num_envs=N, backend='serial')",
    "xinfo_serial_declared": "make_vec(XInfo, num_envs=N, backend='serial', info_keys={'x_pos': 'float64'})",
    "xinfo_process": "make_vec(XInfo, num_envs=N, backend='process', num_workers=2)",
    "xinfo_process_declared": "make_vec(XInfo, num_envs=N, backend='process', num_workers=2, "
                              "info_keys={'x_pos': 'float64'})",
    "res_serial": "make_vec(RES, num_envs=N, backend='serial')",
    "res_process": "make_vec(RES, num_envs=N, backend='process', num_workers=2)",
    "gym_sync_xinfo": "gym.vector.SyncVectorEnv([XInfo] * N)",
    "gym_sync_res": "gym.vector.SyncVectorEnv([RES] * N)",
}

SERVER = r'''
import sys, time
import gymnasium as gym
import numpy as np
import psutil
from seedpool import make_vec

ME = psutil.Process()

def cpu_seconds():
    """CPU time of this process and its worker processes (what a step costs, whatever the load)."""
    total = time.process_time()
    for child in ME.children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total

N = __N__

class XInfoWrapper(gym.Wrapper):
    """CartPole whose info holds its cart position every step."""
    def step(self, action):
        obs, rew, term, trunc, info = self.env.step(action)
        info["x_pos"] = float(obs[0])
        return obs, rew, term, trunc, info

def XInfo():
    return XInfoWrapper(gym.make("CartPole-v1"))

def RES():
    return gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))

envs = {name: eval(expr) for name, expr in __CASES__.items()}
rng = np.random.default_rng(0)
actions = {}
for name, env in envs.items():
    env.reset(seed=0)
    actions[name] = [env.action_space.sample() for _ in range(256)]
import seedpool
print("ready", seedpool.__file__, flush=True)
for line in sys.stdin:
    name, seconds = line.split()
    env, acts = envs[name], actions[name]
    k, c0, t0 = 0, cpu_seconds(), time.perf_counter()
    end = t0 + float(seconds)
    while True:
        env.step(acts[k & 255])
        k += 1
        if k % 16 == 0 and time.perf_counter() >= end:
            break
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    print(k * N / wall, 1e6 * cpu / (k * N), flush=True)
for env in envs.values():
    env.close()
'''


def start(tree: Path, cases: dict[str, str]) -> subprocess.Popen:
    """A server process that builds `cases` with the seedpool package found in `tree`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{env.get('PYTHONPATH', '')}"
    code = SERVER.replace("__N__", str(N)).replace("__CASES__", repr(cases))
    # cwd=tree: `python -c` puts the working directory first on sys.path.
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tree,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    expected = str(tree.resolve() / "seedpool" / "__init__.py")
    if line[:1] != ["ready"] or line[1:] != [expected]:
        raise RuntimeError(f"benchmark server for {tree} failed to start or imported {line[1:]}")
    return proc


def window(proc: subprocess.Popen, case: str, seconds: float) -> tuple[float, float]:
    """One timed window: (env steps per second of wall time, CPU microseconds per env step)."""
    proc.stdin.write(f"{case} {seconds}\n")
    proc.stdin.flush()
    rate, cpu = proc.stdout.readline().split()
    return float(rate), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, default=None, help="folder holding another seedpool package")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--window", type=float, default=1.5)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cases = {c: CASES[c] for c in args.cases.split(",")}
    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    load_before = os.getloadavg()
    servers = {name: start(tree, cases) for name, tree in trees.items()}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for case in cases:
            for proc in servers.values():
                window(proc, case, args.warmup)
        for rep in range(args.repeats):
            for case in cases:
                order = list(servers) if rep % 2 == 0 else list(reversed(servers))
                for name in order:
                    results.setdefault((case, name), []).append(window(servers[name], case, args.window))
    finally:
        for proc in servers.values():
            proc.stdin.close()
            proc.wait(timeout=30)
    report = render(cases, list(servers), results, args, load_before)
    print(report)
    if args.out:
        args.out.write_text(report)


def render(cases, trees, results, args, load_before) -> str:
    """The markdown report: per case, CPU per step and steps/s per tree, and paired ratios."""
    import gymnasium
    import numpy

    paired = len(trees) == 2
    lines = [
        "# Info forwarding: make_vec cost per step", "",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; "
        f"python {platform.python_version()}, numpy {numpy.__version__}, gymnasium {gymnasium.__version__}",
        f"- {N} envs; {args.repeats} windows of {args.window} s per case and tree, round-robin, "
        f"after {args.warmup} s warm-up; medians (min-max)",
        "- CPU us/step: CPU time of the pool's process and its workers per env step (robust to load "
        "from elsewhere); steps/s: wall clock (is not)",
        f"- load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}",
        f"- trees: {', '.join(trees)}" + (f" (baseline = {args.baseline})" if args.baseline else ""),
        "",
        "| case | " + " | ".join(f"{t}: CPU us/step" for t in trees)
        + (" | CPU ratio (paired)" if paired else "") + " | "
        + " | ".join(f"{t}: steps/s" for t in trees) + " |",
        "|---|" + "---:|" * (2 * len(trees) + (1 if paired else 0)),
    ]
    for case in cases:
        cpu_cells, rate_cells = [], []
        for tree in trees:
            rates = [r for r, _ in results[(case, tree)]]
            cpus = [c for _, c in results[(case, tree)]]
            cpu_cells.append(f"{statistics.median(cpus):.2f} ({min(cpus):.2f}-{max(cpus):.2f})")
            rate_cells.append(f"{statistics.median(rates):,.0f}")
        ratio = ""
        if paired:
            pairs = [a[1] / b[1] for a, b in zip(results[(case, trees[0])], results[(case, trees[1])])]
            ratio = f" | {statistics.median(pairs):.3f}"
        lines.append(f"| {case} | " + " | ".join(cpu_cells) + ratio + " | " + " | ".join(rate_cells) + " |")
    lines.append("")
    lines.append(f"Written {time.strftime('%Y-%m-%d %H:%M')} by benchmarks/info_forwarding.py.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
