"""NumPy's own float64 loops of `exp` and `log1p`, for the kernels to call.

dm_control computes its gaussian rewards with `np.exp` and hopper's touch observation with
`np.log1p`. NumPy picks its loops by the CPU (on AVX-512 machines its own vectorised ones),
which differ from the C library's functions in the last bit for a few percent of values;
numba's `np.exp` is the C library's. To give the package path's values bit for bit, the
kernels call the loop NumPy calls: the inner loop of the ufunc for float64 (`d->d`), whose
address is read from the ufunc object (NumPy's public `PyUFuncObject`: after the object
header, `nin`, `nout`, `nargs`, `identity`, then the `functions` and `data` arrays, one
entry per type signature, then `ntypes`). The layout is checked against the ufunc's own
attributes and the loop's results against the ufunc's on sample values; where either
check fails the address is 0 and the kernels use numba's functions (the C library's: the
same values within one unit in the last place).
"""

from __future__ import annotations

import ctypes

import numpy as np

_HEADER = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # PyObject_HEAD
_POINTER = ctypes.sizeof(ctypes.c_void_p)
_LOOP = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _int(address: int) -> int:
    return ctypes.c_int.from_address(address).value


def _pointer(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def float64_loop(ufunc: np.ufunc, sample: np.ndarray) -> tuple[int, int]:
    """The address of `ufunc`'s float64 inner loop and of its data, checked; (0, 0) if not."""
    base = id(ufunc)
    if (_int(base + _HEADER), _int(base + _HEADER + 4), _int(base + _HEADER + 8)) != \
            (ufunc.nin, ufunc.nout, ufunc.nargs) or "d->d" not in ufunc.types:
        return 0, 0
    at = base + _HEADER + 16  # after the four ints: functions, data, ntypes
    functions, data = _pointer(at), _pointer(at + _POINTER)
    if not functions or _int(at + 2 * _POINTER) != ufunc.ntypes:
        return 0, 0
    k = ufunc.types.index("d->d")
    fn, fn_data = _pointer(functions + k * _POINTER), (_pointer(data + k * _POINTER) if data else 0)
    if not fn or not np.array_equal(_run(fn, fn_data, sample), ufunc(sample)):
        return 0, 0
    return fn, fn_data


def _run(fn: int, data: int, x: np.ndarray) -> np.ndarray:
    """The loop at `fn` on each value of `x` alone (as the kernels call it: one value a call)."""
    out = np.empty_like(x)
    args = np.zeros(2, np.int64)
    dims, steps = np.ones(1, np.int64), np.full(2, 8, np.int64)
    loop = _LOOP(fn)
    for j in range(len(x)):
        args[0], args[1] = x[j:].ctypes.data, out[j:].ctypes.data
        loop(args.ctypes.data, dims.ctypes.data, steps.ctypes.data, data or None)
    return out


def loops() -> np.ndarray:
    """exp's and log1p's loop and data addresses, uint64 (EXP, EXP_DATA, LOG1P, LOG1P_DATA)."""
    rng = np.random.default_rng(0)
    exp = float64_loop(np.exp, np.concatenate([-0.5 * rng.uniform(0, 8, 500) ** 2, [0.0, -800.0]]))
    log1p = float64_loop(np.log1p, np.concatenate([rng.uniform(0, 60, 500), [0.0, 1e-300]]))
    return np.array([*exp, *log1p], np.uint64)
