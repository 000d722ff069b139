"""End-to-end SAC speed on HalfCheetah-v5: seedpool against Stable-Baselines3, same hyperparameters.

Both train SAC with the SAC paper's / SB3's defaults (one env, 256-256 ReLU actor and twin
critics, minibatch 256, Adam 3e-4 for the actor and the temperature, gamma 0.99, tau 0.005,
automatic entropy tuning toward -6, one gradient step per env step, uniform actions for the
first `learning_starts` steps, torch with 1 CPU thread). seedpool's critics learn at 1e-3
by default (CleanRL's q_lr); here they take SB3's 3e-4 so the work is the same. Runs are
interleaved (seedpool, SB3, seedpool, ...) so that machine noise hits both.

Measured per run: env steps per second over the whole run (setup excluded), which on this
budget is almost all gradient steps. Short budgets measure speed only, not learning.

    python benchmarks/sac_vs_sb3.py [--repeats 3] [--steps 1500] [--learning-starts 500]

writes benchmarks/results/sac_vs_sb3.md (machine, versions, load average, per-run rows, medians, ratio).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from seedpool.bench.report import machine_info

OUT = Path(__file__).parent / "results" / "sac_vs_sb3.md"
ENV = "HalfCheetah-v5"


@dataclasses.dataclass
class Result:
    """One training run."""

    lib: str
    steps: int
    seconds: float
    load_before: float

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


def run_seedpool(total: int, learning_starts: int, seed: int) -> Result:
    from seedpool.algos.sac import SACConfig
    from seedpool.trainers.sac import sac_defaults, train_sac

    cfg = sac_defaults(ENV)
    cfg = dataclasses.replace(cfg, total_timesteps=total, seed=seed, runs_dir=Path(tempfile.mkdtemp()),
                              progress="off", tensorboard=False, checkpoint_every_s=1e9, backend="serial",
                              sac=dataclasses.replace(cfg.sac, learning_starts=learning_starts, q_lr=3e-4,
                                                      buffer_size=max(total, 10_000)))
    load = os.getloadavg()[0]
    result = train_sac(cfg)
    # The run's own clock: training time, setup excluded.
    return Result("seedpool", result.step, result.step / result.sps, load)


def run_sb3(total: int, learning_starts: int, seed: int) -> Result:
    import gymnasium as gym
    from stable_baselines3 import SAC

    env = gym.make(ENV)
    model = SAC("MlpPolicy", env, learning_starts=learning_starts, buffer_size=max(total, 10_000), seed=seed,
                device="cpu", verbose=0)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    model.learn(total_timesteps=total)
    seconds = time.perf_counter() - t0
    env.close()
    return Result("sb3", total, seconds, load)


def report(results: list[Result], args) -> str:
    import stable_baselines3

    info = {**machine_info(), "stable-baselines3": stable_baselines3.__version__}
    lines = [f"# SAC end to end on {ENV}: seedpool vs Stable-Baselines3, same hyperparameters", "",
             f"Written by `python benchmarks/sac_vs_sb3.py --repeats {args.repeats} --steps {args.steps} "
             f"--learning-starts {args.learning_starts}` on {info['date']}.", "",
             f"- machine: {info['machine']}; {info['kernel']}; Python {info['python']}; seedpool {info['seedpool']}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in info.items()
                                       if k not in ("date", "machine", "kernel", "python", "seedpool")),
             f"- torch threads: {torch.get_num_threads()}; one env, serial, 256-256 networks, minibatch 256, "
             "one gradient step per env step after the warm-up",
             "- **note:** the machine is shared: the load average (1 min) before each run is in its row. "
             "Compare the two libraries only through the side-by-side ratio.", "",
             "| run | library | env steps | seconds | steps/s | load before |", "|---:|---|---:|---:|---:|---:|"]
    for i, r in enumerate(results):
        lines.append(f"| {i + 1} | {r.lib} | {r.steps:,} | {r.seconds:.1f} | {r.sps:.1f} | {r.load_before:.1f} |")
    med = {lib: statistics.median(r.sps for r in results if r.lib == lib) for lib in ("seedpool", "sb3")}
    lines += ["", f"Median steps/s: seedpool {med['seedpool']:.1f}, SB3 {med['sb3']:.1f}: "
              f"**{med['seedpool'] / med['sb3']:.2f}x**."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--learning-starts", type=int, default=500)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for i in range(args.repeats):
        for run in (run_seedpool, run_sb3):
            results.append(run(args.steps, args.learning_starts, seed=i + 1))
            r = results[-1]
            print(f"RESULT {r.lib} steps={r.steps} seconds={r.seconds:.1f} sps={r.sps:.1f} load={r.load_before:.1f}",
                  flush=True)
    text = report(results, args)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
