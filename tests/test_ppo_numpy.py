"""The NumPy PPO step gives torch's gradients, parameters, Adam state and statistics."""
import copy
import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from threadpoolctl import ThreadpoolController

from seedpool import kernels
from seedpool.algos.ppo import PPOBatch, PPOConfig, ppo_loss, ppo_update
from seedpool.kernels import ppo_numpy
from seedpool.kernels.ppo_numpy import numpy_step_fn
from seedpool.models import MLPActorCritic, ModelConfig, make_policy
from seedpool.models.flat import flatten_parameters


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: a second intra-op thread only spins on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _policy(hidden=(64, 64), activation="tanh", actions=3, seed=0):
    torch.manual_seed(seed)
    cfg = ModelConfig(hidden_sizes=hidden, activation=activation)
    return make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(actions), cfg)


def _batch(policy, n=256, seed=0):
    """Random data whose old log-probs and values straddle the clip ranges."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 4, generator=g)
    with torch.no_grad():
        params, value = policy(obs)
        actions = torch.randint(0, params.shape[1], (n,), generator=g)
        logp = policy.head.log_prob(params, actions)
    return PPOBatch(obs=obs, actions=actions, logprobs=logp + 0.3 * torch.randn(n, generator=g),
                    values=value + 0.3 * torch.randn(n, generator=g),
                    advantages=torch.randn(n, generator=g) + 0.5, returns=torch.randn(n, generator=g))


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("continuous", [False, True])
def test_linear_layers_are_the_parameters_and_compute_forward(activation, continuous):
    """The contract the NumPy step relies on: live tensors, and forward() is exactly their MLP."""
    torch.manual_seed(0)
    policy = MLPActorCritic(5, 3, continuous, hidden=(16, 8), activation=activation)
    flatten_parameters(policy)  # the trainer's layout: parameters become views of one tensor
    layers = policy.linear_layers()
    assert layers.activation == activation
    assert [w.shape for w, _ in layers.policy] == [(16, 5), (8, 16), (3, 8)]
    assert [w.shape for w, _ in layers.value] == [(16, 5), (8, 16), (1, 8)]
    listed = [t for pair in layers.policy + layers.value for t in pair]
    extra = [policy.log_std] if continuous else []
    assert {id(t) for t in listed + extra} == {id(p) for p in policy.parameters()}
    act = torch.tanh if activation == "tanh" else torch.relu

    def mlp(x, pairs):
        for w, b in pairs[:-1]:
            x = act(x @ w.T + b)
        w, b = pairs[-1]
        return x @ w.T + b

    obs = torch.randn(7, 5)
    with torch.no_grad():
        params, value = policy(obs)
        out = params[0] if continuous else params
        torch.testing.assert_close(out, mlp(obs, layers.policy))
        torch.testing.assert_close(value, mlp(obs, layers.value)[:, 0])
        layers.policy[-1][1].add_(1.0)  # in-place writes reach the model
        out_after = policy(obs)[0]
    torch.testing.assert_close((out_after[0] if continuous else out_after) - out, torch.ones(7, 3))


def _numpy_grads(policy, batch, cfg, clip):
    """Gradients and statistics of one NumPy step that leaves the parameters as they were."""
    clone = copy.deepcopy(policy)
    opt = torch.optim.Adam(clone.parameters(), lr=0.0)
    step = numpy_step_fn(clone, opt, batch, dataclasses.replace(cfg, max_grad_norm=1e9), clip)
    assert step is not None, "the MLP with a categorical head must be supported"
    stats = step(None, False, True)
    for a, b in zip(clone.parameters(), policy.parameters()):
        assert torch.equal(a, b)
    return [p.grad.clone() for p in clone.parameters()], stats


@pytest.mark.parametrize("cfg, clip, hidden, activation", [
    (PPOConfig(), 0.2, (64, 64), "tanh"),
    (PPOConfig(clip_vloss=True, ent_coef=0.01), 0.2, (64, 64), "tanh"),
    (PPOConfig(clip_vloss=True, ent_coef=0.05, norm_adv=False, vf_coef=0.25), 0.1, (32, 16, 8), "relu"),
    (PPOConfig(ent_coef=0.01), None, (64,), "tanh"),
])
def test_gradients_and_statistics_equal_autograd(cfg, clip, hidden, activation):
    policy = _policy(hidden, activation)
    batch = _batch(policy)
    grads, stats = _numpy_grads(policy, batch, cfg, clip)
    loss, expected = ppo_loss(policy, batch, cfg, clip)
    reference = torch.autograd.grad(loss, list(policy.parameters()))
    for g, r in zip(grads, reference):
        assert r.abs().max() > 0
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5 * float(r.abs().max()))
    assert stats.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(stats[key], expected[key], rtol=1e-5, atol=1e-7)
    assert 0.0 < float(stats["clipfrac"]) < 1.0 or clip is None


def _trained(policy, batches, cfg, flat, paths):
    """Run ppo_update once per batch, each with its own path; returns the policy and optimizer."""
    params = [flatten_parameters(policy)] if flat else list(policy.parameters())
    opt = torch.optim.Adam(params, lr=3e-3, eps=1e-5, fused=flat)
    kernel = kernels.ppo_update(policy, opt, "cpu", "fp32")
    assert kernel is not None or not any(paths)
    history = []
    for batch, numpy_path in zip(batches, paths):
        torch.manual_seed(7)
        history.append(ppo_update(policy, opt, batch, cfg, clip_coef=0.15, kernel=kernel if numpy_path else None))
    return policy, opt, history


@pytest.mark.parametrize("paths", [
    (True, True, True),  # NumPy all the way
    (True, False, True),  # torch continuing from NumPy's Adam state, and back
], ids=["numpy", "numpy-torch-numpy"])
@pytest.mark.parametrize("flat", [True, False])
@pytest.mark.parametrize("cfg", [
    PPOConfig(update_epochs=4, num_minibatches=4, clip_vloss=True, ent_coef=0.01, max_grad_norm=0.5),
    PPOConfig(update_epochs=20, num_minibatches=1, max_grad_norm=0.5),  # rl-zoo3 CartPole layout
    PPOConfig(update_epochs=10, num_minibatches=2, target_kl=0.002),  # stops early
], ids=["4x4", "cartpole", "target_kl"])
def test_update_ends_with_torchs_parameters_and_adam_state(cfg, flat, paths):
    base = _policy(actions=2)
    batches = [_batch(base, seed=s) for s in (1, 2, 3)]
    ref, ref_opt, ref_stats = _trained(copy.deepcopy(base), batches, cfg, flat, [False] * 3)
    new, new_opt, new_stats = _trained(copy.deepcopy(base), batches, cfg, flat, paths)
    assert [s["epochs"] for s in new_stats] == [s["epochs"] for s in ref_stats]
    steps = sum(s["epochs"] for s in ref_stats) * cfg.num_minibatches
    assert float(ref_opt.state_dict()["state"][0]["step"]) == steps
    for a, b in zip(new.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert new_opt.state_dict()["state"].keys() == ref_opt.state_dict()["state"].keys()
    for state, ref_state in zip(new_opt.state.values(), ref_opt.state.values()):
        assert state.keys() == ref_state.keys()
        for key in ref_state:
            assert state[key].dtype == ref_state[key].dtype and state[key].shape == ref_state[key].shape
            torch.testing.assert_close(state[key], ref_state[key], rtol=1e-4, atol=1e-7)
    for got, expected in zip(new_stats, ref_stats):
        assert got.keys() == expected.keys()
        for key in expected:
            assert got[key] == pytest.approx(expected[key], rel=1e-3, abs=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(new.parameters(), base.parameters()))
    if cfg.target_kl is not None:
        assert min(s["epochs"] for s in ref_stats) < cfg.update_epochs, "target_kl should stop an update early"


def test_step_runs_blas_on_one_thread_and_restores_it(monkeypatch):
    """The step limits NumPy's BLAS to one thread while it runs, and leaves the setting as it found it."""
    # Only NumPy's own BLAS matters (SciPy, loaded by other tests, brings a second one).
    site = Path(np.__file__).parent.parent
    numpy_blas = [lib["filepath"] for lib in ThreadpoolController().info()
                  if lib["user_api"] == "blas" and Path(lib["filepath"]).parent.name.startswith("numpy")
                  and Path(lib["filepath"]).is_relative_to(site)]
    blas = ThreadpoolController().select(filepath=numpy_blas)
    if not numpy_blas:
        pytest.skip("NumPy's BLAS is not one threadpoolctl can control")
    seen = []
    forward = ppo_numpy._forward

    def spying_forward(*args):
        seen.append({lib["num_threads"] for lib in blas.info()})
        return forward(*args)

    monkeypatch.setattr(ppo_numpy, "_forward", spying_forward)
    policy = _policy()
    step = numpy_step_fn(policy, torch.optim.Adam(policy.parameters()), _batch(policy), PPOConfig(), 0.2)
    with blas.limit(limits=2):
        step(None, False, False)
        assert {lib["num_threads"] for lib in blas.info()} == {2}
    assert seen == [{1}, {1}]  # policy and value forward passes


