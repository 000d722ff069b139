"""R2D2's mathematics: value rescaling, n-step targets, burn-in, state resets, the loss against a naive loop."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.r2d2 import (
    R2D2Config, R2D2Learner, RecurrentEpsilonGreedyAct, inverse_value_rescale, nstep_targets, r2d2_loss,
    value_rescale,
)
from seedpool.models.recurrent_q import RecurrentQModelConfig, make_recurrent_q_network
from seedpool.replay.sequence import sequence_priority

@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Small LSTM steps run far slower on 2 threads than on 1 when the cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(4)


def q_net(seed: int = 0, core: str = "lstm", dueling: bool = True):
    torch.manual_seed(seed)
    return make_recurrent_q_network(OBS, ACTIONS, RecurrentQModelConfig(hidden_sizes=(16,), core=core, core_size=8,
                                                                        head_sizes=(16,), dueling=dueling))


def batch(n: int = 4, L: int = 10, seed: int = 0, episode_ends: bool = True) -> dict:
    """A batch of sequences as the replay samples them (tensors), with terminations, padding and episode starts."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(n, L, dtype=torch.bool)
    terminated = torch.zeros(n, L, dtype=torch.bool)
    first = torch.zeros(n, L + 1, dtype=torch.bool)
    if episode_ends:
        mask[1, 7:] = False
        terminated[1, 6] = True  # episode ends at step 6, padding after
        mask[2, 8:] = False  # truncated after step 7: bootstrap from obs[8]
        terminated[3, 2] = True  # terminated at step 2, padding after
        mask[3, 3:] = False
        first[0, 0] = True  # sequence 0 opens an episode
    return {
        "obs": torch.randn(n, L + 1, 3, generator=g),
        "action": torch.randint(0, 4, (n, L), generator=g),
        "reward": torch.randn(n, L, generator=g),
        "terminated": terminated, "mask": mask, "first": first,
        "state": {"h": torch.randn(n, 8, generator=g), "c": torch.randn(n, 8, generator=g)},
        "weights": torch.rand(n, generator=g) + 0.5,
    }


def test_value_rescaling_round_trips():
    x = torch.tensor([0.0, 1e-6, -1e-6, 0.5, -0.5, 1.0, -3.0, 10.0, 123.4, -1e3, 1e4, 1e6, -1e6], dtype=torch.float64)
    np.testing.assert_allclose(inverse_value_rescale(value_rescale(x)), x, rtol=1e-9, atol=1e-9)
    y = torch.linspace(-300, 300, 1001, dtype=torch.float64)
    np.testing.assert_allclose(value_rescale(inverse_value_rescale(y)), y, rtol=1e-9, atol=1e-9)
    # h is what the paper says: sign(x)(sqrt(|x| + 1) - 1) + eps x.
    assert float(value_rescale(torch.tensor(8.0, dtype=torch.float64))) == pytest.approx(2.0 + 8e-3)
    assert float(value_rescale(torch.tensor(-3.0, dtype=torch.float64), eps=0.0)) == pytest.approx(-1.0)


def naive_nstep(rewards, terminated, mask, boot, gamma, n):
    """One (t, b) at a time: sum rewards until n steps, a termination, padding or the end; then bootstrap."""
    L, B = rewards.shape
    out = torch.zeros(L, B, dtype=torch.float64)
    for b in range(B):
        for t in range(L):
            g, k, boot_ok = 0.0, t, True
            while k < t + n and k < L and mask[k, b]:
                g += gamma ** (k - t) * float(rewards[k, b])
                k += 1
                if terminated[k - 1, b]:
                    boot_ok = False
                    break
            if boot_ok:
                g += gamma ** (k - t) * float(boot[k, b])
            out[t, b] = g
    return out


@pytest.mark.parametrize("n", [1, 3, 5])
def test_nstep_targets_match_naive_loop(n):
    rng = np.random.default_rng(n)
    L, B = 12, 6
    rewards = torch.tensor(rng.standard_normal((L, B)))
    terminated = torch.tensor(rng.random((L, B)) < 0.15)
    valid = rng.integers(1, L + 1, B)
    mask = torch.tensor(np.arange(L)[:, None] < valid[None, :])
    boot = torch.tensor(rng.standard_normal((L + 1, B)))
    got = nstep_targets(rewards, terminated & mask, mask, boot, 0.9, n)
    want = naive_nstep(rewards, terminated & mask, mask, boot, 0.9, n)
    np.testing.assert_allclose(got[mask], want[mask], rtol=1e-12)


