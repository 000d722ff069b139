"""Atomic operations on int64 arrays for compiled code, and a spin-wait hint.

numba has no atomics of its own; these are LLVM's (`load atomic`, `store atomic`, `cmpxchg`,
`atomicrmw`), so they mean on every CPU what C11's do: a release store makes every write
before it visible to the thread whose acquire load reads the stored value. `part_ring.py`
builds its lock-free queue of batch parts on them. `pause` is the CPU's spin-loop hint
(x86 `pause`, Arm `yield`; nothing elsewhere): a spinning thread then leaves its core's
resources to the other hardware thread and does not flood the memory system.
"""

from __future__ import annotations

import platform

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# LLVM's intrinsic for the hint on this CPU, and its arguments (numba's LLVM parses no inline asm).
_HINT = {"x86_64": ("llvm.x86.sse2.pause", ()), "amd64": ("llvm.x86.sse2.pause", ()),
         "aarch64": ("llvm.aarch64.hint", (1,)), "arm64": ("llvm.aarch64.hint", (1,))}.get(platform.machine().lower())


def _check(ary, index) -> None:
    if not (isinstance(ary, types.Array) and ary.ndim == 1 and ary.dtype == types.int64):
        raise TypeError(f"atomics take a 1-d int64 array, got {ary}")
    if not isinstance(index, types.Integer):
        raise TypeError(f"atomics take an integer index, got {index}")


def _pointer(context, builder, signature, args):
    """The address of `ary[index]` (args[0], args[1])."""
    aryty, idxty = signature.args[0], signature.args[1]
    ary = context.make_array(aryty)(context, builder, args[0])
    index = context.cast(builder, args[1], idxty, types.intp)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [index])


@intrinsic
def load_acquire(typingctx, ary, index):
    """`ary[index]`, read with acquire order."""
    _check(ary, index)

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_pointer(context, builder, signature, args), "acquire", 8)

    return types.int64(ary, index), codegen


@intrinsic
def store_release(typingctx, ary, index, value):
    """`ary[index] = value`, written with release order."""
    _check(ary, index)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, _pointer(context, builder, signature, args), "release", 8)
        return context.get_dummy_value()

    return types.void(ary, index, value), codegen


@intrinsic
def compare_exchange(typingctx, ary, index, expected, new):
    """Set `ary[index] = new` if it holds `expected`, atomically (sequentially consistent);
    True if it did."""
    _check(ary, index)

    def codegen(context, builder, signature, args):
        expected = context.cast(builder, args[2], signature.args[2], types.int64)
        new = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(_pointer(context, builder, signature, args), expected, new, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return types.boolean(ary, index, expected, new), codegen


def _read_modify_write(op: str):
    def impl(typingctx, ary, index, value):
        _check(ary, index)

        def codegen(context, builder, signature, args):
            value = context.cast(builder, args[2], signature.args[2], types.int64)
            return builder.atomic_rmw(op, _pointer(context, builder, signature, args), value, "seq_cst")

        return types.int64(ary, index, value), codegen

    return impl


exchange = intrinsic(_read_modify_write("xchg"))
exchange.__doc__ = "Set `ary[index] = value` atomically (sequentially consistent); the value it held."
fetch_add = intrinsic(_read_modify_write("add"))
fetch_add.__doc__ = "Add `value` to `ary[index]` atomically (sequentially consistent); the value it held."


@intrinsic
def pause(typingctx):
    """The CPU's spin-wait hint (nothing on a CPU without one)."""

    def codegen(context, builder, signature, args):
        if _HINT is not None:
            name, hint_args = _HINT
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i32] * len(hint_args)),
                                                name)
            builder.call(fn, [ir.Constant(i32, a) for a in hint_args])
        return context.get_dummy_value()

    return types.void(), codegen
