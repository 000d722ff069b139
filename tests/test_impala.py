"""IMPALA loss and learner update: masking, on-policy ratios, versions, NaN handling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seedpool.algos.impala import ImpalaConfig, ImpalaLearner, NonFiniteLossError, impala_loss, unrolls_to_tensors
from seedpool.inference import Unrolls
from seedpool.models import MLPActorCritic


def random_unrolls(model, T=5, B=4, seed=0, version=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T + 1, B, 3)).astype(np.float32)
    with torch.no_grad():
        actions, logp, _ = model.act(torch.from_numpy(obs[:T].reshape(T * B, 3)))
    valid = np.ones((T, B), bool)
    valid[2, 1] = False
    term = np.zeros((T, B), bool)
    term[1, 1] = True
    return Unrolls(
        obs=obs, actions=actions.view(T, B).numpy(), logp=logp.view(T, B).numpy(),
        rewards=rng.normal(size=(T, B)).astype(np.float32), terminated=term,
        truncated=np.zeros((T, B), bool), valid=valid, first=np.zeros((T, B), bool),
        versions=np.full((T, B), version, np.int64), slots=np.arange(B),
    )


def test_loss_is_finite_on_policy_and_ignores_invalid_steps():
    torch.manual_seed(0)
    model = MLPActorCritic(3, 2, continuous=False)
    u = random_unrolls(model)
    cfg = ImpalaConfig()
    loss, parts = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert torch.isfinite(loss)
    assert parts["losses/importance_ratio"].item() == pytest.approx(1.0, abs=1e-5)
    # What happens at the autoreset step (its action and reward) must not matter.
    u.rewards[2, 1] = 1e6
    u.actions[2, 1] = 1 - u.actions[2, 1]
    loss2, _ = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-6)
    # ...but a real step's reward does.
    u.rewards[3, 1] = 1e3
    loss3, _ = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert abs(loss3.item() - loss.item()) > 1.0


def test_updates_raise_the_probability_of_rewarded_actions_and_count_versions():
    torch.manual_seed(1)
    model = MLPActorCritic(3, 2, continuous=False)
    learner = ImpalaLearner(model, ImpalaConfig(lr=1e-2, anneal_lr=False, entropy_coef=0.0))
    obs = torch.zeros(1, 3)

    def p_action1():
        with torch.no_grad():
            return torch.softmax(model(obs)[0], -1)[0, 1].item()

    before = p_action1()
    for i in range(30):
        u = random_unrolls(model, seed=i, version=max(0, learner.version - 2))
        u.obs[:] = 0.0
        u.rewards[:] = (u.actions == 1).astype(np.float32)  # a bandit: action 1 pays
        u.valid[:] = True
        u.terminated[:] = True
        metrics = learner.update(u)
    assert p_action1() > before + 0.3
    assert learner.version == 30
    assert learner.steps_trained == 30 * 5 * 4
    assert metrics["charts/policy_lag_mean"] == 2.0


def test_nan_loss_raises_and_leaves_parameters_untouched():
    torch.manual_seed(2)
    model = MLPActorCritic(3, 2, continuous=False)
    learner = ImpalaLearner(model, ImpalaConfig())
    u = random_unrolls(model)
    u.rewards[0, 0] = np.nan
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(NonFiniteLossError, match="loss is nan"):
        learner.update(u)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert learner.version == 0


def test_checkpoint_state_round_trip():
    torch.manual_seed(3)
    a = ImpalaLearner(MLPActorCritic(3, 2, continuous=False), ImpalaConfig(optimizer="rmsprop"))
    a.update(random_unrolls(a.model))
    b = ImpalaLearner(MLPActorCritic(3, 2, continuous=False), ImpalaConfig(optimizer="rmsprop"))
    b.load_state_dict(a.state_dict())
    assert b.version == 1 and b.steps_trained == a.steps_trained
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])
