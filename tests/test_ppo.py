"""PPO pieces: the sampler's autoreset handling, the loss, the update and exact resume."""
import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import seedpool
from seedpool.actors.sampler import SyncSampler
from seedpool.algos.ppo import PPOBatch, PPOConfig, a2c_config, make_batch, ppo_loss, ppo_update
from seedpool.models import ModelConfig, make_policy
from seedpool.models.base import ActorCritic
from seedpool.models.distributions import CategoricalHead


class Counter(gym.Env):
    """obs = [steps taken in this episode]; reward 1 per step; ends after `length` steps."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length=3, terminate=False):
        self.length, self.terminate, self.k = length, terminate, 0

    def reset(self, *, seed=None, options=None):
        self.k = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.k += 1
        end = self.k >= self.length
        return np.array([self.k], np.float32), 1.0, end and self.terminate, end and not self.terminate, {}


class ValueIsTenTimesObs(ActorCritic):
    """A fixed policy (always action 0) whose value of observation k is 10k."""

    def __init__(self):
        super().__init__()
        self.head = CategoricalHead()
        self.dummy = torch.nn.Parameter(torch.zeros(()))

    def forward(self, obs):
        logits = torch.stack([torch.zeros(len(obs)), torch.full((len(obs),), -1e9)], 1)
        return logits, 10.0 * obs[:, 0]


@pytest.mark.parametrize("terminate", [False, True])
def test_sampler_masks_the_reset_step_and_bootstraps_from_the_final_obs(terminate):
    pool = seedpool.make(lambda: Counter(3, terminate), num_envs=2, backend="serial")
    with pool:
        rollout, episodes = SyncSampler(pool, ValueIsTenTimesObs(), num_steps=8).collect()
    obs = rollout.obs[:, 0, 0].tolist()
    assert obs == [0, 1, 2, 3, 0, 1, 2, 3]  # row 3 holds the final obs; the reset comes after it
    assert rollout.valid[:, 0].tolist() == [True, True, True, False, True, True, True, False]
    assert rollout.truncated[:, 0].tolist() == [False, False, not terminate, False] * 2
    assert rollout.terminated[:, 0].tolist() == [False, False, terminate, False] * 2
    assert rollout.rewards[:, 0].tolist() == [1, 1, 1, 0, 1, 1, 1, 0]  # the reset step pays nothing
    assert rollout.values[3, 0].item() == 30.0  # value of the final observation
    assert [(e.ret, e.length) for e in episodes] == [(3.0, 3)] * 4
    batch = make_batch(rollout, gamma=0.5, gae_lambda=1.0)
    assert len(batch) == 12  # the 4 reset steps are left out
    # Step 2 ends the episode: a truncation bootstraps from V(final obs) = 30, a termination from 0.
    adv_at_end = batch.advantages[batch.obs[:, 0] == 2][0].item()
    assert adv_at_end == pytest.approx(1.0 + (0.0 if terminate else 0.5 * 30.0) - 20.0)


def _batch(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return PPOBatch(obs=torch.randn(n, 4, generator=g), actions=torch.randint(0, 2, (n,), generator=g),
                    logprobs=torch.full((n,), -0.7), values=torch.randn(n, generator=g),
                    advantages=torch.randn(n, generator=g), returns=torch.randn(n, generator=g))


def _policy(seed=0):
    torch.manual_seed(seed)
    return make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig())


def test_clipped_objective_has_no_gradient_beyond_the_clip_range():
    policy, mb = _policy(), _batch()
    logp_now, _, _ = policy.evaluate(mb.obs, mb.actions)
    # Pretend the behaviour policy was far less likely to take these actions: ratio >> 1 + eps.
    mb = dataclasses.replace(mb, logprobs=logp_now.detach() - 1.0, advantages=torch.ones(len(mb)))
    cfg = PPOConfig(vf_coef=0.0, ent_coef=0.0, norm_adv=False)
    loss, stats = ppo_loss(policy, mb, cfg, clip_coef=0.2)
    loss.backward()
    assert stats["clipfrac"].item() == 1.0
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in policy.pi.parameters())


def test_a2c_is_the_vanilla_policy_gradient():
    policy, mb = _policy(), _batch()
    cfg = a2c_config(PPOConfig(vf_coef=0.0, ent_coef=0.0))
    logp, _, _ = policy.evaluate(mb.obs, mb.actions)
    mb = dataclasses.replace(mb, logprobs=logp.detach())
    loss, _ = ppo_loss(policy, mb, cfg, clip_coef=None)
    grads = torch.autograd.grad(loss, list(policy.pi.parameters()))
    logp, _, _ = policy.evaluate(mb.obs, mb.actions)
    vanilla = torch.autograd.grad(-(mb.advantages * logp).mean(), list(policy.pi.parameters()))
    for a, b in zip(grads, vanilla):
        torch.testing.assert_close(a, b)


def test_update_reduces_value_error_and_target_kl_stops_early():
    policy, mb = _policy(), _batch(256)
    mb = dataclasses.replace(mb, returns=2.0 * mb.obs[:, 0])  # a target the value net can fit
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    before = (policy.value(mb.obs) - mb.returns).pow(2).mean().item()
    ppo_update(policy, opt, mb, PPOConfig(update_epochs=10, num_minibatches=4))
    after = (policy.value(mb.obs) - mb.returns).pow(2).mean().item()
    assert after < 0.5 * before
    stats = ppo_update(policy, opt, _batch(256, seed=1),
                       PPOConfig(update_epochs=10, num_minibatches=4, target_kl=1e-9, learning_rate=1e-2))
    assert stats["epochs"] == 1


def test_gaussian_policy_samples_and_scores_continuous_actions():
    policy = make_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)), ModelConfig())
    action, logp, value = policy.act(torch.zeros(5, 3))
    assert action.shape == (5, 2) and logp.shape == (5,) and value.shape == (5,)
    logp2, entropy, _ = policy.evaluate(torch.zeros(5, 3), action)
    torch.testing.assert_close(logp, logp2)
    expected = torch.distributions.Normal(torch.zeros(2), torch.ones(2)).entropy().sum()
    torch.testing.assert_close(entropy, expected.expand(5))


def _tiny_config(tmp_path: Path, total: int):
    from seedpool.trainers.ppo import ppo_defaults

    cfg = ppo_defaults("CartPole-v1")
    return dataclasses.replace(cfg, total_timesteps=total, num_envs=4, backend="serial", runs_dir=tmp_path,
                               progress="off", tensorboard=False,
                               ppo=dataclasses.replace(cfg.ppo, num_steps=64, update_epochs=2))


def _final_params(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoint.pt", weights_only=True)["model"]


def test_resumed_run_ends_with_the_same_parameters_as_an_uninterrupted_one(tmp_path, monkeypatch):
    from seedpool.experiment.run import Run
    from seedpool.trainers.ppo import train_ppo

    # 256 steps per update, 7 updates; the second run is stopped after 3 (as Ctrl-C does) and
    # resumed. Episodes span the cut at step 768, so the envs' state must be rebuilt exactly.
    full = train_ppo(_tiny_config(tmp_path / "a", 1792))
    end_update = Run.end_update

    def stop_at_768(run, step, scalars):
        end_update(run, step, scalars)
        run.stop_requested = run.stop_requested or step >= 768

    monkeypatch.setattr(Run, "end_update", stop_at_768)
    first = train_ppo(_tiny_config(tmp_path / "b", 1792))
    monkeypatch.undo()
    assert first.step == 768 and first.interrupted
    resumed = train_ppo(dataclasses.replace(_tiny_config(tmp_path / "b", 1792), resume=first.run_dir))
    assert resumed.run_dir == first.run_dir and resumed.step == full.step == 1792
    a, b = _final_params(full.run_dir), _final_params(resumed.run_dir)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    # The resumed run appended to the same metrics: one SPS row per update, no duplicates.
    from seedpool.experiment.metrics import series

    steps, _, _ = series(resumed.run_dir / "metrics.csv", "charts/SPS")
    assert steps == [256 * i for i in range(1, 8)]


def test_episode_tracker_reports_whole_atari_games_across_lives():
    from seedpool.actors.episodes import EpisodeTracker

    tracker = EpisodeTracker(2)
    no, yes = np.array([False, False]), np.array([True, False])

    def info(raw, length, game_over, elapsed):  # elapsed_step counts across lives, as EnvPool's
        return {"reward": np.array([raw, 0.0]), "elapsed_step": np.array([elapsed, 1]),
                "terminated": np.array([game_over, 0]), "episode_return": np.zeros(2),
                "episode_length": np.array([length, 1], np.int32)}  # 0: a reset row

    assert tracker.update(1, no, no, info(3.0, 1, 0, 1)) == []
    assert tracker.update(2, yes, no, info(2.0, 2, 0, 2)) == []  # a life lost: the game goes on
    assert tracker.update(3, no, no, info(0.0, 0, 0, 2)) == []  # the reset step counts for nothing
    (game,) = tracker.update(4, yes, no, info(-1.0, 1, 1, 3))
    assert game[:3] == (4, 4.0, 3)


def test_pong_smoke_trains_the_cnn_policy_on_the_engine(tmp_path):
    pytest.importorskip("ale_py", reason="Atari needs ale-py")
    from seedpool.trainers.ppo import ppo_defaults, train_ppo

    cfg = ppo_defaults("Pong-v5")
    assert cfg.env_options == {"episodic_life": True, "reward_clip": True}
    assert (cfg.num_envs, cfg.ppo.num_steps, cfg.ppo.num_minibatches, cfg.ppo.update_epochs) == (32, 128, 16, 4)
    # The PPO paper's minibatch of 256 rows, and its gradient steps per env step (4 epochs x 4
    # minibatches of 8 x 128 steps): only the number of envs per rollout grew.
    assert cfg.num_envs * cfg.ppo.num_steps // cfg.ppo.num_minibatches == 256
    assert cfg.torch_threads == 2
    cfg = dataclasses.replace(cfg, total_timesteps=256, num_envs=4, runs_dir=tmp_path, progress="off",
                              tensorboard=False, ppo=dataclasses.replace(cfg.ppo, num_steps=32, update_epochs=1))
    result = train_ppo(cfg)
    assert result.step == 256
    state = torch.load(result.run_dir / "checkpoint.pt", weights_only=True)
    assert any(k.startswith("trunk.0") for k in state["model"])  # the Nature CNN


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_double_buffered_sampler_keeps_each_env_timeline_intact(backend):
    from seedpool.actors.sampler import DoubleBufferedSampler

    pool = seedpool.make(lambda: Counter(3), num_envs=4, batch_size=2, backend=backend)
    with pool:
        sampler = DoubleBufferedSampler(pool, ValueIsTenTimesObs(), num_steps=6)
        for _ in range(3):  # later rollouts start from where the previous one left each env
            rollout, _ = sampler.collect()
            obs, valid = rollout.obs[..., 0], rollout.valid
            for env in range(4):
                col = obs[:, env].tolist()
                for t in range(5):
                    # Counter: 0,1,2,3(final, masked next step... stored as invalid),0,1,...
                    expected_next = 0.0 if col[t] == 3 else col[t] + 1
                    assert col[t + 1] == expected_next, (backend, env, col)
                assert valid[:, env].tolist() == [c != 3 for c in col]
                assert rollout.rewards[:, env].tolist() == [0.0 if c == 3 else 1.0 for c in col]
            assert torch.equal(rollout.values[:6], 10 * obs)
            after_last = torch.where(obs[5] == 3, 0.0, obs[5] + 1)  # the bootstrap observation
            assert torch.equal(rollout.values[6], 10 * after_last)
    assert sampler.env_steps >= 3 * 6 * 4
