"""EnvPool's dm_control suite tasks on the dm-control package, in EnvPool's layout.

An id is the domain and task in CamelCase with "-v1" ("CheetahRun-v1", "BallInCupCatch-v1",
"HumanoidCMUWalk-v1", "LqrLqr21-v1"): the tasks of dm_control's `suite.BENCHMARKING` and the
extra ones EnvPool lists. The observation is EnvPool's: an ordered Dict of dm_control's
observation keys (for dog, finger, fish, humanoid and quadruped the union of the domain's
tasks' keys, as EnvPool's: see UNION), each float64 with dm_control's shape (a scalar is
shape `()`), or with
`from_pixels=True` the rendered frame channel-first, `[3, render_height, render_width]`
uint8. The action is dm_control's float64 Box. EnvPool's options: `task_name` (the
dm_control task of the id's domain), `frame_skip` (physics steps per step; each domain's
default is dm_control's own), `frame_stack`, `from_pixels` with `render_width`,
`render_height`, `render_camera_id`, and `max_episode_steps` (1000).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.families.packaged import EnvPoolTask, check_options, positive_int, require
from seedpool.errors import ConfigError, UnknownEnvError

# domain -> its tasks, as EnvPool lists them (envpool/mujoco/dmc/registration.py), all with
# EnvPool's 1000-step limit.
TASKS: dict[str, tuple[str, ...]] = {
    "acrobot": ("swingup", "swingup_sparse"),
    "ball_in_cup": ("catch",),
    "cartpole": ("balance", "balance_sparse", "swingup", "swingup_sparse", "three_poles", "two_poles"),
    "cheetah": ("run",),
    "dog": ("fetch", "run", "stand", "trot", "walk"),
    "finger": ("spin", "turn_easy", "turn_hard"),
    "fish": ("swim", "upright"),
    "hopper": ("hop", "stand"),
    "humanoid": ("run", "run_pure_state", "stand", "walk"),
    "humanoid_CMU": ("run", "stand", "walk"),
    "lqr": ("lqr_2_1", "lqr_6_2"),
    "manipulator": ("bring_ball", "bring_peg", "insert_ball", "insert_peg"),
    "pendulum": ("swingup",),
    "point_mass": ("easy", "hard"),
    "quadruped": ("escape", "fetch", "run", "walk"),
    "reacher": ("easy", "hard"),
    "stacker": ("stack_2", "stack_4"),
    "swimmer": ("swimmer6", "swimmer15"),
    "walker": ("run", "stand", "walk"),
}
MAX_EPISODE_STEPS = 1000
_VERSION = "-v1"

# EnvPool gives every task of a domain the same observation keys: the union of its tasks'
# (in this order), a key its task lacks holding zeros (quadruped's `origin` is computed for
# every task). domain -> each key, and the shape of those some task lacks.
UNION: dict[str, tuple[tuple[str, tuple[int, ...] | None], ...]] = {
    "dog": (("joint_angles", None), ("joint_velocites", None), ("torso_pelvis_height", None), ("z_projection", None),
            ("torso_com_velocity", None), ("inertial_sensors", None), ("foot_forces", None), ("touch_sensors", None),
            ("actuator_state", None), ("ball_state", (6,)), ("target_position", (3,))),
    "finger": (("position", None), ("velocity", None), ("touch", None), ("target_position", (2,)),
               ("dist_to_target", ())),
    "fish": (("joint_angles", None), ("upright", None), ("velocity", None), ("target", (3,))),
    "humanoid": (("joint_angles", (21,)), ("head_height", ()), ("extremities", (12,)), ("torso_vertical", (3,)),
                 ("com_velocity", (3,)), ("position", (28,)), ("velocity", None)),
    "quadruped": (("egocentric_state", None), ("torso_velocity", None), ("torso_upright", None), ("imu", None),
                  ("force_torque", None), ("origin", (3,)), ("rangefinder", (20,)), ("ball_state", (9,)),
                  ("target_position", (3,))),
}


def _camel(name: str) -> str:
    """EnvPool's spelling: each "_"-separated part with its first letter upper-cased."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


_IDS: dict[str, tuple[str, str]] = {
    f"{_camel(domain)}{_camel(task)}{_VERSION}": (domain, task) for domain, tasks in TASKS.items() for task in tasks
}


def dmc_ids() -> list[str]:
    """Every dm_control id EnvPool lists, e.g. "CheetahRun-v1"; needs no dm_control install."""
    return sorted(_IDS)


