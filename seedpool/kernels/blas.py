"""NumPy's BLAS held to one thread while a NumPy kernel runs (`seedpool.kernels.ppo_numpy`).

On 64-wide layers a second BLAS thread only adds synchronisation, and when the other cores are
busy its spinning makes a step far slower (the "BLAS not limited" row of
``benchmarks/results/ppo_numpy_update.md``). :func:`update_scope` holds the limit once around a
whole update, so the steps inside it need none; :func:`one_blas_thread` is a no-op inside it.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from contextlib import AbstractContextManager

from threadpoolctl import ThreadpoolController

_blas_state = threading.local()


def one_blas_thread() -> AbstractContextManager:
    """Limit NumPy's BLAS to one thread meanwhile (restored on exit); a no-op inside another such limit."""
    return contextlib.nullcontext() if getattr(_blas_state, "limited", False) else _limit_blas()


def update_scope() -> AbstractContextManager:
    """The BLAS limit held once around every step of an update (what setting and restoring it
    costs: "One-thread BLAS limit, per enter + exit" in benchmarks/results/ppo_numpy_update.md)."""
    return one_blas_thread()


@contextlib.contextmanager
def _limit_blas():
    _blas_state.limited = True
    try:
        with _blas_libraries().limit(limits=1):
            yield
    finally:
        _blas_state.limited = False


@functools.lru_cache(maxsize=1)
def _blas_libraries() -> ThreadpoolController:
    """The BLAS libraries loaded in this process (NumPy's among them), found once.

    ``threadpool_limits`` would search the loaded libraries on every call, which costs more
    than a gradient step; a kept controller's ``limit`` costs a small fraction of one.
    """
    return ThreadpoolController().select(user_api="blas")
