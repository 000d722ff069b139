"""Async native MuJoCo pools stepped in the background (seedpool/envs/native/background.py):
the results of the sync path and of the calling thread's, errors as before, WaitTimeout,
Ctrl-C, and no thread left behind; with shared lanes (the MuJoCo families' default: any
thread takes the next part) and with lanes that each step a block of envs."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the native MuJoCo families need mujoco: pip install 'seedpool[mujoco]'")

import seedpool  # noqa: E402
from seedpool.envs.errors import EnvStepError, WaitTimeout  # noqa: E402
from seedpool.envs.native import part_ring  # noqa: E402
from seedpool.envs.families.mujoco.envs import HalfCheetah  # noqa: E402


def _lanes() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("seedpool-native-lane")]


def _async_pool(task, num_envs: int, batch: int, threads: int | None, **kwargs):
    pool = seedpool.make(task, num_envs=num_envs, batch_size=batch, seed=3, threads=threads, **kwargs)
    assert (pool._exec._lanes is not None) == (threads != 1), "threads=1: the calling thread alone"
    return pool


@pytest.mark.parametrize("task,steps", [("Hopper-v5", 120), ("Ant-v5", 30)])
def test_background_steps_give_the_sync_pools_episodes(task, steps):
    """16 envs, batches of 8, one action sequence per env: each env's observations, rewards,
    terminations, truncations and counts are those of a sync pool of 16 (Hopper ends
    episodes often, so autoresets run on the lanes too)."""
    n, batch = 16, 8
    with seedpool.make(task, num_envs=n, seed=3) as pool:
        nu = pool.single_action_space.shape[0]
        actions = np.random.default_rng(0).uniform(-1, 1, (steps, n, nu)).astype(np.float32)
        want = [pool.reset()[0]]
        for t in range(steps):
            obs, rew, term, trunc, info = pool.step(actions[t])
            want.append((obs, rew, term, trunc, info["elapsed_step"]))
    for threads in (None, 2):
        with _async_pool(task, n, batch, threads) as pool:
            pool.async_reset()
            sent = np.zeros(n, np.int64)  # each env's steps so far
            for _ in range(2 * steps + 2):
                obs, rew, term, trunc, info = pool.recv()
                ids = info["env_id"]
                for k, i in enumerate(ids):
                    t = sent[i]
                    if t == 0:
                        np.testing.assert_array_equal(obs[k], want[0][i])
                    else:
                        w_obs, w_rew, w_term, w_trunc, w_elapsed = want[t]
                        assert obs[k].tobytes() == w_obs[i].tobytes() and rew[k] == w_rew[i], (threads, i, t)
                        assert (term[k], trunc[k], info["elapsed_step"][k]) == (w_term[i], w_trunc[i], w_elapsed[i])
                if sent[ids].max() == steps:
                    continue
                pool.send(actions[sent[ids], ids], ids)
                sent[ids] += 1
            assert (sent == steps).all()


def _script(pool, steps: int, rng: np.random.Generator) -> list[bytes]:
    """An async run with scrambled send orders, a reset of some envs with seeds mid-run and a
    timeout that does not expire; every result as bytes."""
    out: list[bytes] = []
    nu = pool.single_action_space.shape[0]
    pool.async_reset()
    for t in range(steps):
        obs, rew, term, trunc, info = pool.recv(timeout=60.0)
        out += [a.tobytes() for a in (obs, rew, term, trunc, info["env_id"], info["elapsed_step"])]
        ids = info["env_id"][rng.permutation(len(info["env_id"]))]
        if t == steps // 2:  # EnvPool's reset of a subset, with seeds, while others are in flight
            obs, info = pool.reset(ids, seed=100)
            out += [obs.tobytes(), info["env_id"].tobytes()]
            ids = info["env_id"]
        pool.send(rng.uniform(-1, 1, (len(ids), nu)).astype(np.float32), ids)
    return out


@pytest.mark.parametrize("num_envs,batch", [(16, 8), (8, 3)])
def test_background_and_calling_thread_give_the_same_bytes(num_envs, batch):
    """Batches of 3 of 8 envs span both lanes (parts of uneven size) and drift across them."""
    want = _script(_async_pool("Hopper-v5", num_envs, batch, 1), 160, np.random.default_rng(5))
    for threads in (2, 3):
        pool = _async_pool("Hopper-v5", num_envs, batch, threads)
        got = _script(pool, 160, np.random.default_rng(5))
        pool.close()
        assert got == want, f"threads={threads}"


def test_shared_lanes_cut_a_batch_into_a_part_per_thread_and_say_so():
    with _async_pool("HalfCheetah-v5", 16, 8, None) as pool:
        lanes = pool._exec._lanes
        assert lanes.shared and lanes.lanes == 2
        pool.async_reset()
        for _ in range(4):  # steps go to the compiled ring (resets to the queue), a part per env
            pool.send(np.zeros((8, 6), np.float32), pool.recv()[-1]["env_id"])
        assert lanes.ring is not None and lanes.ring.ctl[part_ring.POSTED] == 4 * 8
        assert lanes._chunks(list(range(8))) == [(slice(0, 4), 1), (slice(4, 8), 1)]  # one queue for all
        assert [type(rows) for rows, _ in lanes._chunks([9, 3, 5, 1])] == [np.ndarray, np.ndarray]
        assert pool.num_workers == 2 and "1 in the background" in pool.layout_reason
        assert "each taking the next part" in repr(pool)
    with _async_pool(PickyLanes, 16, 8, None) as pool:  # a family that is not shared: blocks of envs
        lanes = pool._exec._lanes
        assert not lanes.shared and lanes.ring is None
        assert lanes._split(list(range(8))) == [(slice(0, 8), 0)]  # a batch is one lane's call
        assert [lane for _, lane in lanes._split([7, 8])] == [0, 1]
        assert "block of envs (0-7, 8-15)" in repr(pool)
    with seedpool.make("HalfCheetah-v5", num_envs=8, threads=None) as pool:  # sync: no lanes
        assert pool._exec._lanes is None


class Picky(HalfCheetah):
    """Raises for an action of exactly 0.5; sleeps (without the GIL) for one of 0.25."""

    def step(self, ids, actions):
        if (actions[:, 0] == 0.5).any():
            raise ValueError("picky: no half measures")
        if (actions[:, 0] == 0.25).any():
            time.sleep(0.5)
        return super().step(ids, actions)


class ResetRefuses(HalfCheetah):
    """Raises in the reset of env 1 once `refuse` is set."""

    refuse = False

    def reset(self, ids, options):
        if self.refuse and 1 in ids.tolist():
            raise ValueError("no second start for env 1")
        return super().reset(ids, options)


def test_an_error_in_the_resets_a_ring_part_left_fails_its_batch_and_the_pool_goes_on():
    """The fused step leaves the envs to reset to Python (`finish`, in the waiting caller): a
    reset that raises fails the whole batch as a step's error would; its envs restart."""
    with _async_pool(ResetRefuses, 4, 2, 2, max_episode_steps=2) as pool:
        assert pool._exec._lanes.ring is not None
        pool.async_reset()
        first = pool.recv()[-1]["env_id"]
        pool.send(np.zeros((2, 6), np.float32), first)
        for _ in range(3):  # every env steps twice: truncated, to be reset on its next step
            ids = pool.recv()[-1]["env_id"]
            pool.send(np.zeros((2, 6), np.float32), ids)
        pool._exec.family.refuse = True
        results = []
        with pytest.raises(EnvStepError, match="no second start for env 1") as caught:
            for _ in range(4):
                obs, rew, term, trunc, info = pool.recv()
                results.append(info["env_id"].tolist())
                pool.send(np.zeros((2, 6), np.float32), info["env_id"])
        assert caught.value.env_id in (0, 1, 2, 3) and isinstance(caught.value, ValueError)
        pool._exec.family.refuse = False
        obs, rew, term, trunc, info = pool.recv()  # the failed batch's other env, restarting
        assert len(info["env_id"]) == 2 and np.isfinite(obs).all()


