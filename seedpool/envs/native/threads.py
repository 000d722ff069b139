"""Splitting a native family's batch over threads: its step releases the GIL (numba's
`nogil`, MuJoCo's C), so two threads step two parts of the envs at once.

`native_config` is `make`'s layout of a native pool, `choose_threads` its choice (by the
family's measured crossover, `split_from`); `ShardThreads` runs the parts: the caller steps
the first and persistent helper threads the others. `SplitTimer` is the choice of a family
that splits by measuring (the MuJoCo families, mujoco_sim.py): threads or not, call by call.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from seedpool.envs.executor import ExecutorConfig
from seedpool.envs.native.base import NativeEnv
from seedpool.envs.spec import TaskSpec


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def choose_threads(split_from: int | None, batch_size: int, cores: int, num_workers: int | None) -> tuple[int, str]:
    """How many threads step a native family's batch, and why.

    `split_from`: the family's smallest batch from which two threads measured faster than
    one (None: its step cannot be split). `num_workers` caps the threads (None: one per
    core). Below `split_from`, handing half the batch to a thread costs more than it saves."""
    cap = cores if num_workers is None else min(num_workers, cores)
    if split_from is None:
        return 1, "one thread: the family's step cannot be split"
    if cap < 2:
        return 1, f"one thread: {cores} core(s)" + ("" if num_workers is None else f", num_workers={num_workers}")
    if batch_size < split_from:
        return 1, f"one thread: batch {batch_size} < {split_from}, where splitting starts to pay"
    return cap, f"{cap} threads: batch {batch_size} >= {split_from}, where splitting starts to pay"


def native_config(spec: TaskSpec, batch_size: int, num_workers: int | None) -> ExecutorConfig:
    """The layout of a native pool: how many threads step a batch (`num_workers` caps them),
    by the family's measured crossover (`choose_threads`)."""
    family = spec.native
    own = family.own_threads()
    if own is not None:  # the family splits its step itself (the engine's shard threads stay unused)
        lanes = family.background_lanes(batch_size) if batch_size < family.num_envs else None
        if lanes is None:
            return ExecutorConfig("native", own[0], family.num_envs, 0.0, 0.0, None, False, own[1])
        return ExecutorConfig("native", int(lanes[0].max()) + 1, family.num_envs, 0.0, 0.0, None, False,
                              lanes[1], lanes[0])
    fused = type(family).step_autoreset is not NativeEnv.step_autoreset
    threads, reason = choose_threads(family.split_from if fused else None, batch_size, available_cores(), num_workers)
    return ExecutorConfig("native", threads, family.num_envs, 0.0, 0.0, None, False, reason)


class ShardThreads:
    """Runs `fn` over parts of a batch at once: the calling thread takes the first part, a
    helper thread each other one. The helpers sleep between calls, each on a lock of its own
    (a bare lock: waking one costs a futex call, not a Condition's Python)."""

    def __init__(self, n: int):
        self.n = n
        self._go = [_locked() for _ in range(n - 1)]  # released: helper k has a job
        self._done = [_locked() for _ in range(n - 1)]  # released: helper k finished it
        self._jobs: list[tuple[Callable[[Any], None], Any] | None] = [None] * (n - 1)
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=_serve, args=(self._go[k], self._done[k], self._jobs, k, self._errors),
                                          daemon=True, name=f"seedpool-native-{k + 1}") for k in range(n - 1)]
        for t in self._threads:
            t.start()

    def run(self, fn: Callable[[np.ndarray], None], rows: np.ndarray) -> None:
        """`fn` on each of `n` contiguous shards of `rows`; returns when all are done, raising
        the first error."""
        bounds = np.linspace(0, len(rows), self.n + 1).astype(np.int64).tolist()
        self.run_parts(fn, [rows[bounds[k]:bounds[k + 1]] for k in range(self.n)])

    def run_parts(self, fn: Callable[[Any], None], parts: Sequence[Any]) -> None:
        """`fn(parts[k])` for every k (one part per thread, at most `n` parts) at once; returns
        when all are done, raising the first error."""
        if self._threads is None:
            raise RuntimeError("these shard threads are closed")
        if not 1 <= len(parts) <= self.n:
            raise ValueError(f"{self.n} threads run 1 to {self.n} parts at once, got {len(parts)}")
        helpers = len(parts) - 1
        for k in range(helpers):
            self._jobs[k] = (fn, parts[k + 1])
            self._go[k].release()
        try:
            fn(parts[0])
        finally:
            for k in range(helpers):  # never return while a helper still writes the buffers
                self._done[k].acquire()
        if self._errors:
            error = self._errors[0]
            self._errors.clear()
            raise error

    def close(self) -> None:
        """Stop the helper threads and wait for them to end (again: nothing)."""
        threads, self._threads = self._threads, None
        if threads is None:
            return
        for k in range(self.n - 1):
            self._jobs[k] = None
            self._go[k].release()
        for t in threads:
            t.join()


