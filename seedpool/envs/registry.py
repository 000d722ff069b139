"""Task registry: ids that seedpool builds itself (Atari), with their default options.

Families register by import path so that importing seedpool does not import ale-py.
Any id not registered here is handed to `gymnasium.make`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable


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


_FAMILIES: list[Family] = [
    Family(
        name="atari",
        ids="seedpool.envs.atari.registration:atari_ids",
        factory="seedpool.envs.atari.registration:make_atari",
        time_limit_option="max_episode_steps",
    ),
    # Listed without minatar installed (the ids need no import), so a missing package is
    # reported by the factory with the install command, not as an unknown gymnasium id.
    # Pure-Python steps hold the GIL but cost only microseconds: the engine's auto layout
    # measures them (serial for small batches, processes for large), as for CartPole.
    Family(
        name="minatar",
        ids="seedpool.envs.minatar:minatar_ids",
        factory="seedpool.envs.minatar:make_minatar",
        prefer_processes=False,
    ),
]
_ID_CACHE: dict[str, Family] | None = None


def _load(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def register_family(family: Family) -> None:
    """Add a family of ids (e.g. a user's own suite) to the registry."""
    global _ID_CACHE
    _FAMILIES.append(family)
    _ID_CACHE = None


def _index() -> dict[str, Family]:
    global _ID_CACHE
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
