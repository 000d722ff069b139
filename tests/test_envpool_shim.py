"""`seedpool.install_as_envpool()` and EnvPool's top level on seedpool (seedpool/compat/envpool):
the argument contract, make_dm's TimeSteps (against envpool 1.2.5 on Pong), make_spec,
list_all_envs, register. EnvPool's own tests run through the shim in test_peer_suites.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

import seedpool

dm_env = pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
from seedpool.compat import envpool as shim  # noqa: E402 - needs dm_env

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]
REPO = Path(__file__).resolve().parent.parent


def _run(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (install_as_envpool changes sys.modules for good)."""
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=90, env=env)


def test_install_as_envpool_routes_every_envpool_name_and_says_so():
    got = _run("""
        import numpy as np, seedpool
        seedpool.install_as_envpool()
        import envpool, envpool.atari.registration, envpool.classic_control.registration
        from envpool.python.envpool import EnvPoolMixin
        from envpool.python.protocol import GymnasiumEnvPool, DMEnvPool
        from envpool.registration import make_gym
        import seedpool.compat.envpool as shim
        assert envpool is shim and envpool.atari.registration.make_gym is make_gym
        pool = envpool.make(task_id="CartPole-v1", env_type="gym", num_envs=3, max_num_players=1)
        assert isinstance(pool, EnvPoolMixin) and isinstance(pool, GymnasiumEnvPool) and len(pool) == 3
        assert isinstance(envpool.make_dm("CartPole-v1"), DMEnvPool)
        assert seedpool.install_as_envpool() is envpool  # a second call changes nothing
        pool.close()
        print("routed")
    """)
    assert got.returncode == 0, got.stderr
    assert "routed" in got.stdout
    assert "`import envpool` now gives seedpool's EnvPool API" in got.stderr


def test_install_as_envpool_refuses_where_the_real_envpool_is_imported():
    pytest.importorskip("envpool", reason="envpool not installed")
    got = _run("""
        import envpool, seedpool
        try:
            seedpool.install_as_envpool()
        except RuntimeError as err:
            print(err)
    """)
    assert "the real envpool is already imported" in got.stdout, got.stderr


def test_envpool_argument_contract_and_seedpool_make_keeps_its_own():
    with pytest.raises(TypeError):
        shim.make("CartPole-v1")  # EnvPool's make needs env_type
    for bad in ({"seed": 2**31}, {"batch_size": 5, "num_envs": 4}, {"max_num_players": 0}):
        with pytest.raises(AssertionError) as err:  # what EnvPool raises ...
            shim.make_gym("CartPole-v1", **bad)
        assert isinstance(err.value, ValueError)  # ... and seedpool's own kind, with its message
    with pytest.raises(AssertionError, match="env_type"):
        shim.make("CartPole-v1", env_type="jax")
    with pytest.raises(AssertionError, match="unknown task id"):
        shim.make_gymnasium("Combat-v5")
    kwargs = {"num_envs": 2, "seed": 5}
    with closing(shim.make_gym("CartPole-v1", **kwargs)) as pool:
        assert kwargs == {"num_envs": 2, "seed": 5}  # the caller's dict is not changed
        assert pool.config["seed"] == 5 and pool.spec.action_spec().num_values == 2
    with closing(shim.make_gymnasium("CartPole-v1", batch_size=0, num_envs=2)) as pool:
        assert pool.config["seed"] == 42 and not pool.is_async  # EnvPool's defaults
    with seedpool.make("CartPole-v1", num_envs=2, seed=2**31, backend="serial") as pool:
        assert pool.config["seed"] == 2**31  # seedpool.make keeps its own contract


def test_make_dm_timesteps_match_envpool_on_pong():
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    pytest.importorskip("ale_py", reason="Atari needs ale-py")
    theirs = envpool.make_dm("Pong-v5", num_envs=2, seed=1, max_episode_steps=120)
    ours = shim.make_dm("Pong-v5", num_envs=2, seed=1, max_episode_steps=120, backend="serial")
    assert isinstance(ours, dm_env.Environment) and len(ours) == 2
    assert ours.action_spec().num_values == theirs.action_spec().num_values == 6
    rng = np.random.default_rng(0)
    kinds = set()
    with closing(theirs), closing(ours):
        a, b = theirs.reset(), ours.reset()
        for t in range(300):  # past two time limits: LAST, then FIRST from the autoreset
            np.testing.assert_array_equal(a.observation.obs, b.observation.obs)
            np.testing.assert_array_equal(a.step_type, b.step_type)
            np.testing.assert_array_equal(a.reward, b.reward)
            np.testing.assert_array_equal(a.discount, b.discount)
            np.testing.assert_array_equal(a.observation.env_id, b.observation.env_id)
            kinds.update(int(s) for s in b.step_type)
            act = rng.integers(0, 6, 2).astype(np.int32)
            a, b = theirs.step(act), ours.step(act)
    assert kinds == {0, 1, 2}, "the run did not cross an episode boundary"


def test_make_spec_list_all_envs_and_register():
    spec = shim.make_spec("Breakout-v5", mode=4)
    assert spec.config.mode == 4 and spec.action_space.n == 4
    assert spec.observation_spec().obs.maximum == 255 and spec.action_spec().num_values == 4
    ids = shim.list_all_envs()
    assert {"Pong-v5", "CartPole-v1"} <= set(ids)  # seedpool's own ids and gymnasium's
    shim.register("ShimEcho-v0", entry_point="envs_for_tests:EchoEnv", n_actions=3, max_episode_steps=5)
    assert "ShimEcho-v0" in shim.list_all_envs()
    with closing(shim.make_gym("ShimEcho-v0", num_envs=2)) as pool:  # a task EnvPool cannot run
        assert pool.action_space.n == 3 and pool.spec.max_episode_steps == 5
    with pytest.raises(AssertionError, match="already registered"):
        shim.register("ShimEcho-v0", entry_point="envs_for_tests:EchoEnv")
    with pytest.raises(ValueError, match="gymnasium env instead"):
        shim.register("X-v0", entry_point="m", spec_cls="S", dm_cls="D", gymnasium_cls="G")