class PickyLanes(Picky):
    """Picky on lanes that each step a block of envs (not shared)."""

    background_shared = False


def _fail_and_recover(threads: int | None, first: list[int]) -> tuple[list, list[list[bytes]]]:
    """8 envs in batches of 4: send envs `first` (the second one's action is bad), then the
    others; the error's env id, type, cause and first line, and every result after it."""
    before = _lanes()
    out: list[list[bytes]] = []
    with _async_pool(Picky, 8, 4, threads) as pool:
        pool.async_reset()
        pool.recv()
        pool.recv()  # nothing in flight now
        actions = np.zeros((4, 6), np.float32)
        bad = actions.copy()
        bad[1, 0] = 0.5
        pool.send(bad, first)
        pool.send(actions, [i for i in range(8) if i not in first])
        with pytest.raises(EnvStepError) as caught:
            pool.recv()
        err = caught.value
        seen = [err.env_id, isinstance(err, ValueError), type(err.__cause__), str(err).splitlines()[0]]
        assert "picky: no half measures" in str(err)
        for _ in range(6):  # the failed batch comes back (restarting), then all go on
            obs, rew, term, trunc, info = pool.recv()
            out.append([a.tobytes() for a in (info["env_id"], obs, rew, term, trunc, info["elapsed_step"])])
            pool.send(actions, info["env_id"])
        assert len(_lanes()) == len(before) + (0 if threads == 1 else 1)  # lane 0 is the caller
    assert _lanes() == before
    return seen, out


