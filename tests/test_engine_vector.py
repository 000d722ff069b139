"""`seedpool.make_vec`: a real gymnasium VectorEnv that matches SyncVectorEnv step by step."""

from __future__ import annotations

from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import seedpool
from conftest import child_pids

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}


@pytest.mark.parametrize("autoreset", sorted(MODES))
def test_make_vec_is_a_vector_env_declaring_its_autoreset_mode(autoreset):
    vec = seedpool.make_vec("CartPole-v1", num_envs=3, backend="serial", autoreset=autoreset)
    with closing(vec):
        assert isinstance(vec, gym.vector.VectorEnv)
        assert vec.num_envs == 3
        assert vec.metadata["autoreset_mode"] == MODES[autoreset]
        assert vec.single_observation_space == gym.make("CartPole-v1").observation_space
        assert vec.observation_space.shape == (3, 4)
        obs, _ = vec.reset(seed=0)
        assert vec.observation_space.contains(obs)
        obs, *_ = vec.step(vec.action_space.sample())  # a batched sample is a valid action
        assert obs.shape == (3, 4)


@pytest.mark.parametrize("backend", ["serial", "process"])
@pytest.mark.parametrize("autoreset", sorted(MODES))
def test_make_vec_matches_sync_vector_env_step_by_step(backend, autoreset):
    n, steps = 4, 250
    actions = np.random.default_rng(5).integers(0, 2, (steps, n))
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * n, autoreset_mode=MODES[autoreset])
    ends = 0
    vec = seedpool.make_vec("CartPole-v1", num_envs=n, backend=backend, autoreset=autoreset)
    with closing(vec):
        obs, _ = vec.reset(seed=42)
        ref_obs, _ = ref.reset(seed=42)
        np.testing.assert_array_equal(obs, ref_obs)
        for t, a in enumerate(actions):
            obs, rew, term, trunc, info = vec.step(a)
            ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step(a)
            msg = f"step {t}"
            np.testing.assert_array_equal(obs, ref_obs, err_msg=msg)
            np.testing.assert_array_equal(rew, ref_rew, err_msg=msg)
            np.testing.assert_array_equal(term, ref_term, err_msg=msg)
            np.testing.assert_array_equal(trunc, ref_trunc, err_msg=msg)
            done = term | trunc
            ends += int(done.sum())
            if autoreset == "same_step" and done.any():
                np.testing.assert_array_equal(info["_final_obs"], ref_info["_final_obs"], err_msg=msg)
                for i in np.flatnonzero(done):
                    np.testing.assert_array_equal(info["final_obs"][i], ref_info["final_obs"][i], err_msg=msg)
    ref.close()
    assert ends >= 10, "the comparison must cross episode ends"


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_record_episode_statistics_wrapper_sees_the_episodes(backend):
    n = 4
    rng = np.random.default_rng(2)
    env = RecordEpisodeStatistics(seedpool.make_vec("CartPole-v1", num_envs=n, backend=backend, engine_info=True))
    env.reset(seed=3)
    seen = 0
    for _ in range(200):
        obs, rew, term, trunc, info = env.step(rng.integers(0, 2, n))
        done = term | trunc
        if done.any():
            assert "episode" in info, "RecordEpisodeStatistics reported nothing at an episode end"
            np.testing.assert_array_equal(info["_episode"], done)
            # The wrapper's own count agrees with the engine's episode statistics.
            np.testing.assert_allclose(info["episode"]["r"][done], info["episode_return"][done])
            np.testing.assert_array_equal(info["episode"]["l"][done], info["episode_length"][done])
            seen += int(done.sum())
    assert seen >= 4 and len(env.return_queue) == seen
    env.close()


def test_make_vec_refuses_async_batches_and_close_stops_workers():
    with pytest.raises(ValueError, match="batch_size"):
        seedpool.make_vec("CartPole-v1", num_envs=4, batch_size=2)
    before = child_pids()
    vec = seedpool.make_vec("CartPole-v1", num_envs=2, backend="process", num_workers=2)
    assert len(child_pids() - before) == 2
    vec.reset(seed=0)
    vec.close()
    assert child_pids() - before == set()
