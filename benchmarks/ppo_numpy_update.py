"""Does the NumPy PPO step pay for itself? NumPy vs torch autograd on rl-zoo3's CartPole setting.

Two measurements in one run, the variants interleaved so that load from elsewhere hits
each about equally (round-robin, the starting variant rotating every repeat):

1. **One update**: ``ppo_update`` on a 256-row batch (8 envs x 32 steps), 1 minibatch,
   20 epochs, the 64-64 tanh MLP with a categorical head, fused Adam on the flat parameter
   (as the trainer builds it), torch with 1 thread. Each variant owns a policy and an
   optimizer; after warm-up, each repeat times ``--updates`` updates and reports ms per
   update. Variants: the NumPy kernel (`seedpool.kernels.ppo_update`) and torch autograd, and (an ablation) the NumPy step
   without its one-BLAS-thread limit. Also timed: entering and leaving the BLAS limit, as the
   step does (a cached ``ThreadpoolController``), against ``threadpool_limits(1, user_api="blas")``,
   which rescans the loaded libraries on every call.
2. **End to end**: ``seedpool train ppo --env CartPole-v1 --total-timesteps 30000`` as a
   subprocess with ``--ppo.numpy-update`` / ``--ppo.no-numpy-update`` (quiet, no
   TensorBoard, a temporary runs folder); SPS = env steps / training seconds, read from the
   run's metrics.csv, with the seconds spent learning beside it.

    .venv/bin/python benchmarks/ppo_numpy_update.py [--repeats 9] [--e2e-repeats 3] [--quick]

writes benchmarks/results/ppo_numpy_update.md (date, machine, versions, load, medians with
min-max, ratios).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import gymnasium as gym
import numpy as np
import torch
from threadpoolctl import ThreadpoolController, threadpool_limits

from seedpool import kernels
from seedpool.algos.ppo import PPOBatch, ppo_update
from seedpool.kernels import blas
from seedpool.models import ModelConfig, make_policy
from seedpool.models.flat import flatten_parameters
from seedpool.trainers.ppo import ppo_defaults

OUT = Path(__file__).parent / "results" / "ppo_numpy_update.md"
SEEDPOOL = Path(sys.executable).parent / "seedpool"
UPDATE_VARIANTS = ("numpy", "torch", "numpy, BLAS not limited")
E2E_VARIANTS = {"numpy": "--ppo.numpy-update", "torch": "--ppo.no-numpy-update"}


def rotated(items: tuple[str, ...], k: int) -> list[str]:
    """``items`` starting at position ``k``: repeat k runs the variants in this order."""
    k %= len(items)
    return list(items[k:] + items[:k])


def cartpole_batch(policy, n: int = 256, seed: int = 0) -> PPOBatch:
    """A CartPole-shaped batch: actions sampled from the policy, old log-probs and values from it."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 4, generator=g)
    with torch.no_grad():
        params, value = policy(obs)
        actions = torch.distributions.Categorical(logits=params).sample()
        logp = policy.head.log_prob(params, actions)
    return PPOBatch(obs=obs, actions=actions, logprobs=logp, values=value,
                    advantages=torch.randn(n, generator=g), returns=value + torch.randn(n, generator=g))


