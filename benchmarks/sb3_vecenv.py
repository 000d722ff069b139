"""SB3's PPO on CartPole-v1 fed by DummyVecEnv, SubprocVecEnv and `seedpool.make_sb3`.

The same Stable-Baselines3 PPO with rl-zoo3's CartPole set (8 envs, n_steps 32, batch 256,
20 epochs, gae_lambda 0.8, gamma 0.98, linear lr 1e-3 and clip 0.2, ent 0, torch with 1 CPU
thread) trains on each VecEnv for ~30k steps. Runs are interleaved (Dummy, Subproc,
seedpool, then again) so that load from elsewhere hits every kind; the summary takes the
median over repeats, after one untimed short run of each kind. SPS = env steps / seconds of
`learn()` (building the envs excluded); the rollout seconds (env steps plus SB3's per-step
inference) are timed apart from the update, since only they can change with the VecEnv.

    .venv/bin/python benchmarks/sb3_vecenv.py [--repeats 3] [--steps 30000]

writes benchmarks/results/sb3_vecenv.md (machine, versions, load, per-run rows, medians).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from ppo_vs_sb3 import machine, rl_zoo_ppo  # run as a script, benchmarks/ is on sys.path

from seedpool.envs.make import usable_cores

OUT = Path(__file__).parent / "results" / "sb3_vecenv.md"
ENV_ID, N_ENVS = "CartPole-v1", 8


@dataclasses.dataclass
class Result:
    """One training run."""

    kind: str
    seed: int
    steps: int
    seconds: float
    rollout_s: float
    final: float  # mean return of the last 20 episodes

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


def dummy(seed: int) -> Any:
    """SB3's DummyVecEnv of Monitor-wrapped envs (what `make_vec_env` builds)."""
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed)


def subproc(seed: int) -> Any:
    """SB3's SubprocVecEnv, one process per env (its default start method)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed, vec_env_cls=SubprocVecEnv)


def seedpool_sb3(seed: int) -> Any:
    """`seedpool.make_sb3` with its defaults (backend "auto")."""
    import seedpool

    return seedpool.make_sb3(ENV_ID, N_ENVS, seed=seed)


KINDS: dict[str, Callable[[int], Any]] = {
    "SB3 DummyVecEnv": dummy,
    "SB3 SubprocVecEnv": subproc,
    "seedpool.make_sb3": seedpool_sb3,
}


def train(kind: str, seed: int, total: int) -> tuple[Result, str]:
    """One PPO run on the VecEnv `kind`; also returns the VecEnv's description."""
    from stable_baselines3.common.callbacks import BaseCallback

    class RolloutClock(BaseCallback):
        """Seconds spent collecting rollouts (env steps and inference)."""

        def __init__(self) -> None:
            super().__init__()
            self.seconds, self.t0 = 0.0, 0.0

        def _on_rollout_start(self) -> None:
            self.t0 = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.seconds += time.perf_counter() - self.t0

        def _on_step(self) -> bool:
            return True

    env = KINDS[kind](seed)
    described = repr(env) if kind == "seedpool.make_sb3" else type(env).__name__
    model = rl_zoo_ppo(env, seed)
    clock = RolloutClock()
    t0 = time.perf_counter()
    model.learn(total_timesteps=total, callback=clock)
    seconds = time.perf_counter() - t0
    env.close()
    final = float(np.mean([e["r"] for e in list(model.ep_info_buffer)[-20:]]))
    return Result(kind, seed, model.num_timesteps, seconds, clock.seconds, final), described


def report(results: list[Result], total: int, load_before: str, load_after: str, described: dict[str, str]) -> str:
    """The markdown table."""
    med = {k: statistics.median([r.sps for r in results if r.kind == k]) for k in KINDS}
    roll = {k: statistics.median([r.rollout_s for r in results if r.kind == k]) for k in KINDS}
    base = med["SB3 DummyVecEnv"]
    summary = ["| VecEnv | median SPS | × DummyVecEnv | median rollout s | what ran |",
               "|---|---:|---:|---:|---|"]
    for k in KINDS:
        summary.append(f"| {k} | {med[k]:,.0f} | {med[k] / base:.2f} | {roll[k]:.1f} | `{described[k]}` |")
    rows = ["| VecEnv | seed | steps | SPS | learn s | rollout s | final return (last 20) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(f"| {r.kind} | {r.seed} | {r.steps:,} | {r.sps:,.0f} | {r.seconds:.1f} | {r.rollout_s:.1f} "
                    f"| {r.final:.1f} |")
    return "\n".join([
        "# SB3 PPO on CartPole-v1: DummyVecEnv vs SubprocVecEnv vs seedpool.make_sb3",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nproc = {usable_cores()}; {machine()}.",
        "",
        f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}. The machine ran other "
        "jobs during this run: compare the rows with each other (interleaved), not with figures taken elsewhere.",
        "",
        f"Same SB3 PPO (rl-zoo3's CartPole-v1 set, {N_ENVS} envs), {total:,} steps per run, runs interleaved. "
        "SPS = env steps / seconds of `learn()`; rollout s = seconds collecting rollouts (env steps and SB3's "
        "inference); the rest of `learn()` is PPO's 20-epoch update, the same for every VecEnv.",
        "",
        *summary,
        "",
        *rows,
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--warmup-steps", type=int, default=1024, help="one untimed run of each kind first")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results, described = [], {}
    for kind in KINDS:  # warm-up: imports, first allocations, the engine's backend probe
        train(kind, seed=0, total=args.warmup_steps)
    for rep in range(args.repeats):
        for kind in KINDS:
            r, described[kind] = train(kind, seed=rep + 1, total=args.steps)
            print(f"{kind:18s} seed {r.seed}: {r.sps:,.0f} SPS, learn {r.seconds:.1f} s, rollouts {r.rollout_s:.1f} s,"
                  f" final {r.final:.1f}", flush=True)
            results.append(r)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(results, args.steps, load_before, load_after, described)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
