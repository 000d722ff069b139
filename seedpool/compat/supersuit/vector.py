"""SuperSuit's vector constructors on seedpool's engine, with gymnasium's VectorEnv as base.

`SuperSuitVecEnv` is what `pettingzoo_env_to_vec_env_v1` and `concat_vec_envs_v1(...,
base_class="gymnasium")` return: SuperSuit's API (rows.py for what each call returns),
with `observation_space` and `action_space` a single row's, as SuperSuit has them (also as
`single_observation_space` / `single_action_space`).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from seedpool.compat.supersuit.copies import EnvCopies, needs_flattening, pickled
from seedpool.compat.supersuit.rows import AgentRows, EnvRows, Rows, is_wrapped
from seedpool.envs.make import make


class Source:
    """What a vector is built from: the env handed in (never stepped), how many copies of it,
    and where the engine steps them."""

    def __init__(self, env: Any, copies: int = 1, backend: str = "serial", num_workers: int | None = None):
        self.env = env
        self.copies, self.backend, self.num_workers = copies, backend, num_workers
        self.multiagent = isinstance(env, ParallelEnv)
        if self.multiagent:
            agent = env.possible_agents[0]
            self.obs_space, self.act_space = env.observation_space(agent), env.action_space(agent)
            self.per_env = len(env.possible_agents)
        else:
            self.obs_space, self.act_space = env.observation_space, env.action_space
            self.per_env = 1
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(getattr(env, "unwrapped", env), "render_mode", None)

    def with_copies(self, copies: int, backend: str, num_workers: int | None) -> "Source":
        return Source(self.env, copies, backend, num_workers)

    def build(self) -> Rows:
        """The engine's pool of copies (same-step autoreset, unseeded until reset(seed=...))."""
        flat = needs_flattening(self.obs_space) or needs_flattening(self.act_space)
        name = self.metadata.get("name") or type(self.env).__name__
        factory = EnvCopies(pickled(self.env), str(name), *((self.obs_space, self.act_space) if flat else ()))
        if flat and not self.multiagent:
            raise TypeError(f"concat_vec_envs_v1 of a gymnasium env with {self.obs_space} / {self.act_space}: "
                            "the face flattens such spaces for PettingZoo envs only; wrap the env in "
                            "gymnasium.wrappers.FlattenObservation")
        pool = make(factory, num_envs=self.copies, backend=self.backend, num_workers=self.num_workers,
                    seed=None, autoreset="same_step")
        rows = AgentRows if self.multiagent else EnvRows
        try:
            return rows(pool, copy.deepcopy(self.obs_space), copy.deepcopy(self.act_space))
        except BaseException:
            pool.close()
            raise

    @property
    def num_rows(self) -> int:
        return self.copies * self.per_env


class SuperSuitVecEnv(gym.vector.VectorEnv):
    """SuperSuit's vector env (MarkovVectorEnv, ConcatVecEnv, ProcConcatVec) on the engine."""

    def __init__(self, source: Source, build: bool = True):
        self.source = source
        self.num_envs = source.num_rows
        # The row spaces, copies: sampling them must not move the RNG of the user's env's spaces.
        self.observation_space = self.single_observation_space = copy.deepcopy(source.obs_space)
        self.action_space = self.single_action_space = copy.deepcopy(source.act_space)
        self.metadata = source.metadata
        self.render_mode = source.render_mode
        self._rows: Rows | None = source.build() if build else None
        self._actions: Any = None

    @property
    def par_env(self) -> Any:
        """The PettingZoo env handed in (SuperSuit's attribute). The vector steps copies of it:
        this one is never stepped."""
        return self.source.env

    @property
    def rows(self) -> Rows:
        """The engine's rows, built on first use (a vector only handed to
        `concat_vec_envs_v1` never starts one)."""
        if self._rows is None:
            self._rows = self.source.build()
        return self._rows

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[Any, list[dict]]:
        """(observations, one info dict per row); with `seed`, env i is reset with seed + i."""
        return self.rows.reset(seed=seed, options=options)

    def step_async(self, actions: Any) -> None:
        self.rows.send(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        return self.rows.recv()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """One action per row; (observations, rewards, terminated, truncated, infos)."""
        self.step_async(actions)
        return self.step_wait()

    def render(self) -> Any:
        """The first env's frame (its `render()`), as SuperSuit renders."""
        return self.rows.render()

    def env_is_wrapped(self, wrapper_class: type) -> list[bool]:
        """Per row, whether its env has a wrapper of `wrapper_class`."""
        return [is_wrapped(self.source.env, wrapper_class)] * self.num_envs

    def close_extras(self, **kwargs: Any) -> None:
        if self._rows is not None:
            self._rows.close()

    def __repr__(self) -> str:
        pool = self._rows.pool if self._rows is not None else "not started"
        return f"SuperSuitVecEnv({self.num_envs} rows, {pool!r})"


def engine_layout(num_vec_envs: int, num_cpus: int, backend: str | None) -> tuple[str, int | None]:
    """SuperSuit's `num_cpus` as the engine's backend and workers: 0 or 1 step every env in
    this process (SuperSuit's ConcatVecEnv), more start that many worker processes."""
    num_cpus = min(int(num_cpus), num_vec_envs)
    if backend is not None:
        return backend, (num_cpus if num_cpus > 1 else None)
    return ("serial", None) if num_cpus <= 1 else ("process", num_cpus)


__all__ = ["SuperSuitVecEnv", "Source", "engine_layout"]
