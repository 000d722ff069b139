"""EnvPool's top-level functions on seedpool: `make`, `make_gym`, `make_gymnasium`, `make_dm`,
`make_spec`, `list_all_envs`, `register` (`envpool.registration` under the shim).

They follow EnvPool's argument contract, not `seedpool.make`'s: `make` needs `env_type`,
the default seed is EnvPool's 42, `batch_size=0` means every env, and an argument EnvPool
refuses raises `EnvPoolArgumentError`, which is both the `AssertionError` EnvPool raises and
a `ValueError` carrying seedpool's message. `seedpool.make` itself keeps its own defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs.make import make as make_pool
from seedpool.compat.envpool.actions import GymnasiumPool
from seedpool.compat.envpool.dm import DMPool
from seedpool.compat.envpool.python.protocol import DMEnvPool, GymnasiumEnvPool
from seedpool.compat.envpool.spec import EnvSpec
from seedpool.compat.envpool.tasks import ALIASES, OWN, Factory, task_of
from seedpool.envs import registry as seedpool_registry
from seedpool.envs.families import packaged
from seedpool.envs.envpool_api import PoolSpec, pool_config
from seedpool.envs.spec import resolve
from seedpool.errors import ConfigError

__all__ = ["EnvPoolArgumentError", "make", "make_gym", "make_gymnasium", "make_dm", "make_spec",
           "list_all_envs", "register"]

DEFAULT_SEED = 42  # EnvPool's default; seedpool.make's is 0
# seedpool.make's backend for pools made here (a `backend=` argument overrides it). "auto"
# measures the task; the conformance suite sets "serial" to run beside other jobs.
BACKEND = "auto"
_INT32 = 2**31
# EnvPool's rendering options: its pools render one env; seedpool's pools do not (render()
# says what to use), and rendering never changes results, so they are accepted.
_RENDER_OPTIONS = ("render_mode", "render_env_id", "render_width", "render_height", "render_camera_id")
_USER_IDS: list[str] = []  # ids added by register(), for list_all_envs()


class EnvPoolArgumentError(ConfigError, AssertionError):
    """An argument EnvPool's make refuses: an `AssertionError` as in EnvPool, and a
    `ConfigError` (a `ValueError`) as seedpool's own argument errors."""


