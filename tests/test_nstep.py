"""n-step targets: nstep_returns against a naive loop, and NStepWriter's rows against nstep_returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seedpool.algos.returns import nstep_returns
from seedpool.replay import NStepWriter, PrioritizedReplay, UniformReplay

FIELDS = {
    "obs": ((), np.int64),  # an observation is its (step, env) id: values are looked up by id
    "action": ((), np.int64),
    "reward": ((), np.float64),
    "discount": ((), np.float64),
    "next_obs": ((), np.int64),
}


def naive_nstep(rewards, values, terminated, truncated, gamma, n):
    """One env, one start step at a time: add rewards until n steps, an episode end or the rollout end."""
    T, B = rewards.shape
    out = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total, k = 0.0, 0
            while True:
                total += gamma**k * rewards[t + k, b]
                k += 1
                if terminated[t + k - 1, b]:
                    break  # no bootstrap
                if truncated[t + k - 1, b] or k == n or t + k == T:
                    total += gamma**k * values[t + k, b]  # values[t + k]: the obs after step t + k - 1
                    break
            out[t, b] = total
    return out


def rollout(T=41, B=6, seed=0, p_end=0.12):
    """Random rewards and values with terminations and truncations (never both at once)."""
    g = np.random.default_rng(seed)
    rewards = g.normal(size=(T, B))
    values = g.normal(size=(T + 1, B))
    terminated = g.random((T, B)) < p_end
    truncated = (g.random((T, B)) < p_end) & ~terminated
    return rewards, values, terminated, truncated


@pytest.mark.parametrize("n", [1, 2, 3, 5, 60])
def test_nstep_returns_match_naive_loop(n):
    r, v, term, trunc = rollout()
    got = nstep_returns(torch.tensor(r), torch.tensor(v), torch.tensor(term), torch.tensor(trunc), 0.95, n)
    np.testing.assert_allclose(got.numpy(), naive_nstep(r, v, term, trunc, 0.95, n), rtol=1e-12, atol=1e-12)


def test_nstep_returns_terminated_does_not_bootstrap_truncated_does():
    r = torch.tensor([[1.0], [2.0], [4.0]])
    v = torch.tensor([[0.0], [10.0], [100.0], [1000.0]])
    f = torch.zeros(3, 1, dtype=torch.bool)
    end = torch.tensor([[False], [True], [False]])
    term = nstep_returns(r, v, end, f, 0.5, 3)
    trunc = nstep_returns(r, v, f, end, 0.5, 3)
    # Row 0 ends at step 1: 1 + 0.5 * 2, then nothing (terminated) or 0.25 * V(final obs) = 0.25 * 100.
    assert term[0, 0].item() == 2.0 and trunc[0, 0].item() == 2.0 + 25.0
    assert term[1, 0].item() == 2.0 and trunc[1, 0].item() == 2.0 + 50.0
    assert term[2, 0].item() == trunc[2, 0].item() == 4.0 + 500.0  # rollout end: bootstrap values[T]


def test_nstep_returns_rejects_bad_shapes():
    with pytest.raises(ValueError, match="values"):
        nstep_returns(torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(4, 2, dtype=torch.bool),
                      torch.zeros(4, 2, dtype=torch.bool), 0.9, 3)


def feed(writer, r, term, trunc, values=None, q=None):
    """Step a [T, B] rollout into ``writer``; obs id of (t, b) is t * B + b, obs T is the bootstrap obs."""
    T, B = r.shape
    written = 0
    for t in range(T):
        kwargs = {}
        if q is not None:
            kwargs = {"q_value": q[t], "next_value": values[t + 1]}
        written += writer.add(obs=t * B + np.arange(B), action=t * B + np.arange(B), reward=r[t],
                              terminated=term[t], truncated=trunc[t], next_obs=(t + 1) * B + np.arange(B),
                              **kwargs)
    return written + writer.flush()


@pytest.mark.parametrize("n", [1, 3, 7])
@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
def test_writer_rows_match_nstep_returns(n, kind):
    r, v, term, trunc = rollout(seed=n)
    T, B = r.shape
    rb = kind(T * B, FIELDS, seed=0)
    writer = NStepWriter(rb, n, 0.9)
    assert feed(writer, r, term, trunc) == T * B  # one row per step: none dropped, none doubled
    rows = rb.storage.gather(np.arange(T * B))
    np.testing.assert_array_equal(np.sort(rows["action"]), np.arange(T * B))
    t, b = np.divmod(rows["obs"], B)
    nt, nb = np.divmod(rows["next_obs"], B)
    assert (nb == b).all() and (nt > t).all() and (nt - t <= n).all()
    target = rows["reward"] + rows["discount"] * v[nt, nb]
    want = nstep_returns(torch.tensor(r), torch.tensor(v), torch.tensor(term), torch.tensor(trunc), 0.9, n)
    np.testing.assert_allclose(target, want.numpy()[t, b], rtol=1e-12, atol=1e-12)
    # Discount is gamma^m, or 0 exactly when the row's last step terminated.
    m = nt - t
    ends_terminated = term[nt - 1, nb]
    np.testing.assert_allclose(rows["discount"], np.where(ends_terminated, 0.0, 0.9**m))


def test_episode_ends_flush_every_pending_row():
    rb = UniformReplay(50, FIELDS, seed=0)
    writer = NStepWriter(rb, 3, 0.5)
    step = dict(obs=[0], action=[0], reward=[1.0], terminated=[False], truncated=[False], next_obs=[1])
    assert writer.add(**step) == 0 and writer.pending == 1
    step.update(obs=[1], action=[1], reward=[2.0], next_obs=[2], truncated=[True])
    step["terminated"], step["truncated"] = np.array([False]), np.array([True])
    assert writer.add(**step) == 2 and writer.pending == 0
    rows = rb.storage.gather(np.arange(2))
    np.testing.assert_array_equal(rows["reward"], [1.0 + 0.5 * 2.0, 2.0])
    np.testing.assert_array_equal(rows["discount"], [0.25, 0.5])  # truncated: bootstraps
    np.testing.assert_array_equal(rows["next_obs"], [2, 2])  # from the final observation
    step = dict(obs=[10], action=[10], reward=[3.0], terminated=np.array([True]), truncated=np.array([False]),
                next_obs=[11])
    assert writer.add(**step) == 1
    row = rb.storage.gather(np.array([2]))
    assert row["reward"][0] == 3.0 and row["discount"][0] == 0.0  # terminated: no bootstrap


def test_flush_writes_partial_rows_and_streams_go_on():
    rb = UniformReplay(50, FIELDS, seed=0)
    writer = NStepWriter(rb, 4, 0.5)
    no = np.array([False, False])
    for t in range(2):
        writer.add(obs=[t, 100 + t], action=[t, 100 + t], reward=[1.0, 1.0], terminated=no, truncated=no,
                   next_obs=[t + 1, 101 + t])
    assert writer.pending == 4 and len(rb) == 0
    assert writer.flush() == 4 and writer.pending == 0 and writer.flush() == 0
    rows = rb.storage.gather(np.arange(4))
    np.testing.assert_array_equal(rows["discount"], [0.25, 0.5, 0.25, 0.5])
    np.testing.assert_array_equal(rows["next_obs"], [2, 2, 102, 102])
    writer.add(obs=[2, 102], action=[2, 102], reward=[1.0, 1.0], terminated=np.array([True, True]),
               truncated=no, next_obs=[3, 103])
    assert len(rb) == 6  # only the step after the flush: rows are never written twice


def test_initial_priorities_from_q_values():
    r, v, term, trunc = rollout(T=20, B=3, seed=4)
    q = np.random.default_rng(5).normal(size=(20, 3))
    rb = PrioritizedReplay(60, FIELDS, alpha=0.6, eps=1e-6, seed=0)
    writer = NStepWriter(rb, 3, 0.9)
    feed(writer, r, term, trunc, values=v, q=q)
    rows = rb.storage.gather(np.arange(60))
    t, b = np.divmod(rows["obs"], 3)
    nt, nb = np.divmod(rows["next_obs"], 3)
    td = np.abs(rows["reward"] + rows["discount"] * v[nt, nb] - q[t, b])
    np.testing.assert_allclose(rb.priorities(np.arange(60)), (td + 1e-6) ** 0.6, rtol=1e-12)


def test_rows_without_q_values_enter_at_max_priority():
    rb = PrioritizedReplay(20, FIELDS, alpha=0.5, seed=0)
    rb.add(obs=[0], action=[0], reward=[0.0], discount=[1.0], next_obs=[1])
    rb.update_priorities([0], [15.0])
    writer = NStepWriter(rb, 1, 0.9)
    writer.add(obs=[5], action=[5], reward=[1.0], terminated=np.array([False]), truncated=np.array([False]),
               next_obs=[6])
    np.testing.assert_allclose(rb.priorities([1]), (15.0 + 1e-6) ** 0.5)


def test_streams_route_steps_to_their_own_rows():
    rb = UniformReplay(50, FIELDS, seed=0)
    writer = NStepWriter(rb, 2, 1.0)
    no = np.zeros(2, bool)
    writer.add(obs=[0, 50], action=[0, 50], reward=[1.0, 10.0], terminated=no, truncated=no,
               next_obs=[1, 51], streams=[7, 3])
    writer.add(obs=[51, 1], action=[51, 1], reward=[20.0, 2.0], terminated=no, truncated=no,
               next_obs=[52, 2], streams=[3, 7])
    rows = rb.storage.gather(np.arange(2))
    got = dict(zip(rows["obs"].tolist(), zip(rows["reward"].tolist(), rows["next_obs"].tolist())))
    assert got == {50: (30.0, 52), 0: (3.0, 2)}


def test_bad_writer_input_raises_and_changes_nothing():
    rb = UniformReplay(50, FIELDS, seed=0)
    writer = NStepWriter(rb, 3, 0.9)
    no = np.zeros(2, bool)
    good = dict(obs=[0, 1], action=[0, 1], reward=[1.0, 1.0], terminated=no, truncated=no, next_obs=[2, 3])
    writer.add(**good)
    before = (writer.t.copy(), writer.start.copy(), writer.w_reward.copy(), len(rb))
    cases = [
        (dict(streams=[0, -1]), "stream ids"),
        (dict(q_value=[0.0, 0.0]), "both"),
        (dict(reward=[1.0, np.nan]), "finite"),
        (dict(terminated=[0, 1]), "bool"),
        (dict(reward=[1.0]), r"\[1\]"),
        (dict(action=[0.5, 1.0]), "cannot cast"),
    ]
    for change, message in cases:
        with pytest.raises((ValueError, TypeError), match=message):
            writer.add(**{**good, **change})
    after = (writer.t, writer.start, writer.w_reward, len(rb))
    for x, y in zip(before, after):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("kind", [UniformReplay, PrioritizedReplay])
def test_several_steps_of_a_stream_in_one_call_write_the_rows_of_one_step_per_call(n, kind):
    """A whole unroll at once (each stream several times, in its time order) = one step per call."""
    S, T = 5, 60
    r, v, term, trunc = rollout(T=T, B=S, seed=10 + n, p_end=0.2)
    q = np.random.default_rng(n).normal(size=(T, S))
    ids = np.arange(T * S).reshape(T, S)  # obs id of (t, s); its next obs is id + S

    def step(t_idx, s_idx):
        return dict(obs=ids[t_idx, s_idx], action=ids[t_idx, s_idx], reward=r[t_idx, s_idx],
                    terminated=term[t_idx, s_idx], truncated=trunc[t_idx, s_idx],
                    next_obs=ids[t_idx, s_idx] + S, streams=s_idx, q_value=q[t_idx, s_idx],
                    next_value=v[t_idx + 1, s_idx])

    one, chunked = kind(T * S, FIELDS, seed=0), kind(T * S, FIELDS, seed=0)
    w_one, w_chunked = NStepWriter(one, n, 0.9), NStepWriter(chunked, n, 0.9)
    rng = np.random.default_rng(0)
    for t in range(T):
        s_idx = rng.permutation(S)
        w_one.add(**step(np.full(S, t), s_idx))
    t = 0
    while t < T:  # chunks of 1..9 time steps, streams shuffled within each time step
        k = int(rng.integers(1, 10))
        times = np.arange(t, min(t + k, T))
        order = [(tt, s) for tt in times for s in rng.permutation(S)]
        tt, ss = map(np.array, zip(*order))
        w_chunked.add(**step(tt, ss))
        t += k
    assert w_one.pending == w_chunked.pending
    w_one.flush(), w_chunked.flush()
    assert len(one) == len(chunked) == T * S

    def by_first_action(rb):
        rows = rb.storage.gather(np.arange(len(rb)))
        order = np.argsort(rows["action"])
        out = {k: a[order] for k, a in rows.items()}
        if isinstance(rb, PrioritizedReplay):
            out["priority"] = rb.priorities(np.arange(len(rb)))[order]
        return out

    a, b = by_first_action(one), by_first_action(chunked)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_writer_refuses_replays_it_cannot_fill():
    rb = UniformReplay(10, {**FIELDS, "done": ((), np.bool_)})
    with pytest.raises(ValueError, match="done"):
        NStepWriter(rb, 3, 0.99)
    with pytest.raises(ValueError, match="n_step"):
        NStepWriter(UniformReplay(10, FIELDS), 0, 0.99)
    with pytest.raises(ValueError, match="capacity"):
        writer = NStepWriter(UniformReplay(2, FIELDS), 1, 0.99)
        no = np.zeros(3, bool)
        writer.add(obs=[0, 1, 2], action=[0, 1, 2], reward=[0.0] * 3, terminated=no, truncated=no,
                   next_obs=[3, 4, 5])
