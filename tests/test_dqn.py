"""DQN learner: TD targets by hand, IS weights, priorities, target updates, schedules, resume."""
import io

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.dqn import (
    DQNConfig,
    DQNLearner,
    apex_epsilons,
    dqn_loss,
    epsilon_greedy,
    exploration_epsilon,
    linear_schedule,
    td_targets,
)
from seedpool.algos.learner import NonFiniteLossError
from seedpool.models import QModelConfig, make_q_network

OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACTIONS = gym.spaces.Discrete(3)

# Linear Q networks (no hidden layer): Q(s) = W s, so every Q-value can be read off by hand.
W_ONLINE = [[1.0, 2.0], [3.0, 0.0], [2.0, 1.0]]  # [action, obs dim]
W_TARGET = [[5.0, 1.0], [0.0, 3.0], [4.0, 7.0]]


def _linear_q(weight) -> torch.nn.Module:
    net = make_q_network(OBS, ACTIONS, QModelConfig(hidden_sizes=()))
    layer = net.head.advantage[1]
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.zero_()
    return net


def _learner(**overrides) -> DQNLearner:
    torch.manual_seed(0)
    cfg = DQNConfig(**{"learning_rate": 0.1, "max_grad_norm": 1e9, **overrides})
    learner = DQNLearner(_linear_q(W_ONLINE), cfg, total_steps=1000)
    with torch.no_grad():
        learner.target.head.advantage[1].weight.copy_(torch.tensor(W_TARGET))
    return learner


def _batch(rows: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(rows, 2)).astype(np.float32),
        "action": rng.integers(0, 3, rows),
        "reward": rng.normal(size=rows).astype(np.float32),
        "discount": np.full(rows, 0.9, np.float32),
        "next_obs": rng.normal(size=(rows, 2)).astype(np.float32),
        "weights": np.ones(rows, np.float32),
        "indices": np.arange(rows) + 100,
    }


# next_obs e0: online Q = (1, 3, 2) -> argmax 1; target Q = (5, 0, 4) -> max 5, at a=1: 0.
# next_obs e1: online Q = (2, 0, 1) -> argmax 0; target Q = (1, 3, 7) -> max 7, at a=0: 1.
# Row 2 terminated (discount 0): its huge next_obs must not leak into the target.
NEXT = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1e6, 1e6]])
REWARD = torch.tensor([1.0, -2.0, 0.5])
DISCOUNT = torch.tensor([0.9, 0.81, 0.0])


@pytest.mark.parametrize("double_q, expected", [
    (False, [1.0 + 0.9 * 5.0, -2.0 + 0.81 * 7.0, 0.5]),
    (True, [1.0 + 0.9 * 0.0, -2.0 + 0.81 * 1.0, 0.5]),
])
def test_td_targets_by_hand(double_q, expected):
    y = td_targets(_linear_q(W_ONLINE), _linear_q(W_TARGET), REWARD, DISCOUNT, NEXT, double_q)
    torch.testing.assert_close(y, torch.tensor(expected))


@pytest.mark.parametrize("double_q", [False, True])
def test_priorities_are_abs_td_errors_before_the_step(double_q):
    learner = _learner(double_q=double_q)
    obs = np.array([[1.0, 1.0], [2.0, -1.0], [0.0, 0.5]], np.float32)
    action = np.array([0, 1, 2])
    batch = {"obs": obs, "action": action, "reward": REWARD.numpy(), "discount": DISCOUNT.numpy(),
             "next_obs": NEXT.numpy(), "weights": np.ones(3, np.float32), "indices": np.array([7, 3, 9])}
    q_taken = np.array([1 + 2, 3 * 2, 0.5])  # W_ONLINE[a] . obs
    target = [5.5, -2 + 0.81 * 7, 0.5] if not double_q else [1.0, -2 + 0.81, 0.5]
    metrics, priorities = learner.update(batch)
    np.testing.assert_allclose(priorities, np.abs(q_taken - np.array(target)), rtol=1e-6)
    assert priorities.dtype == np.float32 and priorities.shape == (3,)
    assert metrics["losses/q_values"] == pytest.approx(q_taken.mean())
    assert set(metrics) >= {"losses/td_loss", "losses/q_values", "losses/grad_norm"}


