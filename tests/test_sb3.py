"""`seedpool.make_sb3`: a Stable-Baselines3 VecEnv that matches DummyVecEnv + Monitor step by step."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import warnings
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from envs_for_tests import BoxActionEnv, DictObsEnv, EchoEnv, OptionsEnv

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

SB3_MISSING = "stable-baselines3 is not installed (pip install 'seedpool[sb3]')"


@pytest.fixture
def sb3():
    """The stable_baselines3 module; skips the test (saying why) where it is missing."""
    return pytest.importorskip("stable_baselines3", reason=SB3_MISSING)


@pytest.fixture
def tmp_logger(sb3, tmp_path):
    """An SB3 logger that writes nothing outside tmp_path (its default makes a folder in /tmp per model)."""
    from stable_baselines3.common.logger import configure

    return configure(str(tmp_path / "sb3"), [])


@pytest.fixture
def one_torch_thread():
    """Tiny networks: a second intra-op thread only spins on a busy 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_importing_seedpool_does_not_import_sb3_and_without_it_make_sb3_names_the_extra():
    code = (
        "import sys\n"
        "import seedpool\n"
        "assert 'stable_baselines3' not in sys.modules, 'import seedpool imported stable_baselines3'\n"
        "sys.modules['stable_baselines3'] = None  # as if it were not installed\n"
        "try:\n"
        "    seedpool.make_sb3\n"
        "except ImportError as err:\n"
        "    print(err)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'seedpool[sb3]'" in out.stdout


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_matches_dummy_vec_env_with_monitor_step_for_step(sb3, backend):
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    n, steps, limit = 4, 300, 15  # a short time limit: episodes end both ways
    actions = np.random.default_rng(7).integers(0, 2, (steps, n))
    ref = DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1", max_episode_steps=limit)) for _ in range(n)])
    venv = seedpool.make_sb3("CartPole-v1", n, backend=backend, max_episode_steps=limit)
    terminated = truncated = 0
    with closing(venv), closing(ref):
        assert venv.seed(11) == ref.seed(11)
        np.testing.assert_array_equal(venv.reset(), ref.reset())
        for t, a in enumerate(actions):
            obs, rew, done, infos = venv.step(a)
            ref_obs, ref_rew, ref_done, ref_infos = ref.step(a)
            msg = f"step {t}"
            np.testing.assert_array_equal(obs, ref_obs, err_msg=msg)
            np.testing.assert_array_equal(rew, ref_rew, err_msg=msg)
            np.testing.assert_array_equal(done, ref_done, err_msg=msg)
            assert rew.dtype == ref_rew.dtype and done.dtype == ref_done.dtype
            for i, (info, ref_info) in enumerate(zip(infos, ref_infos)):
                assert info.keys() == ref_info.keys(), msg
                assert info["TimeLimit.truncated"] == ref_info["TimeLimit.truncated"], msg
                if done[i]:
                    np.testing.assert_array_equal(info["terminal_observation"], ref_info["terminal_observation"],
                                                  err_msg=msg)
                    assert (info["episode"]["r"], info["episode"]["l"]) == (
                        ref_info["episode"]["r"], ref_info["episode"]["l"]), msg
                    truncated += info["TimeLimit.truncated"]
                    terminated += not info["TimeLimit.truncated"]
    assert terminated > 10 and truncated > 10, (terminated, truncated)


def test_a_list_of_env_factories_builds_one_env_each(sb3):
    fns = [functools.partial(EchoEnv, episode_len=2), functools.partial(EchoEnv, episode_len=3)]
    with closing(seedpool.make_sb3(fns, backend="serial")) as venv:
        assert venv.num_envs == 2
        venv.reset()
        ends = [venv.step(np.zeros(2, np.int64))[2].tolist() for _ in range(3)]
        assert ends == [[False, False], [True, False], [False, True]]
    with pytest.raises(ValueError, match="a list of 2 env factories builds 2 envs"):
        seedpool.make_sb3(fns, 3)


def test_seed_is_used_at_the_next_reset_only(sb3):
    with closing(seedpool.make_sb3("CartPole-v1", 3, backend="serial", seed=5)) as venv:
        first = venv.reset()  # make's seed: env i gets 5 + i
        assert venv.seed(5) == [5, 6, 7]
        np.testing.assert_array_equal(venv.reset(), first)
        assert not np.array_equal(venv.reset(), first)  # SB3 forgets the seeds after one reset
        assert venv._seeds == [None, None, None]


def test_reset_options_reach_every_env(sb3):
    with closing(seedpool.make_sb3(OptionsEnv, 2, backend="serial")) as venv:
        venv.set_options({"x": 3.0})
        assert venv.reset()[:, 0].tolist() == [3.0, 3.0]
        assert venv.reset()[:, 0].tolist() == [-1.0, -1.0]  # used once
        venv.set_options([{"x": 1.0}, {"x": 2.0}])  # one dict per env, as DummyVecEnv takes them
        assert venv.reset()[:, 0].tolist() == [1.0, 2.0]
        assert venv.reset()[:, 0].tolist() == [-1.0, -1.0]


def test_dict_observations_give_per_env_terminal_observations(sb3):
    with closing(seedpool.make_sb3(DictObsEnv, 2, backend="serial", seed=0)) as venv:
        assert venv.observation_space == DictObsEnv().observation_space
        venv.reset()
        for _ in range(3):
            obs, _, done, infos = venv.step(np.zeros(2, np.int64))
            assert not done.any()
        obs, _, done, infos = venv.step(np.zeros(2, np.int64))
        assert done.all()
        for i, info in enumerate(infos):
            assert info["terminal_observation"]["pos"].tolist() == [i, 4]  # [seed, step]
            assert info["terminal_observation"]["phase"] == 0  # 4 % 4
        assert obs["pos"][:, 1].tolist() == [0, 0]  # already the next episode's first obs


class InfoEnv(EchoEnv):
    """An EchoEnv whose info holds the step count, and `odd` on odd steps only; its reset's
    info counts resets."""

    resets = 0

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed, options=options)
        self.resets += 1
        return obs, {"resets": self.resets}

    def step(self, action):
        obs, rew, term, trunc, _ = super().step(action)
        info = {"t": self.t, "odd": True} if self.t % 2 else {"t": self.t}
        return obs, rew, term, trunc, info


