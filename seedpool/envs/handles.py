"""The pool's handles on its workers: one small interface, a process kind and a thread kind.

The executor and its fault monitor hold workers through `WorkerHandle` only: they never ask
which kind a worker is. What differs is said by the handle: a process can be killed and has
a pid and an exit code; a thread can be neither killed nor replaced, so `kill` answers False.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from seedpool.envs.worker import WorkerLink

ErrorReport = tuple[int, str, Any]  # (env id or -1 for the factory, op name, traceback or call Outcome)


class WorkerHandle(Protocol):
    """What the pool may do with a worker, whatever runs it."""

    pid: int | None  # the OS process id; None for a thread

    def alive(self) -> bool:
        """Whether the worker still runs."""

    def kill(self) -> bool:
        """Stop the worker by force and reap it; False where that is impossible (a thread)."""

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the worker to end."""

    def exitcode(self) -> int | None:
        """How a dead worker ended (None: unknown or still running)."""

    def error_reports(self) -> list[ErrorReport]:
        """Take the env error reports the worker sent since the last call."""

    def send_payload(self, obj: Any, data: bytes | None) -> None:
        """Hand the worker one Python object (`data`: its pickle, for a process)."""

    def next_report(self, timeout: float) -> tuple[int, str, Any] | None:
        """The worker's next report, waiting up to `timeout` seconds (None if none came)."""

    def release(self) -> None:
        """Close the pool's ends of the worker's channels (after it ended)."""


class ProcessHandle:
    """A forked worker process, its error-report pipe and its payload pipe."""

    def __init__(self, process: BaseProcess, errors_in: Connection, payloads_out: Connection):
        self.process = process
        self.pid: int | None = process.pid
        self._errors_in = errors_in
        self._payloads_out = payloads_out

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.is_alive()

    def kill(self) -> bool:
        """SIGKILL the process and reap it."""
        self.process.kill()
        self.process.join(1.0)
        return True

    def join(self, timeout: float) -> None:
        """Wait for the process to exit."""
        self.process.join(timeout)

    def exitcode(self) -> int | None:
        """The process's exit code (negative: the signal that ended it)."""
        return self.process.exitcode

    def error_reports(self) -> list[ErrorReport]:
        """Read every report waiting in the pipe (none once the pipe is broken)."""
        items = []
        try:
            while self._errors_in.poll():
                items.append(self._errors_in.recv())
        except (EOFError, OSError):
            pass
        return items

    def send_payload(self, obj: Any, data: bytes | None) -> None:
        """Write the pickled object to the payload pipe."""
        self._payloads_out.send_bytes(data)

    def next_report(self, timeout: float) -> tuple[int, str, Any] | None:
        """Read the next report from the pipe, waiting up to `timeout` (None once it is broken)."""
        try:
            return self._errors_in.recv() if self._errors_in.poll(timeout) else None
        except (EOFError, OSError):
            return None

    def release(self) -> None:
        """Close both pipe ends."""
        self._errors_in.close()
        self._payloads_out.close()


class ThreadHandle:
    """A worker thread of the pool's own process; it shares the reports and payloads queues."""

    pid: int | None = None

    def __init__(self, thread: threading.Thread, errors: queue.SimpleQueue, payloads: queue.SimpleQueue):
        self.thread = thread
        self._errors = errors
        self._payloads = payloads

    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self.thread.is_alive()

    def kill(self) -> bool:
        """A thread cannot be stopped from outside."""
        return False

    def join(self, timeout: float) -> None:
        """Wait for the thread to return."""
        self.thread.join(timeout)

    def exitcode(self) -> int | None:
        """Threads have none."""
        return None

    def error_reports(self) -> list[ErrorReport]:
        """Take every report queued so far."""
        items = []
        while True:
            try:
                items.append(self._errors.get_nowait())
            except queue.Empty:
                return items

    def send_payload(self, obj: Any, data: bytes | None) -> None:
        """Queue the object itself (the thread waits on the queue for it)."""
        self._payloads.put(obj)

    def next_report(self, timeout: float) -> tuple[int, str, Any] | None:
        """Take the next queued report, waiting up to `timeout`."""
        try:
            return self._errors.get(timeout=timeout)
        except queue.Empty:
            return None

    def release(self) -> None:
        """Nothing to close."""


@dataclass
class Worker:
    """One worker as the executor sees it: its envs, its command link and its handle."""

    index: int
    env_ids: list[int]
    link: WorkerLink
    handle: WorkerHandle
