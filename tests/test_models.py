"""Policy networks: the CNN's memory layout and the flat-parameter re-homing around it."""
import copy

import gymnasium as gym
import numpy as np
import torch

from seedpool.models import ModelConfig, make_policy
from seedpool.models.flat import flatten_parameters

ATARI_OBS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


def _cnn():
    torch.manual_seed(0)
    return make_policy(ATARI_OBS, gym.spaces.Discrete(6), ModelConfig())


def test_cnn_runs_channels_last_and_loads_a_contiguous_state_dict():
    policy = _cnn()
    conv = policy.trunk[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    plain = {k: v.contiguous() for k, v in policy.state_dict().items()}
    other = _cnn()
    for p in other.parameters():
        p.data.normal_()
    other.load_state_dict(plain)
    obs = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    torch.testing.assert_close(other(obs), policy(obs))


def test_flat_parameters_keep_layout_values_and_gradients():
    policy = _cnn()
    reference = copy.deepcopy(policy)
    flat = flatten_parameters(policy)
    assert flat.numel() == sum(p.numel() for p in reference.parameters())
    for p, q in zip(policy.parameters(), reference.parameters()):
        assert p.stride() == q.stride()
        assert p.data_ptr() >= flat.data_ptr()
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    actions = torch.randint(0, 6, (5,))
    for net in (policy, reference):
        logprob, entropy, value = net.evaluate(obs, actions)
        (logprob.sum() + value.square().sum() - entropy.sum()).backward()
    for p, q in zip(policy.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    # The gradients live in the flat tensor: one in-place op there reaches every layer.
    flat.grad.zero_()
    assert all(not p.grad.any() for p in policy.parameters())
