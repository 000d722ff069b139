"""A training run as an object: build it, advance it, pause it, change it, save it, go on.

Every trainer builds one (`seedpool.trainers.<algo>.build_<algo>`) and `train_<algo>` is
``build(cfg).train()``. Self-play, leagues and population-based training use the object
directly::

    run = seedpool.build_run("ppo", ["--env", "CartPole-v1", "--seed", "2"])
    run.advance(20_000)                              # returns at an update boundary
    print(run.step, run.recent_return, run.metrics["losses/value_loss"])
    run.set_hyperparameters(**{"ppo.learning_rate": 3e-4})   # read at the next update
    run.load_weights(other_run)                      # another run's model (and optimizer)
    run.save()                                       # checkpoint.pt in the run folder
    run.advance(until=lambda r: r.recent_return >= 475)
    result = run.finish()                            # last checkpoint, curves, summary

A run owns its random generators and its torch thread count: on entering `advance` (or
`save`) it swaps its own generators into Python's, NumPy's and torch's global ones and
sets torch's threads, and on leaving stores them back and restores the caller's. Two runs
advanced in turn in one process therefore act, sample and learn exactly as each would
alone (with the serial backend; threads follow the OS scheduler). What stays process-wide
and why is in docs/runs.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Protocol

import torch

from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import load_checkpoint, rng_state, set_rng_state
from seedpool.experiment.run import CHECKPOINT_FILE, CONFIG_FILE, Run, RunResult
from seedpool.experiment.config import config_to_dict, write_json
from seedpool.experiment.metrics import CallbackSink


class Loop(Protocol):
    """One training mode's rounds (`seedpool.runners`: the sync sampler loop, central inference)."""

    def step(self, run: Run, until_step: int) -> bool:
        """One round of acting and learning, closed with ``run.end_update``; False once the
        loop cannot go on (a component failed)."""

    def pause(self) -> None:
        """Hold acting at the next step boundary (threads wait; nothing is lost)."""

    def between_updates(self) -> ContextManager:
        """A context in which no update is running (hyperparameters and weights change here)."""

    def state(self) -> dict[str, Any]:
        """What a checkpoint saves besides the run's counters."""

    def close(self) -> None:
        """Stop threads and close envs; raise what a component failed with, if anything did."""


