"""SAC, TD3 and DDPG: the squashed Gaussian, action rescaling, target smoothing, delayed actor
updates, the temperature's direction, and what a checkpoint carries through a resume."""
import copy
import io
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool import kernels
from seedpool.algos.offpolicy import td_target
from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.algos.td3 import TD3Config, TD3Learner, exploration_actions, smoothed_actions
from seedpool.models.continuous import (
    BoxScaler, ContinuousAgent, ContinuousModelConfig, SquashedGaussianActor, squashed_gaussian,
)

OBS = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
SMALL = ContinuousModelConfig(hidden_sizes=(16, 16))


def _batch(n: int = 32, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(n, 3)).astype(np.float32), "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
            "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32), "reward": rng.normal(size=n).astype(np.float32),
            "discount": np.where(rng.random(n) < 0.1, 0.0, 0.99).astype(np.float32),
            "weights": np.ones(n, np.float32), "indices": np.arange(n)}


def test_squashed_gaussian_log_prob_matches_a_naive_change_of_variables():
    torch.manual_seed(0)
    mean = torch.randn(64, 3, dtype=torch.float64)
    log_std = torch.rand(64, 3, dtype=torch.float64) * 2 - 1.5
    noise = torch.randn(64, 3, dtype=torch.float64)
    action, logp = squashed_gaussian(mean, log_std, noise)
    # Naive: the Gaussian density of u, less log|d tanh(u)/du| = log(1 - tanh(u)^2), per dimension.
    u = mean + log_std.exp() * noise
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
    naive = gaussian - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(action, torch.tanh(u))
    torch.testing.assert_close(logp, naive)
    # And torch's own transformed distribution agrees.
    dist = torch.distributions.TransformedDistribution(torch.distributions.Normal(mean, log_std.exp()),
                                                       [torch.distributions.TanhTransform()])
    torch.testing.assert_close(logp, dist.log_prob(action).sum(-1), rtol=1e-5, atol=1e-5)


def test_squashed_gaussian_log_prob_stays_finite_where_tanh_saturates():
    mean = torch.tensor([[30.0, -30.0]])
    _, logp = squashed_gaussian(mean, torch.zeros(1, 2), torch.zeros(1, 2))
    assert torch.isfinite(logp).all()
    # The naive form is inf here in float32: 1 - tanh(30)^2 rounds to 0.
    assert not torch.isfinite(torch.log(1 - torch.tanh(mean) ** 2)).all()


def test_actor_samples_lie_in_the_unit_box_and_deterministic_is_tanh_of_the_mean():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, 2, (16,))
    obs = torch.randn(100, 3)
    action, logp = actor.sample(obs)
    assert action.shape == (100, 2) and logp.shape == (100,)
    assert (action.abs() <= 1).all()
    mean, log_std = actor(obs)
    assert (log_std >= -5).all() and (log_std <= 2).all()
    torch.testing.assert_close(actor.sample(obs, deterministic=True)[0], torch.tanh(mean))


@pytest.mark.parametrize("stochastic, deterministic, activation", [
    (True, False, "relu"), (True, True, "relu"), (True, False, "tanh"), (False, False, "relu"), (False, False, "tanh")])
def test_acting_in_numpy_draws_the_actions_the_actor_samples(stochastic, deterministic, activation):
    # On a CPU in float32 acting runs the actor in NumPy and skips the log-probability; its
    # actions are the torch actor's own draws from the same generator, to float32 rounding.
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, ContinuousModelConfig(hidden_sizes=(16, 16), activation=activation),
                            stochastic=stochastic)
    obs = torch.randn(5, 3, dtype=torch.float64)  # as a MuJoCo env's
    numpy_unit_action = kernels.continuous_acting(agent, "cpu", "fp32")
    assert numpy_unit_action is not None
    assert kernels.continuous_acting(agent, "cpu", "bf16") is None
    with torch.inference_mode():
        acted = numpy_unit_action(obs, deterministic, torch.Generator().manual_seed(3))
    if stochastic:
        expected = agent.actor.sample(obs, deterministic, torch.Generator().manual_seed(3))[0]
    else:
        expected = agent.actor(obs)
    assert acted.dtype == torch.float32
    torch.testing.assert_close(acted, expected.detach())
    # Under bf16 autocast, acting stays in torch (and its bf16 arithmetic).
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        generator = torch.Generator().manual_seed(3)
        in_torch = agent.unit_action(obs, deterministic, torch.Generator().manual_seed(3))
        torch.testing.assert_close(numpy_unit_action(obs, deterministic, generator), in_torch, rtol=0, atol=0)


