"""The engine's public API: make, spaces, shapes, info, seeding, autoreset, time limits, action kinds."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from envs_for_tests import BoxActionEnv, DictObsEnv, DiscreteObsEnv, EchoEnv, MultiDiscreteEnv, OptionsEnv

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

BACKENDS = ["serial", "process"]
CONFIGS = {
    "serial": dict(backend="serial"),
    "thread": dict(backend="thread", num_workers=2),
    "process": dict(backend="process", num_workers=2),
    "process+main": dict(backend="auto"),  # forced: one worker, half the envs in the main process
}


def make_as(name: str, task, num_envs: int, force_layout, **kwargs) -> seedpool.EnvPool:
    """seedpool.make with the backend CONFIGS[name]; process+main is forced, not measured."""
    if name == "process+main":
        force_layout("process", 1, num_envs // 2)
        kwargs.setdefault("native", False)  # the Python-env layout is under test, not a native family
    pool = seedpool.make(task, num_envs=num_envs, **CONFIGS[name], **kwargs)
    assert f"backend={name!r}" in repr(pool)
    return pool


def test_make_with_gymnasium_id_has_spaces_shapes_and_dtypes():
    ref = gym.make("CartPole-v1")
    with seedpool.make("CartPole-v1", num_envs=3, backend="process", num_workers=2) as pool:
        assert pool.num_envs == 3 and pool.batch_size == 3
        assert pool.single_observation_space == ref.observation_space
        assert pool.single_action_space == ref.action_space
        # EnvPool's convention: the pool's own spaces are the single env's.
        assert pool.observation_space == ref.observation_space
        assert pool.action_space == ref.action_space
        obs, info = pool.reset()
        assert obs.shape == (3, 4) and obs.dtype == np.float32
        assert gym.vector.utils.batch_space(pool.single_observation_space, 3).contains(obs)
        obs, rew, term, trunc, info = pool.step(np.array([0, 1, 0]))
        assert obs.shape == (3, 4) and obs.dtype == np.float32
        assert rew.shape == (3,) and rew.dtype == np.float32
        assert term.dtype == np.bool_ and trunc.dtype == np.bool_ and term.shape == trunc.shape == (3,)
        expected = {"env_id": np.int32, "elapsed_step": np.int32, "episode_return": np.float64,
                    "episode_length": np.int32}
        for key, dtype in expected.items():
            assert info[key].dtype == dtype and info[key].shape == (3,), key
        np.testing.assert_array_equal(info["env_id"], [0, 1, 2])
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1, 1])


def test_make_with_a_callable_runs_a_users_pure_python_env():
    with seedpool.make(lambda: EchoEnv(n_actions=5), num_envs=4, backend="process", num_workers=2) as pool:
        assert pool.single_action_space == gym.spaces.Discrete(5)
        pool.reset()
        obs, rew, *_ = pool.step(np.array([4, 0, 3, 1]))
        np.testing.assert_array_equal(rew, [4, 0, 3, 1])
        np.testing.assert_array_equal(obs[:, 2], [4, 0, 3, 1])


def test_async_pool_declares_batch_size_and_single_env_spaces():
    with seedpool.make(lambda: EchoEnv(), num_envs=6, batch_size=2, backend="serial") as pool:
        assert pool.num_envs == 6 and pool.batch_size == 2
        assert pool.observation_space.shape == (3,)
        pool.async_reset()
        obs, rew, term, trunc, info = pool.recv()
        assert obs.shape == (2, 3) and rew.shape == (2,) and info["env_id"].shape == (2,)


def test_pong_v5_when_ale_is_installed():
    if importlib.util.find_spec("seedpool.envs.families.atari") is None:
        pytest.skip("seedpool.envs.families.atari is not in this checkout")
    pytest.importorskip("ale_py", reason="ale-py is not installed")
    with seedpool.make("Pong-v5", num_envs=2, seed=1) as pool:
        assert pool.single_observation_space.shape == (4, 84, 84)
        assert pool.single_action_space == gym.spaces.Discrete(6)
        obs, info = pool.reset()
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        for _ in range(3):
            obs, rew, term, trunc, info = pool.step(np.array([0, 1]))
        for key in ("lives", "reward", "terminated", "env_id", "elapsed_step"):
            assert key in info, key
        np.testing.assert_array_equal(info["elapsed_step"], [3, 3])
        assert obs.any(), "Pong frames should not be blank"


@pytest.mark.parametrize("backend", BACKENDS)
def test_episode_statistics_match_a_hand_count(backend):
    rng = np.random.default_rng(0)
    n = 4
    ended = 0
    with seedpool.make("CartPole-v1", num_envs=n, backend=backend, seed=3) as pool:
        pool.reset()
        ret, length, fresh = np.zeros(n), np.zeros(n, int), np.zeros(n, bool)
        for _ in range(150):
            obs, rew, term, trunc, info = pool.step(rng.integers(0, 2, n))
            ret = np.where(fresh, 0.0, ret + rew)  # the step after an end is the reset
            length = np.where(fresh, 0, length + 1)
            np.testing.assert_array_equal(info["elapsed_step"], length)
            np.testing.assert_allclose(info["episode_return"], ret)
            np.testing.assert_array_equal(info["episode_length"], length)
            assert not (rew[fresh]).any(), "the reset step pays no reward"
            fresh = term | trunc
            ended += int(fresh.sum())
    assert ended >= 4, "the test needs episode ends to mean anything"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_seed_none_leaves_envs_unseeded(name, force_layout):
    # Gymnasium reads seed=None as "unseeded": each env draws its own entropy.
    with make_as(name, "CartPole-v1", 2, force_layout, seed=None) as a, \
            make_as(name, "CartPole-v1", 2, force_layout, seed=None) as b:
        obs_a, _ = a.reset()
        obs_b, _ = b.reset()
        assert not np.array_equal(obs_a[0], obs_a[1]), "two unseeded envs started alike"
        assert not np.array_equal(obs_a, obs_b), "two unseeded pools started alike"
        obs, *_ = a.step(np.array([0, 1]))
        assert obs.shape == (2, 4)
    with make_as(name, "CartPole-v1", 2, force_layout, seed=[None, 4]) as pool:
        obs, _ = pool.reset()
        np.testing.assert_array_equal(obs[1], gym.make("CartPole-v1").reset(seed=4)[0])


def test_negative_seeds_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        seedpool.make("CartPole-v1", num_envs=2, seed=-1)
    with pytest.raises(ValueError, match="non-negative"):
        seedpool.make("CartPole-v1", num_envs=2, seed=[0, -3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_seed_gives_env_i_seed_plus_i_and_list_seeds_are_per_env(backend):
    def reference(seed):
        return gym.make("CartPole-v1").reset(seed=seed)[0]

    with seedpool.make("CartPole-v1", num_envs=3, backend=backend, seed=10) as pool:
        obs, _ = pool.reset()
        np.testing.assert_array_equal(obs, [reference(10 + i) for i in range(3)])
        obs, _ = pool.reset(seed=[5, 99, 7])
        np.testing.assert_array_equal(obs, [reference(s) for s in (5, 99, 7)])
        obs, _ = pool.reset(seed=40)
        np.testing.assert_array_equal(obs, [reference(40 + i) for i in range(3)])
    with seedpool.make("CartPole-v1", num_envs=2, backend=backend, seed=[123, 4]) as pool:
        np.testing.assert_array_equal(pool.reset()[0], [reference(123), reference(4)])


def test_seeded_pool_follows_a_seeded_gymnasium_env_step_by_step():
    env = gym.make("CartPole-v1")
    ref_obs, _ = env.reset(seed=21)
    actions = np.random.default_rng(1).integers(0, 2, 200)
    with seedpool.make("CartPole-v1", num_envs=2, backend="process", seed=20) as pool:
        obs, _ = pool.reset()
        np.testing.assert_array_equal(obs[1], ref_obs)
        for a in actions:
            obs, rew, term, trunc, _ = pool.step(np.array([0, a]))
            ref_obs, ref_rew, ref_term, ref_trunc, _ = env.step(int(a))
            np.testing.assert_array_equal(obs[1], ref_obs)
            assert (rew[1], term[1], trunc[1]) == (ref_rew, ref_term, ref_trunc)
            if ref_term or ref_trunc:
                break
        else:
            pytest.fail("expected an episode end within 200 random steps")


@pytest.mark.parametrize("backend", BACKENDS)
def test_next_step_autoreset_returns_reset_obs_with_zero_reward_and_no_flags(backend):
    with seedpool.make(lambda: EchoEnv(episode_len=3), num_envs=2, backend=backend, seed=7) as pool:
        pool.reset()
        for t in (1, 2):
            obs, rew, term, trunc, info = pool.step(np.array([1, 2]))
            assert not term.any() and not trunc.any()
        obs, rew, term, trunc, info = pool.step(np.array([3, 4]))
        np.testing.assert_array_equal(term, [True, True])
        np.testing.assert_array_equal(obs, [[7, 3, 3], [8, 3, 4]])  # the real last obs
        np.testing.assert_array_equal(info["episode_return"], [5, 8])
        np.testing.assert_array_equal(info["episode_length"], [3, 3])
        obs, rew, term, trunc, info = pool.step(np.array([4, 4]))  # these actions are ignored
        np.testing.assert_array_equal(obs, [[7, 0, -1], [8, 0, -1]])  # the reset obs
        np.testing.assert_array_equal(rew, [0, 0])
        assert not term.any() and not trunc.any()
        np.testing.assert_array_equal(info["elapsed_step"], [0, 0])
        assert "final_obs" not in info
        obs, rew, *_ , info = pool.step(np.array([2, 1]))
        np.testing.assert_array_equal(rew, [2, 1])
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_autoreset_returns_reset_obs_and_final_obs_in_info(backend):
    with seedpool.make(lambda: EchoEnv(episode_len=2), num_envs=2, backend=backend, seed=0,
                       autoreset="same_step") as pool:
        pool.reset()
        obs, rew, term, trunc, info = pool.step(np.array([1, 1]))
        assert not term.any()
        obs, rew, term, trunc, info = pool.step(np.array([3, 4]))
        np.testing.assert_array_equal(term, [True, True])
        np.testing.assert_array_equal(rew, [3, 4])
        np.testing.assert_array_equal(obs, [[0, 0, -1], [1, 0, -1]])  # already the reset obs
        np.testing.assert_array_equal(info["final_obs"], [[0, 2, 3], [1, 2, 4]])
        np.testing.assert_array_equal(info["episode_return"], [4, 5])
        np.testing.assert_array_equal(info["episode_length"], [2, 2])
        obs, rew, term, trunc, info = pool.step(np.array([2, 0]))  # a normal first step
        np.testing.assert_array_equal(rew, [2, 0])
        np.testing.assert_array_equal(obs, [[0, 1, 2], [1, 1, 0]])
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1])
        np.testing.assert_array_equal(info["episode_return"], [2, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_episode_steps_truncates(backend):
    with seedpool.make(lambda: EchoEnv(episode_len=100), num_envs=2, backend=backend,
                       max_episode_steps=4) as pool:
        pool.reset()
        flags = [pool.step(np.array([1, 1]))[2:4] for _ in range(4)]
        assert not any(t.any() or tr.any() for t, tr in flags[:3])
        term, trunc = flags[3]
        np.testing.assert_array_equal(trunc, [True, True])
        np.testing.assert_array_equal(term, [False, False])


def test_a_gymnasium_ids_own_time_limit_and_an_override_apply():
    with seedpool.make("MountainCar-v0", num_envs=1, backend="serial", max_episode_steps=10) as pool:
        pool.reset()
        truncs = [pool.step(np.array([1]))[3][0] for _ in range(10)]
        assert truncs == [False] * 9 + [True]
    with seedpool.make("MountainCar-v0", num_envs=1, backend="serial") as pool:
        pool.reset()
        truncs = [pool.step(np.array([1]))[3][0] for _ in range(200)]
        assert truncs == [False] * 199 + [True]  # MountainCar-v0 registers a 200-step limit


@pytest.mark.parametrize("backend", BACKENDS)
def test_box_actions_reach_the_env(backend):
    with seedpool.make(BoxActionEnv, num_envs=2, backend=backend) as pool:
        assert isinstance(pool.single_action_space, gym.spaces.Box)
        pool.reset()
        act = np.array([[0.5, -0.25], [-1.0, 1.0]], np.float32)
        obs, rew, *_ = pool.step(act)
        np.testing.assert_array_equal(obs, act)
        np.testing.assert_allclose(rew, [0.5 - 2.5, -1.0 + 10.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_multidiscrete_actions_reach_the_env(backend):
    with seedpool.make(MultiDiscreteEnv, num_envs=3, backend=backend) as pool:
        pool.reset()
        act = np.array([[2, 3], [0, 1], [1, 0]])
        obs, rew, *_ = pool.step(act)
        np.testing.assert_array_equal(obs, act)
        np.testing.assert_array_equal(rew, [23, 1, 10])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_observations_are_batched_per_key(backend):
    with seedpool.make(DictObsEnv, num_envs=2, backend=backend, seed=5, autoreset="same_step") as pool:
        assert isinstance(pool.single_observation_space, gym.spaces.Dict)
        obs, _ = pool.reset()
        assert set(obs) == {"pos", "phase"}
        assert obs["pos"].shape == (2, 2) and obs["pos"].dtype == np.float32
        assert obs["phase"].shape == (2,) and np.issubdtype(obs["phase"].dtype, np.integer)
        assert gym.vector.utils.batch_space(pool.single_observation_space, 2).contains(obs)
        for _ in range(3):
            obs, rew, term, *_ = pool.step(np.array([1, 2]))
        np.testing.assert_array_equal(obs["pos"], [[5, 3], [6, 3]])
        np.testing.assert_array_equal(obs["phase"], [3, 3])
        obs, rew, term, trunc, info = pool.step(np.array([2, 0]))
        np.testing.assert_array_equal(term, [True, True])
        np.testing.assert_array_equal(obs["phase"], [0, 0])
        np.testing.assert_array_equal(info["final_obs"]["pos"], [[5, 4], [6, 4]])
        np.testing.assert_array_equal(rew, [2, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_discrete_observations(backend):
    with seedpool.make(DiscreteObsEnv, num_envs=2, backend=backend) as pool:
        obs, _ = pool.reset()
        assert obs.shape == (2,) and np.issubdtype(obs.dtype, np.integer)
        for t in range(1, 4):
            obs, *_ = pool.step(np.array([0, 1]))
            np.testing.assert_array_equal(obs, [t, t])
        assert gym.vector.utils.batch_space(pool.single_observation_space, 2).contains(obs)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_reset_options_reach_every_env_once(name, force_layout):
    with make_as(name, OptionsEnv, 4, force_layout) as pool:
        obs, _ = pool.reset(seed=0, options={"x": 7})
        assert obs[:, 0].tolist() == [7.0] * 4
        for _ in range(4):  # the episodes end after 3 steps; autoreset passes no options
            obs, *_ = pool.step(np.zeros(4, np.int64))
        assert obs[:, 0].tolist() == [-1.0] * 4
        obs, _ = pool.reset()
        assert obs[:, 0].tolist() == [-1.0] * 4


def test_unpicklable_reset_options_fail_before_reaching_workers():
    with seedpool.make(OptionsEnv, num_envs=4, backend="process", num_workers=2) as pool:
        with pytest.raises(TypeError, match="picklable"):
            pool.reset(options={"x": 1, "f": lambda: None})
        obs, _ = pool.reset(options={"x": 2})  # still usable, and nothing stale applies
        assert obs[:, 0].tolist() == [2.0] * 4
        obs, _ = pool.reset()
        assert obs[:, 0].tolist() == [-1.0] * 4


def test_make_vec_forwards_reset_options():
    vec = seedpool.make_vec(OptionsEnv, num_envs=3, backend="process", num_workers=2)
    try:
        obs, _ = vec.reset(seed=1, options={"x": 5})
        assert obs[:, 0].tolist() == [5.0] * 3
    finally:
        vec.close()


def test_reset_options_larger_than_a_pipe_buffer_do_not_block():
    with seedpool.make(OptionsEnv, num_envs=4, backend="process", num_workers=2) as pool:
        big = {"x": 4, "table": np.arange(200_000, dtype=np.float64)}  # 1.6 MB each way
        obs, _ = pool.reset(options=big)
        assert obs[:, 0].tolist() == [4.0] * 4
