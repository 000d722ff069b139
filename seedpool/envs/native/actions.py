"""Writing a batch of actions into a native pool's action buffer, checked, in one call.

The pool's general path checks actions with NumPy (`validate.actions`: two reductions for a
Discrete batch) and then copies them into its buffer, several calls from Python whose fixed
costs are a sizeable share of a native pool's whole step. Here a Discrete batch is range-checked and
copied by one compiled loop, a float Box batch of the buffer's dtype checked (finite) and copied
by another; any other Box batch of the buffer's row shape goes to `validate.actions`.
Anything else (another type, shape or dtype, an action out of range) is left to the general
path, so the errors are its own.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from numba import njit

from seedpool.envs import validate


@njit(cache=True, nogil=True)
def _copy_in_range(a, out, rows, lo, hi):  # pragma: no cover - compiled
    """out[rows[k]] = a[k] (out[k] = a[k] for `rows` empty: every row) if every action is in
    [lo, hi); False, with nothing written, otherwise."""
    for k in range(a.size):
        if a[k] < lo or a[k] >= hi:
            return False
    if rows.size:
        for k in range(a.size):
            out[rows[k]] = a[k]
    else:
        for k in range(a.size):
            out[k] = a[k]
    return True


@njit(cache=True, nogil=True)
def _copy_finite(a, out, rows):  # pragma: no cover - compiled
    """out[rows[k]] = a[k] (every row for `rows` empty), rows of floats, if every value is
    finite; False, with nothing written, otherwise."""
    for k in range(a.shape[0]):
        for j in range(a.shape[1]):
            if not np.isfinite(a[k, j]):
                return False
    for k in range(a.shape[0]):
        i = rows[k] if rows.size else k
        for j in range(a.shape[1]):
            out[i, j] = a[k, j]
    return True


_EVERY_ROW = np.zeros(0, np.int64)


class ActionWriter:
    """Checks a batch of actions and writes it into rows of `buffer` (the pool's)."""

    def __init__(self, space: gym.Space, buffer: np.ndarray):
        self.space = space
        self.buffer = buffer
        discrete = type(space) is gym.spaces.Discrete and buffer.ndim == 1 and buffer.dtype.kind in "iu"
        self._bounds = (int(space.start), int(space.start + space.n)) if discrete else None
        # A float Box: its rows checked (finite) and copied by one compiled loop, on 2-D views.
        self._rows_2d = buffer.reshape(len(buffer), -1) if type(space) is gym.spaces.Box and \
            buffer.dtype.kind == "f" and buffer.ndim >= 2 else None

    def write(self, action: Any, ids: np.ndarray | None = None) -> bool:
        """Check `action` and copy it into the buffer's rows `ids` (int64; None: every row)
        when it is an array of one row per env of exactly the buffer's row shape; False for
        anything else, or a Discrete action out of range, with nothing written: the pool's
        `send` then checks it the general way and raises its own error."""
        n = len(self.buffer) if ids is None else len(ids)
        if type(action) is not np.ndarray or action.shape[:1] != (n,) or action.shape[1:] != self.buffer.shape[1:]:
            return False
        if self._bounds is not None:
            # The buffer's dtype only: numba compiles the loop once per dtype pair (seconds).
            return action.dtype == self.buffer.dtype and _copy_in_range(
                action, self.buffer, _EVERY_ROW if ids is None else ids, *self._bounds)
        if self._rows_2d is not None and action.dtype == self.buffer.dtype and action.flags.c_contiguous and \
                _copy_finite(action.reshape(n, -1), self._rows_2d, _EVERY_ROW if ids is None else ids):
            return True
        checked = validate.actions(self.space, action, n)  # its errors are the pool's
        if ids is None:
            self.buffer[...] = checked
        else:
            self.buffer[ids] = checked
        return True
