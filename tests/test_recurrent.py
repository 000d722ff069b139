"""Recurrent policies: state resets at episode starts, step-by-step equals whole-sequence, the
sampler's stored start state, recurrent PPO's update and its exact resume."""
import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import seedpool
from seedpool.actors.sampler import SyncSampler
from seedpool.models import ModelConfig, is_recurrent, make_policy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(4)


def _policy(core="lstm", action_space=DISCRETE, **kw):
    torch.manual_seed(0)
    return make_policy(OBS, action_space, ModelConfig(core=core, core_size=16, hidden_sizes=(8,), **kw))


@pytest.mark.parametrize("core", ["lstm", "gru"])
@pytest.mark.parametrize("inputs", [{}, {"prev_action": True, "prev_reward": True}])
def test_step_by_step_equals_whole_sequence_with_resets_inside(core, inputs):
    policy = _policy(core, **inputs)
    T, B = 9, 3
    g = torch.Generator().manual_seed(1)
    obs = torch.rand(T, B, 3, generator=g)
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0, 0] = first[4, 1] = first[7, 2] = first[8, 0] = True
    prev_a = torch.randint(0, 4, (T, B), generator=g)
    prev_r = torch.rand(T, B, generator=g)
    state = {k: torch.rand(v.shape, generator=g) for k, v in policy.initial_state(B).items()}
    pa, pr = (prev_a, prev_r) if inputs else (None, None)
    with torch.no_grad():
        params, values, final = policy.sequence(obs, state, first, pa, pr)
        s = state
        for t in range(T):
            p_t, v_t, s = policy.step(obs[t], s, first[t], None if pa is None else pa[t], None if pr is None else pr[t])
            torch.testing.assert_close(p_t, params[t])
            torch.testing.assert_close(v_t, values[t])
    for k in final:
        torch.testing.assert_close(final[k], s[k])


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_state_resets_where_an_episode_starts_inside_a_sequence(core):
    policy = _policy(core)
    B = 2
    obs = torch.rand(6, B, 3, generator=torch.Generator().manual_seed(2))
    first = torch.zeros(6, B, dtype=torch.bool)
    first[3, 0] = True  # env 0 starts a new episode at step 3
    carried = {k: torch.full_like(v, 0.7) for k, v in policy.initial_state(B).items()}
    with torch.no_grad():
        _, values, _ = policy.sequence(obs, carried, first)
        # After the reset, env 0 computes exactly what a fresh zero state computes from step 3 on.
        opens = torch.tensor([[True], [False], [False]])
        _, fresh, _ = policy.sequence(obs[3:, :1], policy.initial_state(1), opens)
        torch.testing.assert_close(values[3:, 0], fresh[:, 0])
        # Without the reset the carried state changes the outputs (the test above could fail).
        _, kept, _ = policy.sequence(obs[3:, :1], {k: v[:1] for k, v in carried.items()},
                                     torch.zeros(3, 1, dtype=torch.bool))
    assert not torch.allclose(kept[:, 0], fresh[:, 0])
    # first also zeroes the previous action and reward inputs.
    p2 = _policy(core, prev_action=True, prev_reward=True)
    with torch.no_grad():
        a, _, _ = p2.sequence(obs[:1], p2.initial_state(B), torch.ones(1, B, dtype=torch.bool),
                              torch.tensor([[1, 3]]), torch.tensor([[5.0, -2.0]]))
        b, _, _ = p2.sequence(obs[:1], p2.initial_state(B), torch.ones(1, B, dtype=torch.bool),
                              torch.tensor([[0, 0]]), torch.tensor([[0.0, 0.0]]))
    torch.testing.assert_close(a, b)


def test_recurrent_policy_builds_for_every_torso_and_refuses_stateless_calls():
    lstm = _policy("lstm")
    assert is_recurrent(lstm) and not is_recurrent(_policy("none"))
    with pytest.raises(TypeError, match="needs its state"):
        lstm.act(torch.zeros(2, 3))
    cnn = make_policy(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), DISCRETE, ModelConfig(core="gru", core_size=32))
    a, logp, v, state = cnn.act_step(torch.zeros(2, 4, 84, 84, dtype=torch.uint8), cnn.initial_state(2),
                                     torch.ones(2, dtype=torch.bool))
    assert a.shape == (2,) and v.shape == (2,) and state["h"].shape == (2, 32)
    gauss = _policy("lstm", gym.spaces.Box(-1, 1, (2,)), prev_action=True)
    a, logp, v, state = gauss.act_step(torch.zeros(5, 3), gauss.initial_state(5), torch.ones(5, dtype=torch.bool),
                                       torch.zeros(5, 2))
    assert a.shape == (5, 2) and set(state) == {"h", "c"}
    with pytest.raises(ValueError, match="previous action"):
        gauss.act_step(torch.zeros(5, 3), gauss.initial_state(5), torch.ones(5, dtype=torch.bool))