@pytest.mark.parametrize("backend", ["serial", "process"])
@pytest.mark.parametrize("declared", [{}, {"t": "int64"}], ids=["undeclared", "declared"])
def test_env_infos_match_dummy_vec_env_and_engine_bookkeeping_stays_out(sb3, backend, declared):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from seedpool.compat.sb3 import ENGINE_INFO_KEYS

    n = 2

    def reset_infos(vec):  # a declared key is in every info, with its last value
        return [{k: v for k, v in info.items() if k not in declared} for info in vec.reset_infos]

    ref = DummyVecEnv([InfoEnv] * n)
    venv = seedpool.make_sb3(InfoEnv, n, backend=backend, info_keys=declared)
    with closing(venv), closing(ref):
        venv.seed(0)
        ref.seed(0)
        venv.reset()
        ref.reset()
        assert reset_infos(venv) == ref.reset_infos == [{"resets": 1}] * n
        for t in range(10):  # an episode ends after 7 steps
            a = np.array([t % 5, 4 - t % 5])
            _, _, done, infos = venv.step(a)
            _, _, _, ref_infos = ref.step(a)
            for info, ref_info in zip(infos, ref_infos):
                assert not ENGINE_INFO_KEYS & set(info)
                if "terminal_observation" in ref_info:
                    np.testing.assert_array_equal(info.pop("terminal_observation"),
                                                  ref_info.pop("terminal_observation"))
                    assert info.pop("episode")["l"] == 7
                assert info == ref_info, f"step {t}"
            assert reset_infos(venv) == ref.reset_infos, f"step {t}"
        assert reset_infos(venv)[0] == {"resets": 2}


