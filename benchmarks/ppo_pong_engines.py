"""PPO on Pong-v5: seedpool's trainer on its own engine against the same trainer fed by EnvPool.

The trainer, network and hyperparameters are identical (seedpool's Atari preset: 8 envs x
128 steps, 4 minibatches x 4 epochs, Nature CNN, episodic_life and reward_clip); only the
pool differs. EnvPool sits behind a 20-line adapter with the engine's API (its info has the
keys the trainer reads: elapsed_step, reward, terminated). Runs are interleaved and
repeated; the table gives medians of end-to-end SPS and the time breakdown (env stepping,
policy inference, learning), so it shows whether the update or the envs limit a run.

    .venv/bin/python benchmarks/ppo_pong_engines.py [--updates 4] [--repeats 3] [--device auto]

writes benchmarks/results/ppo_pong_engines.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).parent / "results" / "ppo_pong_engines.md"


class EnvPoolAdapter:
    """envpool.make(...) behind the parts of seedpool's pool API that the sync sampler uses."""

    def __init__(self, task: str, num_envs: int, seed: int, **options) -> None:
        import envpool

        self.env = envpool.make(task, env_type="gymnasium", num_envs=num_envs, seed=seed,
                                num_threads=min(num_envs, os.cpu_count() or 1), **options)
        self.num_envs = self.batch_size = num_envs
        self.is_async = False
        self.single_observation_space = self.env.observation_space
        self.single_action_space = self.env.action_space

    def reset(self):
        return self.env.reset()

    def step(self, action):
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"EnvPoolAdapter(num_envs={self.num_envs})"


def run(engine: str, updates: int, device: str, seed: int) -> dict:
    """One short training run; returns SPS and the share of time per phase."""
    from seedpool.trainers.ppo import ppo_defaults, train_ppo

    with tempfile.TemporaryDirectory() as tmp:
        cfg = ppo_defaults("Pong-v5")
        steps = updates * cfg.num_envs * cfg.ppo.num_steps
        cfg = dataclasses.replace(cfg, total_timesteps=steps, seed=seed, device=device, runs_dir=Path(tmp),
                                  progress="off", tensorboard=False, replay_limit=0)
        pool = None
        if engine == "envpool":
            pool = EnvPoolAdapter("Pong-v5", cfg.num_envs, seed, **cfg.env_options)
        res = train_ppo(cfg, pool=pool)
    shares = res.time_shares
    return {"sps": res.sps, "env": shares.get("env", 0), "inference": shares.get("inference", 0),
            "learn": shares.get("learn", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, list[dict]] = {"seedpool": [], "envpool": []}
    for rep in range(args.repeats):
        for engine in results:
            r = run(engine, args.updates, args.device, seed=rep + 1)
            print(f"{engine:8s} run {rep + 1}: {r['sps']:,.0f} SPS (env {r['env']:.0%}, inference "
                  f"{r['inference']:.0%}, learn {r['learn']:.0%})", flush=True)
            results[engine].append(r)
    med = {e: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for e, rs in results.items()}
    import envpool

    import seedpool

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = f", {torch.cuda.get_device_name()}" if device.startswith("cuda") else ""
    lines = [
        "# PPO on Pong-v5: seedpool engine vs EnvPool, same trainer",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} logical CPUs{gpu}; policy on {device}; torch {torch.__version__}, "
        f"numpy {np.__version__}, envpool {envpool.__version__}, seedpool {seedpool.__version__}.",
        "",
        f"{args.updates} PPO updates of 8 envs x 128 steps per run, {args.repeats} interleaved runs per engine, medians.",
        "",
        "| engine | end-to-end SPS | env stepping | policy inference | learning |",
        "|---|---:|---:|---:|---:|",
        *[f"| {e} | {m['sps']:,.0f} | {m['env']:.0%} | {m['inference']:.0%} | {m['learn']:.0%} |" for e, m in med.items()],
        "",
        f"seedpool / EnvPool end-to-end SPS: {med['seedpool']['sps'] / med['envpool']['sps']:.2f}x (target >= 1.0x).",
        "",
        "Runs in order (SPS): " + "; ".join(
            f"{e} " + ", ".join(f"{r['sps']:.0f}" for r in rs) for e, rs in results.items()) + ".",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
