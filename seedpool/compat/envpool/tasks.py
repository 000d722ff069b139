"""Which seedpool task builds each EnvPool id, under the EnvPool names.

Most EnvPool ids are gymnasium's (or seedpool's own families') and pass through. The ones
gymnasium does not build as EnvPool does are in one table, seedpool/envs/envpool_ids/
(aliases, EnvPool's toy tasks, its MuJoCo v2/v3 ids), which `seedpool.make` reads too; here
they get EnvPool's time limit counted by the engine and the options as given in the pool's
`config`. Only the face gives EnvPool's `Blackjack-v1` (gymnasium has that id too), and
EnvPool's MuJoCo `frame_stack` and model files (`xml_file="half_cheetah_envpool.xml"`) for
gymnasium's own MuJoCo ids.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym

from seedpool.envs.envpool_ids.mujoco import ASSETS, LEGACY
from seedpool.envs.envpool_ids.table import ALIASES, MUJOCO, OWN, build, is_mujoco, time_limit
from seedpool.envs.make import make as make_pool
from seedpool.envs.spec import Task

__all__ = ["ALIASES", "ASSETS", "MUJOCO", "OWN", "Factory", "is_mujoco", "task_of"]

# seedpool.make's own arguments and EnvPool's engine options: the rest are the task's.
_POOL_OPTIONS = frozenset(
    name for name, p in inspect.signature(make_pool).parameters.items()
    if p.kind is not inspect.Parameter.VAR_KEYWORD and name != "task"
) | {"env_type", "num_threads", "thread_affinity_offset", "gym_reset_return_info"}


@dataclass(frozen=True)
class Factory:
    """A zero-argument env factory with the task's options bound, named by EnvPool's id
    (seedpool names a pool's task after its factory); `shown`: the EnvPool options as the
    caller gave them, for the pool's `config`. Picklable for worker processes."""

    name: str
    build: Callable[..., gym.Env]
    options: dict[str, Any] = field(default_factory=dict)
    shown: dict[str, Any] = field(default_factory=dict)

    @property
    def __name__(self) -> str:  # noqa: A003 - what seedpool reads a factory's name from
        return self.name

    def __call__(self) -> gym.Env:
        return self.build(**self.options)


def task_of(task_id: str, options: dict[str, Any]) -> tuple[Task, dict[str, Any]]:
    """The task seedpool.make builds for EnvPool's `task_id`, and the options left for it
    (a new dict; the caller's is not changed)."""
    options = dict(options)
    if task_id in ALIASES:
        return ALIASES[task_id], options
    mujoco = is_mujoco(task_id) and (task_id in LEGACY or "frame_stack" in options
                                     or options.get("xml_file") in ASSETS)
    if task_id not in OWN and not mujoco:
        return task_id, options
    task_options = {k: options.pop(k) for k in list(options) if k not in _POOL_OPTIONS}
    shown = {"frame_stack": 1, **task_options} if mujoco else task_options
    options.setdefault("max_episode_steps", time_limit(task_id))
    return Factory(task_id, build, {"task_id": task_id, **task_options}, shown), options
