"""Streaming (non-temporal) copies for bulk writes into replay storage.

Rows written to a replay are read back much later, at random: caching them on the way in
only evicts useful data, and an ordinary store first reads every destination cache line
from memory (read for ownership). A non-temporal store writes whole lines straight to
memory, so writing a batch moves about two thirds of the bytes an ordinary copy moves.
Large ``add`` batches are memory-bound, so this is where the plain ``add`` gains over a
NumPy slice assignment (benchmarks/replay_speed.py measures it; the round-trip tests
guard it). The stores carry LLVM's ``!nontemporal`` hint, which every LLVM target accepts;
the copy is exact either way.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

BLOCK = 32  # bytes per vector store: the destination must be aligned to this
MIN_BYTES = 1 << 18  # below this a copy is latency-bound, and its data likely read soon: use NumPy


@intrinsic
def nt_blocks(typingctx, dst, src, start, blocks):
    """Copy ``blocks`` 32-byte blocks of ``src[start:]`` to ``dst[start:]`` (uint8) with non-temporal stores.

    ``dst[start:]`` must be 32-byte aligned; ``src`` may be anywhere. Call store_fence() after the last one.
    """
    sig = types.void(dst, src, start, blocks)

    def codegen(context, builder, signature, args):
        dst_arr, src_arr, start_v, n = args
        vec = ir.VectorType(ir.IntType(64), 4)
        d = context.make_array(signature.args[0])(context, builder, dst_arr)
        s = context.make_array(signature.args[1])(context, builder, src_arr)
        dptr = builder.bitcast(builder.gep(d.data, [start_v]), vec.as_pointer())
        sptr = builder.bitcast(builder.gep(s.data, [start_v]), vec.as_pointer())
        hint = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        with cgutils.for_range(builder, n) as loop:
            value = builder.load(builder.gep(sptr, [loop.index]), align=1)
            store = builder.store(value, builder.gep(dptr, [loop.index]), align=BLOCK)
            store.set_metadata("nontemporal", hint)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def store_fence(typingctx):
    """A full fence: non-temporal stores are weakly ordered, so fence before anyone reads the rows."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype, align: int = 64) -> np.ndarray:
    """``np.empty`` whose data starts on an ``align``-byte boundary (NumPy only promises 16)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + nbytes].view(dtype).reshape(shape)


@njit(cache=True)
def _stream_copy(dst: np.ndarray, src: np.ndarray, head: int) -> None:
    """Bytes ``src`` into ``dst``: ``head`` plain bytes up to alignment, streamed blocks, plain tail."""
    n = dst.shape[0]
    head = min(head, n)
    for i in range(head):
        dst[i] = src[i]
    blocks = (n - head) // BLOCK
    nt_blocks(dst, src, head, blocks)
    store_fence()
    for i in range(head + blocks * BLOCK, n):
        dst[i] = src[i]


def stream_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for C-contiguous arrays of one shape and dtype, bypassing the caches when large."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"stream_copy: {src.dtype} {src.shape} into {dst.dtype} {dst.shape}")
    if dst.nbytes < MIN_BYTES or not (dst.flags.c_contiguous and src.flags.c_contiguous):
        dst[...] = src
        return
    d = dst.reshape(-1).view(np.uint8)
    _stream_copy(d, src.reshape(-1).view(np.uint8), (-d.ctypes.data) % BLOCK)
