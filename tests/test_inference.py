"""Dynamic batching, routing, trajectory buffers, recurrent slots and parameter versions."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from seedpool.inference import (
    ActOutput, DynamicBatcher, InferenceServer, Request, TrajectoryBuffers, concat_unrolls,
)

# How long a test waits for something that should happen at once (a reply, a queued unroll, a
# thread's end): it returns as soon as it does, so a bound of tens of seconds costs nothing when
# the code works and keeps a loaded machine from failing it.
WAIT_S = 60.0


def make_request(slots, obs=None, term=None, trunc=None, rew=None, restarted=None):
    slots = np.asarray(slots, dtype=np.int64)
    n = len(slots)
    z = np.zeros(n, dtype=bool)
    return Request(
        slots=slots,
        obs=np.zeros((n, 2), np.float32) if obs is None else np.asarray(obs, np.float32),
        rewards=np.zeros(n, np.float32) if rew is None else np.asarray(rew, np.float32),
        terminated=z if term is None else np.asarray(term), truncated=z if trunc is None else np.asarray(trunc),
        restarted=z if restarted is None else np.asarray(restarted),
    )


# --- batcher -------------------------------------------------------------------------

def test_deadline_fires_with_partial_batch():
    # The partial batch closes at its deadline (0.05 s after submit), long before the idle
    # timeout; the bounds are far apart so that a loaded machine cannot blur them.
    b = DynamicBatcher(max_batch=8, max_wait_s=0.05)
    t0 = time.perf_counter()
    b.submit(make_request([0, 1, 2]))
    batch = b.next_batch(idle_timeout=60.0)
    waited = time.perf_counter() - t0
    assert sum(len(r) for r in batch) == 3
    assert 0.05 <= waited < 30.0


def test_full_batch_does_not_wait_for_deadline():
    b = DynamicBatcher(max_batch=8, max_wait_s=60.0)
    b.submit(make_request([0, 1, 2, 3]))
    b.submit(make_request([4, 5, 6, 7]))
    t0 = time.perf_counter()
    batch = b.next_batch(idle_timeout=60.0)
    assert [len(r) for r in batch] == [4, 4]
    assert time.perf_counter() - t0 < 30.0  # not the 60 s deadline


def test_max_batch_caps_and_keeps_order():
    b = DynamicBatcher(max_batch=8, max_wait_s=0.0)
    for i in range(5):
        b.submit(make_request([3 * i, 3 * i + 1, 3 * i + 2]))
    sizes = []
    firsts = []
    while batch := b.next_batch(idle_timeout=0.01):
        sizes.append(sum(len(r) for r in batch))
        firsts.extend(int(r.slots[0]) for r in batch)
    assert sizes == [6, 6, 3]
    assert firsts == [0, 3, 6, 9, 12]  # the request that did not fit opens the next batch
    assert b.next_batch(idle_timeout=0.01) == []
    with pytest.raises(ValueError, match="exceeds max_batch=8"):
        b.submit(make_request(list(range(9))))


# --- trajectory buffers --------------------------------------------------------------

def step(buf, slots, obs, rew=None, term=None, trunc=None, restarted=None, action=None, version=0):
    req = make_request(slots, obs=np.asarray(obs, np.float32)[:, None].repeat(2, 1), rew=rew,
                       term=term, trunc=trunc, restarted=restarted)
    out, first = buf.observe(req.slots, req.obs, req.rewards, req.terminated, req.truncated,
                             req.restarted)
    a = np.asarray(obs, np.int64) if action is None else action
    buf.record_action(req.slots, a, np.full(len(slots), -0.5, np.float32), version)
    return out, first


def test_unrolls_have_bootstrap_obs_and_overlap():
    buf = TrajectoryBuffers(num_slots=2, unroll_length=3, obs_shape=(2,), obs_dtype=np.float32)
    emitted = []
    for t in range(7):
        out, _ = step(buf, [0, 1], [10 * t, 10 * t + 1], rew=[t, -t], version=t)
        if out is not None:
            emitted.append(out)
    assert len(emitted) == 2  # at t=3 and t=6
    u = emitted[0]
    assert u.obs.shape == (4, 2, 2) and u.actions.shape == (3, 2)
    np.testing.assert_array_equal(u.obs[:, 0, 0], [0, 10, 20, 30])
    np.testing.assert_array_equal(u.obs[:, 1, 0], [1, 11, 21, 31])
    # reward[t] is what action t earned: it arrives with obs t+1.
    np.testing.assert_array_equal(u.rewards[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(u.rewards[:, 1], [-1, -2, -3])
    np.testing.assert_array_equal(u.versions[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(u.actions[:, 1], [1, 11, 21])
    np.testing.assert_array_equal(emitted[1].obs[:, 0, 0], [30, 40, 50, 60])  # overlap by one obs
    np.testing.assert_array_equal(u.first[:, 0], [True, False, False])
    assert u.valid.all()


def test_autoreset_step_is_marked_invalid_and_episode_restarts():
    buf = TrajectoryBuffers(num_slots=1, unroll_length=4, obs_shape=(2,), obs_dtype=np.float32)
    step(buf, [0], [0])
    step(buf, [0], [1], rew=[1.0])
    step(buf, [0], [2], rew=[1.0], term=[True])  # obs 2 is a final observation
    step(buf, [0], [3], rew=[0.0])  # autoreset: reset obs, reward 0
    out, first = step(buf, [0], [4], rew=[1.0])
    assert not first[0] and out is not None
    np.testing.assert_array_equal(out.terminated[:, 0], [False, True, False, False])
    np.testing.assert_array_equal(out.valid[:, 0], [True, True, False, True])
    np.testing.assert_array_equal(out.first[:, 0], [True, False, False, True])


def test_restart_drops_partial_unroll():
    buf = TrajectoryBuffers(num_slots=2, unroll_length=3, obs_shape=(2,), obs_dtype=np.float32)
    step(buf, [0, 1], [0, 100])
    step(buf, [0, 1], [1, 101])
    # The engine reports a restarted env truncated, with a reset obs; its next step resets again.
    _, first = step(buf, [0, 1], [50, 102], trunc=[True, False], restarted=[True, False])
    assert first.tolist() == [True, False]
    assert buf.dropped_steps == 2
    out, first = step(buf, [0, 1], [51, 103])
    assert first.tolist() == [True, False]
    assert out is not None and out.slots.tolist() == [1]  # slot 0 started over
    np.testing.assert_array_equal(out.obs[:, 0, 0], [100, 101, 102, 103])
    for t in range(2):
        out, _ = step(buf, [0, 1], [52 + t, 104 + t])
    assert out.slots.tolist() == [0]
    np.testing.assert_array_equal(out.obs[:, 0, 0], [50, 51, 52, 53])
    np.testing.assert_array_equal(out.valid[:, 0], [False, True, True])  # step 0 is the reset step
    np.testing.assert_array_equal(out.first[:, 0], [True, True, False])


def test_buffers_reject_misuse():
    buf = TrajectoryBuffers(num_slots=2, unroll_length=3, obs_shape=(2,), obs_dtype=np.float32)
    r = make_request([0, 0])
    with pytest.raises(ValueError, match="twice"):
        buf.observe(r.slots, r.obs, r.rewards, r.terminated, r.truncated, r.restarted)
    r = make_request([1])
    buf.observe(r.slots, r.obs, r.rewards, r.terminated, r.truncated, r.restarted)
    with pytest.raises(RuntimeError, match="never recorded"):
        buf.observe(r.slots, r.obs, r.rewards, r.terminated, r.truncated, r.restarted)


# --- the server ----------------------------------------------------------------------

class Offset(torch.nn.Module):
    """Action = obs[:, 0] + offset, so a test can tell which obs and which params chose it."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.nn.Parameter(torch.zeros(()))