def _grads(weights, rows=slice(None), loss="huber") -> torch.Tensor:
    online, target = _linear_q(W_ONLINE), _linear_q(W_TARGET)
    b = _batch(rows=4, seed=3)
    b["reward"] = b["reward"] * 5  # |TD| > 1 on some rows: both Huber branches are used
    data = {k: torch.as_tensor(v[rows]) for k, v in b.items() if k not in ("weights", "indices")}
    data["action"] = data["action"].long()
    data["weights"] = torch.tensor(weights, dtype=torch.float32)
    value, _, _ = dqn_loss(online, target, data, double_q=True, loss=loss)
    value.backward()
    return online.head.advantage[1].weight.grad.clone()


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_is_weights_scale_each_rows_loss(loss):
    full = _grads([1.0, 1.0, 1.0, 1.0], loss=loss)
    # A weight-0 row gives no gradient: the same as leaving it out (the mean still divides by 4).
    without_last = _grads([1.0, 1.0, 1.0, 0.0], loss=loss)
    first_three = _grads([1.0, 1.0, 1.0], rows=slice(0, 3), loss=loss)
    torch.testing.assert_close(without_last, first_three * 3 / 4)
    assert not torch.allclose(without_last, full)
    torch.testing.assert_close(_grads([2.0, 2.0, 2.0, 2.0], loss=loss), 2 * full)


def test_hard_target_update_exactly_every_n_updates():
    learner = _learner(target_network_frequency=3, tau=1.0)
    initial_target = learner.target_params.clone()
    for k in range(1, 8):
        learner.update(_batch(seed=k))
        same = torch.equal(learner.target_params, learner.params)
        assert same == (k % 3 == 0), f"after update {k}"
        if k < 3:
            assert torch.equal(learner.target_params, initial_target)
    assert not torch.equal(learner.target_params, initial_target)


def test_polyak_target_update_with_tau():
    learner = _learner(target_network_frequency=1, tau=0.25)
    before = learner.target_params.clone()
    learner.update(_batch())
    torch.testing.assert_close(learner.target_params, 0.25 * learner.params + 0.75 * before)
    assert not learner.target_params.requires_grad


def test_terminated_rows_do_not_bootstrap_whatever_their_next_obs():
    batch = _batch(rows=3)
    batch["discount"][:2] = 0.0
    batch["next_obs"][0] = np.nan  # a replay may leave anything after a terminal step
    batch["next_obs"][1] = 1e6
    learner = _learner()
    priorities = learner.update(batch).priorities
    q = (batch["obs"] @ np.array(W_ONLINE, np.float32).T)[np.arange(3), batch["action"]]
    np.testing.assert_allclose(priorities[:2], np.abs(q - batch["reward"])[:2], rtol=1e-5)
    assert priorities[2] != pytest.approx(abs(q[2] - batch["reward"][2]))  # row 2 bootstraps


def test_non_finite_loss_raises_before_touching_parameters():
    learner = _learner()
    before = learner.params.detach().clone()
    batch = _batch()
    batch["reward"][1] = np.nan
    with pytest.raises(NonFiniteLossError, match="TD loss"):
        learner.update(batch)
    assert torch.equal(learner.params, before) and learner.version == 0


def test_state_dict_round_trip_includes_the_target_network():
    a = _learner(target_network_frequency=2)
    for k in range(3):
        a.update(_batch(seed=k), env_steps=4)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    b = DQNLearner(make_q_network(OBS, ACTIONS, QModelConfig(hidden_sizes=())), a.cfg, total_steps=1000)
    b.load_state_dict(state)
    assert (b.version, b.steps_trained) == (3, 12) and b.progress == pytest.approx(0.012)
    assert torch.equal(b.params, a.params) and torch.equal(b.target_params, a.target_params)
    assert not torch.equal(b.params, b.target_params)  # the target lags: it was restored, not copied
    for learner in (a, b):
        learner.update(_batch(seed=9), env_steps=4)  # 4th update: target copied on both
    assert torch.equal(b.params, a.params) and torch.equal(b.target_params, a.target_params)
    assert torch.equal(b.params, b.target_params)


