"""Writing a whole batch of actions into a native pool's action buffer, checked, in one call.

The pool's general path checks actions with NumPy (`validate.actions`: two reductions for a
Discrete batch) and then copies them into its buffer: a few µs, which on a native pool's
sync step is a sizeable share of the whole step. Here a Discrete batch is range-checked and
copied by one compiled loop; a Box batch of the buffer's shape goes to `validate.actions`.
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
def _copy_in_range(a, out, lo, hi):  # pragma: no cover - compiled
    """out[:] = a if every action is in [lo, hi); False (out partly written) otherwise."""
    for k in range(a.size):
        v = a[k]
        if v < lo or v >= hi:
            return False
        out[k] = v
    return True


class ActionWriter:
    """Checks a batch of one action per env and writes it into `buffer` (the pool's)."""

    def __init__(self, space: gym.Space, buffer: np.ndarray):
        self.space = space
        self.buffer = buffer
        self.n = len(buffer)
        discrete = type(space) is gym.spaces.Discrete and buffer.ndim == 1 and buffer.dtype.kind in "iu"
        self._bounds = (int(space.start), int(space.start + space.n)) if discrete else None

    def write(self, action: Any) -> bool:
        """Check `action` and copy it into the buffer when it is an array of exactly the
        buffer's shape; False for anything else, or a Discrete action out of range: the
        pool's `send` then checks it again and raises its own error (the buffer is only read
        by steps, so a partly written one does no harm)."""
        if type(action) is not np.ndarray or action.shape != self.buffer.shape:
            return False
        if self._bounds is not None:
            # The buffer's dtype only: numba compiles the loop once per dtype pair (seconds).
            return action.dtype == self.buffer.dtype and _copy_in_range(action, self.buffer, *self._bounds)
        self.buffer[...] = validate.actions(self.space, action, self.n)  # its errors are the pool's
        return True
