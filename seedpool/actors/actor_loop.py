"""Central-inference actors: loops that only step envs and stream observations to the inference server.

`ActorLoop` drives a source (e.g. a `PoolSource`: an engine pool in async mode)
in its own thread: recv a batch, submit it, wait for the actions, send them back. While
one half of a pool waits for actions the other half steps, so envs and inference overlap.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from seedpool.actors.pool_source import SourceRetired
from seedpool.actors.thread_loop import ThreadLoop
from seedpool.inference.batcher import Reply, Request
from seedpool.inference.server import InferenceServer
from seedpool.inference.sources import Source
from seedpool.records import EnvBatch, Episode


class EpisodeLog:
    """Finished episodes, appended by actor threads, drained by the trainer's loop."""

    def __init__(self) -> None:
        self._items: collections.deque[Episode] = collections.deque()
        self._lock = threading.Lock()
        self.env_steps = 0  # all actors' env steps so far; an episode is stamped with it

    def add(self, batch: EnvBatch, slot_offset: int = 0) -> None:
        """Count the batch's steps; record the episodes that ended (restarted envs' cut ones excluded)."""
        done = batch.episode_done & ~batch.restarted
        with self._lock:
            self.env_steps += len(batch.env_ids)
            for r, n, i in zip(batch.episode_returns[done], batch.episode_lengths[done], batch.env_ids[done]):
                self._items.append(Episode(self.env_steps, float(r), int(n), int(i) + slot_offset))

    def drain(self) -> list[Episode]:
        """Everything recorded since the last drain."""
        with self._lock:
            out = list(self._items)
            self._items.clear()
        return out


class ActorLoop(ThreadLoop):
    """Drives one source in a thread, feeding `server`; stops on `stop` or on an error."""

    def __init__(self, source: Source, server: InferenceServer, slot_offset: int,
                 episodes: EpisodeLog, stop: threading.Event, running: threading.Event | None = None) -> None:
        """``running``: while cleared, the loop holds before its next step (a paused run)."""
        super().__init__(self._run, f"actor@{slot_offset}", running)
        self.source = source
        self.server = server
        self.slot_offset = slot_offset
        self.episodes = episodes
        self.stop = stop
        self.error: BaseException | None = None
        self.env_steps = 0
        self._lock = threading.Lock()
        self._env_s = 0.0
        self._wait_s = 0.0

    def read_times(self) -> tuple[float, float]:
        """(seconds in the envs, seconds waiting for actions) since the last read."""
        with self._lock:
            out = (self._env_s, self._wait_s)
            self._env_s = self._wait_s = 0.0
        return out

    def _run(self) -> None:
        try:
            self.source.start()
            while not self.stop.is_set():
                if self.held():
                    continue
                if not self._step():
                    break
        except SourceRetired:
            pass
        except BaseException as e:  # noqa: BLE001 - the trainer reports it and stops the run
            if not self.stop.is_set():
                self.error = e
            self.stop.set()

    def _step(self) -> bool:
        batch, reply, t0, t1 = self._submit_next()
        while True:  # wake now and then to notice a stop while inference is stalled
            try:
                actions = reply.wait(timeout=0.5)
                break
            except TimeoutError:
                if self.stop.is_set():
                    return False
        self._finish(batch, actions, t0, t1)
        return True

    def step_serial(self) -> None:
        """One recv-infer-send round with the server run in this thread (the serial twin)."""
        batch, reply, t0, t1 = self._submit_next()
        self.server.run_once(idle_timeout=0)
        self._finish(batch, reply.wait(timeout=0), t0, t1)

    def _submit_next(self) -> tuple[EnvBatch, Reply, float, float]:
        t0 = time.perf_counter()
        batch = self.source.recv()
        t1 = time.perf_counter()
        self.episodes.add(batch, self.slot_offset)
        reply = self.server.submit(Request(
            slots=batch.env_ids + self.slot_offset, obs=batch.obs, rewards=batch.rewards,
            terminated=batch.terminated, truncated=batch.truncated, restarted=batch.restarted,
            active=batch.active,
        ))
        return batch, reply, t0, t1

    def _finish(self, batch: EnvBatch, actions: np.ndarray, t0: float, t1: float) -> None:
        t2 = time.perf_counter()
        self.source.send(actions, batch.env_ids)
        t3 = time.perf_counter()
        with self._lock:
            self._env_s += (t1 - t0) + (t3 - t2)
            self._wait_s += t2 - t1
        self.env_steps += len(batch.env_ids)
