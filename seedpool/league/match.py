"""Matches: a run's saved policy against a league, a bot, another run or a scripted function,
playing every seat equally often (`seedpool eval RUN_DIR --against ...`)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from seedpool.actors.agent_rows import AgentRows, is_agent_pool
from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.experiment.config import config_from_dict
from seedpool.experiment.evaluate import eval_env_options
from seedpool.experiment.run import read_run_config
from seedpool.league import elo
from seedpool.league.config import SelfPlayConfig
from seedpool.league.league import League, Member
from seedpool.league.players import Player, PolicyPlayer, checkpoint_paths, load_game_policy, make_bot
from seedpool.league.rows import GameResult, SelfPlayRows
from seedpool.models.team import MultiAgentConfig


@dataclass
class MatchResult:
    """Games of one match from the first player's side."""

    opponent: str
    rating: float | None = None  # the opponent's Elo, where it has one
    wins: int = 0
    draws: int = 0
    losses: int = 0
    by_seat: dict[int, list[float]] = field(default_factory=dict)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else math.nan

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else math.nan

    def add(self, result: GameResult) -> None:
        self.wins += result.score == 1.0
        self.draws += result.score == 0.5
        self.losses += result.score == 0.0
        self.by_seat.setdefault(result.seat, []).append(result.score)

    def line(self) -> str:
        lo, hi = elo.wilson_interval(self.wins, self.games)
        return (f"against {self.opponent}: {self.wins} wins, {self.draws} draws, {self.losses} losses in "
                f"{self.games} games, every seat equally; win rate {100 * self.win_rate:.1f}% "
                f"(95% CI {100 * lo:.1f}-{100 * hi:.1f}%)")

    def as_dict(self) -> dict[str, Any]:
        lo, hi = elo.wilson_interval(self.wins, self.games)
        return {"against": self.opponent, "wins": self.wins, "draws": self.draws, "losses": self.losses,
                "games": self.games, "win_rate": self.win_rate, "win_rate_ci95": [lo, hi],
                "score_by_seat": {str(k): float(np.mean(v)) for k, v in sorted(self.by_seat.items())}}


def play_match(rows: AgentRows, learner: Player, opponent: Member, games: int, seed: int = 0) -> MatchResult:
    """``games`` games (rounded up to a multiple of the seats) of ``learner`` against
    ``opponent`` on ``rows``' envs, each env playing its first games in alternating seats, so
    that every seat is played equally often and no game is picked for being short."""
    a, n = rows.pool.num_agents, rows.pool.num_envs
    if n % a:
        raise ConfigError(f"a match needs its envs in whole groups of {a} (one per seat), got {n}")
    games = -(-games // a) * a
    quota = np.full(n, games // n)
    quota[: games % n] += 1  # games % n is a multiple of a: envs in groups of a stay equal
    league = League(SelfPlayConfig(opponents="uniform"), None, rows.num_envs, "cpu", seed, members=[opponent])
    sp = SelfPlayRows(rows, league)
    played = np.zeros(n, np.int64)
    out = MatchResult(opponent.name, rating=opponent.rating)
    sp.reset()
    while (played < quota).any():
        learner_rows = sp.learner_rows()
        moving = learner_rows[sp.active[learner_rows]]  # envs whose game is over take their reset
        feat = sp.feat[moving]
        mask = None if sp.mask is None else sp.mask[moving]
        actions = np.zeros(n, np.int64)
        actions[sp.active[learner_rows]] = learner.act(feat, feat[:, :sp.obs_width].reshape(len(moving), *sp.obs_shape),
                                                       mask, moving)
        sp.step(actions)
        for r in sp.take_results():
            if played[r.env] < quota[r.env]:
                played[r.env] += 1
                out.add(r)
    return out


def _opponents(against: str, rows: AgentRows, run_dir: Path, env_id: str, seed: int, device: str) -> list[Member]:
    """The members ``against`` names: the run's league, or one bot/run/function."""
    rng = np.random.default_rng(seed)
    if against != "league":
        return [Member(against, "bot", make_bot(against, rows, env_id, rng, device), 0, spec=against)]
    _, ckpt_file = checkpoint_paths(run_dir)
    state = load_checkpoint(ckpt_file, map_location=device)
    if state.get("league") is None:
        raise ConfigError(f"{run_dir} was not trained with --selfplay: it has no league to play against "
                          "(use --against random, a run folder or module:function)")
    policy = load_game_policy(run_dir, rows, env_id, device)
    league = League(SelfPlayConfig(league_size=len(state["league"]["members"])), policy, rows.num_envs, device,
                    seed, make_bot=lambda spec, r: make_bot(spec, rows, env_id, r, device))
    league.load_state_dict(state["league"])
    return league.members


def evaluate_against(run_dir: Path, against: str, games: int = 200, seed: int = 10_000,
                     deterministic: bool = False, device: str = "cpu", num_envs: int = 16) -> list[MatchResult]:
    """The run's saved policy in matches against ``against`` ("league": each of its league's members)."""
    import seedpool

    if games < 1:
        raise ConfigError(f"a match needs at least one game, got {games}")
    _, cfg = read_run_config(run_dir)
    env_id = cfg["env"]
    ma = config_from_dict(MultiAgentConfig, cfg.get("ma") or {})
    pool = seedpool.make(env_id, num_envs=num_envs, seed=seed, backend="serial", **eval_env_options(cfg))
    try:
        if not is_agent_pool(pool) or pool.num_agents < 2:
            raise ConfigError(f"{run_dir} trains {env_id}, not a game of two or more seats: --against plays "
                              "games (use `seedpool eval RUN_DIR` for its returns)")
        rows = AgentRows(pool, ma)
        learner = PolicyPlayer(load_game_policy(run_dir, rows, env_id, device), rows.num_envs, device, deterministic)
        members = _opponents(against, rows, run_dir, env_id, seed, device)
        return [play_match(rows, learner, m, games, seed) for m in members]
    finally:
        pool.close()


def report(run_dir: Path, against: str, results: list[MatchResult], as_json: bool) -> str:
    """What `seedpool eval --against` prints: a line per opponent (and the total against a
    league, with the run's Elo from these games), or one JSON line."""
    total = MatchResult(against)
    for r in results:
        total.wins, total.draws, total.losses = total.wins + r.wins, total.draws + r.draws, total.losses + r.losses
        for seat, scores in r.by_seat.items():
            total.by_seat.setdefault(seat, []).extend(scores)
    rating = _performance(results) if len(results) > 1 else None
    if as_json:
        out = total.as_dict()
        if len(results) > 1:
            out["members"] = [r.as_dict() for r in results]
            out["elo"] = rating
        return json.dumps(out)
    lines = [f"{run_dir} {r.line()}" for r in results]
    if len(results) > 1:
        lines.append(f"{run_dir} {total.line()}")
        lines.append(f"{run_dir} Elo from these games: {rating:.0f} (the members rated as in league.csv)")
    return "\n".join(lines)


def _performance(results: list[MatchResult]) -> float:
    """The Elo at which these results are what one expects, given the members' ratings."""
    ratings, scores = [], []
    for r in results:
        for seat_scores in r.by_seat.values():
            ratings += [r.rating] * len(seat_scores)
            scores += seat_scores
    return elo.performance_rating(ratings, scores)


def eval_command(args: Any) -> int:
    """`seedpool eval RUN_DIR --against ...` (``args``: the CLI's EvalArgs)."""
    results = evaluate_against(args.run_dir, args.against, args.episodes, args.seed, args.deterministic, args.device)
    print(report(args.run_dir, args.against, results, args.json))
    return 0