def test_a_replaced_worker_ends_its_envs_episodes_without_episode_records(sb3):
    venv = seedpool.make_sb3(lambda: EchoEnv(episode_len=1000), 4, backend="process", num_workers=2,
                             on_worker_death="restart")
    with closing(venv):
        venv.reset()
        venv.step(np.array([1, 1, 1, 1]))
        os.kill(venv.pool.worker_pids[0], signal.SIGKILL)  # worker 0 owns envs 0 and 1
        obs, _, done, infos = venv.step(np.array([1, 2, 3, 4]))
        assert done.tolist() == [True, True, False, False]
        for info, o in zip(infos[:2], obs[:2]):
            assert info["restarted"] and info["TimeLimit.truncated"] and "episode" not in info
            np.testing.assert_array_equal(info["terminal_observation"], o)  # the episode's last obs is lost
        assert "restarted" not in infos[2]


def test_vec_monitor_wrapping_records_the_same_episodes(sb3):
    from stable_baselines3.common.vec_env import VecMonitor

    n = 3
    actions = np.random.default_rng(3).integers(0, 2, (200, n))
    plain = seedpool.make_sb3("CartPole-v1", n, backend="serial", seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrapped = VecMonitor(seedpool.make_sb3("CartPole-v1", n, backend="serial", seed=1))
    # The envs have no Monitor of their own (env_is_wrapped says so truthfully), so VecMonitor,
    # as on a DummyVecEnv of bare envs, has nothing to warn about.
    assert not [w for w in caught if "Monitor" in str(w.message)]
    mine, theirs = [], []
    with closing(plain), closing(wrapped):
        plain.reset()
        wrapped.reset()
        for a in actions:
            for venv, out in ((plain, mine), (wrapped, theirs)):
                _, _, _, infos = venv.step(a)
                out += [(i, info["episode"]["r"], info["episode"]["l"]) for i, info in enumerate(infos)
                        if "episode" in info]
    assert len(mine) > 10
    assert mine == theirs


def test_spaces_and_per_env_calls(sb3):
    from stable_baselines3.common.monitor import Monitor

    with closing(seedpool.make_sb3("CartPole-v1", 2, backend="serial")) as venv:
        single = gym.make("CartPole-v1")
        assert venv.num_envs == 2
        assert venv.observation_space == single.observation_space  # single-env spaces, as SB3 expects
        assert venv.action_space == single.action_space
        assert venv.get_attr("render_mode") == [None, None]
        assert venv.get_attr("observation_space", indices=1) == [single.observation_space]
        assert venv.has_attr("action_space")
        assert venv.env_is_wrapped(Monitor) == [False, False]  # no Monitor in these envs
        with pytest.raises(IndexError, match="out of range"):
            venv.get_attr("render_mode", indices=[2])
        # Per-env calls reach each env through the engine.
        assert venv.get_attr("gravity") == [9.8, 9.8]
        venv.set_attr("gravity", 1.0, indices=[1])
        assert venv.get_attr("gravity") == [9.8, 1.0]
        assert venv.env_method("close", indices=0) == [None]
        with pytest.warns(UserWarning, match="no `render_mode`"):  # SB3's own warning, as for DummyVecEnv
            assert venv.render() is None


def test_bad_input_fails_clearly_and_the_env_stays_usable(sb3):
    with pytest.raises(ValueError, match="unknown task id 'CartPol-v1'.*CartPole-v1"):
        seedpool.make_sb3("CartPol-v1", 2)
    with pytest.raises(ValueError, match="autoreset must be 'same_step'"):
        seedpool.make_sb3("CartPole-v1", 2, autoreset="next_step")
    with pytest.raises(ValueError, match="batch_size must equal num_envs"):
        seedpool.make_sb3("CartPole-v1", 4, batch_size=2)
    with closing(seedpool.make_sb3("CartPole-v1", 2, backend="serial")) as venv:
        venv.reset()
        with pytest.raises(ValueError, match="one action per env"):
            venv.step(np.zeros(3, np.int64))
        with pytest.raises(ValueError, match=r"must be in \[0, 2\)"):
            venv.step(np.array([0, 5]))
        obs, *_ = venv.step(np.zeros(2, np.int64))
        assert obs.shape == (2, 4)


def test_ppo_trains_logs_episodes_and_evaluates(sb3, one_torch_thread, tmp_logger):
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    with closing(seedpool.make_sb3("CartPole-v1", 4)) as venv:
        model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=4, seed=0, device="cpu")
        model.set_logger(tmp_logger)
        model.learn(2048)
        assert model.num_timesteps >= 2048
        episodes = list(model.ep_info_buffer)  # what SB3's logger turns into ep_rew_mean
        assert len(episodes) >= 20
        assert all(e["r"] == e["l"] > 0 for e in episodes)  # CartPole pays 1 per step
        first, last = np.mean([e["r"] for e in episodes[:20]]), np.mean([e["r"] for e in episodes[-20:]])
        assert last > first, f"no learning in 2048 steps: first 20 episodes {first:.1f}, last 20 {last:.1f}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returns, lengths = evaluate_policy(model, venv, n_eval_episodes=4, return_episode_rewards=True)
        # SB3's warning for envs without a Monitor, as it gives a DummyVecEnv of bare envs: it then
        # counts the episodes' rewards itself.
        assert [w for w in caught if "Monitor" in str(w.message)]
        assert returns == lengths and len(returns) == 4  # whole episodes, 1 per step
        # A uniform random policy averages ~22 on CartPole; greedy after 2048 PPO steps was
        # 77-161 (mean of 4 episodes) for seeds 0-2 here.
        assert np.mean(returns) >= 50, f"greedy returns after 2048 steps: {returns}"


