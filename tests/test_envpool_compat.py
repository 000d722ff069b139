"""Scripts written for `envpool.make(...)` run on `seedpool.make(...)`: options, spaces,
wrapping, attributes; each checked as a script would use it, against EnvPool where installed."""

from __future__ import annotations

import gc
import weakref
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from seedpool import EnvPoolError
from conftest import child_pids, wait_gone
from envs_for_tests import EchoEnv

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

TASKS = {"gymnasium id": "CartPole-v1", "callable": lambda: EchoEnv(n_actions=2)}


def _envpool():
    return pytest.importorskip("envpool", reason="envpool not installed")


def _atari() -> None:
    pytest.importorskip("ale_py", reason="Atari needs ale-py")


class RecordEpisodeStatistics(gym.Wrapper):
    """CleanRL's wrapper from ppo_atari_envpool.py, on Gymnasium's five-tuple step."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.num_envs = getattr(env, "num_envs", 1)
        self.episode_returns = self.episode_lengths = None

    def reset(self, **kwargs):
        observations, infos = super().reset(**kwargs)
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self.returned_episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.returned_episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        return observations, infos

    def step(self, action):
        observations, rewards, terms, truncs, infos = super().step(action)
        self.episode_returns += infos["reward"]
        self.episode_lengths += 1
        self.returned_episode_returns[:] = self.episode_returns
        self.returned_episode_lengths[:] = self.episode_lengths
        self.episode_returns *= 1 - infos["terminated"]
        self.episode_lengths *= 1 - infos["terminated"]
        infos["r"] = self.returned_episode_returns
        infos["l"] = self.returned_episode_lengths
        return observations, rewards, terms, truncs, infos


# ------------------------------------------------------------------ 1. env_type and engine options


@pytest.mark.parametrize("env_type", ["gymnasium", "gym"])
@pytest.mark.parametrize("task", list(TASKS))
def test_env_type_gymnasium_and_gym_give_the_gymnasium_api(task, env_type):
    with seedpool.make(TASKS[task], env_type=env_type, num_envs=2, backend="serial") as envs:
        obs, info = envs.reset()
        out = envs.step(np.array([0, 1]))
        assert len(out) == 5 and out[0].shape == obs.shape and "env_id" in out[4]


def test_env_type_gym_means_the_gymnasium_api_in_envpool_too():
    envpool = _envpool()
    envs = envpool.make("CartPole-v1", env_type="gym", num_envs=2)
    envs.reset()
    assert len(envs.step(np.array([0, 1]))) == 5  # envpool >= 1.0: "gym" is Gymnasium's API
    envs.close()


@pytest.mark.parametrize("task", list(TASKS))
def test_env_type_dm_is_refused_saying_what_to_use(task):
    with pytest.raises(ValueError, match=r"env_type='dm'.*TimeStep.*Use env_type='gymnasium'.*terminated"):
        seedpool.make(TASKS[task], env_type="dm", num_envs=2, backend="serial")
    with pytest.raises(ValueError, match=r"env_type must be one of \('gymnasium', 'gym', 'dm'\)"):
        seedpool.make(TASKS[task], env_type="gymnasium_v2", num_envs=2, backend="serial")


def test_env_type_works_for_atari_ids():
    _atari()
    with seedpool.make("Pong-v5", env_type="gymnasium", num_envs=2, backend="serial") as envs:
        assert envs.reset()[0].shape == (2, 4, 84, 84)
    with pytest.raises(ValueError, match="env_type='dm'"):
        seedpool.make("Pong-v5", env_type="dm", num_envs=2)


def test_envpool_engine_options_are_understood():
    with seedpool.make("CartPole-v1", num_envs=4, num_threads=1, thread_affinity_offset=0,
                       gym_reset_return_info=True, backend="process") as envs:
        assert envs.num_workers == 1  # num_threads is EnvPool's name for the worker count
        envs.reset()
    with seedpool.make("CartPole-v1", num_envs=2, num_threads=0, backend="serial") as envs:
        assert envs.num_workers == 0  # 0: automatic, as in EnvPool
    with pytest.raises(ValueError, match="num_workers or EnvPool's num_threads, not both"):
        seedpool.make("CartPole-v1", num_envs=2, num_threads=1, num_workers=1)
    with pytest.raises(ValueError, match="gym_reset_return_info=False is not supported"):
        seedpool.make("CartPole-v1", num_envs=2, gym_reset_return_info=False)


# ------------------------------------------------------------------ 2. spaces


@pytest.mark.parametrize("batch_size", [None, 2])
def test_spaces_are_the_single_envs_as_in_envpool(batch_size):
    envpool = _envpool()
    theirs = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=batch_size or 4)
    with seedpool.make("CartPole-v1", num_envs=4, batch_size=batch_size, backend="serial") as envs:
        assert isinstance(envs.action_space, gym.spaces.Discrete)
        assert envs.action_space == theirs.action_space == envs.single_action_space
        assert envs.observation_space == theirs.observation_space == envs.single_observation_space
        assert envs.single_action_space == theirs.single_action_space
    theirs.close()


def test_atari_spaces_match_envpool():
    _atari()
    envpool = _envpool()
    theirs = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=8)
    with seedpool.make("Breakout-v5", num_envs=8, backend="serial") as envs:
        assert envs.observation_space == theirs.observation_space  # Box(0, 255, (4, 84, 84))
        assert envs.action_space == theirs.action_space == gym.spaces.Discrete(4)
        obs, _ = envs.reset()
        assert obs.shape == (8, *envs.single_observation_space.shape)
    theirs.close()


def test_make_vec_keeps_gymnasiums_batched_spaces():
    with closing(seedpool.make_vec("CartPole-v1", num_envs=3, backend="serial")) as vec:
        assert vec.observation_space.shape == (3, 4)
        assert vec.action_space == gym.spaces.MultiDiscrete([2, 2, 2])
        assert vec.single_action_space == gym.spaces.Discrete(2)


# ------------------------------------------------------------------ 3. gymnasium wrappers


def test_cleanrl_wrapper_gives_envpools_episode_statistics():
    """The setup lines of CleanRL's ppo_atari_envpool.py, then its wrapper's statistics, equal
    to the same wrapper's around EnvPool step for step (same seed, same actions)."""
    _atari()
    envpool = _envpool()
    options = dict(num_envs=2, seed=3, episodic_life=True, reward_clip=True, max_episode_steps=120)
    runs = {}
    for name, make in (("envpool", envpool.make), ("seedpool", seedpool.make)):
        envs = make("Breakout-v5", env_type="gymnasium", **options)
        if name == "seedpool":  # envpool 1.2.5 refuses these lines: read-only properties there
            envs.num_envs = 2
            envs.single_action_space = envs.action_space
            envs.single_observation_space = envs.observation_space
        envs = RecordEpisodeStatistics(envs)
        assert isinstance(envs.action_space, gym.spaces.Discrete), "only discrete action space is supported"
        envs.reset()
        rows = []
        for a in np.random.default_rng(0).integers(0, 4, (300, 2)):
            _, _, term, trunc, info = envs.step(a)
            rows.append((info["r"].copy(), info["l"].copy(), term, trunc, info["terminated"]))
        runs[name] = rows
        envs.close()
    for t, (ours, theirs) in enumerate(zip(runs["seedpool"], runs["envpool"])):
        for mine, other in zip(ours, theirs):
            np.testing.assert_array_equal(mine, other, err_msg=f"step {t}")
    games = sum(int((trunc | (game_over == 1)).sum()) for _, _, _, trunc, game_over in runs["seedpool"])
    assert games >= 2, "the run must end games (game over or time limit) to compare statistics"


