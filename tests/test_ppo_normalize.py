"""PPO's observation and reward normalisation (`--model.obs-norm`, `--ppo.reward-norm`)."""
import copy
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool import kernels
from seedpool.algos.ppo import PPOBatch, PPOConfig, ppo_update
from seedpool.algos.reward_norm import ReturnNormalizer
from seedpool.cli import main, parse_command
from seedpool.experiment import load_checkpoint
from seedpool.experiment.evaluate import load_run_policy
from seedpool.models import ModelConfig, make_policy

BOX4 = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def _naive_returns(rewards, done, valid, gamma, ret):
    """Per env, step by step: the discounted return after each valid step (as VecNormalize keeps it)."""
    T, B = rewards.shape
    seen = []
    for t in range(T):
        for b in range(B):
            if valid[t, b]:
                ret[b] = gamma * ret[b] + rewards[t, b]
                seen.append(ret[b])
            if done[t, b]:
                ret[b] = 0.0
    return seen


def test_rewards_are_divided_by_the_spread_of_every_return_seen_so_far():
    g = np.random.default_rng(0)
    norm, ret, seen = ReturnNormalizer(gamma=0.9), [0.0, 0.0, 0.0], []
    for _ in range(3):  # returns carry over from one rollout to the next
        rewards = g.normal(2.0, 3.0, (20, 3))
        done = g.random((20, 3)) < 0.1
        valid = g.random((20, 3)) > 0.05
        seen += _naive_returns(rewards, done, valid, 0.9, ret)
        out = norm(torch.tensor(rewards, dtype=torch.float32), torch.tensor(done), torch.tensor(valid))
        std = np.sqrt(np.var(seen) + 1e-8)
        np.testing.assert_allclose(out.numpy(), np.clip(rewards / std, -10, 10), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm.ret.numpy(), ret, rtol=1e-6)  # rewards went in as float32
    copy_ = ReturnNormalizer(gamma=0.9)
    copy_.load_state_dict(norm.state_dict())
    rewards = torch.tensor(g.normal(0.0, 50.0, (5, 3)), dtype=torch.float32)
    flags = torch.zeros(5, 3, dtype=torch.bool)
    torch.testing.assert_close(copy_(rewards, flags, ~flags), norm(rewards, flags, ~flags))


def test_obs_norm_is_for_vector_mlp_policies_only():
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    with pytest.raises(ValueError, match="--model.obs-norm"):
        make_policy(frames, gym.spaces.Discrete(3), ModelConfig(obs_norm=True))
    with pytest.raises(ValueError, match="--model.obs-norm"):
        make_policy(frames, gym.spaces.Discrete(3), ModelConfig(obs_norm=True, core="lstm"))


def test_a_recurrent_mlp_policy_reads_standardised_observations():
    torch.manual_seed(0)
    cfg = ModelConfig(obs_norm=True, core="lstm", core_size=8, hidden_sizes=(16,))
    policy = make_policy(BOX4, gym.spaces.Discrete(3), cfg)
    # [T, B, obs]: a rollout's shape; the statistics take every row.
    policy.observe(torch.randn(50, 10, 4) * torch.tensor([1.0, 5.0, 0.1, 2.0]) + torch.tensor([3.0, -1.0, 0.0, 7.0]))
    assert policy.torso.obs_norm.count.item() == 500
    plain = make_policy(BOX4, gym.spaces.Discrete(3), dataclasses.replace(cfg, obs_norm=False))
    plain.load_state_dict({k: v for k, v in policy.state_dict().items() if "obs_norm" not in k})
    norm = policy.torso.obs_norm
    obs = torch.randn(6, 4) * 3 + 2
    scaled = ((obs - norm.mean.float()) / (norm.var + 1e-8).sqrt().float()).clamp(-10, 10)
    first = torch.ones(6, dtype=torch.bool)
    got = policy.step(obs, policy.initial_state(6), first)
    expected = plain.step(scaled, plain.initial_state(6), first)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])


def _shifted_policy():
    torch.manual_seed(0)
    policy = make_policy(BOX4, gym.spaces.Discrete(3), ModelConfig(obs_norm=True))
    policy.observe(torch.randn(500, 4) * torch.tensor([1.0, 5.0, 0.1, 2.0]) + torch.tensor([3.0, -1.0, 0.0, 7.0]))
    return policy


def test_the_networks_read_standardised_observations():
    policy = _shifted_policy()
    plain = make_policy(BOX4, gym.spaces.Discrete(3), ModelConfig())
    plain.load_state_dict({k: v for k, v in policy.state_dict().items() if not k.startswith("obs_norm")})
    obs = torch.randn(8, 4) * 3 + 2
    mean, std = policy.obs_norm.mean.float(), (policy.obs_norm.var + 1e-8).sqrt().float()
    for got, expected in zip(policy(obs)[0:2], plain(((obs - mean) / std).clamp(-10, 10))[0:2]):
        torch.testing.assert_close(got, expected)


