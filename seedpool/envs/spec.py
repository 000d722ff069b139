"""What the engine needs to know about a task before it starts any worker."""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

import gymnasium as gym
import numpy as np

from seedpool.envs import registry, spaces
from seedpool.envs.errors import SpaceMismatchError
from seedpool.errors import ConfigError, ConfigTypeError, UnknownEnvError

EnvFn = Callable[[], gym.Env]
Task = Union[str, EnvFn, Sequence[EnvFn]]

# Wrappers that `gymnasium.make` adds and the engine replaces with its own, cheaper bookkeeping:
# the time limit is counted by the engine (it reports elapsed_step anyway) and the order/env
# checks are the engine's own validation. Removing them saves three wrapper calls per step.
_PEELABLE = (
    gym.wrappers.TimeLimit,
    gym.wrappers.OrderEnforcing,
    gym.wrappers.PassiveEnvChecker,
)


@dataclass
class TaskSpec:
    """A task resolved to a factory, its spaces and the engine-side options."""

    name: str
    env_fn: EnvFn
    observation_space: gym.Space
    action_space: gym.Space
    max_episode_steps: int | None
    info_spec: dict[str, np.dtype] = field(default_factory=dict)
    prefer_processes: bool = False  # a family known to hold the GIL while stepping
    probe: gym.Env | None = None  # the env built to read the spaces; the serial backend reuses it
    env_fns: list[EnvFn] | None = None  # one factory per env id (a list of thunks), else None
    metadata: dict[str, Any] = field(default_factory=dict)  # env 0's, as gymnasium's vector envs report it
    render_mode: str | None = None  # env 0's
    # "same": every env has env 0's observation space; "different" (or gymnasium's tuple of a
    # batched and a single space): spaces may differ in bounds, not in shapes and dtypes.
    observation_mode: Any = "same"
    native: Any = None  # a NativeEnv family stepping every env on arrays (envs/native/), else None

    def build(self, i: int) -> gym.Env:
        """A new env for env id `i`: from its own factory when the task was a list of them
        (its spaces checked against env 0's), else from `env_fn`."""
        if self.env_fns is None:
            return self.env_fn()
        env = self.env_fns[i]()
        _check_same_spaces(env, self, i)
        return env

    def probe_fits(self, i: int) -> bool:
        """Whether the probe env may serve as env `i` (with one factory per env: only env 0)."""
        return self.env_fns is None or i == 0


def _check_same_spaces(env: Any, spec: TaskSpec, i: int) -> None:
    """Raise a SpaceMismatchError if env `i`, built by its own factory, cannot be batched
    with env 0 (its observation space may differ in bounds with observation_mode="different")."""
    if not isinstance(env, gym.Env):
        raise ConfigTypeError(f"env_fns[{i}] returned {type(env).__name__}, expected a gymnasium.Env")
    mine, first = env.observation_space, spec.observation_space
    if spec.observation_mode == "same" and mine != first:
        env.close()
        raise SpaceMismatchError(
            f"env_fns[{i}] built an env whose observation space {mine} differs from env_fns[0]'s {first}: "
            "the sub-environments observation spaces are not equivalent. If this is intentional, use "
            "`observation_mode='different'` instead (spaces of the same shapes and dtypes)")
    if spec.observation_mode != "same" and not spaces.same_layout(mine, first):
        env.close()
        raise SpaceMismatchError(
            f"env_fns[{i}] built an env whose observation space {mine} has other shapes or dtypes than "
            f"env_fns[0]'s {first}: with observation_mode='different' the spaces may differ only in bounds")
    if env.action_space != spec.action_space:
        env.close()
        raise SpaceMismatchError(f"env_fns[{i}] built an env whose action space {env.action_space} differs "
                                 f"from env_fns[0]'s {spec.action_space}: every env of a pool must have the "
                                 "same action space")


OBSERVATION_MODES = ("same", "different")


def check_observation_mode(mode: Any) -> None:
    """A ValueError unless `mode` is "same", "different" or a (batched, single) pair of spaces."""
    pair = isinstance(mode, tuple) and len(mode) == 2 and all(isinstance(s, gym.Space) for s in mode)
    if not pair and not (isinstance(mode, str) and mode in OBSERVATION_MODES):
        raise ConfigError("Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and "
                          f"batch observation space, actual got {mode}")


class _ValidatedDiscrete(gym.spaces.Discrete):
    """A Discrete space whose `contains` trusts what the engine already checked.

    Envs commonly `assert self.action_space.contains(action)` on every step; gymnasium's
    general check costs a sizeable share of a cheap env's step (CartPole's). The pool
    validates every action before it reaches a worker and delivers np.int64 values in range,
    for which this answers exactly what `Discrete.contains` would, with two comparisons.
    """

    def contains(self, x: Any) -> bool:
        if type(x) is np.int64:
            return int(self.start) <= int(x) < int(self.start) + int(self.n)
        return super().contains(x)


def _trust_engine_actions(env: gym.Env) -> gym.Env:
    """Give an env the engine built from a task id a validated copy of its Discrete action
    space (same bounds and random state).

    Only for envs built from an id: the env is then the engine's own. The user's objects are
    never touched: not the space object itself (envs commonly share one, as a class or module
    attribute, and gymnasium tells spaces apart by exact class), and not the envs a user's
    factory returns. Those keep gymnasium's own `contains`.
    """
    inner = env.unwrapped
    space = getattr(inner, "action_space", None)
    if type(space) is gym.spaces.Discrete:
        fresh = copy.deepcopy(space)  # ours alone: its class may change, its RNG is not shared
        fresh.__class__ = _ValidatedDiscrete
        try:
            inner.action_space = fresh
        except AttributeError:  # a read-only property: the env keeps gymnasium's check
            pass
    return env


