"""SuperSuit's rows over seedpool's engine: what both faces (gymnasium, SB3) return.

SuperSuit's vector envs give, per row (one row per agent of each env, env-major, in
`possible_agents` order; one row per env for a gymnasium env): observations batched as
gymnasium batches the row space, float32 rewards, terminated and truncated flags, and a
list of one info dict per row. An env is reset in the step that ends it; its rows'
observations are then the next episode's first, and each row's info holds the final one
under `terminal_observation`.

Where SuperSuit asserts as soon as an agent leaves before its env ends (unless the env is
wrapped in `black_death_v3`), the engine carries such an agent's row on as an inactive row
(seedpool/envs/agents/): on the step the agent ends, its row is terminated (or truncated)
with its last observation in `terminal_observation` and zeros as its observation; until its
env ends, the row is zeros with reward 0, as `black_death_v3` gives it; when the env ends,
the row ends with it (so no episode of a row runs from one env episode into the next).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from seedpool.compat.supersuit.copies import FlatSpaces, flat_space, needs_flattening
from seedpool.envs import calls
from seedpool.envs.infos import ENGINE_KEYS

Infos = list[dict[str, Any]]


class Rows:
    """What both faces share: spaces, actions in, observations out, per-env calls."""

    def __init__(self, pool: Any, num_rows: int, per_env: int, obs_space: gym.Space, act_space: gym.Space):
        self.pool = pool
        self.num_rows, self.per_env = num_rows, per_env
        self.obs_space, self.act_space = obs_space, act_space
        self._flat_obs, self._flat_act = needs_flattening(obs_space), needs_flattening(act_space)
        self._act_dtype = flat_space(act_space).dtype

    def actions(self, actions: Any) -> np.ndarray:
        """A row's action each (a list of them, an array, or a batched Dict/Tuple, as
        SuperSuit's `iterate` reads them) as the engine's array."""
        if self._flat_act:
            if isinstance(actions, (dict, tuple)):
                actions = list(iterate(self.act_space, actions))
            return np.stack([gym.spaces.flatten(self.act_space, a) for a in actions]).astype(self._act_dtype)
        if isinstance(self.act_space, gym.spaces.Box):
            return np.asarray(actions, dtype=self.act_space.dtype)
        return np.asarray(actions)

    def observations(self, obs: np.ndarray) -> Any:
        """The rows' observations in the user's space (unflattened where they travelled flat)."""
        if not self._flat_obs:
            return obs
        items = [self.row_observation(o) for o in obs]
        return concatenate(self.obs_space, items, create_empty_array(self.obs_space, len(items)))

    def row_observation(self, row: np.ndarray) -> Any:
        return gym.spaces.unflatten(self.obs_space, row) if self._flat_obs else row

    def send(self, actions: Any) -> None:
        self.pool.send(self.actions(actions))

    def render(self) -> Any:
        """The first env's frame, as SuperSuit renders its vector envs."""
        return self.pool_of_envs().env_call(calls.render, env_ids=[0])[0]

    def env_call(self, fn: Any, *args: Any, rows: Any = None) -> list[Any]:
        """`fn(env, *args)` once for each env the rows `rows` (default all) belong to; the
        result of each row's env, in row order."""
        rows = list(range(self.num_rows)) if rows is None else [int(r) % self.num_rows for r in rows]
        envs = sorted({r // self.per_env for r in rows})
        got = dict(zip(envs, self.pool_of_envs().env_call(fn, *args, env_ids=envs)))
        return [got[r // self.per_env] for r in rows]

    def pool_of_envs(self) -> Any:
        return getattr(self.pool, "engine", self.pool)

    def close(self) -> None:
        self.pool.close()


class AgentRows(Rows):
    """SuperSuit's `pettingzoo_env_to_vec_env_v1` (+ `concat_vec_envs_v1`) rows over an
    `AgentPool` with same-step autoreset."""

    def __init__(self, pool: Any, obs_space: gym.Space, act_space: gym.Space):
        super().__init__(pool, pool.num_rows, pool.num_agents, obs_space, act_space)
        self._active = np.zeros(self.num_rows, bool)  # active in the last observation returned

    def reset(self, seed: Any = None, options: dict | None = None) -> tuple[Any, Infos]:
        obs, info = self.pool.reset(seed=seed, options=options)
        self._active = np.array(info["active"], bool)
        return self.observations(np.array(obs)), _agent_infos(info, self.num_rows)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Infos]:
        obs, rew, term, trunc, info = self.pool.recv()
        obs, term, trunc = np.array(obs), np.array(term, bool), np.array(trunc, bool)
        infos = _agent_infos(info, self.num_rows)
        if (term | trunc).any():
            self._ends(obs, term, trunc, info, infos)
        self._active = np.array(info["active"], bool)
        return self.observations(obs), np.array(rew, np.float32), term, trunc, infos

    def _ends(self, obs: np.ndarray, term: np.ndarray, trunc: np.ndarray, info: dict, infos: Infos) -> None:
        """Rows that ended: `terminal_observation` for each, the observation of an agent that
        left before its env ended set to zeros, and every row of an env that ended done."""
        a = self.per_env
        done = term | trunc
        final = info.get("final_obs")
        # An env ended (and was reset) when each of its rows ended now or had ended before.
        ended = (done | ~self._active).reshape(-1, a).all(axis=1) & done.reshape(-1, a).any(axis=1)
        if final is None:
            ended[:] = False
        env_trunc = trunc.reshape(-1, a).any(axis=1)
        zero = np.zeros(obs.shape[1:], obs.dtype)
        for r in np.flatnonzero(done | np.repeat(ended, a)).tolist():
            e = r // a
            if not ended[e]:  # this agent left; its env goes on
                last = obs[r].copy()
                obs[r] = zero
            elif done[r]:
                last = np.array(final[r])
            else:  # it had left before: its zero rows end with the env
                last = zero
                term[r], trunc[r] = not env_trunc[e], env_trunc[e]
            infos[r]["terminal_observation"] = self.row_observation(last)


class EnvRows(Rows):
    """`concat_vec_envs_v1` of a gymnasium env: one row per env, over an `EnvPool` with
    same-step autoreset; each env's own info entries in its dict."""

    def __init__(self, pool: Any, obs_space: gym.Space, act_space: gym.Space):
        super().__init__(pool, pool.num_envs, 1, obs_space, act_space)

    def reset(self, seed: Any = None, options: dict | None = None) -> tuple[Any, Infos]:
        obs, info = self.pool.reset(seed=seed, options=options)
        return self.observations(np.array(obs)), per_env_infos(info, self.num_rows)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Infos]:
        obs, rew, term, trunc, info = self.pool.recv()
        obs, term, trunc = np.array(obs), np.array(term, bool), np.array(trunc, bool)
        infos = per_env_infos(info, self.num_rows)
        final = info.get("final_info")
        finals = per_env_infos(final, self.num_rows) if final is not None else None
        for r in np.flatnonzero(term | trunc).tolist():
            if finals is not None:  # the last step's entries, not the reset's
                infos[r] = finals[r]
            infos[r]["terminal_observation"] = self.row_observation(np.array(info["final_obs"][r]))
        return self.observations(obs), np.array(rew, np.float32), term, trunc, infos


def _agent_infos(info: dict[str, Any], n: int) -> Infos:
    """Each row's own info dict as the env gave it (a copy; empty where it gave none), as
    SuperSuit's rows carry them."""
    given = info.get("agent_info")
    return [{} for _ in range(n)] if given is None else [dict(d) for d in given]


def per_env_infos(info: dict[str, Any], n: int) -> Infos:
    """A gymnasium-batched info (each `key` with its `_key` mask, dicts batched recursively)
    as one dict per env, without the engine's own entries."""
    out: Infos = [{} for _ in range(n)]
    for key, values in info.items():
        if key in ENGINE_KEYS or key in ("final_info", "_final_info") or (
                isinstance(key, str) and key.startswith("_") and key[1:] in info):
            continue
        mask = info.get(f"_{key}")
        rows = per_env_infos(values, n) if isinstance(values, dict) else list(values)
        for i in range(n):
            if mask is None or mask[i]:
                out[i][key] = rows[i]
    return out


def is_wrapped(env: Any, wrapper_class: type) -> bool:
    """Whether a wrapper of `env` (gymnasium's or PettingZoo's, SuperSuit's and PettingZoo's
    AEC/parallel conversions among them) is a `wrapper_class`; looked up on the env handed
    in, which every env of the vector copies."""
    seen = set()
    while env is not None and id(env) not in seen:
        if isinstance(env, wrapper_class):
            return True
        seen.add(id(env))
        env = _inner(env)
    return False


def _inner(env: Any) -> Any:
    """The env a wrapper wraps (`env`, or `aec_env` for PettingZoo's aec_to_parallel), or None."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    kinds = (gym.Env, AECEnv, ParallelEnv)
    for name in ("env", "aec_env"):
        inner = env.__dict__.get(name) if hasattr(env, "__dict__") else None
        if isinstance(inner, kinds):
            return inner
    return None


# -- the calls SB3's get_attr / set_attr / env_method send (module-level: they pickle by name)
def _user_env(engine_env: Any) -> Any:
    """The copy of the user's env inside the env the engine steps: a PettingZoo env's adapter
    holds it as `env` (seedpool/envs/agents/adapter.py), inside the face's `FlatSpaces` if
    its spaces travel flat; a gymnasium env is the engine's env itself."""
    from seedpool.envs.agents.adapter import ParallelAgentsEnv

    inner = engine_env.unwrapped
    if not isinstance(inner, ParallelAgentsEnv):
        return engine_env
    env = inner.env
    return env.env if isinstance(env, FlatSpaces) else env


def env_attr(engine_env: Any, name: str) -> Any:
    env = _user_env(engine_env)
    return env.get_wrapper_attr(name) if isinstance(env, gym.Env) else getattr(env, name)


def set_env_attr(engine_env: Any, name: str, value: Any) -> None:
    setattr(_user_env(engine_env), name, value)


def env_method(engine_env: Any, name: str, args: tuple, kwargs: dict) -> Any:
    return env_attr(engine_env, name)(*args, **kwargs)
