"""Buffers shaped like gymnasium spaces: allocation, row writes and batched gathers.

A buffer is either one numpy array with a leading env dimension or, for Dict spaces, a
dict of such buffers. Arrays live in anonymous shared memory when the pool uses worker
processes: forked workers inherit the mapping, so nothing is ever named in /dev/shm and
nothing can be left behind there.
"""

from __future__ import annotations

import mmap
from typing import Any, Callable, Union

import gymnasium as gym
import numpy as np

Tree = Union[np.ndarray, dict[str, "Tree"]]


def empty(shape: tuple[int, ...], dtype: Any, shared: bool) -> np.ndarray:
    """A zeroed array, in anonymous shared memory when `shared`."""
    dtype = np.dtype(dtype)
    if not shared:
        return np.zeros(shape, dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = mmap.mmap(-1, max(nbytes, 1))  # MAP_SHARED | MAP_ANONYMOUS: shared with forked children
    return np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape)


def leaf_layout(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one element of a non-Dict space."""
    if isinstance(space, gym.spaces.Box):
        return tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(space.nvec.shape), np.dtype(space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        return tuple(np.atleast_1d(space.n)), np.dtype(space.dtype)
    raise TypeError(
        f"seedpool cannot batch a {type(space).__name__} space; supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary and Dict of those"
    )


def alloc(space: gym.Space, n: int, shared: bool) -> Tree:
    """A buffer holding `n` elements of `space`."""
    if isinstance(space, gym.spaces.Dict):
        return {k: alloc(s, n, shared) for k, s in space.spaces.items()}
    shape, dtype = leaf_layout(space)
    return empty((n, *shape), dtype, shared)


def write(buf: Tree, i: int, value: Any) -> None:
    """Store one element at row i."""
    if isinstance(buf, dict):
        for k, b in buf.items():
            b[i] = value[k]
    else:
        buf[i] = value


def taker(sel: np.ndarray | slice | None) -> Callable[[np.ndarray], np.ndarray]:
    """A function returning a fresh copy of the rows `sel` of an array (an index array, a
    slice, or all rows when None); fancy indexing copies already, a slice needs `.copy()`."""
    if sel is None:
        return np.ndarray.copy  # the method: np.copy() costs ~1 us more in dispatch
    if isinstance(sel, slice):
        return lambda a: a[sel].copy()
    return lambda a: a[sel]


def gather(buf: Tree, sel: np.ndarray | slice | None) -> Tree:
    """A fresh copy of the rows `sel` of every array in `buf` (see `taker`)."""
    take = taker(sel)
    return {k: gather(b, sel) for k, b in buf.items()} if isinstance(buf, dict) else take(buf)


def row(buf: Tree, i: int) -> Any:
    """A view of row i (dict of views for Dict spaces)."""
    if isinstance(buf, dict):
        return {k: row(b, i) for k, b in buf.items()}
    return buf[i]
