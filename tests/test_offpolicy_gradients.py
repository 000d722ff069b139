"""SAC's and TD3's hand-written gradients (`seedpool.algos.offpolicy_gradients`, `seedpool.models.mlp_grad`)
against autograd: the same batches, the same noise, the same updates to float32 rounding."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.algos.td3 import TD3Config, TD3Learner
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig, TwinQ
from seedpool.models.flat import flatten_parameters
from seedpool.models.mlp_grad import linear_layers, mlp_backward, mlp_forward, twinq_backward, twinq_forward

OBS = gym.spaces.Box(-10.0, 10.0, (5,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0, -1.0], np.float32), np.array([2.0, 1.0, 1.0], np.float32))


def _batch(n: int, seed: int, weights: bool) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, 5)), "next_obs": rng.normal(size=(n, 5)),  # float64, as MuJoCo's
            "action": rng.uniform(-1, 1, (n, 3)).astype(np.float32), "reward": rng.normal(size=n).astype(np.float32),
            "discount": np.where(rng.random(n) < 0.2, 0.0, 0.99).astype(np.float32),
            "weights": rng.uniform(0.2, 1.0, n).astype(np.float32) if weights else None, "indices": np.arange(n)}


def _learner(hand: bool, model: ContinuousModelConfig, **sac) -> SACLearner:
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, model, stochastic=True)
    return SACLearner(agent, SACConfig(learning_starts=0, **sac, hand_gradients=hand), action_dim=3)


def _td3(hand: bool, model: ContinuousModelConfig, **td3) -> TD3Learner:
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, model, stochastic=False)
    return TD3Learner(agent, TD3Config(learning_starts=0, **td3, hand_gradients=hand))


def _state(learner: SACLearner | TD3Learner) -> dict[str, torch.Tensor]:
    targets = {"target": learner.target} if isinstance(learner, SACLearner) else \
        {"target_critic": learner.target_critic, "target_actor": learner.target_actor}
    state = {f"model.{k}": v for k, v in learner.model.state_dict().items()}
    for name, target in targets.items():
        state.update({f"{name}.{k}": v for k, v in target.net.state_dict().items()})
    if isinstance(learner, SACLearner):
        state["log_alpha"] = learner.log_alpha.detach()
    return state


def _same_updates(by_hand, by_autograd, weights: bool, steps: int = 6) -> None:
    """Both learners take ``steps`` updates on the same batches and noise; metrics and states must agree."""
    assert by_hand.by_hand is not None and by_autograd.by_hand is None
    for step in range(steps):
        batch = _batch(64, step, weights)
        torch.manual_seed(100 + step)  # the same noise draws, in the same order
        hand_metrics, _ = by_hand.update(batch)
        torch.manual_seed(100 + step)
        autograd_metrics, _ = by_autograd.update(batch)
        assert hand_metrics.keys() == autograd_metrics.keys()
        for key, value in autograd_metrics.items():
            if not key.startswith("time/"):
                assert hand_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    hand_state, autograd_state = _state(by_hand), _state(by_autograd)
    for key, value in autograd_state.items():
        torch.testing.assert_close(hand_state[key], value, rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("model, sac, weights", [
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {}, False),
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {}, True),  # prioritized replay's IS weights
    (ContinuousModelConfig(hidden_sizes=(24,), activation="tanh", num_critics=3), {"policy_frequency": 2}, False),
    (ContinuousModelConfig(hidden_sizes=(16, 24, 16), num_critics=1), {"autotune": False}, True),
])
def test_hand_written_sac_updates_match_autograd(model, sac, weights):
    by_hand = _learner(True, model, **sac)
    _same_updates(by_hand, _learner(False, model, **sac), weights)
    # ... and the updates moved the networks (not a comparison of two untouched ones).
    assert not torch.equal(by_hand.model.actor.net[0].weight, _learner(True, model, **sac).model.actor.net[0].weight)


@pytest.mark.parametrize("model, td3, weights", [
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {}, False),  # delayed actor, smoothed targets
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {"policy_frequency": 1}, True),
    # DDPG: one critic, no smoothing, an actor step after every critic step
    (ContinuousModelConfig(hidden_sizes=(24,), activation="tanh", num_critics=1),
     {"policy_noise": 0.0, "policy_frequency": 1}, False),
])
def test_hand_written_td3_updates_match_autograd(model, td3, weights):
    by_hand = _td3(True, model, **td3)
    _same_updates(by_hand, _td3(False, model, **td3), weights)
    assert not torch.equal(by_hand.model.actor.net[0].weight, _td3(True, model, **td3).model.actor.net[0].weight)


def test_the_mlp_gradients_equal_autograds_on_a_fixed_batch():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(7, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    flatten_parameters(net)
    x, grad_out = torch.randn(32, 7), torch.randn(32, 4)
    with torch.no_grad():
        out, inputs = mlp_forward(linear_layers(net), x)
        mlp_backward(linear_layers(net), inputs, grad_out)
    hand = [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad.zero_()
    expected = net(x)
    (expected * grad_out).sum().backward()
    torch.testing.assert_close(out, expected.detach())
    for got, want in zip(hand, [p.grad for p in net.parameters()]):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_the_critics_input_gradient_equals_autograds_and_leaves_their_weights_alone(activation):
    torch.manual_seed(0)
    critic = TwinQ(8, (16, 16), num_critics=2, activation=activation)
    flatten_parameters(critic)
    obs, action, grad_q = torch.randn(32, 5), torch.randn(32, 3, requires_grad=True), torch.randn(2, 32)
    with torch.no_grad():
        q, inputs = twinq_forward(critic, torch.cat([obs, action], dim=-1))
        grad_action = twinq_backward(critic, inputs, grad_q, weights=False, input_from=5)
    assert all(not p.grad.any() for p in critic.parameters())
    expected = critic(obs, action)
    (expected * grad_q).sum().backward()
    torch.testing.assert_close(q, expected.detach())
    torch.testing.assert_close(grad_action, action.grad)


def test_networks_the_hand_written_gradients_do_not_cover_are_refused():
    with pytest.raises(ValueError, match="one ReLU or Tanh"):
        linear_layers(nn.Sequential(nn.Linear(3, 4), nn.ELU(), nn.Linear(4, 2)))
    with pytest.raises(ValueError, match="one ReLU or Tanh"):
        linear_layers(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)))


def test_bf16_learning_keeps_autograd():
    model = ContinuousModelConfig(hidden_sizes=(16, 16))
    assert SACLearner(ContinuousAgent(OBS, ACT, model, stochastic=True), SACConfig(), 3, precision="bf16").by_hand is None
    assert TD3Learner(ContinuousAgent(OBS, ACT, model, stochastic=False), TD3Config(), precision="bf16").by_hand is None
