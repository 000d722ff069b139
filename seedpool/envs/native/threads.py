"""Splitting a native family's batch over threads: its compiled step releases the GIL
(numba's `nogil`), so two threads step two halves of the envs at once.

`native_config` is `make`'s layout of a native pool, `choose_threads` its choice (by the
family's measured crossover, `split_from`); `ShardThreads` runs the shards: the caller steps
the first and helper threads the others.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

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
    fused = type(family).step_autoreset is not NativeEnv.step_autoreset
    threads, reason = choose_threads(family.split_from if fused else None, batch_size, available_cores(), num_workers)
    return ExecutorConfig("native", threads, family.num_envs, 0.0, 0.0, None, False, reason)


class ShardThreads:
    """Runs `fn(rows)` over `n` contiguous shards of `rows` at once: the calling thread takes
    the first shard, a helper thread each other one. The helpers sleep between calls."""

    def __init__(self, n: int):
        self.n = n
        self._go = [threading.Semaphore(0) for _ in range(n - 1)]
        self._done = threading.Semaphore(0)
        self._jobs: list[tuple[Callable[[np.ndarray], None], np.ndarray] | None] = [None] * (n - 1)
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._serve, args=(k,), daemon=True, name=f"seedpool-native-{k + 1}")
                         for k in range(n - 1)]
        for t in self._threads:
            t.start()

    def run(self, fn: Callable[[np.ndarray], None], rows: np.ndarray) -> None:
        """`fn` on every shard of `rows`; returns when all are done, raising the first error."""
        bounds = np.linspace(0, len(rows), self.n + 1).astype(np.int64).tolist()
        for k in range(self.n - 1):
            self._jobs[k] = (fn, rows[bounds[k + 1]:bounds[k + 2]])
            self._go[k].release()
        try:
            fn(rows[: bounds[1]])
        finally:
            for _ in range(self.n - 1):  # never return while a helper still writes the buffers
                self._done.acquire()
        if self._errors:
            error, self._errors = self._errors[0], []
            raise error

    def _serve(self, k: int) -> None:
        while True:
            self._go[k].acquire()
            job = self._jobs[k]
            if job is None:
                return
            self._jobs[k] = None
            try:
                job[0](job[1])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller of run()
                self._errors.append(exc)
            self._done.release()

    def close(self) -> None:
        """Stop the helper threads."""
        for k in range(self.n - 1):
            self._jobs[k] = None
            self._go[k].release()
        for t in self._threads:
            t.join()