@pytest.mark.parametrize("first", [[4, 5, 6, 7], [2, 3, 4, 5]])  # one lane's envs; both lanes'
def test_an_error_on_a_lane_is_raised_by_recv_as_in_the_calling_thread(first):
    want_seen, want = _fail_and_recover(1, first)
    assert want_seen[:3] == [first[0], True, ValueError]
    assert want_seen[3] == f"environment {first[0]} raised during step; its traceback follows."
    seen, got = _fail_and_recover(2, first)
    assert seen == want_seen
    assert [g[0] for g in got] == [w[0] for w in want]  # the same envs come back in the same order
    truncated = np.concatenate([np.frombuffer(w[4], np.bool_) for w in want])
    assert truncated.sum() == 4  # each env of the failed batch restarts and reports it once
    # Shared lanes cut the batch into two parts: the one with the bad action raised, the other
    # stepped its envs before the batch failed, so the first results after the error differ in
    # their rows (the calling thread's single call stepped none). All of them restart, and
    # from there on all is equal.
    got, want = got[1:], want[1:]
    assert got == want


def _interrupt_soon() -> threading.Timer:
    """Ctrl-C for the main thread in 50 ms, raised as KeyboardInterrupt: a test run started as a
    background job (`cmd &` in a script) inherits SIGINT ignored, and Python then installs no
    handler (as test_engine_backends' SCRIPT does for its child)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    timer.start()
    return timer


def test_a_wait_times_out_or_is_interrupted_and_the_envs_stay_in_flight():
    before = _lanes()
    pool = _async_pool(PickyLanes, 4, 2, 2)  # envs 0-1 on the caller's lane, 2-3 on a thread
    pool.async_reset()
    pool.recv()
    info = pool.recv()[-1]
    slow = np.full((2, 6), 0.25, np.float32)
    pool.send(slow, info["env_id"])  # envs 2-3: the thread sleeps 0.5 s
    with pytest.raises(WaitTimeout):
        pool.recv(timeout=0.01)
    timer = _interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        pool.recv()  # Ctrl-C while waiting for the thread
    timer.join()
    obs, rew, term, trunc, info = pool.recv()  # the slow batch, whole
    assert sorted(info["env_id"].tolist()) == [2, 3] and obs.shape == (2, 17)
    pool.send(slow, info["env_id"])  # close() with a batch in flight: it finishes, then the thread ends
    pool.close()
    assert _lanes() == before


def test_ctrl_c_in_the_callers_own_part_fails_that_batch_and_the_pool_goes_on():
    with _async_pool(PickyLanes, 4, 2, 2) as pool:
        pool.async_reset()
        info = pool.recv()[-1]
        pool.recv()  # nothing in flight now: the next recv steps envs 0-1 itself, whatever the timing
        pool.send(np.full((2, 6), 0.25, np.float32), info["env_id"])  # envs 0-1, stepped in recv
        timer = _interrupt_soon()
        with pytest.raises(KeyboardInterrupt):
            pool.recv()  # Ctrl-C while the caller sleeps in envs 0-1's step
        timer.join()
        with pytest.raises(EnvStepError, match="environment 0 raised during step"):
            pool.recv()  # the interrupted batch failed: its envs restart
        obs, rew, term, trunc, info = pool.recv()
        assert info["env_id"].tolist() == [0, 1] and trunc[0]  # env 0 reset after the fault


def test_shared_a_wait_with_a_timeout_only_waits_and_ctrl_c_in_a_part_it_took_fails_that_batch():
    """Shared lanes: the waiting caller steps parts no thread took, except in a recv with a
    timeout, which only waits (so it can time out); Ctrl-C inside such a part fails its batch
    as an error would, and the pool goes on."""
    before = _lanes()
    pool = _async_pool(Picky, 4, 2, 2)
    assert pool._exec._lanes.shared
    pool.async_reset()
    pool.recv()
    info = pool.recv()[-1]  # nothing in flight now
    sent = info["env_id"]
    pool.send(np.full((2, 6), 0.25, np.float32), sent)  # two parts of one env, each sleeps 0.5 s
    with pytest.raises(WaitTimeout):
        pool.recv(timeout=0.01)  # the thread sleeps in one part, the other waits in the queue
    timer = _interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        pool.recv()  # the caller takes the waiting part and sleeps in it
    timer.join()
    with pytest.raises(EnvStepError, match=f"environment {sent[0]} raised during step"):
        pool.recv()  # the interrupted batch failed: its envs restart
    obs, rew, term, trunc, info = pool.recv()
    assert sorted(info["env_id"].tolist()) == sorted(sent.tolist())
    assert trunc[info["env_id"] == sent[0]].all()  # the error's env reset after the fault (the other on its next step)
    pool.close()
    assert _lanes() == before


def test_a_forked_child_is_told_to_make_its_own_pool():
    import multiprocessing as mp

    pool = _async_pool("HalfCheetah-v5", 4, 2, 2)
    pool.async_reset()
    ids = pool.recv()[-1]["env_id"]
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()

    def send_in_child():
        try:
            pool.send(np.zeros((2, 6), np.float32), ids)
            child.send("no error")
        except RuntimeError as err:
            child.send(str(err))

    proc = ctx.Process(target=send_in_child)
    proc.start()
    try:
        assert parent.poll(60), "the child hung"
        assert "do not survive fork" in parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    pool.send(np.zeros((2, 6), np.float32), ids)  # the parent's pool goes on
    assert pool.recv()[0].shape == (2, 17)
    pool.close()
