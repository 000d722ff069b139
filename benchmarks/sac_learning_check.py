"""SAC's learning per env step on HalfCheetah-v5: seedpool against Stable-Baselines3, same hyperparameters.

The speed benchmark (`benchmarks/sac_speed.py`) compares steps/s; this checks that what
makes seedpool faster (bf16 learning under ``--precision auto``) does not make it learn
less per env step. Both train with the common settings of `sac_speed.py` (one env,
256-256, minibatch 256, Adam 3e-4 everywhere, gamma 0.99, tau 0.005, autotuned entropy
starting at alpha 1 as SB3's and CleanRL's do, one critic and one actor step per env step
after ``learning_starts`` uniform steps, 1 torch thread) for ``--steps`` env steps, one
seed each; the table lists every training episode's return (episodes are 1,000 steps, so
episode i ends near env step 1,000 i in every run).

    python benchmarks/sac_learning_check.py [--steps 30000] [--learning-starts 5000] [--seed 1]
        [--runs seedpool-auto,seedpool-fp32,seedpool-fp32-actor-after,sb3]

writes benchmarks/results/sac_learning_check.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from seedpool.bench.report import machine_info

OUT = Path(__file__).parent / "results" / "sac_learning_check.md"
ENV = "HalfCheetah-v5"
LR = 3e-4


def run_seedpool(steps: int, learning_starts: int, seed: int, variant: str) -> tuple[list[float], float]:
    """(episode returns in order, seconds) of one seedpool run; ``variant``: a precision (``auto``,
    ``fp32``, ``bf16``), optionally followed by ``-actor-after`` (without SAC's joint update)."""
    precision, joint = variant.split("-")[0], "-actor-after" not in variant
    from seedpool.experiment.metrics import series
    from seedpool.trainers.sac import sac_defaults, train_sac

    cfg = sac_defaults(ENV)
    cfg = dataclasses.replace(cfg, total_timesteps=steps, seed=seed, runs_dir=Path(tempfile.mkdtemp()),
                              progress="off", checkpoint_every_s=1e9, backend="serial", precision=precision,
                              torch_threads=1,
                              sac=dataclasses.replace(cfg.sac, learning_starts=learning_starts, q_lr=LR, policy_lr=LR,
                                                      policy_frequency=1, alpha=1.0, buffer_size=steps,
                                                      joint_update=joint))
    result = train_sac(cfg)
    _, _, returns = series(result.run_dir / "metrics.csv", "charts/episodic_return")
    return list(returns), result.step / result.sps


def run_sb3(steps: int, learning_starts: int, seed: int) -> tuple[list[float], float]:
    """(episode returns in order, seconds) of one SB3 run."""
    import gymnasium as gym
    from stable_baselines3 import SAC

    model = SAC("MlpPolicy", gym.make(ENV), learning_rate=LR, learning_starts=learning_starts, buffer_size=steps,
                seed=seed, device="cpu", verbose=0, stats_window_size=steps)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - t0
    return [float(ep["r"]) for ep in model.ep_info_buffer], seconds


def report(curves: dict[str, tuple[list[float], float]], args, loads: dict[str, float]) -> str:
    import stable_baselines3

    info = {**machine_info(), "stable-baselines3": stable_baselines3.__version__}
    names = list(curves)
    lines = [f"# SAC on {ENV}: return per env step, seedpool vs Stable-Baselines3 (same hyperparameters)", "",
             f"Written by `python benchmarks/sac_learning_check.py {' '.join(sys.argv[1:])}` on {info['date']}.", "",
             f"- machine: {info['machine']}; Python {info['python']}; seedpool {info['seedpool']}; torch "
             f"{info['torch']}; stable-baselines3 {info['stable-baselines3']}; gymnasium {info['gymnasium']}",
             f"- settings: one env, 256-256 ReLU, minibatch 256, Adam {LR:g} everywhere, gamma 0.99, tau 0.005, "
             f"autotuned entropy from alpha 1 (target -6), one critic and one actor step per env step after "
             f"{args.learning_starts:,} uniform steps, torch 1 thread, seed {args.seed}",
             "- one seed per run: a check that the curve is no worse per env step, not a statistical comparison",
             "- seedpool counts the autoreset step between two episodes as an env step (it is one: the "
             "engine steps the env to reset it), so its episode i ends at env step 1,001 i, SB3's at 1,000 i; "
             "with the same budget seedpool has one episode fewer",
             "- **note:** the machine is shared; load average (1 min) before each run: "
             + ", ".join(f"{k} {v:.1f}" for k, v in loads.items()), "",
             "| episode | " + " | ".join(names) + " |",
             "|---:|" + "---:|" * len(names)]
    episodes = max(len(r) for r, _ in curves.values())
    for i in range(episodes):
        cells = [f"{curves[n][0][i]:.0f}" if i < len(curves[n][0]) else "" for n in names]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    common = min(len(r) for r, _ in curves.values())  # the last episodes every run reached
    lines += ["", f"| run | mean of episodes {common - 4}-{common} | best episode | training seconds | steps/s |",
              "|---|---:|---:|---:|---:|"]
    for n in names:
        r, s = curves[n]
        lines.append(f"| {n} | {np.mean(r[common - 5:common]):.0f} | {max(r):.0f} | {s:.0f} | {args.steps / s:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--learning-starts", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", default="seedpool-auto,seedpool-fp32,sb3")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    curves, loads = {}, {}
    for name in args.runs.split(","):
        loads[name] = os.getloadavg()[0]
        if name == "sb3":
            curves[name] = run_sb3(args.steps, args.learning_starts, args.seed)
        else:
            curves[name] = run_seedpool(args.steps, args.learning_starts, args.seed, name.split("-", 1)[1])
        print(f"RESULT {name}: {[round(r) for r in curves[name][0]]} in {curves[name][1]:.0f} s", flush=True)
    text = report(curves, args, loads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
