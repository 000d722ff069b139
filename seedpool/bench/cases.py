"""The engines under test, as cases, the task groups, and the throughput targets.

Case names are those of the reference measurements of the peer engines on this machine
class, so figures compare across reports: `loop`, `gym_sync`, `gym_async`, `envpool_sync`,
`envpool_async`, `ale_vec`, `ale_vec_async`, `seedpool_<backend>[_async]`. For an `_async`
case, N is the batch size and the engine holds 2N envs.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import gymnasium as gym

from seedpool.bench.envs import UnevenEnv
from seedpool.bench.harness import Case, Group, Stepper, Unavailable
from seedpool.bench.steppers import AsyncStepper, LoopStepper, SyncStepper, closing_on_error
from seedpool.envs.make import usable_cores



def peer_threads(num_envs: int) -> int:
    """Threads for EnvPool and ale-py's vector env: one per usable core, at most one per env.

    On the 2-vCPU machine class the peer reference figures come from, that is 2 threads.
    """
    cores = usable_cores()
    return max(1, min(cores, num_envs))

SEEDPOOL_BACKENDS = ("serial", "thread", "process", "auto")


def _require(module: str) -> ModuleType:
    """Import an optional peer, or mark the case `n/a`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module.split('.')[0]} not installed") from exc


def make_pong_matched() -> gym.Env:
    """gymnasium's Pong with the observation EnvPool emits: 4x84x84 gray, frame skip 4, noop 30."""
    ale_py = _require("ale_py")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, grayscale_obs=True, noop_max=30)
    return gym.wrappers.FrameStackObservation(env, 4)


# --- peers -----------------------------------------------------------------------------


def loop_case(make_env: Callable[[], gym.Env], n: int) -> Case:
    """A Python for-loop over `n` envs in this process."""

    def setup() -> Stepper:
        envs = []
        try:
            envs.extend(make_env() for _ in range(n))
            return LoopStepper(envs)
        except BaseException:
            for env in envs:
                env.close()
            raise

    return Case("loop", setup, n)


def gym_case(make_env: Callable[[], gym.Env], n: int, asynchronous: bool) -> Case:
    """gymnasium's SyncVectorEnv, or AsyncVectorEnv with shared memory, over `n` envs."""

    def setup() -> Stepper:
        if asynchronous:
            build = functools.partial(gym.vector.AsyncVectorEnv, [make_env] * n, shared_memory=True)
        else:
            build = functools.partial(gym.vector.SyncVectorEnv, [make_env] * n)
        return closing_on_error(build, lambda vec: _reset_then(vec, vec.single_action_space, n))

    return Case("gym_async" if asynchronous else "gym_sync", setup, n)


def envpool_case(task_id: str, batch: int, asynchronous: bool, **options: Any) -> Case:
    """EnvPool: sync (num_envs = batch) or async (2 x batch envs, `send(action, env_id)`)."""
    num_envs = 2 * batch if asynchronous else batch

    def setup() -> Stepper:
        envpool = _require("envpool")
        build = functools.partial(
            _quietly, envpool.make, task_id, env_type="gymnasium", num_envs=num_envs, batch_size=batch,
            num_threads=peer_threads(num_envs), seed=0, **options,
        )
        if asynchronous:
            return closing_on_error(build, lambda env: _async_reset_then(env, env.action_space, batch))
        # EnvPool's reset takes env ids, not a seed: it is seeded at make.
        return closing_on_error(build, lambda env: _reset_then(env, env.action_space, batch, seeded=False))

    return Case("envpool_async" if asynchronous else "envpool_sync", setup, num_envs, threaded=True)


def ale_vec_case(game: str, batch: int, asynchronous: bool) -> Case:
    """ale-py's C++ vector env; async mode holds 2 x batch envs.

    Its async `step` is `send(actions)` then `recv()`, and `send` has no env_id argument:
    it acts for the envs of the last `recv`, so the sync stepper drives both modes.
    """
    num_envs = 2 * batch if asynchronous else batch

    def setup() -> Stepper:
        vector_env = _require("ale_py.vector_env")
        build = functools.partial(
            vector_env.AtariVectorEnv, game, num_envs=num_envs, batch_size=batch if asynchronous else 0,
            num_threads=peer_threads(num_envs), reward_clipping=False,
        )
        return closing_on_error(build, lambda vec: _reset_then(vec, vec.single_action_space, batch))

    return Case("ale_vec_async" if asynchronous else "ale_vec", setup, num_envs, threaded=True)


