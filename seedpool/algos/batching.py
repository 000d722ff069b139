"""Gathering minibatches from learning batches without copies that are not needed.

Frames ``[C, H, W]`` are kept channels-last in memory while a batch is learned from (the
layout the CPU convolutions want, see benchmarks/results/cnn_layout.md): `Rollout.allocate`
stores them so, `frames_last` converts a batch once, and `take_rows` gathers minibatches
without changing the layout.
"""
from __future__ import annotations

import torch


def take_rows(t: torch.Tensor, index: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Entries ``index`` of ``t`` along ``dim``, as one fast gather. Frames stored channels-last
    (``[..., C, H, W]`` with H, W, C in memory: see `Rollout.allocate`, `frames_last`) stay so.
    (``t[index]`` is an order of magnitude slower on large uint8 rows, and ``index_select``
    alone returns frames in the ``[C, H, W]`` layout.)"""
    if t.dim() >= 4 and not t.is_contiguous() and t.movedim(-3, -1).is_contiguous():
        return t.movedim(-3, -1).index_select(dim, index).movedim(-1, -3)
    return t.index_select(dim, index)


def frames_last(t: torch.Tensor) -> torch.Tensor:
    """uint8 frames ``[..., C, H, W]`` as the same values stored channels-last (one copy);
    any other tensor as it is."""
    if t.dtype != torch.uint8 or t.dim() < 4:
        return t
    return t.movedim(-3, -1).contiguous().movedim(-1, -3)