def make(task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool:
    """EnvPool's `make`: env_type "gym" or "gymnasium" (Gymnasium's API) or "dm" (dm_env's)."""
    if env_type == "dm":
        return make_dm(task_id, **kwargs)
    if env_type in ("gym", "gymnasium"):
        return make_gymnasium(task_id, **kwargs)
    raise EnvPoolArgumentError(f"env_type must be 'dm', 'gym' or 'gymnasium', got {env_type!r}")


def make_gym(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """A pool with Gymnasium's API (EnvPool's gym API is Gymnasium's since 1.0)."""
    return make_gymnasium(task_id, **kwargs)


def make_gymnasium(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """A seedpool pool of `task_id` (a seedpool id, a gymnasium id, one added by register, or
    one of EnvPool's own ids: see tasks.py)."""
    options = _options(kwargs, task_id)
    options.setdefault("backend", BACKEND)
    try:
        task, options = task_of(task_id, options)
        pool = make_pool(task, **options)
    except ValueError as err:
        raise EnvPoolArgumentError(str(err)) from err
    # seedpool.make builds seedpool's pool (its layout logic stays in one place); the EnvPool
    # names' pool only reads actions as EnvPool does and holds no state of its own, so the
    # new pool's class is switched rather than make() duplicated.
    pool.__class__ = GymnasiumPool
    if isinstance(task, Factory):  # EnvPool's options as given (frame_stack, ...) in the config
        pool.config.update(task.shown)
    # The pool is new: its spec may be replaced; it names EnvPool's id, not the one built.
    pool.spec = replace(EnvSpec.of_pool_spec(PoolSpec.of(pool.task, pool.config)), id=task_id)
    return pool


def make_dm(task_id: str, **kwargs: Any) -> DMEnvPool:
    """A pool with dm_env's TimeStep API (see seedpool/compat/envpool/dm.py)."""
    pool = make_gymnasium(task_id, **kwargs)
    return DMPool(pool, pool.spec)


def make_spec(task_id: str, **kwargs: Any) -> EnvSpec:
    """The spec a pool of `task_id` made with these options would have (one env is built to
    read the spaces, then closed)."""
    try:
        task_fn, options = task_of(task_id, _options(kwargs, task_id))
        engine = {k: options.pop(k) for k in ("num_envs", "batch_size", "seed", "num_threads") if k in options}
        options.pop("thread_affinity_offset", None)
        limit = options.pop("max_episode_steps", None)
        # A factory from tasks.py has the task's options bound already.
        task = resolve(task_fn, max_episode_steps=limit, **({} if callable(task_fn) else options))
    except ValueError as err:
        raise EnvPoolArgumentError(str(err)) from err
    try:
        num_envs = engine.get("num_envs", 1)
        batch_size = engine.get("batch_size") or num_envs
        config = pool_config(task, num_envs, batch_size, "auto", engine.get("num_threads") or 0,
                             "next_step", {"seed": engine.get("seed"), **getattr(task_fn, "shown", {}), **options})
        return replace(EnvSpec.of_pool_spec(PoolSpec.of(task, config)), id=task_id)
    finally:
        if task.probe is not None:
            task.probe.close()


def list_all_envs() -> list[str]:
    """Every id make accepts by name: seedpool's own (Atari, MinAtar, and those of the families
    on Python packages whose package is installed: dm_control, robotics, ...), EnvPool's own ids that
    seedpool builds (tasks.py), those added with `register`, and gymnasium's registered ids
    (some need gymnasium's extras installed)."""
    own = {i for i in seedpool_registry.registered_ids() if packaged.installed(seedpool_registry.find(i))}
    return sorted(own | set(ALIASES) | set(OWN) | set(_USER_IDS) | set(gym.registry))


def register(task_id: str, entry_point: str | Callable[..., gym.Env], aliases: Sequence[str] = (),
             **kwargs: Any) -> None:
    """Add your own env under an EnvPool-style id (and `aliases`): `entry_point` is a
    "module:Class" string or a callable returning a gymnasium.Env; `kwargs` are its default
    options (`max_episode_steps` too). EnvPool's own form (an import path and the names of
    its C++ spec and pool classes) has no meaning here and is refused."""
    if "spec_cls" in kwargs or "dm_cls" in kwargs or "gymnasium_cls" in kwargs:
        raise EnvPoolArgumentError(
            "register(task_id, import_path, spec_cls, dm_cls, gymnasium_cls) registers EnvPool's C++ "
            "classes; under seedpool pass a gymnasium env instead: register(task_id, "
            "entry_point='my_module:MyEnv', **default_options)")
    limit = kwargs.pop("max_episode_steps", None)
    for name in (task_id, *aliases):
        if name in gym.registry or name in ALIASES or name in OWN or seedpool_registry.find(name) is not None:
            raise EnvPoolArgumentError(f"{name!r} is already registered")
        gym.register(name, entry_point=entry_point, max_episode_steps=limit, kwargs=dict(kwargs))
        _USER_IDS.append(name)


def _options(kwargs: dict[str, Any], task_id: str) -> dict[str, Any]:
    """EnvPool's make arguments as seedpool.make's (a new dict; the caller's is not changed),
    with EnvPool's checks."""
    options = dict(kwargs)
    pixels = options.get("from_pixels") and packaged.renders(seedpool_registry.find(task_id))
    for key in _RENDER_OPTIONS:
        if not (pixels and key in packaged.PIXEL_OPTIONS):  # a family that renders takes its frame size
            options.pop(key, None)
    if not pixels and options.pop("from_pixels", False):
        raise EnvPoolArgumentError("from_pixels=True renders MuJoCo tasks in EnvPool's C++ engine; "
                                   "seedpool does not render pools (wrap your env with gymnasium's "
                                   "AddRenderObservation and pass it as a factory)")
    num_envs = options.setdefault("num_envs", 1)
    if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise EnvPoolArgumentError(f"num_envs must be an int >= 1, got {num_envs!r}")
    batch_size = options.pop("batch_size", 0)
    if not isinstance(batch_size, (int, np.integer)) or not 0 <= batch_size <= num_envs:
        raise EnvPoolArgumentError(f"batch_size must be an int in [0, num_envs={num_envs}] "
                                   f"(0: every env), got {batch_size!r}")
    if batch_size:
        options["batch_size"] = int(batch_size)
    players = options.pop("max_num_players", 1)
    if not isinstance(players, (int, np.integer)) or players < 1:
        raise EnvPoolArgumentError(f"max_num_players must be an int >= 1, got {players!r}")
    seed = options.pop("seed", DEFAULT_SEED)
    env_seed = options.pop("env_seed", None)
    if env_seed is not None:
        seed = env_seed
    options["seed"] = _seed(seed, int(num_envs))
    return options


def _seed(seed: Any, num_envs: int) -> int | list[int]:
    """EnvPool's seed checks: an int32, or one int32 per env."""
    if isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):
        seeds = [int(s) for s in np.asarray(seed).reshape(-1)]
        if len(seeds) != num_envs:
            raise EnvPoolArgumentError(f"a seed list needs one seed per env ({num_envs}), got {len(seeds)}")
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        seeds = [int(seed)]
    else:
        raise EnvPoolArgumentError(f"seed must be an int or a list of ints, got {seed!r}")
    bad = [s for s in seeds if not -_INT32 <= s < _INT32]
    if bad:
        raise EnvPoolArgumentError(f"seeds must be in int32's range, as in EnvPool, got {bad}")
    if any(s < 0 for s in seeds):  # EnvPool takes negative int32 seeds; seedpool's are >= 0
        raise EnvPoolArgumentError(f"seeds must be >= 0 under seedpool, got {[s for s in seeds if s < 0]}")
    return seeds[0] if isinstance(seed, (int, np.integer)) else seeds


class AtariEnvSpec(EnvSpec):
    """`envpool.atari.AtariEnvSpec`: an Atari spec from EnvPool's config form, whose `task` is
    the ROM name ("pong", "space_invaders"): `AtariEnvSpec(AtariEnvSpec.gen_config(task=...))`."""

    @staticmethod
    def gen_config(**kwargs: Any) -> dict[str, Any]:
        """EnvPool's config of options; here the options themselves (checked when the spec is made)."""
        return dict(kwargs)

    def __init__(self, config: dict[str, Any]):
        """The spec of the Atari id of `config["task"]` with the other options."""
        options = dict(config)
        rom = options.pop("task", "pong")
        task_id = "".join(word.capitalize() for word in str(rom).split("_")) + "-v5"
        made = make_spec(task_id, **options)
        super().__init__(**{f.name: getattr(made, f.name) for f in fields(EnvSpec)})
