"""pytest plugin: EnvPool's own tests, unchanged, run against seedpool through
`seedpool.install_as_envpool()`.

Loaded with `-p seedpool_envpool_routing` (this folder on `PYTHONPATH`): it installs the
shim before the test modules run `import envpool`, so every `envpool.make_gym(...)` they
call builds a seedpool pool (on the backend `SEEDPOOL_PEER_BACKEND`, "serial" by default).
Nothing else is replaced. Tests of EnvPool's internals (its
C++ spec classes) would be skipped by name (SKIPS), one line of reason each; long
determinism sweeps (LONG) are skipped unless SEEDPOOL_PEER_FULL=1.
"""

from __future__ import annotations

import os

import pytest

import seedpool
from peer_routing import pytest_sessionfinish  # noqa: F401 - a hook

# "<file>::<class>::<test>" (or "<file>::<test>" for every class of the file) -> why it does not apply.
# None today: EnvPool's own toy envs (Catch-v0, NChain-v0) are built by seedpool/envs/envpool_ids/toy.py.
SKIPS: dict[str, str] = {}


# Long determinism sweeps (thousands of steps of three pools per task), run with
# SEEDPOOL_PEER_FULL=1 (`python tests/peer/run.py envpool --full`); CI's time budget has no room.
LONG: dict[str, str] = {
    "classic_control_test.py::_ClassicControlEnvPoolTest::test_cartpole": "5000 steps of 3 pools",
    "classic_control_test.py::_ClassicControlEnvPoolTest::test_pendulum": "5000 steps of 3 pools",
    "classic_control_test.py::_ClassicControlEnvPoolTest::test_mountain_car": "2 x 5000 steps of 3 pools",
    "classic_control_test.py::_ClassicControlEnvPoolTest::test_acrobot": "5000 steps of 3 pools",
    "mujoco_gym_deterministic_test.py::_MujocoGymDeterministicTest::test_registered_tasks":
        "11 tasks x 1000 steps of 3 pools",
    "box2d_deterministic_test.py::_Box2dEnvPoolDeterministicTest::test_registered_tasks":
        "8 tasks x up to 2000 steps of 3 pools",
    "box2d_correctness_test.py::_Box2dEnvPoolCorrectnessTest::test_car_racing_correctness":
        "CarRacing rollouts of many pools, several minutes",
    "box2d_correctness_test.py::_Box2dEnvPoolCorrectnessTest::test_bipedal_walker_correctness":
        "BipedalWalker rollouts of many envs, about CI's per-test limit",
    # A whole file: every test in it.
    "mujoco_dmc_suite_deterministic_test.py": "each dm_control domain's tasks x 1000 steps of 3 pools",
    "mujoco_dmc_suite_ext_deterministic_test.py": "dog, humanoid_CMU, quadruped, stacker x 1000 steps of 3 pools",
}


# Sweeps over every id of a family (each id built four ways) may pass the run's per-test
# limit on a loaded machine; they get a longer one (seconds), within the suite's own limit.
SWEEPS: dict[str, int] = {
    "make_test.py::_MakeTest::test_make_mujoco_dmc": 240,
    "make_test.py::_MakeTest::test_make_gymnasium_robotics": 240,
}


def pytest_configure(config: pytest.Config) -> None:
    """Resolve `import envpool` to seedpool before any test module imports it."""
    seedpool.install_as_envpool(quiet=True)
    # Where the pools run: serial by default, as the gymnasium suite (the suite runs beside
    # other jobs; process workers would measure the machine's load, not seedpool).
    from seedpool.compat.envpool import registration

    registration.BACKEND = os.environ.get("SEEDPOOL_PEER_BACKEND", "serial")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, by name, the tests of EnvPool's internals (SKIPS)."""
    for item in items:
        parts = item.nodeid.split("::")
        key = "::".join([parts[0].rsplit("/", 1)[-1], *parts[1:]])
        if key in SWEEPS:
            item.add_marker(pytest.mark.timeout(SWEEPS[key]))
        reason = SKIPS.get(key)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"EnvPool internals: {reason}"))
        elif (key in LONG or parts[0].rsplit("/", 1)[-1] in LONG) and os.environ.get("SEEDPOOL_PEER_FULL") != "1":
            why = LONG.get(key) or LONG[parts[0].rsplit("/", 1)[-1]]
            item.add_marker(pytest.mark.skip(reason=f"long ({why}): run with SEEDPOOL_PEER_FULL=1"))
