"""The moving parts of a SEED-style IMPALA run, each small, wired by `train_impala`.

- `SeedConfig`: how acting is laid out (pools, batching, deadline, queue).
- `LearnerThread`: takes batches of unrolls, updates, publishes parameters.
- `SeedSystem`: builds pools, sources, the server, actor loops and the learner thread,
  runs them threaded (or serially, the deterministic twin), reads their metrics and
  shuts them down in the one order that cannot hang.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

import seedpool
from seedpool.actors.seed import ActorLoop, EpisodeLog, PoolSource
from seedpool.algos.impala import ImpalaLearner, policy_act
from seedpool.inference.server import InferenceServer
from seedpool.inference.unroll_queue import QueueClosed, UnrollQueue
from seedpool.inference.unrolls import Unrolls


@dataclass
class SeedConfig:
    """How acting is laid out: engine pools feeding one central inference server."""

    num_envs: int = 32
    """Envs in all pools together."""
    num_pools: int = 1
    """Engine pools (each one actor thread and one source); remote actor groups later."""
    env_batch_size: int | None = None
    """Envs per recv of each pool (async mode); default half the pool, so halves overlap."""
    max_batch: int | None = None
    """Largest inference batch; default the sum of all pools' recv sizes."""
    max_wait_ms: float = 2.0
    """Deadline: close a partial inference batch once its oldest request waited this long."""
    queue_unrolls: int | None = None
    """Unrolls the learner queue holds before inference blocks; default 2 learner batches."""
    backend: str = "auto"
    """Engine backend for the pools: auto, serial, thread or process."""
    num_workers: int | None = None
    """Engine worker processes per pool (default: the engine decides)."""
    restart_workers: bool = True
    """Restart a dead env worker (its envs reset, partial unrolls dropped) instead of failing."""
    serial: bool = False
    """Run actors, inference and learner in one thread, in turn: deterministic, for debugging."""

    def pool_batch(self) -> int:
        """Envs per recv of each pool."""
        per_pool = self.num_envs // self.num_pools
        return self.env_batch_size or max(1, per_pool // 2)


class LearnerThread:
    """Consumes `batch_size` unrolls at a time, updates, publishes; stops the run on an error."""

    def __init__(self, learner: ImpalaLearner, queue: UnrollQueue, server: InferenceServer,
                 batch_size: int, stop: threading.Event) -> None:
        self.learner, self.queue, self.server = learner, queue, server
        self.batch_size = batch_size
        self.stop = stop
        self.error: BaseException | None = None
        self.lock = threading.Lock()  # held during an update: checkpoints see whole versions
        self.metrics: dict[str, float] = {}
        self.wait_s = self.learn_s = 0.0
        self._thread = threading.Thread(target=self._run, name="learner", daemon=True)

    def start(self) -> "LearnerThread":
        """Start the thread."""
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (no-op if it never started: the serial twin)."""
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def step(self, timeout: float | None) -> bool:
        """Train on one batch if one arrives within `timeout`; False if none did."""
        t0 = time.perf_counter()
        batch = self.queue.take(self.batch_size, timeout)
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
                self.step(timeout=0.2)
        except QueueClosed:
            pass
        except BaseException as e:  # noqa: BLE001 - reported by the trainer, which stops acting
            self.error = e
            self.stop.set()

    def read_times(self) -> tuple[float, float]:
        """(seconds waiting for unrolls, seconds learning) since the last read."""
        out = (self.wait_s, self.learn_s)
        self.wait_s = self.learn_s = 0.0
        return out


def make_pools(env_id: str, cfg: SeedConfig, seed: int, **env_options) -> list:
    """The engine pools in async mode, with disjoint env seeds."""
    per_pool = cfg.num_envs // cfg.num_pools
    if per_pool * cfg.num_pools != cfg.num_envs:
        raise ValueError(f"num_envs={cfg.num_envs} must divide evenly into num_pools={cfg.num_pools}")
    batch = cfg.pool_batch()
    if batch >= per_pool:
        raise ValueError(f"env_batch_size={batch} must be below the {per_pool} envs of each pool (async mode)")
    return [seedpool.make(env_id, num_envs=per_pool, batch_size=batch, backend=cfg.backend,
                          num_workers=cfg.num_workers, seed=seed + k * per_pool,
                          on_worker_death="restart" if cfg.restart_workers else "raise", **env_options)
            for k in range(cfg.num_pools)]


class SeedSystem:
    """Pools -> actor loops -> inference server -> unroll queue -> learner thread."""

    def __init__(self, pools: list, learner: ImpalaLearner, cfg: SeedConfig,
                 learner_batch: int, unroll_length: int, device: torch.device) -> None:
        space = pools[0].single_observation_space
        act_space = pools[0].single_action_space
        max_batch = cfg.max_batch or sum(p.batch_size for p in pools)
        queue_size = cfg.queue_unrolls or 2 * learner_batch
        self.cfg = cfg
        self.stop = threading.Event()
        self.queue = UnrollQueue(max(queue_size, learner_batch))
        self.server = InferenceServer(
            copy.deepcopy(learner.model), policy_act, num_slots=sum(p.num_envs for p in pools),
            obs_shape=space.shape, obs_dtype=space.dtype,
            action_shape=() if isinstance(act_space, gym.spaces.Discrete) else act_space.shape,
            action_dtype=np.int64 if isinstance(act_space, gym.spaces.Discrete) else np.float32,
            unroll_length=unroll_length, max_batch=max_batch, max_wait_s=0.0 if cfg.serial else cfg.max_wait_ms / 1000,
            on_unrolls=self._enqueue, device=device, version=learner.version,
        )
        self.episodes = EpisodeLog()
        self.sources = [PoolSource(p) for p in pools]
        offsets = np.cumsum([0] + [p.num_envs for p in pools])[:-1]
        self.actors = [ActorLoop(s, self.server, int(o), self.episodes, self.stop)
                       for s, o in zip(self.sources, offsets)]
        self.learner_thread = LearnerThread(learner, self.queue, self.server, learner_batch, self.stop)

    def _enqueue(self, unrolls: Unrolls) -> None:
        try:
            self.queue.put(unrolls)
        except QueueClosed:
            pass  # shutting down: the last partial work is dropped

    def start(self) -> None:
        """Start every thread (in serial mode: only reset the envs)."""
        if self.cfg.serial:
            for a in self.actors:
                a.source.start()
            return
        self.server.start()
        self.learner_thread.start()
        for a in self.actors:
            a.start()

    def env_steps(self) -> int:
        """Env steps taken by all actors so far."""
        return sum(a.env_steps for a in self.actors)

    def run_serial(self, until: Callable[[], bool]) -> None:
        """The serial twin: act, infer, and learn in turn in this thread until `until()`."""
        while not until() and not self.stop.is_set():
            for a in self.actors:
                a.step_serial()
            while self.queue.depth() >= self.learner_thread.batch_size:
                self.learner_thread.step(timeout=0)

    def read_metrics(self, window_s: float) -> dict[str, float]:
        """Time breakdown (shares of the window per thread), batching, lag and queue depths."""
        env_s = wait_s = 0.0
        for a in self.actors:
            e, w = a.read_times()
            env_s, wait_s = env_s + e, wait_s + w
        learner_wait_s, learn_s = self.learner_thread.read_times()
        inf = self.server.stats.read()
        n = max(window_s, 1e-9)
        out = {
            "time/env": env_s / len(self.actors) / n,
            "time/inference_wait": wait_s / len(self.actors) / n,
            "time/inference_compute": inf.pop("inference/compute_s") / n,
            "time/inference_idle": inf.pop("inference/idle_s") / n,
            "time/learner_wait": learner_wait_s / n,
            "time/learn": learn_s / n,
            "queues/unrolls": float(self.queue.depth()),
            "queues/requests": float(self.server.batcher.depth()),
            "charts/learner_version": float(self.learner_thread.learner.version),
            "charts/worker_restarts": float(sum(s.worker_restarts() for s in self.sources)),
            "charts/dropped_steps": float(self.server.buffers.dropped_steps),
        }
        out.update(inf)
        out.update(self.learner_thread.metrics)
        return out

    def errors(self) -> list[tuple[str, BaseException]]:
        """What stopped the run, by component."""
        found = [("learner", self.learner_thread.error), ("inference", self.server.error)]
        found += [(f"actor {i}", a.error) for i, a in enumerate(self.actors)]
        return [(name, e) for name, e in found if e is not None]

    def close(self) -> None:
        """Stop in an order that cannot hang: flag, wake the queue, server, threads, pools."""
        self.stop.set()
        self.queue.close()
        self.server.stop()
        for a in self.actors:
            a.join(10)
        self.learner_thread.join(30)
        for s in self.sources:
            s.close()
