"""Dynamic batching: gather observation requests up to a maximum batch or a deadline.

A request is one source's batch of env rows (a whole `recv`, never one env step). The
batcher closes a batch when it holds `max_batch` rows, or when the oldest request in it
has waited `max_wait_s`, whichever comes first, so neither the envs nor the device idle.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np


class Reply:
    """Where the inference thread leaves the actions for one request (a one-shot future)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._actions: np.ndarray | None = None
        self._error: BaseException | None = None

    def set(self, actions: np.ndarray) -> None:
        """Deliver the actions and wake the waiting actor."""
        self._actions = actions
        self._event.set()

    def fail(self, error: BaseException) -> None:
        """Wake the waiting actor with an error instead of actions."""
        self._error = error
        self._event.set()

    def wait(self, timeout: float | None = None) -> np.ndarray:
        """Block until the actions arrive; raise the server's error, or TimeoutError."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"no actions from the inference server within {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._actions is not None
        return self._actions


@dataclass
class Request:
    """One source's observation batch, with the rewards and flags of its previous actions."""

    slots: np.ndarray
    """Global env slot of each row (source offset + the source's env_id), int64 [n]."""
    obs: np.ndarray
    """Observations [n, *obs_shape]."""
    rewards: np.ndarray
    """Reward of each env's previous action, float32 [n]."""
    terminated: np.ndarray
    """bool [n]."""
    truncated: np.ndarray
    """bool [n]."""
    restarted: np.ndarray
    """bool [n]: the env was reset after its worker died; its partial unroll is dropped."""
    active: np.ndarray | None = None
    """bool [n] or None: multi-agent rows whose next action is used (others are invalid steps)."""
    reply: Reply = field(default_factory=Reply)
    submitted_at: float = field(default_factory=time.perf_counter)

    def __len__(self) -> int:
        return len(self.slots)


class DynamicBatcher:
    """A thread-safe request queue whose consumer takes batches of up to `max_batch` rows."""

    def __init__(self, max_batch: int, max_wait_s: float) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: queue.Queue[Request] = queue.Queue()
        self._held: Request | None = None  # took it, but it did not fit the last batch

    def submit(self, request: Request) -> Reply:
        """Queue a request (any thread); returns the future for its actions."""
        if len(request) > self.max_batch:
            raise ValueError(
                f"a request of {len(request)} rows exceeds max_batch={self.max_batch}; "
                "make the source's batch no larger than the server's max batch"
            )
        self._queue.put(request)
        return request.reply

    def depth(self) -> int:
        """Requests waiting (approximate, for metrics)."""
        return self._queue.qsize() + (self._held is not None)

    def next_batch(self, idle_timeout: float) -> list[Request]:
        """Requests for one inference batch; [] if none came within `idle_timeout` seconds."""
        first = self._take(idle_timeout)
        if first is None:
            return []
        batch, rows = [first], len(first)
        deadline = first.submitted_at + self.max_wait_s
        while rows < self.max_batch:
            request = self._take(deadline - time.perf_counter())
            if request is None:
                break  # deadline: go with a partial batch
            if rows + len(request) > self.max_batch:
                self._held = request  # it opens the next batch
                break
            batch.append(request)
            rows += len(request)
        return batch

    def _take(self, timeout: float) -> Request | None:
        if self._held is not None:
            request, self._held = self._held, None
            return request
        try:
            if timeout <= 0:
                return self._queue.get_nowait()
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def fail_all(self, error: BaseException) -> None:
        """Wake every waiting actor with `error` (used when the server stops)."""
        while (request := self._take(0)) is not None:
            request.reply.fail(error)
