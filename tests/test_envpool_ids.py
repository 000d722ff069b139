"""EnvPool's ids that gymnasium does not build, through `seedpool.make` itself (the table in
seedpool/envs/envpool_ids/, shared with the EnvPool face): each makes, resets and
steps, with envpool 1.2.5's spaces where envpool is installed; EnvPool's MuJoCo v2/v3 ids
and Pusher-v4 on gymnasium's v4; ViZDoom's own maps from envpool-assets."""

from __future__ import annotations

import importlib.util
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from seedpool.envs.envpool_ids import table
from seedpool.envs.envpool_ids.mujoco import LEGACY

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(180)]
SERIAL = {"backend": "serial"}
HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None


def _envpool():
    return pytest.importorskip("envpool", reason="envpool not installed")


def _same_space(ours: gym.Space, theirs: gym.Space) -> None:
    """The same space up to the dtype of Discrete values (EnvPool's int32, gymnasium's int64)."""
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(ours, gym.spaces.Discrete):
        assert (ours.n, ours.start) == (theirs.n, theirs.start)
        return
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours, theirs)
    np.testing.assert_allclose(ours.low, theirs.low)
    np.testing.assert_allclose(ours.high, theirs.high)


def _ids() -> list:
    mujoco = pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo tasks need mujoco (the mujoco extra)")
    return [pytest.param(i, marks=mujoco) if i in LEGACY else i for i in table.engine_ids()]


@pytest.mark.parametrize("task_id", _ids())
def test_seedpool_make_builds_and_steps_envpools_id(task_id):
    with seedpool.make(task_id, num_envs=2, seed=3, **SERIAL) as pool:
        assert pool.spec.id == task_id
        obs, _ = pool.reset()
        assert all(pool.single_observation_space.contains(o) for o in obs)
        actions = gym.vector.utils.batch_space(pool.single_action_space, 2)
        actions.seed(0)
        for _ in range(3):
            obs, reward, terminated, truncated, _ = pool.step(actions.sample())
            assert all(pool.single_observation_space.contains(o) for o in obs)
            assert reward.shape == terminated.shape == truncated.shape == (2,)
        if importlib.util.find_spec("envpool") is not None:
            import envpool

            theirs = envpool.make_spec(task_id)
            _same_space(pool.single_observation_space, theirs.observation_space)
            _same_space(pool.single_action_space, theirs.action_space)


def test_the_face_reads_the_same_table():
    pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
    from seedpool.compat.envpool import tasks

    assert tasks.ALIASES is table.ALIASES and tasks.OWN is table.OWN
    assert "Blackjack-v1" in tasks.OWN and "Blackjack-v1" not in table.engine_ids()  # gymnasium's, to seedpool.make


def test_envpools_time_limit_and_an_own_one():
    """NChain never terminates: EnvPool's 1000-step limit truncates it, or the caller's."""
    for limit, steps in ((None, 1000), (7, 7)):
        with seedpool.make("NChain-v0", num_envs=2, max_episode_steps=limit, **SERIAL) as pool:
            pool.reset()
            ends = [t + 1 for t in range(steps) if pool.step(np.zeros(2, np.int64))[3].all()]
            assert ends == [steps]


@pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo tasks need mujoco (the mujoco extra)")
def test_legacy_mujoco_ids_step_as_their_v4_in_envpool_itself():
    """The premise of the table: EnvPool's v2/v3 ids (and Pusher-v2) step exactly as its v4
    from the same seed; Ant-v3's contact forces, which v4 leaves out, stay zero."""
    envpool = _envpool()
    rng = np.random.default_rng(0)
    for task_id in sorted(LEGACY):
        base = task_id.rpartition("-v")[0]
        if task_id == "Pusher-v4":
            continue  # its own v4
        old, new = (envpool.make_gymnasium(i, num_envs=2, seed=3) for i in (task_id, f"{base}-v4"))
        with closing(old), closing(new):
            a, b = old.reset()[0], new.reset()[0]
            n = b.shape[1]
            for _ in range(60):
                np.testing.assert_array_equal(a[:, :n], b, err_msg=task_id)
                assert not a[:, n:].any(), task_id
                act = rng.uniform(-0.4, 0.4, (2, *old.action_space.shape))
                ra, rb = old.step(act), new.step(act)
                for x, y in zip(ra[1:4], rb[1:4]):
                    np.testing.assert_array_equal(x, y, err_msg=task_id)
                a, b = ra[0], rb[0]


@pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo tasks need mujoco (the mujoco extra)")
@pytest.mark.parametrize("task_id", ["Pusher-v2", "Pusher-v4"])
def test_pusher_reward_is_v4s_from_the_state_before_the_step(task_id):
    """The observation holds the fingertip, object and goal positions: the reward is v4's
    formula on the observation the step started from (not on the one it returns)."""
    rng = np.random.default_rng(1)
    with seedpool.make(task_id, num_envs=1, seed=0, **SERIAL) as pool:
        obs = pool.reset()[0][0]
        after = []
        for _ in range(30):
            act = rng.uniform(-2, 2, (1, 7))
            new, reward, _, _, _ = pool.step(act)

            def v4(o):
                tip, obj, goal = o[14:17], o[17:20], o[20:23]
                return -np.linalg.norm(obj - goal) - 0.1 * np.square(act).sum() - 0.5 * np.linalg.norm(obj - tip)

            assert reward[0] == pytest.approx(v4(obs), rel=1e-6)  # the pool keeps rewards as float32
            after.append(abs(v4(new[0]) - reward[0]))
            obs = new[0]
        assert max(after) > 1e-4  # v5's order would give another reward


@pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo tasks need mujoco (the mujoco extra)")
def test_legacy_mujoco_ids_take_envpools_option_names():
    with seedpool.make("Hopper-v3", num_envs=1, healthy_z_min=0.5, healthy_angle_max=0.3, **SERIAL) as pool:
        env = pool.in_process_envs()[0].unwrapped
        assert env._healthy_z_range == (0.5, float("inf")) and env._healthy_angle_range == (-0.2, 0.3)
    with seedpool.make("Ant-v3", num_envs=1, use_contact_force=False, **SERIAL) as pool:
        assert pool.single_observation_space.shape == (27,)
    with pytest.raises(TypeError, match="no_such_option"):
        seedpool.make("Walker2d-v3", no_such_option=1, **SERIAL)
    with seedpool.make("Hopper-v3", num_envs=2, frame_stack=3, **SERIAL) as pool:
        assert pool.single_observation_space.shape == (3, 11)
        obs = pool.reset()[0]
        np.testing.assert_array_equal(obs[:, 0], obs[:, 2])  # a reset repeats its first observation


@pytest.mark.skipif(not HAS_MUJOCO, reason="MuJoCo tasks need mujoco (the mujoco extra)")
def test_the_face_gives_legacy_ids_envpools_limit_and_config():
    pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
    from seedpool.compat import envpool as shim

    spec = shim.make_spec("Reacher-v2", frame_stack=2)
    assert spec.config.max_episode_steps == 50 and spec.config.frame_stack == 2
    assert spec.observation_space.shape == (2, 11) and spec.action_space.dtype == np.float64


@pytest.mark.parametrize("task_id", ["D1Basic-v1", "D3Battle-v1"])
def test_vizdooms_envpool_maps_from_envpool_assets(task_id):
    pytest.importorskip("vizdoom", reason="vizdoom not installed (the vizdoom extra)")
    pytest.importorskip("envpool_assets", reason="EnvPool's own maps ship in envpool-assets")
    with seedpool.make(task_id, num_envs=2, seed=1, **SERIAL) as pool:
        assert pool.single_observation_space.shape == (4, 84, 84)  # GRAY8 screens, as the cfg asks
        obs, _ = pool.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.any()
        for _ in range(3):
            pool.step(np.ones((2, *pool.single_action_space.shape)))
        if importlib.util.find_spec("envpool") is not None:
            import envpool

            theirs = envpool.make_spec(task_id)  # a spec only: envpool's ViZDoom pools start Doom engines
            assert theirs.observation_space == pool.single_observation_space
            assert theirs.action_space.shape == pool.single_action_space.shape
