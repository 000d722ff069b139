"""What a PPO run adds with ``--selfplay``: the league, the learner's rows against it, and a
loop that does the league's bookkeeping after every update (see docs/selfplay.md).

    selfplay = SelfPlay(cfg.league, rows, policy, env_id, device, seed)  # rows: AgentRows
    sampler = make_sampler("sync", selfplay.rows, policy, ...)         # only the learner's rows
    loop = selfplay.loop(SyncLoop(sampler, learner, state))            # snapshots, Elo, league.csv
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager

import numpy as np

from seedpool.actors.agent_rows import is_agent_pool
from seedpool.errors import ConfigError
from seedpool.league.config import SelfPlayConfig
from seedpool.league.league import League
from seedpool.league.players import make_bot
from seedpool.league.rows import SelfPlayRows


def check_game(rows: Any, env_id: str) -> None:
    """Refuse a task self-play cannot play: a single-agent env, or a game of one seat."""
    pool = getattr(rows, "pool", None)
    if not is_agent_pool(pool):
        raise ConfigError(f"--selfplay plays a game of two or more seats; {env_id} is a single-agent env "
                          "(self-play needs a multi-agent task, e.g. --env connect_four_v3)")
    if pool.num_agents < 2:
        raise ConfigError(f"--selfplay plays a game of two or more seats; {env_id} has one "
                          f"({pool.possible_agents[0]!r})")


class SelfPlay:
    """A league around the learner's policy and the rows the sampler steps (see the module doc)."""

    def __init__(self, cfg: SelfPlayConfig, rows: Any, policy, env_id: str, device: str, seed: int) -> None:
        cfg.check()
        check_game(rows, env_id)
        self.cfg = cfg
        self.league = League(cfg, policy, rows.num_envs, device, seed,
                             make_bot=lambda spec, rng: make_bot(spec, rows, env_id, rng, device))
        self.rows = SelfPlayRows(rows, self.league)

    def loop(self, inner: Any) -> SelfPlayLoop:
        return SelfPlayLoop(inner, self)

    def state_dict(self) -> dict[str, Any]:
        return self.league.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A resumed run's league; load it before the sampler restarts the envs, whose new games
        draw their opponents from it."""
        self.league.load_state_dict(state)


class SelfPlayLoop:
    """The sync loop's round, then the league's: results rated, a snapshot every
    ``snapshot_every`` updates, ``league/*`` metrics and league.csv."""

    def __init__(self, inner: Any, selfplay: SelfPlay) -> None:
        self.inner, self.selfplay = inner, selfplay

    def step(self, run, until_step: int) -> bool:
        ok = self.inner.step(run, until_step)
        sp = self.selfplay
        results = sp.rows.take_results()
        sp.league.after_update()
        metrics = sp.league.metrics()
        for seat in range(sp.rows.A):
            scores = [r.score for r in results if r.seat == seat]
            if scores:
                metrics[f"league/score_seat{seat}"] = float(np.mean(scores))
        metrics["time/league_opponents"] = sp.rows.opponent_s
        run.log(metrics)
        sp.league.write_csv(run.dir)
        return ok

    def pause(self) -> None:
        self.inner.pause()

    def between_updates(self) -> ContextManager:
        return getattr(self.inner, "between_updates", contextlib.nullcontext)()

    def state(self) -> dict[str, Any]:
        return {**self.inner.state(), "league": self.selfplay.state_dict()}

    def close(self) -> None:
        self.inner.close()