def _locked() -> Any:
    lock = threading.Lock()
    lock.acquire()
    return lock


def _serve(go: Any, done: Any, jobs: list, k: int, errors: list[BaseException]) -> None:
    """Helper k's loop: wait for a job, run it, say it is done; no job: end. It holds no
    reference to its ShardThreads, so dropping that object can close it (see SplitSteps)."""
    while True:
        go.acquire()
        job, jobs[k] = jobs[k], None
        if job is None:
            return
        fn, part = job
        job = None
        try:
            fn(part)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of run_parts()
            errors.append(exc)
        fn = part = None  # hold nothing of the caller's between jobs
        done.release()


class SplitTimer:
    """`auto`'s choice between stepping a batch's shards on threads or all in the calling
    thread, by timing both where the pool runs: whether a helper thread pays depends on an
    idle core, which other processes take and give back. Both ways give the same results, so
    it may switch at any call.

    What it times is the whole stretch from one call to the next, not the call alone, in
    windows long enough to hold the scheduler's turns: on a loaded machine one thread's calls
    are quick while it holds a core, and then it waits, so the median call can favour one
    thread where two are faster. Even whole windows can favour one thread: the calling thread
    sleeps through part of each split window, and the scheduler pays that back in the next
    unsplit one (the measurements are in docs/engine.md, "MuJoCo", and
    benchmarks/results/native_split.md). So it splits unless one thread measured faster by more than
    `margin` (a fraction), which still catches a helper that finds no core (another process's
    threads spinning on it) or a batch too small to share.

    It alternates `windows` windows of `window` seconds each way, keeps its choice for `hold`
    seconds, then measures again. Its clock is the pool's: a stretch over `idle` seconds is
    the caller's pause and counts for nothing."""

    def __init__(self, window: float = 0.25, windows: int = 2, hold: float = 20.0, margin: float = 0.2,
                 idle: float = 0.05, clock: Callable[[], float] = time.perf_counter):
        self.window, self.windows, self.hold, self.margin = window, windows, hold, margin
        self.idle, self.clock = idle, clock
        self.split = False  # the choice of the last call
        self.choices = [0, 0]  # calls that ran unsplit, split (for reports)
        self._seconds = [0.0, 0.0]  # timed stretches per way: unsplit, split
        self._envs = [0, 0]
        self._active = 0.0  # seconds of stepping so far, pauses left out
        self._hold_until = 0.0  # in active seconds
        self._window = -1  # the window being timed (-1: none, not measuring)
        self._window_start = 0.0
        self._last: tuple[float, int, bool] | None = None  # the last call: start, envs, split

    def choose(self, envs: int) -> bool:
        """Whether this call (of `envs` envs) splits; it times the stretch since the last one."""
        now = self.clock()
        if self._last is not None:
            start, n, split = self._last
            if now - start <= self.idle:
                self._active += now - start
                if self._window >= 0:
                    self._seconds[split] += now - start
                    self._envs[split] += n
        if self._active >= self._hold_until:
            if self._window < 0:  # start measuring: unsplit first
                self._window, self._window_start = 0, self._active
                self._seconds, self._envs = [0.0, 0.0], [0, 0]
            elif self._active - self._window_start >= self.window:
                self._window, self._window_start = self._window + 1, self._active
            if self._window == 2 * self.windows:
                self._keep()
            else:
                self.split = self._window % 2 == 1
        self._last = (now, envs, self.split)
        self.choices[self.split] += 1
        return self.split

    def _keep(self) -> None:
        """Measured: split unless one thread was faster by more than `margin`, for `hold` seconds."""
        unsplit, split = (self._seconds[k] / max(self._envs[k], 1) for k in (0, 1))
        self.split = not (self._envs[0] and self._envs[1] and unsplit < (1 - self.margin) * split)
        self._window, self._hold_until = -1, self._active + self.hold
