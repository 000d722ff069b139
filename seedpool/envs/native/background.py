"""Async native pools stepped in the background: a batch starts the moment it is sent.

Without this, an async native pool steps a batch only when the caller waits for it, so the
caller's own work between batches (its policy, the pool's validation and batching) and the
envs' physics take turns on one core. Here the envs are split into lanes: `submit` hands a
batch's part on lane k > 0 to that lane's persistent thread at once, and `wait(n)` steps
lane 0's parts in the calling thread (the oldest first, and newer ones while it waits for the
threads) and collects finished batches, oldest first. With 16 envs in batches of 8 on two
lanes, the caller steps one batch while the thread steps the other: both cores are busy, as
in EnvPool's async mode. (Lane 0 on a thread of its own as well measured slower where
three threads take turns on two cores: docs/engine.md, "MuJoCo".)

Shared lanes (`NativeEnv.background_shared`, the MuJoCo families): any thread may step any
env, so a batch is cut into one contiguous part per thread and every part goes into one
queue that the threads and the waiting caller all take from, oldest first. While the caller
turns a batch around (its policy, `send`, `recv`'s copies), the thread takes the parts of the
batches in flight, the caller's share included, instead of waiting for the caller: EnvPool's
way, whose threads take single envs from one queue. An env is never in two parts at once
(the pool sends an env again only after `recv` returned it), so its steps keep their order.

Compiled steps (`NativeEnv.compiled_step`, MuJoCo's fused step): a plain step of a shared-lane
family does not go into the Python queue at all but into a `PartRing` (`part_ring.py`), one
env per part in int64 arrays; a helper thread claims and steps its parts in one compiled loop
without the GIL, and `wait` steps the parts left over in one compiled call, then resets in
Python the envs the kernel left pending. Resets, steps with reset options and steps of envs
with a fault to report still take the Python queue.

A family opts in with `NativeEnv.background_lanes()`: each env's lane, lanes whose calls may
run at once because they touch disjoint state and release the GIL for most of their time
(blocks of envs, so that a batch of contiguous envs is one lane's call). Each lane runs its
parts of the batches in submission order, so an env's steps keep their order and no two
threads ever touch the same env or scratch buffer (each thread has its own). A batch is
finished when all of its parts are; batches come back in submission order, so the same seeds
and actions give the same batches and results as stepping them all in the calling thread.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
import time
import traceback
from typing import Callable

import numpy as np

from seedpool.envs.errors import WaitTimeout
from seedpool.envs.native.base import Rows, select_rows
from seedpool.envs.native.part_ring import CompiledStep, PartRing, check_threads

# run(op, rows, scratch of the lane): the executor's work on a part of a batch.
RunPart = Callable[[int, Rows, np.ndarray], None]


class Part:
    """One lane's share of a batch, and how it went (written by the lane's thread)."""

    __slots__ = ("op", "rows", "finished", "done", "error")

    def __init__(self, op: int, rows: Rows):
        self.op, self.rows = op, rows
        self.finished = False  # set before `done` is released: a finished part needs no wait
        self.done = threading.Lock()
        self.done.acquire()
        self.error: tuple[BaseException, str] | None = None  # (exception, traceback text)


class Job:
    """A submitted batch: its op and env ids (in the order given) and the lanes' parts, or
    (`parts` None) the first and end of its parts in the compiled ring."""

    __slots__ = ("op", "ids", "parts", "seqs", "error")

    def __init__(self, op: int, ids: list[int], parts: list[Part] | None, seqs: tuple[int, int] = (0, 0)):
        self.op, self.ids, self.parts, self.seqs = op, ids, parts, seqs
        self.error: tuple[BaseException, str] | None = None  # a ring job's resets raised


class BackgroundLanes:
    """Lane k steps the envs i with lane_of[i] == k of every submitted batch, in order: lane 0
    is the calling thread (in `wait`), every other lane a thread of its own that starts at
    once; `wait` hands finished batches back oldest first. `shared`: the lanes are only a
    count of threads: a batch's parts go to one queue, stepped by whichever thread is free
    (the caller while it waits). `compiled` (shared only): a family's compiled step, for a
    ring of parts (part_ring.py) that fused steps go to instead (`submit(fused=True)`)."""

    def __init__(self, run: RunPart, lane_of: np.ndarray, shared: bool = False,
                 compiled: CompiledStep | None = None):
        self.lane_of = np.asarray(lane_of, np.int64)
        self.num_envs, self.lanes = len(lane_of), int(self.lane_of.max()) + 1
        self.shared = shared
        lanes = self.lanes
        self.jobs: collections.deque[Job] = collections.deque()  # submitted, not yet collected
        self.ready: list[int] = []  # finished envs collected but not yet returned
        # shared: one queue that every thread takes parts from, the caller too (in `wait`)
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue()] * lanes if shared else \
            [queue.SimpleQueue() for _ in range(lanes)]
        self._inline: collections.deque[Part] = collections.deque()  # lane 0's parts not yet run
        self._scratch = np.empty(self.num_envs, np.int64)  # lane 0's
        self._run = run
        self._runs: dict[tuple[int, int], list[tuple[Rows, int]]] = {}  # parts of contiguous runs (lo, hi)
        self._pid = os.getpid()
        self.ring = PartRing(self.num_envs, lanes - 1, compiled) if shared and compiled is not None else None
        self._restart = compiled.restart if self.ring is not None else None
        self._threads: list[threading.Thread] | None = []
        for k in range(1, lanes):
            scratch = np.empty(self.num_envs, np.int64)  # the lane's own (the executor's `ended`)
            thread = threading.Thread(target=_serve, args=(run, self._queues[k], scratch), daemon=True,
                                      name=f"seedpool-native-lane-{k}")
            thread.start()
            self._threads.append(thread)

    def submit(self, op: int, ids: list[int], fused: bool = False) -> None:
        """Start stepping (op) the envs `ids` on their lanes now; `fused`: a step the family's
        fused step may take (into the compiled ring, if there is one)."""
        self._check()
        if fused and self.ring is not None:
            self.jobs.append(Job(op, ids, None, self.ring.post(ids)))
            return
        parts = []
        for rows, lane in (self._chunks(ids) if self.shared else self._split(ids)):
            part = Part(op, rows)
            parts.append(part)
            if lane:
                self._queues[lane].put(part)
            else:
                self._inline.append(part)
        self.jobs.append(Job(op, ids, parts))

    def wait(self, n: int, timeout: float | None, fault: Callable[[Job, tuple[BaseException, str]], Exception]
             ) -> list[int]:
        """The next `n` finished envs, oldest batch first (lane 0's parts stepped here). A
        batch whose step raised is handed to `fault`, whose error is raised; its other envs
        come back from later waits. With `timeout` (seconds), WaitTimeout when envs are still
        stepping on the threads (they stay in flight); lane 0's parts cannot time out. Shared,
        the caller steps parts no thread took yet while it waits, unless there is a timeout."""
        self._check()
        deadline = None if timeout is None else time.monotonic() + timeout
        ready = self.ready
        while len(ready) < n:
            if not self.jobs:
                raise RuntimeError("internal error: nothing in flight to wait for")
            job = self.jobs[0]
            if job.parts is None:
                self._wait_ring(job, deadline)
            for part in job.parts or ():
                while not part.finished:
                    if self._inline:  # lane 0's parts, oldest first (newer ones while the others step)
                        self._run_inline(self._inline.popleft())
                        continue
                    if self.shared and deadline is None:  # a part no thread took yet, oldest first
                        try:
                            self._run_inline(self._queues[0].get_nowait())
                            continue
                        except queue.Empty:
                            pass
                    left = -1 if deadline is None else max(deadline - time.monotonic(), 0.0)
                    if not part.done.acquire(timeout=left) and not part.finished:
                        raise WaitTimeout(f"{n - len(ready)} envs did not finish in time")
            self.jobs.popleft()
            error = job.error if job.parts is None else next((p.error for p in job.parts if p.error is not None), None)
            if error is not None:
                ready += job.ids[1:]
                raise fault(job, error)
            if not ready and len(job.ids) == n:  # every step of a send/recv loop
                return job.ids
            ready += job.ids
        got = ready[:n]
        del ready[:n]
        return got

    def _wait_ring(self, job: Job, deadline: float | None) -> None:
        """Wait for a ring job's parts (stepping them too, without a deadline), then reset its
        envs the fused step left pending. Their error, or an interrupt in them, fails the
        batch as a part's would (the interrupt is raised first, the error by the next wait)."""
        if job.error is not None:  # its resets were interrupted
            return
        first, end = job.seqs
        self.ring.wait(first, end, deadline)
        try:
            self.ring.finish(first, end, self._restart)
        except Exception as exc:
            job.error = (exc, traceback.format_exc())
        except BaseException as exc:
            job.error = (exc, traceback.format_exc())
            raise

    def _run_inline(self, part: Part) -> None:
        """Step one of lane 0's parts here. An interrupt (Ctrl-C) in it fails its batch, as an
        error would: the batch's envs restart."""
        try:
            self._run(part.op, part.rows, self._scratch)
        except Exception as exc:
            part.error = (exc, traceback.format_exc())
        except BaseException as exc:
            part.error = (exc, traceback.format_exc())
            part.finished = True
            raise
        part.finished = True

    def drop_ready(self) -> list[int]:
        """Forget finished envs not yet returned (after an error); their ids."""
        dropped, self.ready = self.ready, []
        return dropped

    def close(self) -> None:
        """Let the threads finish what was submitted, then stop them and wait (again: nothing)."""
        threads, self._threads = self._threads, None
        if threads is None:
            return
        if self.ring is not None:
            self.ring.close()
        for q in self._queues[1:]:
            q.put(None)
        for t in threads:
            t.join()

    def _check(self) -> None:
        check_threads(self._threads is not None, self._pid)

    def _chunks(self, ids: list[int]) -> list[tuple[Rows, int]]:
        """Shared: `ids` in one contiguous chunk per thread (the caller's included), all for
        the shared queue (lane 1)."""
        n, lo = len(ids), min(ids)
        contiguous = max(ids) - lo == n - 1  # distinct ids (the pool checks) spanning n rows
        if contiguous and (lo, lo + n - 1) in self._runs:  # the same few runs come back every step
            return self._runs[(lo, lo + n - 1)]
        k = min(self.lanes, n)
        cut = [n * j // k for j in range(k + 1)]
        chunks = [(select_rows(ids[cut[j]:cut[j + 1]], self.num_envs), 1) for j in range(k)]
        if contiguous:
            self._runs[(lo, lo + n - 1)] = chunks
        return chunks

    def _split(self, ids: list[int]) -> list[tuple[Rows, int]]:
        """Each lane's envs of `ids` (lanes without any left out): the rows to step (a slice
        for a contiguous run of envs, else an int64 array) and the lane."""
        if self.lanes == 1:
            return [(select_rows(ids, self.num_envs), 0)]
        lo, hi = min(ids), max(ids)
        if hi - lo == len(ids) - 1:  # distinct ids (the pool checks) spanning len(ids) rows
            runs = self._runs.get((lo, hi))
            if runs is None:  # the same few runs come back every step: work each out once
                runs = self._group(np.arange(lo, hi + 1))
                self._runs[(lo, hi)] = runs
            return runs
        return self._group(np.asarray(ids, dtype=np.int64))

    def _group(self, rows: np.ndarray) -> list[tuple[Rows, int]]:
        """`rows` by lane; a lane's rows that run contiguously as a slice."""
        lane_of = self.lane_of[rows]
        out: list[tuple[Rows, int]] = []
        for lane in range(self.lanes):
            mine = rows[lane_of == lane]
            if len(mine):
                out.append((select_rows(mine.tolist(), self.num_envs), lane))
        return out


def _serve(run: RunPart, jobs: queue.SimpleQueue, scratch: np.ndarray) -> None:
    """A lane's loop: step each part in turn, record its error, say it is finished; None: end.
    `run` holds the executor, so the lane ends only by `close()` (the pool's, or its finalizer)."""
    while True:
        part = jobs.get()
        if part is None:
            return
        try:
            run(part.op, part.rows, scratch)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of wait()
            part.error = (exc, traceback.format_exc())
        part.finished = True
        part.done.release()
        part = None
