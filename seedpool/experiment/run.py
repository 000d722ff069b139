"""A training run as users see it: its folder, metrics, progress, checkpoints and Ctrl-C.

Any trainer drives a :class:`Run` the same way::

    with Run.open(cfg, algo="ppo", full_config=cfg, checkpoint=ckpt) as run:
        while not run.done(total_steps):
            ...collect and learn...
            run.record_episodes(episodes)
            run.end_update(env_steps, {"losses/value_loss": ...})
            if run.checkpoint_due():
                run.save_checkpoint(state())
        run.save_checkpoint(state())

The run folder is ``runs/<env>__<algo>__<seed>__<time>/`` and holds ``config.json``,
``metrics.csv``, ``tb/`` (TensorBoard) and ``checkpoint.pt``.
"""
from __future__ import annotations

import collections
import math
import re
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seedpool.errors import SeedpoolError
from seedpool.experiment.checkpoint import save_checkpoint
from seedpool.experiment.config import RunConfig, config_to_dict, write_json
from seedpool.experiment.metrics import MetricsWriter, metric_sinks
from seedpool.experiment.progress import ProgressDisplay
from seedpool.timing import PhaseTimer

CONFIG_FILE = "config.json"
CHECKPOINT_FILE = "checkpoint.pt"
RECENT_EPISODES = 20


class RunDirError(SeedpoolError):
    """A folder that is not a usable run folder; the message says what to do."""


