"""Gymnasium's `np_random` (NumPy's PCG64 `Generator`) drawn from inside numba kernels: the
integers each MiniGrid env draws while it builds a level, without a Python call per env.

Every draw a MiniGrid level makes is `np_random.integers(low, high)` (`_rand_int`,
`_rand_elem`, `_rand_bool`, `_rand_pos`, `place_obj`). For a range that fits in 32 bits NumPy
answers it with Lemire's bounded method on 32-bit words (`buffered_bounded_lemire_uint32`),
and PCG64 hands out each 64-bit output as two 32-bit words: the low half first, the high half
kept for the next request (`has_uint32`, `uinteger` in the generator's state). A range of one
value draws nothing. Each env's state here is a row of six uint64: the 128-bit LCG state and
increment (high, low), `has_uint32` and `uinteger`, copied from and back into the env's
generator (`load`, `store`), so Python and the kernels draw one stream. tests/test_minigrid.py
checks the draws against NumPy's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from seedpool.envs.native.pcg64 import M32, MASK64, MULT_HI, MULT_LO, S32, S58, S63, S64, mul_64x64

WIDTH = 6  # uint64 per env: state hi, state lo, inc hi, inc lo, has_uint32, uinteger
STATES = types.uint64[:, ::1]
_ZERO = np.uint64(0)
_ONE = np.uint64(1)


def load(states: np.ndarray, i: int, generator: np.random.Generator) -> None:
    """Copy a PCG64 generator's whole state (its buffered 32-bit word too) into row i."""
    st = generator.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise TypeError(f"expected a PCG64 generator (gymnasium's), got {st['bit_generator']}")
    s, inc = st["state"]["state"], st["state"]["inc"]
    states[i] = (s >> 64, s & MASK64, inc >> 64, inc & MASK64, st["has_uint32"], st["uinteger"])


def store(states: np.ndarray, i: int, generator: np.random.Generator) -> None:
    """Put row i back into a PCG64 generator, which then continues where the kernels left off."""
    row = [int(v) for v in states[i]]
    generator.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": (row[0] << 64) | row[1], "inc": (row[2] << 64) | row[3]},
        "has_uint32": row[4], "uinteger": row[5],
    }


@njit(types.uint64(STATES, types.int64), cache=True, nogil=True)
def next64(states, i):  # pragma: no cover - compiled
    """Advance row i once; the 64-bit output NumPy's PCG64 gives there (XSL-RR of the new state)."""
    s_hi, s_lo, inc_hi, inc_lo = states[i, 0], states[i, 1], states[i, 2], states[i, 3]
    hi, lo = mul_64x64(s_lo, MULT_LO)
    hi = hi + s_lo * MULT_HI + s_hi * MULT_LO
    new_lo = lo + inc_lo
    carry = _ONE if new_lo < lo else _ZERO
    new_hi = hi + inc_hi + carry
    states[i, 0], states[i, 1] = new_hi, new_lo
    rot = new_hi >> S58
    x = new_hi ^ new_lo
    return (x >> rot) | (x << ((S64 - rot) & S63))


@njit(types.uint64(STATES, types.int64), cache=True, nogil=True)
def next32(states, i):  # pragma: no cover - compiled
    """The next 32-bit word (as a uint64): the high half of the last output if one is kept,
    else the low half of a new one, keeping its high half (NumPy's `pcg64_next32`)."""
    if states[i, 4] != _ZERO:
        states[i, 4] = _ZERO
        return states[i, 5]
    v = next64(states, i)
    states[i, 4] = _ONE
    states[i, 5] = v >> S32
    return v & M32


@njit(types.int64(STATES, types.int64, types.int64, types.int64), cache=True, nogil=True)
def integers(states, i, low, high):  # pragma: no cover - compiled
    """`Generator.integers(low, high)` for a range of at most 2**32 - 1 values (high excluded):
    Lemire's multiply-and-reject on 32-bit words; no draw for a single value."""
    span = np.uint64(high - low - 1)
    if span == _ZERO:
        return low
    excl = span + _ONE
    m = next32(states, i) * excl
    left = m & M32
    if left < excl:
        threshold = (M32 - span) % excl
        while left < threshold:
            m = next32(states, i) * excl
            left = m & M32
    return low + np.int64(m >> S32)