def test_numpy_and_torch_updates_agree_with_normalised_observations():
    base = _shifted_policy()
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(128, 4, generator=g) * 4 + 3
    with torch.no_grad():
        logits, value = base(obs)
    actions = torch.randint(0, 3, (128,), generator=g)
    batch = PPOBatch(obs=obs, actions=actions, logprobs=torch.log_softmax(logits, -1)[torch.arange(128), actions],
                     values=value, advantages=torch.randn(128, generator=g), returns=torch.randn(128, generator=g))
    results = []
    for numpy_path in (True, False):
        policy = copy.deepcopy(base)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-3, eps=1e-5)
        cfg = PPOConfig(update_epochs=2, num_minibatches=2)
        kernel = kernels.ppo_update(policy, opt, "cpu", "fp32") if numpy_path else None
        assert (kernel is not None) == numpy_path  # observation statistics do not stop the kernel
        torch.manual_seed(5)
        stats = ppo_update(policy, opt, batch, cfg, kernel=kernel)
        results.append((policy, stats))
    (fast, fast_stats), (ref, ref_stats) = results
    assert fast_stats["approx_kl"] == pytest.approx(ref_stats["approx_kl"], rel=1e-3, abs=1e-6)
    for a, b in zip(fast.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


TINY = ["--env", "Pendulum-v1", "--seed", "3", "--progress", "off", "--no-tensorboard", "--backend", "serial",
        "--num-envs", "2", "--ppo.num-steps", "16", "--ppo.num-minibatches", "2", "--ppo.update-epochs", "2",
        "--model.hidden-sizes", "16", "16", "--env-options", "max_episode_steps", "20",
        "--model.obs-norm", "--ppo.reward-norm"]


def test_statistics_move_after_each_update_and_survive_resume(tmp_path):
    assert main(["train", "ppo", *TINY, "--runs-dir", str(tmp_path), "--total-timesteps", "64"]) == 0
    (run_dir,) = tmp_path.iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", "ppo")
    # Two updates of 2 envs x 16 steps; every step valid (20-step episodes end by truncation,
    # and the reset step after each is not an env step of any episode).
    first_count = ckpt["model"]["obs_norm.count"].item()
    assert 0 < first_count <= 64
    assert ckpt["learner"]["reward_norm"]["stats"]["count"].item() == first_count
    assert main(["train", "ppo", "--resume", str(run_dir), "--total-timesteps", "128"]) == 0
    resumed = load_checkpoint(run_dir / "checkpoint.pt", "ppo")
    assert resumed["model"]["obs_norm.count"].item() == pytest.approx(2 * first_count, abs=4)
    spaces = (gym.spaces.Box(np.array([-1, -1, -8], np.float32), np.array([1, 1, 8], np.float32)),
              gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
    policy = load_run_policy(run_dir, spaces)
    torch.testing.assert_close(policy.obs_norm.mean, resumed["model"]["obs_norm.mean"])


@pytest.mark.parametrize("algo, extra", [
    ("ppo", ["--ppo.num-steps", "16", "--ppo.update-epochs", "1"]),
    ("impala", ["--impala.unroll-length", "8", "--impala.update-epochs", "1", "--impala.num-minibatches", "1"]),
])
def test_recurrent_ppo_and_impala_move_the_statistics_of_their_policy(tmp_path, algo, extra):
    args = ["train", algo, "--env", "CartPole-v1", "--seed", "1", "--progress", "off", "--no-tensorboard",
            "--backend", "serial", "--num-envs", "4", "--model.core", "lstm", "--model.core-size", "8",
            "--model.obs-norm", "--runs-dir", str(tmp_path), "--total-timesteps", "256", *extra]
    assert main(args) == 0
    (run_dir,) = tmp_path.iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", algo)
    count = ckpt["model"]["torso.obs_norm.count"].item()
    assert 0 < count <= ckpt["counters"]["step"]
    mean = ckpt["model"]["torso.obs_norm.mean"]
    assert mean.abs().sum() > 0 and torch.isfinite(mean).all()


def test_mujoco_defaults_normalise_like_the_papers_code():
    cfg = parse_command(["train", "ppo", "--env", "HalfCheetah-v5"])
    assert cfg.model.obs_norm and cfg.ppo.reward_norm
    assert not parse_command(["train", "ppo", "--env", "CartPole-v1"]).model.obs_norm
