"""Self-play settings on connect_four_v3 compared by what the learner can do: train PPO with
``--selfplay`` (or without it: one policy playing both seats) under changed options for a number
of learner steps, and at even points play matches of 200 games (every seat equally) against a
uniformly random player and the one-ply bot of tests/connect_four_bots.py, the policy sampling
its moves and playing its most likely move. One JSON line per point on stdout.

    python benchmarks/selfplay_settings.py --steps 300000 --points 6 --seed 1 \\
        '{"ppo": {"gamma": 0.9, "gae_lambda": 0.8}, "league": {"bots": ["connect_four_bots:two_ply"]}}'

The JSON holds changes to `ppo_defaults("connect_four_v3")`: sections "ppo", "model" and
"league" (SelfPlayConfig), and top-level fields ("selfplay": false, "num_envs", ...).
What these runs gave is in benchmarks/results/selfplay_connect_four_settings.md.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the bots

import connect_four_bots  # noqa: E402

import seedpool  # noqa: E402
from seedpool.actors.agent_rows import AgentRows  # noqa: E402
from seedpool.league import Member  # noqa: E402
from seedpool.league.match import play_match  # noqa: E402
from seedpool.league.players import PolicyPlayer, RandomPlayer, ScriptedPlayer  # noqa: E402
from seedpool.trainers.ppo import build_ppo, ppo_defaults  # noqa: E402


def configured(changes: dict, seed: int, runs_dir: Path):
    cfg = ppo_defaults("connect_four_v3")
    sections = {}
    for name in ("ppo", "model", "league"):
        values = dict(changes.pop(name, {}))
        if "hidden_sizes" in values:
            values["hidden_sizes"] = tuple(values["hidden_sizes"])
        if "bots" in values:
            values["bots"] = tuple(values["bots"])
        sections[name] = dataclasses.replace(getattr(cfg, name), **values)
    return dataclasses.replace(cfg, **sections, seed=seed, total_timesteps=10**12, runs_dir=runs_dir,
                               progress="off", tensorboard=False, **{"selfplay": True, **changes})


def win_rates(model, rows: AgentRows, games: int) -> dict[str, float]:
    out = {}
    for deterministic in (False, True):
        me = PolicyPlayer(copy.deepcopy(model), rows.num_envs, deterministic=deterministic)
        for name, player in (("random", RandomPlayer(7, np.random.default_rng(0))),
                             ("one_ply", ScriptedPlayer(connect_four_bots.one_ply, "one_ply"))):
            key = f"{name}_greedy" if deterministic else name
            out[key] = round(play_match(rows, me, Member(name, "bot", player, 0), games).win_rate, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("changes", nargs="?", default="{}")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/seedpool_selfplay_settings"))
    args = parser.parse_args()
    run = build_ppo(configured(json.loads(args.changes), args.seed, args.runs_dir))
    pool = seedpool.make("connect_four_v3", num_envs=16, seed=99, backend="serial")
    rows = AgentRows(pool, run.cfg.ma)
    trained = 0.0
    for k in range(1, args.points + 1):
        t0 = time.perf_counter()
        run.advance(args.steps * k // args.points)
        trained += time.perf_counter() - t0
        point = {"train_s": round(trained), "step": run.step, "elo": round(run.metrics.get("league/elo", 0)),
                 **win_rates(run.learner.model, rows, args.games)}
        print(json.dumps(point), flush=True)
    run.close()
    pool.close()


if __name__ == "__main__":
    main()