class DmcEnv(gym.Env):
    """One dm_control suite task as a gymnasium env with EnvPool's observation layout.

    `reset(seed=s)` reseeds the task's random state (dm_control draws the initial state
    from it); terminated is dm_control's own episode end (its time limit is left to
    EnvPool's `max_episode_steps`); `info["discount"]` is dm_control's discount.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, domain: str, task: str, frame_skip: int | None, from_pixels: bool,
                 render: tuple[int, int, int]):
        from dm_control import suite

        self._env = suite.load(domain, task, task_kwargs={"time_limit": float("inf")})
        if frame_skip is not None:
            # dm_control's suite sets each domain's control timestep; EnvPool's frame_skip
            # replaces its physics steps per control step.
            self._env._n_sub_steps = frame_skip
        self.frame_skip = self._env._n_sub_steps
        self._pixels, self._render, self._filled = from_pixels, render, {}
        width, height, _ = render
        if from_pixels:
            self.observation_space = gym.spaces.Box(0, 255, (3, height, width), np.uint8)
        else:
            shapes = {key: tuple(spec.shape) for key, spec in self._env.observation_spec().items()}
            self._filled = {key: shape for key, shape in UNION.get(domain, ()) if key not in shapes}
            layout = [(key, shapes.get(key, shape)) for key, shape in UNION[domain]] if domain in UNION \
                else list(shapes.items())
            # Unbounded, as dm_control's specs (EnvPool's bounds, float64's smallest positive
            # and largest numbers, would leave every negative observation outside the space).
            self.observation_space = gym.spaces.Dict(OrderedDict(
                (key, gym.spaces.Box(-np.inf, np.inf, shape, np.float64)) for key, shape in layout))
        act = self._env.action_spec()
        self.action_space = gym.spaces.Box(np.asarray(act.minimum, np.float64) * np.ones(act.shape),
                                           np.asarray(act.maximum, np.float64) * np.ones(act.shape),
                                           tuple(act.shape), np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._env.task._random = np.random.RandomState(seed)
        ts = self._env.reset()
        return self._observation(ts.observation), {"discount": 1.0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        ts = self._env.step(np.asarray(action, np.float64))
        return (self._observation(ts.observation), float(ts.reward or 0.0), bool(ts.last()), False,
                {"discount": float(ts.discount)})

    def _observation(self, obs: dict[str, Any]) -> Any:
        if self._pixels:
            return self.render().transpose(2, 0, 1)
        obs = dict(obs)
        for key, shape in self._filled.items():
            obs[key] = self._env.physics.origin() if key == "origin" else np.zeros(shape)
        return OrderedDict((key, np.asarray(obs[key], np.float64).reshape(space.shape))
                           for key, space in self.observation_space.spaces.items())

    def render(self) -> np.ndarray:
        """The frame from `render_camera_id` at EnvPool's render size, `[H, W, 3]` uint8."""
        width, height, camera = self._render
        return self._env.physics.render(height=height, width=width, camera_id=camera)

    @property
    def physics(self) -> Any:
        """dm_control's physics of this env (for tests that set a state)."""
        return self._env.physics

    def close(self) -> None:
        self._env.close()


def make_dmc(task_id: str, **options: Any) -> EnvPoolTask:
    """Build an id such as "CheetahRun-v1" with EnvPool's option names."""
    if task_id not in _IDS:
        raise UnknownEnvError(f"unknown dm_control task id {task_id!r}; ids look like 'CheetahRun-v1' "
                              "(see seedpool.envs.families.dmc.env.dmc_ids())")
    require("dmc", task_id)
    domain, task = _IDS[task_id]
    opts = check_options(task_id, options, {
        "task_name": task, "frame_skip": None, "frame_stack": 1, "from_pixels": False,
        "render_width": 84, "render_height": 84, "render_camera_id": -1,
        "max_episode_steps": MAX_EPISODE_STEPS,
    })
    if opts["task_name"] not in TASKS[domain]:
        raise ConfigError(f"task_name {opts['task_name']!r} is not a task of {domain}: {list(TASKS[domain])}")
    skip = None if opts["frame_skip"] is None else positive_int("frame_skip", opts["frame_skip"])
    pixels = bool(opts["from_pixels"])
    # dm_control picks its GL backend when first imported (a later from_pixels pool cannot
    # change it); EGL renders without a display, and a user's MUJOCO_GL is kept.
    os.environ.setdefault("MUJOCO_GL", "egl")
    render = (positive_int("render_width", opts["render_width"]),
              positive_int("render_height", opts["render_height"]), int(opts["render_camera_id"]))
    env = DmcEnv(domain, opts["task_name"], skip, pixels, render)
    opts["frame_skip"] = env.frame_skip
    opts["frame_stack"] = positive_int("frame_stack", opts["frame_stack"])
    return EnvPoolTask(env, max_episode_steps=positive_int("max_episode_steps", opts.pop("max_episode_steps")),
                       frame_stack=opts["frame_stack"], stack_channels=pixels, options=opts,
                       info_keys={"discount": np.float32})