def test_unsupported_policies_and_optimizers_fall_back_to_torch():
    gaussian = make_policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(-1, 1, (2,)), ModelConfig())
    discrete = _policy()
    batch = _batch(discrete)
    cfg = PPOConfig()
    assert numpy_step_fn(gaussian, torch.optim.Adam(gaussian.parameters()), batch, cfg, 0.2) is None

    class Scaled(MLPActorCritic):
        """A subclass whose forward() is no longer its linear layers alone."""

        def forward(self, obs):
            logits, value = super().forward(obs)
            return 2.0 * logits, value

    torch.manual_seed(0)
    scaled = Scaled(4, 3, continuous=False)
    assert numpy_step_fn(scaled, torch.optim.Adam(scaled.parameters()), batch, cfg, 0.2) is None
    for opt in (torch.optim.SGD(discrete.parameters(), lr=0.1),
                torch.optim.Adam(discrete.parameters(), amsgrad=True),
                torch.optim.Adam(discrete.pi.parameters())):
        assert numpy_step_fn(discrete, opt, batch, cfg, 0.2) is None
        kernel = kernels.ppo_update(discrete, opt, "cpu", "fp32")  # asked at build, or refused at the update
        assert kernel is None or kernel.bind(batch, cfg, 0.2) is None
    assert numpy_step_fn(discrete, torch.optim.Adam(discrete.parameters()), batch, cfg, 0.2) is not None
    # The seam: the kernel fits float32 on a CPU only, and never a Gaussian head.
    adam = torch.optim.Adam(discrete.parameters())
    assert kernels.ppo_update(discrete, adam, "cpu", "fp32") is not None
    assert kernels.ppo_update(discrete, adam, "cpu", "bf16") is None
    assert kernels.ppo_update(discrete, adam, "cuda", "fp32") is None
    assert kernels.ppo_update(gaussian, torch.optim.Adam(gaussian.parameters()), "cpu", "fp32") is None


