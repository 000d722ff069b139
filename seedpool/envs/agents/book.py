"""The rows' side of a multi-agent pool: checking the actions a caller sends for some envs'
rows, and turning the envs' arrays `[B, A, ...]` into rows `[B * A, ...]` with their info.

Shared by the engine-backed pool (PettingZoo envs in workers) and native families.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs import validate
from seedpool.envs.agents.layout import AgentLayout
from seedpool.errors import ConfigError


class IllegalActionError(ConfigError):
    """An active row's action that its action mask rules out."""


class RowBook:
    """Per-row state between steps: which rows are active (their next action is used), their
    action masks, and each agent's running episode return and length."""

    def __init__(self, layout: AgentLayout, num_envs: int, check_masks: bool = True):
        a = layout.num_agents
        self.layout, self.num_envs, self.A = layout, num_envs, a
        n = num_envs * a
        self.active = np.zeros(n, bool)
        self.mask = np.ones((n, layout.mask_size), bool) if layout.mask_size is not None else None
        self.returns = np.zeros(n, np.float64)
        self.lengths = np.zeros(n, np.int64)
        self.team = np.zeros(num_envs, np.float64)
        self.check_masks = check_masks
        self.space = layout.row_action_space
        self.slot = np.arange(a)
        self.group_of = layout.group_of
        self._filler = _filler(self.space)

    # -- send side ----------------------------------------------------------------------------
    def env_ids(self, env_id: Any) -> np.ndarray:
        """The envs a send is for: `env_id` per env, or per row (each env's A rows together, in
        slot order: the `info["env_id"]` a recv returned)."""
        if env_id is None:
            return np.arange(self.num_envs)
        ids = np.asarray(env_id)
        if ids.ndim == 1 and ids.size and ids.size % self.A == 0 and self.A > 1:
            per_env = ids.reshape(-1, self.A)
            if (per_env == per_env[:, :1]).all():
                ids = per_env[:, 0]
        return validate.env_ids(ids, self.num_envs)

    def actions(self, action: Any, envs: np.ndarray) -> np.ndarray:
        """The caller's actions for the rows of `envs` checked, as `[len(envs), A, ...]` for the
        envs (a new array: the caller's is never changed). Inactive rows' actions are ignored:
        whatever they hold (out of range included) is replaced by a valid one."""
        n = len(envs) * self.A
        a = np.asarray(action)
        if a.ndim == 0 or a.shape[0] != n:
            got = "a scalar" if a.ndim == 0 else f"{a.shape[0]} rows"
            raise ConfigError(f"expected actions for {n} rows ({len(envs)} envs x {self.A} agents, row "
                              f"e * {self.A} + k = agent k of env e), got {got}")
        rows = self.rows_of(envs)
        active = self.active[rows]
        a = np.array(a, copy=True)  # the caller's array is never changed
        if not active.all():
            a[~active] = self._filler
        validate.actions(self.space, a, n)
        if self.mask is not None and self.check_masks:
            self._check_masks(a, rows, active)
        return a.reshape(len(envs), self.A, *a.shape[1:])

    def _check_masks(self, a: np.ndarray, rows: np.ndarray, active: np.ndarray) -> None:
        picked = self.mask[rows, a.astype(np.int64)]
        bad = np.flatnonzero(active & ~picked)
        if bad.size:
            r = int(rows[bad[0]])
            e, k = divmod(r, self.A)
            legal = np.flatnonzero(self.mask[r]).tolist()
            raise IllegalActionError(
                f"action {int(a[bad[0]])} of row {r} (env {e}, agent {self.layout.possible_agents[k]!r}) is ruled "
                f"out by its action mask: legal actions are {legal} (info['action_mask'] of the last observation)")

    # -- receive side -------------------------------------------------------------------------
    def rows(self, envs: np.ndarray, obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
             truncated: np.ndarray, active: np.ndarray, started: np.ndarray, mask: np.ndarray | None,
             state: np.ndarray | None) -> tuple[Any, ...]:
        """Rows of envs `envs` from their `[B, A, ...]` arrays; `started`: per env, whether this is
        the first observation of an episode (a reset); returns (obs, reward, terminated,
        truncated, info) over `B * A` rows."""
        b, a = len(envs), self.A
        rows = self.rows_of(envs)
        r = reward.reshape(-1).astype(np.float32, copy=False)
        term = terminated.reshape(-1).astype(bool)
        trunc = truncated.reshape(-1).astype(bool)
        was_active = self.active[rows]
        start_rows = np.repeat(started, a)
        if start_rows.any():
            self.returns[rows[start_rows]] = 0.0
            self.lengths[rows[start_rows]] = 0
            self.team[envs[started]] = 0.0
        ret = self.returns[rows] + r
        length = self.lengths[rows] + was_active
        self.returns[rows] = ret
        self.lengths[rows] = length
        team = self.team[envs] + r.reshape(b, a).sum(axis=1)
        self.team[envs] = team
        act = active.reshape(-1).astype(bool)
        self.active[rows] = act
        info: dict[str, Any] = {
            "env_id": np.repeat(envs.astype(np.int32), a),
            "agent_id": np.tile(self.slot.astype(np.int32), b),
            "group": np.tile(self.group_of, b),
            "active": act,
            "episode_return": ret,
            "episode_length": length,
            "team_return": np.repeat(team, a),
        }
        if mask is not None:
            m = mask.reshape(b * a, -1).astype(bool)
            self.mask[rows] = m
            info["action_mask"] = m
        if state is not None:  # one per env (row i of the batch is env i // A's): a state can be large
            info["state"] = np.asarray(state)
        return obs.reshape(b * a, *obs.shape[2:]), r, term, trunc, info


    def rows_of(self, envs: np.ndarray) -> np.ndarray:
        return (envs[:, None] * self.A + self.slot).reshape(-1)

    def restart(self, envs: np.ndarray, active: np.ndarray, mask: np.ndarray | None) -> None:
        """Envs that started a new episode within a step (same-step autoreset): their rows'
        counts start again and their active flags and masks are the new episode's."""
        rows = self.rows_of(envs)
        self.returns[rows] = 0.0
        self.lengths[rows] = 0
        self.team[envs] = 0.0
        self.active[rows] = active.reshape(-1).astype(bool)
        if mask is not None and self.mask is not None:
            self.mask[rows] = mask.reshape(len(rows), -1).astype(bool)


def _filler(space: gym.Space) -> Any:
    """A valid action that stands in for an inactive row's (which is never used)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return space.start
    return 0
