"""`seedpool tune`: check the options, start (or join) Ray, run Ray Tune, write the results.

    seedpool tune ppo --env CartPole-v1 --pbt --tune.space 'learning_rate=loguniform(1e-4,1e-2)'
    seedpool tune --resume runs/tune__CartPole-v1__ppo__pbt__...

Everything the command line can get wrong is checked before Ray starts (`build_spec`,
`check_metric`). Ctrl-C asks every member to stop at its next update with a checkpoint
(`StopFlag`); once each has reported it, Ray Tune is told to stop (its own interrupt, SIGUSR1),
saves the experiment's state and ends the trials, so `Tuner.restore` continues them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from seedpool.errors import ConfigError
from seedpool.tune import results
from seedpool.tune.options import (
    ExperimentSpec, TuneArgs, build_spec, check_metric, parse_tune_args, split_argv,
)

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
INSTALL_HINT = "pip install 'seedpool[tune]'"


def main(argv: list[str]) -> int:
    """`seedpool tune ...` (argv without "seedpool tune"); returns the exit code."""
    spec, address, resume = parse(argv)
    return run_experiment(spec, address, resume)


def parse_options(argv: list[str]) -> ExperimentSpec | TuneArgs:
    """The checked experiment of a command line (nothing runs, no folder is read or made; a
    rare --metric is not probed); for ``--resume`` only its parsed options."""
    if any(a in ("-h", "--help") for a in argv):
        parse_tune_args(["--help"])
    algo = argv[0] if argv and not argv[0].startswith("-") else None
    mine, theirs = split_argv(argv[1:] if algo else argv)
    args = parse_tune_args(mine)
    return args if args.resume is not None else build_spec(args, algo, theirs, folder=None)


def parse(argv: list[str]) -> tuple[ExperimentSpec, str | None, bool]:
    """(the checked experiment, the Ray address, whether it resumes); a new experiment's folder is chosen, not made."""
    if any(a in ("-h", "--help") for a in argv):
        parse_tune_args(["--help"])
    algo = argv[0] if argv and not argv[0].startswith("-") else None
    mine, theirs = split_argv(argv[1:] if algo else argv)
    args = parse_tune_args(mine)
    if args.resume is not None:
        return _resume_spec(args, algo, theirs), args.ray_address, True
    spec = build_spec(args, algo, theirs, folder=None)
    check_metric(spec)
    cfg = spec.base_config()
    spec.dir = str(_new_folder(Path(cfg.runs_dir), cfg.env, spec.algo, spec.scheduler).resolve())
    return spec, args.ray_address, False


def _resume_spec(args: TuneArgs, algo: str | None, theirs: list[str]) -> ExperimentSpec:
    given = [f.name for f in dataclasses.fields(TuneArgs)
             if f.name not in ("resume", "ray_address") and getattr(args, f.name) != getattr(TuneArgs(), f.name)]
    if algo is not None or theirs or given:
        extra = [algo] if algo else []
        raise ConfigError(f"--resume continues an experiment with its own options; only --ray-address may be "
                          f"given with it (got {' '.join(extra + theirs) or ', '.join(given)})")
    spec = ExperimentSpec.load(args.resume)
    if not list(Path(args.resume).glob("experiment_state-*.json")):
        raise ConfigError(f"{args.resume} holds no Ray Tune state to continue (it stopped before its first report)")
    spec.dir = str(Path(args.resume).resolve())  # the folder may have moved
    return spec


def _new_folder(runs_dir: Path, env: str, algo: str, scheduler: str) -> Path:
    safe_env = "".join(c if c.isalnum() or c in "._-" else "-" for c in env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = runs_dir / f"tune__{safe_env}__{algo}__{scheduler}__{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = runs_dir / f"tune__{safe_env}__{algo}__{scheduler}__{stamp}-{n}"
    return path


def run_experiment(spec: ExperimentSpec, address: str | None, resume: bool) -> int:
    """Run (or continue) the experiment to its end or a Ctrl-C; Ray is shut down in every case."""
    ray = _import_ray()
    from seedpool.tune import launch

    # The console gets seedpool's lines (a report per member, the table, how to resume); Ray
    # Tune's own progress tables and its restore hint name its Python API, not this command.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    logging.getLogger("ray.tune.tune").addFilter(_NotTheStopList())

    folder = Path(spec.dir)
    folder.mkdir(parents=True, exist_ok=True)
    ours = launch.connect(address)
    try:
        if spec.cpus_per_member is None:
            spec.cpus_per_member = launch.default_cpus(spec, address)
        spec.save()
        with launch.actors(spec) as flag:
            session = launch.SESSIONS[folder.name] = launch.Session(spec, flag)
            print(f"[seedpool] tune: {spec.scheduler} of {spec.population} {spec.algo} members, "
                  f"{spec.total_timesteps:,} env steps each, tuning {', '.join(spec.space)}; "
                  f"experiment folder {folder}", flush=True)
            try:
                with _sigint(session):
                    grid = launch.tuner(spec, resume).fit()
            finally:
                launch.SESSIONS.pop(folder.name, None)
        return _finish(spec, grid, session.interrupted)
    finally:
        if ours:
            ray.shutdown()


def _finish(spec: ExperimentSpec, grid: Any, interrupted: bool) -> int:
    """Write best.json and population.png, print the table; say how to resume after a Ctrl-C."""
    folder = Path(spec.dir)
    reports = results.load_reports(folder)
    results.write_best(folder, reports, spec.mode)
    plot = results.plot_population(folder, reports, spec.metric)
    print(results.table(reports, spec.names, spec.metric, spec.mode))
    print(f"[seedpool] results: {folder / results.RESULTS}, {folder / results.BEST}"
          + (f", {plot}" if plot else ""))
    errors = [r for r in grid if r.error is not None]
    if interrupted:
        print(f"[seedpool] stopped; continue with: seedpool tune --resume {folder}")
        return EXIT_INTERRUPTED
    if errors:
        first = str(errors[0].error).strip().splitlines()
        print(f"seedpool: error: {len(errors)} member(s) failed; the first with: {first[-1] if first else '?'} "
              f"(its traceback: {errors[0].path}/error.txt)", file=sys.stderr)
        return EXIT_FAILED
    return 0


class _NotTheStopList(logging.Filter):
    """Drops Ray Tune's "Trials did not complete" line: after a Ctrl-C it lists every stopped
    member, and a failed one is reported with its error by `_finish`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Trials did not complete")


def _import_ray() -> Any:
    try:
        import ray
        import ray.tune  # noqa: F401
        import optuna  # noqa: F401
    except ImportError as err:
        raise ConfigError(f"seedpool tune needs Ray Tune and Optuna ({err.name} is missing): {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def _sigint(session: Any) -> Iterator[None]:
    """While Ray Tune runs: the first Ctrl-C stops the members with a checkpoint, a second quits."""
    def handler(signum, frame):
        if session.interrupted:
            raise KeyboardInterrupt
        session.interrupted = True
        print("[seedpool] Ctrl-C: every member stops at its next update and saves a checkpoint "
              "(Ctrl-C again to quit at once)", file=sys.stderr, flush=True)

    old_env = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # Ray Tune's would stop the trials without their last checkpoint
    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if old_env is None:
            os.environ.pop("TUNE_DISABLE_SIGINT_HANDLER", None)
        else:
            os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = old_env
