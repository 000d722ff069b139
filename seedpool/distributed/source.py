"""The driver's side of an actor group: a Ray actor seen as an inference `Source`.

Each message carries a whole batch. Two calls are in flight per group: while the inference
server acts on one batch, the group steps the envs whose actions it already has, so its
envs do not wait for the network. A group whose process or node dies is restarted by Ray
(`max_restarts`); its envs start afresh and the first batch of each is flagged
`restarted`, so the server drops their partial unrolls.
"""
from __future__ import annotations

import collections
import pickle
import threading
import time
from typing import Any

import numpy as np

from seedpool.actors.pool_source import SourceRetired
from seedpool.distributed.config import RayConfig, require_ray
from seedpool.distributed.group import GroupInfo
from seedpool.records import EnvBatch

ray = require_ray()


class GroupLostError(RuntimeError):
    """The last actor group of a run died and did not come back: nothing is left to act."""


def note(message: str) -> None:
    """A line for the user (the progress display keeps it above its bar)."""
    print(f"[seedpool] {message}", flush=True)


class Roster:
    """The groups of one run: how many still act, and the driver connection they share."""

    def __init__(self, disconnect: bool) -> None:
        self.live = 0
        self.open = 0
        self._disconnect = disconnect  # this run connected to the cluster: it disconnects too
        self._lock = threading.Lock()

    def join(self) -> None:
        """One more group acts (and holds the connection)."""
        with self._lock:
            self.live += 1
            self.open += 1

    def lose(self) -> int:
        """A group is gone for good; returns how many still act."""
        with self._lock:
            self.live -= 1
            return self.live

    def release(self) -> None:
        """A group was closed; the last one ends this driver's connection (never the cluster)."""
        with self._lock:
            self.open -= 1
            last = self.open == 0
        if last and self._disconnect and ray.is_initialized():
            ray.shutdown()


class RayGroupSource:
    """One actor group (a Ray actor holding one engine pool) as an inference `Source`."""

    def __init__(self, handle: Any, info: GroupInfo, name: str, cfg: RayConfig, roster: Roster) -> None:
        self.handle, self.name, self.cfg, self.roster = handle, name, cfg, roster
        self.num_envs, self.batch_size = info.num_envs, info.batch_size
        self.single_observation_space = info.observation_space
        self.single_action_space = info.action_space
        self.node_id = info.node_id
        self.group_restarts = 0
        self.last_restart_s = 0.0
        """Seconds the last restart took, from the driver seeing the group dead to its new life ready."""
        self._workers_before = 0  # env workers the group's earlier lives replaced
        self._workers = 0
        self._pending: collections.deque = collections.deque()
        self._cut = np.zeros(self.num_envs, bool)  # envs whose next batch is flagged restarted
        self._closed = False
        roster.join()

    def start(self) -> None:
        """Reset every env and put two batches in flight."""
        self.handle.start.remote()
        self._pending.extend([self.handle.recv.remote(), self.handle.recv.remote()])

    def recv(self) -> EnvBatch:
        """The next batch; a dead group is waited for (restarted by Ray), a hung one killed first."""
        while True:
            try:
                message = ray.get(self._pending[0], timeout=self.cfg.health_check_timeout_s)
                break
            except ray.exceptions.GetTimeoutError:
                ray.kill(self.handle, no_restart=False)  # Ray restarts it
                self._come_back(f"it answered nothing for {self.cfg.health_check_timeout_s:.0f} s and was killed")
            except ray.exceptions.RayActorError as err:
                self._come_back(type(err).__name__)
        self._pending.popleft()
        batch, self._workers = pickle.loads(message)
        if self._cut.any():
            batch.restarted = batch.restarted | self._cut[batch.env_ids]
            self._cut[batch.env_ids] = False
        return batch

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        """Actions for the last batch (the group knows its env ids: batches are answered in order);
        the reply, the group's next batch, is the second call in flight."""
        self._pending.append(self.handle.exchange.remote(np.asarray(actions)))

    def worker_restarts(self) -> int:
        """Env workers replaced inside the group, plus the times the whole group was restarted."""
        return self._workers_before + self._workers + self.group_restarts

    def close(self) -> None:
        """Close the pool on its node, then kill the actor (the cluster stays up); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        if ray.is_initialized():
            try:
                ray.wait([self.handle.close.remote()], timeout=5.0)  # its workers exit cleanly
            except ray.exceptions.RayError:
                pass
            ray.kill(self.handle)
        self.roster.release()

    def _come_back(self, reason: str) -> None:
        """Wait for Ray to restart the group, then start its envs afresh (their unrolls are cut)."""
        self._pending.clear()  # the other call in flight died with the group
        if self._closed:
            raise SourceRetired(self.name)
        self.group_restarts += 1
        self._workers_before, self._workers = self._workers_before + self._workers, 0
        limit = self.cfg.max_restarts
        if 0 <= limit < self.group_restarts:
            self._retire(f"it died ({reason}) after {limit} restarts (--ray.max-restarts)")
        t0 = time.monotonic()
        info = self._wait_ready(t0 + self.cfg.restart_timeout_s)
        if info is None:
            self._retire(f"it died ({reason}) and did not come back within {self.cfg.restart_timeout_s:.0f} s "
                         "(--ray.restart-timeout-s): no node had room for it")
        moved = "" if info.node_id == self.node_id else f" on node {info.node_id[:8]}"
        self.node_id = info.node_id
        self._cut[:] = True
        self.last_restart_s = time.monotonic() - t0
        note(f"Ray actor group {self.name} died ({reason}) and was restarted{moved} in "
             f"{self.last_restart_s:.1f} s; its {self.num_envs} envs start afresh")
        self.start()

    def _wait_ready(self, deadline: float) -> GroupInfo | None:
        """The restarted group's info, or None if it is not back by `deadline`."""
        while not self._closed and time.monotonic() < deadline:
            try:
                return ray.get(self.handle.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                return None
            except ray.exceptions.RayActorError:
                time.sleep(0.2)  # the driver has not seen the restart begin yet: ask again
        return None

    def _retire(self, why: str) -> None:
        """Give up on this group: the run goes on with the others, or stops if none is left."""
        left = self.roster.lose()
        if ray.is_initialized():
            ray.kill(self.handle)  # no more restarts: free its place on the cluster
        if left == 0:
            raise GroupLostError(f"Ray actor group {self.name} is lost: {why}; no actor group is left")
        note(f"Ray actor group {self.name} is lost: {why}; going on with {left} group(s)")
        raise SourceRetired(self.name)
