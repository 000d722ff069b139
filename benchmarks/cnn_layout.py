"""The Nature CNN on the CPU: channels-last against the default (NCHW) memory layout.

The learner's update is most of a CPU Atari run's time (PPO on Pong: ~80%), so its layout
matters. Both networks are the same seedpool policy with the same weights; only the memory
format of the parameters and of the converted observations differs. Timed side by side,
interleaved, medians of repeats:

- update: one Adam step of PPO's loss terms on a minibatch of stacked 4x84x84 frames;
- act: one no-grad forward for a batch of envs (what inference does every step).

    .venv/bin/python benchmarks/cnn_layout.py [--repeats 9] [--threads 2]

writes benchmarks/results/cnn_layout.md.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from seedpool.bench.report import machine_info, write_markdown
from seedpool.models import ModelConfig, make_policy

OUT = Path(__file__).parent / "results" / "cnn_layout.md"
LAYOUTS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}


def build(layout: torch.memory_format, minibatch: int, act_batch: int):
    """A policy in `layout` with its optimizer, and the two timed operations."""
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    policy = make_policy(space, gym.spaces.Discrete(6), ModelConfig(kind="cnn"))
    policy.memory_format = layout
    policy.to(memory_format=layout)
    optimizer = torch.optim.Adam(policy.parameters(), lr=2.5e-4)
    gen = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (minibatch, 4, 84, 84), dtype=torch.uint8, generator=gen)
    actions = torch.randint(0, 6, (minibatch,), generator=gen)

    def update() -> None:
        logprob, entropy, value = policy.evaluate(obs, actions)
        loss = -logprob.mean() + 0.5 * value.square().mean() - 0.01 * entropy.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def act() -> None:
        with torch.no_grad():
            policy.act(obs[:act_batch])

    return update, act


def timed(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--act-batch", type=int, default=8)
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    ops = {name: build(fmt, a.minibatch, a.act_batch) for name, fmt in LAYOUTS.items()}
    times = {(name, op): [] for name in LAYOUTS for op in ("update", "act")}
    for update, act in ops.values():  # warm-up: oneDNN picks and caches its kernels
        update(), act()
    for r in range(a.repeats):
        names = list(LAYOUTS)[r % 2:] + list(LAYOUTS)[:r % 2]
        for name in names:
            update, act = ops[name]
            times[name, "update"].append(timed(update, 2))
            times[name, "act"].append(timed(act, 20))
        print(f"repeat {r + 1}/{a.repeats} done", flush=True)
    med = {key: statistics.median(v) for key, v in times.items()}
    info = machine_info()
    lines = [
        "# Nature CNN on the CPU: channels-last vs NCHW",
        "",
        *[f"- **{k}:** {v}" for k, v in info.items() if k in ("date", "machine", "python", "seedpool", "torch")],
        f"- **method:** torch threads {a.threads}; update = one Adam step on {a.minibatch} frames "
        f"(4x84x84 uint8), act = one no-grad forward on {a.act_batch}; {a.repeats} interleaved repeats "
        "(2 updates, 20 acts each), medians; min-max in brackets.",
        "",
        "| layout | update (ms) | act (ms) |",
        "| --- | ---: | ---: |",
    ]
    for name in LAYOUTS:
        u, c = times[name, "update"], times[name, "act"]
        lines.append(f"| {name} | {med[name, 'update'] * 1e3:.1f} [{min(u) * 1e3:.0f}-{max(u) * 1e3:.0f}] "
                     f"| {med[name, 'act'] * 1e3:.2f} [{min(c) * 1e3:.2f}-{max(c) * 1e3:.2f}] |")
    ratio_u = med["nchw", "update"] / med["channels_last", "update"]
    ratio_a = med["nchw", "act"] / med["channels_last", "act"]
    lines += ["", f"channels-last speed-up: update **{ratio_u:.2f}x**, act **{ratio_a:.2f}x** "
              "(NCHW time / channels-last time)."]
    write_markdown(a.out, lines)


if __name__ == "__main__":
    main()
