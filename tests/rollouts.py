"""A rollout of random observations and rewards, acted on by a policy: input for learner tests."""
from __future__ import annotations

import gymnasium as gym
import torch

from seedpool.records import Rollout


def random_rollout(policy, obs_space: gym.spaces.Box, action_space: gym.Space, seed: int = 0,
                   T: int = 16, B: int = 4) -> Rollout:
    """T x B steps of standard-normal observations and rewards, with ``policy``'s actions,
    log-probabilities and values; every step valid."""
    g = torch.Generator().manual_seed(seed)
    r = Rollout.allocate(T, B, obs_space, action_space, "cpu")
    r.obs[:] = torch.randn(T, B, *obs_space.shape, generator=g)
    with torch.no_grad():
        a, logp, v = policy.act(r.obs.flatten(0, 1))
    r.actions[:], r.logprobs[:], r.values[:T] = a.view(T, B), logp.view(T, B), v.view(T, B)
    r.rewards[:] = torch.randn(T, B, generator=g)
    r.valid[:] = True
    return r