def new_run_dir(runs_dir: Path, env: str, algo: str, seed: int) -> Path:
    """A fresh, not yet existing ``<runs_dir>/<env>__<algo>__<seed>__<time>`` path."""
    safe_env = re.sub(r"[^A-Za-z0-9._-]+", "-", env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(runs_dir) / f"{safe_env}__{algo}__{seed}__{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = Path(runs_dir) / f"{safe_env}__{algo}__{seed}__{stamp}-{n}"
    return path


def read_run_config(run_dir: Path) -> tuple[str, dict[str, Any]]:
    """(algo, config dict) of a run folder, or RunDirError saying what is missing."""
    path = Path(run_dir) / CONFIG_FILE
    if not Path(run_dir).is_dir():
        raise RunDirError(f"{run_dir} is not a folder; pass a run folder such as runs/CartPole-v1__ppo__1__...")
    if not path.is_file():
        raise RunDirError(f"{run_dir} has no {CONFIG_FILE}: it is not a seedpool run folder")
    import json

    try:
        data = json.loads(path.read_text())
        return data["algo"], data["config"]
    except (ValueError, KeyError, TypeError) as err:
        raise RunDirError(f"{path} is not a seedpool run config ({err})") from None


@dataclass
class RunResult:
    """What a finished (or stopped) run reports."""

    run_dir: Path
    step: int
    final_return: float
    sps: float
    time_s: float
    time_shares: dict[str, float]
    interrupted: bool
    plot: Path | None = None
    thread_shares: dict[str, float] = field(default_factory=dict)
    """Mean over this segment's updates of each ``time/share_*`` metric a trainer logged
    (threaded trainers: each thread's share of wall time); empty when none was logged."""


class Run:
    """Counters, metrics, progress, checkpoints and the stop flag of one run."""

    def __init__(self, run_dir: Path, algo: str, cfg: RunConfig, created: bool,
                 resume_state: dict[str, Any] | None = None) -> None:
        self.dir, self.algo, self.cfg, self.created = Path(run_dir), algo, cfg, created
        counters = (resume_state or {}).get("counters", {})
        self.step = int(counters.get("step", 0))
        self.updates = int(counters.get("updates", 0))
        self.episodes = int(counters.get("episodes", 0))
        self._time_before = float(counters.get("time_s", 0.0))
        self.recent_returns: collections.deque[float] = collections.deque(
            counters.get("recent_returns", []), maxlen=RECENT_EPISODES)
        self.timer = PhaseTimer()
        self.timer.load_state_dict(counters.get("phase_s", {}))
        self._share_sums: dict[str, float] = {}  # time/share_* metrics summed over updates
        self._share_updates = 0
        self._logged_step: int | None = None  # env step of the last update written to the metrics
        self._unlogged: tuple[int, float, dict[str, float]] | None = None  # the last update, if not written
        self.stop_requested = False
        self._start_step = self.step
        self._start = time.monotonic()
        self._last_checkpoint = self._start
        self.metrics = MetricsWriter(self.dir, cfg.tensorboard, resume_step=self.step if resume_state else None,
                                     sinks=metric_sinks(cfg, self.dir, algo, resume_state is not None))
        self.latest: dict[str, float] = {}  # the last update's scalars and the last episode's
        self._closed = False
        self.progress = ProgressDisplay(cfg.total_timesteps, self.step, cfg.progress, cfg.log_every_s,
                                        title=f"{algo} {cfg.env}")
        self._old_sigint = None

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, cfg: RunConfig, algo: str, full_config: Any,
             checkpoint: dict[str, Any] | None = None) -> Run:
        """A new run folder (writing config.json), or the folder of ``cfg.resume`` when resuming."""
        if cfg.resume is not None:
            run_dir = Path(cfg.resume)
            write_json(run_dir / CONFIG_FILE, {"algo": algo, "config": config_to_dict(full_config)})
            run = cls(run_dir, algo, cfg, created=False, resume_state=checkpoint)
            run.progress.print(f"[seedpool] resuming: {run.dir}")
            return run
        run_dir = new_run_dir(cfg.runs_dir, cfg.env, algo, cfg.seed)
        run_dir.mkdir(parents=True)
        try:
            write_json(run_dir / CONFIG_FILE, {"algo": algo, "config": config_to_dict(full_config)})
            run = cls(run_dir, algo, cfg, created=True)
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        run.progress.print(f"[seedpool] run folder: {run.dir}")
        return run

    def __enter__(self) -> Run:
        if threading.current_thread() is threading.main_thread():
            self._old_sigint = signal.signal(signal.SIGINT, self.on_sigint)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._old_sigint is not None:
            signal.signal(signal.SIGINT, self._old_sigint)
            self._old_sigint = None
        self.close(failed=exc_type is not None)

    def close(self, failed: bool = False) -> None:
        """Write the last pending metrics row and close the sinks; a run that ``failed`` before
        its first update leaves no half-written folder behind."""
        if self._closed:
            return
        self._closed = True
        self.progress.close()
        if self._unlogged is not None:
            self.metrics.write(*self._unlogged)
        self.metrics.close()
        if failed and self.created and self.updates == 0:
            shutil.rmtree(self.dir, ignore_errors=True)

    def on_sigint(self, signum, frame) -> None:
        """The first Ctrl-C asks the loop to stop after this update (and checkpoint); a second quits."""
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        self.progress.print("[seedpool] Ctrl-C: stopping after this update and saving a checkpoint "
                            "(Ctrl-C again to quit at once, without saving)")

    # -- the training loop's calls -------------------------------------------------------------
    def note(self, message: str) -> None:
        """A line for the user (printed above the live progress bar)."""
        self.progress.print(f"[seedpool] {message}")

    def done(self, total_steps: int) -> bool:
        """True once ``total_steps`` are reached or a stop was requested."""
        return self.step >= total_steps or self.stop_requested

    @property
    def time_s(self) -> float:
        """Training seconds, including earlier segments of a resumed run."""
        return self._time_before + time.monotonic() - self._start

    @property
    def sps(self) -> float:
        """Env steps per second in this segment of the run."""
        elapsed = time.monotonic() - self._start
        return (self.step - self._start_step) / elapsed if elapsed > 0 else 0.0

    @property
    def recent_return(self) -> float:
        """Mean return of the last 20 episodes (NaN before the first)."""
        return sum(self.recent_returns) / len(self.recent_returns) if self.recent_returns else math.nan

    def record_episodes(self, episodes, group_of=None) -> None:
        """Log finished episodes (objects with ``step``, ``ret`` and ``length``).

        ``group_of(episode) -> name`` also logs each return under
        ``charts/episodic_return/<name>`` (Ape-X: its actors' exploration groups).
        """
        t = self.time_s
        for ep in episodes:
            self.episodes += 1
            self.recent_returns.append(ep.ret)
            scalars = {"charts/episodic_return": ep.ret, "charts/episodic_length": ep.length}
            if group_of is not None:
                scalars[f"charts/episodic_return/{group_of(ep)}"] = ep.ret
            self.metrics.write(ep.step, t, scalars)
            self.latest.update(scalars)

    def end_update(self, step: int, scalars: dict[str, float]) -> None:
        """Close an update at env step ``step``: log its scalars, SPS and time (every
        ``metrics_every`` env steps, and the last update at the end), draw progress."""
        self.step = step
        self.updates += 1
        shares = {k: v for k, v in scalars.items() if k.startswith("time/share_")}
        if shares:
            self._share_updates += 1
            for k, v in shares.items():
                self._share_sums[k] = self._share_sums.get(k, 0.0) + v
        row = (step, self.time_s, {**scalars, "charts/SPS": self.sps,
                                   **{f"time/{k}": v for k, v in self.timer.seconds.items()}})
        self.latest.update(row[2])
        if self._logged_step is None or step - self._logged_step >= self.cfg.metrics_every:
            self.metrics.write(*row)
            self._logged_step, self._unlogged = step, None
        else:
            self._unlogged = row
        self.progress.update(step, self.sps, self.recent_return)

    def log(self, scalars: dict[str, float]) -> None:
        """Write scalars at the current env step now (e.g. a hyperparameter change)."""
        self.metrics.write(self.step, self.time_s, scalars)
        self.latest.update(scalars)

    def checkpoint_due(self) -> bool:
        """True when ``checkpoint_every_s`` has passed since the last checkpoint."""
        return time.monotonic() - self._last_checkpoint >= self.cfg.checkpoint_every_s

    def counters(self) -> dict[str, Any]:
        """The run's counters, for a checkpoint."""
        return {"step": self.step, "updates": self.updates, "episodes": self.episodes,
                "time_s": self.time_s, "recent_returns": list(self.recent_returns),
                "phase_s": self.timer.state_dict()}

    def save_checkpoint(self, state: dict[str, Any]) -> Path:
        """Write ``state`` plus the counters atomically to ``checkpoint.pt``."""
        path = self.dir / CHECKPOINT_FILE
        save_checkpoint(path, self.algo, {**state, "counters": self.counters()})
        self.metrics.flush()
        self._last_checkpoint = time.monotonic()
        return path

    def result(self) -> RunResult:
        """The run's headline numbers."""
        total = self.time_s
        shares = {k: v / self._share_updates for k, v in self._share_sums.items()}
        return RunResult(self.dir, self.step, self.recent_return, self.sps, total,
                         self.timer.fractions(total), self.stop_requested, thread_shares=shares)
