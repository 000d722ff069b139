"""Buffers shaped like gymnasium spaces: allocation, row writes and batched gathers.

A buffer for a Box, Discrete, MultiDiscrete or MultiBinary space is one numpy array with a
leading env dimension. For a Dict or Tuple space, nested to any depth, it is a `Nested`:
one such array per leaf, with the path of keys and indices that leads to it, rebuilt into
dicts and tuples as gymnasium's vector envs return them. Arrays live in anonymous shared
memory when the pool uses worker processes: forked workers inherit the mapping, so nothing
is ever named in /dev/shm and nothing can be left behind there.

Spaces whose elements have no fixed shape (Graph, Sequence, Text, OneOf, a custom Space)
get `Objects`: one Python object per env, batched as gymnasium batches them (a tuple over
the envs); for worker processes each is pickled into its env's row of a shared byte array.
"""

from __future__ import annotations

import mmap
import pickle
from typing import Any, Callable, Union

import gymnasium as gym
import numpy as np

COMPOSITE = (gym.spaces.Dict, gym.spaces.Tuple)
LEAVES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
Path = tuple[Union[str, int], ...]


def empty(shape: tuple[int, ...], dtype: Any, shared: bool) -> np.ndarray:
    """A zeroed array, in anonymous shared memory when `shared`."""
    dtype = np.dtype(dtype)
    if not shared:
        return np.zeros(shape, dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = mmap.mmap(-1, max(nbytes, 1))  # MAP_SHARED | MAP_ANONYMOUS: shared with forked children
    return np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape)


