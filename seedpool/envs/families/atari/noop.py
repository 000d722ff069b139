"""Reset no-op counts drawn exactly as EnvPool draws them, so seeded episodes match EnvPool's."""

from __future__ import annotations

import numpy as np

_MASK32 = 0xFFFFFFFF


class NoopSampler:
    """Uniform ints in [0, n) from `std::mt19937(seed)` through libstdc++'s uniform_int_distribution.

    EnvPool seeds a `std::mt19937` with the env's seed and draws the no-op count with
    `std::uniform_int_distribution<>(0, noop_max - 1)`. numpy's legacy `RandomState(seed)`
    initialises MT19937 exactly like `std::mt19937(seed)`, and libstdc++ (GCC >= 11) maps a
    32-bit draw to [0, n) with Lemire's multiply-and-reject method, reproduced in `draw`.
    """

    def __init__(self, seed: int, n: int) -> None:
        """Seed the generator; `n` is the number of possible values (noop_max)."""
        if n < 1:
            raise ValueError(f"NoopSampler needs n >= 1, got {n}")
        self._n = n
        self._threshold = (1 << 32) % n  # == (2**32 - n) % n: low words below it are biased
        self._bits = np.random.MT19937()
        self._bits.state = np.random.RandomState(seed & _MASK32).get_state(legacy=False)

    def draw(self) -> int:
        """Next value in [0, n)."""
        product = int(self._bits.random_raw()) * self._n
        while (product & _MASK32) < self._threshold:
            product = int(self._bits.random_raw()) * self._n
        return product >> 32
