"""The registry of task ids: the one list of what seedpool builds itself, and how.

Two kinds of entries. A *Python-env family* (`Family`: Atari, MinAtar's games over the
`minatar` package) builds one gymnasium env per id through a factory; a *native family*
(`register_native`: classic control, MinAtar, MuJoCo) steps every env of a pool in one call.
An id may have both (MinAtar): `make(..., native=False)` then takes the Python-env family.
Any id with neither is handed to `gymnasium.make`.

Each family of seedpool's own registers its ids in its folder's `registration.py`
(seedpool/envs/families/<family>/), loaded on the first lookup; `families.FAMILIES` lists
them. Entries name their code by "module:attribute" paths, imported on use, so that looking
an id up imports neither ale-py nor minatar nor mujoco.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from seedpool.envs.families import FAMILIES
from seedpool.envs.native.base import NativeEnv


@dataclass(frozen=True)
class Family:
    """A family of task ids built by one factory, e.g. every Atari game."""

    name: str
    ids: str  # "module:function" returning the list of ids
    factory: str  # "module:function(task_id, **options) -> gymnasium.Env"
    # What the engine should know without building an env.
    prefer_processes: bool = True  # steps hold the GIL (ale-py does)
    defaults: dict[str, Any] = field(default_factory=dict)
    # The option under which the family's envs count make()'s max_episode_steps themselves
    # (Atari: a game's steps across lives, as EnvPool); None: the engine counts it.
    time_limit_option: str | None = None


_FAMILIES: list[Family] = []
# Task id -> "module:Class" of its native family (imported on first use).
_NATIVE: dict[str, str] = {}
_LOADED = False
_ID_CACHE: dict[str, Family] | None = None


def _load(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _load_families() -> None:
    """Run each of seedpool's families' registration.py, once (before any other entry, so
    that an id a user registers again replaces seedpool's)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        for name in FAMILIES:
            importlib.import_module(f"seedpool.envs.families.{name}.registration")


def register_family(family: Family) -> None:
    """Add a family of ids (e.g. a user's own suite) to the registry."""
    global _ID_CACHE
    _load_families()
    _FAMILIES.append(family)
    _ID_CACHE = None


def register_native(task_id: str, family: type[NativeEnv] | str) -> None:
    """Run `task_id` with a native family: a `NativeEnv` subclass or its "module:Class" path."""
    if isinstance(family, type) and not issubclass(family, NativeEnv):
        raise TypeError(f"a native family must subclass seedpool.envs.native.NativeEnv, got {family.__name__}")
    _load_families()
    _NATIVE[task_id] = family if isinstance(family, str) else f"{family.__module__}:{family.__qualname__}"


def native_ids() -> list[str]:
    """Every task id that has a native family."""
    _load_families()
    return sorted(_NATIVE)


def has_native(task_id: Any) -> bool:
    """Whether `task_id` is a registered id with a native family."""
    _load_families()
    return isinstance(task_id, str) and task_id in _NATIVE


def family_class(task_id: str) -> type[NativeEnv]:
    """The native family class of a registered id."""
    _load_families()
    return _load(_NATIVE[task_id])


def _index() -> dict[str, Family]:
    global _ID_CACHE
    _load_families()
    if _ID_CACHE is None:
        index: dict[str, Family] = {}
        for fam in _FAMILIES:
            try:
                ids = _load(fam.ids)()
            except ImportError:  # optional family whose dependency is missing
                continue
            for task_id in ids:
                index[task_id] = fam
        _ID_CACHE = index
    return _ID_CACHE


def find(task_id: str) -> Family | None:
    """The family that builds `task_id`, or None for a plain gymnasium id."""
    return _index().get(task_id)


def registered_ids() -> list[str]:
    """Every id seedpool builds itself."""
    return sorted(_index())


def family_factory(family: Family) -> Callable[..., Any]:
    """The factory function of a family."""
    return _load(family.factory)


def is_atari(task_id: str) -> bool:
    """Ids that seedpool builds as Atari (Pong-v5, ...) or gymnasium's ALE/ ids."""
    family = find(task_id)
    return task_id.startswith("ALE/") or (family is not None and family.name == "atari")


def is_mujoco(task_id: str) -> bool:
    """Gymnasium's MuJoCo tasks (HalfCheetah-v5, Hopper-v5, Ant-v5, ...): registered without mujoco installed."""
    import gymnasium as gym

    spec = gym.registry.get(task_id)
    entry = spec.entry_point if spec is not None else None
    return isinstance(entry, str) and entry.startswith("gymnasium.envs.mujoco")
