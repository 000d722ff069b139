"""A member of a `seedpool tune` experiment: one seedpool run, driven through its run object.

`Member` holds the run (`seedpool.experiment.training.Training`): it builds it, or loads the
member's own run folder; takes a better member's weights and optimizer state (PBT's exploit:
`Training.load_weights` of the checkpoint Ray Tune hands over, counters, envs and replay staying
the member's own) and new hyperparameters (explore: `Training.set_hyperparameters`); advances it
to the next report and saves it. Ray Tune's function trainables (`pbt_trainable`,
`search_trainable`) drive a member and report each step with a checkpoint (`tune.report`).

Under PBT an exploit restarts the trainable, and Ray Tune often starts it in a new process.
So each PBT member lives in an actor of its own (`MemberHost`, created by the driver and
named after the experiment and the member), which outlives its trainable: the restarted
trainable finds the run where it was, envs and all, and only the weights and hyperparameters
change. A search's trials never exploit, so each holds its member itself.

A member stops early, with a checkpoint, once the experiment's `StopFlag` is set (the
driver's Ctrl-C); it then reports that checkpoint and waits to be stopped by Ray Tune, so
that `Tuner.restore` continues it.
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import ray
from ray import tune

from seedpool.tune.options import EPISODE_RETURN, ExperimentSpec

NAMESPACE = "seedpool-tune"
CHECKPOINT = "checkpoint.pt"
MEMBER_FILE = "member.json"
MEMBER_PREFIX = "member-"  # a trial's folder: member-3
POLL_S = 0.5  # how often a member asks whether the experiment is stopping


def host_name(spec: ExperimentSpec, member: int) -> str:
    """The Ray actor name of member ``member``'s `MemberHost`."""
    return f"seedpool-tune-{Path(spec.dir).name}-member-{member}"


def stop_flag_name(spec: ExperimentSpec) -> str:
    return f"seedpool-tune-{Path(spec.dir).name}-stop"


class StopFlag:
    """Set once by the driver on Ctrl-C; every member reads it between updates (a Ray actor)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Member:
    """One member's run: `start` attaches it to a trial's hyperparameters and checkpoint,
    `advance` trains it to the next report and returns what to report."""

    def __init__(self, spec: dict[str, Any], index: int) -> None:
        self.spec, self.index = ExperimentSpec(**spec), index
        self.run: Any = None  # the Training, while open
        self.builds = 0  # runs built or loaded from a folder by this member (a restart does neither)
        self._copied: tuple[int, int] | None = None  # (member, env steps) of the weights taken at start
        self._stop, self._polled, self._flag = False, 0.0, None

    def start(self, values: dict[str, Any], checkpoint: Any | None) -> dict[str, Any]:
        """Ready the run for a trial with ``values`` and Ray Tune's ``checkpoint`` (None at the
        first start): the live run when there is one, else the member's folder, else a new run;
        another member's checkpoint is PBT's exploit: its weights replace this run's."""
        self._copied = None
        if checkpoint is None:
            self._ensure_run(values)
        else:
            with checkpoint.as_directory() as folder:
                source = json.loads((Path(folder) / MEMBER_FILE).read_text())
                self._ensure_run(values)
                if source["member"] != self.index:
                    self.run.load_weights(Path(folder) / CHECKPOINT)
                    self._copied = (int(source["member"]), int(source["env_steps"]))
        if self.spec.scheduler == "pbt":
            self.run.set_hyperparameters(**values)
        return {"env_steps": self.run.step, "builds": self.builds, "run_dir": str(self.run.dir)}

    def advance(self, to_step: int) -> dict[str, Any]:
        """Train to ``to_step`` env steps (further while the metric has no value yet), save, and
        return the report: env steps, metric, whether the run is done or stopping, the checkpoint's files."""
        self._ensure_run({})  # a member that finished or stopped is loaded from its folder again
        run = self.run
        while True:
            run.advance(to_step, until=lambda _: self._stopping())
            value = self._metric()
            stopping = self._stopping() and not run.done
            if math.isfinite(value) or run.done or stopping or to_step >= self.spec.total_timesteps:
                break
            to_step = min(to_step + self.spec.perturbation_interval, self.spec.total_timesteps)
        report = {"env_steps": run.step, "metric": value, "done": run.done, "stopping": stopping,
                  "run_dir": str(run.dir), "builds": self.builds,
                  "copied_from": self._copied[0] if self._copied else None,
                  "copied_at": self._copied[1] if self._copied else None}
        self._copied = None
        if run.done:
            run.finish()  # last checkpoint, curves.png and the summary in the member's folder
            self.run = None
        elif stopping:
            run.close()  # envs closed, last checkpoint written
            self.run = None
        else:
            run.save()
        report["files"] = {CHECKPOINT: (Path(report["run_dir"]) / CHECKPOINT).read_bytes(),
                           MEMBER_FILE: json.dumps({"member": self.index, "env_steps": report["env_steps"]}).encode()}
        return report

    def close(self) -> None:
        """Close the run if open (no further checkpoint: the last report's stands)."""
        if self.run is not None:
            self.run.close(failed=True)
            self.run = None

    # -- internals ----------------------------------------------------------------------------
    def _ensure_run(self, values: dict[str, Any]) -> None:
        if self.run is not None:
            return
        from seedpool.runs import build_run, load_run

        folder = self._own_folder()
        self.run = load_run(folder) if folder is not None else \
            build_run(self.spec.algo, self.spec.member_config(self.index, values))
        self.builds += 1

    def _own_folder(self) -> Path | None:
        """The member's run folder, if a checkpoint was written there (an earlier session's)."""
        parent = Path(self.spec.dir) / "members" / str(self.index)
        found = sorted(p for p in parent.glob("*") if (p / CHECKPOINT).is_file()) if parent.is_dir() else []
        return found[-1] if found else None

    def _metric(self) -> float:
        if self.spec.metric == EPISODE_RETURN:
            return float(self.run.recent_return)
        return float(self.run.metrics.get(self.spec.metric, math.nan))

    def _stopping(self) -> bool:
        if self._stop or time.monotonic() - self._polled < POLL_S:
            return self._stop
        self._polled = time.monotonic()
        try:
            if self._flag is None:
                self._flag = ray.get_actor(stop_flag_name(self.spec), namespace=NAMESPACE)
            self._stop = bool(ray.get(self._flag.is_set.remote(), timeout=30))
        except Exception:  # noqa: BLE001 - no flag (or no driver): nothing asked this member to stop
            pass
        return self._stop


