"""A native pool's TaskSpec: whether `make` runs a task natively, and with what.

A registered id (seedpool/envs/registry.py: gymnasium's classic control ids, MinAtar's,
MuJoCo's, or one a user registers) runs natively when `make(..., native=None)` (the
default) can: backend "auto", and only options the family takes. `native=False` keeps the
Python-env path (gymnasium's own envs, any backend); `native=True` insists, with an error
saying why it cannot be. A `NativeEnv` subclass given as the task always runs natively.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import gymnasium as gym

from seedpool.envs import registry, spaces
from seedpool.envs.errors import EnvPoolError
from seedpool.envs.native.base import NativeEnv
from seedpool.envs.spec import TaskSpec

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
# By default only "auto" is native: a backend named explicitly asks for env objects stepped
# that way (SB3's `venv.envs` with "serial"); native=True also accepts "serial" (in-process).
_NATIVE_BACKENDS = ("auto", "serial")


def family_options(cls: type[NativeEnv]) -> set[str]:
    """The options a family's constructor takes besides `num_envs`."""
    params = list(inspect.signature(cls.__init__).parameters.values())[2:]  # self, num_envs
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def native_spec(task: Any, native: bool | None, backend: str, num_envs: int, max_episode_steps: int | None,
                info_keys: dict[str, Any] | None, options: dict[str, Any]) -> TaskSpec | None:
    """The TaskSpec of a native pool of `task`, or None for the Python-env path."""
    if native not in (None, True, False):
        raise ValueError(f"native must be None (native where possible), True or False, got {native!r}")
    if isinstance(task, type) and issubclass(task, NativeEnv):
        if native is False:
            raise ValueError(f"{task.__name__} is a native family: it has no Python-env path (native=False)")
        why = _cannot(task, backend, info_keys, options)
        if why:
            raise ValueError(f"{task.__name__} cannot run: {why}")
        return _spec(task.__name__, task, num_envs, max_episode_steps, options)
    registered = registry.has_native(task)
    if native is False or (native is None and not registered):
        return None
    if not registered:
        raise ValueError(f"native=True, but {task!r} has no native family; native ids: {registry.native_ids()}")
    try:
        cls = registry.family_class(task)
    except (ImportError, gym.error.DependencyNotInstalled) as err:  # a package the family needs is missing
        # (mujoco, or a mujoco without its C library, for the MuJoCo families): gymnasium's envs, or their error
        if native:
            raise ValueError(f"native=True, but {task}'s native family cannot be imported: {err}") from err
        return None
    why = _cannot(cls, backend, info_keys, options)
    if native is None and (backend != "auto" or num_envs < cls.native_from):
        return None
    if why:
        if native:
            raise ValueError(f"native=True, but {task} cannot run natively: {why}")
        return None
    return _spec(task, cls, num_envs, max_episode_steps, options)


def _cannot(cls: type[NativeEnv], backend: str, info_keys: Any, options: dict[str, Any]) -> str | None:
    """Why the family cannot serve this make() call, or None."""
    if backend not in _NATIVE_BACKENDS:
        return (f"a native family steps all its envs in the pool's process (backend 'auto' or 'serial'), "
                f"not backend={backend!r}")
    unknown = sorted(set(options) - family_options(cls))
    if unknown:
        return f"it takes the options {sorted(family_options(cls))}, not {unknown}"
    if info_keys:
        return "a native family returns no info entries (info_keys)"
    return None


def _no_env_objects() -> gym.Env:
    raise EnvPoolError("a native family has no single-env objects; make the pool with native=False for them")


def _spec(name: str, cls: type[NativeEnv], num_envs: int, max_episode_steps: int | None,
          options: dict[str, Any]) -> TaskSpec:
    family = cls(num_envs, **options)
    for what in ("observation", "action"):
        space = getattr(family, f"single_{what}_space", None)
        # An observation may also be a Dict or Tuple of them (a row of each leaf per env).
        parts = spaces.leaves(space) if what == "observation" and isinstance(space, spaces.COMPOSITE) else [((), space)]
        if not parts or not all(isinstance(s, _ARRAY_SPACES) for _, s in parts):
            raise TypeError(f"{cls.__name__}.single_{what}_space must be one of "
                            f"{[s.__name__ for s in _ARRAY_SPACES]} (one array row per env)"
                            f"{', or for observations a Dict or Tuple of them' if what == 'observation' else ''}, "
                            f"got {space!r}")
    limit = family.max_episode_steps if max_episode_steps is None else max_episode_steps
    if limit is not None and limit <= 0:
        raise ValueError(f"max_episode_steps must be positive, got {limit}")
    family.max_episode_steps = limit  # the pool's time limit, which a family may read (MiniGrid's reward)
    return TaskSpec(
        name=name,
        env_fn=_no_env_objects,
        # The pool seeds and hands out its spaces: copies, never the family's own objects.
        observation_space=copy.deepcopy(family.single_observation_space),
        action_space=copy.deepcopy(family.single_action_space),
        max_episode_steps=limit,
        metadata=dict(family.metadata),
        native=family,
    )
