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

`CentralLoop` is the system as a `Training` drives it: it logs a window of metrics every
second, pauses and resumes the threads, and turns a component's failure into one `TrainingError`.
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
        self.running = threading.Event()  # cleared: actors and the learner hold at their next step
        self.running.set()
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
        self.actors = [ActorLoop(s, self.server, int(o), self.episodes, self.stop, self.running)
                       for s, o in zip(self.sources, offsets)]
        self._serial_actors = list(self.actors)  # the serial twin drops a retired source's loop
        self.learner_thread = LearnerThread(learner, self.queue, self.server, unrolls_per_batch, self.stop,
                                            self.running)

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

    @property
    def paused(self) -> bool:
        """True between `pause` and `resume`."""
        return not self.running.is_set()

    def pause(self) -> None:
        """Hold acting and learning at their next step boundary (the serial twin is held already)."""
        self.running.clear()

    def resume(self) -> None:
        """Let a paused system go on."""
        self.running.set()

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
        self.running.set()  # paused threads wake, see the stop and end
        self.queue.close()
        self.server.stop()
        for a in self.actors:
            a.join(10)
        self.learner_thread.join(30)
        for s in self.sources:
            s.close()


class CentralLoop:
    """The central system as `Training` drives it: one round is a second of acting and
    learning (the serial twin: its rounds within that second), then a window of metrics.

    Between rounds the system keeps running; `pause` holds acting and learning at their next
    step boundary (nothing in flight is lost) and the next round lets them go on."""

    def __init__(self, run: Run, system: CentralSystem, state: Callable[[dict], dict],
                 episode_group: Callable | None = None) -> None:
        """``state(learner_state)``: what a checkpoint saves; ``episode_group(episode) -> name``
        also logs returns per group of envs (see `Run.record_episodes`)."""
        self.run, self.system, self._state, self.episode_group = run, system, state, episode_group
        self._started = False
        self._last = 0.0

    def step(self, run: Run, until_step: int) -> bool:
        """Let the system run for a second (or until ``until_step`` env steps, serially), then log."""
        system = self.system
        if not self._started:
            system.start()
            self._started = True
            self._last = time.monotonic()
        elif system.paused:
            system.resume()
            self._last = time.monotonic()  # the pause is no part of any thread's time share
        if system.stop.is_set():
            return False
        system.wait(1.0, until_steps=until_step)
        now = time.monotonic()
        run.record_episodes(system.episodes.drain(), self.episode_group)
        run.end_update(system.episodes.env_steps, system.read_metrics(now - self._last, run.timer))
        self._last = now
        return not system.stop.is_set()

    def pause(self) -> None:
        """Hold the actor and learner threads at their next step boundary."""
        self.system.pause()

    def between_updates(self):
        """Held while no update runs (the learner thread takes it for each update)."""
        return self.system.learner_thread.lock

    def publish(self) -> None:
        """Hand the learner's current parameters to the inference server (after a weight load)."""
        learner = self.system.learner_thread.learner
        self.system.server.publish(learner.model.state_dict(), learner.version)

    def state(self) -> dict:
        """A consistent copy of the learner's state, taken between two updates, plus the trainer's."""
        return self._state(self.system.learner_thread.state())

    def close(self) -> None:
        """Stop every thread and source; raise a `TrainingError` if a component failed."""
        self.system.close()
        _note_restarts(self.system, self.run)
        _raise_errors(self.system, self.run)


def central_replay_state(run: Run, system: CentralSystem, replay, save_replay: bool) -> Callable[[dict], dict]:
    """A replay trainer's checkpoint state (Ape-X, R2D2): the learner's, and with ``save_replay``
    the replay's contents written beside it while no insertion runs."""
    from seedpool.experiment.checkpoint import trainer_state
    from seedpool.replay import REPLAY_FILE, save_replay_file

    def state(learner_state: dict) -> dict:
        if save_replay:
            with system.learner_thread.lock:  # no insertion while the arrays are written
                save_replay_file(run.dir / REPLAY_FILE, replay)
        return trainer_state(learner_state, replay=REPLAY_FILE if save_replay else None)

    return state


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