def bench_update(repeats: int, updates: int, warmup: int) -> dict[str, list[float]]:
    """ms per ``ppo_update`` call, ``repeats`` samples per variant."""
    cfg = ppo_defaults("CartPole-v1").ppo
    torch.manual_seed(0)
    base = make_policy(gym.spaces.Box(-np.inf, np.inf, (4,)), gym.spaces.Discrete(2), ModelConfig())
    batch = cartpole_batch(base)
    setups = {}
    for name in UPDATE_VARIANTS:
        policy = copy.deepcopy(base)
        opt = torch.optim.Adam([flatten_parameters(policy)], lr=cfg.learning_rate, eps=cfg.adam_eps, fused=True)
        kernel = None if name == "torch" else kernels.ppo_update(policy, opt, "cpu", "fp32")
        # The ablation swaps the step's BLAS limit for a no-op.
        ctx = (mock.patch.object(blas, "one_blas_thread", contextlib.nullcontext)
               if name.endswith("not limited") else contextlib.nullcontext())
        setups[name] = (policy, opt, kernel, ctx)

    def run(name: str, k: int) -> float:
        policy, opt, kernel, ctx = setups[name]
        with ctx:
            t0 = time.perf_counter()
            for _ in range(k):
                ppo_update(policy, opt, batch, cfg, cfg.clip_coef, kernel=kernel)
            return (time.perf_counter() - t0) / k * 1e3

    for name in UPDATE_VARIANTS:
        run(name, warmup)
    times: dict[str, list[float]] = {name: [] for name in UPDATE_VARIANTS}
    for r in range(repeats):
        for name in rotated(UPDATE_VARIANTS, r):
            # The unlimited ablation can be two orders of magnitude slower: one update per sample.
            times[name].append(run(name, 1 if name.endswith("not limited") else updates))
        print(f"update repeat {r + 1}/{repeats}: "
              + ", ".join(f"{n} {times[n][-1]:.1f} ms" for n in UPDATE_VARIANTS), flush=True)
    return times


def bench_blas_limit(repeats: int, calls: int = 200) -> dict[str, list[float]]:
    """µs per enter+exit of a one-thread BLAS limit, two ways, interleaved."""
    blas = ThreadpoolController().select(user_api="blas")

    def cached() -> None:
        with blas.limit(limits=1):
            pass

    def rescanning() -> None:
        with threadpool_limits(1, user_api="blas"):
            pass

    ways = {"cached ThreadpoolController .limit": cached, "threadpool_limits (rescans)": rescanning}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(repeats):
        for name in rotated(tuple(ways), r):
            t0 = time.perf_counter()
            for _ in range(calls):
                ways[name]()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return times


