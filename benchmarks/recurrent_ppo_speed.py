"""End-to-end speed of a recurrent policy against the feed-forward one: the same trainer, env and
settings, only ``--model.core`` differs. ``--algo ppo`` (the synchronous runner, `ppo_defaults`)
or ``--algo appo`` (IMPALA/APPO on the central-inference system, `impala_defaults`: on Atari
that is APPO, the inference server keeping each env's state).

    nice -n 5 .venv/bin/python benchmarks/recurrent_ppo_speed.py [--algo ppo|appo] [--env Pong-v5] [--steps 4096] [--rounds 3]

Method: each round trains each variant once for ``--steps`` env steps (same seed, serial order
alternating between rounds, so load from elsewhere hits both alike) and reads the run's SPS
(acting and learning together, as `seedpool train` reports it). A figure is the median over
the rounds, with the range beside it; the ratio is recurrent / feed-forward. The machine's
load average at the start and the end is written with the table: on a shared machine the
absolute figures move with it, the ratio much less.

Writes ``benchmarks/results/recurrent_<algo>_speed_<env>.md`` (or ``--out``) with the machine and versions.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import seedpool  # noqa: E402
from seedpool.models import ModelConfig  # noqa: E402
from seedpool.trainers.impala import impala_defaults, train_impala  # noqa: E402
from seedpool.trainers.ppo import ppo_defaults, train_ppo  # noqa: E402

TRAINERS = {"ppo": (ppo_defaults, train_ppo, "ppo_defaults"), "appo": (impala_defaults, train_impala, "impala_defaults")}


def variants(algo: str, env: str, core: str, core_size: int) -> dict[str, ModelConfig]:
    """The feed-forward model of the env's defaults, and the same with a recurrent core."""
    base = TRAINERS[algo][0](env).model
    return {"feed-forward": base, f"{core} {core_size}": dataclasses.replace(base, core=core, core_size=core_size)}


def run_once(algo: str, env: str, model: ModelConfig, steps: int, backend: str, runs_dir: Path) -> float:
    """SPS of one short training run."""
    defaults, train, _ = TRAINERS[algo]
    cfg = dataclasses.replace(defaults(env), total_timesteps=steps, model=model, backend=backend, runs_dir=runs_dir,
                              progress="off", tensorboard=False, checkpoint_every_s=1e9)
    return train(cfg).sps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo", choices=sorted(TRAINERS))
    parser.add_argument("--env", default="Pong-v5")
    parser.add_argument("--steps", type=int, default=4096, help="env steps per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--core", default="lstm", choices=["lstm", "gru"])
    parser.add_argument("--core-size", type=int, default=128)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    load_start = os.getloadavg()
    models = variants(args.algo, args.env, args.core, args.core_size)
    sps: dict[str, list[float]] = {name: [] for name in models}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(models) if r % 2 == 0 else list(reversed(models))
            for name in order:
                sps[name].append(run_once(args.algo, args.env, models[name], args.steps, args.backend, Path(tmp)))
                print(f"round {r + 1}: {name} {sps[name][-1]:.0f} SPS", flush=True)
    load_end = os.getloadavg()
    names = list(models)
    ff = statistics.median(sps[names[0]])
    lines = [f"# Recurrent vs feed-forward {args.algo.upper()}, end-to-end SPS on {args.env}", "",
             f"`{' '.join(sys.argv[1:]) or '(defaults)'}`: {args.rounds} rounds of {args.steps} env steps per variant, "
             f"`{TRAINERS[args.algo][2]}({args.env!r})` otherwise.", "",
             "| model | SPS (median) | range | ratio to feed-forward |", "|---|---|---|---|"]
    for name in names:
        med = statistics.median(sps[name])
        lines.append(f"| {name} | {med:.0f} | {min(sps[name]):.0f}-{max(sps[name]):.0f} | {med / ff:.2f}x |")
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, torch {torch.__version__}, seedpool {seedpool.__version__}.",
              f"Load average (1 min) at start {load_start[0]:.1f}, at end {load_end[0]:.1f}: "
              f"{'a shared, loaded machine: absolute figures are low, compare the ratio' if load_start[0] > 1.5 else 'a quiet machine'}."]
    out = args.out or ROOT / "benchmarks" / "results" / f"recurrent_{args.algo}_speed_{args.env.replace('/', '_')}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
