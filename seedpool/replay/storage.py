"""Field specs, batch validation and the plain ring storage (one preallocated array per field).

Storage knows rows, not priorities: a sampler (sum tree or uniform) draws row indices and
the storage gathers them. The live rows are always one ring window: ``size`` rows ending
just before ``head``, so ``tail = (head - size) % capacity``. Plain storage only ever drops
its oldest row to make room; the frame storage (``frames.py``) may also drop oldest rows
early, which is why the window has its own ``size`` rather than being ``min(written, capacity)``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .streaming import stream_copy

RESERVED = ("weights", "indices", "priorities")
SEP = "."  # joins a field's name and a sub-field's key (a Dict observation's key) into a flat name


@dataclass(frozen=True)
class Field:
    """One stored field: the shape of a single row and its dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


def parse_fields(fields: Mapping[str, Any]) -> dict[str, Field]:
    """``{"name": (shape, dtype)}`` as Field objects, rejecting reserved or malformed entries.

    A value may itself be a mapping (a Dict observation): each of its keys is stored as a
    field of its own, named ``"obs.key"`` (nested mappings nest the names further).
    """
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"fields must be a non-empty mapping name -> (shape, dtype), got {fields!r}")
    out = {}
    for name, spec in fields.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"field names must be identifiers, got {name!r}")
        if name in RESERVED:
            raise ValueError(f"field name {name!r} is reserved (sample() returns {RESERVED[:2]})")
        out.update(_parse_field(name, spec))
    return out


def _parse_field(name: str, spec: Any) -> dict[str, Field]:
    """One field, or (a mapping) one field per key, named ``name.key``."""
    if isinstance(spec, Mapping):
        if not spec:
            raise ValueError(f"field {name!r}: a mapping of sub-fields must not be empty")
        out = {}
        for key, sub in spec.items():
            if not isinstance(key, str) or not key or SEP in key or "/" in key:
                raise ValueError(f"field {name!r}: sub-field names must be non-empty strings without "
                                 f"{SEP!r} or '/', got {key!r}")
            out.update(_parse_field(f"{name}{SEP}{key}", sub))
        return out
    try:
        shape, dtype = spec
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(f"field {name!r}: expected (shape, dtype), got {spec!r} ({e})") from None
    if any(d < 1 for d in shape) or dtype.hasobject:
        raise ValueError(f"field {name!r}: dimensions must be >= 1 and dtype numeric, got {spec!r}")
    return {name: Field(shape, dtype)}


