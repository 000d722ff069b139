"""Action batches on the pool's send path: their leading dimension, and writing them into
the action buffer's rows."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs import spaces, validate
from seedpool.envs.spaces import Nested


def leading_dim(action: Any) -> int:
    """How many actions a flat batch holds (1 for a single scalar action)."""
    if isinstance(action, (tuple, list)):  # also a batch of objects numpy cannot stack
        return len(action)
    a = np.asarray(action)
    return a.shape[0] if a.ndim else 1


def nested_leading_dim(action: Any, path: spaces.Path, space: gym.Space) -> int:
    """The batch size of an action for a Dict or Tuple space: that of its leaf at `path`."""
    leaf = action
    try:
        for key in path:
            leaf = leaf[key]
    except (KeyError, IndexError, TypeError):
        validate.actions(space, action, 1)  # raises, saying which structure was expected
        raise
    return leading_dim(leaf)


def write(buf: spaces.Tree, ids: np.ndarray, act: Any, whole: bool) -> None:
    """Write the checked actions `act` into the rows `ids` of the action buffer (`whole`: every row)."""
    if type(buf) is Nested:
        buf.write_rows(Ellipsis if whole else ids, act)
    elif whole:
        buf[...] = act
    else:
        buf[ids] = act
