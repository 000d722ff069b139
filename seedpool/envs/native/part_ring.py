"""Parts of batches that compiled code claims and steps, no Python between them.

Background lanes in Python (background.py) hand a part of a batch to a thread through a
queue: the thread wakes, takes the GIL, and runs a few Python calls before the compiled
step starts, while the caller, holding the GIL for its own Python, keeps it waiting. Here
the caller posts a batch's parts into a ring (int64 arrays), and a helper thread that runs a
compiled loop without the GIL claims and steps them as they come; the caller, in `recv`,
claims and steps parts the same way in one compiled call until its oldest batch is done.
This is EnvPool's design (threads taking work from one queue in C++) on numba: a family
provides that compiled loop for its step (`run`, e.g. mujoco_kernels.run_parts) over the
ring's functions below.

The ring: `ctl` holds the counters (each on its own cache line) `POSTED` (parts posted so
far; written by the caller alone) and `CLAIMED` (parts claimed; raised by compare-exchange
by whichever thread claims), `STOP`, and a `SLEEPING` flag per helper. Part s (its sequence
number) lives in slot s % P of `slots` (`START` and `COUNT` of its rows in `rows`, `DONE` = s
once stepped, `PENDING`: how many of its envs are left to reset, their ids at the same
places of `pending`). A part's rows are contiguous in `rows`, which is used as a circular
buffer: each env is in at most one part in flight, and parts are collected in the order
they were posted, so a new part never overwrites one in flight (P = rows = the pool's envs).

The caller spins while it waits for the helpers' last parts of its batch (a part's tail is
short), but after a short spin it sleeps in short turns, so that a long part does not keep a
core from the caller's other threads. A helper spins briefly when
there is nothing to claim, then sleeps on a semaphore; `post` wakes it when it finds its flag set (an exchange on each side makes
sure that either the helper sees the new part or the caller sees the flag).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, NamedTuple

import numpy as np
from numba import njit

from seedpool.envs.errors import WaitTimeout
from seedpool.envs.native.atomics import compare_exchange, exchange, fetch_add, load_acquire, pause, store_release

# `ctl`: counters a cache line (8 int64) apart; helper h's SLEEPING flag at SLEEPING + 8 h.
POSTED, CLAIMED, STOP, SLEEPING = 0, 8, 16, 24
# A slot: one cache line.
START, COUNT, DONE, PENDING, SLOT = 0, 1, 2, 3, 8
HELPER_SPIN_US = 50.0  # a helper with nothing to claim spins this long before it sleeps
CALLER_SPIN_US = 100.0  # `wait` spins this long for the helpers' parts, then sleeps in turns of
CALLER_SLEEP_S = 50e-6  # this (the core goes to other threads, a Ctrl-C is raised)


@njit(cache=True, nogil=True, inline="always")
def claim(ctl):  # pragma: no cover - compiled
    """The sequence number of the oldest part nobody claimed yet, now claimed; -1 if none."""
    c = load_acquire(ctl, CLAIMED)
    while c < load_acquire(ctl, POSTED):
        if compare_exchange(ctl, CLAIMED, c, c + 1):
            return c
        c = load_acquire(ctl, CLAIMED)
    return -1


@njit(cache=True, nogil=True, inline="always")
def part_rows(slots, rows, pending, s, num_slots):  # pragma: no cover - compiled
    """Part s's rows and the place for its envs left to reset."""
    base = (s % num_slots) * SLOT
    start, count = slots[base + START], slots[base + COUNT]
    return rows[start:start + count], pending[start:start + count]


@njit(cache=True, nogil=True, inline="always")
def finish(slots, s, num_slots, n_pending):  # pragma: no cover - compiled
    """Part s is stepped, `n_pending` of its envs left to reset (after every write of its step)."""
    base = (s % num_slots) * SLOT
    slots[base + PENDING] = n_pending
    store_release(slots, base + DONE, s)


@njit(cache=True, nogil=True, inline="always")
def all_done(slots, first, end, num_slots):  # pragma: no cover - compiled
    """True when parts first..end-1 are all stepped."""
    for s in range(first, end):
        if load_acquire(slots, (s % num_slots) * SLOT + DONE) != s:
            return False
    return True


@njit(cache=True, nogil=True)
def done(slots, first, end, num_slots):  # pragma: no cover - compiled
    """`all_done` for Python."""
    return all_done(slots, first, end, num_slots)


