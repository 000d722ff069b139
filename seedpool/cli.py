"""`seedpool` command line: train, eval, plot, bench, tune.

    seedpool train ppo --env CartPole-v1 [--seed 1 --total-timesteps 100000 ...]
    seedpool train ppo --resume runs/CartPole-v1__ppo__1__... [--total-timesteps N]
    seedpool train ppo --env Pong-v5 --dry-run   (print the resolved config, train nothing)
    seedpool eval RUN_DIR [--episodes 10] [--video]
    seedpool plot RUN_DIR... [--out curves.png]
    seedpool bench ...
    seedpool tune ppo --env CartPole-v1 --pbt --tune.space 'learning_rate=loguniform(1e-4,1e-2)'

Each training algorithm is one entry of ``TRAINERS`` (`seedpool.algorithms`): its config
class, its per-env defaults and its train function (see docs/training.md to add one).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import os
import platform
import shlex
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import tyro

from seedpool.algorithms import TRAINERS, Trainer
from seedpool.algorithms import load as _load
from seedpool.errors import SeedpoolError

USAGE = """usage: seedpool {train,eval,plot,bench,tune} ...

  seedpool train ALGO --env ID [options]   train (ALGO: %s); --help lists the options
  seedpool train ALGO --resume RUN_DIR     continue a stopped run in its folder
  seedpool train ALGO ... --dry-run        print the resolved config as JSON and exit
  seedpool eval RUN_DIR [--episodes N] [--video]
  seedpool plot RUN_DIR... [--out PNG]
  seedpool bench [options]                 engine and end-to-end throughput
  seedpool tune ALGO --env ID --pbt|--search --tune.space RANGE...   PBT or a search on Ray Tune
  seedpool tune --resume DIR               continue a stopped tune experiment
"""


EXIT_BUG = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class UsageError(SeedpoolError):
    """Bad command-line input; the message says what to do."""


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in argv (the last one wins)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def train_config(algo: str, argv: list[str]) -> Any:
    """Parse ``seedpool train ALGO`` options on top of the env's (or the resumed run's) defaults."""
    from seedpool.experiment import config_from_dict, read_run_config
    from seedpool.experiment.config import upgrade_argv
    from seedpool.experiment.legacy_options import apply_converted, take_converted

    if algo not in TRAINERS:
        raise UsageError(f"unknown algorithm {algo!r}; available: {', '.join(TRAINERS)}")
    entry = TRAINERS[algo]
    cls = _load(entry.config)
    if entry.renamed is not None:
        argv = upgrade_argv(argv, _load(entry.renamed))
    try:  # an old option whose value converts waits for the options it converts with
        argv, converted = take_converted(argv, _load(entry.converted) if entry.converted else ())
    except ValueError as err:
        raise UsageError(str(err)) from None
    resume, core = _option(argv, "--resume"), _option(argv, "--model.core")
    if resume is not None:
        run_algo, data = read_run_config(Path(resume))
        if run_algo != algo:
            raise UsageError(f"{resume} is a '{run_algo}' run: resume it with "
                             f"`seedpool train {run_algo} --resume {resume}`")
        if entry.upgrade is not None:
            data = _load(entry.upgrade)(data)
        default = config_from_dict(cls, {**data, "resume": resume})
        env = _option(argv, "--env")
        if env is not None and env != default.env:
            raise UsageError(f"{resume} trains {default.env}; a resumed run cannot switch to {env}. "
                             "Start a new run for another env")
    else:
        default = _defaults(entry, _option(argv, "--env") or cls().env, core)
    given = f" --model.core {core}" if core is not None else ""
    cfg = tyro.cli(cls, default=default, args=argv, prog=f"seedpool train {algo}",
                   description=f"Train {algo.upper()}; defaults shown are those for --env {default.env}{given}.")
    return apply_converted(cfg, converted)


def _defaults(entry: Trainer, env_id: str, core: str | None) -> Any:
    """The algorithm's defaults for ``env_id``, and for the recurrent core ``--model.core`` names
    where its defaults function takes one: what a core needs to learn follows from that option."""
    defaults = _load(entry.defaults)
    if core is None or "core" not in inspect.signature(defaults).parameters:
        return defaults(env_id)
    return defaults(env_id, core=core)


@dataclass
class EvalArgs:
    """Evaluate a run's saved policy."""

    run_dir: tyro.conf.Positional[Path]
    """The run folder (runs/<env>__<algo>__<seed>__<time>)."""
    episodes: int = 10
    """Episodes to average over."""
    video: bool = False
    """Also write a video of one episode to RUN_DIR/videos/."""
    deterministic: bool = False
    """Take the most likely action instead of sampling."""
    seed: int = 10_000
    """Seed of the evaluation envs (different from training's)."""
    device: str = "cpu"
    """Torch device for the policy."""
    against: str | None = None
    """Play games instead: against "league" (each member of the run's), "random", a run folder or
    checkpoint of the same game, or a scripted "module:function"; --episodes games per opponent,
    every seat equally (docs/selfplay.md)."""
    json: bool = False
    """With --against: print one JSON line (wins, draws, losses, games, ...)."""


@dataclass
class PlotArgs:
    """Draw learning curves of one or several runs; runs of the same env and algo are shaded together."""

    run_dirs: tyro.conf.Positional[list[Path]]
    """Run folders."""
    out: Path | None = None
    """PNG to write (default: curves.png in the run folder for one run, ./curves.png for several)."""


DRY_RUN = "--dry-run"


