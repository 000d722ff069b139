"""Self-play against a league: the learner's past snapshots and fixed bots, Elo ratings,
opponents drawn by PFSP, matches (see docs/selfplay.md)."""

from seedpool.league.config import SelfPlayConfig, SelfPlayOptions
from seedpool.league.league import League, Member
from seedpool.league.loop import SelfPlay, SelfPlayLoop
from seedpool.league.rows import GameResult, SelfPlayRows

__all__ = ["GameResult", "League", "Member", "SelfPlay", "SelfPlayConfig", "SelfPlayLoop", "SelfPlayOptions",
           "SelfPlayRows"]