def train_once(flag: str, steps: int) -> tuple[float, float, int]:
    """(SPS, seconds learning, env steps) of one quiet CLI training run."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [str(SEEDPOOL), "train", "ppo", "--env", "CartPole-v1", "--total-timesteps", str(steps),
               "--progress", "off", "--no-tensorboard", "--runs-dir", tmp, flag]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        (metrics,) = Path(tmp).glob("*/metrics.csv")
        with metrics.open() as f:
            rows = list(csv.DictReader(f))
    last = rows[-1]
    learn = max(float(r["value"]) for r in rows if r["name"] == "time/learn")
    return int(last["step"]) / float(last["time_s"]), learn, int(last["step"])


def bench_e2e(repeats: int, steps: int) -> dict[str, list[tuple[float, float, int]]]:
    """``repeats`` CLI runs per variant, interleaved."""
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in E2E_VARIANTS}
    for r in range(repeats):
        for name in rotated(tuple(E2E_VARIANTS), r):
            runs[name].append(train_once(E2E_VARIANTS[name], steps))
            sps, learn, n = runs[name][-1]
            print(f"e2e repeat {r + 1}/{repeats} {name}: {sps:,.0f} SPS, {learn:.2f} s learning, {n:,} steps",
                  flush=True)
    return runs


def machine() -> list[str]:
    """Date, hardware, load and versions, as bullet lines."""
    import seedpool

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
        f"- **machine:** nproc = {os.cpu_count()}; {cpu}",
        f"- **python:** {platform.python_version()}",
        f"- **seedpool:** {seedpool.__version__} ({commit}, working tree with uncommitted changes possible)",
        f"- **torch:** {torch.__version__} (1 thread); **numpy:** {np.__version__}",
    ]


def fmt(values: list[float], digits: int = 1) -> str:
    """Median with [min-max]."""
    return f"{statistics.median(values):,.{digits}f} [{min(values):,.{digits}f}-{max(values):,.{digits}f}]"


def report(update: dict, limit: dict, e2e: dict, args, load: tuple[str, str], background: str) -> str:
    """The markdown table."""
    med = {k: statistics.median(v) for k, v in update.items()}
    cfg = ppo_defaults("CartPole-v1").ppo
    steps_per_update = cfg.update_epochs * cfg.num_minibatches
    cached_us = statistics.median(limit["cached ThreadpoolController .limit"])
    rescan_us = statistics.median(limit["threadpool_limits (rescans)"])
    step_us = med["numpy"] * 1e3 / steps_per_update
    # Ratios within a repeat compare runs made seconds apart, under about the same load.
    update_ratio = [t / n for t, n in zip(update["torch"], update["numpy"])]
    e2e_ratio = [n[0] / t[0] for n, t in zip(e2e["numpy"], e2e["torch"])]
    lines = [
        "# NumPy PPO step vs torch autograd (rl-zoo3 CartPole setting)",
        "",
        *machine(),
        f"- **load:** {background}; load average before {load[0]}, after {load[1]}",
        f"- **method:** one update = `ppo_update` on 256 rows (8 envs x 32 steps), 1 minibatch, 20 epochs, "
        f"64-64 tanh MLP, fused Adam on the flat parameter; warm-up of {args.warmup} updates per variant, then "
        f"{args.repeats} interleaved repeats of {args.updates} updates each (the unlimited-BLAS ablation: 1 "
        f"update per repeat); medians, min-max in brackets. End to end: `seedpool train ppo --env CartPole-v1 "
        f"--total-timesteps {args.e2e_steps} --progress off --no-tensorboard` as a subprocess, "
        f"{args.e2e_repeats} interleaved run(s) per variant; SPS = env steps / training seconds (metrics.csv).",
        "",
        "## One update",
        "",
        "| variant | ms per update | torch / variant |",
        "| --- | ---: | ---: |",
        *(f"| {name} | {fmt(update[name])} | {med['torch'] / med[name]:.2f}x |" for name in UPDATE_VARIANTS),
        "",
        "## One-thread BLAS limit, per enter + exit",
        "",
        "| way | µs |",
        "| --- | ---: |",
        *(f"| {name} | {fmt(v, 1)} |" for name, v in limit.items()),
        "",
        f"The NumPy step enters the cached limit once per gradient step: {cached_us:.0f} µs, "
        f"{100 * cached_us / step_us:.1f} % of its median {step_us:,.0f} µs step (ms per update / "
        f"{steps_per_update} steps); `threadpool_limits` there would add {100 * rescan_us / step_us:.0f} %.",
        "",
        "## End to end",
        "",
        "| variant | SPS | seconds learning | env steps |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {name} | {fmt([r[0] for r in runs], 0)} | {fmt([r[1] for r in runs], 2)} | {runs[0][2]:,} |"
          for name, runs in e2e.items()),
        "",
        "## NumPy speed-up (torch time / NumPy time)",
        "",
        "| | median of per-repeat ratios | ratio of medians |",
        "| --- | ---: | ---: |",
        f"| one update | **{fmt(update_ratio, 2)}x** | {med['torch'] / med['numpy']:.2f}x |",
        f"| end to end (SPS) | **{fmt(e2e_ratio, 2)}x** | "
        f"{statistics.median(r[0] for r in e2e['numpy']) / statistics.median(r[0] for r in e2e['torch']):.2f}x |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="update samples per variant (>= 7)")
    parser.add_argument("--updates", type=int, default=10, help="updates timed per sample")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up updates per variant")
    parser.add_argument("--e2e-repeats", type=int, default=3, help="training runs per variant")
    parser.add_argument("--e2e-steps", type=int, default=30_000)
    parser.add_argument("--background", default="none noted",
                        help="what else was running, for the table (e.g. 'a Pong training run, ~1 core')")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 repeats, 1 short training run each")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.updates, args.warmup, args.e2e_repeats, args.e2e_steps = 3, 2, 1, 1, 5_000
    torch.set_num_threads(1)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    update = bench_update(args.repeats, args.updates, args.warmup)
    limit = bench_blas_limit(args.repeats)
    e2e = bench_e2e(args.e2e_repeats, args.e2e_steps)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(update, limit, e2e, args, (load_before, load_after), args.background)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