def cmd_train(argv: list[str]) -> int:
    """`seedpool train ALGO ...`; with ``--dry-run``, print the resolved config and train nothing."""
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"say which algorithm to train: seedpool train {{{','.join(TRAINERS)}}} --env ID")
    dry_run = DRY_RUN in argv
    cfg = train_config(argv[0], [arg for arg in argv[1:] if arg != DRY_RUN])
    if dry_run:
        from seedpool.experiment.config import config_to_dict

        print(json.dumps({"algo": argv[0], "config": config_to_dict(cfg)}, indent=2))
        return 0
    result = _load(TRAINERS[argv[0]].train)(cfg)
    return EXIT_INTERRUPTED if result.interrupted else 0


def cmd_eval(argv: list[str]) -> int:
    """`seedpool eval RUN_DIR ...`."""
    from seedpool.experiment.evaluate import evaluate_run, record_video

    args = tyro.cli(EvalArgs, args=argv, prog="seedpool eval")
    if args.against is not None:
        return _load("seedpool.league.match:eval_command")(args)
    res = evaluate_run(args.run_dir, args.episodes, args.seed, args.deterministic, args.device)
    print(f"{args.run_dir}: return {res.mean:.2f} +- {res.std:.2f} over {len(res.returns)} episodes "
          f"(mean length {sum(res.lengths) / len(res.lengths):.0f})")
    if args.video:
        path = record_video(args.run_dir, args.run_dir / "videos" / "episode.mp4", args.seed, args.deterministic)
        print(f"video: {path}")
    return 0


def cmd_plot(argv: list[str]) -> int:
    """`seedpool plot RUN_DIR... [--out PNG]`."""
    from seedpool.experiment.plot import plot_runs

    args = tyro.cli(PlotArgs, args=argv, prog="seedpool plot")
    out = args.out or (args.run_dirs[0] / "curves.png" if len(args.run_dirs) == 1 else Path("curves.png"))
    print(f"plot: {plot_runs(args.run_dirs, out)}")
    return 0


def cmd_bench(argv: list[str]) -> int:
    """`seedpool bench ...`: the engine benchmark (seedpool.bench)."""
    try:
        bench = importlib.import_module("seedpool.bench")
    except ModuleNotFoundError as err:
        if err.name not in ("seedpool.bench", "seedpool"):
            raise
        raise UsageError("seedpool bench is not available in this version (no seedpool.bench module)") from None
    return int(bench.main(argv) or 0)


def cmd_tune(argv: list[str]) -> int:
    """`seedpool tune ...`: population-based training or a search on Ray Tune (seedpool.tune)."""
    return int(_load("seedpool.tune.driver:main")(argv))


def parse_command(argv: list[str]) -> Any:
    """The parsed options of a `seedpool` command line (``argv`` without "seedpool"); nothing runs.

    `train` gives the resolved training config (reading the run folder of ``--resume``),
    `eval`, `plot` and `bench` their argument dataclasses, `tune` its checked experiment
    (without the probe run a rare ``--metric`` needs, and not reading ``--resume``'s folder).
    Bad input raises `UsageError` (or tyro's `SystemExit(2)` for an unknown option); ``--help``
    exits with 0.
    """
    if not argv or argv[0] not in COMMANDS:
        raise UsageError(f"expected a command ({', '.join(COMMANDS)}), got {argv[:1]}")
    command, rest = argv[0], [arg for arg in argv[1:] if arg != DRY_RUN]
    if command == "train":
        if not rest or rest[0].startswith("-"):
            raise UsageError(f"say which algorithm to train: seedpool train {{{','.join(TRAINERS)}}} --env ID")
        return train_config(rest[0], rest[1:])
    if command == "eval":
        return tyro.cli(EvalArgs, args=rest, prog="seedpool eval")
    if command == "plot":
        return tyro.cli(PlotArgs, args=rest, prog="seedpool plot")
    if command == "tune":
        return _load("seedpool.tune.driver:parse_options")(rest)
    return tyro.cli(importlib.import_module("seedpool.bench").BenchArgs, args=rest, prog="seedpool bench")


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "train": cmd_train, "eval": cmd_eval, "plot": cmd_plot, "bench": cmd_bench, "tune": cmd_tune,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `seedpool` script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(USAGE % ", ".join(TRAINERS), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"seedpool: unknown command {argv[0]!r}", file=sys.stderr)
            return EXIT_BAD_INPUT
        return 0 if argv else EXIT_BAD_INPUT
    return run_command(COMMANDS[argv[0]], argv[1:])


def run_command(command: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a subcommand. Bad input (a `SeedpoolError`, also when a run's thread failed with one)
    becomes a one-line message and exit code 2; any other exception is a defect in seedpool:
    its traceback, a line saying what to report, and exit code 1."""
    try:
        return command(argv)
    except KeyboardInterrupt:
        print("seedpool: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - every failure ends in a message and an exit code
        if isinstance(err, SeedpoolError) or isinstance(err.__cause__, SeedpoolError):
            if os.environ.get("SEEDPOOL_DEBUG"):
                raise
            print(f"seedpool: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        traceback.print_exc()
        name = next((key for key, value in COMMANDS.items() if value is command), "")
        print(bug_report(["seedpool", name, *argv]), file=sys.stderr)
        return EXIT_BUG


def bug_report(command_line: list[str]) -> str:
    """The line printed under an unexpected exception's traceback: what to include in a report."""
    versions = [f"Python {platform.python_version()}"]
    for package in ("seedpool", "torch", "numpy", "gymnasium"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    return ("seedpool: internal error: this is a bug in seedpool, not in your input. Please report it "
            f"with the command line ({shlex.join(command_line)}), the versions ({', '.join(versions)}) "
            "and the traceback above.")


if __name__ == "__main__":
    sys.exit(main())