def _coerce(path: str, current: Any, value: Any) -> Any:
    """``value`` in the type of the field's current value (a number for an unset optional one)."""
    if isinstance(current, bool) or isinstance(value, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{path} takes True or False, got {value!r}")
        return value
    if not isinstance(value, (int, float)):
        raise ConfigError(f"{path} takes a number, got {value!r}")
    if isinstance(current, int):
        if value != int(value):
            raise ConfigError(f"{path} takes a whole number, got {value!r}")
        return int(value)
    return float(value)


def _live_fields(section: Any) -> tuple[str, ...]:
    return tuple(getattr(type(section), "LIVE", ()))


class Training:
    """A run in progress: its folder and metrics (`Run`), its loop, learner and config."""

    def __init__(self, run: Run, loop: Loop, learner: Any, cfg: Any, *,
                 close: Callable[[], None] | None = None) -> None:
        self.run, self.loop, self.learner, self.cfg = run, loop, learner, cfg
        self._close_envs = close
        self._generators = rng_state()  # the run's own, as building left them
        self._closed = False
        self._finished: RunResult | None = None

    # -- reading ------------------------------------------------------------------------------
    step = property(lambda self: self.run.step,
                    doc="Env steps taken so far (summed over envs, earlier segments of a resumed run included).")
    dir = property(lambda self: self.run.dir, doc="The run folder.")
    recent_return = property(lambda self: self.run.recent_return,
                             doc="Mean return of the last 20 episodes (NaN before the first).")

    @property
    def metrics(self) -> dict[str, float]:
        """The latest update's scalars (losses, SPS, times) and the latest episode's."""
        return dict(self.run.latest)

    @property
    def done(self) -> bool:
        """True once the budget is spent, a stop was requested (Ctrl-C), or the loop failed."""
        return self.run.done(self.cfg.total_timesteps) or self._stopped_early()

    def _stopped_early(self) -> bool:
        target = self.cfg.stop_at_return
        return target is not None and len(self.run.recent_returns) == self.run.recent_returns.maxlen \
            and self.run.recent_return >= target

    # -- advancing ----------------------------------------------------------------------------
    def advance(self, to_step: int | None = None, *,
                until: Callable[[Training], bool] | None = None) -> Training:
        """Train until ``to_step`` env steps (default: the run's budget), ``until(self)`` holds,
        or the run is done; returns at an update boundary, with acting paused."""
        self._check_open()
        target = self.cfg.total_timesteps if to_step is None else min(to_step, self.cfg.total_timesteps)
        with self._own(), self._sigint():
            try:
                while self.step < target and not self.done and not (until is not None and until(self)):
                    if not self.loop.step(self.run, target):
                        break
                    if self.run.checkpoint_due():
                        self._save()
            finally:
                self.loop.pause()
        return self

    def train(self) -> RunResult:
        """Advance to the end of the budget, then `finish`: what ``seedpool train`` does."""
        try:
            self.advance()
        except BaseException:
            self.close(failed=True)
            raise
        return self.finish()

    def finish(self) -> RunResult:
        """Write the last checkpoint, close the envs, draw the curves and print the summary."""
        if self._finished is not None:
            return self._finished
        from seedpool.experiment import finish_run  # the summary module imports plotting

        self.close()
        self._finished = finish_run(self.run, self.cfg.env, self.run.algo)
        return self._finished

    def close(self, failed: bool = False) -> None:
        """Stop the loop's threads and the envs, then (unless ``failed``) write the last checkpoint."""
        if self._closed:
            return
        self._closed = True
        try:
            try:
                self.loop.close()  # raises TrainingError if a component failed
            finally:
                if self._close_envs is not None:
                    self._close_envs()
            if not failed:
                with self._own():
                    self._save()
        except BaseException:
            self.run.close(failed=True)
            raise
        self.run.close(failed=failed)

    # -- changing -----------------------------------------------------------------------------
    def hyperparameters(self) -> dict[str, Any]:
        """Every hyperparameter that may change while the run goes on, as ``section.name``."""
        return {f"{name}.{f}": getattr(section, f) for name, section in self._sections() for f in _live_fields(section)}

    def set_hyperparameters(self, **values: Any) -> None:
        """Change hyperparameters (``section.name``, e.g. ``ppo.learning_rate``, or the bare
        name where one section has it); the learner reads them at its next update. The change
        is written to config.json (a resumed run keeps it) and logged under ``hparams/``."""
        self._check_open()
        resolved = {self._resolve(name): value for name, value in values.items()}
        with self.loop.between_updates():
            for path, value in resolved.items():
                section_name, field_name = path.split(".")
                section = getattr(self.cfg, section_name)
                setattr(section, field_name, _coerce(path, getattr(section, field_name), value))
        write_json(self.run.dir / CONFIG_FILE, {"algo": self.run.algo, "config": config_to_dict(self.cfg)})
        self.run.log({f"hparams/{p}": float(v) for p, v in resolved.items() if isinstance(v, (int, float))})

    def load_weights(self, source: Training | str | Path, *, optimizer: bool = True) -> None:
        """Take another run's learner state (a live `Training`, a run folder or a checkpoint
        file): its model, and with ``optimizer`` its optimizer state and version too (what
        population-based training's exploit copies). Counters, envs and replay stay this run's."""
        self._check_open()
        if isinstance(source, Training):
            with source.loop.between_updates():
                state = source.learner.state_dict()
        else:
            path = Path(source)
            path = path / CHECKPOINT_FILE if path.is_dir() else path
            ckpt = load_checkpoint(path, self.run.algo)  # the learner's state, split as trainer_state saves it
            state = {**ckpt["learner"], "model": ckpt["model"], "optimizer": ckpt["optimizer"]}
        with self.loop.between_updates():
            if optimizer:
                self.learner.load_state_dict(state)
            else:
                self.learner.model.load_state_dict(state["model"])
            if hasattr(self.loop, "publish"):
                self.loop.publish()

    def add_sink(self, fn: Callable[[int, float, dict[str, float]], Any]) -> None:
        """Call ``fn(step, time_s, scalars)`` with every metrics row logged from now on."""
        self.run.metrics.add(CallbackSink(fn))

    def save(self) -> Path:
        """Checkpoint the run now (model, optimizer, counters, generators, acting state)."""
        self._check_open()
        with self._own():
            return self._save()

    # -- internals ----------------------------------------------------------------------------
    def _save(self) -> Path:
        return self.run.save_checkpoint(self.loop.state())

    def _sections(self) -> Iterator[tuple[str, Any]]:
        for f in dataclasses.fields(self.cfg):
            value = getattr(self.cfg, f.name)
            if dataclasses.is_dataclass(value) and _live_fields(value):
                yield f.name, value

    def _resolve(self, name: str) -> str:
        live = self.hyperparameters()
        if name in live:
            return name
        matches = [p for p in live if p.split(".", 1)[1] == name]
        if len(matches) == 1:
            return matches[0]
        hint = f"several sections have it: {', '.join(matches)}" if matches else \
            f"those that can change during a run: {', '.join(live) or 'none'}"
        raise ConfigError(f"cannot change {name!r} while the run goes on; {hint}")

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigError(f"the run in {self.run.dir} is closed; load it again with seedpool.load_run")

    @contextlib.contextmanager
    def _own(self) -> Iterator[None]:
        """Swap in this run's generators and torch threads; give the caller's back after."""
        caller_generators, caller_threads = rng_state(), torch.get_num_threads()
        set_rng_state(self._generators)
        if self.cfg.torch_threads > 0:
            torch.set_num_threads(self.cfg.torch_threads)
        try:
            yield
        finally:
            self._generators = rng_state()
            set_rng_state(caller_generators)
            torch.set_num_threads(caller_threads)

    @contextlib.contextmanager
    def _sigint(self) -> Iterator[None]:
        """While advancing: the first Ctrl-C stops at the next boundary (the run then checkpoints)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = signal.signal(signal.SIGINT, self.run.on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)
