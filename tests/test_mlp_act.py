"""The compiled acting path of small categorical MLP policies (seedpool.kernels.mlp_act)."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.models import ModelConfig, make_policy
from seedpool import kernels
from seedpool.kernels.mlp_act import CompiledMLPAct, supports


def _policy(obs_dim=4, actions=3, activation="tanh", **kw):
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (obs_dim,), np.float32)
    return make_policy(space, gym.spaces.Discrete(actions), ModelConfig(activation=activation, **kw))


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_logprobs_and_values_match_torch(activation):
    policy = _policy(activation=activation)
    fast = CompiledMLPAct(policy)
    obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    actions, logprobs, values = fast.act(obs)
    with torch.no_grad():
        logits, want_values = policy(torch.from_numpy(obs))
        want_logp = torch.log_softmax(logits, -1).numpy()
    np.testing.assert_allclose(values, want_values.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logprobs, want_logp[np.arange(16), actions], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fast.value(obs), want_values.numpy(), rtol=1e-5, atol=1e-5)


def test_actions_follow_the_policy_distribution():
    policy = _policy(actions=4)
    with torch.no_grad():  # spread the probabilities so every action is drawn often
        policy.linear_layers().policy[-1][0].mul_(50.0)
    fast = CompiledMLPAct(policy)
    obs = np.random.default_rng(2).normal(size=(1, 4)).astype(np.float32)
    probs = torch.softmax(policy(torch.from_numpy(obs))[0], -1).detach().numpy()[0]
    assert probs.min() > 0.02 and probs.max() < 0.9, probs
    draws = np.concatenate([fast.act(np.repeat(obs, 1000, 0))[0] for _ in range(20)])
    freq = np.bincount(draws, minlength=4) / draws.size
    # 20,000 draws: each frequency within 5 standard errors of its probability.
    np.testing.assert_array_less(np.abs(freq - probs), 5 * np.sqrt(probs * (1 - probs) / draws.size))


def test_draws_come_from_torch_seed():
    policy = _policy()
    fast = CompiledMLPAct(policy)
    obs = np.zeros((64, 4), np.float32)
    torch.manual_seed(5)
    first = fast.act(obs)[0]
    torch.manual_seed(5)
    np.testing.assert_array_equal(fast.act(obs)[0], first)


def test_refresh_follows_training_in_place_and_new_tensors():
    policy = _policy()
    fast = CompiledMLPAct(policy)
    obs = np.ones((2, 4), np.float32)
    before = fast.value(obs).copy()
    with torch.no_grad():
        policy.linear_layers().value[-1][1].add_(1.0)  # the value head's bias, in place
    np.testing.assert_array_equal(fast.value(obs), before)  # a copy: unchanged until refreshed
    fast.refresh()
    np.testing.assert_allclose(fast.value(obs), before + 1.0, rtol=1e-6)
    # Parameters replaced by new tensors (as .to() or a flat-buffer learner may do): refresh.
    new_state = {k: v.clone() + 0.5 for k, v in policy.state_dict().items()}
    for name, p in list(policy.named_parameters()):
        module, attr = policy.get_submodule(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]
        setattr(module, attr, torch.nn.Parameter(new_state[name]))
    policy._cache_layers()
    fast.refresh()
    with torch.no_grad():
        np.testing.assert_allclose(fast.value(obs), policy.value(torch.from_numpy(obs)).numpy(), rtol=1e-5)


def test_the_seam_gives_the_compiled_path_exactly_where_it_is_supported():
    policy = _policy()
    fast = kernels.acting(policy, "cpu", "fp32")
    assert isinstance(fast, CompiledMLPAct) and fast.policy is policy
    assert kernels.acting(policy, "cpu", "bf16") is None
    assert kernels.acting(_policy(obs_norm=True), "cpu", "fp32") is None


def test_supports_only_what_it_computes_exactly():
    assert supports(_policy(), "cpu", "fp32")
    assert not supports(_policy(), "cpu", "bf16")
    assert not supports(_policy(), "cuda", "fp32")
    assert not supports(_policy(obs_norm=True), "cpu", "fp32")
    box = make_policy(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-1, 1, (2,), np.float32), ModelConfig())
    assert not supports(box, "cpu", "fp32")
    cnn = make_policy(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), ModelConfig())
    assert not supports(cnn, "cpu", "fp32")


def test_the_kernels_tanh_is_within_float32_rounding_of_tanh():
    from seedpool.kernels.mlp_act import _tanh

    x = np.linspace(-12.0, 12.0, 4_001).astype(np.float32)
    approx = np.array([_tanh(v) for v in x], np.float64)
    np.testing.assert_allclose(approx, np.tanh(x.astype(np.float64)), rtol=0, atol=4e-7)
    assert _tanh(np.float32(0.0)) == 0.0 and abs(_tanh(np.float32(30.0))) <= 1.0


def test_load_kernels_compiles_the_signatures_act_uses():
    from seedpool.kernels import mlp_act

    mlp_act.load_kernels()
    before = (len(mlp_act._act.signatures), len(mlp_act._values.signatures))
    fast = CompiledMLPAct(_policy())
    fast.act(np.zeros((3, 4), np.float32)), fast.value(np.zeros((3, 4), np.float32))
    assert (len(mlp_act._act.signatures), len(mlp_act._values.signatures)) == before  # nothing new compiled