def offset_act(model, obs, state, first, slots):
    actions = (obs[:, 0] + model.offset).round().long()
    return ActOutput(actions=actions, logp=torch.zeros(len(obs)), state=state)


def make_server(num_slots=12, max_batch=8, max_wait_s=0.02, T=4, act=offset_act, **kw):
    unrolls = []
    server = InferenceServer(Offset(), act, num_slots=num_slots, obs_shape=(2,),
                             obs_dtype=np.float32, unroll_length=T, max_batch=max_batch,
                             max_wait_s=max_wait_s, on_unrolls=unrolls.append, **kw)
    return server, unrolls


def test_multiple_sources_get_their_own_actions_back():
    server, unrolls = make_server(num_slots=12, max_batch=8, max_wait_s=0.02)
    server.start()
    errors = []

    def source(offset):  # 4 envs each, 2 at a time, like an async pool with batch 2
        try:
            for t in range(30):
                ids = np.array([0, 1]) if t % 2 == 0 else np.array([2, 3])
                slots = offset + ids
                obs = np.stack([1000 * slots + t, np.zeros(2)], axis=1)
                actions = server.submit(make_request(slots, obs=obs)).wait(timeout=WAIT_S)
                assert actions.tolist() == (1000 * slots + t).tolist()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=source, args=(4 * i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT_S)
    assert not any(th.is_alive() for th in threads), "a source still waits for its actions"
    server.stop()
    assert not errors, errors
    hist = server.stats.histogram()
    assert hist.sum() > 0 and hist[9:].sum() == 0
    assert hist[4:].sum() > 0  # some batches joined rows from different sources
    u = concat_unrolls(unrolls)
    assert sorted(set(u.slots.tolist())) == list(range(12))
    stats = server.stats.read()
    assert 2 <= stats["inference/batch_mean"] <= 8


