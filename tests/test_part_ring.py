"""The compiled ring of batch parts (seedpool/envs/native/part_ring.py) and its atomics:
counts under contention, every part stepped once and in order across the ring's wrap,
a helper that sleeps and is woken, timeouts, Ctrl-C, close. The ring's protocol is driven
here by a step written in Python over the ring's own functions (its `claim`, `part_rows` and
`finish` run from Python too), so a part can be held back at will; the MuJoCo families'
compiled loops over it are checked through their pools (test_native_background.py)."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest
from numba import njit

from seedpool.envs.errors import WaitTimeout
from seedpool.envs.native import part_ring
from seedpool.envs.native.atomics import compare_exchange, exchange, fetch_add, load_acquire, store_release
from seedpool.envs.native.part_ring import CompiledStep, PartRing


@njit(nogil=True)
def _count(a, n, how):
    """n increments of a[0], by compare-exchange (how 0) or fetch-add (how 1)."""
    for _ in range(n):
        if how == 1:
            fetch_add(a, 0, 1)
            continue
        while True:
            c = load_acquire(a, 0)
            if compare_exchange(a, 0, c, c + 1):
                break


@pytest.mark.parametrize("how", [0, 1])
def test_atomic_increments_from_two_threads_are_all_counted(how):
    a = np.zeros(1, np.int64)
    _count(a, 1, how)
    a[0] = 0
    threads = [threading.Thread(target=_count, args=(a, 200_000, how)) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert a[0] == 400_000


@njit
def _single(a):
    store_release(a, 1, 7)
    return exchange(a, 2, 5), compare_exchange(a, 3, 1, 9), compare_exchange(a, 3, 0, 4), load_acquire(a, 1)


def test_exchange_compare_exchange_and_ordered_stores_do_what_they_say():
    a = np.array([0, 0, 3, 0], np.int64)
    assert _single(a) == (3, False, True, 7)
    assert a.tolist() == [0, 7, 5, 4]


class ToyStep:
    """A step in Python over the ring: env i's counter goes up by one per step (its row of
    `seen` records who stepped it); an env in `hold` waits for `release` first. Envs in
    `reset_next` are reported left to reset (their ids go through `restart`)."""

    def __init__(self, num_envs: int):
        self.count = np.zeros(num_envs, np.int64)
        self.stepped_by: list[tuple[int, str]] = []
        self.hold: set[int] = set()
        self.release = threading.Event()
        self.reset_next: set[int] = set()
        self.restarted: list[int] = []
        self.lock = threading.Lock()

    def _step(self, ctl, slots, rows, pending, num_slots, s) -> None:
        ids, left = part_ring.part_rows(slots, rows, pending, s, num_slots)
        n = 0
        for i in ids.tolist():
            if i in self.hold:
                self.release.wait()
            with self.lock:
                self.count[i] += 1
                self.stepped_by.append((i, threading.current_thread().name))
            if i in self.reset_next:
                left[n] = i
                n += 1
        part_ring.finish(slots, s, num_slots, n)

    def run(self, ctl, slots, rows, pending, num_slots, first, end, spins) -> bool:
        """The ring's loop as a family's compiled one runs it (a helper's with end < 0)."""
        for _ in range(20):
            if end >= 0 and part_ring.done(slots, first, end, num_slots):
                return True
            s = part_ring.claim(ctl)
            if s >= 0:
                self._step(ctl, slots, rows, pending, num_slots, s)
            elif end < 0 and ctl[part_ring.STOP]:
                return False
            else:
                time.sleep(1e-4)
        return end >= 0 and part_ring.done(slots, first, end, num_slots)

    def compiled(self) -> CompiledStep:
        return CompiledStep(self.run, (), self.restarted.extend)


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("-compiled")]


