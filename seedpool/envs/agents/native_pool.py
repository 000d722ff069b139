"""`NativeAgentPool`: a native multi-agent family (`NativeAgents`) behind the agent pool's API.

Every env's agents are stepped in one call of the family, in this process; the pool keeps
the episode bookkeeping (the time limit, agents done earlier, autoreset, per-row returns)
and checks actions as `AgentPool` does. `send`/`recv` work as the engine's do, with the
envs of each `send` stepped at once and handed back by the next `recv`s in that order.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np

from seedpool.envs.agents.book import RowBook
from seedpool.envs.agents.layout import AgentLayout
from seedpool.envs.agents.native import NativeAgents
from seedpool.envs.agents.pool import AgentRowsAPI
from seedpool.envs.errors import ClosedError, EnvPoolError


class NativeAgentPool(AgentRowsAPI):
    """Rows of `family.num_envs` envs stepped by the family (see the module doc)."""

    def __init__(self, family: NativeAgents, layout: AgentLayout, name: str, seeds: Sequence[int | None],
                 autoreset: str, batch_size: int, max_episode_steps: int | None, check_action_masks: bool = True):
        self.family, self.layout, self.name = family, layout, name
        self.num_envs = n = family.num_envs
        self.batch_size = batch_size
        self.autoreset = autoreset
        self.backend, self.num_workers, self.worker_pids = "native", 0, []
        self.limit = max_episode_steps if max_episode_steps is not None else family.max_cycles
        a = layout.num_agents
        self._book = RowBook(layout, n, check_action_masks)
        self._elapsed = np.zeros(n, np.int64)
        self._done = np.zeros((n, a), bool)  # agents whose episode has ended
        self._needs_reset = np.ones(n, bool)
        self._results: deque = deque()
        self._closed = False
        # Seeded at construction, as EnvPool seeds its envs: a pool stepped before any reset
        # repeats its episodes from the seed too.
        for i, s in enumerate(seeds):
            if s is not None and s >= 0:
                family.seed(i, int(s))
        self._has_state = layout.state_space is not None

    # -- calls ------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        self._check_open()
        self._results.clear()
        if seed is not None:
            from seedpool.envs.pool import env_seeds
            for i, s in enumerate(env_seeds(seed, self.num_envs)):
                self.family.seed(i, s)
        ids = np.arange(self.num_envs)
        obs = self._reset_envs(ids)
        out = self._rows_of(ids, obs, np.zeros(obs.shape[:2], np.float32), self._false(ids), self._false(ids),
                            np.ones(len(ids), bool))
        return out[0], out[4]

    def step(self, action: Any, env_id: Any = None):
        self.send(action, env_id)
        return self._take(len(self._results[-1][0]) if not self.is_async else self.batch_size)

    def async_reset(self) -> None:
        self._check_open()
        ids = np.arange(self.num_envs)
        obs = self._reset_envs(ids)
        self._results.append((ids, obs, np.zeros(obs.shape[:2], np.float32), self._false(ids), self._false(ids),
                              np.ones(len(ids), bool)))

    def send(self, action: Any, env_id: Any = None) -> None:
        self._check_open()
        envs = self._book.env_ids(env_id)
        acts = self._book.actions(action, envs)
        self._results.append(self._step_envs(envs, acts))

    def recv(self, timeout: float | None = None):
        self._check_open()
        return self._take(self.batch_size)

    def close(self, **kwargs: Any) -> None:
        if not self._closed:
            self._closed = True
            self.family.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        mode = f"async batch_size={self.batch_size}" if self.is_async else "sync"
        return f"NativeAgentPool({self.name!r}, num_envs={self.num_envs}, agents={self.num_agents}, {mode})"

    # -- envs -------------------------------------------------------------------------------
    def _false(self, ids: np.ndarray) -> np.ndarray:
        return np.zeros((len(ids), self.layout.num_agents), bool)

    def _reset_envs(self, ids: np.ndarray) -> np.ndarray:
        obs = self.family.reset(ids)
        self._elapsed[ids] = 0
        self._done[ids] = False
        self._needs_reset[ids] = False
        return obs

    def _step_envs(self, envs: np.ndarray, acts: np.ndarray):
        """Step (or, after an episode's end with next-step autoreset, reset) the envs `envs`."""
        a = self.layout.num_agents
        started = self._needs_reset[envs] & (self.autoreset == "next_step")
        obs = np.zeros((len(envs), a, *self.layout.row_observation_space.shape), np.float32)
        rew = np.zeros((len(envs), a), np.float32)
        term, trunc = self._false(envs), self._false(envs)
        if started.any():
            obs[started] = self._reset_envs(envs[started])
        go = ~started
        if go.any():
            ids = envs[go]
            o, r, t = self.family.step(ids, acts[go])
            was_done = self._done[ids]
            self._elapsed[ids] += 1
            cut = (self._elapsed[ids] >= self.limit)[:, None] if self.limit else np.zeros((len(ids), 1), bool)
            t = t & ~was_done
            tr = cut & ~was_done & ~t
            o[was_done] = 0  # agents done earlier: zero rows with reward 0
            r = np.where(was_done, 0.0, r).astype(np.float32)
            self._done[ids] = was_done | t | tr
            obs[go], rew[go], term[go], trunc[go] = o, r, t, tr
        return envs, obs, rew, term, trunc, started

    def _take(self, n: int):
        if not self._results:
            raise EnvPoolError("recv() with nothing in flight: send() actions first")
        envs, obs, rew, term, trunc, started = self._results[0]
        if len(envs) > n:  # hand out the first n envs, keep the rest for the next recv
            self._results[0] = tuple(x[n:] for x in self._results[0])
            envs, obs, rew, term, trunc, started = envs[:n], obs[:n], rew[:n], term[:n], trunc[:n], started[:n]
        else:
            self._results.popleft()
        return self._finish(envs, obs, rew, term, trunc, started)

    def _finish(self, envs, obs, rew, term, trunc, started):
        ended = self._done[envs].all(axis=1) & ~started
        if not ended.any() or self.autoreset != "same_step":
            self._needs_reset[envs[ended]] = True
            return self._rows_of(envs, obs, rew, term, trunc, started)
        out = self._rows_of(envs, obs, rew, term, trunc, started)
        restart = envs[ended]
        new = self._reset_envs(restart)
        final = out[0].copy()
        rows_obs = out[0].reshape(len(envs), self.layout.num_agents, -1)
        rows_obs[ended] = new.reshape(rows_obs[ended].shape)
        self._book.restart(restart, np.ones((len(restart), self.layout.num_agents), bool), None)
        info = out[4]
        info["final_obs"] = final
        info["active"] = np.where(np.repeat(ended, self.layout.num_agents), True, info["active"])
        if self._has_state:
            info["state"] = self.family.state(envs)
        return rows_obs.reshape(out[0].shape), out[1], out[2], out[3], info

    def _rows_of(self, envs, obs, rew, term, trunc, started):
        active = ~self._done[envs]
        state = self.family.state(envs) if self._has_state else None
        out = self._book.rows(envs, obs, rew, term, trunc, active, started, None, state)
        out[4]["elapsed_step"] = np.repeat(self._elapsed[envs].astype(np.int32), self.layout.num_agents)
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this pool is closed")
