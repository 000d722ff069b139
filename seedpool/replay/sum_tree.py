"""A sum tree over row priorities, its batched operations compiled with numba.

Layout: an 8-ary tree in one flat float64 array, level by level from the leaves (level 0,
one leaf per row) to the root (one node). Node ``i`` of level ``l`` is the sum of nodes
``8i .. 8i + 7`` of level ``l - 1``: eight siblings of float64 fill one 64-byte cache line,
so a path from a leaf to the root touches ``ceil(log8(capacity))`` lines (6 for 100k rows)
where a binary tree touches 17, and a prefix search scans one line per level. A batch of
updates or draws runs inside one compiled loop, no Python per element.

Parents are recomputed as the sum of their children (always in the same order) rather than
shifted by a delta, so every internal node is exactly the sum of its leaves: no drift builds
up over millions of updates, and ``load_leaves()`` reproduces the tree bit for bit.

The kernels know nothing of storage: callers pass which rows are live (a ring window
``tail``, ``size`` over ``capacity`` rows) and how many rows were ever written.
"""
from __future__ import annotations

import numpy as np
from numba import njit

FANOUT = 8

# Error codes returned by the checking kernels (the caller turns them into exceptions).
OK = 0
BAD_PRIORITY = 1
BAD_INDEX = 2


@njit(cache=True, inline="always")
def _group_sum(tree: np.ndarray, base: int) -> float:
    """Sum of the 8 siblings at ``base``, pairwise: a chain of 3 dependent adds instead of 8."""
    a = (tree[base] + tree[base + 1]) + (tree[base + 2] + tree[base + 3])
    b = (tree[base + 4] + tree[base + 5]) + (tree[base + 6] + tree[base + 7])
    return a + b


@njit(cache=True)
def _refresh(tree: np.ndarray, offs: np.ndarray, leaves: np.ndarray, count: int) -> None:
    """Recompute the ancestors of ``leaves[:count]``, one level at a time.

    Level by level, the parents of different leaves are independent sums the CPU overlaps;
    walking each leaf's path to the root instead is a chain of dependent loads and adds,
    about twice as slow. A level with no more nodes than leaves is recomputed whole, which
    skips the duplicate parents near the root.
    """
    cur = leaves[:count].copy()
    for lev in range(1, offs.shape[0]):
        nodes = (offs[lev] - offs[lev - 1]) // FANOUT  # the level below is padded to groups of 8
        if nodes <= count:
            for i in range(nodes):
                tree[offs[lev] + i] = _group_sum(tree, offs[lev - 1] + FANOUT * i)
        else:
            for k in range(count):
                i = cur[k] // FANOUT
                cur[k] = i
                tree[offs[lev] + i] = _group_sum(tree, offs[lev - 1] + FANOUT * i)


