"""The serial pool's `step` against gymnasium's SyncVectorEnv.step, the envs alone.

    .venv/bin/python benchmarks/serial_step.py                 # writes results/serial_step.md
    .venv/bin/python benchmarks/serial_step.py --repeats 5 --steps 200 --out /tmp/x.md

`backend="serial"` is what `auto` picks inside a torch training loop (see loop.py), so its
per-step cost beside SyncVectorEnv's is the whole of the difference there. Both step the same
envs (the loop benchmark's cases with CleanRL's continuous-control wrappers, built by the same
thunks), and trivial envs that cost nothing themselves, with and without an info entry on
every step (MuJoCo's envs return four), so that the engines' own overhead shows.

Measured: CPU time of this thread per vector step (`time.thread_time`), which other jobs on
the machine inflate far less than wall time; windows of `--steps` steps alternate between
the two engines (the order flipped every window). Reported: medians over windows, and the
median of per-window ratios serial ÷ SyncVectorEnv (below 1: serial is cheaper).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np

import seedpool
from seedpool.bench.report import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop import cleanrl_thunk  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "serial_step.md"


class Trivial(gym.Env):
    """An env that costs nothing: HalfCheetah's shapes, optionally two info entries a step."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (17,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)

    def __init__(self, info: bool):
        self.info, self.t, self.obs = info, 0, np.zeros(17)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs.copy(), {}

    def step(self, action: Any):
        self.t += 1
        info = {"x_position": 0.1, "reward_ctrl": -0.2} if self.info else {}
        return self.obs.copy(), 0.0, False, self.t >= 1000, info


CASES: dict[str, tuple[Callable[[], gym.Env], int]] = {
    "trivial x 4, no info": (lambda: Trivial(False), 4),
    "trivial x 4, 2 info entries": (lambda: Trivial(True), 4),
    "trivial x 8, 2 info entries": (lambda: Trivial(True), 8),
    "Pendulum-v1 x 4": (cleanrl_thunk("Pendulum-v1"), 4),
    "HalfCheetah-v5 x 2": (cleanrl_thunk("HalfCheetah-v5"), 2),
    "Hopper-v5 x 4": (cleanrl_thunk("Hopper-v5"), 4),
    "HalfCheetah-v5 x 8": (cleanrl_thunk("HalfCheetah-v5"), 8),
}


def measure(thunk: Callable[[], gym.Env], n: int, steps: int, repeats: int) -> dict[str, list[float]]:
    """CPU microseconds per vector step of each engine, per window."""
    engines = {"gym_sync": gym.vector.SyncVectorEnv([thunk] * n),
               "serial": seedpool.make_vec([thunk] * n, backend="serial")}
    try:
        for envs in engines.values():
            envs.reset(seed=0)
        rng = np.random.default_rng(0)
        space = engines["gym_sync"].single_action_space
        actions = [rng.uniform(-1, 1, (n, *space.shape)).astype(np.float32) for _ in range(64)]
        out: dict[str, list[float]] = {k: [] for k in engines}
        for w in range(repeats + 1):  # the first window of each is a warm-up
            for name in (list(engines) if w % 2 else list(engines)[::-1]):
                envs = engines[name]
                c0 = time.thread_time()
                for s in range(steps):
                    envs.step(actions[s & 63])
                if w:
                    out[name].append(1e6 * (time.thread_time() - c0) / steps)
        return out
    finally:
        for envs in engines.values():
            envs.close()


def main(argv: list[str] | None = None) -> int:
    """Run every case, print the table and write it to --out."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15, help="timed windows per engine and case")
    p.add_argument("--steps", type=int, default=400, help="vector steps per window")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--note", default="")
    args = p.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = []
    for name, (thunk, n) in CASES.items():
        got = measure(thunk, n, args.steps, args.repeats)
        ratio = statistics.median(a / b for a, b in zip(got["serial"], got["gym_sync"]))
        gym_us, serial_us = statistics.median(got["gym_sync"]), statistics.median(got["serial"])
        print(f"{name}: SyncVectorEnv {gym_us:.1f} us, serial {serial_us:.1f} us, ratio {ratio:.3f}",
              file=sys.stderr, flush=True)
        rows.append(f"| {name} | {gym_us:,.1f} | {serial_us:,.1f} | {serial_us - gym_us:+.1f} | {ratio:.3f} |")
    head = ["# seedpool's serial step vs gymnasium's SyncVectorEnv, envs alone", ""]
    head += [f"- **{k}:** {v}" for k, v in machine_info().items()]
    head += [f"- **method:** CPU time of the stepping thread per vector step; {args.repeats} windows of "
             f"{args.steps} steps per engine, alternating, after one warm-up window each; medians over "
             "windows, and the median of per-window ratios.",
             f"- **load average (1 min) before/after:** {load_before:.2f} / {os.getloadavg()[0]:.2f}"
             + ("; other jobs were running" if load_before > 0.5 else "; quiet machine")]
    if args.note:
        head.append(f"- **note:** {args.note}")
    text = "\n".join(head + ["", "| case | SyncVectorEnv (CPU us/step) | serial (CPU us/step) | difference (us) "
                                 "| serial ÷ SyncVectorEnv (paired) |", "| --- | ---: | ---: | ---: | ---: |"]
                     + rows) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
