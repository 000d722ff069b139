"""The one table of EnvPool's ids that gymnasium does not build as EnvPool does: read by
`seedpool.make` (two Python-env families over it, registered in
seedpool/envs/families/classic/ and mujoco/registration.py) and by the EnvPool face
(seedpool/compat/envpool/tasks.py).

- ids EnvPool registers as aliases of its own tasks, or that gymnasium 1.4 renamed, map to
  the gymnasium id with the same dynamics (ALIASES, each with its evidence);
- EnvPool's own toy tasks (Catch-v0, NChain-v0) and its Blackjack observation (toy.py, OWN);
- EnvPool's MuJoCo v2/v3 ids and Pusher-v4 (mujoco.py, LEGACY).
Box2D's renamed v2 ids are the box2d family's. `Blackjack-v1` is gymnasium's id too, and
`seedpool.make` keeps gymnasium's env there: only the EnvPool face gives EnvPool's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from seedpool.envs.envpool_ids.mujoco import LEGACY, build_mujoco, target
from seedpool.envs.envpool_ids.toy import CatchEnv, NChainEnv, make_blackjack
from seedpool.envs.spec import peel
from seedpool.errors import UnknownEnvError

# EnvPool id -> the gymnasium id that steps the same.
ALIASES: dict[str, str] = {
    # EnvPool registers these as aliases of its own CartPole and Pendulum (classic_control/registration.py);
    # gymnasium's ids of these names are its JAX functional envs.
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
}


@dataclass(frozen=True)
class Own:
    """A task seedpool builds for an EnvPool id: its factory and EnvPool's time limit;
    `engine`: whether `seedpool.make` builds it too (not where gymnasium has the same id)."""

    build: Callable[..., gym.Env]
    max_episode_steps: int | None = None
    engine: bool = True


OWN: dict[str, Own] = {
    "Catch-v0": Own(CatchEnv),
    "NChain-v0": Own(NChainEnv, 1000),
    "Blackjack-v1": Own(make_blackjack, engine=False),
    "tabular/Blackjack-v0": Own(make_blackjack),  # EnvPool: an alias of its Blackjack-v1
}

# EnvPool's MuJoCo (gym) tasks and their time limits (the face's `gym_mujoco_envs` table).
MUJOCO = (("Ant", 1000), ("HalfCheetah", 1000), ("Hopper", 1000), ("Humanoid", 1000),
          ("HumanoidStandup", 1000), ("InvertedDoublePendulum", 1000), ("InvertedPendulum", 1000),
          ("Pusher", 100), ("Reacher", 50), ("Swimmer", 1000), ("Walker2d", 1000))
_MUJOCO_TASKS = {task for task, _ in MUJOCO}


def engine_ids() -> list[str]:
    """The ids `seedpool.make` builds through this table."""
    return sorted({*classic_ids(), *mujoco_ids()})


def classic_ids() -> list[str]:
    """EnvPool's classic-control and toy-text ids of the table that `seedpool.make` builds."""
    return sorted({*ALIASES, *(i for i, own in OWN.items() if own.engine)})


def mujoco_ids() -> list[str]:
    """EnvPool's MuJoCo v2/v3 ids and Pusher-v4 (they need mujoco to build)."""
    return sorted(LEGACY)


def is_mujoco(task_id: str) -> bool:
    """Whether `task_id` is one of EnvPool's MuJoCo (gym) tasks, any version."""
    return task_id.rpartition("-v")[0] in _MUJOCO_TASKS


def time_limit(task_id: str) -> int | None:
    """EnvPool's time limit of a table id or a gymnasium MuJoCo id (gymnasium's registered
    limit of the task it maps to)."""
    if task_id in OWN:
        return OWN[task_id].max_episode_steps
    gym_id = ALIASES.get(task_id) or target(task_id)
    try:
        return gym.spec(gym_id).max_episode_steps
    except gym.error.Error as err:
        raise UnknownEnvError(f"unknown task id {task_id!r} ({err})") from None


def build(task_id: str, **options: Any) -> gym.Env:
    """The env of a table id (or a gymnasium MuJoCo id, for EnvPool's `frame_stack` and model
    files) with its options, without a time limit (the caller counts it)."""
    if task_id in ALIASES:
        return peel(gym.make(ALIASES[task_id], disable_env_checker=True, **options))[0]
    if task_id in OWN:
        return OWN[task_id].build(**options)
    if is_mujoco(task_id):
        return build_mujoco(task_id, **options)
    raise UnknownEnvError(f"{task_id!r} is not one of EnvPool's ids that seedpool maps; they are {engine_ids()}")


def make_task(task_id: str, max_episode_steps: int | None = None, **options: Any) -> gym.Env:
    """The families' factory: `build`, truncated at `max_episode_steps` (default EnvPool's)."""
    env = build(task_id, **options)
    limit = max_episode_steps if max_episode_steps is not None else time_limit(task_id)
    return gym.wrappers.TimeLimit(env, limit) if limit is not None else env
