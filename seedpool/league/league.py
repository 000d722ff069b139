"""The league: the learner's past snapshots and fixed bots, their Elo ratings, and how an
env's next opponent is drawn from them.

A member is created once and never changes its play (a snapshot's weights are a frozen
copy); what changes is what the league knows of it: its rating, its record against the
learner and the learner's recent score against it, which prioritized fictitious self-play
(PFSP, Vinyals et al. 2019) weights opponents by.
"""
from __future__ import annotations

import copy
import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from seedpool.league import elo
from seedpool.league.config import SelfPlayConfig
from seedpool.league.players import Player, PolicyPlayer

LEAGUE_FILE = "league.csv"
PFSP_POWER = 2.0
"""PFSP's weight of a member is (1 - P(learner wins))^2 (AlphaStar's "hard" weighting)."""
SCORE_DECAY = 0.05
"""Each game moves the learner's running score against a member this far toward its result:
the learner changes, so recent games count most."""
MIN_WEIGHT = 1e-3
"""No member is ever left out entirely, however often the learner beats it."""


@dataclass
class Member:
    """One opponent: how it plays and what the league knows of it (scores are the learner's)."""

    name: str
    kind: str  # "snapshot" or "bot"
    player: Player
    created: int  # the update it joined at
    rating: float = elo.INITIAL_RATING
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    score: float = 0.5  # the learner's running score against it (PFSP's P(learner wins))
    spec: str = ""  # a bot's spec, to rebuild it on resume
    weights: dict[str, torch.Tensor] | None = field(default=None, repr=False)  # a snapshot's

    def record(self, score: float) -> None:
        self.games += 1
        self.wins += score == 1.0
        self.draws += score == 0.5
        self.losses += score == 0.0
        self.score += SCORE_DECAY * (score - self.score)