def test_policy_average_is_the_running_mean_then_an_exponential_average():
    learner = _learner(policy_average=3)
    seen = [learner.params.detach().clone()]
    for k in range(1, 6):
        learner.update(_batch(seed=k))
        seen.append(learner.params.detach().clone())
        if k <= 3:  # the mean of the weights after each step so far: no pull towards the initial ones
            expected = torch.stack(seen[1:]).mean(0)
        else:
            expected = expected + (seen[-1] - expected) / 3
        torch.testing.assert_close(learner.average_params, expected)
    assert not torch.equal(learner.average_params, learner.params)
    assert not learner.average_params.requires_grad


def test_policy_average_round_trips_and_a_checkpoint_without_one_starts_it_from_the_model():
    a = _learner(policy_average=4)
    for k in range(6):
        a.update(_batch(seed=k))
    state = a.state_dict()
    assert set(state["policy_average"]) == set(state["model"])
    b = DQNLearner(make_q_network(OBS, ACTIONS, QModelConfig(hidden_sizes=())), a.cfg, total_steps=1000)
    b.load_state_dict(state)
    assert torch.equal(b.average_params, a.average_params)
    del state["policy_average"]
    c = DQNLearner(make_q_network(OBS, ACTIONS, QModelConfig(hidden_sizes=())), a.cfg, total_steps=1000)
    c.load_state_dict(state)
    assert torch.equal(c.average_params, a.params)
    assert "policy_average" not in _learner().state_dict()  # off by default
    with pytest.raises(ValueError, match="policy_average"):
        _learner(policy_average=-1)


def test_linear_schedule_and_dqns_epsilon():
    assert [linear_schedule(1.0, 0.05, 0.1, p) for p in (0.0, 0.05, 0.1, 0.7)] == pytest.approx(
        [1.0, 0.525, 0.05, 0.05])
    assert linear_schedule(1.0, 0.05, 0.0, 0.0) == 0.05
    cfg = DQNConfig(exploration_fraction=0.5, exploration_initial_eps=1.0, exploration_final_eps=0.1)
    assert exploration_epsilon(cfg, 0.25) == pytest.approx(0.55)
    assert exploration_epsilon(cfg, 0.9) == pytest.approx(0.1)


def test_apex_epsilons():
    eps = apex_epsilons(8)
    assert eps.shape == (8,)
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)
    assert eps[3] == pytest.approx(0.4 ** (1 + 7 * 3 / 7))
    assert np.all(np.diff(eps) < 0)
    np.testing.assert_allclose(apex_epsilons(1), [0.4])
    np.testing.assert_allclose(apex_epsilons(2, eps=0.5, alpha=1.0), [0.5, 0.25])
    with pytest.raises(ValueError):
        apex_epsilons(0)


def test_epsilon_greedy_per_row_frequencies():
    num_actions, reps = 4, 20000
    q = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]]).repeat(reps, 1)
    greedy = q.argmax(-1)
    eps = torch.tensor([0.0, 0.5, 1.0]).repeat(reps)
    actions = epsilon_greedy(q, eps, torch.Generator().manual_seed(0))
    off_greedy = (actions != greedy).float().view(reps, 3).mean(0)
    # A random action is the greedy one 1/A of the time.
    expected = torch.tensor([0.0, 0.5, 1.0]) * (num_actions - 1) / num_actions
    torch.testing.assert_close(off_greedy, expected, atol=0.015, rtol=0)
    counts = torch.bincount(actions.view(reps, 3)[:, 2], minlength=num_actions).float() / reps
    torch.testing.assert_close(counts, torch.full((num_actions,), 0.25), atol=0.015, rtol=0)
    again = epsilon_greedy(q, eps, torch.Generator().manual_seed(0))
    assert torch.equal(actions, again) and actions.dtype == torch.int64
    assert torch.equal(epsilon_greedy(q[:6], 0.0, torch.Generator()), greedy[:6])
    shared = epsilon_greedy(q[:3000], np.float32(1.0), torch.Generator().manual_seed(1))
    assert (shared != greedy[:3000]).float().mean() > 0.7
