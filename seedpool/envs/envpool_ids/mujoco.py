"""EnvPool's MuJoCo (gym) tasks on gymnasium's envs: its v2/v3 ids and `Pusher-v4`, which
gymnasium 1.4 builds only with mujoco-py or mujoco<3, and EnvPool's `frame_stack` and model
file names for every version.

EnvPool registers each v2/v3 id as the same task as its v4 (envpool/mujoco/gym/registration.py;
Ant-v3 and Humanoid-v3 with `use_contact_force=True`), and its v2/v3 and v4 pools step alike
from the same seed (tests/test_envpool_ids.py checks it on envpool 1.2.5). So each is
gymnasium's v4 here. Gymnasium's Pusher-v4 refuses mujoco>=3 (its object's density, lighter
than air, misbehaves there); EnvPool runs that model on mujoco 3 anyway, so its Pusher-v2/-v4
is gymnasium's Pusher-v5 class with the v4 model file (`pusher.xml`) and v4's reward, read
from the state before the physics step (v5 reads it after).
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.spec import peel
from seedpool.errors import ConfigError

_PUSHER = ("Pusher-v5", {"xml_file": "pusher.xml"})
# EnvPool's id -> (the gymnasium id that steps as it, the options EnvPool's id fixes).
LEGACY: dict[str, tuple[str, dict[str, Any]]] = {
    "Ant-v3": ("Ant-v4", {"use_contact_forces": True}),
    **{f"{task}-v3": (f"{task}-v4", {}) for task in ("HalfCheetah", "Hopper", "Humanoid", "Swimmer", "Walker2d")},
    **{f"{task}-v2": (f"{task}-v4", {}) for task in ("HumanoidStandup", "InvertedDoublePendulum", "InvertedPendulum",
                                                     "Reacher")},
    "Pusher-v2": _PUSHER,
    "Pusher-v4": _PUSHER,
}
# EnvPool's names of Pusher's reward weights, and their defaults (gymnasium's v4 constants).
PUSHER_WEIGHTS = {"ctrl_cost_weight": 0.1, "dist_cost_weight": 1.0, "near_cost_weight": 0.5}

# EnvPool's MuJoCo model files (envpool-assets' mujoco/assets_gym) -> gymnasium's file with
# the same model: the same XML but for comments and spacing (tests/test_envpool_tasks.py
# compares them where envpool is installed). Other xml_file values go to gymnasium as given.
ASSETS: dict[str, str] = {
    f"{name}_envpool.xml": f"{name}.xml"
    for name in ("ant", "half_cheetah", "hopper", "humanoid", "humanoidstandup", "inverted_double_pendulum",
                 "inverted_pendulum", "pusher", "pusher_v5", "reacher", "swimmer", "walker2d", "walker2d_v5")
}


def target(task_id: str) -> str:
    """The gymnasium id that builds EnvPool's MuJoCo `task_id`."""
    return LEGACY.get(task_id, (task_id, {}))[0]


def build_mujoco(task_id: str, frame_stack: int = 1, **options: Any) -> gym.Env:
    """EnvPool's MuJoCo `task_id` (any version) with its options, the time limit left to the
    caller; the last `frame_stack` observations stacked on a new leading axis where > 1
    (gymnasium's FrameStackObservation repeats the first one after a reset, as EnvPool)."""
    if not isinstance(frame_stack, int) or isinstance(frame_stack, bool) or frame_stack < 1:
        raise ConfigError(f"frame_stack must be an int >= 1, got {frame_stack!r}")
    if options.get("xml_file") in ASSETS:
        options["xml_file"] = ASSETS[options["xml_file"]]
    gym_id, fixed = LEGACY.get(task_id, (task_id, {}))
    weights = {k: options.pop(k, v) for k, v in PUSHER_WEIGHTS.items()} if gym_id == _PUSHER[0] and \
        task_id in LEGACY else None
    if task_id in LEGACY:
        options = {**fixed, **gymnasium_options(gym_id, options)}
    env = peel(gym.make(gym_id, disable_env_checker=True, **options))[0]
    if weights is not None:
        env = RewardBeforeStep(env, **weights)
    if task_id in LEGACY:
        env = Float64Actions(env)
    return gym.wrappers.FrameStackObservation(env, frame_stack) if frame_stack > 1 else env


def gymnasium_options(gym_id: str, options: dict[str, Any]) -> dict[str, Any]:
    """EnvPool's v2/v3 option names as gymnasium's v4 takes them: its `X_min`/`X_max` pairs as
    `X_range` (the other end gymnasium's default), `use_contact_force` as Ant's
    `use_contact_forces`. Humanoid's `use_contact_force` is dropped: it adds a contact cost
    read from contact forces that stay zero in EnvPool's v3 (no `post_constraint`), which is
    why its v3 and v4 step alike. The rest go to gymnasium as given (it names any it lacks)."""
    creator = gym.envs.registration.load_env_creator(gym.spec(gym_id).entry_point)
    params = inspect.signature(creator.__init__).parameters
    out: dict[str, Any] = {}
    for key, value in options.items():
        base, _, end = key.rpartition("_")
        if end in ("min", "max") and f"{base}_range" in params:
            low, high = out.get(f"{base}_range", params[f"{base}_range"].default)
            out[f"{base}_range"] = (value, high) if end == "min" else (low, value)
        elif key == "use_contact_force":
            if "use_contact_forces" in params:
                out["use_contact_forces"] = value
        else:
            out[key] = value
    return out


class Float64Actions(gym.Wrapper):
    """EnvPool's MuJoCo action space: gymnasium's bounds as float64 (gymnasium's are float32);
    the actions reach MuJoCo's float64 controls unrounded, as in EnvPool."""

    def __init__(self, env: gym.Env):
        """Wrap a MuJoCo env this module built."""
        super().__init__(env)
        space = env.action_space
        self.action_space = gym.spaces.Box(space.low.astype(np.float64), space.high.astype(np.float64),
                                           dtype=np.float64)


class RewardBeforeStep(gym.Wrapper):
    """Pusher's v4 reward on gymnasium's v5 env: the fingertip-object and object-goal distances
    of the state before the physics step, as EnvPool's Pusher-v2/-v4 (`reward_after_step=False`);
    `info` holds v4's unweighted `reward_dist` and `reward_ctrl`."""

    def __init__(self, env: gym.Env, ctrl_cost_weight: float, dist_cost_weight: float, near_cost_weight: float):
        """Wrap a Pusher env this module built."""
        super().__init__(env)
        self._weights = (float(ctrl_cost_weight), float(dist_cost_weight), float(near_cost_weight))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """One physics step, rewarded from the state it started from."""
        sim = self.env.unwrapped
        body = sim.get_body_com
        near = -float(np.linalg.norm(body("object") - body("tips_arm")))
        dist = -float(np.linalg.norm(body("object") - body("goal")))
        ctrl = -float(np.square(action).sum())
        obs, _, terminated, truncated, info = self.env.step(action)
        w_ctrl, w_dist, w_near = self._weights
        info = {**info, "reward_dist": dist, "reward_ctrl": ctrl}
        info.pop("reward_near", None)
        return obs, w_dist * dist + w_ctrl * ctrl + w_near * near, terminated, truncated, info
