"""The Atari frame's INTER_AREA resize: seedpool's compiled one against cv2.resize, and what it
does to a Pong step.

    .venv/bin/python benchmarks/atari_resize.py                 # writes results/atari_resize.md
    .venv/bin/python benchmarks/atari_resize.py --repeats 5 --out /tmp/x.md

Two measurements, each alternating the two sides window by window (order flipped every
window), CPU time of this thread (`time.thread_time`, which other jobs inflate far less than
wall time), medians over windows and the median of per-window ratios:
- one 210x160 -> 84x84 grayscale resize of a Pong frame: `seedpool.envs.families.atari.resize` against
  `cv2.resize(..., interpolation=cv2.INTER_AREA)` (the same output, bit for bit);
- one step of 8 Pong-v5 envs in a serial pool (what `auto` picks inside a torch loop, see
  loop.py) with the compiled resize (today's default) against the same pool whose envs use
  cv2 for it (EnvPool is not beside them: this thread's CPU time cannot see its worker threads;
  loop.py and the engine benchmark compare with it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

import seedpool
from seedpool.bench.report import machine_info
from seedpool.envs.families.atari.resize import area_resizer

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "atari_resize.md"


def alternate(sides: dict[str, Callable[[], None]], calls: int, repeats: int) -> dict[str, list[float]]:
    """CPU microseconds per call of each side, per window (one warm-up window each)."""
    out: dict[str, list[float]] = {k: [] for k in sides}
    for w in range(repeats + 1):
        for name in (list(sides) if w % 2 else list(sides)[::-1]):
            fn = sides[name]
            c0 = time.thread_time()
            for _ in range(calls):
                fn()
            if w:
                out[name].append(1e6 * (time.thread_time() - c0) / calls)
    return out


def pong_frame() -> np.ndarray:
    """A grayscale Pong screen some way into a game (a real frame: few values, sharp edges)."""
    from ale_py import ALEInterface, roms

    ale = ALEInterface()
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path("pong"))
    for t in range(400):
        ale.act(ale.getMinimalActionSet()[t % 3])
    frame = np.empty((210, 160), np.uint8)
    ale.getScreenGrayscale(frame)
    return frame


def resize_row(repeats: int) -> tuple[str, float]:
    frame, out = pong_frame(), np.empty((84, 84), np.uint8)
    ours = area_resizer((210, 160), (84, 84))
    ours(frame, out)
    assert np.array_equal(out, cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA))
    got = alternate({"compiled": lambda: ours(frame, out),
                     "cv2": lambda: cv2.resize(frame, (84, 84), dst=out, interpolation=cv2.INTER_AREA)},
                    2000, repeats)
    ratio = statistics.median(a / b for a, b in zip(got["compiled"], got["cv2"]))
    c, v = statistics.median(got["compiled"]), statistics.median(got["cv2"])
    return f"| one frame, 210x160 -> 84x84 | {c:,.1f} | {v:,.1f} | {ratio:.3f} |", ratio


def step_row(repeats: int) -> tuple[str, float]:
    compiled = seedpool.make("Pong-v5", num_envs=8, backend="serial", seed=0)
    plain = seedpool.make("Pong-v5", num_envs=8, backend="serial", seed=0)
    for env in plain._exec.local.envs:
        env.unwrapped._area = None  # this pool's envs resize with cv2, as before resize.py
    actions = np.random.default_rng(0).integers(0, 6, (256, 8))
    pools = {"compiled": compiled, "cv2": plain}
    counters = dict.fromkeys(pools, 0)

    def stepper(name):
        pool = pools[name]

        def step():
            counters[name] += 1
            pool.step(actions[counters[name] & 255])
        return step

    try:
        for pool in pools.values():
            pool.reset()
        got = alternate({k: stepper(k) for k in pools}, 200, repeats)
    finally:
        for pool in pools.values():
            pool.close()
    ratio = statistics.median(a / b for a, b in zip(got["compiled"], got["cv2"]))
    c, v = statistics.median(got["compiled"]), statistics.median(got["cv2"])
    return f"| Pong-v5 x 8, serial pool step | {c:,.1f} | {v:,.1f} | {ratio:.3f} |", ratio


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15, help="timed windows per side")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--note", default="")
    args = p.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = [resize_row(args.repeats)[0], step_row(args.repeats)[0]]
    lines = ["# The Atari frame resize: compiled vs cv2.resize", ""]
    lines += [f"- **{k}:** {v}" for k, v in machine_info().items()]
    lines += [f"- **method:** CPU time of this thread per call; {args.repeats} windows per side (2000 resizes or "
              "200 vector steps each), alternating, after one warm-up window each; medians over windows, and "
              "the median of per-window ratios compiled ÷ cv2. Both sides give the same frames bit for bit "
              "(tests/test_atari_resize.py, tests/test_atari.py against EnvPool).",
              f"- **load average (1 min) before/after:** {load_before:.2f} / {os.getloadavg()[0]:.2f}"
              + ("; other jobs were running" if load_before > 0.5 else "; quiet machine")]
    if args.note:
        lines.append(f"- **note:** {args.note}")
    lines += ["", "| what | compiled resize (us) | cv2.resize (us) | compiled ÷ cv2 |",
              "| --- | ---: | ---: | ---: |", *rows]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