def _quietly(build: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`build(*args, **kwargs)` without warnings (EnvPool's spaces warn about float64 bounds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(*args, **kwargs)


# --- seedpool ---------------------------------------------------------------------------


def seedpool_case(task: str | Callable[[], gym.Env], batch: int, backend: str, asynchronous: bool,
                  **options: Any) -> Case:
    """seedpool's engine with one backend, sync (`step`) or async (2 x batch envs, `recv`/`send`)."""
    num_envs = 2 * batch if asynchronous else batch

    def setup() -> Stepper:
        import seedpool

        if not hasattr(seedpool, "make"):
            raise RuntimeError("seedpool.make is not defined yet")
        build = functools.partial(
            seedpool.make, task, num_envs=num_envs, batch_size=batch, backend=backend, seed=0, **options
        )
        if asynchronous:
            return closing_on_error(build, lambda p: _async_reset_then(p, p.single_action_space, batch))
        return closing_on_error(build, lambda p: _reset_then(p, p.single_action_space, batch))

    name = f"seedpool_{backend}_async" if asynchronous else f"seedpool_{backend}"
    return Case(name, setup, num_envs, threaded=backend == "thread")


def _reset_then(env: Any, action_space: gym.Space, batch: int, seeded: bool = True) -> Stepper:
    if seeded:
        env.reset(seed=0)
    else:
        env.reset()
    return SyncStepper(env, action_space, batch)


def _async_reset_then(pool: Any, action_space: gym.Space, batch: int) -> Stepper:
    pool.async_reset()
    return AsyncStepper(pool, action_space, batch)


def seedpool_cases(task: str | Callable[[], gym.Env], batch: int, backends: Sequence[str],
                   **options: Any) -> list[Case]:
    """seedpool's sync cases, then its async cases, for each backend."""
    return [seedpool_case(task, batch, b, False, **options) for b in backends] + [
        seedpool_case(task, batch, b, True, **options) for b in backends
    ]


# --- groups -----------------------------------------------------------------------------


def cartpole_group(n: int) -> Group:
    """CartPole-v1 at batch N: every engine, sync and async."""
    make_env = functools.partial(gym.make, "CartPole-v1")
    cases = [
        loop_case(make_env, n),
        gym_case(make_env, n, asynchronous=False),
        gym_case(make_env, n, asynchronous=True),
        envpool_case("CartPole-v1", n, asynchronous=False),
        envpool_case("CartPole-v1", n, asynchronous=True),
        *seedpool_cases("CartPole-v1", n, SEEDPOOL_BACKENDS),
    ]
    return Group(f"cartpole-{n}", f"CartPole-v1, N={n}", cases, baselines=("loop", "gym_async"))


def pong_group(n: int = 8) -> Group:
    """Pong-v5 with EnvPool-matched observations (4x84x84): N envs sync, 2N envs / batch N async."""
    cases = [
        gym_case(make_pong_matched, n, asynchronous=True),
        envpool_case("Pong-v5", n, asynchronous=False),
        envpool_case("Pong-v5", n, asynchronous=True),
        ale_vec_case("pong", n, asynchronous=False),
        ale_vec_case("pong", n, asynchronous=True),
        *seedpool_cases("Pong-v5", n, ("process", "auto")),
    ]
    return Group(f"pong-{n}", f"Pong-v5 (4x84x84, EnvPool defaults), N={n}", cases,
                 baselines=("envpool_sync", "envpool_async", "ale_vec_async"), frames_per_step=4)


def uneven_group(n: int = 8) -> Group:
    """The pure-Python uneven env (30 us of CPU per step, every tenth 10x): N envs."""
    cases = [
        loop_case(UnevenEnv, n),
        gym_case(UnevenEnv, n, asynchronous=True),
        *seedpool_cases(UnevenEnv, n, ("process", "auto")),
    ]
    return Group(f"uneven-{n}", f"Uneven pure-Python env (30 us/step, every 10th 10x), N={n}", cases,
                 baselines=("loop", "gym_async"))


@dataclass(frozen=True)
class Target:
    """A ratio the engine is held to: `case` ≥ `at_least` × `baseline`, both from group `group`."""

    group: str
    case: str
    baseline: str
    at_least: float
    why: str


TARGETS = (
    Target("cartpole-8", "seedpool_auto", "loop", 0.9, "cheap env at small N: step in-process"),
    Target("cartpole-32", "seedpool_auto", "loop", 1.25, "below what two processes flat out reach"),
    Target("cartpole-32", "seedpool_auto", "gym_async", 3.0, ""),
    Target("pong-8", "seedpool_auto", "envpool_sync", 0.9, "8 envs sync"),
    Target("pong-8", "seedpool_auto_async", "envpool_async", 0.9, "16 envs, batch 8"),
    Target("pong-8", "seedpool_auto_async", "seedpool_auto", 1.0, "async beats sync"),
    Target("pong-8", "seedpool_auto_async", "ale_vec_async", 1.0, "aim: past the best peer"),
    Target("uneven-8", "seedpool_auto_async", "gym_async", 1.5, "16 envs, batch 8 vs 8 envs"),
)
