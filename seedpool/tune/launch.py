"""Ray and Ray Tune's side of `seedpool tune`: the connection, the actors (stop flag, PBT member
hosts), the `Tuner` with its scheduler or search algorithm, and the callback that records reports."""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import ray
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler

from seedpool.errors import ConfigError
from seedpool.tune import results
from seedpool.tune.member import (
    MEMBER_PREFIX, NAMESPACE, MemberHost, StopFlag, host_name, pbt_trainable, search_trainable, stop_flag_name,
)
from seedpool.tune.options import ExperimentSpec
from seedpool.tune.space import Range



def connect(address: str | None) -> bool:
    """Start Ray in this process (``address`` None) or join the cluster; False if already connected.
    The members' own output stays in Ray's logs: the console gets one line per report."""
    if ray.is_initialized():
        return False
    try:
        if address is None:
            # "local": a Ray of its own, even where `ray start` left a cluster running on this machine.
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
                     logging_level=logging.WARNING, namespace=NAMESPACE, log_to_driver=False)
        else:
            ray.init(address=address, logging_level=logging.WARNING, namespace=NAMESPACE, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ConfigError(f"cannot connect to a Ray cluster at {address!r} ({type(err).__name__}: {err}); "
                          "start one with `ray start --head` and pass --ray-address auto (docs/tune.md)") from err
    return True


def default_cpus(spec: ExperimentSpec, address: str | None) -> float:
    """CPUs a member reserves: this machine's cores shared by the population, or one on a cluster."""
    if address is not None:
        return 1.0
    return max(0.01, math.floor(100 * (os.cpu_count() or 1) / spec.population) / 100)


@contextlib.contextmanager
def actors(spec: ExperimentSpec) -> Iterator[Any]:
    """The experiment's stop flag and, under PBT, one `MemberHost` per member; all killed on leaving."""
    flag = ray.remote(StopFlag).options(name=stop_flag_name(spec), num_cpus=0).remote()
    hosts = []
    try:
        if spec.scheduler == "pbt":
            # A host reserves no CPU: its trial reserves the member's share (Ray Tune's bookkeeping of
            # which members fit), and spreading puts hosts on every node of a cluster.
            hosts = [MemberHost.options(name=host_name(spec, k), num_cpus=0, scheduling_strategy="SPREAD")
                     .remote(_spec_dict(spec), k) for k in range(spec.population)]
        yield flag
    finally:
        for actor in [*hosts, flag]:
            with contextlib.suppress(Exception):
                ray.kill(actor)


def tuner(spec: ExperimentSpec, resume: bool) -> tune.Tuner:
    """Ray Tune's `Tuner` for the experiment, or the restored one of its folder."""
    folder = Path(spec.dir)
    function = pbt_trainable if spec.scheduler == "pbt" else search_trainable
    trainable = tune.with_resources(tune.with_parameters(function, spec=_spec_dict(spec)),
                                    {"cpu": spec.cpus_per_member})
    if resume:
        return tune.Tuner.restore(str(folder), trainable=trainable, resume_unfinished=True, resume_errored=True)
    ranges = spec.ranges()
    run_config = tune.RunConfig(
        name=folder.name, storage_path=str(folder.parent), verbose=0, callbacks=[Recorder(spec.dir)],
        # Every checkpoint is kept: PBT hands a restarting member the checkpoint of the report
        # where it was outranked, which its better member may have long left behind.
        failure_config=tune.FailureConfig(max_failures=0))
    if spec.scheduler == "pbt":
        initial = spec.initial
        space = {"member": tune.grid_search(list(range(spec.population)))}
        for r in ranges:
            space[r.path] = tune.sample_from(_Initial(initial, r.path))
        pbt = _PopulationBasedTraining(
            spec.population * spec.cpus_per_member <= _cluster_cpus() + 1e-9,
            time_attr="env_steps", perturbation_interval=spec.perturbation_interval,
            hyperparam_mutations={r.path: r.mutation() for r in ranges},
            custom_explore_fn=_Clamp(ranges), log_config=False)
        tune_config = tune.TuneConfig(metric="metric", mode=spec.mode, scheduler=pbt, num_samples=1,
                                      trial_dirname_creator=_Numbering(spec.dir))
    else:
        from ray.tune.search import ConcurrencyLimiter
        from ray.tune.search.optuna import OptunaSearch

        space = {r.path: r.domain() for r in ranges}
        search = ConcurrencyLimiter(OptunaSearch(seed=spec.seed), max_concurrent=spec.population)
        tune_config = tune.TuneConfig(metric="metric", mode=spec.mode, search_alg=search,
                                      num_samples=spec.num_samples, trial_dirname_creator=_Numbering(spec.dir))
    return tune.Tuner(trainable, param_space=space, tune_config=tune_config, run_config=run_config)


class Session:
    """This process's side of a running experiment: its reports go to the experiment folder and
    the console; on Ctrl-C (``interrupted``) it sets the stop flag, waits for every running
    member's last checkpoint, then lets Ray Tune stop (SIGUSR1, Ray Tune's own interrupt)."""

    def __init__(self, spec: ExperimentSpec, flag: Any) -> None:
        self.spec, self.names, self.flag = spec, spec.names, flag
        self.interrupted = False
        self._stop_sent_at: float | None = None
        self._stopped: set[str] = set()  # trials that reported their last checkpoint after the stop
        self._told_tune = False

    def on_result(self, trial: Any, result: dict) -> None:
        nested = result.get("hyperparameters") or {}
        hp = {n: result.get(f"hyperparameters/{n}", nested.get(n)) for n in self.names}
        report = {k: result.get(k) for k in ("member", "env_steps", "metric", "copied_from", "copied_at",
                                             "run_dir", "stopping", "done", "builds")}
        report["hyperparameters"] = hp
        results.append_report(Path(self.spec.dir), self.names, report)
        if report["stopping"]:
            self._stopped.add(trial.trial_id)
        values = ", ".join(f"{n.rsplit('.', 1)[-1]} {results.fmt(v)}" for n, v in hp.items())
        copied = f", weights of member {report['copied_from']}" if report["copied_from"] is not None else ""
        print(f"[seedpool] member {report['member']} at {report['env_steps']:,} env steps: "
              f"{self.spec.metric} {report['metric']:.4g} ({values}{copied})", flush=True)

    def on_step(self, trials: list) -> None:
        if not self.interrupted or self._told_tune:
            return
        if self._stop_sent_at is None:
            self.flag.set.remote()
            self._stop_sent_at = time.monotonic()
        running = [t for t in trials if t.status == "RUNNING" and t.trial_id not in self._stopped]
        if not running or time.monotonic() - self._stop_sent_at > SETTLE_S:
            self._told_tune = True
            signal.raise_signal(signal.SIGUSR1)


SESSIONS: dict[str, Session] = {}
"""Experiment folder's name -> its live `Session` in this process. A restored Tuner brings its
`Recorder` and `_Numbering` back from tuner.pkl, without any state and with the folder's old
path (a folder may move between sessions): they find the session here, by the folder's name."""


def session(folder: str) -> Session:
    return SESSIONS[Path(folder).name]


class Recorder(tune.Callback):
    """Ray Tune's callback of an experiment: hands every report and loop step to its `Session`."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        session(self.folder).on_result(trial, result)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        session(self.folder).on_step(trials)


SETTLE_S = 300.0  # how long a Ctrl-C waits for the members' last checkpoints


class _PopulationBasedTraining(PopulationBasedTraining):
    """Ray Tune's PBT. When the whole population fits at once, a member reaching its perturbation
    interval keeps running although another is pending (a member restarting after an exploit):
    the pause Ray Tune's PBT would give it only makes room on a cluster too small for everyone."""

    def __init__(self, all_fit: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._all_fit = all_fit

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        decision = super().on_trial_result(tune_controller, trial, result)
        if self._all_fit and decision == TrialScheduler.PAUSE:
            return TrialScheduler.CONTINUE
        return decision


class _Clamp:
    """PBT's explore step after its own: each perturbed value back inside its range (Ray Tune's
    PBT scales by 0.8 or 1.2 without looking at the bounds)."""

    def __init__(self, ranges: list[Range]) -> None:
        self.ranges = ranges

    def __call__(self, config: dict) -> dict:
        for r in self.ranges:
            config[r.path] = r.clamp(config[r.path])
        return config


class _Initial:
    """A member's first value of one option (Ray Tune's sample_from: the member index is resolved first)."""

    def __init__(self, initial: list[dict[str, Any]], path: str) -> None:
        self.initial, self.path = initial, path

    def __call__(self, config: dict) -> Any:
        return self.initial[int(config["member"])][self.path]


class _Numbering:
    """Ray Tune's trial_dirname_creator: member-K, K a trial's member number. Under PBT it is the
    member the grid made the trial; a search numbers its trials in the order they are created,
    in a file of the experiment folder, so that numbers go on after a resume."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, trial: Any) -> str:
        if "member" in trial.config:
            return f"{MEMBER_PREFIX}{int(trial.config['member'])}"
        path = Path(session(self.folder).spec.dir) / "members.json"
        numbers = json.loads(path.read_text()) if path.is_file() else {}
        numbers.setdefault(trial.trial_id, len(numbers))
        path.write_text(json.dumps(numbers))
        return f"{MEMBER_PREFIX}{numbers[trial.trial_id]}"


def _cluster_cpus() -> float:
    return float(ray.cluster_resources().get("CPU", 0.0))


def _spec_dict(spec: ExperimentSpec) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(spec)
