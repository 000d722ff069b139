"""Runs env commands: some envs in this process, the rest in worker processes or threads.

`submit(ids, op)` starts envs; `wait(n)` returns n finished env ids in completion order.
With no workers this is the serial backend: envs are stepped inside `wait`, in the order
they were submitted. With workers, the pool's process may still own a share of the envs
and step them while the workers step theirs (cheap envs on few cores gain most from that:
one hand-off per batch instead of two; benchmarks/results/engine.md).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from seedpool.envs.buffers import FAILED, OK, Buffers
from seedpool.envs.calls import CallFn, raise_outcome
from seedpool.envs.channel import (
    CALL, CLOSE, OP_SHIFT, OPTIONS, RECOVER, STEP, Doorbell, Ring, spin_until, take_pending,
)
from seedpool.envs.errors import EnvFailure, EnvStepError, StepTimeoutError, WaitTimeout, WorkerDiedError, env_error
from seedpool.envs.faults import POLL_S, FaultMonitor
from seedpool.envs.handles import ProcessHandle, ThreadHandle, Worker
from seedpool.envs.runner import EnvRunner
from seedpool.envs.spec import TaskSpec
from seedpool.envs.worker import Completions, WorkerLink, process_main, serve


@dataclass
class ExecutorConfig:
    """How envs are spread over the pool's process and its workers."""

    kind: str  # "serial" | "process" | "thread"
    num_workers: int
    local_envs: int  # envs stepped by the pool's own process (all of them for serial)
    worker_spin_s: float  # how long an idle worker polls before sleeping
    main_spin_s: float  # how long the pool polls for completions before sleeping
    step_timeout: float | None
    restart_workers: bool
    reason: str = ""  # why backend="auto" chose this layout ("" when the caller chose it)
    background: Any = None  # native async pools: each env's background lane (None: no background threads)


