"""What EnvPool's families built on a Python package share: the one-line error naming the
extra where the package is missing, and `EnvPoolTask`, the gymnasium env that holds the
package's env and adds what EnvPool's pool does around it (its time limit, `frame_stack`,
its option names in the pool's `config`).

Each such family (dmc/, box2d/, robotics/, highway/, vizdoom/) lists its ids without
importing its package, so that a missing package is reported by its factory with the
extra to install, not as an unknown id; `available(family_name)` says whether the package
imports, which is what the EnvPool face's `list_all_envs()` lists by.
"""

from __future__ import annotations

import importlib.util
from collections import OrderedDict, deque
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.errors import ConfigError

# family name (as registered) -> (the module its package installs, seedpool's extra for it).
PACKAGES: dict[str, tuple[str, str]] = {
    "dmc": ("dm_control", "dm-control"),
    "box2d": ("Box2D", "box2d"),
    "robotics": ("gymnasium_robotics", "robotics"),
    "highway": ("highway_env", "highway"),
    "vizdoom": ("vizdoom", "vizdoom"),
}


# Families whose envs render EnvPool's `from_pixels` observations, and the options that size them.
PIXEL_FAMILIES = ("dmc",)
PIXEL_OPTIONS = ("render_width", "render_height", "render_camera_id")


def available(family: str) -> bool:
    """Whether the package of `family` is installed (True for families not built on one)."""
    module = PACKAGES.get(family, (None,))[0]
    return module is None or importlib.util.find_spec(module) is not None


def installed(family: Any) -> bool:
    """`available` for a registry `Family` (or None: an id of no family)."""
    return family is None or available(family.name)


def renders(family: Any) -> bool:
    """Whether a registry `Family` (or None) builds EnvPool's `from_pixels` observations."""
    return family is not None and family.name in PIXEL_FAMILIES


def require(family: str, task_id: str) -> None:
    """Raise, in one line naming the extra, where the package of `family` is missing."""
    module, extra = PACKAGES[family]
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(
            f"{task_id} needs the {module} package, which is not installed: "
            f"pip install 'seedpool[{extra}]'", name=module)


def check_options(task_id: str, given: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """`known` (EnvPool's options of `task_id`, with their defaults) updated with `given`;
    a ConfigError names an option EnvPool does not have for this task."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(f"{task_id} has no option {', '.join(map(repr, unknown))}; "
                          f"its options (EnvPool's names) are {sorted(known)}")
    return {**known, **given}


def positive_int(name: str, value: Any) -> int:
    """`value` as an int >= 1, or a ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def ordered(space: gym.Space, order: tuple[str, ...]) -> gym.Space:
    """`space` with the keys of its Dicts (nested ones too) in EnvPool's `order` (gymnasium's
    Dict sorts keys given in a plain dict); keys not in `order` follow in their own order."""
    if not isinstance(space, gym.spaces.Dict):
        return space
    rank = {key: i for i, key in enumerate(order)}
    keys = sorted(space.spaces, key=lambda k: rank.get(k, len(order)))
    return gym.spaces.Dict(OrderedDict((k, ordered(space.spaces[k], order)) for k in keys))


def arrange(space: gym.Space) -> Callable[[Any], Any] | None:
    """A function putting an observation's keys in the order of `space`'s (None: no Dict)."""
    if not isinstance(space, gym.spaces.Dict):
        return None
    inner = {key: arrange(sub) for key, sub in space.spaces.items()}

    def convert(obs: Any) -> Any:
        return OrderedDict((k, f(obs[k]) if f else obs[k]) for k, f in inner.items())

    return convert


class FrameStack:
    """EnvPool's `frame_stack`: the last `k` observations, the first one repeated after a
    reset. `channels`: concatenated on axis 0 (EnvPool's pixel observations, `[k*C, H, W]`);
    else on a new leading axis (its state observations, `[k, ...]` per key)."""

    def __init__(self, space: gym.Space, k: int, channels: bool):
        self.k, self.channels = k, channels
        self.frames: deque[Any] = deque(maxlen=k)
        self.space = self._stacked_space(space)

    def _stacked_space(self, space: gym.Space) -> gym.Space:
        if isinstance(space, gym.spaces.Dict):
            return gym.spaces.Dict(OrderedDict((key, self._stacked_space(s)) for key, s in space.spaces.items()))
        if not isinstance(space, gym.spaces.Box):
            raise ConfigError(f"frame_stack stacks Box observations, not {type(space).__name__}")
        reps = (self.k,) + (1,) * (space.low.ndim - 1) if self.channels else (self.k,) + (1,) * space.low.ndim
        low = np.tile(space.low if self.channels else space.low[None], reps)
        high = np.tile(space.high if self.channels else space.high[None], reps)
        return gym.spaces.Box(low, high, dtype=space.dtype)

    def reset(self, obs: Any) -> Any:
        for _ in range(self.k):
            self.frames.append(obs)
        return self._join()

    def step(self, obs: Any) -> Any:
        self.frames.append(obs)
        return self._join()

    def _join(self) -> Any:
        join: Callable[..., np.ndarray] = np.concatenate if self.channels else np.stack
        first = self.frames[0]
        if isinstance(first, dict):
            return OrderedDict((key, join([f[key] for f in self.frames])) for key in first)
        return join(list(self.frames))


class EnvPoolTask(gym.Env):
    """A package's env under one of EnvPool's ids: `inner` steps it; this env counts EnvPool's
    `max_episode_steps` (truncating there), stacks `frame_stack` observations and reports
    the task's options, EnvPool's names and defaults, as `task_options` (the pool's config).

    `convert(obs)` turns the package's observation into EnvPool's layout (`observation_space`
    is that layout's space); `info_keys` are the scalar info entries the engine forwards."""

    def __init__(self, inner: gym.Env, *, observation_space: gym.Space | None = None,
                 convert: Callable[[Any], Any] | None = None, max_episode_steps: int | None = None,
                 frame_stack: int = 1, stack_channels: bool = False, options: dict[str, Any] | None = None,
                 info_keys: dict[str, Any] | None = None):
        self.inner = inner
        self._convert = convert or (lambda obs: obs)
        space = observation_space if observation_space is not None else inner.observation_space
        self._stack = FrameStack(space, frame_stack, stack_channels) if frame_stack > 1 else None
        self.observation_space = self._stack.space if self._stack else space
        self.action_space = inner.action_space
        self.max_episode_steps = max_episode_steps
        self.info_spec = dict(info_keys or {})
        self.metadata = dict(getattr(inner, "metadata", None) or {})
        self._options = {"max_episode_steps": max_episode_steps, **(options or {})}
        self._elapsed = 0

    @property
    def task_options(self) -> dict[str, Any]:
        """EnvPool's options of this task, defaults included (the pool's `config` lists them)."""
        return dict(self._options)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        obs, info = self.inner.reset(seed=seed, options=options)
        self._elapsed = 0
        obs = self._convert(obs)
        return (self._stack.reset(obs) if self._stack else obs), self._info(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.inner.step(action)
        self._elapsed += 1
        limit = self.max_episode_steps
        truncated = bool(truncated or (limit is not None and self._elapsed >= limit)) and not terminated
        obs = self._convert(obs)
        return (self._stack.step(obs) if self._stack else obs), float(reward), bool(terminated), truncated, \
            self._info(info)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        return {k: info[k] for k in self.info_spec if k in info}

    def render(self) -> Any:
        return self.inner.render()

    def close(self) -> None:
        self.inner.close()
