"""``PrioritizedReplay`` and ``UniformReplay``: a storage (plain ring or frame dedup) plus a sampler."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from seedpool.errors import ConfigError

from .frames import FrameStorage
from .samplers import PrioritizedSampler, UniformSampler, as_update
from .storage import SEP, RingStorage, coerce_batch, flatten_values, nest_values, parse_fields

FORMAT = "seedpool.replay/1"


def check_header(state: Mapping[str, Any], key: str, mine: dict[str, Any], what: str) -> None:
    """Raise ValueError unless ``state[key]`` is the JSON of header ``mine``: a checkpoint of a
    ``what`` built otherwise (or no checkpoint of one at all) would load as wrong rows."""
    try:
        theirs = json.loads(str(state[key]))
    except (KeyError, TypeError, ValueError):
        theirs = None
    if theirs != mine:
        raise ValueError(f"{what} checkpoint does not match this replay: expected {mine}, got {theirs}")


class _Replay:
    """Shared body of the two replays; subclasses only choose the sampler."""

    def __init__(self, capacity: int, fields: Mapping[str, Any], sampler: Any, frame_dedup: bool,
                 frame_capacity: int | None, reuse_window: int | None) -> None:
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ConfigError(f"capacity must be a positive int, got {capacity!r}")
        specs = parse_fields(fields)
        if frame_dedup:
            self.storage: RingStorage | FrameStorage = FrameStorage(capacity, specs, frame_capacity, reuse_window)
        else:
            if frame_capacity is not None or reuse_window is not None:
                raise ConfigError("frame_capacity and reuse_window only apply with frame_dedup=True")
            self.storage = RingStorage(capacity, specs)
        self.fields = specs
        self._nested = any(SEP in name for name in specs)  # a Dict observation: sample() nests its keys
        self.frame_dedup = bool(frame_dedup)
        self._sampler = sampler

    @property
    def capacity(self) -> int:
        """Most rows held at once."""
        return self.storage.capacity

    def __len__(self) -> int:
        """Rows that can be sampled now."""
        return self.storage.size

    def add(self, priorities: Any = None, **fields: Any) -> np.ndarray:
        """Store a batch (leading dimension B on every field); returns the rows written.

        A field given as a mapping of sub-fields (a Dict observation) takes a mapping of
        arrays. ``priorities`` (optional, [B], finite, >= 0): initial priorities; without them
        new rows enter at the max priority so far. Everything is validated before anything is written.
        """
        batch, count = coerce_batch(self.fields, flatten_values(fields))
        prio = self._check_new_priorities(priorities, count)
        rows = self.storage.add(batch, count)
        self._sampler.insert(rows, prio)
        return rows

    def _check_new_priorities(self, priorities: Any, count: int) -> np.ndarray | None:
        """Initial priorities as float64 [count], or None; raises before anything is written."""
        if priorities is None:
            return None
        prio = np.asarray(priorities)
        if prio.shape != (count,) or (prio.size and prio.dtype.kind not in "iuf"):
            raise ValueError(
                f"priorities: expected a real vector [{count}] (one per row), got {prio.dtype} {prio.shape}"
            )
        prio = prio.astype(np.float64)
        bad = ~(np.isfinite(prio) & (prio >= 0))
        if bad.any():
            raise ValueError(
                f"priorities must be finite and >= 0, got {prio[bad][:3]} at rows {np.flatnonzero(bad)[:3]}"
            )
        return prio

    def _add_stream_rows(self, scalars: Mapping[str, np.ndarray], priorities: np.ndarray | None, cache: Any,
                         streams: np.ndarray, episodes: np.ndarray, t_obs: np.ndarray, t_next: np.ndarray) -> None:
        """NStepWriter's path into a frame-dedup storage: rows name their frames by stream and time."""
        batch, count = coerce_batch(self.storage.scalar_fields, scalars)
        prio = self._check_new_priorities(priorities, count)
        rows, first_evicted, evicted = self.storage.write_stream_rows(
            batch, cache, streams, episodes, t_obs, t_next
        )
        # Only the live window counts: a small frame ring may evict rows of this very call.
        gone = (first_evicted + np.arange(evicted)) % self.capacity
        self._sampler.evict(gone[~self._live(gone)])
        live = self._live(rows)
        self._sampler.insert(rows[live], None if prio is None else prio[live])

    def _live(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` are in the storage's live window."""
        return (rows - self.storage.tail) % self.capacity < self.storage.size

    def sample(self, n: int, beta: float = 0.4) -> dict[str, np.ndarray]:
        """``n`` rows: every field ``[n, ...]``, ``"weights"`` float32 [n], ``"indices"`` int64 [n].

        A field made of sub-fields (a Dict observation) comes back as a dict of arrays.
        """
        if not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"n must be a positive int, got {n!r}")
        if len(self) == 0:
            raise ValueError("cannot sample an empty replay: add rows first")
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        indices, weights = self._sampler.draw(int(n), float(beta), self.storage)
        out = self.storage.gather(indices)
        if self._nested:
            out = nest_values(out)
        out["weights"] = weights
        out["indices"] = indices
        return out

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """Set priorities (>= 0, finite) of sampled rows; rows evicted since are skipped."""
        idx, prio = as_update(indices, priorities)
        self._sampler.update(idx, prio, self.storage)

    def nbytes(self) -> int:
        """Bytes of the storage arrays when full (the sampler's tree adds 16 bytes a row at most)."""
        tree = getattr(self._sampler, "tree", None)
        return self.storage.nbytes() + (tree.tree.nbytes if tree is not None else 0)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume sampling exactly: storage, priorities, generator state (can be GB).

        Nested dicts of NumPy arrays, numbers and strings only, so it flattens into an ``.npz``
        (keys joined with "/") and loads back without pickle.
        """
        return {
            "header": json.dumps(self.state_header(), sort_keys=True),
            "storage": self.storage.state_dict(),
            "sampler": self._sampler.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state_dict from a replay built with the same class, capacity, fields and settings."""
        check_header(state, "header", self.state_header(), "replay")
        self.storage.load_state_dict(state["storage"])
        self._sampler.load_state_dict(state["sampler"])

    def state_header(self) -> dict[str, Any]:
        """What must match for load_state_dict (JSON types: lists, not tuples)."""
        return {
            "format": FORMAT,
            "kind": type(self).__name__,
            "capacity": self.capacity,
            "fields": {n: [list(f.shape), f.dtype.str] for n, f in self.fields.items()},
            "frame_dedup": self.frame_dedup,
            "alpha": getattr(self._sampler, "alpha", None),
            "eps": getattr(self._sampler, "eps", None),
        }


class PrioritizedReplay(_Replay):
    """Proportional prioritized replay: P(i) ∝ (p_i + eps) ** alpha, stratified sampling, IS weights."""

    def __init__(self, capacity: int, fields: Mapping[str, Any], *, alpha: float = 0.6, eps: float = 1e-6,
                 seed: int | None = None, frame_dedup: bool = False, frame_capacity: int | None = None,
                 reuse_window: int | None = None) -> None:
        super().__init__(capacity, fields, PrioritizedSampler(capacity, seed, alpha, eps),
                         frame_dedup, frame_capacity, reuse_window)

    @property
    def alpha(self) -> float:
        """Priority exponent."""
        return self._sampler.alpha

    @property
    def max_priority(self) -> float:
        """Largest ``p + eps`` seen so far (1.0 at first): new rows without priorities enter here."""
        return self._sampler.max_priority

    def priorities(self, indices: Any) -> np.ndarray:
        """Stored ``(p + eps) ** alpha`` of rows (0 for evicted rows)."""
        return np.array(self._sampler.tree.leaves[np.asarray(indices, np.int64)])


class UniformReplay(_Replay):
    """Uniform replay with the same API: weights all ones, update_priorities only validates."""

    def __init__(self, capacity: int, fields: Mapping[str, Any], *, seed: int | None = None,
                 frame_dedup: bool = False, frame_capacity: int | None = None,
                 reuse_window: int | None = None) -> None:
        super().__init__(capacity, fields, UniformSampler(capacity, seed),
                         frame_dedup, frame_capacity, reuse_window)
