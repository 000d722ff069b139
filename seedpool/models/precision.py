"""`--precision fp32|bf16|auto`: which arithmetic a run's forward passes use, per machine.

bf16 autocast keeps float32 master weights, optimizer state, losses and returns
(`seedpool.algos.gradient`; :func:`autocast` here is the context acting and learning share); only the network's matrix products and convolutions run in
bfloat16. It pays where the hardware computes bf16 natively (CPUs with AVX512-BF16 or
AMX, CUDA devices that report bf16 support) and for networks whose time is in those
products: convolutional torsos as large as the Nature CNN (not MinAtar's one small layer:
`WIDE_CONV`), and MLPs with layers at least `WIDE` units wide in and out
fed at least `WIDE` rows at a time (SAC's and TD3's 256-256 networks on 256-row
minibatches: `benchmarks/results/offpolicy_update_precision.md`; at 64-64 bf16 loses).
Small MLPs and small batches (acting one env at a time) are limited by per-operation overhead,
which autocast's casts only add to. So ``auto`` picks bf16 for those two kinds of work on bf16
hardware and fp32 everywhere else; ``benchmarks/precision.py`` measures both on the machine it
runs on. On a GPU ``auto`` is fp32: there these networks are bound by kernel launches and
bf16's casts only add to them (measured on an H100, ``benchmarks/results/precision_cuda.md``).
Asking for bf16 on hardware without it is an error, not a silent emulation (which is slower than fp32).
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Callable, Literal

import torch
from torch import nn

from seedpool.errors import ConfigError

Precision = Literal["fp32", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")
PrecisionOption = Literal["auto", "fp32", "bf16"]


def autocast(precision: Precision, device_type: str) -> contextlib.AbstractContextManager:
    """The context forward passes run in at ``precision`` on a device of ``device_type``
    (acting and learning alike; the models hand float32 to distributions and losses)."""
    if precision == "bf16":
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def product_dtype(precision: Precision) -> torch.dtype:
    """The dtype of the products at ``precision``, for code that casts by hand (autocast's choice)."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


@functools.lru_cache(maxsize=None)
def bf16_supported(device_type: str) -> bool:
    """Does a device of this type compute bfloat16 natively?"""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device_type != "cpu":
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without the oneDNN query: read the CPU's flags
        try:
            flags = Path("/proc/cpuinfo").read_text().split()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags


WIDE_CONV = 8192
"""Convolution weights (all layers together) from which a network's time is in products that
bf16 speeds up. The Nature CNN has 77,824 (bf16 pays for its update on bf16 hardware,
`benchmarks/results/precision.md`); MinAtar's single 3x3 layer over 4 channels has 576 (there
the casts cost what the products save, or more: the same table)."""


def has_wide_convolution(model: nn.Module, weights: int = WIDE_CONV) -> bool:
    """True if the network's convolutions hold at least ``weights`` weights together."""
    convs = [m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)]
    return sum(m.weight.numel() for m in convs) >= weights


WIDE = 256
"""Layer width and batch rows from which an MLP's products pay for bf16's casts."""


def has_wide_layer(model: nn.Module, width: int = WIDE) -> bool:
    """True if some weight maps at least ``width`` inputs to at least ``width`` outputs (a product
    big enough for bf16 to speed up)."""
    return any(p.dim() >= 2 and min(p.shape[-2:]) >= width for p in model.parameters())


def resolve_precision(requested: str, device: str | torch.device, model: nn.Module,
                      rows: int | None = None) -> Precision:
    """The precision a run uses: ``requested`` checked against the hardware, ``auto`` decided.

    ``rows``: the batch the network is fed where it is known (a learner's minibatch, acting's
    env count); with at least `WIDE` of them an MLP with a wide layer counts as bf16 work."""
    device_type = torch.device(device).type
    if requested == "fp32":
        return "fp32"
    if requested == "bf16":
        if not bf16_supported(device_type):
            what = "this CPU has no native bfloat16 (AVX512-BF16 or AMX)" if device_type == "cpu" \
                else f"this {device_type} device does not support bfloat16"
            raise ConfigError(f"--precision bf16: {what}, and emulating it is slower than fp32; "
                              "use --precision auto (it picks what the hardware runs fastest) or fp32")
        return "bf16"
    if requested == "auto":
        if device_type != "cpu":
            # On a GPU these networks are bound by kernel launches, not arithmetic: bf16 autocast
            # made the Nature CNN's update and forward slower than fp32 there
            # (benchmarks/results/precision_cuda.md). `--precision bf16` still uses it.
            return "fp32"
        wide = rows is not None and rows >= WIDE and has_wide_layer(model)
        return "bf16" if bf16_supported(device_type) and (has_wide_convolution(model) or wide) else "fp32"
    raise ConfigError(f"--precision must be auto, fp32 or bf16, got {requested!r}")


def autocast_fn(fn: Callable, precision: Precision, device: str | torch.device) -> Callable:
    """``fn`` called inside :func:`autocast` (``fn`` itself for fp32): an act function at ``precision``."""
    if precision == "fp32":
        return fn
    device_type = torch.device(device).type

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with autocast(precision, device_type):
            return fn(*args, **kwargs)

    return wrapped