def test_dqn_trains_and_stores_time_limit_truncations(sb3, one_torch_thread, tmp_logger):
    from stable_baselines3 import DQN

    with closing(seedpool.make_sb3("CartPole-v1", 2, max_episode_steps=30)) as venv:
        model = DQN("MlpPolicy", venv, learning_starts=200, buffer_size=5000, train_freq=4,
                    target_update_interval=250, exploration_fraction=0.5, seed=0, device="cpu")
        model.set_logger(tmp_logger)
        model.learn(2000)
        assert model.num_timesteps >= 2000
        lengths = [e["l"] for e in model.ep_info_buffer]
        # 2 envs x 1000 steps in episodes of at most 30 steps: at least 2 x (1000 // 30) ended.
        assert len(lengths) >= 2 * (1000 // 30) and max(lengths) <= 30, lengths
        assert all(e["r"] == e["l"] for e in model.ep_info_buffer)  # CartPole pays 1 per step
        buf = model.replay_buffer
        stored = slice(0, buf.size())
        dones, timeouts = buf.dones[stored].astype(bool), buf.timeouts[stored].astype(bool)
        # TimeLimit.truncated reached SB3's replay buffer, on exactly the steps that ended an
        # episode at its 30th step (the replay holds every step: 2,000 < buffer_size).
        assert timeouts.any() and not (timeouts & ~dones).any()
        for env in range(2):
            ends = np.flatnonzero(dones[:, env])
            episode_lengths = np.diff(np.insert(ends, 0, -1))
            cut = timeouts[ends, env]
            # (A pole that falls on exactly the 30th step is a termination: none does in this seeded run.)
            assert (episode_lengths[cut] == 30).all() and (episode_lengths[~cut] < 30).all(), episode_lengths


def test_sac_trains_on_box_actions(sb3, one_torch_thread, tmp_logger):
    from stable_baselines3 import SAC

    with closing(seedpool.make_sb3(BoxActionEnv, 2)) as venv:
        model = SAC("MlpPolicy", venv, learning_starts=50, seed=0, device="cpu")
        model.set_logger(tmp_logger)
        model.learn(200)
        assert model.num_timesteps >= 200
        assert {e["l"] for e in model.ep_info_buffer} == {6}  # BoxActionEnv's episodes last 6 steps


def test_envs_are_the_env_objects_with_the_serial_backend_only(sb3):
    with closing(seedpool.make_sb3("CartPole-v1", 2, backend="serial")) as venv:
        assert len(venv.envs) == 2 and venv.envs[0] is not venv.envs[1]
        venv.set_attr("marker", 5, indices=[1])
        assert getattr(venv.envs[1], "marker") == 5 and not hasattr(venv.envs[0], "marker")
    with closing(seedpool.make_sb3("CartPole-v1", 2, backend="process")) as venv:
        assert not hasattr(venv, "envs")
        with pytest.raises(AttributeError, match="live in worker threads or processes.*backend='serial'"):
            venv.envs
