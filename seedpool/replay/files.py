"""A replay's contents in one ``.npz`` file, written atomically, read back without pickle.

``state_dict()`` of a replay is nested dicts of NumPy arrays, numbers and strings; the file
holds it flattened (keys joined with "/"), so it loads with ``allow_pickle=False``: a
foreign file cannot run code. Trainers write it next to their checkpoint when asked
(``--save-replay``), so a resumed run continues with its experience.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

REPLAY_FILE = "replay.npz"
"""The file name trainers use in a run folder."""


def save_replay_file(path: Path, replay: Any) -> None:
    """Write ``replay.state_dict()`` to ``path`` atomically (temporary file, fsync, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **_flat(replay.state_dict()))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_replay_file(path: Path, replay: Any) -> None:
    """Refill ``replay`` from `save_replay_file`'s file (it must be built with the same settings)."""
    with np.load(Path(path), allow_pickle=False) as data:
        replay.load_state_dict(_nest({k: data[k] for k in data.files}))


def _flat(state: dict, prefix: str = "") -> dict[str, np.ndarray]:
    """Nested dicts as one level, keys joined with "/"."""
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = np.asarray(v)
    return out


def _nest(flat: dict[str, np.ndarray]) -> dict:
    """The inverse of `_flat`; 0-d arrays back to scalars."""
    out: dict = {}
    for key, v in flat.items():
        *parents, leaf = key.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v[()] if v.ndim == 0 else v
    return out