def flatten_values(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A batch whose values may be mappings (Dict observations), keyed by flat field names."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, Mapping):
            out.update(flatten_values(value, f"{prefix}{name}{SEP}"))
        else:
            out[f"{prefix}{name}"] = value
    return out


def nest_values(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of `flatten_values`: ``{"obs.a": x}`` -> ``{"obs": {"a": x}}``."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split(SEP)
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def coerce(name: str, value: Any, field: Field, batch: int | None) -> np.ndarray:
    """``value`` as a contiguous ``[B, *shape]`` array of the field's dtype, or a clear error.

    Casts follow NumPy's ``same_kind`` rule (float64 rewards into a float32 field are fine,
    float observations into a uint8 field are not); integers go into any integer field whose
    range holds their values (Python ints into uint8 observations), else a ValueError.
    """
    arr = np.asarray(value)
    if arr.ndim != len(field.shape) + 1 or arr.shape[1:] != field.shape:
        raise ValueError(
            f"field {name!r}: expected shape [B, {', '.join(map(str, field.shape))}]"
            f"{'' if field.shape else ' i.e. [B]'}, got {arr.shape}"
        )
    if batch is not None and arr.shape[0] != batch:
        raise ValueError(
            f"ragged batch: expected {batch} rows on every field (as on the fields before), "
            f"got {arr.shape[0]} for {name!r}"
        )
    if arr.dtype != field.dtype:
        ints = arr.dtype.kind in "iu" and field.dtype.kind in "iu"
        if not ints and not np.can_cast(arr.dtype, field.dtype, casting="same_kind"):
            raise TypeError(f"field {name!r}: cannot cast {arr.dtype} to {field.dtype} safely")
        if ints and arr.size:
            info = np.iinfo(field.dtype)
            if arr.min() < info.min or arr.max() > info.max:
                raise ValueError(
                    f"field {name!r}: expected values within {field.dtype} [{info.min}, {info.max}], "
                    f"got [{arr.min()}, {arr.max()}]"
                )
        arr = arr.astype(field.dtype)
    return np.ascontiguousarray(arr)


def coerce_batch(fields: Mapping[str, Field], values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
    """Every field of a batch validated and cast (nothing missing, nothing unknown, one B)."""
    missing = sorted(set(fields) - set(values))
    unknown = sorted(set(values) - set(fields))
    if missing or unknown:
        raise ValueError(
            f"expected fields {sorted(fields)}; missing {missing}, unknown {unknown}"
        )
    out: dict[str, np.ndarray] = {}
    batch = None
    for name, field in fields.items():
        out[name] = coerce(name, values[name], field, batch)
        batch = out[name].shape[0]
    return out, int(batch)


class RingStorage:
    """Fields in preallocated arrays ``[capacity, *shape]``; a new batch overwrites the oldest rows."""

    def __init__(self, capacity: int, fields: Mapping[str, Field]) -> None:
        self.capacity = int(capacity)
        self.fields = dict(fields)
        # np.empty: pages are touched (and counted in RSS) only as rows are written.
        self.arrays = {n: np.empty((self.capacity, *f.shape), f.dtype) for n, f in self.fields.items()}
        self.head = 0  # next row to write
        self.size = 0  # live rows, ending just before head
        self.written = 0  # rows 0..written-1 have held data (indices beyond were never stored)

    @property
    def tail(self) -> int:
        """Oldest live row."""
        return (self.head - self.size) % self.capacity

    def live_rows(self) -> np.ndarray:
        """Indices of the live rows, oldest first."""
        return (self.tail + np.arange(self.size)) % self.capacity

    def reserve(self, batch: int) -> np.ndarray:
        """Rows the next ``batch`` writes go to (oldest overwritten first); advances the ring."""
        if batch > self.capacity:
            raise ValueError(f"a batch of {batch} rows does not fit a capacity of {self.capacity}")
        rows = (self.head + np.arange(batch)) % self.capacity
        self.head = (self.head + batch) % self.capacity
        self.size = min(self.size + batch, self.capacity)
        self.written = min(self.written + batch, self.capacity)
        return rows

    def write(self, batch: Mapping[str, np.ndarray], rows_start: int, count: int) -> None:
        """Copy ``count`` validated rows to ``rows_start``.. (two slices when they wrap), streaming large ones."""
        first = min(count, self.capacity - rows_start)
        for name, value in batch.items():
            arr = self.arrays[name]
            stream_copy(arr[rows_start : rows_start + first], value[:first])
            if first < count:
                stream_copy(arr[: count - first], value[first:])

    def add(self, batch: Mapping[str, np.ndarray], count: int) -> np.ndarray:
        """Write a validated batch; returns the rows it went to."""
        start = self.head
        rows = self.reserve(count)
        self.write(batch, start, count)
        return rows

    def gather(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Fresh copies of ``rows`` of every field."""
        return {name: arr[rows] for name, arr in self.arrays.items()}

    def nbytes(self) -> int:
        """Bytes of the preallocated arrays (what a full buffer holds)."""
        return sum(a.nbytes for a in self.arrays.values())

    def state_dict(self) -> dict[str, Any]:
        """Arrays (the written part) and ring counters."""
        return {
            "arrays": {n: a[: self.written].copy() for n, a in self.arrays.items()},
            "head": self.head,
            "size": self.size,
            "written": self.written,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict returned (validated by the caller's shape check)."""
        arrays = state["arrays"]
        if sorted(arrays) != sorted(self.arrays):
            raise ValueError(f"checkpoint fields {sorted(arrays)} differ from {sorted(self.arrays)}")
        written = int(state["written"])
        for name, arr in arrays.items():
            want = (written, *self.fields[name].shape)
            if arr.shape != want or arr.dtype != self.fields[name].dtype:
                raise ValueError(f"checkpoint field {name!r}: expected {want} {self.fields[name].dtype}, "
                                 f"got {arr.shape} {arr.dtype}")
        for name, arr in arrays.items():
            self.arrays[name][:written] = arr
        self.head, self.size, self.written = int(state["head"]), int(state["size"]), written
