"""`SelfPlayRows`: a game's agent rows as the learner sees them, one row per env, with league
members playing every other seat.

The sampler steps it like any single-agent sync pool of ``num_envs`` envs. Under the hood a
step is the learner's move in every env where it is the learner's turn (the reset in envs
whose game ended at the last step), then the opponents' moves, env by env, until the learner
is to move again or the game is over. So every step the sampler stores is the learner's own
move, the reward it gets is what that move led to up to its next turn, and the value at a
rollout's end is that of a position the learner is to move in.

An env's opponent and the learner's seat change only at an episode start (the reset step):
the env's new opponent is drawn from the league then, told to `begin` (a player with memory
forgets the last game there), and the learner moves to the next seat, so over a run it plays
every seat equally often. A member that leaves the league mid-game plays that game out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from seedpool.errors import ConfigError
from seedpool.league.league import League, Member, game_score


@dataclass(frozen=True)
class GameResult:
    """One finished game: the env, the learner's seat, its opponent and score (1, 0.5, 0)."""

    env: int
    seat: int
    member: Member
    score: float


class SelfPlayRows:
    """The learner's rows of ``rows`` (`AgentRows` of a sync multi-agent pool); see the module doc."""

    def __init__(self, rows, league: League) -> None:
        pool = rows.pool
        if pool.num_agents < 2:
            raise ConfigError(f"self-play needs a game with two or more seats; {pool.name} has one "
                              f"({pool.possible_agents[0]!r})")
        self.rows, self.pool, self.league = rows, pool, league
        self.A, self.N = pool.num_agents, pool.num_envs
        self.num_envs = self.batch_size = self.N
        self.is_async = False
        self.single_observation_space = rows.single_observation_space
        self.single_action_space = rows.single_action_space
        self.obs_shape = pool.single_observation_space.shape
        self.obs_width = rows.inputs.obs
        self.finished: list[GameResult] = []  # games over since the caller last took them
        self.seat = np.arange(self.N) % self.A  # the learner's seat in each env (alternating per episode)
        self.opponent: list[Member | None] = [None] * self.N
        self.episode = np.zeros(self.N, np.int64)  # episodes started per env
        self.ended = np.zeros(self.N, bool)  # the env's game is over: its next step is the reset
        n = self.N * self.A
        self.feat = np.zeros((n, *rows.single_observation_space.shape), rows.single_observation_space.dtype)
        self.active = np.zeros(n, bool)
        self.mask = None if pool.layout.mask_size is None else np.zeros((n, pool.layout.mask_size), bool)
        self.returns = np.zeros(n, np.float64)
        self.lengths = np.zeros(n, np.int64)
        self.opponent_s = 0.0  # seconds the opponents spent choosing moves
        self.rows_stepped = 0  # agent rows of the envs the engine stepped (the learner's and opponents' moves)

    # -- the pool API -------------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        feat, info = self.rows.reset(seed=seed, options=options)
        envs = np.arange(self.N)
        self._store(envs, feat, info)
        self.ended[:] = False
        self.seat = np.arange(self.N) % self.A
        self.episode[:] = 0
        self._begin(envs)
        acc = self._zeros()
        self._opponents_until_learner(envs, acc)
        return self._view(), self._info()

    def step(self, action):
        action = np.asarray(action)
        if action.shape[:1] != (self.N,):
            raise ConfigError(f"expected one action per env's learner row ({self.N}), got shape {action.shape}")
        envs = np.arange(self.N)
        restarting = self.ended.copy()
        full = np.zeros((self.N * self.A, *action.shape[1:]), action.dtype)
        full[self._learner_rows(envs)] = action
        self._opponent_actions(envs[~restarting], full)  # simultaneous games: their moves too
        acc = self._zeros()
        self._pool_step(envs, full, acc)
        self.ended[restarting] = False
        self._begin(np.flatnonzero(restarting))
        self._opponents_until_learner(envs, acc)
        rew, term, trunc = acc
        return self._view(), rew.astype(np.float32), term, trunc, self._info()

    def close(self) -> None:
        self.rows.close()

    def __repr__(self) -> str:
        return f"{self.pool!r}: the learner's {self.N} rows against a league of {len(self.league.members)}"

    def learner_rows(self) -> np.ndarray:
        """The pool rows the learner plays now, one per env."""
        return self._learner_rows(np.arange(self.N))

    # -- inside a step ------------------------------------------------------------------------
    def _learner_rows(self, envs: np.ndarray) -> np.ndarray:
        return envs * self.A + self.seat[envs]

    def _zeros(self):
        return np.zeros(self.N), np.zeros(self.N, bool), np.zeros(self.N, bool)

    def _begin(self, envs: np.ndarray) -> None:
        """New episodes in ``envs``: the learner's next seat, a new opponent, told to begin."""
        if not len(envs):
            return
        self.seat[envs] = (envs + self.episode[envs]) % self.A
        self.episode[envs] += 1
        drawn = self.league.draw(len(envs))
        by_member: dict[int, tuple[Member, list[int]]] = {}
        for e, member in zip(envs.tolist(), drawn):
            self.opponent[e] = member
            by_member.setdefault(id(member), (member, []))[1].append(e)
        for member, es in by_member.values():
            e = np.asarray(es)
            member.player.begin(self._other_rows(e))

    def _other_rows(self, envs: np.ndarray) -> np.ndarray:
        """The rows of ``envs`` that are not the learner's."""
        rows = (envs[:, None] * self.A + np.arange(self.A)).reshape(-1)
        return rows[rows != np.repeat(self._learner_rows(envs), self.A)]

    def _opponents_until_learner(self, envs: np.ndarray, acc) -> None:
        """Step the opponents of ``envs`` until each is at the learner's move or over."""
        while True:
            learner = self._learner_rows(envs)
            waiting = envs[~self.ended[envs] & ~self.active[learner]]
            if not len(waiting):
                return
            space = self.single_action_space
            full = np.zeros((len(waiting) * self.A, *space.shape), space.dtype)
            self._opponent_actions(waiting, full, offset=True)
            self._pool_step(waiting, full, acc)

    def _opponent_actions(self, envs: np.ndarray, out: np.ndarray, offset: bool = False) -> None:
        """The opponents' actions for their active rows in ``envs``, written into ``out`` (the
        whole pool's rows, or with ``offset`` the rows of ``envs`` only)."""
        if not len(envs):
            return
        t0 = time.perf_counter()
        groups: dict[int, tuple[Member, list[int]]] = {}
        for e in envs.tolist():
            groups.setdefault(id(self.opponent[e]), (self.opponent[e], []))[1].append(e)
        for member, es in groups.values():
            e = np.asarray(es)
            rows = self._other_rows(e)
            rows = rows[self.active[rows]]
            if not len(rows):
                continue
            feat = self.feat[rows]
            obs = feat[:, :self.obs_width].reshape(len(rows), *self.obs_shape)
            mask = None if self.mask is None else self.mask[rows]
            acts = member.player.act(feat, obs, mask, rows)
            if offset:  # rows of envs in the order given: env's position * A + slot
                pos = np.searchsorted(envs, rows // self.A)
                out[pos * self.A + rows % self.A] = acts
            else:
                out[rows] = acts
        self.opponent_s += time.perf_counter() - t0

    def _pool_step(self, envs: np.ndarray, actions: np.ndarray, acc) -> None:
        """One engine step of ``envs``; the learner rows' rewards and ends add into ``acc``."""
        every = len(envs) == self.N
        feat, rew, term, trunc, info = self.rows.step(actions, None if every else envs)
        self.rows_stepped += len(envs) * self.A
        self._store(envs, feat, info)
        learner = self._learner_rows(envs)
        pos = learner - envs * self.A + np.arange(len(envs)) * self.A  # the learner rows in this step's rows
        acc[0][envs] += rew[pos]
        acc[1][envs] |= term[pos]
        acc[2][envs] |= trunc[pos]
        over = ~self.active[(envs[:, None] * self.A + np.arange(self.A))].any(1)
        for e in envs[over & ~self.ended[envs]].tolist():
            self._game_over(e)

    def _store(self, envs: np.ndarray, feat: np.ndarray, info: dict) -> None:
        rows = (envs[:, None] * self.A + np.arange(self.A)).reshape(-1)
        self.feat[rows] = feat
        self.active[rows] = info["active"]
        self.returns[rows] = info["episode_return"]
        self.lengths[rows] = info["episode_length"]
        if self.mask is not None:
            self.mask[rows] = info["action_mask"]

    def _game_over(self, e: int) -> None:
        """Env ``e``'s game ended: its result goes to the league; its next step is the reset."""
        self.ended[e] = True
        returns = self.returns[e * self.A:(e + 1) * self.A]
        seat = int(self.seat[e])
        result = GameResult(e, seat, self.opponent[e], game_score(returns, seat))
        self.league.record(result.member, result.score)
        self.finished.append(result)

    def take_results(self) -> list[GameResult]:
        """The games that ended since the last call, in the order they ended."""
        out, self.finished = self.finished, []
        return out

    # -- what the sampler sees ----------------------------------------------------------------
    def _view(self) -> np.ndarray:
        return self.feat[self._learner_rows(np.arange(self.N))].copy()

    def _info(self) -> dict:
        learner = self._learner_rows(np.arange(self.N))
        return {"active": self.active[learner].copy(), "episode_return": self.returns[learner].copy(),
                "episode_length": self.lengths[learner].copy(), "env_id": np.arange(self.N, dtype=np.int32),
                "seat": self.seat.copy()}
