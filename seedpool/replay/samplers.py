"""Samplers: which live rows a batch draws and with what importance weights.

A sampler sees storage only as a ring window (``tail``, ``size``, ``capacity``) and the
number of rows ever ``written``; it never touches field data, so a sequence storage
(R2D2) can reuse the sum-tree sampler unchanged.
"""
from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from seedpool.errors import ConfigError

from .sum_tree import BAD_INDEX, BAD_PRIORITY, OK, SumTree, check_priorities


class Window(Protocol):
    """What a sampler reads of a storage."""

    capacity: int
    head: int
    size: int
    written: int
    tail: int


def raise_for(code: int, pos: int, indices: np.ndarray, priorities: np.ndarray, written: int) -> None:
    """Turn a kernel's error code into the matching exception."""
    if code == BAD_PRIORITY:
        raise ValueError(f"priorities must be finite and >= 0, got {priorities[pos]} at position {pos}")
    if code == BAD_INDEX:
        raise IndexError(
            f"index {indices[pos]} (position {pos}) was never stored: valid indices are 0..{written - 1}"
        )


def as_update(indices: Any, priorities: Any) -> tuple[np.ndarray, np.ndarray]:
    """Indices and priorities as flat int64 / float64 arrays of one length, or a ValueError."""
    idx = np.asarray(indices)
    prio = np.asarray(priorities)
    if idx.ndim != 1 or prio.ndim != 1 or idx.shape != prio.shape:
        raise ValueError(
            f"indices and priorities must be 1-D of the same length, got {idx.shape} and {prio.shape}"
        )
    if idx.size and idx.dtype.kind not in "iu":
        raise IndexError(f"indices must be integers, got {idx.dtype}")
    if prio.size and prio.dtype.kind not in "iuf":
        raise ValueError(f"priorities must be real numbers, got {prio.dtype}")
    return np.ascontiguousarray(idx, np.int64), np.ascontiguousarray(prio, np.float64)


class UniformSampler:
    """Every live row equally likely (with replacement); weights all ones."""

    def __init__(self, capacity: int, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def insert(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
        """Nothing to record."""

    def evict(self, rows: np.ndarray) -> None:
        """Nothing to record: draws only come from the live window."""

    def draw(self, n: int, beta: float, win: Window) -> tuple[np.ndarray, np.ndarray]:
        """``n`` live rows and unit weights."""
        rows = (win.tail + self.rng.integers(0, win.size, n)) % win.capacity
        return rows.astype(np.int64), np.ones(n, np.float32)

    def update(self, idx: np.ndarray, prio: np.ndarray, win: Window) -> None:
        """Validate only (same rules as the prioritized sampler)."""
        code, pos = check_priorities(idx, prio, win.written)
        raise_for(code, pos, idx, prio, win.written)

    def state_dict(self) -> dict[str, Any]:
        """The generator state."""
        return {"rng": json.dumps(self.rng.bit_generator.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the generator state."""
        self.rng.bit_generator.state = json.loads(str(state["rng"]))


class PrioritizedSampler:
    """Proportional prioritization (Schaul et al. 2016) on a sum tree of ``(p + eps) ** alpha``."""

    def __init__(self, capacity: int, seed: int | None, alpha: float, eps: float) -> None:
        if not alpha >= 0 or not eps >= 0:
            raise ConfigError(f"alpha and eps must be >= 0, got alpha={alpha}, eps={eps}")
        self.alpha, self.eps = float(alpha), float(eps)
        self.tree = SumTree(capacity)
        self.rng = np.random.default_rng(seed)
        self.max_priority = 1.0  # raw (p + eps) scale; new rows enter at max_priority ** alpha

    def insert(self, rows: np.ndarray, priorities: np.ndarray | None) -> None:
        """New rows at the given priorities (already validated) or at the max priority so far."""
        if priorities is None:
            self.tree.set(rows, np.full(len(rows), self.max_priority**self.alpha))
            return
        p = priorities + self.eps
        if len(p):
            self.max_priority = max(self.max_priority, float(p.max()))
        self.tree.set(rows, p**self.alpha)

    def evict(self, rows: np.ndarray) -> None:
        """Evicted rows get zero mass: they can no longer be drawn."""
        self.tree.set(rows, np.zeros(len(rows)))

    def draw(self, n: int, beta: float, win: Window) -> tuple[np.ndarray, np.ndarray]:
        """Stratified draw and IS weights ``(N P(i)) ** -beta / max over the batch``."""
        if self.tree.total <= 0:
            raise ValueError("every live row has priority 0 (eps=0 and all priorities 0): nothing to draw")
        return self.tree.sample(self.rng.random(n), beta, win.size)

    def update(self, idx: np.ndarray, prio: np.ndarray, win: Window) -> None:
        """Checked update; rows evicted since sampling are skipped (they stay at zero)."""
        code, pos, self.max_priority = self.tree.set_priorities(
            idx, prio, self.alpha, self.eps, win.written, win.tail, win.size, self.max_priority
        )
        raise_for(code, pos, idx, prio, win.written)
        assert code == OK

    def state_dict(self) -> dict[str, Any]:
        """Leaves, max priority and generator state."""
        return {"leaves": np.array(self.tree.leaves), "max_priority": self.max_priority,
                "rng": json.dumps(self.rng.bit_generator.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore leaves (internal nodes rebuilt), max priority, generator state (the replay checks alpha/eps)."""
        leaves = np.asarray(state["leaves"], np.float64)
        if leaves.shape != (self.tree.capacity,):
            raise ValueError(f"checkpoint has {leaves.shape} leaves, expected ({self.tree.capacity},)")
        self.tree.load_leaves(leaves)
        self.max_priority = float(state["max_priority"])
        self.rng.bit_generator.state = json.loads(str(state["rng"]))
