"""Sequence replay sampling (R2D2) against a plain NumPy gather: 64 sequences of 80 steps of 4x84x84.

The issue's bar: sampling with stored state and frame dedup on at least as fast as a plain
NumPy gather of the same sequences from an array without dedup.

- **seedpool**: ``SequenceReplay(capacity, 4x84x84 uint8, ..., state {"h", "c"} of 512,
  frame_dedup=True)``, prioritized (alpha 0.9), filled with random frame stacks that shift by
  one frame per step; timed: ``sample(64)`` (sum-tree draw, IS weights, every field gathered,
  ``obs`` ``[64, 81, 4, 84, 84]`` as a view over the gathered frames).
- **seedpool, obs copied**: the same plus ``np.ascontiguousarray(obs)`` (what a learner that needs
  the stacks in one block pays on top, e.g. the CPU learner before its convolution).
- **NumPy gather**: arrays ``obs [capacity, 81, 4, 84, 84]`` and the same small fields; timed:
  uniform indices and ``arr[idx]`` of every field.

Calls alternate one by one inside each window, the first rotating, so load from elsewhere hits
all alike; each figure is the median over ``--repeats`` windows, and a ratio the median of the
per-window ratios.

    nice -n 5 .venv/bin/python benchmarks/sequence_replay_speed.py [--capacity 256] [--repeats 7]

writes benchmarks/results/sequence_replay_speed.md (or ``--out``).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numba
import numpy as np
import psutil

import seedpool
from seedpool.replay.sequence import SequenceReplay

OUT = Path(__file__).parent / "results" / "sequence_replay_speed.md"
L, K, HW, N, H = 80, 4, (84, 84), 64, 512


def fill(capacity: int, rng: np.random.Generator) -> tuple[SequenceReplay, dict]:
    """A dedup sequence replay and plain arrays holding the same ``capacity`` sequences."""
    rb = SequenceReplay(capacity, ((K, *HW), np.uint8), ((), np.int64), {"h": H, "c": H}, length=L, seed=0,
                        frame_dedup=True)
    plain = {"obs": np.empty((capacity, L + 1, K, *HW), np.uint8), "action": np.zeros((capacity, L), np.int64),
             "reward": np.zeros((capacity, L), np.float32), "terminated": np.zeros((capacity, L), bool),
             "mask": np.ones((capacity, L), bool), "first": np.zeros((capacity, L + 1), bool),
             "h": np.zeros((capacity, H), np.float32), "c": np.zeros((capacity, H), np.float32)}
    for start in range(0, capacity, 16):
        n = min(16, capacity - start)
        frames = rng.integers(0, 256, (n, L + K, *HW), dtype=np.uint8)
        obs = np.lib.stride_tricks.sliding_window_view(frames, K, axis=1).transpose(0, 1, 4, 2, 3)[:, : L + 1]
        small = {k: v[start:start + n] for k, v in plain.items() if k not in ("obs", "h", "c")}
        rb.add(obs=obs, state={"h": plain["h"][start:start + n], "c": plain["c"][start:start + n]}, **small)
        plain["obs"][start:start + n] = obs
    return rb, plain


def windows(cases: dict, repeats: int, window: float) -> dict[str, list[float]]:
    """Calls per second of each case, per window."""
    out: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        spent = {name: 0.0 for name in names}
        calls = {name: 0 for name in names}
        end = time.perf_counter() + window
        while time.perf_counter() < end:
            for name in order:
                t0 = time.perf_counter()
                cases[name]()
                spent[name] += time.perf_counter() - t0
                calls[name] += 1
        for name in names:
            out[name].append(calls[name] / spent[name])
    return out


def machine() -> list[str]:
    """Date, hardware, load and versions, as bullet lines."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "unknown"
    return [
        f"- **date:** {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- **machine:** nproc = {os.cpu_count()}; {cpu}; {psutil.virtual_memory().total / 2**30:.0f} GiB RAM; "
        f"load average at the start {os.getloadavg()[0]:.1f}",
        f"- **python:** {platform.python_version()}; **numpy:** {np.__version__}; **numba:** {numba.__version__}",
        f"- **seedpool:** {seedpool.__version__} ({commit})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=256, help="sequences held (the plain array is 2.3 MB each)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--window", type=float, default=2.0, help="seconds per window")
    parser.add_argument("--note", default="", help="a line about the conditions (e.g. the machine was shared)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    header = machine()
    rb, plain = fill(args.capacity, rng)
    draw = np.random.default_rng(1)
    cases = {
        "seedpool sample (dedup, view)": lambda: rb.sample(N),
        "seedpool sample + contiguous obs": lambda: np.ascontiguousarray(rb.sample(N)["obs"]),
        "NumPy gather (no dedup)": lambda: {k: v[draw.integers(0, args.capacity, N)] for k, v in plain.items()},
    }
    for case in cases.values():  # warm-up: numba kernels, page faults
        case()
    got = windows(cases, args.repeats, args.window)
    base = got["NumPy gather (no dedup)"]
    mb = {"seedpool sample (dedup, view)": rb.nbytes(), "seedpool sample + contiguous obs": rb.nbytes(),
          "NumPy gather (no dedup)": sum(v.nbytes for v in plain.values())}
    lines = ["# Sequence replay sampling: 64 sequences x 80 steps of 4x84x84, stored LSTM state", "",
             *header, f"- **settings:** capacity {args.capacity} sequences, {args.repeats} windows of "
             f"{args.window:g} s, calls alternating", ""]
    if args.note:
        lines += [f"**Conditions:** {args.note}", ""]
    lines += ["| case | samples/s, median [min-max] | vs NumPy gather (median of per-window ratios) | storage MiB |",
              "|---|---|---|---|"]
    for name, vals in got.items():
        per = sorted(a / b for a, b in zip(vals, base))
        lines.append(f"| {name} | {statistics.median(vals):,.1f} [{min(vals):,.1f}-{max(vals):,.1f}] | "
                     f"{statistics.median(per):.2f}x [{per[0]:.2f}-{per[-1]:.2f}] | {mb[name] / 2**20:,.0f} |")
    lines += ["", "Every case returns the same fields; seedpool's `obs` is a read-only sliding view over the "
              f"{L + K} frames of each sequence gathered once ({(L + K) / ((L + 1) * K):.2f} of the stacks' bytes), "
              "so a learner that needs one contiguous block pays the second line's copy (a GPU learner can move the "
              "frames and stack them on the device instead).", ""]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
