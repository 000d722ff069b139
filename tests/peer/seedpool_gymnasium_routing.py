"""pytest plugin: Gymnasium's own `tests/vector`, unchanged, run against `seedpool.make_vec`.

Loaded with `-p seedpool_gymnasium_routing` (this folder on `PYTHONPATH`) before the test
modules import `gymnasium.vector`. It only renames: `gymnasium.vector.SyncVectorEnv` and
`AsyncVectorEnv` (and so `gymnasium.make_vec`, which builds through them) become functions
that map their arguments onto `seedpool.make_vec`. Nothing else is replaced or faked:
every assertion runs on what seedpool returns.

Argument mapping:
- `env_fns` -> the list task (env i built by `env_fns[i]`, with its wrappers);
- `autoreset_mode` -> `autoreset` ("next_step", "same_step", "disabled");
- `observation_mode` other than "same" -> passed on as `observation_mode=`;
- nothing for seeding: `make_vec`, as gymnasium, seeds envs only at `reset(seed=...)`;
- `copy`, `shared_memory`, `context`, `daemon`: how gymnasium moves data; seedpool always
  returns fresh arrays (gymnasium's `copy=True`) through its own shared memory;
- `worker` (a custom worker function, gymnasium's internals) is passed on and refused.

`SEEDPOOL_PEER_BACKEND` picks the backend ("serial" by default; "thread", "process").
Tests of gymnasium's internals are skipped by name (SKIPS), with a one-line reason each.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import gymnasium.vector
import pytest
from gymnasium.vector import AutoresetMode

import seedpool
from peer_routing import count_routed_builds, pytest_sessionfinish, skip_by_name  # noqa: F401 - a hook

BACKEND = os.environ.get("SEEDPOOL_PEER_BACKEND", "serial")

_AUTORESET = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}

# Test name (as pytest names it, parameters included or not) -> why it does not apply.
SKIPS: dict[str, str] = {
    "test_metadata_sync_vector_env": "reads SyncVectorEnv's `envs` list",
    "test_check_spaces_sync_vector_env": "matches an error text that names SyncVectorEnv itself",
    "test_async_vector_subenv_error": "counts the warnings AsyncVectorEnv's workers give as they shut down",
    "test_custom_space_async_vector_env_shared_memory": "expects gymnasium's shared memory to refuse a custom "
                                                        "space (seedpool's takes it)",
}


def _make(env_fns: Iterable[Any], observation_mode: Any, autoreset_mode: Any, **extra: Any):
    kwargs: dict[str, Any] = dict(extra)
    if not (isinstance(observation_mode, str) and observation_mode == "same"):
        kwargs["observation_mode"] = observation_mode
    mode = AutoresetMode(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
    return seedpool.make_vec(list(env_fns), backend=BACKEND, autoreset=_AUTORESET.get(mode, mode), **kwargs)


@count_routed_builds
def SyncVectorEnv(env_fns, copy=True, observation_mode="same",  # noqa: N802 - the routed name
                  autoreset_mode=AutoresetMode.NEXT_STEP):
    """gymnasium.vector.SyncVectorEnv(...) -> seedpool.make_vec(...)."""
    return _make(env_fns, observation_mode, autoreset_mode)


@count_routed_builds
def AsyncVectorEnv(env_fns, shared_memory=True, copy=True, context=None,  # noqa: N802
                   daemon=True, worker=None, observation_mode="same",
                   autoreset_mode=AutoresetMode.NEXT_STEP):
    """gymnasium.vector.AsyncVectorEnv(...) -> seedpool.make_vec(...)."""
    extra = {} if worker is None else {"worker": worker}
    return _make(env_fns, observation_mode, autoreset_mode, **extra)


def pytest_configure(config: pytest.Config) -> None:
    """Route the classes before any test module imports them."""
    gymnasium.vector.SyncVectorEnv = SyncVectorEnv
    gymnasium.vector.AsyncVectorEnv = AsyncVectorEnv


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, by name, the tests of gymnasium's internals (SKIPS)."""
    skip_by_name(items, SKIPS, "gymnasium internals")
