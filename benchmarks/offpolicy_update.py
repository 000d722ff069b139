"""One SAC or TD3 update two ways side by side: hand-written gradients against autograd, or
SAC's joint update against the actor stepping after the critics, or float32 against bf16.

`seedpool.kernels.offpolicy_gradients` computes the gradients of SAC and TD3 by hand;
``hand_gradients=False`` gives autograd's (``--compare autograd``, the default). SAC's
``joint_update`` computes the actor's and the critics' losses in one pass on the same networks;
``joint_update=False`` steps the actor after the critics, in two passes (``--compare order``,
SAC only, both hand-written). On a CPU with AVX512-BF16 or AMX, ``--compare bf16`` sets the
hand-written update with bf16 products against autograd under bf16 autocast, and ``--compare
precision`` against the hand-written float32 update. This measures what the new way saves per update, apart from
everything else a run does: two learners with the same initial networks live in one process
and take updates on the same replay-sized minibatches, in alternating blocks (new, baseline,
new, ...) so that machine noise hits both; each block's milliseconds per update, and the ratio
within each pair of blocks, median over the pairs. The process asks glibc to keep the memory
it frees (`seedpool.kernels.keep_freed_memory`, as every trainer does): in a bare loop of updates the allocator otherwise hands each
update's large buffers back to the kernel and takes page faults to get them again, which a
training run, whose heap holds the replay and the envs, was measured not to pay.

    .venv/bin/python benchmarks/offpolicy_update.py [--compare autograd|order|bf16|precision] [--algos sac,td3]
        [--sizes halfcheetah,pendulum] [--blocks 10] [--updates 50] [--threads 2] [--note TEXT]

Sizes: ``halfcheetah`` is HalfCheetah-v5 (17 observations, 6 actions) with the MuJoCo
defaults (256-256 networks, minibatch 256); ``pendulum`` is Pendulum-v1 (3, 1) with its
defaults (64-64, minibatch 256). Writes benchmarks/results/offpolicy_update.md (``--compare
order``: offpolicy_update_order.md; ``bf16``, ``precision``: offpolicy_update_bf16.md,
offpolicy_update_precision.md).
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.algos.td3 import TD3Config, TD3Learner
from seedpool.bench.report import machine_info, write_markdown
from seedpool.kernels import keep_freed_memory
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig

RESULTS = Path(__file__).parent / "results"
SIZES = {"halfcheetah": (17, 6, (256, 256)), "pendulum": (3, 1, (64, 64))}
MINIBATCH = 256
# --compare: (title, file, the new way's name, the baseline's name, their config values)
COMPARISONS = {
    "autograd": ("hand-written gradients against autograd (float32)", "offpolicy_update.md",
                 "hand", "autograd", {"hand_gradients": True}, {"hand_gradients": False}),
    "order": ("SAC's joint update against the actor after the critics (float32, hand-written)",
              "offpolicy_update_order.md", "joint", "actor after critics", {"joint_update": True},
              {"joint_update": False}),
    "bf16": ("bf16 products by hand against autograd under bf16 autocast", "offpolicy_update_bf16.md",
             "hand bf16", "autograd bf16", {"precision": "bf16"}, {"precision": "bf16", "hand_gradients": False}),
    "precision": ("bf16 products by hand against float32 by hand", "offpolicy_update_precision.md",
                  "hand bf16", "hand fp32", {"precision": "bf16"}, {}),
}


def learner(algo: str, size: str, options: dict):
    obs_dim, act_dim, hidden = SIZES[size]
    torch.manual_seed(0)
    obs = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float64)
    act = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
    agent = ContinuousAgent(obs, act, ContinuousModelConfig(hidden_sizes=hidden), stochastic=algo == "sac")
    options = dict(options)
    precision = options.pop("precision", "fp32")  # the learner's argument, not a config value
    if algo == "sac":  # one actor step per critic step, as SB3 and the speed benchmark
        return SACLearner(agent, SACConfig(policy_frequency=1, **options), act_dim, precision=precision)
    return TD3Learner(agent, TD3Config(**options), precision=precision)  # TD3's delayed actor: every 2nd step


def batches(size: str, n: int = 8) -> list[dict]:
    obs_dim, act_dim, _ = SIZES[size]
    rng = np.random.default_rng(0)
    return [{"obs": rng.standard_normal((MINIBATCH, obs_dim)), "next_obs": rng.standard_normal((MINIBATCH, obs_dim)),
             "action": rng.uniform(-1, 1, (MINIBATCH, act_dim)).astype(np.float32),
             "reward": rng.standard_normal(MINIBATCH).astype(np.float32),
             "discount": np.full(MINIBATCH, 0.99, np.float32), "weights": None, "indices": np.arange(MINIBATCH)}
            for _ in range(n)]


def measure(algo: str, size: str, blocks: int, updates: int, variants: dict[str, dict]) -> dict[str, list[float]]:
    """Milliseconds per update of each block, per variant (name: config values)."""
    learners = {name: learner(algo, size, options) for name, options in variants.items()}
    data = batches(size)
    times: dict[str, list[float]] = {name: [] for name in learners}
    for lrn in learners.values():  # warm-up
        for i in range(20):
            lrn.update(data[i % len(data)])
    for _ in range(blocks):
        for name, lrn in learners.items():
            start = time.perf_counter()
            for i in range(updates):
                lrn.update(data[i % len(data)])
            times[name].append((time.perf_counter() - start) / updates * 1e3)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="autograd")
    parser.add_argument("--algos", default="sac,td3")
    parser.add_argument("--sizes", default="halfcheetah,pendulum")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", default="", help="what else ran on the machine")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    title, file, new, base, new_options, base_options = COMPARISONS[args.compare]
    if args.compare == "order" and args.algos != "sac":
        parser.error("--compare order is SAC's alone: pass --algos sac")
    torch.set_num_threads(args.threads)
    kept = keep_freed_memory()
    info = machine_info()
    lines = [f"# SAC and TD3 updates: {title}" if args.compare in ("autograd", "bf16", "precision") else f"# {title}", "",
             f"Written by `python benchmarks/offpolicy_update.py --compare {args.compare} --algos {args.algos} "
             f"--sizes {args.sizes} "
             f"--blocks {args.blocks} --updates {args.updates} --threads {args.threads}` on {info['date']}.", "",
             f"- machine: {info['machine']}; {info['kernel']}; Python {info['python']}; seedpool {info['seedpool']}",
             f"- torch {info['torch']}, {args.threads} thread(s); minibatch {MINIBATCH}; SAC: an actor step per "
             "critic step; TD3: its delayed actor (every 2nd step)",
             "- the process keeps the memory it frees (glibc mallopt; see the script's docstring)" if kept else
             "- the allocator's defaults (not glibc): the loop may pay page faults a run does not",
             *([f"- note: {args.note}"] if args.note else []), "",
             f"| algorithm | sizes | {new} (ms/update) | {base} (ms/update) | {base} / {new}, per pair: "
             "median [min-max] |",
             "|---|---|---:|---:|---:|"]
    for algo in args.algos.split(","):
        for size in args.sizes.split(","):
            t = measure(algo, size, args.blocks, args.updates, {new: new_options, base: base_options})
            ratios = [b / a for a, b in zip(t[new], t[base])]
            row = (f"| {algo} | {size} {SIZES[size][2]} | {statistics.median(t[new]):.2f} | "
                   f"{statistics.median(t[base]):.2f} | **{statistics.median(ratios):.2f}x** "
                   f"[{min(ratios):.2f}-{max(ratios):.2f}] |")
            print(row, flush=True)
            lines.append(row)
    write_markdown(args.out or RESULTS / file, lines)


if __name__ == "__main__":
    main()