@pytest.mark.parametrize("part_size", [1, 3])
def test_every_part_is_stepped_once_in_order_across_the_wrap_and_resets_go_to_python(part_size):
    """Batches of 1-10 of 10 envs (scrambled ids, up to 10 in flight) wrap around the rows
    many times (a part of 3 that would run past the end is cut in two); each env is stepped
    once per send, and a batch waited for is done."""
    before = _helpers()
    toy = ToyStep(10)
    toy.reset_next = {3}
    ring = PartRing(10, 1, toy.compiled())
    ring.part_size = part_size
    rng = np.random.default_rng(0)
    sent = np.zeros(10, np.int64)
    idle = list(range(10))
    in_flight: list[tuple[list[int], tuple[int, int]]] = []
    for _ in range(300):
        if idle and (len(in_flight) < 2 or rng.random() < 0.5):
            k = int(rng.integers(1, len(idle) + 1))
            ids = [idle.pop(int(j)) for j in sorted(rng.choice(len(idle), k, replace=False), reverse=True)]
            seqs = ring.post(ids)
            assert -(-k // part_size) <= seqs[1] - seqs[0] <= -(-k // part_size) + 1
            in_flight.append((ids, seqs))
            sent[ids] += 1
        else:
            ids, (first, end) = in_flight.pop(0)
            ring.wait(first, end, None)
            assert part_ring.done(ring.slots, first, end, ring.num_slots)
            for s in range(first, end):  # a part's rows are contiguous, never past the end
                base = (s % ring.num_slots) * part_ring.SLOT
                assert ring.slots[base + part_ring.START] + ring.slots[base + part_ring.COUNT] <= 10
            ring.finish(first, end, toy.restarted.extend)
            assert all(toy.count[i] == sent[i] for i in ids)
            idle += ids
    for ids, (first, end) in in_flight:
        ring.wait(first, end, None)
        ring.finish(first, end, toy.restarted.extend)
    assert (toy.count == sent).all() and sent.sum() > 10 * 10  # the rows wrapped around 10 times and more
    assert toy.restarted == [3] * int(sent[3])
    ring.close()
    ring.close()  # again: nothing
    assert _helpers() == before
    with pytest.raises(RuntimeError, match="closed"):
        ring.check()


def test_an_idle_helper_sleeps_and_a_post_wakes_it():
    toy = ToyStep(4)
    ring = PartRing(4, 1, toy.compiled())
    deadline = time.monotonic() + 10
    while ring.ctl[part_ring.SLEEPING] != 1:  # nothing to claim: it goes to sleep
        assert time.monotonic() < deadline, "the helper never slept"
        time.sleep(1e-3)
    first, end = ring.post([0, 1])  # two parts: the caller only waits (a deadline), so the helper steps both
    ring.wait(first, end, time.monotonic() + 10)
    assert sorted(i for i, _ in toy.stepped_by) == [0, 1]
    assert {name for _, name in toy.stepped_by} == {"seedpool-native-lane-1-compiled"}
    ring.close()


def test_a_wait_with_a_deadline_times_out_and_the_parts_stay_in_flight():
    toy = ToyStep(4)
    toy.hold = {0}
    ring = PartRing(4, 1, toy.compiled())
    first, end = ring.post([0, 1])
    with pytest.raises(WaitTimeout):
        ring.wait(first, end, time.monotonic() + 0.05)
    toy.release.set()
    ring.wait(first, end, time.monotonic() + 10)
    assert toy.count[:2].tolist() == [1, 1]
    ring.close()


def test_ctrl_c_while_the_caller_waits_leaves_the_batch_in_flight():
    toy = ToyStep(4)
    toy.hold = {0}
    ring = PartRing(4, 1, toy.compiled())
    first, end = ring.post([0])  # one part, which the helper takes and holds
    deadline = time.monotonic() + 10
    while ring.ctl[part_ring.CLAIMED] < end:
        assert time.monotonic() < deadline, "the helper never took the part"
        time.sleep(1e-3)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIGINT ignored
    timer = threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            ring.wait(first, end, None)  # the caller's loop returns to Python now and then
    finally:
        timer.join()
    toy.release.set()
    ring.wait(first, end, None)
    assert toy.count[0] == 1
    ring.close()
