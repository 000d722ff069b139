"""What a run leaves in ./runs/: config, metrics, checkpoints, progress, plots, eval, summary.

Every trainer (PPO, IMPALA, ...) uses these pieces; none of them knows the algorithm.
See docs/training.md for how a trainer plugs in.
"""
from __future__ import annotations

import random

import numpy as np
import torch

from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import (
    CheckpointError, load_checkpoint, rng_state, save_checkpoint, set_rng_state,
)
from seedpool.experiment.config import RunConfig, config_from_dict, config_to_dict
from seedpool.experiment.run import (
    CHECKPOINT_FILE, CONFIG_FILE, Run, RunDirError, RunResult, read_run_config,
)
from seedpool.kernels import keep_freed_memory

__all__ = [
    "CHECKPOINT_FILE", "CONFIG_FILE", "CheckpointError", "Run", "RunConfig", "RunDirError", "RunResult",
    "config_from_dict", "config_to_dict", "finish_run", "load_checkpoint", "read_run_config",
    "rng_state", "save_checkpoint", "set_rng_state", "setup_torch",
]


def setup_torch(seed: int, threads: int, device: str) -> str:
    """Seed every global generator, set torch's CPU threads, keep freed memory for reuse
    (`seedpool.kernels.keep_freed_memory`), and resolve "auto" to a device."""
    keep_freed_memory()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads > 0:
        torch.set_num_threads(threads)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: this machine has no CUDA device; use --device cpu")
    return device


def finish_run(run: Run, env: str, algo: str) -> RunResult:
    """Draw the run's curves and print where everything is plus a one-paragraph summary.

    The checkpoint is written by the time this runs: a Ctrl-C while the curves are drawn skips
    the plot (it says how to draw it later) and still prints where everything is."""
    from seedpool.experiment.summary import summary_text

    result = run.result()
    try:
        from seedpool.experiment.plot import plot_runs

        result.plot = plot_runs([run.dir], run.dir / "curves.png")
    except RunDirError:  # no episode finished: there is no curve to draw
        result.plot = None
    except KeyboardInterrupt:
        result.plot = None
        print(f"[seedpool] Ctrl-C: the plot was skipped; draw it with: seedpool plot {run.dir}")
    print(f"[seedpool] run folder: {run.dir}")
    print(f"[seedpool] checkpoint: {run.dir / CHECKPOINT_FILE}")
    if result.plot is not None:
        print(f"[seedpool] plot: {result.plot}")
    print(summary_text(result, env, algo))
    if result.interrupted:
        print(f"[seedpool] continue with: seedpool train {algo} --resume {run.dir}")
    return result
