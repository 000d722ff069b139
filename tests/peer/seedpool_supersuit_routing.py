"""pytest plugin: SuperSuit's own vector tests, unchanged, run against `seedpool.compat.supersuit`.

Loaded with `-p seedpool_supersuit_routing` (this folder on `PYTHONPATH`). It only renames:
the name `supersuit`, which the tests import from (`from supersuit import concat_vec_envs_v1`,
`import supersuit as ss`), becomes the face, as a user's one changed line makes it. SuperSuit's
submodules stay SuperSuit's (a test imports its gymnasium `frame_skip_gym` wrapper from
`supersuit.generic_wrappers.frame_skip`; the face hands SuperSuit's wrappers on from them).
Tests that check what seedpool does differently by design are skipped by name (SKIPS).
"""

from __future__ import annotations

import sys

import pytest
import supersuit  # noqa: F401 - SuperSuit itself, with its submodules, before the name is taken

import seedpool.compat.supersuit as face
from peer_routing import count_routed_builds, pytest_sessionfinish, skip_by_name  # noqa: F401 - a hook

# Test name -> why it does not apply to the face.
SKIPS: dict[str, str] = {
    "test_env_black_death_assertion": "checks that SuperSuit refuses an env whose agents leave before it ends "
                                      "(its AssertionError); seedpool carries such agents as inactive rows by design",
}


# The face's vector constructors, counted: which tests built a vector env through the face.
ROUTED = ("pettingzoo_env_to_vec_env_v1", "concat_vec_envs_v1")


def pytest_configure(config: pytest.Config) -> None:
    """Route the name before any test module imports it."""
    for name in ROUTED:  # in this child pytest only: it exits when the suite is done
        setattr(face, name, count_routed_builds(getattr(face, name)))
    sys.modules["supersuit"] = face


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_by_name(items, SKIPS, "seedpool by design")
