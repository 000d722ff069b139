"""SEED-style central inference as a reusable runner.

Actors only step envs and stream observations to one inference server, which batches
them, runs the policy on the learner's device and cuts per-env unrolls; a learner thread
trains on them and publishes versioned parameters back to the server. Envs come from
sources (`seedpool.inference.sources.Source`): engine pools on this machine
(`PoolSource`) or actor groups on Ray nodes; this module does not know which. The
dataflow, in the order `CentralSystem.__init__` wires it:

    sources -> ActorLoop --submit--> InferenceServer --unrolls--> UnrollQueue
                    ^                   |    ^                       |
                    +----actions--------+    +--publish(params)-- LearnerThread

`run_central` drives a built system inside a `Run`: it logs a window of metrics every
second, checkpoints, and turns a component's failure into one `TrainingError`.
Any `Learner` whose `update` takes `Unrolls` plugs in; the serial twin
(`ActingConfig.serial`) runs the same parts in one thread, deterministically.
"""
from __future__ import annotations

import copy
import threading
import time
from typing import Callable

import gymnasium as gym
import numpy as np

from seedpool.actors.actor_loop import ActorLoop, EpisodeLog
from seedpool.actors.pool_source import PoolSource, SourceRetired
from seedpool.algos.learner import Learner
from seedpool.envs.pool import EnvPool
from seedpool.experiment import CHECKPOINT_FILE, Run
from seedpool.inference.server import ActFn, InferenceServer
from seedpool.inference.unroll_queue import QueueClosed, UnrollQueue
from seedpool.records import State, Unrolls
from seedpool.runners.acting import ActingConfig
from seedpool.runners.learner_thread import LearnerThread
from seedpool.timing import PhaseTimer


class TrainingError(RuntimeError):
    """A component of the run failed; acting stopped and no checkpoint was written after it."""


class CentralSystem:
    """Sources -> actor loops -> inference server -> unroll queue -> learner thread."""

    def __init__(self, sources: list, learner: Learner, act: ActFn, cfg: ActingConfig, *,
                 unrolls_per_batch: int, unroll_length: int, device, env_steps: int = 0,
                 aux_size: int = 0, initial_state: State = None, prev_inputs: bool = False) -> None:
        """`sources`: each a `Source` that also has num_envs, batch_size and the single env's
        observation and action spaces (an engine pool is wrapped in a `PoolSource`); the
        system closes them. `initial_state`: a recurrent policy's state for one env (no batch
        axis), which the server keeps per env; None for a feed-forward policy. `prev_inputs`: the
        policy also reads each env's previous action and reward (the server keeps them)."""
        self.sources = [PoolSource(s) if isinstance(s, EnvPool) else s for s in sources]
        obs_space = self.sources[0].single_observation_space
        act_space = self.sources[0].single_action_space
        discrete = isinstance(act_space, gym.spaces.Discrete)
        self.cfg = cfg
        self.stop = threading.Event()
        self.queue = UnrollQueue(max(cfg.queue_size or 2 * unrolls_per_batch, unrolls_per_batch))
        self.server = InferenceServer(
            copy.deepcopy(learner.model), act, num_slots=sum(s.num_envs for s in self.sources),
            obs_shape=obs_space.shape, obs_dtype=obs_space.dtype,
            action_shape=() if discrete else act_space.shape,
            action_dtype=np.int64 if discrete else np.float32, unroll_length=unroll_length,
            max_batch=cfg.max_inference_batch or sum(s.batch_size for s in self.sources),
            max_wait_s=0.0 if cfg.serial else cfg.max_wait_ms / 1000,  # serially, nobody else comes
            on_unrolls=self._enqueue, device=device, version=learner.version, aux_size=aux_size,
            initial_state=initial_state, prev_inputs=prev_inputs,
        )
        self.episodes = EpisodeLog()
        self.episodes.env_steps = env_steps
        offsets = np.cumsum([0] + [s.num_envs for s in self.sources])[:-1]
        self.actors = [ActorLoop(s, self.server, int(o), self.episodes, self.stop)
                       for s, o in zip(self.sources, offsets)]
        self._serial_actors = list(self.actors)  # the serial twin drops a retired source's loop
        self.learner_thread = LearnerThread(learner, self.queue, self.server, unrolls_per_batch, self.stop)

    def _enqueue(self, unrolls: Unrolls) -> None:
        try:
            self.queue.put(unrolls)
        except QueueClosed:
            pass  # shutting down: the last partial work is dropped

    def start(self) -> None:
        """Start every thread (the serial twin only resets the envs)."""
        if self.cfg.serial:
            for a in self.actors:
                a.source.start()
            return
        self.server.start()
        self.learner_thread.start()
        for a in self.actors:
            a.start()

    def wait(self, seconds: float, until_steps: int | None = None) -> None:
        """Let the system run for `seconds` (or until it stops); the serial twin works here, and
        also stops once acting has taken ``until_steps`` env steps (the run's budget)."""
        if not self.cfg.serial:
            self.stop.wait(seconds)
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.stop.is_set() \
                and (until_steps is None or self.episodes.env_steps < until_steps):
            self.step_serial()

    def step_serial(self) -> None:
        """The serial twin's round: each actor acts once, then the learner takes every full batch."""
        for a in list(self._serial_actors):
            try:
                a.step_serial()
            except SourceRetired:  # a lost Ray group: the others go on
                self._serial_actors.remove(a)
        if not self._serial_actors:
            raise RuntimeError("every source of the run retired: nothing is left to act")
        while self.queue.depth() >= self.learner_thread.unrolls_per_batch:
            self.learner_thread.step(timeout=0)

    def read_metrics(self, window_s: float, timer: PhaseTimer) -> dict[str, float]:
        """Window metrics: each thread's time shares, batching, lag, queues, restarts.

        The acting side's seconds (env, waiting for inference) also go to `timer`.
        """
        env_s = wait_s = 0.0
        for a in self.actors:
            e, w = a.read_times()
            env_s, wait_s = env_s + e / len(self.actors), wait_s + w / len(self.actors)
        timer.add("env", env_s)
        timer.add("inference", wait_s)
        learner_wait_s, learn_s = self.learner_thread.read_times()
        inf = self.server.stats.read()
        n = max(window_s, 1e-9)
        out = {
            "time/share_env": env_s / n,
            "time/share_inference_wait": wait_s / n,
            "time/share_inference_compute": inf.pop("inference/compute_s") / n,
            "time/share_inference_idle": inf.pop("inference/idle_s") / n,
            "time/share_inference_blocked": inf.pop("inference/blocked_s") / n,
            "time/share_learner_wait": learner_wait_s / n,
            "time/share_learn": learn_s / n,
            "queues/unrolls": float(self.queue.depth()),
            "queues/requests": float(self.server.batcher.depth()),
            "charts/learner_version": float(self.learner_thread.learner.version),
            "charts/worker_restarts": float(self.worker_restarts()),
            "charts/dropped_steps": float(self.server.buffers.dropped_steps),
        }
        return {**out, **inf, **self.learner_thread.metrics}

    def worker_restarts(self) -> int:
        """Dead env workers replaced so far, whole Ray actor groups included."""
        return sum(s.worker_restarts() for s in self.sources)

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


