"""GAE against a naive per-env, per-step loop, including truncation and terminal handling."""
import pytest
import torch

from seedpool.algos.returns import discounted_returns, gae


def naive_gae(rewards, values, terminated, truncated, gamma, lam):
    """Textbook GAE, one env and one step at a time, written independently of the vectorised one."""
    T, B = rewards.shape
    out = torch.zeros(T, B, dtype=torch.float64)
    for b in range(B):
        last = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, b] else gamma * float(values[t + 1, b])
            delta = float(rewards[t, b]) + bootstrap - float(values[t, b])
            episode_goes_on = not (terminated[t, b] or truncated[t, b])
            last = delta + (gamma * lam * last if episode_goes_on else 0.0)
            out[t, b] = last
    return out


@pytest.mark.parametrize("lam", [0.0, 0.8, 0.95, 1.0])
def test_gae_matches_naive_loop(lam):
    g = torch.Generator().manual_seed(0)
    T, B = 37, 5
    rewards = torch.randn(T, B, generator=g, dtype=torch.float64)
    values = torch.randn(T + 1, B, generator=g, dtype=torch.float64)
    terminated = torch.rand(T, B, generator=g) < 0.1
    truncated = (torch.rand(T, B, generator=g) < 0.1) & ~terminated
    got = gae(rewards, values, terminated, truncated, 0.97, lam)
    want = naive_gae(rewards, values, terminated, truncated, 0.97, lam)
    torch.testing.assert_close(got, want)


def test_truncation_bootstraps_from_final_value_and_termination_from_zero():
    # One env, 2 steps: the first step ends the episode. values[1] is the final observation's value.
    rewards = torch.tensor([[1.0], [0.0]])
    values = torch.tensor([[0.5], [10.0], [3.0]])
    nothing = torch.zeros(2, 1, dtype=torch.bool)
    ended = torch.tensor([[True], [False]])
    truncated_adv = gae(rewards, values, nothing, ended, gamma=0.9, lam=0.95)
    terminated_adv = gae(rewards, values, ended, nothing, gamma=0.9, lam=0.95)
    assert truncated_adv[0, 0].item() == pytest.approx(1.0 + 0.9 * 10.0 - 0.5)
    assert terminated_adv[0, 0].item() == pytest.approx(1.0 - 0.5)


def test_no_credit_flows_back_across_an_episode_end():
    # A huge reward after an episode end must not change the advantage before it.
    T = 4
    values = torch.zeros(T + 1, 1)
    done = torch.tensor([[False], [True], [False], [False]])
    base = torch.zeros(T, 1)
    spiked = base.clone()
    spiked[3, 0] = 1000.0
    for term, trunc in ((done, torch.zeros_like(done)), (torch.zeros_like(done), done)):
        a = gae(base, values, term, trunc, 0.99, 0.95)
        b = gae(spiked, values, term, trunc, 0.99, 0.95)
        torch.testing.assert_close(a[:2], b[:2])
        assert b[2, 0] > 100


def test_lambda_one_gives_discounted_returns():
    rewards = torch.ones(3, 1)
    values = torch.tensor([[0.0], [0.0], [0.0], [2.0]])
    nothing = torch.zeros(3, 1, dtype=torch.bool)
    ret = discounted_returns(rewards, values, nothing, nothing, gamma=0.5)
    assert ret[0, 0].item() == pytest.approx(1 + 0.5 + 0.25 + 0.125 * 2.0)


def test_shape_errors_say_what_was_expected():
    with pytest.raises(ValueError, match=r"values must have shape \(4, 2\)"):
        gae(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.bool),
            torch.zeros(3, 2, dtype=torch.bool), 0.99, 0.95)
    with pytest.raises(ValueError, match="terminated must be a bool tensor"):
        gae(torch.zeros(3, 2), torch.zeros(4, 2), torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.bool),
            0.99, 0.95)


def test_gae_on_numpy_views_equals_the_torch_recursion_bit_for_bit():
    g = torch.Generator().manual_seed(3)
    T, B = 33, 7
    rewards, values = torch.randn(T, B, generator=g), torch.randn(T + 1, B, generator=g)
    terminated = torch.rand(T, B, generator=g) < 0.1
    truncated = torch.rand(T, B, generator=g) < 0.05
    fast = gae(rewards, values, terminated, truncated, 0.99, 0.95)  # CPU, no grad: the NumPy path
    torch_path = gae(rewards, values.clone().requires_grad_(), terminated, truncated, 0.99, 0.95)
    assert torch.equal(fast, torch_path.detach())