@njit(cache=True)
def _set_leaves(tree: np.ndarray, offs: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    """Set leaves ``idx`` to ``values`` and refresh their ancestors (later duplicates win)."""
    for k in range(idx.shape[0]):
        tree[idx[k]] = values[k]
    _refresh(tree, offs, idx, idx.shape[0])


@njit(cache=True)
def _rebuild(tree: np.ndarray, offs: np.ndarray) -> None:
    """Every internal node from the leaves, in the order _refresh sums them."""
    for lev in range(1, offs.shape[0]):
        for i in range((offs[lev] - offs[lev - 1]) // FANOUT):  # levels below are padded to groups of 8
            tree[offs[lev] + i] = _group_sum(tree, offs[lev - 1] + FANOUT * i)


@njit(cache=True)
def _find(tree: np.ndarray, offs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Leaf whose prefix-sum interval holds each target, never a leaf of zero mass.

    All targets descend one level at a time, and the child is chosen without a branch
    (count the running sums <= u): the loads of different targets are then independent and
    overlap, where a branchy per-target descent stalls on a mispredict at every level.
    Choosing "the number of running sums <= u" can never pick an empty child, so an evicted
    (zero) row is never drawn.
    """
    n = targets.shape[0]
    node = np.zeros(n, np.int64)
    u = targets.copy()
    for lev in range(offs.shape[0] - 1, 0, -1):
        off = offs[lev - 1]
        for k in range(n):
            base = off + FANOUT * node[k]
            uk = u[k]
            acc = 0.0
            below = 0.0
            c = 0
            for j in range(FANOUT):
                acc += tree[base + j]
                le = acc <= uk
                c += le
                below = acc if le else below
            if c == FANOUT:
                # Rounding left u at or past this node's mass: take its last non-empty child.
                c = FANOUT - 1
                while tree[base + c] <= 0.0:
                    c -= 1
                below = uk - tree[base + c]
            node[k] = FANOUT * node[k] + c
            u[k] = uk - below
    return node


@njit(cache=True)
def _sample(tree: np.ndarray, offs: np.ndarray, u01: np.ndarray, beta: float, live: int):
    """Stratified draw (one per equal slice of the total mass) and max-normalised IS weights."""
    n = u01.shape[0]
    total = tree[offs[offs.shape[0] - 1]]
    seg = total / n
    targets = np.empty(n, np.float64)
    for k in range(n):
        targets[k] = (k + u01[k]) * seg
    idx = _find(tree, offs, targets)
    raw = np.empty(n, np.float64)
    top = 0.0
    for k in range(n):
        w = (live * tree[idx[k]] / total) ** (-beta)
        raw[k] = w
        top = max(top, w)
    weights = np.empty(n, np.float32)
    for k in range(n):
        weights[k] = raw[k] / top
    return idx, weights


@njit(cache=True)
def check_priorities(idx: np.ndarray, prio: np.ndarray, written: int):
    """(code, position) of the first bad entry: a priority < 0 or not finite, an index never written."""
    for k in range(idx.shape[0]):
        p = prio[k]
        if not (p >= 0.0 and p < np.inf):  # also false for NaN
            return BAD_PRIORITY, k
        if idx[k] < 0 or idx[k] >= written:
            return BAD_INDEX, k
    return OK, -1


@njit(cache=True)
def _set_priorities(tree, offs, idx, prio, alpha, eps, written, tail, size, capacity, max_prio):
    """Check everything first, then store ``(p + eps) ** alpha`` for live rows; returns (code, pos, max)."""
    code, pos = check_priorities(idx, prio, written)
    if code != OK:
        return code, pos, max_prio
    live = np.empty(idx.shape[0], np.int64)
    count = 0
    for k in range(idx.shape[0]):
        i = idx[k]
        # A row evicted since it was sampled (possible only with frame dedup) must stay at
        # zero: giving it mass again would let sample() return a row whose frames are gone.
        if (i - tail + capacity) % capacity >= size:
            continue
        p = prio[k] + eps
        max_prio = max(max_prio, p)
        tree[i] = p**alpha
        live[count] = i
        count += 1
    _refresh(tree, offs, live, count)
    return OK, -1, max_prio


class SumTree:
    """Leaf values over ``capacity`` rows with O(log n) batched set, prefix search and total."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        sizes, count = [], self.capacity
        while count > 1:
            sizes.append(-(-count // FANOUT) * FANOUT)  # each level padded to whole sibling groups
            count = -(-count // FANOUT)
        sizes.append(1)  # the root
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.tree = np.zeros(int(sum(sizes)), np.float64)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self.tree[self.offsets[-1]])

    @property
    def leaves(self) -> np.ndarray:
        """Read-only view of the leaf values."""
        view = self.tree[: self.capacity]
        view.flags.writeable = False
        return view

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``idx`` to ``values`` (caller validated both)."""
        _set_leaves(self.tree, self.offsets, _i64(idx), np.ascontiguousarray(values, np.float64))

    def find(self, targets: np.ndarray) -> np.ndarray:
        """Leaf index whose cumulative interval ``[prefix, prefix + value)`` holds each target."""
        return _find(self.tree, self.offsets, np.ascontiguousarray(targets, np.float64))

    def sample(self, u01: np.ndarray, beta: float, live: int) -> tuple[np.ndarray, np.ndarray]:
        """Stratified indices for uniforms ``u01`` in [0, 1) and their IS weights (max over the batch = 1)."""
        return _sample(self.tree, self.offsets, u01, float(beta), int(live))

    def set_priorities(self, idx, prio, alpha, eps, written, tail, size, max_prio):
        """Checked ``(p + eps) ** alpha`` update of live rows; returns (code, position, new max priority)."""
        return _set_priorities(
            self.tree, self.offsets, idx, prio, float(alpha), float(eps),
            int(written), int(tail), int(size), self.capacity, float(max_prio),
        )

    def load_leaves(self, leaves: np.ndarray) -> None:
        """Replace every leaf (e.g. from a checkpoint) and recompute the internal nodes."""
        self.tree[:] = 0.0
        self.tree[: self.capacity] = leaves
        _rebuild(self.tree, self.offsets)


def _i64(a: np.ndarray) -> np.ndarray:
    """``a`` as a contiguous int64 array (no copy when it already is one)."""
    return np.ascontiguousarray(a, np.int64)
