"""NumPy's legacy `RandomState` (MT19937), drawn from inside numba kernels: the numbers each
`minatar` game draws, without a Python call per env.

`minatar` gives every game one `numpy.random.RandomState`, used for sticky actions and the
game's own draws. Here each env's Mersenne Twister state (624 uint32 words and a position)
is a row of an array, advanced as NumPy's `mt19937.c` does, and the three kinds of draws the
games make are NumPy's legacy algorithms: `rand()` (a double from two 32-bit words),
`randint(low, high)` (masked rejection on 32-bit words; no draw when the range holds one
value) and `choice` of a list (a `randint` over its length). `tests/test_native_minatar.py`
checks them against NumPy's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

WORDS = 624  # MT19937's state length
# The kernels' argument types, given explicitly: numba would otherwise compile a function once
# per distinct constant it is called with (literal types), which costs seconds per game.
WORDS_T = types.uint32[:, ::1]  # every env's 624 words
POS_T = types.int64[::1]  # every env's position in its words
_SHIFT = 397
_MATRIX_A = np.uint64(0x9908B0DF)
_UPPER = np.uint64(0x80000000)
_LOWER = np.uint64(0x7FFFFFFF)
_M32 = np.uint64(0xFFFFFFFF)
_TEMPER_B = np.uint64(0x9D2C5680)
_TEMPER_C = np.uint64(0xEFC60000)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


def load(words: np.ndarray, pos: np.ndarray, i: int, generator: np.random.RandomState) -> None:
    """Copy a RandomState's MT19937 state into row i of (`words`, `pos`)."""
    name, key, at = generator.get_state()[:3]
    if name != "MT19937":
        raise TypeError(f"expected an MT19937 RandomState (minatar's), got {name}")
    words[i] = key
    pos[i] = at


def store(words: np.ndarray, pos: np.ndarray, i: int) -> np.random.RandomState:
    """A RandomState continuing where row i of (`words`, `pos`) is (to compare with NumPy's)."""
    generator = np.random.RandomState()
    generator.set_state(("MT19937", words[i].copy(), int(pos[i]), 0, 0.0))
    return generator


@njit(types.void(types.uint32[::1]), cache=True, nogil=True)
def _twist(mt):  # pragma: no cover - compiled
    """Regenerate all 624 words of one state row (NumPy's `mt19937_gen`)."""
    for k in range(WORDS):
        y = (np.uint64(mt[k]) & _UPPER) | (np.uint64(mt[(k + 1) % WORDS]) & _LOWER)
        mag = _MATRIX_A if (y & _ONE) else _ZERO
        mt[k] = np.uint32(np.uint64(mt[(k + _SHIFT) % WORDS]) ^ (y >> _ONE) ^ mag)


@njit(types.uint64(WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def next_u32(words, pos, i):  # pragma: no cover - compiled
    """The next 32-bit word of env i's generator (as a uint64)."""
    p = pos[i]
    if p >= WORDS:
        _twist(words[i])
        p = 0
    y = np.uint64(words[i, p])
    pos[i] = p + 1
    y ^= y >> np.uint64(11)
    y ^= (y << np.uint64(7)) & _TEMPER_B
    y ^= (y << np.uint64(15)) & _TEMPER_C
    y ^= y >> np.uint64(18)
    return y & _M32


@njit(types.float64(WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def rand(words, pos, i):  # pragma: no cover - compiled
    """`RandomState.rand()`: a double in [0, 1) from two words (27 and 26 bits)."""
    a = np.float64(next_u32(words, pos, i) >> np.uint64(5))
    b = np.float64(next_u32(words, pos, i) >> np.uint64(6))
    return (a * 67108864.0 + b) / 9007199254740992.0


@njit(cache=True, nogil=True)
def sticky_action(words, pos, last, i, a, sticky):  # pragma: no cover - compiled
    """Env i's action after minatar's sticky draw (`Environment.act`): its last action with
    probability `sticky`, else `a`; remembered as its last action either way."""
    if rand(words, pos, i) < sticky:
        a = last[i]
    last[i] = a
    return a


@njit(types.int64(WORDS_T, POS_T, types.int64, types.int64, types.int64), cache=True, nogil=True)
def randint(words, pos, i, low, high):  # pragma: no cover - compiled
    """`RandomState.randint(low, high)` (high excluded): words masked to the range's bit
    length, redrawn until one falls in it; a range of one value draws nothing."""
    span = np.uint64(high - low - 1)
    if span == _ZERO:
        return low
    mask = span
    for shift in (1, 2, 4, 8, 16):
        mask |= mask >> np.uint64(shift)
    while True:
        v = next_u32(words, pos, i) & mask
        if v <= span:
            return low + np.int64(v)
