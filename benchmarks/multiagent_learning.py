"""IPPO and MAPPO learning curves on MPE's simple_spread_v3 and simple_tag_v3 (native families).

IPPO: each agent's critic reads its own observation; MAPPO: the critic reads the env's
state() and the agent's slot. simple_spread shares one policy over its three agents;
simple_tag trains one policy per group (adversaries, the prey). Writes
benchmarks/results/multiagent_learning.md (per-agent episode returns by env steps, wall-clock)
and multiagent_learning.png.

    python benchmarks/multiagent_learning.py [--steps 1000000] [--seed 1]
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

from seedpool.bench.report import cpu_model

from seedpool.experiment.metrics import series
from seedpool.models.team import MultiAgentConfig
from seedpool.trainers.ppo import ppo_defaults, train_ppo

RESULTS = Path(__file__).parent / "results"
RUNS = [
    ("simple_spread_v3", "IPPO", MultiAgentConfig()),
    ("simple_spread_v3", "MAPPO", MultiAgentConfig(critic="central", agent_id=True)),
    ("simple_tag_v3", "IPPO", MultiAgentConfig(policies="per-group")),
    ("simple_tag_v3", "MAPPO", MultiAgentConfig(policies="per-group", critic="central", agent_id=True)),
]


def run_one(env: str, ma: MultiAgentConfig, steps: int, seed: int, runs_dir: Path):
    cfg = dataclasses.replace(ppo_defaults(env), total_timesteps=steps, seed=seed, ma=ma, runs_dir=runs_dir,
                              progress="off", tensorboard=False)
    t0 = time.perf_counter()
    result = train_ppo(cfg)
    return result, time.perf_counter() - t0


def curve(run_dir: Path, name: str, steps: int, points: int = 10):
    s, t, v = (np.asarray(x) for x in series(run_dir / "metrics.csv", name))
    edges = np.linspace(0, steps, points + 1)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (s > lo) & (s <= hi)
        out.append((hi, float(v[m].mean()) if m.any() else float("nan"), float(t[m].max()) if m.any() else float("nan")))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared", default="", help="what else ran on the machine (written with the table)")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    rows, curves = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for env, label, ma in RUNS:
            result, wall = run_one(env, ma, args.steps, args.seed, Path(tmp))
            groups = ["adversary", "agent"] if env == "simple_tag_v3" else [None]
            for g in groups:
                name = "charts/episodic_return" + (f"/{g}" if g else "")
                c = curve(result.run_dir, name, args.steps)
                curves[(env, label, g)] = c
                rows.append((env, label, g or "all agents", c, wall))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for (env, label, g), c in curves.items():
        ax = axes[0] if env == "simple_spread_v3" else axes[1 if g == "adversary" else 2]
        ax.plot([p[0] for p in c], [p[1] for p in c], label=label)
        ax.set_title(f"{env} ({g or 'per agent'})")
        ax.set_xlabel("agent steps")
        ax.legend()
    axes[0].set_ylabel("mean per-agent episode return")
    fig.tight_layout()
    fig.savefig(RESULTS / "multiagent_learning.png", dpi=80)
    lines = [
        "# IPPO and MAPPO on MPE (native simple_spread_v3 and simple_tag_v3)",
        "",
        f"`python benchmarks/multiagent_learning.py --steps {args.steps} --seed {args.seed}`, "
        f"{time.strftime('%Y-%m-%d')}; {cpu_model()} x {os.cpu_count()} vCPU, "
        f"{torch.get_num_threads()} torch threads, Python {sys.version.split()[0]}, torch {torch.__version__}. "
        f"PPO's PettingZoo defaults (trainers/ppo.py `_multiagent_defaults`). {args.shared}",
        "",
        "Mean per-agent episode return of the episodes ending in each tenth of the run; wall-clock at its end.",
        "",
        "| env | algo | agents | " + " | ".join(f"{int(p[0] / 1000)}k" for p in rows[0][3]) + " | wall-clock |",
        "|---|---|---|" + "---|" * len(rows[0][3]) + "---|",
    ]
    for env, label, g, c, wall in rows:
        lines.append(f"| {env} | {label} | {g} | " + " | ".join(f"{p[1]:.1f}" for p in c) + f" | {wall:.0f} s |")
    lines += ["", "![curves](multiagent_learning.png)", ""]
    out = RESULTS / "multiagent_learning.md"
    previous = out.read_text() if out.exists() else ""
    keep = previous[previous.index("## Defaults"):] if "## Defaults" in previous else ""
    out.write_text("\n".join(lines) + ("\n" + keep if keep else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
