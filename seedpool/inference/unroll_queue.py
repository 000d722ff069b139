"""The bounded hand-off from the inference server to the learner, counted in unrolls.

The server puts batches of unrolls of any size; the learner takes exactly `n` at a time.
When the learner falls behind the queue fills and `put` blocks, which stalls inference
and then the actors: back-pressure bounds the policy lag instead of letting it grow.
"""

from __future__ import annotations

import collections
import threading

from seedpool.records import Unrolls, concat_unrolls, take_unrolls


class QueueClosed(Exception):
    """The queue was closed while a caller waited on it."""


class UnrollQueue:
    """A thread-safe FIFO of unrolls with a capacity of `max_unrolls`."""

    def __init__(self, max_unrolls: int) -> None:
        if max_unrolls < 1:
            raise ValueError(f"max_unrolls must be >= 1, got {max_unrolls}")
        self.max_unrolls = max_unrolls
        self._chunks: collections.deque[Unrolls] = collections.deque()
        self._count = 0
        self._closed = False
        self._cond = threading.Condition()

    def depth(self) -> int:
        """Unrolls waiting for the learner."""
        return self._count

    def close(self) -> None:
        """Wake every waiter with QueueClosed; later puts and takes raise it too."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def put(self, unrolls: Unrolls) -> None:
        """Append; blocks while the queue is full (a batch larger than the room still goes in)."""
        with self._cond:
            while self._count >= self.max_unrolls and not self._closed:
                self._cond.wait()
            if self._closed:
                raise QueueClosed("the unroll queue is closed")
            self._chunks.append(unrolls)
            self._count += len(unrolls)
            self._cond.notify_all()

    def take(self, n: int, timeout: float | None = None) -> Unrolls | None:
        """The oldest `n` unrolls as one batch, or None if they did not arrive within `timeout`."""
        if n > self.max_unrolls:
            raise ValueError(f"cannot take {n} unrolls from a queue holding at most {self.max_unrolls}")
        with self._cond:
            if not self._cond.wait_for(lambda: self._count >= n or self._closed, timeout):
                return None
            if self._closed:
                raise QueueClosed("the unroll queue is closed")
            parts, need = [], n
            while need:
                chunk = self._chunks.popleft()
                if len(chunk) > need:  # split: the rest stays at the front
                    self._chunks.appendleft(take_unrolls(chunk, slice(need, None)))
                    chunk = take_unrolls(chunk, slice(0, need))
                parts.append(chunk)
                need -= len(chunk)
            self._count -= n
            self._cond.notify_all()
        return parts[0] if len(parts) == 1 else concat_unrolls(parts)