MemberHost = ray.remote(Member)
"""`Member` as a Ray actor: a PBT member's run outlives its trainable's restarts."""


def member_index() -> int:
    """This trial's member number, from its folder's name (``member-3``, given when the trial was
    created): PBT's exploit copies the better member's whole config, a number in it included."""
    return int(Path(tune.get_context().get_trial_dir()).name[len(MEMBER_PREFIX):])


def pbt_trainable(config: dict[str, Any], spec: dict[str, Any]) -> None:
    """Ray Tune's function trainable of a PBT member: drives the member's `MemberHost`."""
    index = member_index()
    values = {k: v for k, v in config.items() if k != "member"}
    host = ray.get_actor(host_name(ExperimentSpec(**spec), index), namespace=NAMESPACE)
    started = ray.get(host.start.remote(values, tune.get_checkpoint()))
    _drive(lambda step: ray.get(host.advance.remote(step)), ExperimentSpec(**spec), index, values,
           started["env_steps"])


def search_trainable(config: dict[str, Any], spec: dict[str, Any]) -> None:
    """Ray Tune's function trainable of a search trial: the member's run lives in this process."""
    index = member_index()
    member = Member(spec, index)
    try:
        started = member.start(dict(config), tune.get_checkpoint())
        _drive(member.advance, ExperimentSpec(**spec), index, dict(config), started["env_steps"])
    finally:
        member.close()


def _drive(advance: Callable[[int], dict[str, Any]], spec: ExperimentSpec, index: int,
           values: dict[str, Any], step: int) -> None:
    """From env step ``step``, advance to each report (every perturbation interval) and report
    it with a checkpoint, until the budget is spent; after a stop, wait for Ray Tune to end this trial."""
    while True:
        target = min(spec.total_timesteps, (step // spec.perturbation_interval + 1) * spec.perturbation_interval)
        report = advance(target)
        files = report.pop("files")
        metrics = {**report, "member": index, "hyperparameters": values}
        with tempfile.TemporaryDirectory(prefix="seedpool-tune-") as folder:
            for name, data in files.items():
                (Path(folder) / name).write_bytes(data)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))
        if report["done"]:
            return
        if report["stopping"]:
            while True:  # returning would end the trial: Ray Tune stops it (and restores it later)
                time.sleep(60)
        step = report["env_steps"]
