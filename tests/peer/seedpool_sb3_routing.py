"""pytest plugin: Stable-Baselines3's own vec-env tests, unchanged, run against `seedpool.make_sb3`.

Loaded with `-p seedpool_sb3_routing` (this folder on `PYTHONPATH`). It only renames:
`DummyVecEnv` and `SubprocVecEnv` (where the tests and `make_vec_env` import them) become
functions that map their arguments onto `seedpool.make_sb3`:
- `env_fns` -> the list task (env i built by `env_fns[i]`);
- `DummyVecEnv` steps its envs in the caller's process: `backend="serial"`;
  `SubprocVecEnv` in worker processes: `backend="process"` (`start_method` is how SB3 starts
  them: ignored); `SEEDPOOL_PEER_BACKEND` sets one backend for both;
- nothing for seeding: `make_sb3`, as SB3, seeds envs only through `seed()` + `reset()`.
Nothing else is replaced: VecNormalize, VecMonitor, VecFrameStack, ... wrap what seedpool
returns. Tests of SB3's internals are skipped by name (SKIPS), with a one-line reason each.
"""

from __future__ import annotations

import os

import pytest
import stable_baselines3.common.env_util as env_util
import stable_baselines3.common.vec_env as vec_env

import seedpool
from peer_routing import count_routed_builds, pytest_sessionfinish, skip_by_name  # noqa: F401 - a hook

_FORCED = os.environ.get("SEEDPOOL_PEER_BACKEND")

# Test name -> why it does not apply (SB3's internals, not VecEnv behaviour).
SKIPS: dict[str, str] = {
    "test_subproc_start_method": "SubprocVecEnv's start_method (how SB3 starts its processes; seedpool forks)",
}


@count_routed_builds
def DummyVecEnv(env_fns):  # noqa: N802 - the routed name
    """stable_baselines3 DummyVecEnv(env_fns) -> seedpool.make_sb3(env_fns, backend="serial")."""
    return seedpool.make_sb3(list(env_fns), backend=_FORCED or "serial")


@count_routed_builds
def SubprocVecEnv(env_fns, start_method=None):  # noqa: N802
    """stable_baselines3 SubprocVecEnv(env_fns) -> seedpool.make_sb3(env_fns, backend="process")."""
    return seedpool.make_sb3(list(env_fns), backend=_FORCED or "process")


def pytest_configure(config: pytest.Config) -> None:
    """Route the classes before any test module imports them."""
    for module in (vec_env, env_util):
        module.DummyVecEnv = DummyVecEnv
        module.SubprocVecEnv = SubprocVecEnv


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip SB3's internals by name."""
    skip_by_name(items, SKIPS, "stable-baselines3 internals")