def test_state_resets_at_episode_starts_inside_a_sequence():
    net = q_net()
    T, B, k = 9, 3, 4
    obs = torch.randn(T, B, 3)
    state = {"h": torch.randn(B, 8), "c": torch.randn(B, 8)}
    first = torch.zeros(T, B, dtype=torch.bool)
    first[k, 1] = True
    with torch.no_grad():
        q, _ = net.sequence(obs, state, first)
        fresh, _ = net.sequence(obs[k:, 1:2], net.initial_state(1), torch.zeros(T - k, 1, dtype=torch.bool))
        carried, _ = net.sequence(obs, state, torch.zeros(T, B, dtype=torch.bool))
        # Step by step gives the same numbers as the whole sequence.
        st, steps = state, []
        for t in range(T):
            qt, st = net.step(obs[t], st, first[t])
            steps.append(qt)
    torch.testing.assert_close(q[k:, 1], fresh[:, 0])
    torch.testing.assert_close(q[:k], carried[:k])
    assert not torch.allclose(q[k:, 1], carried[k:, 1])
    torch.testing.assert_close(torch.stack(steps), q)


@pytest.mark.parametrize("learn_from_start", [False, True])
def test_burn_in_steps_get_no_gradient(learn_from_start):
    net, target = q_net(0), q_net(1)
    cfg = R2D2Config(burn_in=4, n_step=3, learn_from_episode_start=learn_from_start)
    b = batch(L=10, episode_ends=False)
    b["first"][0, 0] = True  # sequence 0 opens an episode: its stored state is exact
    b["obs"].requires_grad_(True)
    loss, *_ = r2d2_loss(net, target, b, cfg)
    loss.backward()
    grad = b["obs"].grad.abs().sum(dim=-1)  # [n, L + 1]
    assert (grad[1:, :4] == 0).all(), "burn-in observations of a stale-state sequence got a gradient"
    assert (grad[:, 4:10] > 0).all()
    assert bool((grad[0, :4] > 0).all()) == learn_from_start
    # Burn-in still matters: it sets the state the learned steps start from.
    b2 = {**b, "obs": b["obs"].detach().clone()}
    b2["obs"][1:, :4] += 1.0
    loss2, *_ = r2d2_loss(net, target, b2, cfg)
    assert float(loss2.detach()) != pytest.approx(float(loss.detach()))


def naive_loss(online, target, b, cfg):
    """Per sequence and step, with step-by-step network calls and Python loops."""
    n, L = b["action"].shape
    losses, tds = [], torch.zeros(n, L)
    with torch.no_grad():
        for i in range(n):
            st_o = {k: v[i:i + 1] for k, v in b["state"].items()}
            st_t = dict(st_o)
            q_on, q_tg = [], []
            for t in range(L + 1):
                qo, st_o = online.step(b["obs"][i, t:t + 1], st_o, b["first"][i, t:t + 1])
                qt, st_t = target.step(b["obs"][i, t:t + 1], st_t, b["first"][i, t:t + 1])
                q_on.append(qo[0].double())
                q_tg.append(qt[0].double())
            values = [float(inverse_value_rescale(q_tg[t][q_on[t].argmax()], cfg.rescale_eps)) for t in range(L + 1)]
            per = []
            for t in range(cfg.burn_in, L):
                if not b["mask"][i, t]:
                    continue
                g, k, boot_ok = 0.0, t, True
                while k < t + cfg.n_step and k < L and b["mask"][i, k]:
                    g += cfg.gamma ** (k - t) * float(b["reward"][i, k])
                    k += 1
                    if b["terminated"][i, k - 1]:
                        boot_ok = False
                        break
                if boot_ok:
                    g += cfg.gamma ** (k - t) * values[k]
                y = float(value_rescale(torch.tensor(g, dtype=torch.float64), cfg.rescale_eps))
                td = float(q_on[t][b["action"][i, t]]) - y
                tds[i, t] = td
                per.append(0.5 * td * td)
            losses.append(float(b["weights"][i]) * (sum(per) / max(len(per), 1)))
    return sum(losses) / n, tds


