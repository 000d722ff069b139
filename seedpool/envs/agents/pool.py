"""`AgentPool`: a pool of multi-agent envs whose rows are agents (see docs/multiagent.md).

`N` envs of `A` agent slots give `N * A` rows, row `e * A + k` being `possible_agents[k]` of
env `e`. Every call takes and returns rows: `step(actions)` takes one action per row, `recv()`
returns all rows of each env it hands out, `send(actions, env_id)` takes actions for the rows
of those envs (`env_id` per env or per row, as `info["env_id"]` gave it). Inactive rows (an
agent that is done, not yet spawned, or waiting for its turn) are zeros with reward 0, and
their actions are ignored.

The envs themselves run in the engine (`EnvPool`), each wrapped so that its agents' rows
travel as one observation (adapter.py): every backend, the async mode, fault handling and
clean shutdown are the engine's.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from seedpool.envs.agents.adapter import AGENT_INFOS
from seedpool.envs.agents.book import RowBook
from seedpool.envs.agents.layout import AgentLayout
from seedpool.envs.pool import EnvPool


class AgentRowsAPI:
    """What every multi-agent pool offers besides its calls (spaces, sizes, groups)."""

    layout: AgentLayout
    num_envs: int
    batch_size: int

    @property
    def num_agents(self) -> int:
        """Agent slots per env (`len(possible_agents)`)."""
        return self.layout.num_agents

    @property
    def num_rows(self) -> int:
        return self.num_envs * self.layout.num_agents

    @property
    def possible_agents(self) -> list[str]:
        return list(self.layout.possible_agents)

    @property
    def groups(self) -> dict[str, list[int]]:
        """Group name -> agent slots."""
        return {g: list(v) for g, v in self.layout.groups.items()}

    @property
    def single_observation_space(self):
        """A row's observation space (zero-padded to the largest group's where groups differ)."""
        return self.layout.row_observation_space

    @property
    def single_action_space(self):
        return self.layout.row_action_space

    @property
    def state_space(self):
        """The space of `info["state"]` (PettingZoo's `state()`), or None."""
        return self.layout.state_space

    @property
    def is_async(self) -> bool:
        return self.batch_size < self.num_envs

    def observation_space_of(self, group: str):
        """A group's real (unpadded) observation space."""
        return self.layout.group_spaces(group)[0]

    def action_space_of(self, group: str):
        return self.layout.group_spaces(group)[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AgentPool(AgentRowsAPI):
    """Multi-agent rows over an engine pool of adapted PettingZoo envs."""

    def __init__(self, inner: EnvPool, layout: AgentLayout, name: str, check_action_masks: bool = True):
        self._inner = inner
        self.layout = layout
        self.name = name
        self.num_envs = inner.num_envs
        self.batch_size = inner.batch_size
        self.autoreset = inner.autoreset  # "next_step", "same_step" or "disabled"
        self._book = RowBook(layout, self.num_envs, check_action_masks)

    # -- calls ------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        """Reset every env; returns (obs, info) over all rows."""
        obs, info = self._inner.reset(seed=seed, options=options)
        started = np.ones(len(info["env_id"]), bool)
        out = self._rows(obs, None, None, info, started)
        return out[0], out[4]

    def step(self, action: Any, env_id: Any = None):
        """send then recv: in sync mode every env's rows (or those of `env_id`), in env order."""
        envs = self._book.env_ids(env_id)
        acts = self._book.actions(action, envs)
        return self._result(*self._inner.step(acts, None if env_id is None else envs))

    def async_reset(self) -> None:
        self._inner.async_reset()

    def send(self, action: Any, env_id: Any = None) -> None:
        envs = self._book.env_ids(env_id)
        self._inner.send(self._book.actions(action, envs), envs)

    def recv(self, timeout: float | None = None):
        return self._result(*self._inner.recv(timeout=timeout))

    def close(self, **kwargs: Any) -> None:
        self._inner.close()

    # The engine's own state, as the engine reports it: whether it is closed, its backend and
    # workers (what `repr` and fault handling read), its dead workers replaced so far.
    _FORWARDED = frozenset({"closed", "backend", "num_workers", "worker_pids", "worker_restarts", "layout_reason"})

    def __getattr__(self, name: str) -> Any:
        if name in AgentPool._FORWARDED:
            return getattr(self._inner, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def engine(self) -> EnvPool:
        """The engine pool underneath (one env per PettingZoo env)."""
        return self._inner

    def __repr__(self) -> str:
        mode = f"async batch_size={self.batch_size}" if self.is_async else "sync"
        return (f"AgentPool({self.name!r}, num_envs={self.num_envs}, agents={self.num_agents}, {mode}, "
                f"backend={self.backend!r})")

    # -- rows -------------------------------------------------------------------------------
    def _result(self, obs, rew, term, trunc, info):
        started = info["elapsed_step"] == 0
        return self._rows(obs, term, trunc, info, started)

    def _rows(self, obs: dict, env_term, env_trunc, info: dict, started: np.ndarray):
        book = self._book
        envs = info["env_id"].astype(np.int64)
        final = info.get("final_obs") if self.autoreset == "same_step" else None
        ended = None if env_term is None else (env_term | env_trunc)
        if final is not None and ended is not None and ended.any():
            return self._same_step_rows(obs, final, ended, env_trunc, info, envs)
        active, trunc = obs["active"], obs["truncated"]
        if env_trunc is not None and env_trunc.any():
            active, trunc = self._cut(obs, env_trunc)
        out = book.rows(envs, obs["obs"], obs["reward"], obs["terminated"], trunc, active, started,
                        obs.get("action_mask"), obs.get("state"))
        self._engine_info(out[4], info)
        return out

    def _cut(self, obs: dict, env_trunc: np.ndarray):
        """Rows of envs the engine truncated (its time limit, a restarted worker): every agent
        still in the episode ends truncated, none stays active."""
        active = obs["active"].astype(bool)
        trunc = obs["truncated"].astype(bool) | (active & env_trunc[:, None])
        return active & ~env_trunc[:, None], trunc

    def _same_step_rows(self, obs, final, ended, env_trunc, info, envs):
        """Same-step autoreset: an env that ended gives its final step's rows (from
        `final_obs`) and, as observations, its new episode's first rows; their final
        observations go to `info["final_obs"]` per row."""
        book = self._book
        pick = lambda k: np.where(_bcast(ended, obs[k]), final[k], obs[k])  # noqa: E731
        fin = {k: pick(k) for k in ("reward", "terminated", "truncated", "active")}
        active, trunc = fin["active"], fin["truncated"]
        if env_trunc.any():
            active, trunc = self._cut(fin, env_trunc)
        out = book.rows(envs, final["obs"], fin["reward"], fin["terminated"], trunc, active,
                        np.zeros(len(envs), bool), final.get("action_mask"), final.get("state"))
        rows_final = out[0]
        restart = np.flatnonzero(ended)
        book.restart(envs[restart], obs["active"][restart], None if "action_mask" not in obs else obs["action_mask"][restart])
        new_obs = obs["obs"].reshape(rows_final.shape)
        info_rows = out[4]
        info_rows["final_obs"] = rows_final
        ended_rows = np.repeat(ended, self.num_agents)
        info_rows["active"] = np.where(ended_rows, obs["active"].reshape(-1).astype(bool), info_rows["active"])
        if "action_mask" in obs:
            info_rows["action_mask"] = book.mask[book.rows_of(envs)]
        if "state" in obs:
            info_rows["state"] = obs["state"]
        self._engine_info(info_rows, info)
        return new_obs, out[1], out[2], out[3], info_rows

    def _engine_info(self, rows_info: dict, info: dict) -> None:
        """The engine's per-env counts, per row."""
        a = self.num_agents
        rows_info["elapsed_step"] = np.repeat(info["elapsed_step"], a)
        if "restarted" in info:
            rows_info["restarted"] = np.repeat(info["restarted"], a)
        if AGENT_INFOS in info:  # some agent's own info dict held something: one dict per row
            per_env, given = info[AGENT_INFOS], info.get("_" + AGENT_INFOS)
            rows = np.empty(len(per_env) * a, dtype=object)
            for b, dicts in enumerate(per_env):
                for k in range(a):
                    rows[b * a + k] = dicts[k] if (given is None or given[b]) and dicts else {}
            rows_info["agent_info"] = rows


def _bcast(ended: np.ndarray, like: np.ndarray) -> np.ndarray:
    return ended.reshape(-1, *([1] * (like.ndim - 1)))