def test_box_scaler_maps_the_unit_box_onto_the_bounds_and_back():
    scaler = BoxScaler(ACT)
    unit = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
    env = scaler.to_env(unit)
    torch.testing.assert_close(env, torch.tensor([[-2.0, 0.0], [2.0, 1.0], [0.0, 0.5]]))
    torch.testing.assert_close(scaler.to_unit(env), unit)
    agent = ContinuousAgent(OBS, ACT, SMALL, stochastic=True)
    actions, _, _ = agent.act(torch.randn(200, 3) * 5)
    low, high = torch.as_tensor(ACT.low), torch.as_tensor(ACT.high)
    assert ((actions >= low) & (actions <= high)).all()


@pytest.mark.parametrize("low, high", [(-np.inf, 1.0), (-1.0, np.inf)])
def test_infinite_action_bounds_are_refused_with_a_clear_error(low, high):
    space = gym.spaces.Box(np.array([low, -1.0], np.float32), np.array([high, 1.0], np.float32))
    with pytest.raises(ValueError, match="infinite bounds") as err:
        ContinuousAgent(OBS, space, SMALL, stochastic=True)
    assert "RescaleAction" in str(err.value)
    with pytest.raises(ValueError, match="1-D Box action space"):
        BoxScaler(gym.spaces.Discrete(3))


def test_target_policy_smoothing_clips_the_noise_and_the_action():
    torch.manual_seed(0)
    target_actor = lambda obs: torch.full((obs.shape[0], 2), 0.9)  # noqa: E731
    obs = torch.zeros(5000, 3)
    torch.testing.assert_close(smoothed_actions(target_actor, obs, 0.0, 0.5), torch.full((5000, 2), 0.9))
    smoothed = smoothed_actions(target_actor, obs, 0.2, 0.5)
    assert smoothed.max() <= 1.0 and smoothed.min() >= 0.4 - 1e-6  # 0.9 - noise_clip
    assert (smoothed == 1.0).any() and smoothed.std() > 0.1
    # Huge noise: nearly every draw is clipped to +-noise_clip, then the action to the unit box.
    wide = smoothed_actions(target_actor, obs, 100.0, 0.5)
    at_a_clip = torch.isclose(wide, torch.tensor(0.4)) | (wide == 1.0)
    assert wide.min() >= 0.4 - 1e-6 and at_a_clip.float().mean() > 0.98
    noisy = exploration_actions(torch.zeros(5000, 2), 0.1)
    assert abs(float(noisy.std()) - 0.1) < 0.01 and noisy.abs().max() <= 1.0


def test_td_target_does_not_bootstrap_a_terminated_row_even_from_nan():
    y = td_target(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.5]), torch.tensor([math.nan, 4.0]))
    torch.testing.assert_close(y, torch.tensor([1.0, 4.0]))


def _flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()]).clone()


def test_td3_delays_actor_updates_and_moves_the_targets_by_tau():
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, SMALL, stochastic=False)
    learner = TD3Learner(agent, TD3Config(policy_frequency=3, tau=0.25))
    actor0, target_critic0, critic0 = _flat(agent.actor), _flat(learner.target_critic.net), _flat(agent.critic)
    learner.update(_batch(seed=1))
    learner.update(_batch(seed=2))
    assert torch.equal(_flat(agent.actor), actor0)  # two critic steps, no actor step yet
    assert torch.equal(_flat(learner.target_critic.net), target_critic0)
    assert not torch.equal(_flat(agent.critic), critic0)
    critic_before = _flat(agent.critic)
    learner.update(_batch(seed=3))
    assert not torch.equal(_flat(agent.actor), actor0)  # the third step: the actor's turn
    critic_after = _flat(agent.critic)
    assert not torch.equal(critic_after, critic_before)
    torch.testing.assert_close(_flat(learner.target_critic.net), target_critic0 + 0.25 * (critic_after - target_critic0))


def test_ddpg_is_td3_with_one_critic_and_no_smoothing():
    agent = ContinuousAgent(OBS, ACT, ContinuousModelConfig(hidden_sizes=(16,), num_critics=1), stochastic=False)
    learner = TD3Learner(agent, TD3Config(policy_noise=0.0, policy_frequency=1))
    assert agent.critic(torch.zeros(4, 3), torch.zeros(4, 2)).shape == (1, 4)
    actor0 = _flat(agent.actor)
    metrics, priorities = learner.update(_batch())
    assert priorities is None and "losses/actor_loss" in metrics
    assert not torch.equal(_flat(agent.actor), actor0)


@pytest.mark.parametrize("logp, direction", [(3.0, 1), (-3.0, -1)])
def test_entropy_tuning_raises_alpha_below_the_target_entropy_and_lowers_it_above(logp, direction):
    agent = ContinuousAgent(OBS, ACT, SMALL, stochastic=True)
    learner = SACLearner(agent, SACConfig(alpha=0.2), action_dim=2)
    assert learner.target_entropy == -2.0
    before = float(learner.alpha)
    # Entropy -log pi = -3 < -2 (too little): alpha must grow; entropy 3 > -2: alpha must shrink.
    learner.alpha_step(learner.temperature_loss(torch.full((64,), logp)), 0)
    assert np.sign(float(learner.alpha) - before) == direction


