"""NumPy's PCG64 generator, drawn from inside numba kernels: the same numbers as the
`numpy.random.Generator` of each env, without a Python call per env.

A family that resets many envs per step (CartPole: episodes of ~20 steps under a random
policy) spends most of its time in one `Generator.uniform` call per env. This keeps each
env's PCG64 state (128-bit LCG state and increment, as uint64 pairs) in an array and
advances it the way NumPy's `pcg64.h` does: state = state * multiplier + increment, then
the XSL-RR output of the new state; doubles are its top 53 bits. `tests/test_native_envs.py`
checks the draws against NumPy's.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MASK64 = (1 << 64) - 1
# PCG's default 128-bit multiplier (NumPy's PCG64), as its high and low 64-bit halves.
MULT_HI = np.uint64(2549297995355413924)
MULT_LO = np.uint64(4865540595714422341)
M32 = np.uint64(0xFFFFFFFF)
S32 = np.uint64(32)
_S11 = np.uint64(11)
S58 = np.uint64(58)
S64 = np.uint64(64)
S63 = np.uint64(63)


def state_row(generator: np.random.Generator) -> np.ndarray:
    """A PCG64 generator's state as four uint64: state high, state low, increment high, low."""
    st = generator.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise TypeError(f"expected a PCG64 generator (gymnasium's), got {st['bit_generator']}")
    s, inc = st["state"]["state"], st["state"]["inc"]
    return np.array([s >> 64, s & MASK64, inc >> 64, inc & MASK64], dtype=np.uint64)


def load_row(generator: np.random.Generator, row: np.ndarray) -> None:
    """Put a state row back into a NumPy generator (it then continues where the row is)."""
    st = generator.bit_generator.state
    st["state"]["state"] = (int(row[0]) << 64) | int(row[1])
    st["state"]["inc"] = (int(row[2]) << 64) | int(row[3])
    generator.bit_generator.state = st


class KernelStates:
    """Copies of the envs' generator states that compiled kernels draw from, one row per env
    (`rows`, as `state_row` writes it), kept in step with each env's NumPy generator: `copy`
    after the generator is seeded, `sync` before Python reads it (the kernels' draws are made on
    the copy). `all_copied` turns True once every env has one; until then a family draws in Python."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows  # (num_envs, 4) uint64, the array the kernels are handed
        self.copied = np.zeros(len(rows), np.bool_)
        self.all_copied = False

    def copy(self, i: int, generator: np.random.Generator) -> None:
        """Env i's generator was (re)seeded: the kernels draw from its state from now on."""
        self.rows[i] = state_row(generator)
        self.copied[i] = True
        self.all_copied = self.all_copied or bool(self.copied.all())

    def sync(self, i: int, generator: np.random.Generator) -> bool:
        """Bring env i's generator up to the kernels' draws; False (and nothing done) where it has no copy."""
        if not self.copied[i]:
            return False
        load_row(generator, self.rows[i])
        return True

    def uncopied(self, ids: np.ndarray) -> list[int]:
        """The envs among `ids` never seeded (a family seeds them with fresh entropy, as gymnasium)."""
        return [] if self.all_copied else ids[~self.copied[ids]].tolist()


@njit(cache=True, nogil=True, inline="always")
def mul_64x64(a, b):  # pragma: no cover - compiled
    """The 128-bit product of two uint64, as (high, low)."""
    a_lo, a_hi = a & M32, a >> S32
    b_lo, b_hi = b & M32, b >> S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> S32) + (p1 & M32) + (p2 & M32)
    return p3 + (p1 >> S32) + (p2 >> S32) + (mid >> S32), (mid << S32) | (p0 & M32)


@njit(cache=True, nogil=True)
def next_double(states, i):  # pragma: no cover - compiled
    """Advance row i of `states` once; the double in [0, 1) NumPy's PCG64 draws there."""
    s_hi, s_lo, inc_hi, inc_lo = states[i, 0], states[i, 1], states[i, 2], states[i, 3]
    hi, lo = mul_64x64(s_lo, MULT_LO)
    hi = hi + s_lo * MULT_HI + s_hi * MULT_LO
    new_lo = lo + inc_lo
    carry = np.uint64(1) if new_lo < lo else np.uint64(0)
    new_hi = hi + inc_hi + carry
    states[i, 0], states[i, 1] = new_hi, new_lo
    rot = new_hi >> S58
    x = new_hi ^ new_lo
    out = (x >> rot) | (x << ((S64 - rot) & S63))
    return np.float64(out >> _S11) * (1.0 / 9007199254740992.0)
