"""Learning regression for self-play: PPO on PettingZoo's connect_four_v3 against a league of
its own snapshots and two scripted bots beats a uniformly random player and the one-ply bot of
tests/connect_four_bots.py (wins when it can, blocks when it must), every seat equally.

The league's bots are `two_ply` (one-ply's rules, and it never drops a piece that lets the
opponent win right above it) and `threats` (two_ply's rules, then the move that leaves it the
most immediate wins: its opponents meet threats to block far more often than in random play),
passed as a user passes them (`--selfplay.bots`): the one-ply bot the run is judged against is
never in its league. Snapshots alone (pure self-play) teach these tactics far more slowly, and
with `two_ply` alone seed 1 missed twice (0.59 against one-ply in CI; 0.895 against random with
the bots reseeded): benchmarks/results/selfplay_connect_four_settings.md.
"""

import csv
import dataclasses

import pytest

pytest.importorskip("pettingzoo")

import connect_four_bots  # noqa: E402

from seedpool.league import SelfPlayConfig  # noqa: E402
from seedpool.league.match import evaluate_against  # noqa: E402
from seedpool.trainers.ppo import ppo_defaults, train_ppo  # noqa: E402

pytestmark = pytest.mark.slow

BUDGET = 300_000  # learner rows (its moves and the reset steps after its games)
GAMES = 200


def test_selfplay_ppo_on_connect_four_beats_random_and_the_one_ply_bot_in_both_seats(tmp_path, learning_seed):
    connect_four_bots.reseed(learning_seed)  # the run depends on its seed alone, not on the tests before it
    league = SelfPlayConfig(bots=("connect_four_bots:two_ply", "connect_four_bots:threats"))
    cfg = dataclasses.replace(ppo_defaults("connect_four_v3"), selfplay=True, league=league, seed=learning_seed,
                              total_timesteps=BUDGET, runs_dir=tmp_path, progress="off", tensorboard=False)
    result = train_ppo(cfg)
    with open(result.run_dir / "league.csv") as f:
        table = list(csv.DictReader(f))
    learner, members = table[0], table[1:]
    assert learner["member"] == "learner" and float(learner["rating"]) > 1000
    assert sum(m["kind"] == "snapshot" for m in members) == league.league_size  # the league filled up
    rates = {}
    for against, target in (("random", 0.9), ("connect_four_bots:one_ply", 0.6)):
        (match,) = evaluate_against(result.run_dir, against, games=GAMES, seed=10_000 + learning_seed,
                                    deterministic=True)
        assert match.games == GAMES and len(match.by_seat[0]) == len(match.by_seat[1]) == GAMES // 2
        rates[against] = match.as_dict()
        assert match.win_rate >= target, rates
