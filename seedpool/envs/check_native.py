"""`check_native_env`: does a native family play the same episodes as its single-env version?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs.native.base import NativeEnv
from seedpool.envs.registry import family_class
from seedpool.envs.spec import peel


class NativeMismatch(AssertionError):
    """A native family and its single-env version disagreed; the message says where."""


@dataclass
class CheckReport:
    """What a passing check compared."""

    steps: int  # pool steps (each steps every env)
    episodes: int  # episodes that ended, over all envs
    max_obs_diff: float  # the largest absolute observation difference seen


def check_native_env(
    native: type[NativeEnv] | str,
    reference: Callable[[], gym.Env] | None = None,
    num_envs: int = 4,
    steps: int = 2000,
    seed: int = 0,
    autoreset: str = "next_step",
    atol: float = 1e-5,
    actions: Callable[[np.random.Generator, int], np.ndarray] | None = None,
    **options: Any,
) -> CheckReport:
    """Step a native family and its single-env version side by side and compare them.

    Both run through seedpool's pool API with the same seeds (env i: `seed + i`), the same
    time limit (the family's; a TimeLimit wrapper on the reference is removed, as the engine
    removes gymnasium's from ids) and autoreset mode, and the same random actions (sampled from the family's
    action space seeded with `seed`, or drawn by `actions(rng, num_envs)`): the reference
    as one `reference()` env per env id on the Python-env path, the family natively.
    Observations and rewards must agree within `atol`; terminations, truncations and
    episode lengths exactly. `native`: a NativeEnv subclass, or a registered native id
    (then `reference` defaults to `gymnasium.make(id, **options)`, without the
    family's `native_options`). `options` go to
    the family; a `reference` you pass builds its env with the matching options itself.
    Raises NativeMismatch naming the step, env and field; returns a CheckReport.
    """
    from seedpool.envs.make import make  # make imports this package: import it on use

    if isinstance(native, str):
        task_id = native
        native = family_class(task_id)
        if reference is None:
            gym_options = {k: v for k, v in options.items() if k not in native.native_options}
            reference = lambda: gym.make(task_id, **gym_options)  # noqa: E731
    if reference is None:
        raise ValueError("reference: a zero-argument callable returning the single env to compare with")
    fast = make(native, num_envs=num_envs, seed=seed, autoreset=autoreset, **options)
    limit = fast.task.max_episode_steps
    bare = reference

    def reference_env() -> gym.Env:  # the engine counts the time limit for both, by one rule
        return peel(bare())[0]

    slow = make([reference_env] * num_envs, seed=seed, autoreset=autoreset, backend="serial", native=False,
                max_episode_steps=limit)
    try:
        return _compare(fast, slow, steps, seed, atol, actions)
    finally:
        fast.close()
        slow.close()


def _compare(fast: Any, slow: Any, steps: int, seed: int, atol: float, actions: Any) -> CheckReport:
    obs_f, _ = fast.reset()
    obs_s, _ = slow.reset()
    worst = _close("obs", -1, obs_f, obs_s, atol, 0.0)
    space = fast.single_action_space
    space.seed(seed)
    rng = np.random.default_rng(seed)
    n = fast.num_envs
    episodes = 0
    for t in range(steps):
        act = actions(rng, n) if actions is not None else np.stack([space.sample() for _ in range(n)])
        got, want = fast.step(act), slow.step(act)
        worst = _close("obs", t, got[0], want[0], atol, worst)
        _close("reward", t, got[1], want[1], atol, 0.0)
        for k, name in ((2, "terminated"), (3, "truncated")):
            _same(name, t, got[k], want[k])
        _same("elapsed_step", t, got[4]["elapsed_step"], want[4]["elapsed_step"])
        episodes += int(np.sum(got[2] | got[3]))
    return CheckReport(steps=steps, episodes=episodes, max_obs_diff=worst)


def _close(name: str, t: int, got: np.ndarray, want: np.ndarray, atol: float, worst: float) -> float:
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    bad = ~(diff <= atol)  # NaN counts as a difference
    if bad.any():
        env = int(np.argwhere(bad)[0][0])
        raise NativeMismatch(f"{name} differs at step {t} (-1: reset), env {env}: native {got[env]!r}, "
                             f"single env {want[env]!r} (atol={atol})")
    return max(worst, float(diff.max(initial=0.0)))


def _same(name: str, t: int, got: np.ndarray, want: np.ndarray) -> None:
    if not np.array_equal(got, want):
        env = int(np.flatnonzero(got != want)[0])
        raise NativeMismatch(f"{name} differs at step {t}, env {env}: native {got[env]!r}, single env {want[env]!r}")
