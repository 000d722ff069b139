"""Keep freed memory in the process: glibc's allocator settings for a learner.

A learner allocates and frees the same large tensors every minibatch: a 256-frame batch as
float32 is 29 MB, each activation of the Nature CNN several MB. glibc serves an allocation above
its mmap threshold with a fresh mapping and hands freed memory above its trim threshold back to
the kernel, so such a tensor is page-faulted in again every time it is allocated. glibc raises
its threshold to the largest mapped block freed so far, so a process settles into one of several
states depending on the order of its first frees, and one process's learner can be markedly
slower than another's on the same machine (``benchmarks/results/learner_speed_zen5.md`` against
``learner_speed_zen5_same_allocator.md``; ``benchmarks/learner_speed.py`` explains the method).

:func:`keep_freed_memory` fixes the thresholds (blocks up to 32 MB come from the heap, and up to
1 GB of freed heap stays mapped), which is what the variables of :func:`environment` do for a
whole process started with them.
The cost is memory: a process keeps its peak heap instead of returning it. Other allocators
(jemalloc, tcmalloc through ``LD_PRELOAD``) and other C libraries ignore it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

# (mallopt parameter in glibc's <malloc.h>, its environment variable, the value)
SETTINGS = (
    (-3, "MALLOC_MMAP_THRESHOLD_", 32 << 20),  # M_MMAP_THRESHOLD: glibc's largest allowed on 64-bit systems
    (-1, "MALLOC_TRIM_THRESHOLD_", 1 << 30),  # M_TRIM_THRESHOLD
    (-2, "MALLOC_TOP_PAD_", 128 << 20),  # M_TOP_PAD
)


@functools.lru_cache(maxsize=None)
def keep_freed_memory() -> bool:
    """Set glibc's thresholds for this process (once); False where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # no libc to load, or one without mallopt (musl)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, _, value in SETTINGS)


def environment() -> dict[str, str]:
    """The same settings as glibc's environment variables, for a process started from outside."""
    return {name: str(value) for _, name, value in SETTINGS}
