"""Per-step cost of one AtariEnv next to one EnvPool env (num_envs=1, num_threads=1).

Both step the same game with EnvPool's default options and random actions (drawn up front).
Windows alternate between the two engines so that machine noise hits both alike; the medians
of wall-clock and process-CPU time per step are printed as a markdown table, with the hardware
and package versions. Run: `python benchmarks/atari_single_env.py --windows 5`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata

import numpy as np
import tyro

from seedpool.envs.families.atari.factory import make_atari


@dataclasses.dataclass
class Config:
    """Benchmark settings."""

    task: str = "Pong-v5"
    """EnvPool-style task id."""
    windows: int = 5
    """Timed windows per engine (the median is reported)."""
    window_s: float = 2.0
    """Length of one timed window in seconds."""
    warmup_s: float = 1.0
    """Untimed stepping before the first window, per engine."""
    cv2_threads: int | None = None
    """If set, cv2.setNumThreads(value) first (None keeps OpenCV's default)."""
    seed: int = 0
    """Seed of both envs and of the action sequence."""


Stepper = Callable[[int], None]


def seedpool_stepper(cfg: Config, n_actions: list[int]) -> Stepper:
    """One AtariEnv; resets by hand when an episode ends (as the engine would)."""
    env = make_atari(cfg.task)
    env.reset(seed=cfg.seed)
    n_actions.append(env.action_space.n)

    def step(action: int) -> None:
        _, _, term, trunc, _ = env.step(action)
        if term or trunc:
            env.reset()

    return step


def envpool_stepper(cfg: Config, n_actions: list[int]) -> Stepper | None:
    """One EnvPool env in its own pool (it autoresets by itself), or None if not installed."""
    try:
        import envpool
    except ImportError:
        return None
    env = envpool.make(cfg.task, env_type="gymnasium", num_envs=1, num_threads=1, seed=cfg.seed)
    env.reset()
    n_actions.append(env.action_space.n)
    batches = [np.array([a], np.int32) for a in range(env.action_space.n)]

    def step(action: int) -> None:
        env.step(batches[action])

    return step


def time_window(step: Stepper, actions: np.ndarray, seconds: float) -> tuple[float, float]:
    """Step for `seconds`; return (wall, CPU) microseconds per step."""
    n, i = len(actions), 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    deadline = wall0 + seconds
    while True:
        for _ in range(50):  # check the clock every 50 steps
            step(int(actions[i % n]))
            i += 1
        if time.perf_counter() >= deadline:
            break
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return wall / i * 1e6, cpu / i * 1e6


def environment_notes() -> str:
    """Hardware and versions, to print next to the numbers."""
    model = "unknown"
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         model)
    versions = []
    for pkg in ("numpy", "ale-py", "opencv-python-headless", "envpool", "gymnasium"):
        try:
            versions.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{time.strftime('%Y-%m-%d %H:%M:%S')}; {platform.python_version()}; "
            f"{os.cpu_count()} CPUs ({model}); load avg at start {load:.2f}; " + ", ".join(versions))


def main(cfg: Config) -> None:
    """Run the interleaved windows and print a markdown table."""
    if cfg.cv2_threads is not None:
        import cv2

        cv2.setNumThreads(cfg.cv2_threads)
    n_actions: list[int] = []
    engines: dict[str, Stepper] = {"seedpool AtariEnv": seedpool_stepper(cfg, n_actions)}
    theirs = envpool_stepper(cfg, n_actions)
    if theirs is not None:
        engines["envpool (num_envs=1, num_threads=1)"] = theirs
    actions = np.random.default_rng(cfg.seed).integers(0, min(n_actions), 100_000)
    for step in engines.values():
        time_window(step, actions, cfg.warmup_s)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
    for _ in range(cfg.windows):
        for name, step in engines.items():
            results[name].append(time_window(step, actions, cfg.window_s))
    print(f"\n{cfg.task}, default EnvPool options, random actions; {cfg.windows} windows of "
          f"{cfg.window_s:g} s per engine, interleaved; median (min-max)\n")
    print("| engine | wall us/step | CPU us/step | steps/s (wall) |")
    print("|---|---:|---:|---:|")
    for name, rows in results.items():
        walls, cpus = [w for w, _ in rows], [c for _, c in rows]
        wall = statistics.median(walls)
        print(f"| {name} | {wall:.0f} ({min(walls):.0f}-{max(walls):.0f}) | "
              f"{statistics.median(cpus):.0f} | {1e6 / wall:,.0f} |")
    print(f"\n{environment_notes()}")


if __name__ == "__main__":
    main(tyro.cli(Config))
