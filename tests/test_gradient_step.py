"""The one gradient step (seedpool.algos.gradient): every learner refuses a non-finite step
before anything changes, clips the same way, profiles its steps, and runs under bf16 autocast."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from test_learners import _impala_learner, _ppo_learner, _rollout, _unrolls

import seedpool.algos.dqn as dqn_module
import seedpool.algos.impala as impala_module
import seedpool.algos.ppo as ppo_module
from seedpool.algos.dqn import DQNConfig, DQNLearner
from seedpool.algos.gradient import GradientStep, NonFiniteLossError
from seedpool.kernels.fused_adam import optimizer_step
from seedpool.models import MLPQNetwork

NAN = float("nan")


def _dqn_learner(seed=0) -> DQNLearner:
    torch.manual_seed(seed)
    return DQNLearner(MLPQNetwork(4, 2, (16, 16)), DQNConfig(learning_rate=1e-3), total_steps=1000)


def _dqn_batch(seed=0, rows=8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(rows, 4)).astype(np.float32), "action": rng.integers(0, 2, rows),
            "reward": rng.normal(size=rows).astype(np.float32), "discount": np.full(rows, 0.99, np.float32),
            "next_obs": rng.normal(size=(rows, 4)).astype(np.float32)}


# kind -> (make the learner, make a batch from (learner, seed), the module whose loss function
# can be poisoned, that function's name)
KINDS = {
    "ppo-torch": (lambda: _ppo_learner(numpy_update=False), lambda lr, s: _rollout(lr.model, seed=s),
                  ppo_module, "ppo_loss"),
    "ppo-numpy": (lambda: _ppo_learner(numpy_update=True), lambda lr, s: _rollout(lr.model, seed=s),
                  None, None),
    "impala": (_impala_learner, lambda lr, s: _unrolls(lr.model, seed=s), impala_module, "impala_loss"),
    "appo": (lambda: _impala_learner(clip_coef=0.2, update_epochs=2, num_minibatches=2),
             lambda lr, s: _unrolls(lr.model, seed=s), impala_module, "appo_loss"),
    "dqn": (_dqn_learner, lambda lr, s: _dqn_batch(s), dqn_module, "dqn_loss"),
}


def _snapshot(learner) -> tuple[dict, dict]:
    return copy.deepcopy(learner.model.state_dict()), copy.deepcopy(learner.optimizer.state_dict())


def _assert_unchanged(learner, snapshot) -> None:
    params, opt = snapshot
    for k, v in learner.model.state_dict().items():
        assert torch.equal(v, params[k]), f"parameter {k} changed"
    now = learner.optimizer.state_dict()
    assert now["state"].keys() == opt["state"].keys()
    for key, state in opt["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(now["state"][key][name]), torch.as_tensor(value)), name


def _poison_loss(monkeypatch, module, name) -> None:
    real = getattr(module, name)

    def poisoned(*args, **kwargs):
        loss, *rest = real(*args, **kwargs)
        return (loss * NAN, *rest)

    monkeypatch.setattr(module, name, poisoned)


def _good_update_then_snapshot(kind):
    make, batch, _, _ = KINDS[kind]
    learner = make()
    learner.update(batch(learner, 0))  # Adam has state now: a refused step must not touch it either
    return learner, _snapshot(learner)


@pytest.mark.parametrize("kind", [k for k, v in KINDS.items() if v[2] is not None])
def test_a_nan_loss_is_refused_before_any_parameter_or_optimizer_state_changes(kind, monkeypatch):
    learner, snapshot = _good_update_then_snapshot(kind)
    _, batch, module, name = KINDS[kind]
    _poison_loss(monkeypatch, module, name)
    with pytest.raises(NonFiniteLossError, match=r"loss is nan.*not finite at learner version 1"):
        learner.update(batch(learner, 1))
    _assert_unchanged(learner, snapshot)
    assert learner.version == 1


@pytest.mark.parametrize("kind", [k for k, v in KINDS.items() if k != "ppo-numpy"])
def test_a_nan_gradient_is_refused_before_any_parameter_or_optimizer_state_changes(kind):
    learner, snapshot = _good_update_then_snapshot(kind)
    first = next(p for p in learner.model.parameters() if p.requires_grad)
    hook = first.register_hook(lambda g: torch.full_like(g, NAN))
    with pytest.raises(NonFiniteLossError, match=r"gradient norm is nan: not finite at learner version 1"):
        learner.update(KINDS[kind][1](learner, 1))
    _assert_unchanged(learner, snapshot)
    hook.remove()
    assert all(float(p.grad.abs().sum()) == 0.0 for p in learner.optimizer.param_groups[0]["params"]
               if p.grad is not None), "a refused step leaves its gradients zeroed"
    learner.update(KINDS[kind][1](learner, 2))  # and the learner goes on once the data is sane
    assert learner.version == 2


def test_the_numpy_ppo_kernel_checks_its_gradient_before_adam():
    learner, snapshot = _good_update_then_snapshot("ppo-numpy")
    rollout = _rollout(learner.model, seed=1)
    rollout.obs[:, 1, 0] = float("inf")  # in every minibatch; reaches the gradient through the forward pass
    with pytest.raises(NonFiniteLossError, match=r"PPO gradient norm is nan: not finite at learner version 1"):
        learner.update(rollout)
    _assert_unchanged(learner, snapshot)


def test_clipping_scales_the_gradient_to_max_norm_and_reports_the_norm_before():
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    step = GradientStep(torch.optim.SGD([w], lr=1.0), max_grad_norm=1.0, name="test")
    norm = step((w * torch.tensor([3.0, 4.0])).sum(), version=0)  # gradient (3, 4): norm 5
    assert float(norm) == pytest.approx(5.0)
    np.testing.assert_allclose(w.detach().numpy(), [3.0 - 0.6, 4.0 - 0.8], rtol=1e-5)
    assert step.profile()["charts/gradient_steps"] == 1.0


def test_every_learner_reports_its_profile():
    for kind, (make, batch, _, _) in KINDS.items():
        learner = make()
        out = learner.update(batch(learner, 0))
        metrics = out.metrics if kind == "dqn" else out  # a MinibatchLearner returns a ReplayUpdate
        assert metrics["charts/gradient_steps"] == learner.gradient.steps > 0, kind
        assert metrics["time/learner_backward"] >= 0.0 and metrics["time/learner_optimizer"] > 0.0, kind


def test_bf16_autocast_keeps_float32_master_weights_and_optimizer_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = GradientStep(opt, max_grad_norm=10.0, name="test", precision="bf16")
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    losses = []
    for _ in range(50):
        with step.autocast():
            out = model(x)
        assert out.dtype == torch.bfloat16
        loss = (out.float() - y).pow(2).mean()
        step(loss, version=0)
        losses.append(float(loss.detach()))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(v.dtype == torch.float32 for s in opt.state.values() for k, v in s.items() if k != "step")
    assert losses[-1] < 0.8 * losses[0]


def test_precisions_other_than_fp32_and_bf16_are_refused_by_name():
    w = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="precision must be one of .*'fp32', 'bf16'.*got 'fp8'"):
        GradientStep(torch.optim.SGD([w], lr=1.0), 1.0, "test", precision="fp8")


def test_ppo_update_accepts_a_bare_optimizer_and_matches_the_learners_step():
    a = _ppo_learner(seed=3, numpy_update=False)
    b = _ppo_learner(seed=3, numpy_update=False)
    rollout = _rollout(a.model, seed=4)
    batch = ppo_module.make_batch(rollout, a.cfg.gamma, a.cfg.gae_lambda)
    cfg = dataclasses.replace(a.cfg)
    torch.manual_seed(5)
    ppo_module.ppo_update(a.model, a.optimizer, batch, cfg)
    torch.manual_seed(5)
    ppo_module.ppo_update(b.model, b.gradient, batch, cfg)
    for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()):
        assert torch.equal(x, y)


@pytest.mark.parametrize("options", [dict(fused=True), dict(fused=True, weight_decay=0.01),
                                     dict(fused=True, amsgrad=True), dict(fused=False)])
def test_optimizer_step_takes_torchs_steps_exactly_and_keeps_the_same_state(options):
    # The direct fused-Adam call (or torch's own step where it declines) against Adam.step:
    # the same parameters and state, bit for bit, across a learning-rate change and a
    # state_dict round trip.
    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(100)), torch.nn.Parameter(torch.randn(7, 3))]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt_ours, opt_theirs = torch.optim.Adam(ours, lr=1e-2, **options), torch.optim.Adam(theirs, lr=1e-2, **options)
    for step in range(6):
        for p, q in zip(ours, theirs):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        optimizer_step(opt_ours)
        opt_theirs.step()
        for opt in (opt_ours, opt_theirs):
            opt.param_groups[0]["lr"] *= 0.5
        if step == 2:
            opt_ours.load_state_dict(opt_ours.state_dict())
    for p, q in zip(ours, theirs):
        assert torch.equal(p, q)
        for key, value in opt_theirs.state[q].items():
            assert torch.equal(opt_ours.state[p][key], value), key
