"""`make_sb3`: the engine as a Stable-Baselines3 `VecEnv` (the `sb3` extra).

SB3 trains on its own `VecEnv` class and refuses Gymnasium `VectorEnv`s. The adapter runs a
synchronous pool with same-step autoreset and puts each batch in SB3's terms:
`dones = terminated | truncated`; one info dict per env holding `TimeLimit.truncated`, and,
on the step an episode ends, `terminal_observation` (the episode's last observation; the
observation returned is already the next episode's first) and `episode = {"r", "l", "t"}`
as SB3's `Monitor` writes it, so SB3's logger shows `ep_rew_mean` without a wrapper. An env
that has its own `Monitor` keeps that Monitor's record (it may sit inside a reward wrapper and
count the raw rewards, as `make_vec_env` + `AtariWrapper` builds it).
"""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as err:
    raise ImportError(
        f"seedpool.make_sb3 needs Stable-Baselines3 ({err}): pip install 'seedpool[sb3]'"
    ) from err

from seedpool.envs import calls
from seedpool.envs.infos import ENGINE_KEYS
from seedpool.envs.make import make
from seedpool.envs.pool import EnvPool

# The pool's own bookkeeping: turned into SB3's keys below, never copied into env infos.
ENGINE_INFO_KEYS = ENGINE_KEYS

