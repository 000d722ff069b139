"""`concat_vec_envs_v1(..., base_class="stable_baselines3")`: SuperSuit's rows as an SB3 VecEnv.

As SuperSuit's SB3VecEnvWrapper: `reset()` returns observations only, `step_wait()`
(observations, rewards, dones = terminated | truncated, infos), `render()` the first env's
frame. Unlike it, `seed(s)` works (env i is reset with s + i at the next `reset()`, as the
gymnasium face's `reset(seed=s)`), and each row's info holds `TimeLimit.truncated`, as SB3's
own VecEnvs write it (its algorithms bootstrap truncated episodes from it).
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as err:
    raise ImportError(f"base_class='stable_baselines3' needs Stable-Baselines3 ({err}): "
                      "pip install 'seedpool[sb3]'") from err

from seedpool.compat.supersuit.rows import Rows, env_attr, env_method, is_wrapped, set_env_attr
from seedpool.compat.supersuit.vector import Source
from seedpool.envs import calls


class SuperSuitSB3VecEnv(VecEnv):
    """SuperSuit's vector env on the engine, as a Stable-Baselines3 VecEnv."""

    def __init__(self, source: Source):
        self.source = source
        self.rows: Rows = source.build()
        try:
            super().__init__(source.num_rows, copy.deepcopy(source.obs_space), copy.deepcopy(source.act_space))
        except BaseException:
            self.rows.close()
            raise

    @property
    def par_env(self) -> Any:
        """The env handed in (never stepped: the vector steps copies of it)."""
        return self.source.env

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seeds for the next `reset()`: env i gets seed + i (its rows report that seed)."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + r // self.source.per_env for r in range(self.num_envs)]
        return self._seeds

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        """Observations of every row (infos in `reset_infos`), with the seeds of `seed()` and
        the options of `set_options()` (env 0's, for every env) if set; both used once."""
        if seed is not None:
            self.seed(seed)
        per_env = self.source.per_env
        seeds = None if self._seeds[0] is None else [s for s in self._seeds[::per_env]]
        options = options if options is not None else (self._options[0] or None)
        obs, self.reset_infos = self.rows.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self.rows.send(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        obs, rewards, terminated, truncated, infos = self.rows.recv()
        for info, cut in zip(infos, (truncated & ~terminated).tolist()):
            info["TimeLimit.truncated"] = cut
        return obs, rewards, terminated | truncated, infos

    def render(self, mode: str | None = None) -> Any:
        """The first env's frame, as SuperSuit renders (the env's render_mode decides what)."""
        return self.rows.render()

    def get_images(self) -> list[Any]:
        return self.rows.env_call(calls.render)

    def close(self) -> None:
        self.rows.close()

    # -- per-row access: each row reaches its env's PettingZoo (or gymnasium) env ----------
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "render_mode":  # asked by VecEnv.__init__; SuperSuit answers per row too
            return [self.source.render_mode] * len(self._get_indices(indices))
        return self.rows.env_call(env_attr, attr_name, rows=self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        self.rows.env_call(set_env_attr, attr_name, value, rows=self._get_indices(indices))

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        return self.rows.env_call(env_method, method_name, method_args, method_kwargs, rows=self._get_indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [is_wrapped(self.source.env, wrapper_class)] * len(self._get_indices(indices))

    def __repr__(self) -> str:
        return f"SuperSuitSB3VecEnv({self.num_envs} rows, {self.rows.pool!r})"