class Executor:
    """Submits env commands and collects completions, across this process and workers."""

    def __init__(self, spec: TaskSpec, num_envs: int, buffers: Buffers, autoreset: str, cfg: ExecutorConfig):
        self.cfg = cfg
        self.spec = spec
        self.num_envs = num_envs
        self.b = buffers
        self.autoreset = autoreset
        n_remote = num_envs - cfg.local_envs
        local_ids = list(range(n_remote, num_envs))
        reuse = {local_ids[0]: spec.probe} if local_ids and spec.probe is not None else None
        if reuse is None and spec.probe is not None:
            spec.probe.close()  # workers build their own; do not fork a live emulator
        spec.probe = None
        self.local = EnvRunner(spec, local_ids, num_envs, buffers, autoreset, envs=reuse) if local_ids else None
        self.local_pending: list[int] = []
        self.local_errors: dict[int, tuple[str, str, Exception]] = {}
        self.owner = np.full(num_envs, -1, np.int32)  # worker index per env, -1 = local
        self.workers: list[Worker] = []
        self.leftover: list[int] = []  # completions taken but not yet returned (after an error)
        self.in_flight: set[int] = set()
        self.sent_at = np.zeros(num_envs)  # when each env was last submitted to a worker
        self.faults = FaultMonitor(self.workers, self.sent_at, cfg.step_timeout, cfg.restart_workers,
                                   stuck=self._owed, respawn=self._respawn)
        self.ctx = mp.get_context("fork") if cfg.kind == "process" else None
        if cfg.num_workers:
            self._start_workers(n_remote)

    # -- start-up -------------------------------------------------------------------------
    def _start_workers(self, n_remote: int) -> None:
        ctx, cfg = self.ctx, self.cfg
        shared = ctx is not None
        self.done = Completions(
            ring=Ring(self.num_envs + 1, shared),
            lock=ctx.Lock() if ctx else threading.Lock(),
            bell=Doorbell(ctx),
            target=memoryview(np.zeros(1, np.int64) if not shared else _shared_i64()).cast("B").cast("q"),
        )
        self.done.target[0] = 1 << 62
        self.ready = _shared_i8(cfg.num_workers) if shared else np.zeros(cfg.num_workers, np.int8)
        bounds = np.linspace(0, n_remote, cfg.num_workers + 1).astype(int)
        try:
            for k in range(cfg.num_workers):
                ids = list(range(bounds[k], bounds[k + 1]))
                self.owner[ids] = k
                self.workers.append(self._spawn(k, ids, restarted=False))
        except BaseException:  # a thread worker's env factory raised here: stop the others
            self.close()
            raise
        self._wait_ready(list(range(cfg.num_workers)))

    def _spawn(self, k: int, ids: list[int], restarted: bool) -> Worker:
        """Start worker k for env ids: a forked process, or a thread of this process."""
        ctx, cfg = self.ctx, self.cfg
        self.ready[k] = 0
        spec, n, b, mode = self.spec, self.num_envs, self.b, self.autoreset

        def make_runner() -> EnvRunner:
            return EnvRunner(spec, ids, n, b, mode, restarted=restarted)

        if ctx is not None:
            errors_in, errors_out = ctx.Pipe(duplex=False)
            payloads_in, payloads_out = ctx.Pipe(duplex=False)
            link = WorkerLink(Ring(len(ids) + 3, True), Doorbell(ctx), errors_out.send, cfg.worker_spin_s,
                              payloads_in.recv)
            process = ctx.Process(
                target=process_main,
                args=(make_runner, link, self.done, self.ready, k, os.getpid(), _on_main_thread()),
                name=f"seedpool-worker-{k}",
                daemon=True,
            )
            process.start()
            errors_out.close()  # the child holds the write end
            payloads_in.close()  # and the read end of its payloads
            return Worker(k, ids, link, ProcessHandle(process, errors_in, payloads_out))
        errors: queue.SimpleQueue = queue.SimpleQueue()
        payloads: queue.SimpleQueue = queue.SimpleQueue()
        link = WorkerLink(Ring(len(ids) + 3, False), Doorbell(None), errors.put, cfg.worker_spin_s, payloads.get)
        runner = make_runner()
        self.ready[k] = 1
        thread = threading.Thread(target=serve, args=(runner, link, self.done, None),
                                  name=f"seedpool-worker-{k}", daemon=True)
        thread.start()
        return Worker(k, ids, link, ThreadHandle(thread, errors, payloads))

    def _respawn(self, dead: Worker, lost: list[int]) -> None:
        """Replace a dead worker; the envs it owed a result come back reset, reported
        truncated and RESTARTED (the others on their next step)."""
        new = self._spawn(dead.index, dead.env_ids, restarted=True)
        self.workers[dead.index] = new
        self._wait_ready([dead.index])
        if lost:
            self.sent_at[lost] = time.monotonic()
            new.link.commands.push([(RECOVER << OP_SHIFT) | i for i in lost])
            new.link.bell.ring()

    def _wait_ready(self, indices: list[int], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.ready[k] for k in indices):
            for k in indices:
                w = self.workers[k]
                if not self.ready[k] and not w.handle.alive():
                    err = self.faults.take_report(w, -1)
                    detail = f"\n{err[1]}" if err else f" (exit code {w.handle.exitcode()})"
                    self.close()
                    raise WorkerDiedError(f"worker {k} failed while creating its envs{detail}")
            if time.monotonic() > deadline:
                self.close()
                raise StepTimeoutError(f"workers did not start within {timeout:.0f} s")
            self.done.bell.wait(POLL_S)

    # -- commands -------------------------------------------------------------------------
    def submit(self, ids: list[int], op: int) -> None:
        """Start env ids with op STEP or RESET (actions/seeds are already in the buffers)."""
        if not self.workers:
            self.local_pending.append((op, ids))
            return
        self.in_flight.update(ids)
        self.sent_at[ids] = time.monotonic()
        code = op << OP_SHIFT
        owner = self.owner
        per_worker: dict[int, list[int]] = {}
        mine: list[int] = []
        for i in ids:
            k = owner[i]
            if k < 0:
                mine.append(i)
            else:
                per_worker.setdefault(int(k), []).append(code | i)
        for k, entries in per_worker.items():
            link = self.workers[k].link
            link.commands.push(entries)
            link.bell.ring()
        if mine:
            self.local_pending.append((op, mine))

    def set_reset_options(self, options: Any, ids: list[int]) -> None:
        """Make `options` the reset options of the next RESET of envs `ids` (submit those next)."""
        targets = set(ids)
        if self.local is not None:
            self.local.reset_options.update((i, options) for i in self.local.env_ids if i in targets)
        for w in self.workers:
            mine = [i for i in w.env_ids if i in targets]
            if not mine:
                continue
            try:
                data = pickle.dumps((options, mine)) if self.ctx is not None else None
            except Exception as exc:  # noqa: BLE001 - any pickling failure means the same to the user
                raise TypeError(f"reset options must be picklable to reach worker processes: {exc}") from exc
            # The command goes first: the worker then reads the payload, so a payload larger
            # than the pipe's buffer cannot block us while the worker waits for a command.
            w.link.commands.push([OPTIONS << OP_SHIFT])
            w.link.bell.ring()
            w.handle.send_payload((options, mine), data)

    def call(self, i: int, fn: CallFn, args: tuple) -> Any:
        """Run `fn(env, *args)` on env i where it lives and return the result (see calls.py);
        only while no env is in flight. The env's exception is raised again as its own type."""
        k = int(self.owner[i])
        if k < 0:
            return fn(self.local.envs[i], *args)
        w = self.workers[k]
        try:
            data = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL) if self.ctx is not None else None
        except Exception as exc:  # noqa: BLE001 - any pickling failure means the same to the user
            raise TypeError(f"{getattr(fn, '__name__', fn)}{args!r} cannot be pickled to reach env {i} in its "
                            f"worker process: {exc}") from exc
        # The command first: the worker then reads the payload (as for reset options).
        w.link.commands.push([(CALL << OP_SHIFT) | i])
        w.link.bell.ring()
        w.handle.send_payload((fn, args), data)
        started = time.monotonic()
        while True:
            report = w.handle.next_report(POLL_S)
            if report is not None:
                if report[1] == "call" and report[0] == i:
                    return raise_outcome(i, report[2])
                self.faults.keep(report)  # an env error of an earlier step: keep it for wait()
                continue
            self.faults.check()  # raises for a dead worker (or replaces it: the call is lost)
            if self.workers[k] is not w:
                raise WorkerDiedError(f"worker {k} died during a call to env {i}; it was replaced")
            limit = self.cfg.step_timeout
            if limit is not None and time.monotonic() - started > limit:
                raise StepTimeoutError(f"env {i} did not answer a call within step_timeout={limit:g} s")

    def wait(self, n: int, timeout: float | None = None) -> list[int]:
        """Return n finished env ids, oldest first; raise if an env failed or a worker died.
        With `timeout`, WaitTimeout after that many seconds of waiting on workers (envs
        stepped in this process cannot be interrupted); nothing is lost, the envs stay in flight."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.leftover:
            got = self.leftover[:n]
            self.leftover = self.leftover[n:]
            if len(got) < n:
                try:
                    got += self._collect(n - len(got), deadline)
                except WaitTimeout:
                    self.leftover = got + self.leftover
                    raise
        else:
            got = self._collect(n, deadline)
        if self.workers:
            self.in_flight.difference_update(got)
            self.faults.maybe_check()
        if self.local_errors or self.workers and self.b.status[got].any():
            failed = [i for i in got if self.b.status[i] == FAILED]
        else:
            failed = None
        if failed:
            self.leftover = [i for i in got if i != failed[0]] + self.leftover
            self.in_flight.update(self.leftover)
            raise self._error_for(failed[0])
        return got

    def drop_leftover(self) -> list[int]:
        """Forget completions kept back after an error (sync mode drops the failed batch)."""
        dropped, self.leftover = self.leftover, []
        self.in_flight.difference_update(dropped)
        return dropped

    def _collect(self, n: int, deadline: float | None = None) -> list[int]:
        out: list[int] = []
        ring = self.done.ring if self.workers else None
        pending = self.local_pending
        while True:
            avail = ring.available() if ring is not None else 0
            # Step our own envs while the workers' completions do not make up the batch.
            while pending and avail + len(out) < n:
                op, ids = take_pending(pending, n - avail - len(out))
                self._run_local(op, ids)
                out += ids
                if ring is not None:
                    avail = ring.available()
            if avail + len(out) >= n:
                if len(out) < n:
                    out = ring.take(n - len(out)) + out  # the workers' finished first
                return out
            if ring is None:
                raise RuntimeError("internal error: nothing in flight to wait for")
            if not self._block_until(ring.tail + n - len(out), deadline):
                self.leftover = out + self.leftover  # finished here: returned by a later wait
                raise WaitTimeout(f"{n - len(out)} envs did not finish in time")

    def _run_local(self, op: int, ids: list[int]) -> None:
        """Run envs in this process; an env that raises is recorded and the rest still run."""
        status, local = self.b.status, self.local
        while ids:
            i = ids[0]
            try:
                if op == STEP:
                    local.step_all(ids)
                else:
                    for i in ids:
                        status[i] = local.run(op, i)
                return
            except Exception as exc:  # noqa: BLE001 - surfaced by wait()
                i = getattr(exc, "env_id", i)
                status[i] = FAILED
                local.mark_for_reset(i)
                self.local_errors[i] = ("step" if op == STEP else "reset", traceback.format_exc(), exc)
                ids = ids[ids.index(i) + 1 :]

    def _block_until(self, head: int, deadline: float | None = None) -> bool:
        """Sleep until the completion ring's head reaches `head`, watching the workers;
        False if `deadline` (a time.monotonic() value) came first."""
        ring, done = self.done.ring, self.done
        if self.cfg.main_spin_s and spin_until(lambda: ring.head[0] >= head, self.cfg.main_spin_s):
            return True
        done.target[0] = head
        try:
            while True:
                with done.lock:  # a fence: our target store is visible before we read head
                    h = ring.head[0]
                if h >= head:
                    return True
                wait_s = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if wait_s <= 0:
                    return False
                if not done.bell.wait(wait_s):
                    self.faults.check()
        finally:
            done.target[0] = 1 << 62

    # -- faults ---------------------------------------------------------------------------
    @property
    def restart_count(self) -> int:
        """How many dead workers were replaced."""
        return self.faults.restart_count

    def _error_for(self, i: int) -> EnvStepError:
        exc = None
        if i in self.local_errors:
            op, tb, exc = self.local_errors.pop(i)
        else:
            w = self.workers[int(self.owner[i])]
            op, tb = self.faults.take_report(w, i) or ("step", "(the worker sent no traceback)")
            if isinstance(tb, EnvFailure):
                tb, exc = tb.traceback, tb.exception_object()
        self.b.status[i] = OK
        return env_error(i, op, tb, exc)

    def _owed(self) -> dict[int, list[int]]:
        """In-flight env ids per worker that have not published a result."""
        ring = self.done.ring
        published = {int(ring.data[j % ring.capacity]) for j in range(ring.tail, ring.head[0])}
        owed: dict[int, list[int]] = {}
        for i in sorted(self.in_flight - published - set(self.leftover)):
            k = int(self.owner[i])
            if k >= 0:
                owed.setdefault(k, []).append(i)
        return owed

    # -- shutdown -------------------------------------------------------------------------
    def close(self, timeout: float = 2.0) -> None:
        """Stop workers (politely, then by force where possible) and close every env."""
        for w in self.workers:
            try:
                w.link.commands.push([CLOSE << OP_SHIFT])
                w.link.bell.ring()
            except Exception:  # noqa: BLE001
                pass
        deadline = time.monotonic() + timeout
        for w in self.workers:
            w.handle.join(max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.handle.alive():
                w.handle.kill()  # a thread cannot be: it is a daemon, left to finish on its own
            w.handle.release()
        self.workers.clear()  # in place: the fault monitor holds the same list
        if self.local is not None:
            self.local.close()
            self.local = None


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _shared_i64():
    from seedpool.envs.spaces import empty

    return empty((1,), np.int64, True)


def _shared_i8(n: int):
    from seedpool.envs.spaces import empty

    return empty((n,), np.int8, True)
