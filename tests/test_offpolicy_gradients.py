"""SAC's and TD3's hand-written gradients (`seedpool.kernels.offpolicy_gradients`, `seedpool.kernels.mlp_grad`)
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
from seedpool.kernels.mlp_grad import linear_layers, mlp_backward, mlp_forward, twinq_backward, twinq_forward

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
    targets = {"target": learner.target_critic} if isinstance(learner, SACLearner) else \
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
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {}, False),  # the joint update (the default)
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {}, True),  # prioritized replay's IS weights
    (ContinuousModelConfig(hidden_sizes=(32, 32)), {"joint_update": False}, True),  # the actor after the critics
    (ContinuousModelConfig(hidden_sizes=(24,), activation="tanh", num_critics=3), {"policy_frequency": 2}, False),
    (ContinuousModelConfig(hidden_sizes=(16, 24, 16), num_critics=1), {"autotune": False}, True),
])
def test_hand_written_sac_updates_match_autograd(model, sac, weights):
    # Both paths draw the same noise only when they take the same steps: the joint update draws
    # one [2n, A] block, the order with the actor after the critics two [n, A] ones.
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
        grad_action = twinq_backward(critic, inputs, grad_q, weight_rows=0, input_from=5)
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


def _gradients(learner: SACLearner | TD3Learner, batch: dict) -> dict[str, torch.Tensor]:
    """The critics' and the actor's flat gradients of one update (left in ``.grad`` by its steps)."""
    torch.manual_seed(7)
    learner.update(batch)
    return {name: torch.cat([p.grad.flatten() for p in net.parameters()]).clone()
            for name, net in (("critic", learner.model.critic), ("actor", learner.model.actor))}


@pytest.mark.parametrize("algo, options", [("sac", {}), ("sac", {"joint_update": False}), ("td3", {"policy_frequency": 1})])
def test_bf16_hand_written_gradients_are_autocasts(algo, options):
    """With bf16 the hand-written products run in bf16 as autocast's do: their gradients are
    autograd-under-autocast's to bf16 rounding, and measurably not float32's."""
    model = ContinuousModelConfig(hidden_sizes=(64, 64))

    def build(hand: bool, precision: str):
        torch.manual_seed(0)
        agent = ContinuousAgent(OBS, ACT, model, stochastic=algo == "sac")
        if algo == "sac":
            cfg = SACConfig(learning_starts=0, hand_gradients=hand, **options)
            return SACLearner(agent, cfg, action_dim=3, precision=precision)
        return TD3Learner(agent, TD3Config(learning_starts=0, hand_gradients=hand, **options), precision=precision)

    hand = build(True, "bf16")
    assert hand.by_hand is not None and hand.by_hand.dtype == torch.bfloat16
    batch = _batch(256, 0, weights=True)
    got, autocast, fp32 = _gradients(hand, batch), _gradients(build(False, "bf16"), batch), \
        _gradients(build(True, "fp32"), batch)
    for name in got:  # measured: 0.1-0.2% from autocast's, 0.3-1% from float32's (fp32 by hand: ~1e-6)
        scale = fp32[name].norm()
        assert (got[name] - autocast[name]).norm() / scale < 0.004, name
        assert 0.001 < (got[name] - fp32[name]).norm() / scale < 0.03, name  # bf16 products, not float32 ones


@pytest.mark.parametrize("weights", [False, True])
def test_the_joint_sac_gradients_are_the_critic_and_actor_gradients_on_the_same_networks(weights):
    # The joint pass (one actor forward over next_obs and obs, one critic forward over both
    # action sets, one backward that splits the rows) against the critic's and the actor's own
    # passes on the unchanged networks, with the same noise.
    learner = _learner(True, ContinuousModelConfig(hidden_sizes=(32, 32)))
    by_hand = learner.by_hand
    batch = _batch(48, 0, weights)
    data = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in batch.items() if k != "indices" and v is not None}
    alpha = torch.tensor(0.3)
    noise = torch.randn(96, 3)
    params = [*learner.model.critic.parameters(), *learner.model.actor.parameters()]

    loss, q, actor_loss, logp = by_hand.joint(data, alpha, noise)
    joint = [p.grad.clone() for p in params]
    for p in params:
        p.grad.fill_(float("nan"))  # every gradient must be written again, not left over
    critic_loss, critic_q = by_hand.critic(data, alpha, noise[:48])
    own_actor_loss, own_logp = by_hand.actor(data["obs"], alpha, noise[48:])
    for got, want in zip(joint, [p.grad for p in params]):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(loss, critic_loss)
    torch.testing.assert_close(q, critic_q)
    torch.testing.assert_close(actor_loss, own_actor_loss)
    torch.testing.assert_close(logp, own_logp)


def test_the_joint_update_reads_the_critics_before_their_step_and_the_other_order_after():
    # Same batch, same noise, one update each: the critics step alike (their loss does not read
    # the actor's step); the actors' gradients differ, because one read the stepped critics.
    # (Their weights after Adam's first step would not: that step moves by the gradient's sign.)
    model = ContinuousModelConfig(hidden_sizes=(32, 32))
    joint, after = _learner(True, model), _learner(True, model, joint_update=False)
    batch = _batch(64, 0, False)  # 64 x 3 noise: one [128, 3] draw equals two [64, 3] ones
    for learner in (joint, after):
        torch.manual_seed(7)
        learner.update(batch)
    torch.testing.assert_close(joint.model.critic.state_dict(), after.model.critic.state_dict())
    grads = [learner.model.actor.net[0].weight.grad for learner in (joint, after)]
    assert not torch.allclose(*grads, rtol=1e-3, atol=0)
    # With the critics' learning rate at 0 their step changes nothing, and the two orders agree.
    joint, after = _learner(True, model, q_lr=0.0), _learner(True, model, q_lr=0.0, joint_update=False)
    for learner in (joint, after):
        torch.manual_seed(7)
        learner.update(batch)
    torch.testing.assert_close(joint.model.state_dict(), after.model.state_dict())
    torch.testing.assert_close(*[learner.model.actor.net[0].weight.grad for learner in (joint, after)])