def test_wrapped_pool_reaches_the_pool_through_the_wrapper():
    with seedpool.make("CartPole-v1", num_envs=4, batch_size=2, backend="serial") as pool:
        wrapped = RecordEpisodeStatistics(pool)
        assert isinstance(pool, gym.Env) and isinstance(pool, gym.vector.VectorEnv)
        assert wrapped.num_envs == 4 and wrapped.get_wrapper_attr("num_envs") == 4
        assert wrapped.get_wrapper_attr("single_action_space") == gym.spaces.Discrete(2)
        assert wrapped.action_space == gym.spaces.Discrete(2) and wrapped.unwrapped is pool
        assert wrapped.spec.id == "CartPole-v1"
        assert wrapped.spec.additional_wrappers[0].name == "RecordEpisodeStatistics"
        assert "CartPole-v1" in str(wrapped)
        wrapped.env.async_reset()  # the async API through .env and .unwrapped
        _, _, _, _, info = wrapped.unwrapped.recv()
        wrapped.unwrapped.send(np.array([1, 0]), info["env_id"])
        assert wrapped.env.recv()[0].shape == (2, 4)


def test_gymnasium_vector_wrappers_take_the_pool():
    with seedpool.make("CartPole-v1", num_envs=3, backend="serial") as pool:
        envs = gym.wrappers.vector.RecordEpisodeStatistics(pool)
        envs.reset(seed=0)
        ended = False
        for _ in range(80):
            *_, info = envs.step(np.ones(3, np.int64))
            ended |= "episode" in info
        assert ended