def test_loss_matches_naive_computation():
    online, target = q_net(0), q_net(1)
    cfg = R2D2Config(burn_in=3, n_step=4, gamma=0.9, learn_from_episode_start=False)
    b = batch(n=4, L=10)
    loss, td, learned, _ = r2d2_loss(online, target, b, cfg)
    want_loss, want_td = naive_loss(online, target, b, cfg)
    assert float(loss.detach()) == pytest.approx(want_loss, rel=1e-4)
    np.testing.assert_allclose(td[learned].numpy(), want_td[learned].numpy(), rtol=1e-4, atol=1e-5)
    expected_learned = b["mask"] & (torch.arange(10) >= 3)
    assert torch.equal(learned, expected_learned)


def test_learner_step_returns_sequence_priorities_and_learns():
    online = q_net(0)
    cfg = R2D2Config(burn_in=2, n_step=3, learning_rate=1e-2, target_network_frequency=1000)
    learner = R2D2Learner(online, cfg)
    np_batch = {k: ({kk: vv.numpy() for kk, vv in v.items()} if isinstance(v, dict) else v.numpy())
                for k, v in batch(n=6, L=8, seed=3).items()}
    first = learner.update(np_batch)
    with torch.no_grad():
        data = {k: ({kk: torch.as_tensor(vv) for kk, vv in v.items()} if isinstance(v, dict) else torch.as_tensor(v))
                for k, v in np_batch.items()}
    for _ in range(30):
        last = learner.update(np_batch)
    assert last.metrics["losses/td_loss"] < first.metrics["losses/td_loss"]
    # The priorities are the eta-mix of the |TD errors| the loss saw (before the step).
    _, td, learned, _ = r2d2_loss(learner.model, learner.target, data, cfg)
    after = learner.update(np_batch)
    np.testing.assert_allclose(after.priorities, sequence_priority(td.abs().numpy(), learned.numpy(), 0.9),
                               rtol=1e-5)
    assert learner.version == 32


def test_acting_records_the_state_it_used():
    net = q_net()
    act = RecurrentEpsilonGreedyAct(np.array([1.0, 0.0]), seed=0)
    state = {"h": torch.randn(2, 8), "c": torch.randn(2, 8)}
    first = torch.tensor([False, True])
    obs = torch.randn(2, 3)
    out = act(net, obs, state, first, torch.arange(2))
    torch.testing.assert_close(out.aux, torch.cat([state["h"], state["c"]], dim=1))
    q, nxt = net.step(obs, state, first)
    torch.testing.assert_close(out.state["h"], nxt["h"])
    assert int(out.actions[1]) == int(q[1].argmax())  # epsilon 0: greedy


@pytest.mark.parametrize("bad", [dict(burn_in=80), dict(overlap=-1), dict(n_step=0), dict(rescale_eps=0.0)])
def test_config_is_checked(bad):
    with pytest.raises(ValueError):
        R2D2Learner(q_net(), R2D2Config(**bad))


def test_deduplicated_frames_reach_the_learner_as_the_same_stacks():
    from seedpool.algos.r2d2 import _tensors
    from seedpool.replay.sequence import SequenceReplay

    L, K = 6, 4
    rb = SequenceReplay(8, ((K, 5, 5), np.uint8), ((), np.int64), {"h": 2}, length=L, frame_dedup=True, seed=0)
    frames = np.random.default_rng(0).integers(0, 255, (3, L + K, 5, 5), dtype=np.uint8)
    obs = np.stack([frames[:, t:t + K] for t in range(L + 1)], axis=1)
    rb.add(obs=obs, action=np.zeros((3, L), np.int64), reward=np.zeros((3, L), np.float32),
           terminated=np.zeros((3, L), bool), mask=np.ones((3, L), bool), first=np.zeros((3, L + 1), bool),
           state={"h": np.zeros((3, 2), np.float32)})
    sample = rb.sample(5)
    got = _tensors(sample, torch.device("cpu"))["obs"]
    np.testing.assert_array_equal(got.numpy(), obs[sample["indices"]])
