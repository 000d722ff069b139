"""Runs as values, from Python: build one from the options ``seedpool train`` takes, or load a run folder.

    run = seedpool.build_run("ppo", ["--env", "CartPole-v1", "--seed", "2"])
    run.advance(20_000)
    run.set_hyperparameters(learning_rate=3e-4)
    run.save()
    later = seedpool.load_run(run.dir)          # in this process or another
    later.advance()

`build_run` also takes a config object (e.g. ``ppo_defaults("CartPole-v1")`` changed with
`dataclasses.replace`). The returned `Training` is documented in seedpool/experiment/training.py.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

from seedpool.experiment.training import Training


def build_run(algo: str, options: Sequence[str] | Any = (), **build_kwargs: Any) -> Training:
    """A built run of ``algo``: ``options`` are ``seedpool train ALGO`` command-line options
    (parsed on top of the env's defaults, as the CLI does) or a ready config object."""
    from seedpool.cli import train_config

    cfg = train_config(algo, list(options)) if isinstance(options, (list, tuple)) else options
    module = importlib.import_module(f"seedpool.trainers.{algo}")
    return getattr(module, f"build_{algo}")(cfg, **build_kwargs)


def load_run(run_dir: str | Path, *options: str) -> Training:
    """The run in ``run_dir`` as its last checkpoint left it, ready to advance (``options``
    override its config as on ``seedpool train ALGO --resume RUN_DIR OPTIONS``)."""
    from seedpool.experiment import read_run_config

    algo, _ = read_run_config(Path(run_dir))
    return build_run(algo, ["--resume", str(run_dir), *options])
