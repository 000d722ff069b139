"""EnvPool's highway-env ids on the highway-env package, in EnvPool's layout.

EnvPool names each scenario twice: CamelCase ("Highway-v0") and highway-env's own id
("highway-v0"); both build highway-env's env of that id. Its options are highway-env's
config keys (`lanes_count`, `vehicles_count`, `duration`, ...: EnvPool uses the same
names) and `max_episode_steps` (EnvPool's limit, which equals highway-env's own episode
length). Dict observations are ordered as EnvPool's; `info` holds EnvPool's `speed`,
`crashed` and, for parking, `is_success`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.families.packaged import EnvPoolTask, arrange, ordered, positive_int, require
from seedpool.envs.spec import peel
from seedpool.errors import ConfigError, UnknownEnvError

# highway-env id -> (EnvPool's CamelCase id, EnvPool's max_episode_steps).
SCENARIOS: dict[str, tuple[str, int]] = {
    "highway-v0": ("Highway-v0", 40), "highway-fast-v0": ("HighwayFast-v0", 30), "exit-v0": ("Exit-v0", 18),
    "intersection-v0": ("Intersection-v0", 13), "intersection-v1": ("Intersection-v1", 13),
    "intersection-multi-agent-v0": ("IntersectionMultiAgent-v0", 13),
    "intersection-multi-agent-v1": ("IntersectionMultiAgent-v1", 13),
    "lane-keeping-v0": ("LaneKeeping-v0", 200), "merge-v0": ("Merge-v0", 200), "parking-v0": ("Parking-v0", 500),
    "parking-ActionRepeat-v0": ("ParkingActionRepeat-v0", 20), "parking-parked-v0": ("ParkingParked-v0", 500),
    "racetrack-v0": ("Racetrack-v0", 1500), "racetrack-large-v0": ("RacetrackLarge-v0", 1500),
    "racetrack-oval-v0": ("RacetrackOval-v0", 1500), "roundabout-v0": ("Roundabout-v0", 11),
    "two-way-v0": ("TwoWay-v0", 15), "u-turn-v0": ("UTurn-v0", 10),
}
_IDS = {**{name: name for name in SCENARIOS}, **{camel: name for name, (camel, _) in SCENARIOS.items()}}
# EnvPool registers its multi-agent v1 as the same scenario and config as v0
# (envpool/highway/registration.py); highway-env's v1 gives a reward per agent instead.
_BUILDS = {"intersection-multi-agent-v1": "intersection-multi-agent-v0"}
# EnvPool's key order of the Dict observations (highway-env's Dicts are sorted by key).
_ORDER = ("observation", "achieved_goal", "desired_goal", "state", "derivative", "reference_state")
_INFO = {"speed": np.float32, "crashed": np.bool_, "is_success": np.bool_}


def highway_ids() -> list[str]:
    """Every highway-env id EnvPool lists, both spellings; needs no highway-env install."""
    return sorted(_IDS)


def make_highway(task_id: str, **options: Any) -> EnvPoolTask:
    """Build a highway-env id EnvPool lists, with highway-env's config keys as options."""
    if task_id not in _IDS:
        raise UnknownEnvError(f"unknown highway-env task id {task_id!r}; ids look like 'Highway-v0' "
                              "(see seedpool.envs.families.highway.env.highway_ids())")
    require("highway", task_id)
    import highway_env  # noqa: F401 - registers its ids with gymnasium

    name = _IDS[task_id]
    limit = positive_int("max_episode_steps", options.pop("max_episode_steps", SCENARIOS[name][1]))
    env = peel(gym.make(_BUILDS.get(name, name), disable_env_checker=True))[0]
    config = env.unwrapped.config
    unknown = sorted(set(options) - set(config))
    if unknown:
        raise ConfigError(f"{task_id} has no option {', '.join(map(repr, unknown))}; its options are "
                          f"highway-env's config keys {sorted(config)} and max_episode_steps")
    if options:
        env.unwrapped.configure(options)
        env.unwrapped.define_spaces()
    space = ordered(env.observation_space, _ORDER)
    info = {k: v for k, v in _INFO.items() if k != "is_success" or name.startswith("parking")}
    shown = {k: v for k, v in config.items() if isinstance(v, (bool, int, float, str))}
    return EnvPoolTask(env, observation_space=space, convert=arrange(space), max_episode_steps=limit,
                       options=shown, info_keys=info)