class League:
    """Members, ratings and draws; `record` takes each finished game's result."""

    def __init__(self, cfg: SelfPlayConfig, policy: torch.nn.Module, num_rows: int, device: str | torch.device,
                 seed: int, make_bot: Callable[[str, np.random.Generator], Player] | None = None,
                 members: list[Member] | None = None) -> None:
        """``policy``: the learner's (snapshots copy it); ``num_rows``: the pool's rows (a player
        with memory keeps some per row); ``make_bot(spec, rng)``: the player of a bot spec;
        ``members``: a fixed set instead of the config's (a match's opponent)."""
        if members is None:
            cfg.check()
        self.cfg, self.policy, self.num_rows, self.device = cfg, policy, num_rows, device
        self.rng = np.random.default_rng(seed)
        self.make_bot = make_bot
        self.learner_rating = elo.INITIAL_RATING
        self.learner_games = 0
        self.updates = 0
        self.recent: list[float] = []  # the learner's scores since the last report
        if members is not None:
            self.members = list(members)
            return
        self.members = [Member(f"bot:{spec}", "bot", self._bot(spec), 0, spec=spec) for spec in cfg.bot_specs()]
        if cfg.league_size > 0:
            self.snapshot()

    # -- members ------------------------------------------------------------------------------
    @property
    def snapshots(self) -> list[Member]:
        return [m for m in self.members if m.kind == "snapshot"]

    def snapshot(self) -> Member:
        """Add a frozen copy of the learner at its current rating; the oldest snapshot leaves
        when there are more than the league's size (a game it is playing plays on)."""
        weights = {k: v.detach().clone() for k, v in self.policy.state_dict().items()}
        member = Member(f"snapshot@{self.updates}", "snapshot", self._policy_player(weights), self.updates,
                        rating=self.learner_rating, weights=weights)
        self.members.append(member)
        snapshots = self.snapshots
        for old in snapshots[:max(0, len(snapshots) - self.cfg.league_size)]:
            self.members.remove(old)
        return member

    def _bot(self, spec: str) -> Player:
        if self.make_bot is None:
            raise ValueError("this league was built without make_bot: it cannot hold bots")
        return self.make_bot(spec, self.rng)

    def _policy_player(self, weights: dict[str, torch.Tensor]) -> PolicyPlayer:
        net = copy.deepcopy(self.policy)
        net.load_state_dict(weights)
        return PolicyPlayer(net, self.num_rows, self.device)

    def after_update(self) -> bool:
        """Count an update; True when it added a snapshot (every ``snapshot_every`` updates)."""
        self.updates += 1
        if self.cfg.league_size > 0 and self.updates % self.cfg.snapshot_every == 0:
            self.snapshot()
            return True
        return False

    # -- drawing ------------------------------------------------------------------------------
    def weights(self) -> np.ndarray:
        """Each member's chance of being drawn as an env's next opponent."""
        n = len(self.members)
        if self.cfg.opponents == "uniform":
            return np.full(n, 1.0 / n)
        if self.cfg.opponents == "latest":
            snapshots = [i for i, m in enumerate(self.members) if m.kind == "snapshot"]
            w = np.zeros(n)
            w[snapshots[-1] if snapshots else n - 1] = 1.0
            return w
        w = np.array([max((1.0 - m.score) ** PFSP_POWER, MIN_WEIGHT) for m in self.members])
        return w / w.sum()

    def draw(self, n: int) -> list[Member]:
        """``n`` opponents, each drawn independently by the league's rule."""
        idx = self.rng.choice(len(self.members), size=n, p=self.weights())
        return [self.members[i] for i in idx]

    # -- results ------------------------------------------------------------------------------
    def record(self, member: Member, score: float) -> None:
        """One finished game: the learner scored ``score`` (1, 0.5, 0) against ``member``."""
        member.record(score)
        self.learner_rating, member.rating = elo.update(self.learner_rating, member.rating, score)
        self.learner_games += 1
        self.recent.append(score)

    def metrics(self) -> dict[str, float]:
        """The league's scalars for the run's metrics (``league/``); resets the recent scores."""
        out = {"league/elo": self.learner_rating, "league/members": float(len(self.members)),
               "league/games": float(self.learner_games)}
        if self.members:
            out["league/elo_best_member"] = max(m.rating for m in self.members)
        if self.recent:
            out["league/score"] = float(np.mean(self.recent))
            self.recent = []
        return out

    def write_csv(self, run_dir: Path) -> Path:
        """league.csv: the learner and every member, ratings and records (written atomically)."""
        path = Path(run_dir) / LEAGUE_FILE
        tmp = path.with_name(path.name + ".tmp")
        weights = self.weights()
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["member", "kind", "created_update", "rating", "games", "learner_wins", "draws",
                        "learner_losses", "learner_score", "draw_weight"])
            w.writerow(["learner", "learner", self.updates, f"{self.learner_rating:.1f}", self.learner_games,
                        "", "", "", "", ""])
            for m, p in zip(self.members, weights):
                w.writerow([m.name, m.kind, m.created, f"{m.rating:.1f}", m.games, m.wins, m.draws, m.losses,
                            f"{m.score:.3f}", f"{p:.4f}"])
        tmp.replace(path)
        return path

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Members (snapshots with their weights, bots by spec), ratings, records, the draw generator."""
        members = [{"name": m.name, "kind": m.kind, "created": m.created, "rating": m.rating, "games": m.games,
                    "wins": m.wins, "draws": m.draws, "losses": m.losses, "score": m.score, "spec": m.spec,
                    "weights": None if m.weights is None else {k: v.cpu() for k, v in m.weights.items()}}
                   for m in self.members]
        return {"members": members, "learner_rating": self.learner_rating, "learner_games": self.learner_games,
                "updates": self.updates, "rng": _plain(self.rng.bit_generator.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue a league: its members (bots rebuilt from their specs), ratings and records."""
        self.members = []
        for s in state["members"]:
            weights = None if s["weights"] is None else {k: v.to(self.device) for k, v in s["weights"].items()}
            player = self._policy_player(weights) if s["kind"] == "snapshot" else self._bot(s["spec"])
            self.members.append(Member(s["name"], s["kind"], player, int(s["created"]), float(s["rating"]),
                                       int(s["games"]), int(s["wins"]), int(s["draws"]), int(s["losses"]),
                                       float(s["score"]), s["spec"], weights))
        self.learner_rating = float(state["learner_rating"])
        self.learner_games = int(state["learner_games"])
        self.updates = int(state["updates"])
        self.rng.bit_generator.state = state["rng"]


def _plain(value: Any) -> Any:
    """A generator's state as plain dicts, strings and ints (what a weights-only load reads)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


def game_score(returns: np.ndarray, seat: int) -> float:
    """The learner's score in a finished game from every seat's episode return: 1 if its return
    beats every other seat's, 0.5 if it ties the best of them, 0 otherwise."""
    others = np.delete(returns, seat)
    best = others.max() if len(others) else -math.inf
    return 1.0 if returns[seat] > best else 0.5 if returns[seat] == best else 0.0
