"""Self-play's league: Elo, PFSP weights, the snapshot cadence and size limit, opponent swaps
only at episode starts (with every player's memory started afresh), alternating seats,
matches, resume, and bad input refused before anything starts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

pytest.importorskip("pettingzoo")

import seedpool  # noqa: E402
from seedpool.actors.agent_rows import AgentRows  # noqa: E402
from seedpool.cli import main  # noqa: E402
from seedpool.errors import ConfigError  # noqa: E402
from seedpool.league import League, Member, SelfPlayConfig, SelfPlayRows, elo  # noqa: E402
from seedpool.league.match import play_match  # noqa: E402
from seedpool.league.players import PolicyPlayer, RandomPlayer, ScriptedPlayer  # noqa: E402
from seedpool.models import ModelConfig, make_policy  # noqa: E402
from seedpool.models.team import MultiAgentConfig  # noqa: E402

import agent_envs  # noqa: E402
import connect_four_bots  # noqa: E402

TINY = ["--progress", "off", "--no-tensorboard", "--backend", "serial", "--num-envs", "4"]


def solo():
    """A PettingZoo env with one agent: a game of one seat."""
    return agent_envs.Countdown(1)


# -- Elo ------------------------------------------------------------------------------------------
def test_elo_expected_scores_and_updates():
    assert elo.expected_score(1000, 1000) == 0.5
    assert elo.expected_score(1400, 1000) == pytest.approx(10 / 11)
    assert elo.expected_score(1234, 1000) + elo.expected_score(1000, 1234) == pytest.approx(1.0)
    a, b = elo.update(1000, 1000, 1.0)
    assert (a, b) == (1000 + elo.K_FACTOR / 2, 1000 - elo.K_FACTOR / 2)
    a, b = elo.update(1200, 1000, 0.5)  # a draw against a weaker player costs the stronger one
    assert a < 1200 and b > 1000 and a + b == pytest.approx(2200)
    with pytest.raises(ValueError, match="score"):
        elo.update(1000, 1000, 2.0)


def test_performance_rating_is_where_the_expected_score_is_the_score():
    opponents, scores = [900, 1000, 1100, 1300], [1, 1, 0.5, 0]
    r = elo.performance_rating(opponents, scores)
    assert sum(elo.expected_score(r, o) for o in opponents) == pytest.approx(sum(scores), abs=1e-6)
    assert elo.performance_rating([1000], [1.0]) == math.inf
    assert elo.performance_rating([1000, 1000], [0, 0]) == -math.inf


def test_wilson_interval_holds_the_rate_and_narrows_with_games():
    lo, hi = elo.wilson_interval(90, 100)
    assert lo < 0.9 < hi and 0 <= lo and hi <= 1
    lo2, hi2 = elo.wilson_interval(900, 1000)
    assert hi2 - lo2 < hi - lo
    assert elo.wilson_interval(0, 10)[0] == 0.0


# -- the league -----------------------------------------------------------------------------------
def _league(**kw) -> tuple[League, torch.nn.Module]:
    policy = torch.nn.Linear(3, 2)
    bots = kw.pop("bots", ())
    cfg = SelfPlayConfig(bots=bots, **kw)
    rng_bot = lambda spec, rng: RandomPlayer(2, rng)  # noqa: E731
    return League(cfg, policy, 8, "cpu", seed=0, make_bot=rng_bot), policy


def test_pfsp_weights_favour_the_members_the_learner_beats_least():
    league, _ = _league(league_size=3, snapshot_every=1)
    league.after_update()
    league.after_update()
    for member, score in zip(league.members, (0.9, 0.5, 0.1)):
        member.score = score
    w = league.weights()
    expect = np.array([0.1, 0.5, 0.9]) ** 2
    np.testing.assert_allclose(w, expect / expect.sum())
    league.members[0].score = 1.0  # beaten every time: still drawn now and then
    assert 0 < league.weights()[0] < 0.01
    draws = league.draw(4000)
    counts = np.array([sum(d is m for d in draws) for m in league.members])
    np.testing.assert_allclose(counts / 4000, league.weights(), atol=0.03)


def test_latest_and_uniform_draws():
    league, _ = _league(league_size=3, snapshot_every=1, opponents="latest", bots=("random",))
    league.after_update()
    assert [m.name for m in league.draw(5)] == ["snapshot@1"] * 5
    league.cfg.opponents = "uniform"
    np.testing.assert_allclose(league.weights(), np.full(3, 1 / 3))


def test_snapshots_every_k_updates_kept_up_to_the_league_size_as_frozen_copies():
    league, policy = _league(league_size=2, snapshot_every=3, bots=("random",))
    added = [league.after_update() for _ in range(10)]
    assert added == [u % 3 == 0 for u in range(1, 11)]
    assert [m.name for m in league.members] == ["bot:random", "snapshot@6", "snapshot@9"]
    league.learner_rating = 1234.0
    with torch.no_grad():
        policy.weight.add_(1.0)
    for _ in range(3):
        league.after_update()
    newest, older = league.members[-1], league.members[-2]
    assert newest.rating == 1234.0 and newest.name == "snapshot@12"
    # The older snapshot kept the weights it was taken with; the new one has the changed ones.
    assert torch.equal(newest.weights["weight"], policy.weight) and not torch.equal(older.weights["weight"],
                                                                                     policy.weight)


def test_results_move_ratings_and_the_learners_running_score():
    league, _ = _league(league_size=1)
    member = league.members[0]
    for _ in range(20):
        league.record(member, 1.0)
    assert league.learner_rating > 1000 > member.rating
    assert league.learner_rating + member.rating == pytest.approx(2000)
    assert member.wins == 20 and member.games == 20 and member.score > 0.6
    metrics = league.metrics()
    assert metrics["league/score"] == 1.0 and metrics["league/games"] == 20
    assert "league/score" not in league.metrics()  # the recent scores were reported once


# -- swaps, memory and seats ------------------------------------------------------------------------
class CountingPlayer:
    """A player with memory: for each row, how many pieces it dropped since `begin`. Connect four's
    board shows that number (the mover's own pieces), so a memory that crossed a swap, or a move in
    a game this player did not begin, shows as a mismatch."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log
        self.moves: dict[int, int] = {}

    def begin(self, rows):
        for r in rows.tolist():
            self.moves[r] = 0

    def act(self, features, obs, mask, rows):
        out = []
        for i, r in enumerate(rows.tolist()):
            own = int(obs[i][..., 0].sum())
            assert r in self.moves, f"{self.name} moved in row {r} without beginning an episode there"
            assert self.moves[r] == own, f"{self.name}'s memory of row {r} says {self.moves[r]} moves, the board {own}"
            self.moves[r] += 1
            self.log.append((r // 2, self.name))
            out.append(int(np.flatnonzero(mask[i])[0]) if i % 2 else int(np.flatnonzero(mask[i])[-1]))
        return np.array(out)


def test_opponents_change_only_at_episode_starts_with_their_memory_started_afresh():
    log: list = []
    members = [Member(f"m{k}", "bot", CountingPlayer(f"m{k}", log), 0) for k in range(3)]
    pool = seedpool.make("connect_four_v3", num_envs=4, seed=0, backend="serial")
    rows = AgentRows(pool, MultiAgentConfig())
    league = League(SelfPlayConfig(opponents="uniform"), None, rows.num_envs, "cpu", seed=1, members=members)
    sp = SelfPlayRows(rows, league)
    rng = np.random.default_rng(0)
    obs, info = sp.reset()
    assert info["active"].all(), "after a reset the opponent has moved where it plays first"
    per_env_games: dict[int, list] = {e: [] for e in range(4)}
    steps = 0
    while min(len(g) for g in per_env_games.values()) < 8:
        mask = sp.mask[sp.learner_rows()]
        assert mask[info["active"]].any(1).all()  # the learner is to move wherever its row is active
        acts = (rng.random(mask.shape) * mask).argmax(1)
        before = len(log)
        obs, rew, term, trunc, info = sp.step(acts)
        steps += 1
        results = sp.take_results()
        for r in results:
            per_env_games[r.env].append(r)
        assert set(np.flatnonzero(term)) == {r.env for r in results}
        for r in results:
            assert rew[r.env] == {1.0: 1.0, 0.5: 0.0, 0.0: -1.0}[r.score]
        # Every opponent move of this step was by the env's current opponent (drawn at its game's start).
        assert all(name == sp.opponent[e].name for e, name in log[before:])
    # Each env's games: one member each (drawn at its start), seats alternating from e % 2.
    for e, games in per_env_games.items():
        assert [g.seat for g in games] == [(e + k) % 2 for k in range(len(games))]
    drawn = {g.member.name for games in per_env_games.values() for g in games}
    assert len(drawn) > 1, "the test should see swaps between different members"
    pool.close()


def test_a_recurrent_policy_players_state_starts_afresh_at_begin_only_for_those_rows():
    policy = make_policy(spaces.Box(0, 1, (5,), np.float32), spaces.Discrete(3), ModelConfig(core="gru", core_size=8))
    player = PolicyPlayer(policy, num_rows=4)
    feats = np.random.default_rng(0).random((2, 5)).astype(np.float32)
    mask = np.ones((2, 3), bool)
    player.act(feats, feats, mask, np.array([1, 3]))
    player.act(feats, feats, mask, np.array([1, 3]))
    assert player.state["h"][[1, 3]].abs().sum() > 0 and not player.first[[1, 3]].any()
    player.begin(np.array([3]))
    assert player.state["h"][3].abs().sum() == 0 and player.first[3]
    assert player.state["h"][1].abs().sum() > 0 and not player.first[1]
    mask[:, :2] = False
    assert (player.act(feats, feats, mask, np.array([1, 3])) == 2).all()  # masked actions are never played


def test_a_match_plays_every_seat_equally_and_a_scripted_bot_beats_random():
    pool = seedpool.make("connect_four_v3", num_envs=8, seed=3, backend="serial")
    rows = AgentRows(pool, MultiAgentConfig())
    one_ply = ScriptedPlayer(connect_four_bots.one_ply, "one_ply")
    result = play_match(rows, one_ply, Member("random", "bot", RandomPlayer(7, np.random.default_rng(0)), 0), 60)
    assert result.games == 60 and len(result.by_seat[0]) == len(result.by_seat[1]) == 30
    assert result.win_rate > 0.8, result.as_dict()
    pool.close()


def test_a_scripted_bot_that_breaks_the_rules_is_named():
    bot = ScriptedPlayer(lambda obs, mask: 0, "always_zero")
    with pytest.raises(ConfigError, match=r"bot always_zero chose action 0, which its action mask rules out"):
        bot.act(np.zeros((1, 3)), np.zeros((1, 3)), np.array([[False, True, True]]), np.array([0]))


# -- runs: metrics, league.csv, resume, eval ------------------------------------------------------
def _train(tmp_path, *extra):
    argv = ["train", "ppo", "--env", "connect_four_v3", "--selfplay", "--runs-dir", str(tmp_path), *TINY,
            "--ppo.num-steps", "16", "--selfplay.snapshot-every", "2", *extra]
    assert main(argv) == 0
    (run_dir,) = tmp_path.iterdir()
    return run_dir


def _league_csv(run_dir):
    import csv

    with open(run_dir / "league.csv") as f:
        return list(csv.DictReader(f))


def test_a_selfplay_run_writes_league_metrics_and_resume_keeps_the_league(tmp_path, capsys):
    run_dir = _train(tmp_path, "--total-timesteps", "640", "--selfplay.bots", "random,connect_four_bots:uniform")
    before = _league_csv(run_dir)
    assert before[0]["member"] == "learner" and int(before[0]["games"]) > 0
    names = [r["member"] for r in before[1:]]
    assert names[:2] == ["bot:random", "bot:connect_four_bots:uniform"] and "snapshot@0" in names
    import csv

    names = {row["name"] for row in csv.DictReader(open(run_dir / "metrics.csv"))}
    assert {"league/elo", "league/score_seat0", "league/score_seat1", "league/members"} <= names
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    saved = {m["name"]: m["rating"] for m in ckpt["league"]["members"]}
    assert saved == {r["member"]: pytest.approx(float(r["rating"]), abs=0.06) for r in before[1:]}

    from seedpool.runs import load_run

    run = load_run(run_dir, "--total-timesteps", "1280")
    league = run.loop.selfplay.league
    assert {m.name: m.rating for m in league.members} == saved
    assert league.learner_rating == ckpt["league"]["learner_rating"]
    games = league.learner_games
    run.advance()
    run.close()
    after = _league_csv(run_dir)
    assert int(after[0]["games"]) > games == int(before[0]["games"])  # counts go on, not from zero
    assert int(after[0]["created_update"]) > int(before[0]["created_update"])

    # Matches against the league, a bot, a scripted function and another run: JSON lines.
    for against in ("random", "connect_four_bots:one_ply", str(run_dir)):
        assert main(["eval", str(run_dir), "--against", against, "--episodes", "10", "--json"]) == 0
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert out["games"] == 10 and out["wins"] + out["draws"] + out["losses"] == 10
    assert main(["eval", str(run_dir), "--against", "league", "--episodes", "4"]) == 0
    text = capsys.readouterr().out
    assert "against bot:random" in text and "against league:" in text and "Elo from these games" in text


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env", "connect_four_v3", "--selfplay.league-size", "0"], "the league has no opponents"),
    (["--env", "CartPole-v1"], "two or more seats; CartPole-v1 is a single-agent env"),
    (["--env", "test_league:solo"], "two or more seats; test_league:solo has one"),
    (["--env", "connect_four_v3", "--selfplay.bots", "no_such_bot"], "unknown bot 'no_such_bot'"),
    (["--env", "connect_four_v3", "--selfplay.bots", "connect_four_bots:nothing"], "has no function 'nothing'"),
])
def test_bad_input_is_one_clear_error_before_anything_starts(tmp_path, capsys, argv, message):
    code = main(["train", "ppo", "--selfplay", "--runs-dir", str(tmp_path), *TINY, *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "no run folder for a run that never started"


def test_eval_against_on_a_run_that_is_not_a_game(tmp_path, capsys):
    assert main(["train", "ppo", "--env", "CartPole-v1", "--total-timesteps", "256", "--runs-dir", str(tmp_path),
                 *TINY]) == 0
    (run_dir,) = tmp_path.iterdir()
    assert main(["eval", str(run_dir), "--against", "random"]) == 2
    assert "not a game of two or more seats" in capsys.readouterr().err