def _trusting(env_fn: EnvFn) -> EnvFn:
    def make() -> gym.Env:
        return _trust_engine_actions(env_fn())

    return make


def _peel(env: gym.Env) -> tuple[gym.Env, int | None]:
    """Remove the outer wrappers the engine replaces; return the env and its time limit."""
    limit = None
    while isinstance(env, _PEELABLE):
        if isinstance(env, gym.wrappers.TimeLimit):
            limit = env._max_episode_steps
        env = env.env
    return env, limit


peel = _peel  # public for the native checker, which treats a reference env as the engine does


def _gym_factory(task_id: str, options: dict[str, Any]) -> EnvFn:
    def make() -> gym.Env:
        return _peel(gym.make(task_id, disable_env_checker=True, **options))[0]

    return make


def _unknown_id(task_id: str, err: Exception) -> ValueError:
    if isinstance(err, gym.error.DependencyNotInstalled) and "mujoco" in str(err).lower():
        # Gymnasium's MuJoCo tasks (HalfCheetah-v5, ...) are registered without the package installed.
        return ConfigError(f"{task_id} is one of Gymnasium's MuJoCo tasks and needs the mujoco package: "
                           f"pip install 'seedpool[mujoco]' ({err})")
    known = registry.registered_ids() + list(gym.registry.keys())
    close = difflib.get_close_matches(task_id, known, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownEnvError(f"unknown task id {task_id!r} ({err}).{hint}")


def _info_spec(env: gym.Env, info_keys: dict[str, Any] | None) -> dict[str, np.dtype]:
    spec = {k: np.dtype(v) for k, v in getattr(env.unwrapped, "info_spec", {}).items()}
    reserved = {"env_id", "elapsed_step", "episode_return", "episode_length", "final_obs"}
    for k, v in (info_keys or {}).items():
        if k in reserved:
            raise ConfigError(f"info key {k!r} is reserved by the engine")
        spec[k] = np.dtype(v)
    return spec


def resolve(
    task: Task,
    max_episode_steps: int | None = None,
    info_keys: dict[str, Any] | None = None,
    probe: gym.Env | None = None,
    **options: Any,
) -> TaskSpec:
    """Resolve an id, a callable or a list of callables (one per env) to a TaskSpec, building
    one env to read its spaces (`probe`: an env the callable task already built, used instead)."""
    if isinstance(task, (list, tuple)):
        return _resolve_env_fns(list(task), max_episode_steps, info_keys, options)
    prefer_processes = False
    if callable(task):
        if options:
            raise ConfigTypeError(
                f"task options {sorted(options)} only apply to task ids; "
                "pass them to your env factory instead"
            )
        env_fn, name = task, getattr(task, "__name__", type(task).__name__)
        probe, limit = (env_fn() if probe is None else probe), None
    elif isinstance(task, str):
        name, family = task, registry.find(task)
        if family is not None:
            factory = registry.family_factory(family)
            opts = {**family.defaults, **options}
            if max_episode_steps is not None and family.time_limit_option:
                opts[family.time_limit_option] = max_episode_steps  # the env counts it, not the engine
                max_episode_steps = None
            env_fn = lambda: factory(task, **opts)  # noqa: E731
            prefer_processes = family.prefer_processes
            probe, limit = env_fn(), None
        else:
            env_fn = _gym_factory(task, options)
            try:
                probe, limit = _peel(gym.make(task, disable_env_checker=True, **options))
            except (gym.error.Error, ModuleNotFoundError) as err:  # "module:Id" of a module not there
                raise _unknown_id(task, err) from None
    else:
        raise ConfigTypeError(f"task must be an id string or a zero-argument callable, got {type(task).__name__}")
    if not isinstance(probe, gym.Env):
        raise ConfigTypeError(f"the env factory returned {type(probe).__name__}, expected a gymnasium.Env")
    if max_episode_steps is not None and max_episode_steps <= 0:
        raise ConfigError(f"max_episode_steps must be positive, got {max_episode_steps}")
    action_space = copy.deepcopy(probe.action_space)  # users see a space of their own
    if isinstance(task, str):  # the engine built these envs: they may trust its validation
        _trust_engine_actions(probe)
        env_fn = _trusting(env_fn)
    return TaskSpec(
        name=name,
        env_fn=env_fn,
        observation_space=probe.observation_space,
        action_space=action_space,
        max_episode_steps=max_episode_steps if max_episode_steps is not None else limit,
        info_spec=_info_spec(probe, info_keys),
        prefer_processes=prefer_processes,
        probe=probe,
        metadata=dict(getattr(probe, "metadata", None) or {}),
        render_mode=getattr(probe, "render_mode", None),
    )


def _resolve_env_fns(env_fns: list[Any], max_episode_steps: int | None,
                     info_keys: dict[str, Any] | None, options: dict[str, Any]) -> TaskSpec:
    """A TaskSpec whose env i is built by `env_fns[i]` (gymnasium's `SyncVectorEnv(env_fns)`
    convention); env 0 is the probe, the others are checked against it where they are built."""
    if not env_fns or not all(callable(fn) for fn in env_fns):
        raise ConfigTypeError("a list task must be a non-empty list of zero-argument callables returning "
                              "gymnasium.Env, e.g. [make_env(i) for i in range(num_envs)]")
    spec = resolve(env_fns[0], max_episode_steps=max_episode_steps, info_keys=info_keys, **options)
    spec.env_fns = env_fns
    return spec