def leaf_layout(space: gym.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one element of a leaf (non-Dict, non-Tuple) space, as gymnasium
    batches it."""
    if isinstance(space, gym.spaces.Box):
        return tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return (), np.dtype(space.dtype)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(space.nvec.shape), np.dtype(space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        return tuple(np.atleast_1d(space.n)), np.dtype(space.dtype)
    raise TypeError(f"a {type(space).__name__} space has no fixed shape: it has no array layout")


def check(space: gym.Space, role: str) -> bool:
    """Whether `space` has parts of no fixed shape (kept as Python objects); a TypeError for
    an empty Dict or Tuple, which the engine cannot batch."""
    dynamic = any(not isinstance(leaf, LEAVES) for _, leaf in leaves(space))
    if isinstance(space, COMPOSITE) and not leaves(space):
        raise TypeError(f"{role} space {space} has no entries: seedpool cannot batch an empty "
                        f"{type(space).__name__}")
    return dynamic


def same_layout(a: gym.Space, b: gym.Space) -> bool:
    """Whether elements of `a` and `b` fit the same buffers (same nesting, leaf kinds, shapes
    and dtypes); bounds may differ."""
    try:
        la = [(p, type(s), leaf_layout(s)) for p, s in leaves(a)]
        lb = [(p, type(s), leaf_layout(s)) for p, s in leaves(b)]
    except TypeError:
        return False
    return type(a) is type(b) and la == lb


# Bytes per env for an element of no fixed shape in worker processes, pickled. Anonymous
# shared memory is only backed where it is written: an unused row costs address space.
OBJECT_ROW_BYTES = 1 << 16


class Objects:
    """One Python object per env, for a space of no fixed shape; batched as a tuple.

    In the pool's own process (serial, thread) the rows are the objects themselves. For
    worker processes (`shared`) each row is the object pickled into a shared byte array, with
    its length: written before the env's completion is published, as every other row is.
    """

    def __init__(self, n: int, shared: bool = False, row_bytes: int = OBJECT_ROW_BYTES):
        self.shared = shared
        self.rows: list[Any] = [None] * n
        if shared:
            self.row_bytes = row_bytes
            self.length = empty((n,), np.int64, True)
            self.data = memoryview(empty((n * row_bytes,), np.uint8, True))

    def __getitem__(self, i: int) -> Any:
        if not self.shared:
            return self.rows[i]
        size = int(self.length[i])
        if not size:  # never written (e.g. the final observation of an env that has not ended)
            return None
        start = i * self.row_bytes
        return pickle.loads(self.data[start : start + size])

    def __setitem__(self, where: Any, value: Any) -> None:
        """Row i; or, for a batch (a sequence over the envs), every row (Ellipsis) or rows."""
        if where is Ellipsis:
            pairs = enumerate(value)
        elif isinstance(where, (int, np.integer)):
            pairs = [(int(where), value)]
        else:
            pairs = zip(np.asarray(where).tolist(), value)
        for i, v in pairs:
            if self.shared:
                self._put(i, v)
            else:
                self.rows[i] = v

    def _put(self, i: int, value: Any) -> None:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > self.row_bytes:
            raise ValueError(f"an element of {type(value).__name__} is {len(data)} bytes pickled, over the "
                             f"{self.row_bytes} bytes per env that worker processes have for a space of "
                             "no fixed shape; use backend='serial' or 'thread'")
        start = i * self.row_bytes
        self.data[start : start + len(data)] = data
        self.length[i] = len(data)

    def take(self, sel: np.ndarray | slice | None) -> tuple:
        """The rows `sel` (all, a slice or an index array) as gymnasium batches them: a tuple."""
        n = len(self.rows)
        if sel is None:
            ids = range(n)
        elif isinstance(sel, slice):
            ids = range(n)[sel]
        else:
            ids = sel.tolist()
        return tuple(self[j] for j in ids)


def leaves(space: gym.Space, path: Path = ()) -> list[tuple[Path, gym.Space]]:
    """Every non-Dict, non-Tuple subspace of `space` with its path, in gymnasium's order."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for k, s in space.spaces.items() for leaf in leaves(s, (*path, k))]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for k, s in enumerate(space.spaces) for leaf in leaves(s, (*path, k))]
    return [(path, space)]


class Nested:
    """A buffer for a Dict or Tuple space: one array per leaf, rebuilt into the space's nesting."""

    def __init__(self, space: gym.Space, n: int, shared: bool):
        found = leaves(space)
        self.paths: list[Path] = [path for path, _ in found]
        self.arrays: list[np.ndarray | Objects] = []
        for _, leaf in found:
            if isinstance(leaf, LEAVES):
                shape, dtype = leaf_layout(leaf)
                self.arrays.append(empty((n, *shape), dtype, shared))
            else:  # no fixed shape: one object per env (pickled, for workers)
                self.arrays.append(Objects(n, shared))
        self.items = list(zip(self.paths, self.arrays))
        self._rows = [a.__getitem__ if type(a) is Objects else (lambda i, a=a: a[i].copy())
                      for a in self.arrays]
        self.build: Callable[[list[Any]], Any] = _builder(space, iter(range(len(found))))

    def write(self, i: int, value: Any) -> None:
        """Store one element (a dict/tuple of the space's nesting) at row i."""
        for path, arr in self.items:
            v = value
            for p in path:
                v = v[p]
            arr[i] = v

    def write_rows(self, rows: Any, batch: Any) -> None:
        """Store a batch (the space's nesting of arrays with a leading dim) at `rows`
        (an index array, or Ellipsis for every row)."""
        for path, arr in self.items:
            v = batch
            for p in path:
                v = v[p]
            arr[rows] = v

    def __getitem__(self, rows: Any) -> Any:
        """Rows `rows` of every leaf array, nested like the space: a native family's batch."""
        return self.build([a[rows] for a in self.arrays])

    def __setitem__(self, rows: Any, batch: Any) -> None:
        """Store a batch nested like the space at `rows` (`write_rows`)."""
        self.write_rows(rows, batch)

    def gather(self, take: Callable[[np.ndarray], np.ndarray], sel: np.ndarray | slice | None) -> Any:
        """The space's nesting of `take(leaf array)` for every leaf (the rows `sel` of Objects)."""
        return self.build([a.take(sel) if type(a) is Objects else take(a) for a in self.arrays])

    def row_copy(self, i: int) -> Any:
        """Env i's element as the env expects it: the space's nesting of fresh copies."""
        return self.build([row(i) for row in self._rows])


def _builder(space: gym.Space, counter) -> Callable[[list[Any]], Any]:
    """A function that nests a flat list of leaf values (in `leaves` order) like `space`."""
    if isinstance(space, gym.spaces.Dict):
        keys = list(space.spaces)
        if not any(isinstance(s, COMPOSITE) for s in space.spaces.values()):
            idx = [next(counter) for _ in keys]
            return lambda xs: {k: xs[j] for k, j in zip(keys, idx)}
        subs = [(k, _builder(s, counter)) for k, s in space.spaces.items()]
        return lambda xs: {k: f(xs) for k, f in subs}
    if isinstance(space, gym.spaces.Tuple):
        if not any(isinstance(s, COMPOSITE) for s in space.spaces):
            idx = [next(counter) for _ in space.spaces]
            return lambda xs: tuple([xs[j] for j in idx])
        fns = [_builder(s, counter) for s in space.spaces]
        return lambda xs: tuple([f(xs) for f in fns])
    j = next(counter)
    return lambda xs: xs[j]


Tree = Union[np.ndarray, Nested, Objects]


def alloc(space: gym.Space, n: int, shared: bool) -> Tree:
    """A buffer holding `n` elements of `space`."""
    if isinstance(space, COMPOSITE):
        return Nested(space, n, shared)
    if not isinstance(space, LEAVES):
        return Objects(n, shared)
    shape, dtype = leaf_layout(space)
    return empty((n, *shape), dtype, shared)


def write(buf: Tree, i: int, value: Any) -> None:
    """Store one element at row i."""
    if type(buf) is Nested:
        buf.write(i, value)
    else:
        buf[i] = value


def taker(sel: np.ndarray | slice | None) -> Callable[[np.ndarray], np.ndarray]:
    """A function returning a fresh copy of the rows `sel` of an array (an index array, a
    slice, or all rows when None); fancy indexing copies already, a slice needs `.copy()`."""
    if sel is None:
        return np.ndarray.copy  # the method: cheaper to dispatch than the np.copy function
    if isinstance(sel, slice):
        return lambda a: a[sel].copy()
    return lambda a: a[sel]


def gather(buf: Tree, sel: np.ndarray | slice | None) -> Any:
    """A fresh copy of the rows `sel` of every array in `buf` (see `taker`)."""
    if type(buf) is Objects:
        return buf.take(sel)
    take = taker(sel)
    return buf.gather(take, sel) if type(buf) is Nested else take(buf)
