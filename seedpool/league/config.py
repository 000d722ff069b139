"""`--selfplay.*`: the league a self-play run trains against."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from seedpool.errors import ConfigError


@dataclass
class SelfPlayConfig:
    """How the league is kept and drawn from (used with --selfplay; see docs/selfplay.md)."""

    snapshot_every: int = 10
    """Updates between snapshots of the learner added to the league (one is taken before the first update)."""
    league_size: int = 16
    """Snapshots kept (the oldest leaves when a new one comes); fixed bots come on top of these."""
    opponents: Literal["pfsp", "latest", "uniform"] = "pfsp"
    """How an env's next opponent is drawn: "pfsp" weights members by (1 - P(learner wins))^2
    (prioritized fictitious self-play), "latest" takes the newest snapshot, "uniform" any member."""
    bots: tuple[str, ...] = ()
    """Fixed members besides the snapshots: "random" (a uniformly random legal move), a scripted
    "module:function" of (observation, action_mask) -> action, or a run folder / checkpoint.pt of
    the same game; several may be given, or one comma-separated list."""

    def bot_specs(self) -> list[str]:
        """The bots as single specs (comma-separated lists split)."""
        return [part.strip() for spec in self.bots for part in spec.split(",") if part.strip()]

    def check(self) -> None:
        """Refuse a league that cannot be drawn from, before anything starts."""
        if self.snapshot_every < 1:
            raise ConfigError(f"--selfplay.snapshot-every counts updates between snapshots: at least 1, "
                              f"got {self.snapshot_every}")
        if self.league_size < 0:
            raise ConfigError(f"--selfplay.league-size must be 0 or more, got {self.league_size}")
        if self.league_size == 0 and not self.bot_specs():
            raise ConfigError("the league has no opponents: --selfplay.league-size 0 keeps no snapshots and "
                              "no --selfplay.bots are given; keep snapshots (league size 1 or more) or name a bot, "
                              "e.g. --selfplay.bots random")
        if self.opponents == "latest" and self.league_size == 0:
            raise ConfigError("--selfplay.opponents latest plays the newest snapshot, and --selfplay.league-size 0 "
                              "keeps none: keep snapshots or draw the bots with pfsp or uniform")


SelfPlayOptions = Annotated[SelfPlayConfig, tyro.conf.arg(name="selfplay")]
"""The config's type as a trainer's field: its options are spelled --selfplay.* beside the
--selfplay switch itself."""
