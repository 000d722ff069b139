"""GAE over rows whose own steps are not consecutive (turn-based games: an agent waits for its turn)."""

import numpy as np
import torch

from seedpool.algos.returns import gae, gae_with_gaps, has_gaps


def _random_rollout(rng, T=12, B=5):
    rewards = torch.tensor(rng.normal(size=(T, B)), dtype=torch.float32)
    values = torch.tensor(rng.normal(size=(T + 1, B)), dtype=torch.float32)
    terminated = torch.tensor(rng.random((T, B)) < 0.1)
    truncated = torch.tensor(rng.random((T, B)) < 0.05) & ~terminated
    ended = terminated | truncated
    valid = torch.ones(T, B, dtype=torch.bool)
    valid[1:] = ~ended[:-1]  # the reset step after an end is not the row's own
    return rewards, values, terminated, truncated, valid


def test_without_gaps_it_is_plain_gae_on_every_own_step():
    rng = np.random.default_rng(0)
    for _ in range(20):
        r, v, te, tr, valid = _random_rollout(rng)
        assert not has_gaps(valid, te | tr)
        plain = gae(r, v, te, tr, 0.97, 0.9)
        gaps = gae_with_gaps(r, v, te, tr, valid, 0.97, 0.9)
        torch.testing.assert_close(gaps[valid], plain[valid], rtol=1e-5, atol=1e-5)


def test_a_waiting_agents_step_runs_to_its_next_turn():
    # One row, turns at steps 0, 2 and 4; the reward of the turn at 2 arrives at step 3 (when the
    # row is active again), the game ends at step 4 with the row's loss (-1) and terminates.
    rewards = torch.tensor([[0.0], [0.0], [0.0], [0.5], [-1.0]])
    values = torch.tensor([[0.1], [9.0], [0.2], [9.0], [0.3], [9.0]])
    terminated = torch.tensor([[False], [False], [False], [False], [True]])
    truncated = torch.zeros(5, 1, dtype=torch.bool)
    valid = torch.tensor([[True], [False], [True], [False], [True]])
    assert has_gaps(valid, terminated)
    g, lam = 0.9, 0.8
    adv = gae(rewards, values, terminated, truncated, g, lam, valid)
    a4 = -1.0 - 0.3
    a2 = 0.5 + g * 0.3 - 0.2 + g * lam * a4
    a0 = 0.0 + g * 0.2 - 0.1 + g * lam * a2
    np.testing.assert_allclose(adv[[0, 2, 4], 0].numpy(), [a0, a2, a4], rtol=1e-6)
    assert (adv[[1, 3], 0] == 0).all()