def test_closing_a_wrapper_closes_the_pool_and_a_dropped_pool_is_finalized():
    pool = seedpool.make("CartPole-v1", num_envs=2, num_workers=1, backend="process")
    workers = set(pool.worker_pids)
    with RecordEpisodeStatistics(pool) as wrapped:
        wrapped.reset()
    assert pool.closed and not wait_gone(workers, 3.0)
    with pytest.raises(seedpool.ClosedError):
        pool.reset()
    pool = seedpool.make("CartPole-v1", num_envs=2, num_workers=1, backend="process")
    workers, ref = set(pool.worker_pids), weakref.ref(pool)
    wrapped = RecordEpisodeStatistics(pool)
    del pool, wrapped
    gc.collect()
    assert ref() is None and not wait_gone(workers, 3.0) and not (workers & child_pids())


# ------------------------------------------------------------------ 4. attributes scripts read


def test_config_spec_and_flags_match_envpools_names():
    _atari()
    envpool = _envpool()
    options = dict(num_envs=4, batch_size=2, seed=7, episodic_life=True, reward_clip=True,
                   max_episode_steps=1000, stack_num=2)
    theirs = envpool.make("Breakout-v5", env_type="gymnasium", **options)
    with seedpool.make("Breakout-v5", env_type="gymnasium", backend="serial", **options) as envs:
        assert envs.is_vector_env is theirs.is_vector_env is True
        shared = set(envs.config) & set(theirs.config)
        assert {"num_envs", "batch_size", "seed", "max_episode_steps", "episodic_life", "noop_max",
                "repeat_action_probability", "gray_scale", "img_height"} <= shared
        for key in shared - {"task"}:  # EnvPool's task is the ROM name ("breakout")
            assert envs.config[key] == theirs.config[key], key
            assert getattr(envs.spec.config, key) == getattr(theirs.spec.config, key), key
        assert envs.spec.config.stack_num == 2 and envs.spec.id == "Breakout-v5"
        assert envs.metadata["autoreset_mode"] == theirs.metadata["autoreset_mode"]
        assert envs.spec.observation_space == theirs.spec.observation_space
    theirs.close()


def test_config_of_a_gymnasium_id_and_render_says_what_to_use():
    with seedpool.make("CartPole-v1", num_envs=2, seed=3, backend="serial") as envs:
        assert envs.config["num_envs"] == 2 and envs.config["seed"] == 3
        assert envs.config["max_episode_steps"] == envs.spec.config.max_episode_steps == 500
        assert envs.spec.reward_threshold == 475.0
        assert envs.render_mode is None
        with pytest.raises(NotImplementedError, match="render_mode='rgb_array'"):
            envs.render()