def test_sac_temperature_follows_the_policy_entropy_through_updates():
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, SMALL, stochastic=True)
    # A target entropy far above what a squashed policy can have: alpha must only grow.
    learner = SACLearner(agent, SACConfig(alpha=0.1, target_entropy=10.0, policy_lr=1e-2), action_dim=2)
    alphas = [float(learner.alpha)]
    for seed in range(5):
        metrics, _ = learner.update(_batch(seed=seed))
        alphas.append(metrics["losses/alpha"])
    alphas.append(float(learner.alpha))
    assert all(b > a for a, b in zip(alphas[1:], alphas[2:])), alphas
    fixed = SACLearner(ContinuousAgent(OBS, ACT, SMALL, stochastic=True), SACConfig(alpha=0.3, autotune=False), 2)
    fixed.update(_batch())
    assert float(fixed.alpha) == pytest.approx(0.3)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_learner_state_round_trips_to_the_same_next_update(algo):
    def build():
        torch.manual_seed(0)
        if algo == "sac":
            return SACLearner(ContinuousAgent(OBS, ACT, SMALL, stochastic=True), SACConfig(), 2)
        return TD3Learner(ContinuousAgent(OBS, ACT, SMALL, stochastic=False), TD3Config(policy_frequency=2))

    a = build()
    for seed in range(3):
        a.update(_batch(seed=seed))
    b = build()
    saved = io.BytesIO()  # through bytes, as a checkpoint goes: no tensor shared with `a`
    torch.save(a.state_dict(), saved)
    saved.seek(0)
    b.load_state_dict(torch.load(saved, weights_only=True))
    assert b.version == a.version == 3
    torch.manual_seed(7)
    ma, _ = a.update(_batch(seed=9))
    torch.manual_seed(7)
    mb, _ = b.update(_batch(seed=9))
    assert ma["losses/qf_loss"] == mb["losses/qf_loss"]
    assert torch.equal(_flat(a.model), _flat(b.model))


def test_running_norm_matches_the_statistics_of_everything_it_saw():
    from seedpool.models.normalize import RunningNorm

    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)) * [1, 10, 0.1] for n in (1, 7, 64, 5)]
    norm = RunningNorm((3,))
    for b in batches:
        norm.update(b)
    seen = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-10)
    np.testing.assert_allclose(norm.var.numpy(), seen.var(0), rtol=1e-10)
    assert float(norm.count) == len(seen)
    x = torch.as_tensor(seen[:4], dtype=torch.float32)
    expected = (seen[:4] - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4, atol=1e-5)
    assert float(norm(torch.full((1, 3), 1e6)).max()) == 10.0  # clipped


def test_agents_and_learners_read_normalised_observations():
    torch.manual_seed(0)
    agent = ContinuousAgent(OBS, ACT, ContinuousModelConfig(hidden_sizes=(16,), obs_norm=True), stochastic=False)
    agent.observe(np.random.default_rng(0).normal(5.0, 3.0, size=(100, 3)))
    obs = torch.full((2, 3), 5.0)
    torch.testing.assert_close(agent.unit_action(obs), agent.actor(agent.obs_norm(obs)))
    assert not torch.allclose(agent.unit_action(obs), agent.actor(obs))
    plain = ContinuousAgent(OBS, ACT, ContinuousModelConfig(hidden_sizes=(16,)), stochastic=False)
    plain.observe(np.ones((4, 3)))  # no normalisation: nothing to update
    assert plain.obs_norm is None and torch.equal(plain.normalize(obs), obs)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_a_nan_reward_is_refused_before_any_parameter_changes(algo):
    from seedpool.algos.gradient import NonFiniteLossError

    torch.manual_seed(0)
    if algo == "sac":
        learner = SACLearner(ContinuousAgent(OBS, ACT, SMALL, stochastic=True), SACConfig(), 2)
    else:
        learner = TD3Learner(ContinuousAgent(OBS, ACT, SMALL, stochastic=False), TD3Config(policy_frequency=1))
    learner.update(_batch(seed=0))
    before = _flat(learner.model)
    optimizer = copy.deepcopy(learner.optimizer.state_dict())
    batch = _batch(seed=1)
    batch["reward"][3] = np.nan
    with pytest.raises(NonFiniteLossError, match="critic"):
        learner.update(batch)
    assert torch.equal(_flat(learner.model), before) and learner.version == 1
    torch.testing.assert_close(learner.optimizer.state_dict(), optimizer)
