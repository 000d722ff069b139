"""Atomic checkpoints and the random-number-generator state they carry.

A checkpoint is a ``torch.save`` dict, one layout for every trainer (format version 2)::

    {"format": "seedpool-checkpoint", "version": 2, "algo": "ppo" | "impala" | "dqn" | "apex" | ...,
     "model": ...,        # the network acting and `seedpool eval` use (state_dict)
     "optimizer": ...,    # its optimizer's state_dict
     "learner": {...},    # the learner's counters (version, steps_trained) and own state
                          # (a target network, a replay loop's counters)
     "counters": {...},   # the run's counters: step, updates, episodes, time, recent returns
     "rng": {...},        # Python's, NumPy's and torch's generators
     "acting": {...} | None,   # the sampler's state where acting has one (exact resume)
     "replay": "replay.npz" | None}   # the replay's file beside it, when it was saved

:func:`trainer_state` builds it from a learner, :func:`restore_learner` loads it back. It is
written to a temporary file, flushed to disk and renamed over the old one, so a crash never
leaves a half-written checkpoint. Loading uses ``weights_only=True``: a foreign file cannot
run code. Checkpoints of format version 1 (each trainer had its own layout) are upgraded
on load.
"""
from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seedpool.errors import SeedpoolError

FORMAT = "seedpool-checkpoint"
VERSION = 2


class CheckpointError(SeedpoolError):
    """A checkpoint that cannot be used; the message says why and what to do."""


def save_checkpoint(path: Path, algo: str, state: dict[str, Any]) -> None:
    """Write ``state`` for algorithm ``algo`` to ``path`` atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    payload = {"format": FORMAT, "version": VERSION, "algo": algo, **state}
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path, algo: str | None = None, map_location: str = "cpu") -> dict[str, Any]:
    """Read a checkpoint, checking that it is seedpool's and (if given) of algorithm ``algo``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: the run stopped before its first checkpoint, "
                              "so there is nothing to resume; start a new run instead")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, pickle.UnpicklingError, ValueError) as err:
        raise CheckpointError(
            f"{path} could not be read as a checkpoint ({type(err).__name__}): it is truncated, corrupt "
            "or not written by seedpool. Resume from a run folder that seedpool wrote, or start a new run"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a seedpool checkpoint (no '{FORMAT}' marker)")
    if state.get("version") == 1:
        state = upgrade_v1(state)
    if state.get("version") != VERSION:
        raise CheckpointError(f"{path} has checkpoint format version {state.get('version')}; "
                              f"this seedpool reads versions 1 to {VERSION}: a newer seedpool wrote it")
    if algo is not None and state.get("algo") != algo:
        raise CheckpointError(
            f"{path} was written by '{state.get('algo')}', not '{algo}': "
            f"resume it with `seedpool train {state.get('algo')} --resume ...`"
        )
    return state


def trainer_state(learner_state: dict[str, Any], acting: dict[str, Any] | None = None,
                  replay: str | None = None) -> dict[str, Any]:
    """A checkpoint's content in the common layout (the run adds its counters when saving).

    ``learner_state``: a learner's ``state_dict()`` (``model`` and ``optimizer`` beside its
    counters and own state); ``acting``: the sampler's state, if it has one; ``replay``: the
    replay file's name in the run folder, if it was saved with this checkpoint.
    """
    state = dict(learner_state)
    return {"model": state.pop("model"), "optimizer": state.pop("optimizer"), "learner": state,
            "rng": rng_state(), "acting": acting, "replay": replay}


def restore_learner(checkpoint: dict[str, Any], learner) -> None:
    """Load a checkpoint's model, optimizer and learner state into a freshly built learner."""
    learner.load_state_dict({**checkpoint["learner"], "model": checkpoint["model"],
                             "optimizer": checkpoint["optimizer"]})


def upgrade_v1(state: dict[str, Any]) -> dict[str, Any]:
    """A format-1 checkpoint in today's layout.

    Format 1 had one layout per trainer: PPO kept its optimizer at the top and (in its first
    runs) no learner counters; IMPALA, DQN and Ape-X kept the optimizer inside ``learner``;
    the samplers' state was ``sampler``; a saved replay was the flag ``replay_saved``.
    """
    state = dict(state)
    learner = dict(state.get("learner") or {})
    if "optimizer" not in state:
        state["optimizer"] = learner.pop("optimizer")
    if not learner:  # PPO before the learner kept counters: it had trained on every step
        learner = {"version": state["counters"]["updates"], "steps_trained": state["counters"]["step"]}
    state["learner"] = learner
    state["acting"] = state.pop("sampler", None)
    state["replay"] = "replay.npz" if state.pop("replay_saved", False) else None
    state["version"] = VERSION
    return state


def rng_state() -> dict[str, Any]:
    """The state of Python's, numpy's and torch's global generators (CUDA too when present)."""
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        # Stored as plain values so that loading needs no pickle of numpy objects.
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore generators saved by :func:`rng_state`."""
    random.setstate(_tuples(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _tuples(x: Any) -> Any:
    """Python's random state must be nested tuples; serialisation may hand back lists."""
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x


def resume_env_seed(seed: int, checkpoint: dict[str, Any]) -> int:
    """A fresh env seed for a resumed run whose envs cannot be replayed: derived from the run's
    seed and the step it stopped at, so a resumed segment never repeats the episodes of an earlier one."""
    return seed + 1_000_003 * (1 + int(checkpoint["counters"]["step"]))


def replay_trainer_state(run_dir: Path, learner, acting, save_replay: bool) -> dict[str, Any]:
    """A replay trainer's checkpoint content (DQN, SAC, TD3): its `ReplayLearner`'s state, the
    sampler's (``acting``), and, opted in, the replay saved beside the checkpoint."""
    from seedpool.replay import REPLAY_FILE, save_replay_file

    if save_replay:
        save_replay_file(run_dir / REPLAY_FILE, learner.replay)
    return trainer_state(learner.state_dict(), acting=acting.state_dict(),
                         replay=REPLAY_FILE if save_replay else None)


def restore_replay_trainer(run_dir: Path, checkpoint: dict[str, Any], learner, acting=None) -> None:
    """Load `replay_trainer_state`'s content (and the saved replay, if any) into freshly built
    objects; ``acting`` None: a central-inference trainer, whose acting keeps no state."""
    from seedpool.replay import load_replay_file

    restore_learner(checkpoint, learner)
    if checkpoint["replay"] and (Path(run_dir) / checkpoint["replay"]).exists():
        load_replay_file(Path(run_dir) / checkpoint["replay"], learner.replay)
    if acting is not None:
        acting.load_state_dict(checkpoint["acting"])
    set_rng_state(checkpoint["rng"])