class SeedpoolVecEnv(VecEnv):
    """A Stable-Baselines3 VecEnv backed by a synchronous, same-step-autoreset `EnvPool`."""

    def __init__(self, pool: EnvPool):
        if pool.is_async:
            raise ValueError(f"an SB3 VecEnv steps every env each step: batch_size must equal num_envs "
                             f"({pool.num_envs}), got {pool.batch_size}")
        if pool.autoreset != "same_step":
            raise ValueError(f"SB3 resets an env in the step that ends its episode: the pool needs "
                             f"autoreset='same_step', got {pool.autoreset!r}")
        self.pool = pool
        self._t_start = time.time()  # Monitor's clock for info["episode"]["t"]
        # The single-env spaces, as SB3 expects, in copies: the pool seeds its own spaces on
        # reset(seed=...), while SB3 seeds the algorithm's action space itself.
        observation_space = copy.deepcopy(pool.single_observation_space)
        action_space = copy.deepcopy(pool.single_action_space)
        super().__init__(pool.num_envs, observation_space, action_space)

    # -- stepping -------------------------------------------------------------------------
    def reset(self) -> Any:
        """Reset every env, with the seeds of `seed()` and options of `set_options()` if set
        (both are used once, as SB3 specifies)."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        # One options dict per env, an empty one meaning none (as DummyVecEnv passes them).
        resetting = self.pool.start_reset(seed=seeds, env_options=[o or None for o in self._options])
        obs, info = self.pool.finish_reset(resetting)
        self.reset_infos = split_info({k: v for k, v in info.items() if k not in ENGINE_INFO_KEYS}, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Validate the actions and start stepping every env. For Dict and Tuple action spaces,
        as DummyVecEnv indexes them, a sequence of one action per env is taken too."""
        self.pool.send(_batched_actions(self.action_space, actions, self.num_envs))

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """The results of `step_async`: (obs, rewards, dones, infos) in SB3's terms."""
        obs, rewards, terminated, truncated, info = self.pool.recv()
        dones = terminated | truncated
        infos = self._step_infos(info, dones)
        for env_info, cut in zip(infos, (truncated & ~terminated).tolist()):
            env_info["TimeLimit.truncated"] = cut
        if dones.any():
            self._add_episode_ends(infos, obs, info, np.flatnonzero(dones).tolist())
        return obs, rewards, dones, infos

    def _step_infos(self, info: dict[str, Any], dones: np.ndarray) -> list[dict[str, Any]]:
        """One dict per env with its step's info entries, as DummyVecEnv gives them.

        After a same-step autoreset the pool holds, gymnasium's way, the reset's entries at
        the top and the last step's under `final_info`; SB3 wants the last step's in the
        step's info and the reset's in `reset_infos`. Declared keys (no `_key` mask) keep
        the last step's values.
        """
        every, latest, final = _partition(info)
        infos = split_info(every, self.num_envs)
        if not latest and final is None:  # no env returned undeclared entries (the common case)
            return infos
        latest_infos = split_info(latest, self.num_envs)
        final_infos = split_info(final, self.num_envs) if final is not None else latest_infos
        for i, done in enumerate(dones.tolist()):
            if done:
                infos[i].update(final_infos[i])
                self.reset_infos[i] = latest_infos[i]
            else:
                infos[i].update(latest_infos[i])
        return infos

    def _add_episode_ends(self, infos: list[dict[str, Any]], obs: Any, info: dict[str, Any], ended: list[int]) -> None:
        """`terminal_observation` and Monitor's `episode` record for each env in `ended`."""
        t = round(time.time() - self._t_start, 6)
        restarted = info.get("restarted")
        for i in ended:
            if restarted is not None and restarted[i]:
                # A replaced worker's env (on_worker_death="restart"): its episode was cut short
                # and its last observation is lost, so neither it nor episode stats exist.
                infos[i]["terminal_observation"] = _row(obs, i)
                infos[i]["restarted"] = True
                continue
            infos[i]["terminal_observation"] = _row(info["final_obs"], i)
            if "episode" not in infos[i]:  # an env's own Monitor record wins: it may count raw rewards
                infos[i]["episode"] = {"r": round(float(info["episode_return"][i]), 6),
                                       "l": int(info["episode_length"][i]), "t": t}

    def close(self) -> None:
        """Stop the engine's workers and close the envs; safe to call twice."""
        self.pool.close()

    # -- per-env access: run where each env lives (see seedpool/envs/calls.py) --------------
    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        """Each target env's attribute, looked up through its wrappers."""
        return self.pool.env_call(calls.get_attr, attr_name, env_ids=self._ids(indices))

    def has_attr(self, attr_name: str) -> bool:
        """Whether every env has the attribute (asked where the env lives: nothing is pickled
        but the answer, so it also works for attributes that cannot leave a worker process)."""
        return all(self.pool.env_call(calls.has_attr, attr_name))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Set the attribute on each target env (its outermost wrapper, as DummyVecEnv does)."""
        self.pool.env_call(calls.set_plain_attr, attr_name, value, env_ids=self._ids(indices))

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        """Call a method of each target env (found through its wrappers); the results in order."""
        return self.pool.env_call(calls.call_method, method_name, method_args, method_kwargs,
                                  env_ids=self._ids(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """Whether each target env has a wrapper of `wrapper_class` (as DummyVecEnv answers)."""
        return self.pool.env_call(calls.is_wrapped, wrapper_class, env_ids=self._ids(indices))

    @property
    def envs(self) -> list[Any]:
        """The env objects, as DummyVecEnv's ``envs`` list: with ``backend="serial"`` only, where
        every env lives in this process (elsewhere use get_attr / set_attr / env_method)."""
        envs = self.pool.in_process_envs()
        if envs is None:
            raise AttributeError(f"envs: the env objects live in worker threads or processes ({self.pool.backend} "
                                 "backend); reach them with get_attr/set_attr/env_method, or make the VecEnv "
                                 "with backend='serial' to hold them here as DummyVecEnv does")
        return envs

    def get_images(self) -> list[np.ndarray | None]:
        """Each env's frame (render_mode='rgb_array'); VecEnv.render() tiles them."""
        if self.render_mode != "rgb_array":
            warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it is "
                          "`rgb_array` to obtain images.")
            return [None] * self.num_envs
        return self.pool.env_call(calls.render)

    def _ids(self, indices: Any) -> list[int]:
        """The env ids SB3's `indices` (None, an int or an iterable; negative ones count from
        the end, as DummyVecEnv's list indexing does) name, checked."""
        ids = [int(i) for i in self._get_indices(indices)]
        bad = [i for i in ids if not -self.num_envs <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range for {self.num_envs} envs")
        return [i % self.num_envs for i in ids]

    def __repr__(self) -> str:
        return f"SeedpoolVecEnv({self.pool!r})"


def _batched_actions(space: Any, actions: Any, n: int) -> Any:
    """SB3's per-env list of Dict/Tuple actions (`actions[i]` is env i's, as DummyVecEnv steps
    them) as the engine's batch; anything else as it came (the engine validates it)."""
    if isinstance(space, gym.spaces.Dict):
        per_env = not isinstance(actions, dict)
    elif isinstance(space, gym.spaces.Tuple):
        per_env = isinstance(actions, (list, tuple)) and len(actions) == n and all(
            isinstance(a, tuple) for a in actions)
    else:
        return actions
    if not per_env or len(actions) != n:
        return actions
    return gym.vector.utils.concatenate(space, list(actions), gym.vector.utils.create_empty_array(space, n))


def _is_masked(key: Any, info: dict[str, Any]) -> bool:
    """Whether `key` is one of gymnasium's batched entries: a `key` with its `_key` mask, or the mask."""
    return isinstance(key, str) and (f"_{key}" in info or (key.startswith("_") and key[1:] in info))


def _partition(info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """The pool's step info, less its bookkeeping, as (declared entries, every env's row;
    undeclared entries with their masks; the batched `final_info` or None)."""
    declared: dict[str, Any] = {}
    undeclared: dict[str, Any] = {}
    for key, values in info.items():
        if key not in ENGINE_INFO_KEYS:
            (undeclared if _is_masked(key, info) else declared)[key] = values
    undeclared.pop("_final_info", None)
    return declared, undeclared, undeclared.pop("final_info", None)


def split_info(info: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Batched info as one dict per env.

    Entries batched as gymnasium batches them (a `_key` mask saying which envs returned
    `key`; dicts batched recursively) go only to the envs that returned them; entries
    without a mask (the engine's declared info keys) go to every env.
    """
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, values in info.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in info:
            continue  # a mask
        mask = info.get(f"_{key}")
        per_env = split_info(values, n) if isinstance(values, dict) else _per_env(values)
        for i, (env_info, value) in enumerate(zip(out, per_env)):
            if mask is None or mask[i]:
                env_info[key] = value
    return out


def _per_env(values: Any) -> list[Any]:
    """A batch of info values split per env: Python scalars for a flat numeric array."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.tolist()
    return list(values)


def _row(tree: Any, i: int) -> Any:
    """Env i's element of a batched observation (an array, or a dict/tuple nesting of them)."""
    if isinstance(tree, dict):
        return {k: _row(v, i) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(v, i) for v in tree)
    return tree[i]


def make_sb3(task_or_env_fns: Any, num_envs: int | None = None, **options: Any) -> SeedpoolVecEnv:
    """`seedpool.make(...)` as a Stable-Baselines3 VecEnv: synchronous, same-step autoreset.

    `task_or_env_fns`: what `seedpool.make` takes: a registered or Gymnasium id, one
    zero-argument env factory for every env, or a list of them (one per env, as SB3's
    `DummyVecEnv(env_fns)` takes it). `num_envs`: default 1, or the list's length.
    `options` go to `seedpool.make` (`seed`, `backend`, `num_workers`, `max_episode_steps`,
    task options such as Atari's). Seeding is SB3's: by default (`seed=None`) the envs are
    unseeded until `seed(s)` before a `reset()`; `seed=s` seeds the first reset as
    `seedpool.make` does, and SB3's `seed()` replaces it at the next `reset()`.
    """
    options.setdefault("seed", None)
    if options.setdefault("autoreset", "same_step") != "same_step":
        raise ValueError(f"SB3 resets an env in the step that ends its episode: autoreset must be "
                         f"'same_step' (the default here), got {options['autoreset']!r}")
    if num_envs is not None:
        options["num_envs"] = num_envs
    pool = make(task_or_env_fns, **options)
    try:
        return SeedpoolVecEnv(pool)
    except BaseException:
        pool.close()
        raise


__all__ = ["make_sb3", "SeedpoolVecEnv", "split_info", "ENGINE_INFO_KEYS"]
