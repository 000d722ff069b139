"""Checks on what users send, done before anything reaches a worker."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.spaces import LEAVES
from seedpool.errors import ConfigError, ConfigTypeError


def env_ids(env_id: Any, num_envs: int) -> np.ndarray:
    """An int array of distinct valid env ids, or a ValueError/TypeError saying what is wrong."""
    ids = np.asarray(env_id)
    if ids.ndim == 0:
        ids = ids.reshape(1)
    if ids.ndim != 1:
        raise ConfigError(f"env_id must be 1-D, got shape {ids.shape}")
    if ids.size and ids.dtype.kind not in "iu":
        raise ConfigTypeError(f"env_id must hold integers, got dtype {ids.dtype}")
    if ids.size == 0:
        raise ConfigError("env_id is empty: send needs at least one env")
    if ids.size <= 64:  # Python's min/max/set beat numpy's reductions and unique on small batches
        values = ids.tolist()
        lo, hi, distinct = min(values), max(values), len(set(values))
    else:
        lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= num_envs:
        bad = ids[(ids < 0) | (ids >= num_envs)]
        raise ConfigError(f"unknown env_id {bad.tolist()}: this pool has env ids 0..{num_envs - 1}")
    if ids.size > 64:  # marking the ids in a mask: no sort, unlike np.unique
        seen = np.zeros(num_envs, np.bool_)
        seen[ids] = True
        distinct = int(np.count_nonzero(seen))
    if distinct != ids.size:
        vals, counts = np.unique(ids, return_counts=True)
        raise ConfigError(f"duplicate env_id {vals[counts > 1].tolist()} in one send")
    return ids.astype(np.int64, copy=False)


def actions(space: gym.Space, action: Any, n: int) -> Any:
    """`action` as an array (or the dict/tuple nesting of arrays) of n valid actions for `space`."""
    # The common cases first, by exact type (isinstance on gymnasium's spaces goes through
    # ABC checks): this runs on every step.
    if type(space) is gym.spaces.Discrete:
        return _discrete(np.asarray(action), n, int(space.start), int(space.start + space.n))
    if type(space) is gym.spaces.Box:
        return _box(np.asarray(action), n, space)
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(action, dict) or set(action) != set(space.spaces):
            raise ConfigError(f"expected a dict of actions with keys {sorted(space.spaces)}")
        return {k: actions(s, action[k], n) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(action, (tuple, list)) or len(action) != len(space.spaces):
            raise ConfigError(f"expected a tuple of {len(space.spaces)} action batches, one per "
                              f"entry of the Tuple space, got {type(action).__name__}")
        return tuple(actions(s, a, n) for s, a in zip(space.spaces, action))
    if not isinstance(space, LEAVES):
        # A space of no fixed shape (Graph, Sequence, Text, OneOf, custom): gymnasium batches
        # its actions as a tuple over the envs, and leaves checking them to the env.
        if not isinstance(action, (tuple, list)) or len(action) != n:
            got = f"{type(action).__name__}" + (f" of {len(action)}" if isinstance(action, (tuple, list)) else "")
            raise ConfigError(f"expected a tuple of {n} actions of {space}, one per env, got {got}")
        return tuple(action)
    a = np.asarray(action)
    if isinstance(space, gym.spaces.Discrete):
        return _discrete(a, n, int(space.start), int(space.start + space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        _check_shape(a, (n, *space.nvec.shape))
        _check_integer(a)
        if (a < space.start).any() or (a >= space.start + space.nvec).any():
            raise ConfigError(f"MultiDiscrete action out of range: each entry must be in [start, start + nvec) = "
                              f"[{space.start.tolist()}, {(space.start + space.nvec).tolist()})")
        return a
    if isinstance(space, gym.spaces.MultiBinary):
        _check_shape(a, (n, *np.atleast_1d(space.n)))
        if ((a != 0) & (a != 1)).any():
            raise ConfigError("MultiBinary actions must be 0 or 1")
        return a
    if isinstance(space, gym.spaces.Box):
        return _box(a, n, space)
    raise ConfigTypeError(f"unsupported action space {space}")


def _box(a: np.ndarray, n: int, space: gym.spaces.Box) -> np.ndarray:
    _check_shape(a, (n, *space.shape))
    kind = a.dtype.kind
    if kind not in "fiu" and not (kind == "b" and np.dtype(space.dtype).kind == "b"):
        raise ConfigTypeError(f"Box actions must be numbers (or bools for a bool Box), got dtype {a.dtype}")
    if kind == "f" and not np.isfinite(a).all():
        rows = np.unique(np.nonzero(~np.isfinite(a.reshape(n, -1)))[0]).tolist()
        raise ConfigError(f"actions contain NaN or inf (batch rows {rows})")
    return a


def _discrete(a: np.ndarray, n: int, lo: int, hi: int) -> np.ndarray:
    if a.shape != (n,):
        if a.shape == (n, 1):  # a common policy output shape; accept it
            a = a.reshape(n)
        else:
            raise ConfigError(f"expected {n} discrete actions of shape ({n},), got shape {a.shape}")
    if a.dtype.kind not in "iu":
        _check_integer(a)
    if n <= 16:  # Python's min/max beat two numpy reductions on small batches
        values = a.tolist()
        if min(values) >= lo and max(values) < hi:
            return a
    elif a.min() >= lo and a.max() < hi:
        return a
    wrong = a[(a < lo) | (a >= hi)]
    raise ConfigError(f"discrete actions must be in [{lo}, {hi}), got {wrong.tolist()}")


def _check_shape(a: np.ndarray, shape: tuple[int, ...]) -> None:
    if a.shape != shape:
        raise ConfigError(f"expected actions of shape {shape}, got {a.shape}")


def _check_integer(a: np.ndarray) -> None:
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.isnan(a).any():
            raise ConfigError("actions contain NaN")
        raise ConfigTypeError(f"discrete actions must be integers, got dtype {a.dtype}")


def reset_mask(mask: Any, num_envs: int) -> np.ndarray:
    """`options["reset_mask"]` checked as gymnasium's vector envs check it (the same errors)."""
    if not isinstance(mask, np.ndarray):
        raise ConfigTypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ConfigError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise ConfigTypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not mask.any():
        raise ConfigError("`options['reset_mask']` must contain a boolean array with at least one True "
                          f"value, got reset_mask={mask}")
    return mask
