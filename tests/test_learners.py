"""The common Learner face: PPO and IMPALA learners update, count, save and restore alike;
non-finite updates stop training; APPO's clipped objective acts on off-policy ratios."""
from __future__ import annotations

import copy
import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.impala import ImpalaConfig, ImpalaLearner, appo_loss, appo_targets, unrolls_to_tensors
from seedpool.algos.learner import NonFiniteLossError, linear_decay
from seedpool.algos.ppo import PPOConfig, PPOLearner
from seedpool.models import MLPActorCritic, ModelConfig, make_policy
from seedpool.records import Rollout, Unrolls
from rollouts import random_rollout


def _rollout(policy, seed=0) -> Rollout:
    return random_rollout(policy, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), seed)


def _unrolls(model, T=5, B=4, seed=0, version=0, behaviour_shift=0.0) -> Unrolls:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T + 1, B, 3)).astype(np.float32)
    with torch.no_grad():
        actions, logp, _ = model.act(torch.from_numpy(obs[:T].reshape(T * B, 3)))
    return Unrolls(
        obs=obs, actions=actions.view(T, B).numpy(),
        logp=(logp.view(T, B).numpy() + behaviour_shift).astype(np.float32),
        rewards=rng.normal(size=(T, B)).astype(np.float32), terminated=np.zeros((T, B), bool),
        truncated=np.zeros((T, B), bool), valid=np.ones((T, B), bool), first=np.zeros((T, B), bool),
        versions=np.full((T, B), version, np.int64), slots=np.arange(B),
    )


def _ppo_learner(seed=0, **cfg):
    torch.manual_seed(seed)
    policy = make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig())
    return PPOLearner(policy, PPOConfig(num_steps=16, num_minibatches=2, update_epochs=2, **cfg), total_steps=640)


def _impala_learner(seed=0, **cfg):
    torch.manual_seed(seed)
    return ImpalaLearner(MLPActorCritic(3, 2, continuous=False), ImpalaConfig(unrolls_per_batch=4, **cfg),
                         total_steps=200)