@njit(cache=True, nogil=True)
def post(ctl, slots, rows, ids, cuts, cursor, num_slots, helpers):  # pragma: no cover - compiled
    """Post parts `ids[cuts[j]:cuts[j + 1]]` (a part that would wrap around `rows` is cut in two);
    returns (first part, end, new cursor, helpers that were asleep: a bit each)."""
    first = ctl[POSTED]  # only the caller writes it
    s = first
    size = rows.size
    for j in range(cuts.size - 1):
        k = cuts[j]
        while k < cuts[j + 1]:
            n = min(cuts[j + 1] - k, size - cursor)
            base = (s % num_slots) * SLOT
            slots[base + START], slots[base + COUNT] = cursor, n
            for m in range(n):
                rows[cursor + m] = ids[k + m]
            cursor = (cursor + n) % size
            k += n
            s += 1
    fetch_add(ctl, POSTED, s - first)  # releases the slots and rows written above
    asleep = 0
    for h in range(helpers):
        if exchange(ctl, SLEEPING + 8 * h, 0) == 1:
            asleep |= 1 << h
    return first, s, cursor, asleep


@njit(cache=True, nogil=True)
def sleep_begin(ctl, h):  # pragma: no cover - compiled
    """Helper h is about to sleep: True if it must not (a part came, or the ring stops) and it
    took its flag back; False: sleep (if the caller already took the flag, its wake-up is
    on its way and ends the sleep at once)."""
    exchange(ctl, SLEEPING + 8 * h, 1)
    if load_acquire(ctl, CLAIMED) < load_acquire(ctl, POSTED) or load_acquire(ctl, STOP):
        return exchange(ctl, SLEEPING + 8 * h, 0) == 1
    return False


@njit(cache=True, nogil=True)
def spin(ctl, n):  # pragma: no cover - compiled
    """n rounds of a helper's idle loop (to measure how long one takes)."""
    total = 0
    for _ in range(n):
        total += load_acquire(ctl, CLAIMED)
        pause()
    return total


@njit(cache=True, nogil=True)
def collect_pending(slots, pending, first, end, num_slots, out):  # pragma: no cover - compiled
    """The envs of parts first..end-1 left to reset, into `out`; their number."""
    n = 0
    for s in range(first, end):
        base = (s % num_slots) * SLOT
        start = slots[base + START]
        for m in range(slots[base + PENDING]):
            out[n] = pending[start + m]
            n += 1
    return n


class CompiledStep(NamedTuple):
    """What a family gives the ring: its compiled loop and the loop's fixed arguments, and the
    Python half of its step (resets of the envs a part left pending)."""

    # run(ctl, slots, rows, pending, num_slots, first, end, spins, *args) -> bool: claim and
    # step parts; a helper's loop with end = -1 (until `spins` idle rounds, or STOP with
    # nothing left), the caller's until parts first..end-1 are done (True) or `spins` idle rounds
    run: Callable
    args: tuple
    restart: Callable[[np.ndarray], None]  # reset these envs (ids) and write their rows


_SPINS_PER_US: list[float] = []


def spins_per_us() -> float:
    """Rounds of the idle loop per microsecond on this machine (measured once)."""
    if not _SPINS_PER_US:
        ctl = np.zeros(SLEEPING + 8, np.int64)
        spin(ctl, 1000)
        t0 = time.perf_counter()
        spin(ctl, 200_000)
        _SPINS_PER_US.append(200_000 / max((time.perf_counter() - t0) * 1e6, 1.0))
    return _SPINS_PER_US[0]


