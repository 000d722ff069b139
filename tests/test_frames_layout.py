"""Frames stored channels-last for learning: same values as the plain layout, cheaper reads.

The learner's data path (issue 16): a rollout stores [C, H, W] uint8 frames channels-last,
minibatches are gathered without a boolean mask or a layout copy, and the Nature CNN folds
its 1/255 scale into the first convolution. None of this may change what is learned from.
"""
import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.ppo import make_batch
from seedpool.models.base import scaled_trunk
from seedpool.models.cnn import NatureCNNActorCritic
from seedpool.models.q import NatureCNNQNetwork
from seedpool.algos.batching import frames_last, take_rows
from seedpool.records import Rollout

FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


def filled_rollout(T: int, B: int, obs_space=FRAMES) -> Rollout:
    g = torch.Generator().manual_seed(0)
    r = Rollout.allocate(T, B, obs_space, gym.spaces.Discrete(6), "cpu")
    if r.obs.dtype == torch.uint8:
        r.obs.copy_(torch.randint(0, 256, r.obs.shape, dtype=torch.uint8, generator=g))
    else:
        r.obs.copy_(torch.randn(r.obs.shape, generator=g))
    r.actions.copy_(torch.randint(0, 6, r.actions.shape, generator=g))
    r.logprobs.copy_(torch.randn(r.logprobs.shape, generator=g))
    r.values.copy_(torch.randn(r.values.shape, generator=g))
    r.rewards.copy_(torch.randn(r.rewards.shape, generator=g))
    r.terminated.copy_(torch.rand(r.terminated.shape, generator=g) < 0.05)
    r.valid.copy_(torch.rand(r.valid.shape, generator=g) > 0.1)
    return r


def test_rollout_frames_are_channels_last_and_written_per_step():
    r = Rollout.allocate(3, 2, FRAMES, gym.spaces.Discrete(6), "cpu")
    assert r.obs.shape == (3, 2, 4, 84, 84)
    assert r.obs[0].is_contiguous(memory_format=torch.channels_last)
    frame = np.random.default_rng(1).integers(0, 256, (2, 4, 84, 84), dtype=np.uint8)
    r.obs.numpy()[1] = frame  # the sampler writes through a NumPy view
    assert np.array_equal(r.obs[1].numpy(), frame)
    assert not r.obs[0].any() and not r.obs[2].any()
    vector = Rollout.allocate(3, 2, gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), "cpu")
    assert vector.obs.is_contiguous()


@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_take_rows_equals_indexing_and_keeps_the_layout(layout):
    t = torch.randint(0, 256, (10, 4, 6, 5), dtype=torch.uint8)
    if layout == "channels_last":
        t = t.contiguous(memory_format=torch.channels_last)
    idx = torch.tensor([7, 0, 3, 3, 9])
    got = take_rows(t, idx)
    assert torch.equal(got, t[idx])
    assert got.is_contiguous(memory_format=torch.channels_last) == (layout == "channels_last")
    flat = torch.arange(10.0)
    assert torch.equal(take_rows(flat, idx), flat[idx])


def test_make_batch_equals_the_boolean_mask_reference():
    r = filled_rollout(16, 3)
    batch = make_batch(r, gamma=0.99, gae_lambda=0.95)
    valid = r.valid
    assert len(batch) == int(valid.sum()) < 16 * 3
    assert torch.equal(batch.obs, r.obs[valid])
    assert torch.equal(batch.actions, r.actions[valid])
    assert torch.equal(batch.logprobs, r.logprobs[valid])
    assert torch.equal(batch.values, r.values[:-1][valid])
    assert batch.obs.is_contiguous(memory_format=torch.channels_last)
    idx = torch.tensor([5, 1, 2])
    assert torch.equal(batch.take(idx).obs, batch.obs[idx])


@pytest.mark.parametrize("net", ["actor_critic", "q"])
def test_scale_folded_into_the_first_convolution_matches_scaling_the_pixels(net):
    torch.manual_seed(0)
    model = NatureCNNActorCritic((4, 84, 84), 6) if net == "actor_critic" else NatureCNNQNetwork((4, 84, 84), 6)
    trunk = model.trunk if net == "actor_critic" else model.torso
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    reference = trunk(obs.float() * (1.0 / 255.0))
    for frames in (obs, obs.contiguous(memory_format=torch.channels_last)):
        folded = scaled_trunk(trunk, frames, model.scale, model.memory_format)
        torch.testing.assert_close(folded, reference, rtol=1e-4, atol=1e-5)
    # The gradient reaches the first convolution's own weights, scaled as before.
    folded = scaled_trunk(trunk, obs, model.scale, model.memory_format).sum()
    w_grad_folded = torch.autograd.grad(folded, trunk[0].weight)[0]
    w_grad_ref = torch.autograd.grad(trunk(obs.float() / 255.0).sum(), trunk[0].weight)[0]
    torch.testing.assert_close(w_grad_folded, w_grad_ref, rtol=1e-4, atol=1e-4)


def test_frames_last_and_column_gathers_of_unroll_batches():
    obs = torch.randint(0, 256, (5, 6, 4, 7, 3), dtype=torch.uint8)  # [T + 1, n, C, H, W]
    stored = frames_last(obs)
    assert torch.equal(stored, obs) and not stored.is_contiguous()
    cols = torch.tensor([4, 1])
    mb = take_rows(stored, cols, dim=1)
    assert torch.equal(mb, obs[:, cols])
    assert mb[:3].flatten(0, 1).is_contiguous(memory_format=torch.channels_last)
    floats = torch.randn(5, 6)
    assert frames_last(floats) is floats
    assert torch.equal(take_rows(floats, cols, dim=1), floats[:, cols])


@pytest.mark.parametrize("net", ["actor_critic", "q", "small"])
def test_first_convolution_under_bf16_autocast_is_float32_forward_and_bf16_weight_gradient(net):
    """Under autocast the first layer's pre-activations are float32's rounded once (so every ReLU
    mask is float32's), and its weight gradient is the bf16 product's: within bf16 rounding of
    float32's, and not float32's itself."""
    torch.manual_seed(0)
    model = NatureCNNQNetwork((4, 84, 84), 6) if net == "q" else \
        NatureCNNActorCritic((4, 84, 84), 6, cnn="small" if net == "small" else "nature")
    trunk = model.torso if net == "q" else model.trunk
    conv = trunk[0]
    obs = torch.randint(0, 256, (8, 84, 84, 4), dtype=torch.uint8).permute(0, 3, 1, 2)  # as stored
    weight = conv.weight.detach().clone().requires_grad_()
    bias = conv.bias.detach().clone().requires_grad_()
    reference = torch.nn.functional.conv2d(obs.float(), weight * model.scale, bias, stride=4)
    upstream = torch.randn(reference.shape) * (reference > 0)  # through the ReLU
    ref_w, ref_b = torch.autograd.grad(reference, (weight, bias), upstream)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first = trunk[:2]  # the convolution and its ReLU
        out = scaled_trunk(first, obs, model.scale, model.memory_format)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, torch.relu(reference.detach()).to(torch.bfloat16))
    got_w, got_b = torch.autograd.grad(out, (conv.weight, conv.bias), upstream)
    for got, ref in ((got_w, ref_w), (got_b, ref_b)):
        assert got.dtype == torch.float32
        error = float((got - ref).norm() / ref.norm())
        assert 1e-5 < error < 0.01, error  # measured ~0.2%; float32's own would be ~1e-7

