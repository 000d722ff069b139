"""EnvPool's Gymnasium-Robotics ids on the gymnasium-robotics package, in EnvPool's layout.

An id is built by gymnasium-robotics' env of the same name. EnvPool's older versions
(FetchReach-v1, HandManipulateBlock-v0, HandReach-v0, ...) are the same tasks as its newer
ones (one registration, one config: envpool/mujoco/robotics/registration.py); gymnasium
registers them for mujoco-py only, so they build gymnasium's newest version of the name.
Goal observations are ordered as EnvPool's (`observation`, `achieved_goal`, `desired_goal`);
`info` holds EnvPool's `is_success` (Fetch, hand) or `success` (Adroit, maze) as float64.
Options: gymnasium-robotics' own constructor arguments (`reward_type`, `continuing_task`,
...), and EnvPool's `frame_stack`, `frame_skip` (Fetch and hand: gymnasium's `n_substeps`)
and `max_episode_steps` (gymnasium's registered limit by default).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.families.packaged import EnvPoolTask, arrange, ordered, positive_int, require
from seedpool.envs.spec import peel
from seedpool.errors import ConfigError, UnknownEnvError

# EnvPool's key order: goal envs' entries, then the Franka kitchen's tasks as the env lists them.
ORDER = ("observation", "achieved_goal", "desired_goal", "bottom burner", "top burner", "light switch",
         "slide cabinet", "hinge cabinet", "microwave", "kettle")


def _hand_manipulate_ids() -> list[str]:
    objects = {"Block": ("", "Full", "RotateParallel", "RotateXYZ", "RotateZ"), "Egg": ("", "Full", "Rotate"),
               "Pen": ("", "Full", "Rotate")}
    touch = {"Block": ("", "RotateParallel", "RotateXYZ", "RotateZ"), "Egg": ("", "Rotate"), "Pen": ("", "Rotate")}
    ids = [f"HandManipulate{obj}{variant}{dense}-{v}" for obj, variants in objects.items() for variant in variants
           for dense in ("", "Dense") for v in ("v0", "v1")]
    ids += [f"HandManipulate{obj}{variant}_{kind}TouchSensors{dense}-{v}" for obj, variants in touch.items()
            for variant in variants for kind in ("Boolean", "Continuous") for dense in ("", "Dense")
            for v in ("v0", "v1")]
    return ids


def _ids() -> list[str]:
    fetch = [f"Fetch{task}{dense}-{v}" for task in ("Reach", "Push", "PickAndPlace", "Slide")
             for dense in ("", "Dense") for v in ("v1", "v4")]
    hand = [f"HandReach{dense}-{v}" for dense in ("", "Dense") for v in ("v0", "v3")]
    adroit = [f"AdroitHand{task}{sparse}-v1" for task in ("Door", "Hammer", "Pen", "Relocate") for sparse in ("", "Sparse")]
    mazes = ["Open", "UMaze", "Medium", "Large"] + [f"{size}_Diverse_{g}" for size in ("Open", "Medium", "Large")
                                                     for g in ("G", "GR")]
    maze = [f"PointMaze_{name}{dense}-v3" for name in mazes for dense in ("", "Dense")]
    return fetch + hand + _hand_manipulate_ids() + adroit + maze + ["FrankaKitchen-v1"]


_IDS = frozenset(_ids())


def robotics_ids() -> list[str]:
    """Every Gymnasium-Robotics id EnvPool lists; needs no gymnasium-robotics install."""
    return sorted(_IDS)


def _success_key(task_id: str) -> str | None:
    if task_id.startswith(("Fetch", "Hand")):
        return "is_success"
    if task_id.startswith(("AdroitHand", "PointMaze")):
        return "success"
    return None


def _gymnasium_id(task_id: str) -> str:
    """The gymnasium id that builds `task_id`: itself, or for an id gymnasium registers for
    mujoco-py only, the newest version of the same name on the mujoco bindings."""
    if ":MujocoPy" not in str(gym.spec(task_id).entry_point):
        return task_id
    name = task_id.rpartition("-v")[0]
    versions = [spec for key, spec in gym.registry.items()
                if key.rpartition("-v")[0] == name and ":MujocoPy" not in str(spec.entry_point)]
    return max(versions, key=lambda spec: spec.version or 0).id


def make_robotics(task_id: str, **options: Any) -> EnvPoolTask:
    """Build a Gymnasium-Robotics id EnvPool lists, with EnvPool's options."""
    if task_id not in _IDS:
        raise UnknownEnvError(f"unknown Gymnasium-Robotics task id {task_id!r}; ids look like 'FetchReach-v4' "
                              "(see seedpool.envs.families.robotics.env.robotics_ids())")
    require("robotics", task_id)
    import gymnasium_robotics  # noqa: F401 - registers its ids with gymnasium

    from . import joints

    joints.fix_joint_types()
    gym_id = _gymnasium_id(task_id)
    spec = gym.spec(gym_id)
    stack = positive_int("frame_stack", options.pop("frame_stack", 1))
    limit = positive_int("max_episode_steps", options.pop("max_episode_steps", spec.max_episode_steps))
    if "frame_skip" in options:
        if not task_id.startswith(("Fetch", "Hand")):
            raise ConfigError(f"{task_id}: frame_skip is fixed by gymnasium-robotics' env (Fetch and hand tasks take it)")
        options["n_substeps"] = positive_int("frame_skip", options.pop("frame_skip"))
    try:
        env = peel(gym.make(gym_id, disable_env_checker=True, **options))[0]
    except TypeError as err:
        raise ConfigError(f"{task_id}: an option gymnasium-robotics' env does not take ({err}); "
                          f"it takes its constructor's arguments and EnvPool's frame_stack, max_episode_steps") from None
    space = ordered(env.observation_space, ORDER)
    success = _success_key(task_id)
    shown = {**spec.kwargs, **options, "frame_stack": stack}
    shown.pop("maze_map", None)  # gymnasium's list of lists; the id names the maze
    return EnvPoolTask(env, observation_space=space, convert=arrange(space), max_episode_steps=limit, frame_stack=stack,
                       options=shown, info_keys={success: np.float64} if success else None)