@pytest.mark.parametrize("clip", [None, 0.2])
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
def test_compiled_policy_gradient_matches_the_numpy_one(clip, ent_coef):
    rng = np.random.default_rng(0)
    n, k = 256, 3
    logits = rng.normal(size=(n, k)).astype(np.float32)
    actions = rng.integers(0, k, n)
    old_logp = (np.log(rng.dirichlet(np.ones(k), n))[np.arange(n), actions] + rng.normal(0, 0.3, n)).astype(np.float32)
    adv = rng.normal(size=n).astype(np.float32)
    value, old_values, returns = (rng.normal(size=n).astype(np.float32) for _ in range(3))
    cfg = PPOConfig(ent_coef=ent_coef)
    mb = [None, actions, old_logp, old_values, adv, returns]
    want, _, _ = ppo_numpy._loss_grads(logits, value, mb, cfg, clip, True, False)
    got = ppo_numpy._policy_grads(logits, actions, old_logp, adv, -1.0 if clip is None else clip, ent_coef)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


def test_load_kernels_compiles_the_signature_the_step_uses():
    ppo_numpy.load_kernels()
    before = len(ppo_numpy._policy_grads.signatures)
    policy = _policy()
    for minibatches in (1, 4):  # the whole batch, and gathered minibatches
        opt = torch.optim.Adam(policy.parameters())
        ppo_update(policy, opt, _batch(policy), PPOConfig(update_epochs=2, num_minibatches=minibatches),
                   kernel=kernels.ppo_update(policy, opt, "cpu", "fp32"))
    assert len(ppo_numpy._policy_grads.signatures) == before
