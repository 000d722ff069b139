"""End-to-end PPO on CartPole-v1: seedpool against Stable-Baselines3, same hyperparameters.

Both train with rl-zoo3's tuned CartPole set (8 envs, n_steps 32, batch 256, 20 epochs,
gae_lambda 0.8, gamma 0.98, linear lr 1e-3 and clip 0.2, ent 0, separate 64-64 tanh
policy and value nets, Adam eps 1e-5, torch with 1 CPU thread) for 100k steps. Runs are
interleaved (seedpool seed 1, SB3 seed 1, seedpool seed 2, ...) so that machine noise hits
both; each row is one run, the summary takes medians over seeds.

Measured per run: end-to-end SPS (env steps / seconds of training, setup excluded) and the
wall-clock seconds (and env steps) until the mean return of the last 20 episodes first
reaches 475.

    .venv/bin/python benchmarks/ppo_vs_sb3.py [--seeds 1 2 3] [--steps 100000]

writes benchmarks/results/ppo_vs_sb3.md (machine, versions, per-run rows, medians, ratios).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

TARGET = 475.0
OUT = Path(__file__).parent / "results" / "ppo_vs_sb3.md"


@dataclasses.dataclass
class Result:
    """One training run."""

    lib: str
    seed: int
    steps: int
    seconds: float
    to_target_s: float  # NaN when the target was never reached
    to_target_steps: float
    final: float

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


def first_reach(steps: list[int], times: list[float], returns: list[float]) -> tuple[float, float]:
    """(seconds, steps) when the mean of the last 20 returns first reaches TARGET."""
    window: collections.deque[float] = collections.deque(maxlen=20)
    for s, t, r in zip(steps, times, returns):
        window.append(r)
        if len(window) == 20 and np.mean(window) >= TARGET:
            return t, float(s)
    return float("nan"), float("nan")


def run_seedpool(seed: int, total: int) -> Result:
    """seedpool's trainer with its CartPole defaults (rl-zoo3's set)."""
    from seedpool.experiment.metrics import series
    from seedpool.trainers.ppo import ppo_defaults, train_ppo

    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(ppo_defaults("CartPole-v1"), seed=seed, total_timesteps=total,
                                  runs_dir=Path(tmp), progress="off", tensorboard=False)
        res = train_ppo(cfg)
        steps, times, returns = series(res.run_dir / "metrics.csv", "charts/episodic_return")
    t, s = first_reach(steps, times, returns)
    return Result("seedpool", seed, res.step, res.time_s, t, s, res.final_return)


def run_sb3(seed: int, total: int) -> Result:
    """SB3 PPO with rl-zoo3's hyperparameters for CartPole-v1."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Episodes(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.steps, self.times, self.returns = [], [], []
            self.t0 = time.perf_counter()

        def _on_training_start(self) -> None:
            self.t0 = time.perf_counter()

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.steps.append(self.num_timesteps)
                    self.times.append(time.perf_counter() - self.t0)
                    self.returns.append(info["episode"]["r"])
            return True

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = rl_zoo_ppo(env, seed)
    cb = Episodes()
    t0 = time.perf_counter()
    model.learn(total_timesteps=total, callback=cb)
    seconds = time.perf_counter() - t0
    env.close()
    t, s = first_reach(cb.steps, cb.times, cb.returns)
    return Result("SB3", seed, model.num_timesteps, seconds, t, s, float(np.mean(cb.returns[-20:])))


def rl_zoo_ppo(env, seed: int):
    """SB3's PPO with rl-zoo3's tuned CartPole hyperparameters (linear lr and clip schedules)."""
    from stable_baselines3 import PPO

    def linear(start: float):
        return lambda progress_remaining: progress_remaining * start

    return PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gae_lambda=0.8, gamma=0.98,
               learning_rate=linear(1e-3), clip_range=linear(0.2), ent_coef=0.0, seed=seed,
               device="cpu", verbose=0)


def machine() -> str:
    """CPU model, core count and library versions."""
    import gymnasium
    import stable_baselines3

    import seedpool

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return (f"{cpu}, {os.cpu_count()} logical CPUs; Python {platform.python_version()}, torch {torch.__version__} "
            f"(1 thread), numpy {np.__version__}, gymnasium {gymnasium.__version__}, "
            f"stable-baselines3 {stable_baselines3.__version__}, seedpool {seedpool.__version__}")


def _med(values: list[float]) -> float:
    finite = [v for v in values if v == v]
    return statistics.median(finite) if finite else float("nan")


def report(results: list[Result], total: int) -> str:
    """The markdown table."""
    rows = ["| library | seed | SPS | seconds to 475 | steps to 475 | final return (last 20) |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(f"| {r.lib} | {r.seed} | {r.sps:,.0f} | {r.to_target_s:.1f} | {r.to_target_steps:,.0f} "
                    f"| {r.final:.1f} |")
    med = {lib: {"sps": _med([r.sps for r in results if r.lib == lib]),
                 "t": _med([r.to_target_s for r in results if r.lib == lib])} for lib in ("seedpool", "SB3")}
    sps_ratio = med["seedpool"]["sps"] / med["SB3"]["sps"]
    t_ratio = med["seedpool"]["t"] / med["SB3"]["t"]
    seeds = sorted({r.seed for r in results})
    return "\n".join([
        "# PPO on CartPole-v1: seedpool vs Stable-Baselines3",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}.",
        "",
        f"Same hyperparameters (rl-zoo3's CartPole-v1 set), {total:,} steps, seeds {seeds}, runs interleaved. "
        "SPS = env steps / training seconds. Time to 475 = training seconds until the mean return of the "
        "last 20 episodes first reaches 475.",
        "",
        "| median over seeds | seedpool | SB3 | seedpool / SB3 | target |",
        "|---|---:|---:|---:|---:|",
        f"| end-to-end SPS | {med['seedpool']['sps']:,.0f} | {med['SB3']['sps']:,.0f} | {sps_ratio:.2f}x | >= 3x |",
        f"| seconds to return 475 | {med['seedpool']['t']:.1f} | {med['SB3']['t']:.1f} | {t_ratio:.2f}x | <= 0.5x |",
        "",
        *rows,
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for seed in args.seeds:
        for runner in (run_seedpool, run_sb3):
            r = runner(seed, args.steps)
            print(f"{r.lib:8s} seed {seed}: {r.sps:,.0f} SPS, 475 after {r.to_target_s:.1f} s "
                  f"({r.to_target_steps:,.0f} steps), final {r.final:.1f}", flush=True)
            results.append(r)
    text = report(results, args.steps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
