"""Control messages between the pool and its workers: rings of env ids in shared memory.

Only small integers cross process boundaries. A ring is an int32 array plus a published
head counter; the consumer keeps its own tail. Wake-ups go through POSIX semaphores
(`multiprocessing.Semaphore`), which cost an atomic increment when nobody sleeps, and the
waiting side may spin briefly first when it has a core to itself: a blocking hand-off to
another core costs hundreds of times more than a spin (benchmarks/results/engine.md).

Memory order: a producer stores the entries, then the head; a consumer loads the head, then
the entries. Plain stores and loads keep that order on x86-64 (total store order), where
the engine is tested; weakly ordered CPUs (arm64, POWER) may reorder them, and Python has
no fences to forbid it. So worker processes are refused there (`ring_order_problem`), and
`auto` steps envs in the pool's own process. Thread workers stay correct anywhere while a
GIL serialises them: every ring access happens under the GIL, whose hand-offs are fences.
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import sys
import time

import numpy as np

from seedpool.envs.spaces import empty

# CPUs whose plain stores and loads are seen in program order by other cores (x86 TSO).
_ORDERED_CPUS = ("x86_64", "amd64", "i386", "i686", "x86")

# A command is (op << OP_SHIFT) | env_id.
OP_SHIFT = 24
ENV_MASK = (1 << OP_SHIFT) - 1
# RECOVER: a reset the engine makes after a fault; it reports the old episode truncated.
# OPTIONS: take the next object from the worker's payload pipe as the reset options of each of
# its envs' next RESET (it completes no env).
# CALL: take the next object from the payload pipe, a `(fn, args)` request, run `fn(env, *args)`
# on the env and send the outcome back on the report channel (it completes no env: calls.py).
STEP, RESET, CLOSE, RECOVER, OPTIONS, CALL = 0, 1, 2, 3, 4, 5



def take_pending(pending: list[tuple[int, list[int]]], most: int) -> tuple[int, list[int]]:
    """The oldest of the commands an executor runs itself, ``(op, env ids)``, cut to its first
    ``most`` envs; the rest of its envs stay at the front of ``pending``."""
    op, ids = pending[0]
    if most < len(ids):
        pending[0] = (op, ids[most:])
        return op, ids[:most]
    pending.pop(0)
    return op, ids


class Ring:
    """A ring of int32 entries with a shared head counter (`shared`: for forked workers)."""

    def __init__(self, capacity: int, shared: bool):
        self.capacity = capacity
        self.data = empty((capacity,), np.int32, shared)
        self._head = empty((1,), np.int64, shared)
        self.head = memoryview(self._head).cast("B").cast("q")  # fastest scalar access
        self.tail = 0  # consumer side only

    def push(self, values: list[int]) -> None:
        """Append entries (a single producer, or a caller holding the producers' lock)."""
        h = self.head[0]
        cap = self.capacity
        data = self.data
        for v in values:
            data[h % cap] = v
            h += 1
        self.head[0] = h  # publish after the entries (in this order on x86-64: see above)

    def available(self) -> int:
        """Entries published and not yet taken by the consumer."""
        return self.head[0] - self.tail

    def take(self, n: int) -> list[int]:
        """Remove and return the n oldest entries (n <= available())."""
        t, cap = self.tail, self.capacity
        start = t % cap
        if start + n <= cap:
            out = self.data[start : start + n].tolist()
        else:
            out = self.data[start:].tolist() + self.data[: n - (cap - start)].tolist()
        self.tail = t + n
        return out


def ring_order_problem(backend: str) -> str | None:
    """Why `backend`'s workers cannot use these rings on this machine, or None if they can."""
    machine = platform.machine()
    if backend not in ("process", "thread") or machine.lower() in _ORDERED_CPUS:
        return None
    if backend == "thread" and getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    instead = "'serial'" if backend == "thread" else "'serial' or 'thread'"
    return (f"backend={backend!r} is not supported on this {machine or 'unknown'} CPU: the engine's "
            f"shared-memory rings rely on x86-64 store ordering. Use backend={instead} "
            "(or 'auto', which picks serial here)")


class Doorbell:
    """A semaphore used as a wake-up hint; the ring's counters are the truth."""

    def __init__(self, ctx: mp.context.BaseContext | None):
        self.sem = ctx.Semaphore(0) if ctx is not None else _ThreadSemaphore()

    def ring(self) -> None:
        """Wake the waiting side (an atomic increment when nobody sleeps)."""
        self.sem.release()

    def wait(self, timeout: float) -> bool:
        """Sleep until rung or timeout."""
        return self.sem.acquire(timeout=timeout)


def _ThreadSemaphore():  # noqa: N802 - a factory that reads like a class
    import threading

    return threading.Semaphore(0)


def spin_until(predicate, seconds: float) -> bool:
    """Poll `predicate` for up to `seconds`; True as soon as it holds."""
    if seconds <= 0:
        return predicate()
    deadline = time.perf_counter() + seconds
    while True:
        if predicate():
            return True
        if time.perf_counter() > deadline:
            return False
