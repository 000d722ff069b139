"""The native MuJoCo families split over threads (mujoco_sim.RowThreads, threads.SplitTimer):
the same results as one thread, byte for byte, and no thread left behind."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="the native MuJoCo families need mujoco: pip install 'seedpool[mujoco]'")

import seedpool  # noqa: E402
from seedpool.envs.native import part_ring  # noqa: E402
from seedpool.envs.families.mujoco.envs import HalfCheetah  # noqa: E402
from seedpool.envs.native.threads import ShardThreads, SplitTimer  # noqa: E402


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("seedpool-native")]


def _play(task: str, threads: int | None, num_envs: int, batch: int, steps: int) -> tuple[list[bytes], list[int]]:
    """Every result of a send/recv run (ids sent back in a scrambled order, so an async pool's
    family gets index arrays as well as runs), as bytes; and the split timer's calls
    (unsplit, split)."""
    rng = np.random.default_rng(1)
    out: list[bytes] = []
    with seedpool.make(task, num_envs=num_envs, batch_size=batch, seed=7, threads=threads) as pool:
        assert pool.backend == "native"
        # Async pools of more than one thread step on background lanes (test_native_background.py).
        assert (pool._exec._lanes is not None) == (batch < num_envs and threads != 1)
        split = pool._exec.family.row_threads
        if split is not None and split.timer is not None:  # auto: split and not, call after call
            split.timer = SplitTimer(window=0.0, windows=10**6)
        nu = pool.single_action_space.shape[0]
        pool.async_reset()
        for _ in range(steps):
            obs, rew, term, trunc, info = pool.recv()
            out += [a.tobytes() for a in (obs, rew, term, trunc, info["env_id"], info["elapsed_step"])]
            ids = info["env_id"][rng.permutation(batch)]
            pool.send(rng.uniform(-1, 1, (batch, nu)).astype(np.float32), ids)
        choices = list(split.timer.choices) if split is not None and split.timer is not None else []
    return out, choices


@pytest.mark.parametrize("task,steps", [("Hopper-v5", 150), ("Ant-v5", 40)])
@pytest.mark.parametrize("batch", [8, 4])  # sync: split over threads; async: background lanes
def test_split_steps_give_the_unsplit_results_byte_for_byte(task, steps, batch):
    """Hopper ends episodes often (the resets after a split step too); Ant calls
    mj_rnePostConstraint as well."""
    want, _ = _play(task, 1, num_envs=8, batch=batch, steps=steps)
    for threads in (2, 3):  # 3: parts of uneven size
        got, _ = _play(task, threads, num_envs=8, batch=batch, steps=steps)
        assert got == want, f"threads={threads}"
    got, choices = _play(task, None, num_envs=8, batch=batch, steps=steps)  # auto
    assert got == want
    if choices and batch == 8:  # sync, more than one usable core: both ways ran
        assert min(choices) > 0


def test_sync_steps_of_a_split_pool_match_gymnasium():
    from seedpool.envs.native import check_native_env

    assert check_native_env("Ant-v5", num_envs=3, steps=40, seed=4, atol=0.0, threads=2).steps == 40


def test_close_stops_the_helper_threads_and_a_dropped_family_does_too():
    before = _helpers()
    pool = seedpool.make("HalfCheetah-v5", num_envs=4, seed=0, threads=2)
    pool.reset()
    pool.step(np.zeros((4, 6), np.float32))
    assert len(_helpers()) == len(before) + 1
    pool.close()
    assert _helpers() == before
    family = HalfCheetah(4, threads=3)
    family.reset(np.arange(4), None)
    family.step(slice(None), np.zeros((4, 6), np.float32))
    assert len(_helpers()) == len(before) + 2
    del family
    gc.collect()
    assert _helpers() == before


def test_a_strided_run_steps_the_same_envs_as_an_index_array():
    """A slice with a step (the engine's rows for some batches) and the same envs as an index
    array, split over threads: the same results, and the same envs stepped."""
    strided, indexed = HalfCheetah(8, threads=2), HalfCheetah(8, threads=2)
    try:
        for family in (strided, indexed):
            for i in range(8):
                family.seed(i, 100 + i)
            family.reset(np.arange(8), None)
        rng = np.random.default_rng(5)
        for t in range(20):
            lo = 1 if t % 2 else 3
            envs = np.arange(lo, 8, 2)
            actions = rng.uniform(-1, 1, (len(envs), 6)).astype(np.float32)
            got = strided.step(slice(lo, 8, 2), actions)
            want = indexed.step(envs, actions)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
        for a, b in zip(strided.sim.datas, indexed.sim.datas):
            np.testing.assert_array_equal(a.qpos, b.qpos)
        assert strided.sim.datas[0].time == 0.0 and strided.sim.datas[1].time > 0.0  # env 0 never named
    finally:
        strided.close()
        indexed.close()


def test_threads_option_is_checked_and_one_thread_has_no_helpers():
    with pytest.raises(ValueError, match="threads must be a positive int"):
        HalfCheetah(4, threads=0)
    assert HalfCheetah(4, threads=1).row_threads is None
    family = HalfCheetah(4, threads=8)  # at most one thread per env
    assert family.threads == 4
    family.close()


class _Clock:
    """A clock the test moves."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _drive(timer: SplitTimer, clock: _Clock, calls: int, cost) -> list[bool]:
    """`calls` calls; each one's stretch (to the next call) lasts `cost(split)` seconds."""
    seen = []
    for _ in range(calls):
        split = timer.choose(4)
        seen.append(split)
        clock.now += cost(split)
    return seen


def test_split_timer_keeps_its_choice_then_measures_again():
    clock = _Clock()  # (times in binary fractions: exact)
    timer = SplitTimer(window=1.0, windows=2, hold=100.0, idle=4.0, clock=clock)
    # measuring: windows of 1 s, unsplit first (2 calls of 0.5 s), then split (4 of 0.25 s), ...
    assert _drive(timer, clock, 12, lambda split: 0.25 if split else 0.5) == ([False] * 2 + [True] * 4) * 2
    assert _drive(timer, clock, 100, lambda split: 0.5) == [True] * 100  # split kept; not timed
    clock.now += 1000.0  # a pause: the hold runs on the pool's time, 100 s of stepping
    assert _drive(timer, clock, 101, lambda split: 0.5) == [True] * 101
    # measuring again, now unsplit is faster
    seen = _drive(timer, clock, 12, lambda split: 0.5 if split else 0.25)
    assert seen == [False] * 4 + [True] * 2 + [False] * 4 + [True] * 2
    assert timer.choose(4) is False
    assert timer.choices == [4 + 8 + 1, 8 + 100 + 101 + 4]


def test_split_timer_times_whole_stretches_not_calls():
    """One thread's calls may be quick while it holds a core, then it waits its turn: what
    counts is the time from call to call, waits included."""
    clock = _Clock()
    timer = SplitTimer(window=1.0, windows=1, hold=100.0, idle=4.0, clock=clock)
    waits = iter([0.125, 0.125, 0.125, 2.0, 0.5, 0.5])  # unsplit: three quick calls, then a wait
    assert _drive(timer, clock, 6, lambda split: next(waits)) == [False] * 4 + [True] * 2
    assert timer.choose(4) is True  # unsplit: 2.375 s for 16 envs, split: 1 s for 8


def test_split_timer_keeps_splitting_unless_one_thread_wins_by_the_margin():
    for unsplit_cost, want in ((0.4375, True), (0.375, False)):  # split: 0.5 s a call
        clock = _Clock()
        timer = SplitTimer(window=1.0, windows=1, hold=100.0, margin=0.2, idle=4.0, clock=clock)
        seen = _drive(timer, clock, 10, lambda split: 0.5 if split else unsplit_cost)
        assert seen[-4:] == [want] * 4  # measured after 2 s, then kept


def test_shard_threads_run_fewer_parts_than_threads_and_refuse_more():
    threads = ShardThreads(3)
    seen: list[int] = []
    threads.run_parts(seen.append, [1, 2])
    assert sorted(seen) == [1, 2]
    with pytest.raises(ValueError, match="1 to 3 parts"):
        threads.run_parts(seen.append, [1, 2, 3, 4])
    threads.close()
    threads.close()  # again: nothing
    with pytest.raises(RuntimeError, match="closed"):
        threads.run_parts(seen.append, [1])


def test_the_pool_reports_the_familys_threads():
    with seedpool.make("Hopper-v5", num_envs=4, threads=2) as pool:
        assert pool.num_workers == 2 and "threads=2" in pool.layout_reason
        assert pool._exec._threads is None  # the engine's shard threads are not started for it
    with seedpool.make("Hopper-v5", num_envs=4, threads=1) as pool:
        assert pool.num_workers == 1
    with seedpool.make("Hopper-v5", num_envs=1) as pool:
        assert pool.num_workers == 1 and "one thread" in pool.layout_reason


def _in_forked_child(fn):
    """`fn()`'s result, computed in a forked child."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=lambda: child.send(fn()))
    proc.start()
    try:
        assert parent.poll(60), "the child hung"
        return parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def test_a_forked_child_steps_on_threads_of_its_own():
    """Threads do not survive fork: a child that steps a split family starts its own helpers."""
    actions = np.random.default_rng(3).uniform(-1, 1, (4, 6)).astype(np.float32)
    family = HalfCheetah(4, threads=2)
    family.reset(np.arange(4), None)
    family.step(slice(None), actions)  # the helper thread runs now
    got = _in_forked_child(lambda: family.step(slice(None), actions)[0].tobytes())
    assert got == family.step(slice(None), actions)[0].tobytes()
    family.close()


def test_a_split_pool_steps_through_its_ring_and_a_dropped_pool_stops_its_helper():
    """A sync pool's split step goes through a ring of parts (part_ring.py) whose helper loop
    is compiled; dropping the pool without close() stops that helper too."""
    before = _helpers()
    pool = seedpool.make("HalfCheetah-v5", num_envs=4, seed=0, threads=2)
    pool.reset()
    for _ in range(3):
        pool.step(np.zeros((4, 6), np.float32))
    ring = pool._exec.family._ring
    assert ring is not None and ring.ctl[part_ring.POSTED] == 3 * 4  # a part per env
    assert [t.name for t in _helpers() if t not in before] == ["seedpool-native-lane-1-compiled"]
    del pool, ring
    gc.collect()
    assert _helpers() == before


def test_a_forked_child_steps_a_split_pool_on_a_ring_of_its_own():
    actions = np.random.default_rng(3).uniform(-1, 1, (4, 6)).astype(np.float32)
    pool = seedpool.make("HalfCheetah-v5", num_envs=4, seed=0, threads=2)
    pool.reset()
    pool.step(actions)  # the parent's ring and helper run now
    got = _in_forked_child(lambda: pool.step(actions)[0].tobytes())
    assert got == pool.step(actions)[0].tobytes()
    pool.close()
