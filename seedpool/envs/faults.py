"""What the executor does about failures: health checks, worker restarts, error reports.

`WorkerFaults` is a part of `Executor` (seedpool/envs/executor.py), split out by meaning:
it reads the executor's workers, in-flight envs, submit times and completion ring, and
replaces dead workers through the executor's `_spawn` and `_wait_ready`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from seedpool.envs.buffers import OK
from seedpool.envs.channel import OP_SHIFT, RECOVER
from seedpool.envs.errors import EnvStepError, StepTimeoutError, WorkerDiedError

if TYPE_CHECKING:
    from seedpool.envs.executor import _Worker

POLL_S = 0.05  # how often a blocked wait checks that workers are alive


class WorkerFaults:
    """Finds dead and hung workers, restarts them when asked to, and turns env failures
    into `EnvStepError`s carrying the worker's traceback."""

    def _maybe_health_check(self) -> None:
        """Every POLL_S, even when completions keep coming: a dead or hung worker must not
        go unnoticed just because the other workers can fill every batch."""
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + POLL_S
            self._health_check()

    def _health_check(self) -> None:
        self._check_workers()
        timeout = self.cfg.step_timeout
        if timeout is None:
            return
        now = time.monotonic()
        late = {k: ids for k, ids in self._stuck().items() if now - self.sent_at[ids].min() > timeout}
        if not late:
            return
        if not self.cfg.restart_workers:
            summary = "; ".join(f"worker {k} envs {ids}" for k, ids in late.items())
            raise StepTimeoutError(
                f"envs in flight for more than step_timeout={timeout:g} s: {summary}. Close the pool, "
                "or create it with on_worker_death='restart' to replace hung workers"
            )
        for k in late:
            handle = self.workers[k].handle
            if hasattr(handle, "kill"):
                handle.kill()
                handle.join(1.0)
        self._check_workers()

    def _check_workers(self) -> None:
        for w in self.workers:
            if w.alive():
                continue
            lost = w.env_ids
            if not self.cfg.restart_workers:
                raise WorkerDiedError(
                    f"worker {w.index} (envs {_span(lost)}) died with exit code {w.exitcode()}; "
                    "create the pool with on_worker_death='restart' to carry on instead"
                )
            self._restart(w)

    def _restart(self, dead: _Worker) -> None:
        """Replace a dead worker; its envs come back reset, reported truncated and RESTARTED."""
        self._drain_errors(dead)
        lost = self._stuck().get(dead.index, [])
        new = self._spawn(dead.index, dead.env_ids, restarted=True)
        self.workers[dead.index] = new
        self._wait_ready([dead.index])
        self.restart_count += 1
        if lost:
            self.sent_at[lost] = time.monotonic()
            new.link.commands.push([(RECOVER << OP_SHIFT) | i for i in lost])
            new.link.bell.ring()

    def _drain_errors(self, w: _Worker) -> None:
        if isinstance(w.errors_in, list):
            items, w.errors_in[:] = list(w.errors_in), []
        else:
            items = []
            try:
                while w.errors_in.poll():
                    items.append(w.errors_in.recv())
            except (EOFError, OSError):
                pass
        for i, op, tb in items:
            self.remote_errors[i] = (op, tb)

    def _error_for(self, i: int) -> EnvStepError:
        if i in self.local_errors:
            op, tb = self.local_errors.pop(i)
        else:
            w = self.workers[int(self.owner[i])]
            self._drain_errors(w)
            op, tb = self.remote_errors.pop(i, ("step", "(the worker sent no traceback)"))
        self.b.status[i] = OK
        return EnvStepError(i, op, tb)

    def _stuck(self) -> dict[int, list[int]]:
        """In-flight env ids per worker that have not published a result."""
        ring = self.done.ring
        published = {int(ring.data[j % ring.capacity]) for j in range(ring.tail, ring.head[0])}
        stuck: dict[int, list[int]] = {}
        for i in sorted(self.in_flight - published - set(self.leftover)):
            k = int(self.owner[i])
            if k >= 0:
                stuck.setdefault(k, []).append(i)
        return stuck


def _span(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else str(ids[0])
