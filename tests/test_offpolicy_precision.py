"""The off-policy critics' ensemble against plain per-critic MLPs, its float32 output layer
under bf16 autocast, and which precision `auto` gives SAC/TD3 learning and acting."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import seedpool.models.precision as precision
from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig, TwinQ
from seedpool.models.precision import has_wide_layer, resolve_precision

OBS = gym.spaces.Box(-10.0, 10.0, (17,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)


def _critic_as_mlp(q: TwinQ, k: int) -> nn.Sequential:
    """Critic ``k`` of the ensemble rebuilt as nn.Linear layers with ReLU between them."""
    layers: list[nn.Module] = []
    for w, b in zip(q.weights, q.biases):
        linear = nn.Linear(w.shape[1], w.shape[2])
        with torch.no_grad():
            linear.weight.copy_(w[k].T)
            linear.bias.copy_(b[k, 0])
        layers += [linear, nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def test_each_critic_of_the_ensemble_is_the_plain_mlp_of_its_weights():
    torch.manual_seed(0)
    q = TwinQ(23, (32, 32), num_critics=3)
    obs, action = torch.randn(40, 17), torch.rand(40, 6) * 2 - 1
    out = q(obs, action)
    assert out.shape == (3, 40) and out.dtype == torch.float32
    for k in range(3):
        expected = _critic_as_mlp(q, k)(torch.cat([obs, action], -1)).squeeze(-1)
        torch.testing.assert_close(out[k], expected, rtol=1e-5, atol=1e-5)


def test_the_output_layer_stays_float32_under_bf16_autocast():
    # Q-values near 1000, where bf16 rounds to multiples of 4: the output layer must not.
    torch.manual_seed(0)
    q = TwinQ(23, (), num_critics=2)  # the output layer alone
    with torch.no_grad():
        q.biases[-1].fill_(1000.0)
    obs, action = torch.randn(64, 17), torch.rand(64, 6) * 2 - 1
    exact = q(obs, action)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = q(obs, action)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, exact, rtol=0, atol=1e-3)
    assert (exact.to(torch.bfloat16).float() - exact).abs().max() > 0.1  # bf16 would have rounded them


def test_a_bf16_sac_update_stays_close_to_the_fp32_one():
    # Same weights, same minibatch, same noise: bf16 autocast changes the critic loss by
    # rounding only (the hidden layers' products), not by a different computation.
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(256, 17)).astype(np.float32), "next_obs": rng.normal(size=(256, 17)).astype(np.float32),
             "action": rng.uniform(-1, 1, (256, 6)).astype(np.float32), "reward": rng.normal(size=256).astype(np.float32),
             "discount": np.full(256, 0.99, np.float32), "weights": np.ones(256, np.float32), "indices": np.arange(256)}
    losses = {}
    for prec in ("fp32", "bf16"):
        torch.manual_seed(0)
        agent = ContinuousAgent(OBS, ACT, ContinuousModelConfig(), stochastic=True)
        learner = SACLearner(agent, SACConfig(), 6, precision=prec)
        torch.manual_seed(1)
        losses[prec] = learner.update(batch).metrics["losses/qf_loss"]
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.05)


@pytest.mark.parametrize("supported", [True, False])
def test_auto_gives_bf16_to_wide_minibatch_learning_and_fp32_to_acting_one_env(monkeypatch, supported):
    monkeypatch.setattr(precision, "bf16_supported", lambda device_type: supported)
    wide = ContinuousAgent(OBS, ACT, ContinuousModelConfig(), stochastic=True)  # 256-256
    narrow = ContinuousAgent(OBS, ACT, ContinuousModelConfig(hidden_sizes=(64, 64)), stochastic=True)
    assert has_wide_layer(wide) and not has_wide_layer(narrow)
    assert resolve_precision("auto", "cpu", wide, rows=256) == ("bf16" if supported else "fp32")
    assert resolve_precision("auto", "cpu", wide, rows=1) == "fp32"
    assert resolve_precision("auto", "cpu", wide) == "fp32"  # rows unknown: only CNNs
    assert resolve_precision("auto", "cpu", narrow, rows=4096) == "fp32"
    assert resolve_precision("fp32", "cpu", wide, rows=256) == "fp32"
