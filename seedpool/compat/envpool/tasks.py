"""Which seedpool task builds each EnvPool id, under the EnvPool names only.

Most EnvPool ids are gymnasium's (or seedpool's Atari) and pass through. The others:
- ids EnvPool registers as aliases of its own tasks, or that gymnasium 1.4 renamed, map
  to the gymnasium id with the same dynamics (ALIASES, each with its evidence);
- EnvPool's own toy tasks (Catch-v0, NChain-v0) and its Blackjack observation are built
  by seedpool/compat/envpool/toy.py;
- EnvPool's MuJoCo `frame_stack` option stacks the last observations (gymnasium's
  FrameStackObservation, which repeats the first observation after a reset, as EnvPool),
  and its MuJoCo model files (`xml_file="half_cheetah_envpool.xml"`) are gymnasium's (ASSETS).
`seedpool.make` knows none of this: it keeps gymnasium's ids and spaces.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym

from seedpool.compat.envpool.toy import CatchEnv, NChainEnv, make_blackjack
from seedpool.envs.make import make as make_pool
from seedpool.envs.spec import Task, peel
from seedpool.errors import ConfigError, UnknownEnvError

# EnvPool id -> the gymnasium id that steps the same.
ALIASES: dict[str, str] = {
    # EnvPool registers these as aliases of its own CartPole and Pendulum (classic_control/registration.py).
    "phys2d/CartPole-v0": "CartPole-v0",
    "phys2d/CartPole-v1": "CartPole-v1",
    "phys2d/Pendulum-v0": "Pendulum-v1",
    # EnvPool's Pendulum-v0 and -v1 give identical steps (tests/test_envpool_tasks.py compares
    # them on envpool 1.2.5); gymnasium's v1 only "simplified the math, no difference in behavior".
    "Pendulum-v0": "Pendulum-v1",
    # Gymnasium's v4 changed only the is_rainy / fickle_passenger variants, off by default.
    "Taxi-v3": "Taxi-v4",
    # Gymnasium's v1 added is_slippery, off by default; EnvPool aliases tabular/ to its v1.
    "CliffWalking-v0": "CliffWalking-v1",
    "tabular/CliffWalking-v0": "CliffWalking-v1",
    # EnvPool registers each v2 id as the same task as its v3 (box2d/registration.py).
    "CarRacing-v2": "CarRacing-v3",
    "LunarLander-v2": "LunarLander-v3",
    "LunarLanderContinuous-v2": "LunarLanderContinuous-v3",
}


@dataclass(frozen=True)
class Own:
    """A task seedpool builds for an EnvPool id: its factory and EnvPool's time limit."""

    build: Callable[..., gym.Env]
    max_episode_steps: int | None = None


OWN: dict[str, Own] = {
    "Catch-v0": Own(CatchEnv),
    "NChain-v0": Own(NChainEnv, 1000),
    "Blackjack-v1": Own(make_blackjack),
    "tabular/Blackjack-v0": Own(make_blackjack),  # EnvPool: an alias of its Blackjack-v1
}

# EnvPool's MuJoCo (gym) tasks and their time limits (install.py builds its `gym_mujoco_envs` table).
MUJOCO = (("Ant", 1000), ("HalfCheetah", 1000), ("Hopper", 1000), ("Humanoid", 1000),
          ("HumanoidStandup", 1000), ("InvertedDoublePendulum", 1000), ("InvertedPendulum", 1000),
          ("Pusher", 100), ("Reacher", 50), ("Swimmer", 1000), ("Walker2d", 1000))
_MUJOCO_TASKS = {task for task, _ in MUJOCO}

# seedpool.make's own arguments and EnvPool's engine options: the rest are the task's.
_POOL_OPTIONS = frozenset(
    name for name, p in inspect.signature(make_pool).parameters.items()
    if p.kind is not inspect.Parameter.VAR_KEYWORD and name != "task"
) | {"env_type", "num_threads", "thread_affinity_offset", "gym_reset_return_info"}


# EnvPool's MuJoCo model files (envpool-assets' mujoco/assets_gym) -> gymnasium's file with
# the same model: the same XML but for comments and spacing (tests/test_envpool_tasks.py
# compares them where envpool is installed). Other xml_file values go to gymnasium as given.
ASSETS: dict[str, str] = {
    f"{name}_envpool.xml": f"{name}.xml"
    for name in ("ant", "half_cheetah", "hopper", "humanoid", "humanoidstandup", "inverted_double_pendulum",
                 "inverted_pendulum", "pusher", "pusher_v5", "reacher", "swimmer", "walker2d", "walker2d_v5")
}


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


def is_mujoco(task_id: str) -> bool:
    """Whether `task_id` is one of EnvPool's MuJoCo (gym) tasks."""
    return task_id.rpartition("-v")[0] in _MUJOCO_TASKS


def task_of(task_id: str, options: dict[str, Any]) -> tuple[Task, dict[str, Any]]:
    """The task seedpool.make builds for EnvPool's `task_id`, and the options left for it
    (a new dict; the caller's is not changed). A ValueError for a bad `frame_stack`."""
    options = dict(options)
    if task_id in ALIASES:
        return ALIASES[task_id], options
    own = OWN.get(task_id)
    if own is not None:
        task_options = _task_options(options)
        if own.max_episode_steps is not None:
            options.setdefault("max_episode_steps", own.max_episode_steps)
        return Factory(task_id, own.build, task_options, task_options), options
    if not is_mujoco(task_id) or ("frame_stack" not in options and options.get("xml_file") not in ASSETS):
        return task_id, options
    shown = {"frame_stack": options.pop("frame_stack", 1)}
    frames = shown["frame_stack"]
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise ConfigError(f"frame_stack must be an int >= 1, got {frames!r}")
    task_options = _task_options(options)
    shown.update(task_options)
    if task_options.get("xml_file") in ASSETS:
        task_options["xml_file"] = ASSETS[task_options["xml_file"]]
    try:
        registered = gym.spec(task_id)
    except gym.error.Error as err:
        raise UnknownEnvError(f"unknown task id {task_id!r} ({err})") from None
    options.setdefault("max_episode_steps", registered.max_episode_steps)
    return Factory(task_id, _mujoco, {"task_id": task_id, "frames": frames, "options": task_options}, shown), options


def _task_options(options: dict[str, Any]) -> dict[str, Any]:
    """Remove and return the task's own options (those that are not seedpool.make's or
    EnvPool's engine options)."""
    return {k: options.pop(k) for k in list(options) if k not in _POOL_OPTIONS}


def _mujoco(task_id: str, frames: int, options: dict[str, Any]) -> gym.Env:
    """Gymnasium's `task_id` (its time limit left to the engine), with the last `frames`
    observations stacked on a new leading axis where `frames` > 1."""
    env = peel(gym.make(task_id, disable_env_checker=True, **options))[0]
    return gym.wrappers.FrameStackObservation(env, frames) if frames > 1 else env