# ------------------------------------------------------------------ 2. the pool: len, reset(env_id), xla
@pytest.mark.parametrize("task", TASKS.values(), ids=TASKS.keys())
def test_len_subset_reset_and_xla(task):
    with seedpool.make(task, num_envs=4, seed=3, backend="serial") as envs:
        assert len(envs) == 4
        envs.reset()
        for _ in range(3):
            envs.step(np.ones(4, np.int64))
        obs, info = envs.reset(np.array([3, 1]))  # positional, as rl-games and TorchRL call it
        assert obs.shape == (2, *envs.single_observation_space.shape)
        assert info["env_id"].tolist() == [3, 1] and info["elapsed_step"].tolist() == [0, 0]  # as given, as EnvPool
        obs, info = envs.reset(env_id=[2])  # keyword, as Tianshou calls it
        assert info["env_id"].tolist() == [2]
        _, _, _, _, info = envs.step(np.ones(4, np.int64))
        assert info["elapsed_step"].tolist() == [4, 1, 1, 1]  # env 0 was never reset
        with pytest.raises(ValueError, match="unknown env_id"):
            envs.reset([4])
        with pytest.raises(NotImplementedError, match="send\\(\\)/recv"):
            envs.xla()


def test_subset_reset_in_async_mode_leaves_the_other_envs_in_flight():
    with seedpool.make("CartPole-v1", num_envs=4, batch_size=2, seed=0, backend="serial") as envs:
        envs.async_reset()
        _, _, _, _, info = envs.recv()
        first = info["env_id"]
        others = np.setdiff1d(np.arange(4), first)
        with pytest.raises(EnvPoolError, match="in flight"):
            envs.reset(others)  # still resetting from async_reset
        obs, info = envs.reset(first)  # those two were received: they may be reset again
        assert len(obs) == 2 and set(info["env_id"].tolist()) <= set(range(4))
        envs.send(np.zeros(2, np.int64), info["env_id"])
        envs.recv()
        envs.recv()  # every env came back: nothing is lost


def _pong_pair(**options):
    envpool = _envpool()
    _atari()
    theirs = envpool.make("Pong-v5", env_type="gymnasium", num_envs=4, seed=7, **options)
    ours = seedpool.make("Pong-v5", num_envs=4, seed=7, backend="serial", **options)
    return theirs, ours


def test_subset_reset_matches_envpool():
    theirs, ours = _pong_pair()
    rng = np.random.default_rng(0)
    with closing(theirs), ours:
        for pool in (theirs, ours):
            pool.reset()
        for t in range(60):
            act = rng.integers(0, 6, 4)
            if t in (20, 40):
                got = [pool.reset(np.array([2, 0], np.int32)) for pool in (theirs, ours)]
            else:
                got = [pool.step(act) for pool in (theirs, ours)]
            np.testing.assert_array_equal(got[0][0], got[1][0])
            for key in ("env_id", "elapsed_step", "lives"):
                np.testing.assert_array_equal(got[0][-1][key], got[1][-1][key])


def test_mid_episode_reset_with_episodic_life_restarts_the_game_as_envpool():
    envpool = _envpool()
    _atari()
    opts = dict(num_envs=1, seed=3, episodic_life=True)
    theirs = envpool.make("Breakout-v5", env_type="gymnasium", **opts)
    ours = seedpool.make("Breakout-v5", backend="serial", **opts)
    rng = np.random.default_rng(1)
    lost_life = False
    with closing(theirs), ours:
        for pool in (theirs, ours):
            pool.reset()
        for t in range(200):  # past a lost life (an autoreset that continues the game)
            act = rng.integers(0, 4, 1)
            a, b = theirs.step(act), ours.step(act)
            np.testing.assert_array_equal(a[0], b[0])
            lost_life |= bool(a[2][0])
            if t in (80, 199):  # mid-episode: EnvPool starts a new game
                a, b = theirs.reset(), ours.reset()
                np.testing.assert_array_equal(a[0], b[0])
                assert b[1]["elapsed_step"][0] == a[1]["elapsed_step"][0] == 0
                assert b[1]["lives"][0] == a[1]["lives"][0] == 5
        assert lost_life, "no life was lost: the test did not cross an autoreset under episodic_life"


def test_make_vec_has_the_attributes_syncvectorenv_exposes():
    theirs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2,
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    with closing(theirs), closing(seedpool.make_vec("CartPole-v1", 2, backend="serial", autoreset="same_step")) as ours:
        for name in ("autoreset_mode", "observation_mode", "copy", "num_envs", "render_mode",
                     "single_observation_space", "single_action_space", "observation_space", "action_space"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.metadata["autoreset_mode"] == ours.autoreset_mode