class PartRing:
    """The ring of one pool (`num_envs` envs), `helpers` threads serving it with `step`'s
    compiled loop (the ring keeps the loop and its arguments, not `step.restart`: a family
    that owns a ring is not kept alive by it)."""

    def __init__(self, num_envs: int, helpers: int, step: CompiledStep):
        self.num_slots = num_envs
        self.ctl = np.zeros(SLEEPING + 8 * max(helpers, 1), np.int64)
        self.slots = np.zeros(num_envs * SLOT, np.int64)
        self.slots[DONE::SLOT] = -1
        self.rows = np.zeros(num_envs, np.int64)
        self.pending = np.zeros(num_envs, np.int64)
        self._out = np.empty(num_envs, np.int64)
        self.cursor = 0
        self._run, self._args = step.run, step.args
        self._cut: dict[tuple[int, int], np.ndarray] = {}
        rate = spins_per_us()
        self._caller_spins = int(CALLER_SPIN_US * rate)
        self._wakes = [threading.Semaphore(0) for _ in range(helpers)]
        self._pid = os.getpid()
        self._threads: list[threading.Thread] | None = []
        ring = (self.ctl, self.slots, self.rows, self.pending, self.num_slots)
        for h in range(helpers):
            thread = threading.Thread(target=_helper, args=(ring, h, int(HELPER_SPIN_US * rate), step.run,
                                                            step.args, self._wakes[h]),
                                      daemon=True, name=f"seedpool-native-lane-{h + 1}-compiled")
            thread.start()
            self._threads.append(thread)
        # Envs per part: one, as EnvPool's threads take single envs. Whichever thread is free
        # takes the next env, so the threads end a batch together (measured against a part per
        # thread in benchmarks/results/native_mujoco.md).
        self.part_size = 1

    def post(self, ids: list[int] | np.ndarray) -> tuple[int, int]:
        """Post the envs `ids` in parts of `part_size` envs; (first part, end)."""
        n = len(ids)
        cuts = self._cut.get((n, self.part_size))
        if cuts is None:
            cuts = self._cut[(n, self.part_size)] = np.append(np.arange(0, n, self.part_size), n).astype(np.int64)
        first, end, self.cursor, asleep = post(self.ctl, self.slots, self.rows, np.asarray(ids, np.int64), cuts,
                                                self.cursor, self.num_slots, len(self._wakes))
        while asleep:
            h = asleep.bit_length() - 1
            self._wakes[h].release()
            asleep &= ~(1 << h)
        return first, end

    def wait(self, first: int, end: int, deadline: float | None) -> None:
        """Return when parts first..end-1 are stepped: stepping parts here too (the oldest
        first) without a deadline; only waiting with one (WaitTimeout when it passes)."""
        if deadline is None:
            while not self._run(self.ctl, self.slots, self.rows, self.pending, self.num_slots, first, end,
                                self._caller_spins, *self._args):
                time.sleep(CALLER_SLEEP_S)  # a long part on a helper: give the core away meanwhile
            return
        while not done(self.slots, first, end, self.num_slots):
            if time.monotonic() >= deadline:
                raise WaitTimeout("envs did not finish in time")
            time.sleep(20e-6)

    def settle(self, first: int, end: int) -> None:
        """Return when parts first..end-1 are stepped, in one compiled call (not interrupted:
        a part takes a few milliseconds at most). After a Ctrl-C in `wait` of a batch that
        will not be collected: its rows must not be posted over while a helper steps them."""
        self._run(self.ctl, self.slots, self.rows, self.pending, self.num_slots, first, end, 1 << 62, *self._args)

    def finish(self, first: int, end: int, restart: Callable[[np.ndarray], None]) -> None:
        """Reset the envs parts first..end-1 (stepped) left pending: `restart` (the family's
        Python half of the step, `CompiledStep.restart`)."""
        n = collect_pending(self.slots, self.pending, first, end, self.num_slots, self._out)
        if n:
            restart(self._out[:n].copy())

    def close(self) -> None:
        """Let the helpers step what was posted, then stop them and wait (again: nothing)."""
        threads, self._threads = self._threads, None
        if threads is None:
            return
        exchange_stop(self.ctl)  # the helpers read it with acquire loads
        for h, wake in enumerate(self._wakes):
            if exchange_flag(self.ctl, h):
                wake.release()
        for t in threads:
            t.join()

    def check(self) -> None:
        """Raise if the ring's threads are closed, or were left behind by fork()."""
        check_threads(self._threads is not None, self._pid)


def check_threads(alive: bool, pid: int) -> None:
    """The error for background threads closed (not `alive`) or started by another process."""
    if not alive:
        raise RuntimeError("these background threads are closed")
    if os.getpid() != pid:
        raise RuntimeError("an async native pool's background threads do not survive fork(): "
                           "make the pool in the process that steps it")


@njit(cache=True, nogil=True)
def exchange_stop(ctl):  # pragma: no cover - compiled
    exchange(ctl, STOP, 1)


@njit(cache=True, nogil=True)
def exchange_flag(ctl, h):  # pragma: no cover - compiled
    """Take helper h's SLEEPING flag; True if it was set (the helper sleeps or is about to)."""
    return exchange(ctl, SLEEPING + 8 * h, 0) == 1


def _helper(ring: tuple, h: int, spins: int, run: Callable, args: tuple, wake: threading.Semaphore) -> None:
    """Helper h: the compiled loop while there are parts (and a little longer), else sleep."""
    ctl = ring[0]
    while True:
        run(*ring, 0, -1, spins, *args)
        if ctl[STOP]:
            return
        if not sleep_begin(ctl, h):
            wake.acquire()
