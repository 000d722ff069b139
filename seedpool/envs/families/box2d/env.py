"""EnvPool's renamed Box2D ids on gymnasium's Box2D envs (the box2d package).

EnvPool registers each "-v2" id as the same task as its "-v3" (envpool/box2d/registration.py),
and gymnasium's v3 changed nothing these tasks' defaults reach (see docs/compat.md), so an
id is gymnasium's v3 env with EnvPool's options (`lap_complete_percent` for CarRacing;
`continuous`, `gravity`, `enable_wind`, `wind_power`, `turbulence_power` for LunarLander,
gymnasium's names) and time limit (`max_episode_steps`, 1000).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from seedpool.envs.families.packaged import EnvPoolTask, check_options, positive_int, require
from seedpool.envs.spec import peel
from seedpool.errors import UnknownEnvError

# EnvPool id -> (gymnasium id, the task's options with gymnasium's defaults).
_LANDER = {"gravity": -10.0, "enable_wind": False, "wind_power": 15.0, "turbulence_power": 1.5}
IDS: dict[str, tuple[str, dict[str, Any]]] = {
    "CarRacing-v2": ("CarRacing-v3", {"lap_complete_percent": 0.95, "domain_randomize": False, "continuous": True}),
    "LunarLander-v2": ("LunarLander-v3", {**_LANDER, "continuous": False}),
    "LunarLanderContinuous-v2": ("LunarLanderContinuous-v3", {**_LANDER, "continuous": True}),
}
MAX_EPISODE_STEPS = 1000
REWARD_THRESHOLD = {"CarRacing-v2": 900.0, "LunarLander-v2": 200.0, "LunarLanderContinuous-v2": 200.0}


def box2d_ids() -> list[str]:
    """EnvPool's Box2D ids that gymnasium no longer registers; needs no box2d install."""
    return sorted(IDS)


def make_box2d(task_id: str, **options: Any) -> EnvPoolTask:
    """Build gymnasium's current version of EnvPool's `task_id` with EnvPool's options."""
    if task_id not in IDS:
        raise UnknownEnvError(f"unknown Box2D task id {task_id!r}; this family builds {box2d_ids()}")
    require("box2d", task_id)
    gym_id, defaults = IDS[task_id]
    # reward_threshold is in EnvPool's config of these ids; it describes the task, it changes nothing.
    opts = check_options(task_id, options, {**defaults, "max_episode_steps": MAX_EPISODE_STEPS,
                                            "reward_threshold": REWARD_THRESHOLD[task_id]})
    limit = positive_int("max_episode_steps", opts.pop("max_episode_steps"))
    threshold = opts.pop("reward_threshold")
    env = peel(gym.make(gym_id, disable_env_checker=True, **opts))[0]
    return EnvPoolTask(env, max_episode_steps=limit, options={**opts, "reward_threshold": threshold})
