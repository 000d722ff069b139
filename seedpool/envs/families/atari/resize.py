"""OpenCV's INTER_AREA downscale of a grayscale frame, compiled, with OpenCV's exact result.

A default Atari step resizes its 210x160 frame to 84x84 with `cv2.resize(..., INTER_AREA)`
(EnvPool calls the same routine). The ratio is not integral, so OpenCV takes its generic area
path: a weighted sum over each output pixel's footprint, computed per source row along x
(``buf[dx] = sum_k alpha_k * src[sy, sx_k]``, in float, taps in ascending ``sx``) and then
down the rows (``sum[dx] = beta_0 * buf_0[dx]``, then ``sum[dx] += beta_j * buf_j[dx]``),
rounded to nearest-even and saturated. That routine is scalar and a large share of a Pong
step (benchmarks/results/atari_resize.md).

This module does the same arithmetic in the same order, with each axis's tap table padded to
its widest footprint (a zero weight adds exactly 0.0) and the loops taken tap by tap, so that
each inner loop runs over output columns and vectorises: bit for bit OpenCV's output
(`tests/test_atari_resize.py` holds it to cv2 on random frames of several sizes), in about
half the time (`benchmarks/results/atari_resize.md`). It covers what that generic path covers;
`area_resizer` returns None for anything else, and the caller keeps cv2.
"""
from __future__ import annotations

import math
from functools import lru_cache
import numpy as np
from numba import njit

def area_taps(src_size: int, dst_size: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's area-resize tap table for one axis as (index, weight) arrays of shape
    ``[K, dst_size]`` (tap-major: each tap's row is contiguous for the compiled loops), K the
    most source pixels any output pixel covers (an output pixel with fewer: weight 0 on its
    last index).

    The weights follow OpenCV's ``computeResizeAreaTab``: in double precision, the partial
    first and last source pixels of each footprint (kept where they cover more than 1e-3)
    and the whole ones between, each divided by the footprint's width; stored as float32.
    """
    scale = src_size / dst_size
    per_pixel = []
    for d in range(dst_size):
        start = d * scale
        end = start + scale
        width = min(scale, src_size - start)
        first = math.ceil(start)
        last = min(math.floor(end), src_size - 1)
        first = min(first, last)
        taps = []
        if first - start > 1e-3:
            taps.append((first - 1, (first - start) / width))
        taps += [(s, 1.0 / width) for s in range(first, last)]
        if end - last > 1e-3:
            taps.append((last, min(min(end - last, 1.0), width) / width))
        per_pixel.append(taps)
    k = max(len(taps) for taps in per_pixel)
    index = np.zeros((k, dst_size), np.int32)
    weight = np.zeros((k, dst_size), np.float32)
    for d, taps in enumerate(per_pixel):
        for j, (s, w) in enumerate(taps):
            index[j, d], weight[j, d] = s, w
        index[len(taps):, d] = taps[-1][0]
    return index, weight


@njit(cache=True, nogil=True, boundscheck=False)
def _resize_area(src, dst, x_index, x_weight, y_index, y_weight, rows, line, total):  # pragma: no cover - compiled
    # Tap-major loops: each inner loop runs over output columns and vectorises; the sums still
    # add their taps in OpenCV's order, ((t0 + t1) + t2) + ...
    height, width = src.shape
    out_w = dst.shape[1]
    for r in range(height):  # along x, every source row (each is read by one or two output rows)
        for c in range(width):
            line[c] = np.float32(src[r, c])
        for d in range(out_w):
            rows[r, d] = line[x_index[0, d]] * x_weight[0, d]
        for k in range(1, x_index.shape[0]):
            for d in range(out_w):
                rows[r, d] += line[x_index[k, d]] * x_weight[k, d]
    for dy in range(dst.shape[0]):  # down the rows
        first, beta = y_index[0, dy], y_weight[0, dy]
        for d in range(out_w):
            total[d] = beta * rows[first, d]
        for k in range(1, y_index.shape[0]):
            r, beta = y_index[k, dy], y_weight[k, dy]
            for d in range(out_w):
                total[d] += beta * rows[r, d]
        for d in range(out_w):
            dst[dy, d] = np.uint8(min(max(np.rint(total[d]), np.float32(0.0)), np.float32(255.0)))


@lru_cache(maxsize=None)
def _tables(src_shape: tuple[int, int], dst_shape: tuple[int, int]):
    return (*area_taps(src_shape[1], dst_shape[1]), *area_taps(src_shape[0], dst_shape[0]))


class AreaResize:
    """``resize(src, dst)``: `cv2.resize(src, dst.shape[::-1], dst=dst, interpolation=INTER_AREA)`
    for uint8 frames of one (H, W) into contiguous frames of another, compiled (build it with
    `area_resizer`). Holds its tables and scratch rows; picklable."""

    def __init__(self, src_shape: tuple[int, int], dst_shape: tuple[int, int], tables) -> None:
        self.tables = tables
        self.rows = np.empty((src_shape[0], dst_shape[1]), np.float32)
        self.line = np.empty(src_shape[1], np.float32)
        self.total = np.empty(dst_shape[1], np.float32)

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> None:
        _resize_area(src, dst, *self.tables, self.rows, self.line, self.total)


def area_resizer(src_shape: tuple[int, int], dst_shape: tuple[int, int]) -> AreaResize | None:
    """The compiled INTER_AREA resize from `src_shape` to `dst_shape` (both (H, W)); None where
    OpenCV would not take its generic area path (an upscale on either axis, or integral factors
    on both, which its fast path averages in integers)."""
    (h, w), (oh, ow) = src_shape, dst_shape
    if oh > h or ow > w or (h % oh == 0 and w % ow == 0):
        return None
    return AreaResize(src_shape, dst_shape, _tables(tuple(src_shape), tuple(dst_shape)))
