"""Dict observations reach the policy as one array (`seedpool.actors.observations`), and the
MiniGrid and dm_control families get their own PPO / SAC defaults (the learning runs behind
them: benchmarks/results/ppo_minigrid_doorkey_curve.md, sac_cheetahrun_curve.md)."""
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import seedpool
from seedpool.actors.observations import policy_view
from seedpool.cli import train_config
from seedpool.errors import ConfigError
from seedpool.models import ModelConfig, make_policy
from seedpool.models.grid import GridCNNActorCritic

DOORKEY = "MiniGrid-DoorKey-8x8-v0"


class _DictPool:
    """The pool API over fixed Dict observations (a float part, a Discrete part, a 2-D Box)."""

    num_envs = batch_size = 2
    is_async = False
    single_action_space = gym.spaces.Discrete(3)
    single_observation_space = gym.spaces.Dict({
        "position": gym.spaces.Box(-np.inf, np.inf, (3,), np.float64),
        "direction": gym.spaces.Discrete(4, start=1),
        "grid": gym.spaces.Box(0, 1, (2, 2), np.float32),
    })

    def __init__(self):
        self.obs = {"position": np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
                    "direction": np.array([1, 4], np.int32), "grid": np.ones((2, 2, 2), np.float32)}
        self.closed = False

    def reset(self, **kwargs):
        return self.obs, {}

    def step(self, action, env_id=None):
        return self.obs, np.zeros(2, np.float32), np.zeros(2, bool), np.zeros(2, bool), {}

    def close(self):
        self.closed = True


def test_a_dict_without_an_image_becomes_one_float32_vector_in_the_spaces_order():
    pool = _DictPool()
    view = policy_view(pool)
    assert view.single_observation_space == gym.spaces.Box(-np.inf, np.inf, (3 + 4 + 4,), np.float32)
    assert list(pool.single_observation_space) == ["direction", "grid", "position"]  # gymnasium sorts a dict's keys
    obs, _ = view.reset()
    one_hot = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)  # Discrete(4, start=1): 1 and 4
    expected = np.concatenate([one_hot, pool.obs["grid"].reshape(2, 4), pool.obs["position"]], 1).astype(np.float32)
    np.testing.assert_array_equal(obs, expected)
    np.testing.assert_array_equal(view.step(np.zeros(2, np.int64))[0], expected)
    assert isinstance(pool.single_observation_space, gym.spaces.Dict)  # the user's pool is not changed
    view.close()
    assert pool.closed


def test_a_box_pool_is_left_as_it_is():
    with seedpool.make("CartPole-v1", num_envs=2) as pool:
        assert policy_view(pool) is pool


def test_minigrid_gives_the_policy_its_image_alone():
    with seedpool.make(DOORKEY, num_envs=3, seed=0) as pool, seedpool.make(DOORKEY, num_envs=3, seed=0) as twin:
        view = policy_view(pool)
        assert view.single_observation_space == pool.single_observation_space["image"]
        obs, _ = view.reset()
        raw, _ = twin.reset()
        assert obs.shape == (3, 7, 7, 3) and obs.dtype == np.uint8
        np.testing.assert_array_equal(obs, raw["image"])


def test_the_grid_cnn_fits_minigrids_view_and_the_nature_cnn_refuses_it_by_name():
    space, actions = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), gym.spaces.Discrete(7)
    policy = make_policy(space, actions, ModelConfig(kind="cnn", cnn="grid"))
    assert isinstance(policy, GridCNNActorCritic)
    logits, value = policy(torch.randint(0, 11, (5, 7, 7, 3), dtype=torch.uint8))
    assert logits.shape == (5, 7) and value.shape == (5,)
    with pytest.raises(ConfigError, match="--model.cnn grid"):
        make_policy(space, actions, ModelConfig())
    with pytest.raises(ConfigError, match="at least 7x7"):
        make_policy(gym.spaces.Box(0, 255, (5, 5, 3), np.uint8), actions, ModelConfig(kind="cnn", cnn="grid"))


def test_minigrid_ppo_defaults_are_rl_starter_files_with_the_grid_cnn_and_normalised_advantages():
    cfg = train_config("ppo", ["--env", DOORKEY])
    p = cfg.ppo
    assert (cfg.model.kind, cfg.model.cnn, cfg.num_envs, cfg.total_timesteps) == ("cnn", "grid", 16, 2_000_000)
    assert (p.num_steps, p.num_minibatches, p.update_epochs, p.learning_rate, p.adam_eps) == (128, 8, 4, 1e-3, 1e-8)
    assert (p.ent_coef, p.vf_coef, p.clip_coef, p.max_grad_norm) == (0.01, 0.5, 0.2, 0.5)
    assert p.clip_vloss and p.norm_adv and p.anneal_lr  # the measured change (ppo_minigrid_doorkey_curve.md)
    assert train_config("ppo", ["--env", DOORKEY, "--model.core", "lstm"]).model.cnn == "grid"


def test_ppo_trains_and_evaluates_on_minigrid(tmp_path):
    from seedpool.experiment.evaluate import evaluate_run
    from seedpool.trainers.ppo import train_ppo

    cfg = train_config("ppo", ["--env", DOORKEY, "--total-timesteps", "4096", "--runs-dir", str(tmp_path),
                               "--progress", "off", "--torch-threads", "1"])
    result = train_ppo(cfg)
    assert result.step == 4096
    ev = evaluate_run(result.run_dir, episodes=2, deterministic=True)
    assert len(ev.returns) == 2 and all(0.0 <= r <= 1.0 for r in ev.returns)


def test_sac_trains_and_evaluates_on_dm_control(tmp_path):
    pytest.importorskip("dm_control")
    from seedpool.experiment.evaluate import evaluate_run
    from seedpool.trainers.sac import train_sac

    cfg = train_config("sac", ["--env", "CheetahRun-v1", "--total-timesteps", "600", "--sac.learning-starts", "300",
                               "--runs-dir", str(tmp_path), "--progress", "off", "--torch-threads", "1"])
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, hidden_sizes=(32, 32)))
    result = train_sac(cfg)
    assert result.step == 600
    ev = evaluate_run(result.run_dir, episodes=1, deterministic=True, num_envs=1)
    assert ev.lengths == [1000] and np.isfinite(ev.returns[0])
