"""Per-env seeds from make()'s and reset()'s `seed` argument."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def env_seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int]:
    """One seed per env, -1 for unseeded: seed + i, a list of one per env, or None (all unseeded)."""
    if seed is None:
        return [-1] * n
    if isinstance(seed, (int, np.integer)):
        values: list[int | None] = [int(seed) + i for i in range(n)]
    else:
        values = [None if s is None else int(s) for s in seed]
        if len(values) != n:
            raise ValueError(f"a list of seeds needs one per env ({n}), got {len(values)}")
    if any(s is not None and s < 0 for s in values):
        raise ValueError(f"seeds must be non-negative integers or None (unseeded), got {seed!r}")
    return [-1 if s is None else s for s in values]
