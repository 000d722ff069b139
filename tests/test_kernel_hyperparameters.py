"""Kernels read hyperparameters at every call: a learning rate (or entropy coefficient) changed
between two updates moves the kernel path's parameters exactly as it moves the plain path's."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.ppo import PPOConfig, PPOLearner
from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.algos.td3 import TD3Config, TD3Learner
from seedpool.models import ModelConfig, make_policy
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig
from seedpool.records import Rollout
from rollouts import random_rollout

OBS = gym.spaces.Box(-1, 1, (4,))


def _rollout(policy, seed: int) -> Rollout:
    return random_rollout(policy, OBS, gym.spaces.Discrete(3), seed)


def _ppo(kernel: bool) -> PPOLearner:
    torch.manual_seed(0)
    policy = make_policy(OBS, gym.spaces.Discrete(3), ModelConfig(hidden_sizes=(16, 16)))
    cfg = PPOConfig(num_steps=16, num_minibatches=2, update_epochs=2, learning_rate=1e-3, anneal_lr=False,
                    numpy_update=kernel)
    learner = PPOLearner(policy, cfg, total_steps=10_000)
    assert (learner.kernel is not None) == kernel
    return learner


def _ppo_params(change: bool, kernel: bool) -> torch.Tensor:
    learner = _ppo(kernel)
    rollouts = [_rollout(learner.model, seed) for seed in range(3)]  # from the initial policy, for both paths
    for i, rollout in enumerate(rollouts):
        if change and i == 1:  # between updates, through the learner's config
            learner.cfg.learning_rate = 3e-2
            learner.cfg.ent_coef = 0.5
        if change and i == 2:
            learner.cfg.vf_coef = 2.0
        torch.manual_seed(10 + i)  # the same minibatch order on both paths
        learner.update(rollout)
    return learner.params.detach().clone()


def test_ppo_kernel_reads_the_learning_rate_and_coefficients_at_every_update():
    kernel, plain = _ppo_params(True, kernel=True), _ppo_params(True, kernel=False)
    torch.testing.assert_close(kernel, plain, rtol=1e-4, atol=1e-5)
    unchanged = _ppo_params(False, kernel=True)
    assert (kernel - unchanged).abs().max() > 1e-3  # the change did move the kernel's parameters


def _batch(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, 5)).astype(np.float32), "next_obs": rng.normal(size=(n, 5)).astype(np.float32),
            "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32), "reward": rng.normal(size=n).astype(np.float32),
            "discount": np.full(n, 0.99, np.float32), "weights": None, "indices": np.arange(n)}


def _offpolicy(algo: str, hand: bool):
    torch.manual_seed(0)
    obs, act = gym.spaces.Box(-10, 10, (5,), np.float32), gym.spaces.Box(-1, 1, (2,), np.float32)
    agent = ContinuousAgent(obs, act, ContinuousModelConfig(hidden_sizes=(32, 32)), stochastic=algo == "sac")
    if algo == "sac":
        learner = SACLearner(agent, SACConfig(learning_starts=0, hand_gradients=hand), action_dim=2)
    else:
        learner = TD3Learner(agent, TD3Config(learning_starts=0, policy_frequency=1, hand_gradients=hand))
    assert (learner.by_hand is not None) == hand
    return learner


def _offpolicy_params(algo: str, hand: bool, change: bool) -> list[torch.Tensor]:
    learner = _offpolicy(algo, hand)
    for step in range(4):
        if change and step == 2:  # between updates: the config and the optimizers' param groups alike
            names = ("q_lr", "policy_lr") if algo == "sac" else ("learning_rate",)
            for name in names:
                setattr(learner.cfg, name, 2e-2)
            for opt in (learner.optimizer, learner.actor_optimizer):
                opt.param_groups[0]["lr"] = 2e-2
            if algo == "td3":
                learner.cfg.policy_noise = 0.5
        torch.manual_seed(100 + step)  # the same noise on both paths
        learner.update(_batch(64, step))
    return [p.detach().clone() for p in learner.model.parameters()]


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_hand_written_gradients_follow_a_learning_rate_changed_between_updates(algo):
    hand, plain = _offpolicy_params(algo, True, True), _offpolicy_params(algo, False, True)
    for a, b in zip(hand, plain):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    unchanged = _offpolicy_params(algo, True, False)
    assert max(float((a - b).abs().max()) for a, b in zip(hand, unchanged)) > 1e-3
