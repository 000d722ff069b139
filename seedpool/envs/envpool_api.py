"""What scripts written for EnvPool expect around a pool: `envpool.make`'s engine options
(`env_type`, `num_threads`, ...), the pool's `config` dict and its `spec`, and the pool
methods EnvPool has that seedpool answers in its own way (`EnvPoolSurface`).

Everything here runs once, when a pool is made; nothing is on the step path.
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from seedpool.envs.spec import TaskSpec

ENV_TYPES = ("gymnasium", "gym", "dm")

_DM_REFUSED = (
    "env_type='dm' (dm_env's TimeStep API) is not supported: seedpool pools speak Gymnasium's "
    "API, as EnvPool's env_type='gymnasium' pools do. Use env_type='gymnasium': "
    "`obs, info = pool.reset()` and `obs, reward, terminated, truncated, info = pool.step(action)` "
    "instead of TimeStep(step_type, reward, discount, observation); step_type LAST is "
    "`terminated | truncated`, FIRST is the step after it, Atari's dm discount is "
    "info['discount'], and observation.env_id is info['env_id']"
)


def take_envpool_options(options: dict[str, Any], num_workers: int | None) -> int | None:
    """Remove EnvPool's engine options from `options` (make's task options) and apply them;
    returns the `num_workers` to use."""
    check_env_type(options.pop("env_type", "gymnasium"))
    threads = options.pop("num_threads", None)
    if threads is not None:
        if num_workers is not None:
            raise ValueError("pass num_workers or EnvPool's num_threads, not both")
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            raise ValueError(f"num_threads must be an int >= 0 (0: automatic), got {threads!r}")
        num_workers = threads or None
    options.pop("thread_affinity_offset", None)  # seedpool does not pin workers to cores
    if not options.pop("gym_reset_return_info", True):
        raise ValueError("gym_reset_return_info=False is not supported: reset() returns (obs, info), "
                         "as envpool >= 1.0 and Gymnasium do")
    return num_workers


def check_env_type(env_type: Any) -> None:
    """Accept EnvPool's Gymnasium API names; refuse dm_env's TimeStep API, saying what differs."""
    if env_type in ("gymnasium", "gym"):  # envpool >= 1.0 gives the Gymnasium API for both
        return
    if env_type == "dm":
        raise ValueError(_DM_REFUSED)
    raise ValueError(f"env_type must be one of {ENV_TYPES} (EnvPool's names), got {env_type!r}")


def pool_config(task: TaskSpec, num_envs: int, batch_size: int, backend: str, num_workers: int,
                autoreset: str, made_with: dict[str, Any]) -> dict[str, Any]:
    """EnvPool-style `config`: the pool's settings, then its task options (all of them, with
    their defaults, for envs that report them, as AtariEnv does)."""
    config: dict[str, Any] = {
        "task": task.name, "num_envs": num_envs, "batch_size": batch_size, "num_workers": num_workers,
        "backend": backend, "autoreset": autoreset, "seed": None,
        "max_episode_steps": task.max_episode_steps,
    }
    config.update(made_with)
    env = task.probe.unwrapped if task.probe is not None else None
    config.update(getattr(env, "task_options", {}))
    return config


@dataclass
class PoolSpec:
    """`pool.spec`, as EnvPool's: the task id, `config` as a named tuple (`spec.config.seed`),
    the single-env spaces; and what gymnasium wrappers read of a spec."""

    id: str
    config: Any
    observation_space: gym.Space
    action_space: gym.Space
    max_episode_steps: int | None = None
    reward_threshold: float | None = None
    additional_wrappers: tuple = field(default_factory=tuple)  # gymnasium.Wrapper.spec appends here

    @classmethod
    def of(cls, task: TaskSpec, config: dict[str, Any]) -> PoolSpec:
        """The spec of a pool of `task` made with `config`."""
        # rename=True: an option name that is no identifier becomes `_<index>`, not an error.
        values = collections.namedtuple("Config", list(config), rename=True)(*config.values())
        registered = gym.registry.get(task.name)  # a gymnasium id's registration, if any
        return cls(
            id=task.name,
            config=values,
            observation_space=task.observation_space,
            action_space=task.action_space,
            max_episode_steps=config.get("max_episode_steps"),
            reward_threshold=getattr(registered, "reward_threshold", None),
        )


class EnvPoolSurface:
    """EnvPool's pool methods that are not stepping: `len(pool)`, and the ones seedpool does not
    carry out (`seed`, `xla`, `render`), which say what to do instead. Mixed into `EnvPool`."""

    num_envs: int

    def __len__(self) -> int:
        """The number of envs (EnvPool's `len(pool)`; Tianshou reads it)."""
        return self.num_envs

    def seed(self, seed: Any = None) -> None:
        """EnvPool's abandoned `seed()`: only warns, as EnvPool's does."""
        warnings.warn("pool.seed() does nothing: pass seed= to make() or reset(seed=...)", UserWarning, stacklevel=2)

    def xla(self) -> Any:
        """EnvPool's JAX hook: not available, say what to use."""
        raise NotImplementedError(
            "xla() is EnvPool's JAX custom call into its C++ pool; seedpool's envs run in Python "
            "workers and have no XLA entry point. Call send()/recv() (or step()) from your JAX "
            "loop on host arrays instead")

    def render(self) -> Any:
        """Pools do not render: say what does."""
        raise NotImplementedError(
            "seedpool pools do not render. To watch an env, build one with render_mode='rgb_array' "
            "(e.g. gymnasium.make(id, render_mode='rgb_array'), or for Atari ids "
            "seedpool.envs.families.atari.make_atari(id, render_mode='rgb_array')) and call its render(); "
            "for a trained run, `seedpool eval RUN_DIR --video`"
        )
