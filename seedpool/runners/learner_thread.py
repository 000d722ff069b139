"""The learner side of the central-inference system: take batches, update, publish parameters."""
from __future__ import annotations

import copy
import threading
import time

from seedpool.actors.thread_loop import ThreadLoop
from seedpool.algos.learner import Learner
from seedpool.inference.server import InferenceServer
from seedpool.inference.unroll_queue import QueueClosed, UnrollQueue


class LearnerThread(ThreadLoop):
    """Consumes `unrolls_per_batch` unrolls at a time, updates, publishes; stops the run on an error."""

    def __init__(self, learner: Learner, queue: UnrollQueue, server: InferenceServer,
                 unrolls_per_batch: int, stop: threading.Event, running: threading.Event | None = None) -> None:
        """``running``: while cleared, the thread holds before its next batch (a paused run)."""
        super().__init__(self._run, "learner", running)
        self.learner, self.queue, self.server = learner, queue, server
        self.unrolls_per_batch = unrolls_per_batch
        self.stop = stop
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # held during an update: checkpoints see whole versions
        self.metrics: dict[str, float] = {}
        self.wait_s = self.learn_s = 0.0

    def step(self, timeout: float | None) -> bool:
        """Train on one batch if one arrives within `timeout`; False if none did."""
        t0 = time.perf_counter()
        batch = self.queue.take(self.unrolls_per_batch, timeout)
        t1 = time.perf_counter()
        self.wait_s += t1 - t0
        if batch is None:
            return False
        with self.lock:
            metrics = self.learner.update(batch)
            self.server.publish(self.learner.model.state_dict(), self.learner.version)
        self.learn_s += time.perf_counter() - t1
        self.metrics = metrics
        return True

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.held():
                    continue
                self.step(timeout=0.2)
        except QueueClosed:
            pass
        except BaseException as e:  # noqa: BLE001 - reported by the runner, which stops acting
            self.error = e
            self.stop.set()

    def read_times(self) -> tuple[float, float]:
        """(seconds waiting for unrolls, seconds learning) since the last read."""
        out = (self.wait_s, self.learn_s)
        self.wait_s = self.learn_s = 0.0
        return out

    def state(self) -> dict:
        """A consistent copy of the learner's state (taken between two updates)."""
        with self.lock:
            return copy.deepcopy(self.learner.state_dict())