def _same_params(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("kind", ["ppo", "impala"])
def test_learners_count_anneal_and_restore_optimizer_state_exactly(kind):
    if kind == "ppo":
        a, b = _ppo_learner(0), _ppo_learner(1)
        batches = [_rollout(a.model, seed=i) for i in range(3)]
        per_batch = 16 * 4
    else:
        a, b = _impala_learner(0, clip_coef=0.2, update_epochs=2, num_minibatches=2), _impala_learner(1)
        b = ImpalaLearner(b.model, a.cfg, total_steps=200)
        batches = [_unrolls(a.model, seed=i) for i in range(3)]
        per_batch = 5 * 4
    m = a.update(batches[0])
    assert a.version == 1 and a.steps_trained == per_batch
    assert m["charts/learning_rate"] == pytest.approx(linear_decay(a.cfg.learning_rate, 0.0))
    m = a.update(batches[1])
    assert m["charts/learning_rate"] == pytest.approx(a.cfg.learning_rate * (1 - per_batch / a.total_steps))
    b.load_state_dict(copy.deepcopy(a.state_dict()))  # as a checkpoint would: no shared tensors
    assert b.version == a.version == 2 and b.steps_trained == a.steps_trained
    assert _same_params(a.model, b.model)
    # Adam's moments came along: the next update lands on identical parameters.
    torch.manual_seed(7)
    a.update(batches[2])
    torch.manual_seed(7)
    b.update(batches[2])
    assert _same_params(a.model, b.model)


def test_ppo_learner_refuses_a_non_finite_update():
    learner = _ppo_learner()
    rollout = _rollout(learner.model)
    rollout.rewards[3, 1] = float("nan")
    with pytest.raises(NonFiniteLossError, match="not finite at learner version 0"):
        learner.update(rollout)
    assert learner.version == 0 and learner.steps_trained == 0


def test_appo_clips_off_policy_ratios_and_uses_the_behaviour_log_probs():
    torch.manual_seed(0)
    cfg = ImpalaConfig(clip_coef=0.2, vf_coef=0.0, ent_coef=0.0)
    model = MLPActorCritic(3, 2, continuous=False)

    def policy_grad(shift):
        batch = unrolls_to_tensors(_unrolls(model, behaviour_shift=shift), torch.device("cpu"))
        targets = appo_targets(model, batch, cfg)
        targets["adv"] = torch.ones_like(targets["adv"])  # every action looks good
        model.zero_grad()
        loss, parts = appo_loss(model, batch, targets, cfg)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return grad.abs().sum().item(), parts["losses/importance_ratio"].item()

    # mu = pi / 2: ratio 2 > 1 + clip with a positive advantage: the clipped branch has no gradient.
    grad, ratio = policy_grad(shift=float(-np.log(2.0)))
    assert ratio == pytest.approx(2.0, rel=1e-5) and grad == 0.0
    # mu = pi: ratio 1, inside the clip range: the policy is pushed.
    grad, ratio = policy_grad(shift=0.0)
    assert ratio == pytest.approx(1.0, abs=1e-5) and grad > 1e-3


def test_appo_targets_bootstrap_from_vtrace_and_stop_at_terminations():
    torch.manual_seed(1)
    cfg = ImpalaConfig(clip_coef=0.2, gamma=0.9)
    model = MLPActorCritic(3, 2, continuous=False)
    u = _unrolls(model, T=3, B=2)
    u.terminated[1, 0] = True
    batch = unrolls_to_tensors(u, torch.device("cpu"))
    t = appo_targets(model, batch, cfg)
    with torch.no_grad():
        _, values = model(batch["obs"].flatten(0, 1))
    values = values.view(4, 2)
    r = batch["rewards"]
    # On-policy: adv_t = r_t + gamma * v_{t+1} - V(x_t), with v the V-trace targets (bootstrap V(x_T)).
    assert t["adv"][2, 1].item() == pytest.approx((r[2, 1] + 0.9 * values[3, 1] - values[2, 1]).item(), abs=1e-5)
    assert t["adv"][0, 1].item() == pytest.approx((r[0, 1] + 0.9 * t["vs"][1, 1] - values[0, 1]).item(), abs=1e-5)
    # A termination: no bootstrap at all.
    assert t["adv"][1, 0].item() == pytest.approx((r[1, 0] - values[1, 0]).item(), abs=1e-5)


def test_impala_learner_rejects_more_minibatches_than_unrolls():
    with pytest.raises(ValueError, match="num_minibatches=8 exceeds unrolls_per_batch=4"):
        _impala_learner(num_minibatches=8)


def test_atari_defaults_learn_on_two_torch_threads_and_classic_control_on_one():
    # Measured end to end on 2 cores (benchmarks/results/torch_threads_*_pong-v5.md).
    from seedpool.trainers.impala import impala_defaults
    from seedpool.trainers.ppo import ppo_defaults

    assert impala_defaults("Pong-v5").torch_threads == ppo_defaults("Pong-v5").torch_threads == 2
    assert impala_defaults("CartPole-v1").torch_threads == ppo_defaults("CartPole-v1").torch_threads == 1


def test_old_impala_run_configs_resume_under_the_new_option_names(tmp_path):
    from seedpool.cli import train_config
    from seedpool.trainers.impala import impala_defaults
    from seedpool.experiment import config_to_dict

    data = config_to_dict(impala_defaults("Pong-v5"))
    old = dict(data)
    old["impala"] = {("lr" if k == "learning_rate" else "entropy_coef" if k == "ent_coef" else
                      "value_coef" if k == "vf_coef" else "batch_size" if k == "unrolls_per_batch" else k): v
                     for k, v in data["impala"].items()} | {"clip_rewards": True}
    old["seed_rl"] = {("env_batch_size" if k == "envs_per_recv" else k): v for k, v in old.pop("acting").items()}
    old["env_options"] = {"episodic_life": True}
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"algo": "impala", "config": old}))
    cfg = train_config("impala", ["--resume", str(run_dir)])
    assert cfg.impala.learning_rate == data["impala"]["learning_rate"]
    assert cfg.impala.unrolls_per_batch == data["impala"]["unrolls_per_batch"]
    assert cfg.env_options == {"episodic_life": True, "reward_clip": True}
    assert dataclasses.asdict(cfg.acting) == data["acting"]
