"""dm_control's PhysicsError on MuJoCo warnings (`Physics.check_invalid_state`), on the
native dm_control tasks (seedpool/envs/families/dmc_native/) as on the package path: an env
whose physics makes MuJoCo warn (here a huge velocity: MuJoCo's BADQVEL, after which it
resets that env's data) fails that very step with dm_control's error type and message, and
the pool goes on."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # dm_control picks its GL backend on import (the package path's choice)

pytest.importorskip("mujoco", reason="the native dm_control tasks need mujoco: pip install 'seedpool[mujoco]'")
pytest.importorskip("dm_control", reason="the package path (the reference) needs dm-control")

from dm_control.rl.control import PhysicsError  # noqa: E402

import seedpool  # noqa: E402
from seedpool.envs.errors import EnvStepError  # noqa: E402

MESSAGE = "Physics state is invalid. Warning(s) raised: mjWARN_BADQVEL"
ZEROS = np.zeros((3, 6))


def _data(pool, i: int):
    """Env i's MjData: the native family's, or dm_control's env's in a serial pool."""
    if pool.backend == "native":
        return pool._exec.family.sim.datas[i]
    env = pool.in_process_envs()[i]
    while not hasattr(env, "physics"):
        env = env.inner if hasattr(env, "inner") else env.env
    return env.physics.data


@pytest.mark.parametrize("path", [{"native": False, "backend": "serial"}, {"native": True, "threads": 1},
                                  {"native": True, "threads": 2}])
def test_a_warning_fails_its_step_on_both_paths(path):
    with seedpool.make("CheetahRun-v1", num_envs=3, seed=0, **path) as pool:
        pool.reset()
        for _ in range(3):
            pool.step(ZEROS)
        _data(pool, 1).qvel[:] = 1e11  # MuJoCo's check of the next step warns (BADQVEL)
        with pytest.raises(EnvStepError) as err:
            pool.step(ZEROS)
        assert isinstance(err.value, PhysicsError) and isinstance(err.value.__cause__, PhysicsError)
        assert str(err.value.__cause__).startswith(MESSAGE)
        if path["native"]:
            assert str(err.value.__cause__) == f"{MESSAGE} (env 1)"
        _, _, _, truncated, _ = pool.step(ZEROS)  # it goes on: env 1 restarted, reported truncated
        assert truncated[1]
        for _ in range(3):
            _, reward, *_ = pool.step(ZEROS)
            assert np.isfinite(reward).all()


def test_async_batches_raise_it_too():
    """The compiled ring of an async pool hands the env that warned back to Python."""
    with seedpool.make("CheetahRun-v1", num_envs=4, batch_size=2, seed=0, native=True, threads=2) as pool:
        pool.async_reset()
        ids = [pool.recv()[4]["env_id"] for _ in range(2)]
        _data(pool, int(ids[1][0])).qvel[:] = 1e11
        pool.send(np.zeros((2, 6)), ids[0])
        assert np.isfinite(pool.recv()[1]).all()  # a batch without it: no error
        pool.send(np.zeros((2, 6)), ids[1])
        with pytest.raises(PhysicsError, match="mjWARN_BADQVEL"):
            pool.recv()


def test_the_family_raises_in_a_step_and_a_reset_as_dm_control():
    """The family's own calls (the unfused step; a reset whose settling steps warn, as
    cheetah's initialize_episode, `physics.step(200)`, raises in dm_control)."""
    from dm_control import suite

    from seedpool.envs.families.dmc_native.domains import TASKS

    family = TASKS["CheetahRun-v1"](2)
    try:
        for i in range(2):
            family.seed(i, 4 + i)
        family.reset(np.arange(2), None)
        family.sim.datas[0].qvel[:] = 1e11
        with pytest.raises(PhysicsError) as err:
            family.step(slice(None), np.zeros((2, 6)))
        assert str(err.value) == f"{MESSAGE} (env 0)"
        family.step(slice(None), np.zeros((2, 6)))  # the warning was reported once
        family.sim.init[1, family.model.nq:] = 1e11  # env 1's next initial state: a huge velocity
        with pytest.raises(PhysicsError, match="mjWARN_BADQVEL"):
            family.reset(np.array([1]), None)
        family.reset(np.array([1]), None)  # a new initial state: no error
    finally:
        family.close()
    env = suite.load("cheetah", "run", task_kwargs={"random": 0})
    with pytest.raises(PhysicsError, match=re.escape(MESSAGE)):
        with env.physics.reset_context():
            env.physics.data.qvel[:] = 1e11
            env.physics.step(200)


def test_no_warning_no_error():
    """Ordinary play warns nothing: the counters stay zero and nothing is flagged."""
    with seedpool.make("WalkerWalk-v1", num_envs=2, seed=1, native=True, max_episode_steps=20) as pool:
        pool.reset()
        rng = np.random.default_rng(0)
        for _ in range(45):
            pool.step(rng.uniform(-1, 1, (2, 6)))
        assert not pool._exec.family.sim.warned.any()