def test_parameter_versions_are_recorded():
    server, unrolls = make_server(num_slots=2, max_batch=2, T=3)
    obs = np.zeros((2, 2), np.float32)

    def serve_step():
        reply = server.submit(make_request([0, 1], obs=obs))
        assert server.run_once(idle_timeout=1.0) == 2  # the serial twin: no thread
        return reply.wait(timeout=0)

    assert serve_step().tolist() == [0, 0]
    server.publish({"offset": torch.tensor(7.0)}, version=5)
    assert server.version == 0  # swapped only at the next batch
    for _ in range(3):
        assert serve_step().tolist() == [7, 7]
    assert server.version == 5 and server.stats.read()["inference/param_swaps"] == 1
    u = concat_unrolls(unrolls)
    np.testing.assert_array_equal(u.versions[:, 0], [0, 5, 5])
    np.testing.assert_array_equal(u.actions[:, 1], [0, 7, 7])
    lag = 9 - u.versions  # learner version 9: lag per step
    assert lag.max() == 9 and lag.min() == 4


def test_recurrent_state_slots_are_per_env_and_reset_on_first():
    def counting_act(model, obs, state, first, slots):
        h = state["h"] + 1  # counts steps since the episode began
        return ActOutput(actions=h.long(), logp=torch.zeros(len(obs)), state={"h": h})

    server, _ = make_server(num_slots=3, max_batch=3, T=10, act=counting_act,
                            initial_state={"h": torch.zeros(())})
    seen = []
    for t in range(5):
        term = [t == 2, False]  # obs t=2 of env 0 is final, so its reset obs t=3 opens an episode
        reply = server.submit(make_request([0, 2], term=term))
        server.run_once(idle_timeout=1.0)
        seen.append(reply.wait(0).tolist())
    assert [s[1] for s in seen] == [1, 2, 3, 4, 5]
    assert [s[0] for s in seen] == [1, 2, 3, 1, 2]


def test_policy_error_fails_waiting_actors_instead_of_hanging():
    def broken_act(model, obs, state, first, slots):
        raise FloatingPointError("boom")

    server, _ = make_server(act=broken_act)
    server.start()
    reply = server.submit(make_request([0, 1]))
    with pytest.raises(RuntimeError, match="boom"):
        reply.wait(timeout=WAIT_S)
    server.stop()
    assert isinstance(server.error, FloatingPointError)
    with pytest.raises(RuntimeError, match="stopped"):
        server.submit(make_request([0]))


# --- the unroll queue ----------------------------------------------------------------

def test_unroll_queue_takes_exact_batches_in_order_and_blocks_when_full():
    from seedpool.inference.unroll_queue import QueueClosed, UnrollQueue

    buf = TrajectoryBuffers(num_slots=5, unroll_length=2, obs_shape=(2,), obs_dtype=np.float32)
    chunks = []
    for t in range(3):
        out, _ = step(buf, list(range(5)), [t] * 5)
        if out is not None:
            chunks.append(out)
    q = UnrollQueue(max_unrolls=6)
    q.put(take_unrolls_slice(chunks[0], 0, 3))
    q.put(take_unrolls_slice(chunks[0], 3, 5))
    assert q.depth() == 5
    got = q.take(4, timeout=WAIT_S)
    assert got.slots.tolist() == [0, 1, 2, 3] and got.obs.shape == (3, 4, 2)
    assert q.take(4, timeout=0.01) is None  # only one left
    q.put(chunks[0])  # 1 + 5 = 6: full now
    blocked = threading.Thread(target=q.put, args=(chunks[0],))
    blocked.start()
    # Back-pressure: the put waits on the queue's condition (not merely slow to start).
    deadline = time.monotonic() + WAIT_S
    while not q._cond._waiters and blocked.is_alive():
        assert time.monotonic() < deadline, "put neither blocked nor finished"
        time.sleep(0.001)
    assert blocked.is_alive() and q.depth() == 6
    assert q.take(3, timeout=WAIT_S).slots.tolist() == [4, 0, 1]
    blocked.join(WAIT_S)
    assert not blocked.is_alive() and q.depth() == 8
    q.close()
    with pytest.raises(QueueClosed):
        q.take(1)


def take_unrolls_slice(u, a, b):
    from seedpool.inference import take_unrolls

    return take_unrolls(u, slice(a, b))
