"""What the executor does about failures: health checks, worker restarts, error reports.

The executor holds one `FaultMonitor` and tells it everything it needs when it builds it:
the list of workers (shared: a restarted worker replaces its entry), when each env was last
submitted, how to find the envs a worker still owes, and how to replace a worker.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from seedpool.envs.errors import StepTimeoutError, WorkerDiedError
from seedpool.envs.handles import Worker

POLL_S = 0.05  # how often a blocked wait checks that workers are alive


class FaultMonitor:
    """Finds dead and hung workers, restarts them when asked to, and keeps the env error
    reports they send until the pool asks for one."""

    def __init__(
        self,
        workers: list[Worker],
        sent_at: np.ndarray,
        step_timeout: float | None,
        restart: bool,
        stuck: Callable[[], dict[int, list[int]]],
        respawn: Callable[[Worker, list[int]], None],
    ):
        self.workers = workers  # the executor's own list
        self.sent_at = sent_at  # per env: when it was last submitted to a worker
        self.step_timeout = step_timeout
        self.restart = restart
        self.stuck = stuck  # in-flight env ids per worker index that have no result yet
        self.respawn = respawn  # replace a dead worker; resubmit the given envs as RECOVER
        self.restart_count = 0
        self._next_check = 0.0
        self._reports: dict[int, tuple[str, str]] = {}  # env id -> (op, traceback)

    def maybe_check(self) -> None:
        """Every POLL_S, even when completions keep coming: a dead or hung worker must not
        go unnoticed just because the other workers can fill every batch."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + POLL_S
            self.check()

    def check(self) -> None:
        """Raise (or restart) for dead workers and for envs in flight past step_timeout."""
        self._check_alive()
        timeout = self.step_timeout
        if timeout is None:
            return
        now = time.monotonic()
        late = {k: ids for k, ids in self.stuck().items() if now - self.sent_at[ids].min() > timeout}
        if not late:
            return
        summary = "; ".join(f"worker {k} envs {ids}" for k, ids in late.items())
        if not self.restart:
            raise StepTimeoutError(
                f"envs in flight for more than step_timeout={timeout:g} s: {summary}. Close the pool, "
                "or create it with on_worker_death='restart' (backend='process') to replace hung workers"
            )
        for k in late:
            if not self.workers[k].handle.kill():
                raise StepTimeoutError(
                    f"envs in flight for more than step_timeout={timeout:g} s: {summary}. This worker "
                    "cannot be stopped and replaced (only backend='process' restarts workers)"
                )
        self._check_alive()

    def _check_alive(self) -> None:
        for w in self.workers:
            if w.handle.alive():
                continue
            if not self.restart:
                raise WorkerDiedError(
                    f"worker {w.index} (envs {_span(w.env_ids)}) died with exit code "
                    f"{w.handle.exitcode()}; create the pool with on_worker_death='restart' to carry on instead"
                )
            self._collect(w)
            lost = self.stuck().get(w.index, [])
            self.respawn(w, lost)
            self.restart_count += 1

    def take_report(self, w: Worker, env_id: int) -> tuple[str, str] | None:
        """The (op, traceback) that `w` reported for `env_id` (-1: its env factory), if any."""
        self._collect(w)
        return self._reports.pop(env_id, None)

    def keep(self, report: tuple[int, str, str]) -> None:
        """Hold an env error report that a per-env call's wait read off the report channel."""
        i, op, tb = report
        self._reports[i] = (op, tb)

    def _collect(self, w: Worker) -> None:
        for i, op, tb in w.handle.error_reports():
            self._reports[i] = (op, tb)


def _span(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else str(ids[0])