def run_central(run: Run, system: CentralSystem, total_steps: int, state: Callable[[dict], dict],
                stop_at_return: float | None = None, episode_group: Callable | None = None) -> None:
    """Run a built system inside `run` until the budget, a stop request, ``stop_at_return``
    (mean of the last 20 episodes) or a failure; checkpoints hold ``state(learner_state)``.

    ``episode_group(episode) -> name`` also logs returns per group of envs (see `Run.record_episodes`).
    """
    def checkpoint() -> None:
        run.save_checkpoint(state(system.learner_thread.state()))

    try:
        system.start()
        last = time.monotonic()
        while not run.done(total_steps) and not system.stop.is_set():
            system.wait(1.0, until_steps=total_steps)
            now = time.monotonic()
            run.record_episodes(system.episodes.drain(), episode_group)
            run.end_update(system.episodes.env_steps, system.read_metrics(now - last, run.timer))
            last = now
            if stop_at_return is not None and len(run.recent_returns) == run.recent_returns.maxlen \
                    and run.recent_return >= stop_at_return:
                break
            if run.checkpoint_due() and not system.stop.is_set():
                checkpoint()
    finally:
        system.close()
    _note_restarts(system, run)
    _raise_errors(system, run)
    checkpoint()


def _note_restarts(system: CentralSystem, run: Run) -> None:
    """Say, next to the closing summary, that acting lost envs and went on."""
    restarts = system.worker_restarts()
    if restarts:
        run.note(f"{restarts} env worker(s) or Ray actor group(s) died during this run and were replaced; "
                 f"{system.server.buffers.dropped_steps:,} env steps of their cut unrolls were dropped")


def _raise_errors(system: CentralSystem, run: Run) -> None:
    """Turn a component's failure into one clear error; the last good checkpoint stays."""
    errors = system.errors()
    if not errors:
        return
    name, err = errors[0]
    last = run.dir / CHECKPOINT_FILE
    kept = f"the last good checkpoint is {last}" if last.exists() else "no checkpoint was written"
    raise TrainingError(f"{run.algo.upper()} stopped: the {name} failed with {type(err).__name__}: {err}. "
                        f"Acting was stopped and nothing was saved after the failure; {kept}.") from err
