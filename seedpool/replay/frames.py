"""Frame-deduplicating storage: each frame of a stacked observation is stored once.

A row stores, instead of ``obs`` and ``next_obs`` (``K`` stacked frames each), ``2K`` indices
into a ring of single frames. Rows are written by ``NStepWriter`` (it knows streams and
episode boundaries), which keeps each stream's last ``n + K + 1`` frames in a ``StreamFrames``
cache. When a row is written, each of its frames is either found in the frame ring (written
there by an earlier row of the same stream) or copied there from the cache now, so every
frame in the ring was written by a row that references it.

Why no row can ever see a frame that was overwritten (the invariant the kernel keeps):

- Rows get increasing ids; each frame in the ring records the id of the row that wrote it.
  A row reuses a frame only if that frame is still in the ring, was written at most
  ``reuse_window`` (``R``) rows earlier, and is not among the ``2K`` oldest frames (so the
  row's own new frames cannot overwrite it). Otherwise the frame is copied forward: written
  again from the stream's cache. So every frame of row ``r`` was written by a row ``>= r - R``.
- Before the ring overwrites a frame written by row ``q``, every row with id ``<= q + R`` is
  evicted: any row that could reference the frame is among them. Ids grow with row order, so
  these are always the oldest rows: eviction just moves the ring's tail, and the sampler
  zeroes their priorities.

A stream that stalls therefore costs a few copied frames, never wrong data. The reuse test
counts rows, not frames, so a burst of copies cannot make later frames look old and feed
more copies. The writer checks cheaply (one frame per step) that observations really are
frames shifting by one. In steady state (one new frame per row) rows live about
``frame_capacity - reuse_window`` rows, so the defaults leave room for the row ring to fill.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from .storage import Field, RingStorage
from .streaming import BLOCK, aligned_empty, nt_blocks, store_fence

MISSING_FRAME = 3  # error code: the stream cache lacks a frame a row needs (a writer bug)


def words(a: np.ndarray) -> np.ndarray:
    """``a`` (last axis contiguous) as 8-byte words along its last axis, or as bytes if they do not divide it.

    The kernels copy and compare frames word by word: one iteration per 8 bytes.
    """
    u8 = a.view(np.uint8)
    return u8.view(np.uint64) if u8.shape[-1] % 8 == 0 else u8


@njit(cache=True, inline="always")
def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """Element loop (compiles to a vectorised copy; a numba slice assignment here measured far slower)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@njit(cache=True, inline="always")
def _stream_frame(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy a frame (bytes) into its 64-byte aligned ring row with non-temporal stores.

    Frames in the ring are read only when sampled, much later: bypassing the cache saves the
    read for ownership of every line (see streaming.py).
    """
    n = src.shape[0]
    blocks = n // BLOCK
    nt_blocks(dst, src, 0, blocks)
    for i in range(blocks * BLOCK, n):
        dst[i] = src[i]


@njit(cache=True, inline="always")
def _differ(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two frames (word views) differ; an OR of XORs vectorises, an early exit per word does not."""
    acc = 0
    for i in range(a.shape[0]):
        acc |= a[i] ^ b[i]
    return acc != 0


@njit(cache=True, inline="always")
def _cache_frame(pix, ftime, fep, fslot, fstamp, stack, s, episode, time, src) -> None:
    """Cache ``src`` as frame ``time`` of stream ``s`` (not in the ring yet: no slot)."""
    w = (time + stack) % ftime.shape[1]  # times start at 1 - stack: the position is never negative
    _copy(pix[s, w], src)
    ftime[s, w] = time
    fep[s, w] = episode
    fslot[s, w] = -1
    fstamp[s, w] = -1


@njit(cache=True)
def _check_and_push(obs, nxt, pix, ftime, fep, fslot, fstamp, streams, t, ep):
    """Check every row's frame contract, then (only if all pass) cache the frames the step brings.

    ``obs``/``nxt`` are the step's stacks ``[B, K, words]``. Returns (0, -1), or (1, row): its
    ``next_obs[-2] != obs[-1]``, or (2, row): its ``obs[-1]`` is not its stream's newest frame.
    """
    K = obs.shape[1]
    W = ftime.shape[1]
    for b in range(obs.shape[0]):
        if K >= 2 and _differ(obs[b, K - 1], nxt[b, K - 2]):
            return 1, b
        s = streams[b]
        if t[s] > 0:
            w = (t[s] + K) % W
            if ftime[s, w] != t[s] or fep[s, w] != ep[s] or _differ(obs[b, K - 1], pix[s, w]):
                return 2, b
    for b in range(obs.shape[0]):
        s = streams[b]
        if t[s] == 0:  # an episode's first observation: all its frames are new
            for k in range(K):
                _cache_frame(pix, ftime, fep, fslot, fstamp, K, s, ep[s], k + 1 - K, obs[b, k])
        _cache_frame(pix, ftime, fep, fslot, fstamp, K, s, ep[s], t[s] + 1, nxt[b, K - 1])
    return 0, -1


@njit(cache=True)
def _write_rows(frames, stamps, frame_row, st, R, row_obs, row_next, row_id, pix, ftime, fep, fslot, fstamp,
                r_stream, r_ep, r_tobs, r_tnext, out_rows):
    """Place each row's frames (reuse or copy forward), evicting oldest rows before frames die.

    ``frames`` is the ring as bytes, each row 64-byte aligned; ``pix`` the caches' frames as bytes;
    ``st`` = [frames ever written, head, size, written, rows ever written]. Returns (code, bad
    row, rows evicted).
    """
    F = frames.shape[0]
    C = row_id.shape[0]
    K = row_obs.shape[1]
    W = ftime.shape[1]
    g, head, size, written, me = st[0], st[1], st[2], st[3], st[4]
    evicted = 0
    for r in range(r_stream.shape[0]):
        if size == C:  # the row about to be overwritten is the oldest
            size -= 1
            evicted += 1
        s, e = r_stream[r], r_ep[r]
        for half in range(2):
            newest = r_tobs[r] if half == 0 else r_tnext[r]
            for k in range(K):
                j = newest - K + 1 + k
                w = (j + K) % W
                if ftime[s, w] != j or fep[s, w] != e:
                    st[0], st[1], st[2], st[3], st[4] = g, head, size, written, me
                    return MISSING_FRAME, r, evicted
                slot = fslot[s, w]
                reuse = (slot >= 0 and stamps[slot] == fstamp[s, w] and frame_row[slot] >= me - R
                         and stamps[slot] > g + 2 * K - F)
                if not reuse:
                    slot = g % F
                    if stamps[slot] >= 0:  # evict every row that may reference the dying frame
                        limit = frame_row[slot] + R
                        while size > 0 and row_id[(head - size) % C] <= limit:
                            size -= 1
                            evicted += 1
                    _stream_frame(frames[slot], pix[s, w])
                    stamps[slot] = g
                    frame_row[slot] = me
                    fslot[s, w] = slot
                    fstamp[s, w] = g
                    g += 1
                if half == 0:
                    row_obs[head, k] = slot
                else:
                    row_next[head, k] = slot
        row_id[head] = me
        out_rows[r] = head
        head = (head + 1) % C
        size += 1
        written = min(written + 1, C)
        me += 1
    st[0], st[1], st[2], st[3], st[4] = g, head, size, written, me
    store_fence()
    return 0, -1, evicted


class StreamFrames:
    """Each stream's last ``window`` frames (pixels, time, episode, where they sit in the ring)."""

    def __init__(self, window: int, stack: int, frame_shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.window, self.stack = int(window), int(stack)
        self.frame_shape = tuple(frame_shape)
        self.dtype = np.dtype(dtype)
        self.epoch = -1  # the FrameStorage epoch whose slots fslot/fstamp refer to
        self._alloc(0)

    def _alloc(self, streams: int) -> None:
        """(Re)allocate for ``streams`` streams, keeping what is there."""
        old = getattr(self, "pix", None)
        n, w = streams, self.window
        new = {
            "pix": np.zeros((n, w, *self.frame_shape), self.dtype),
            "ftime": np.full((n, w), np.iinfo(np.int64).min, np.int64),
            "fep": np.full((n, w), -1, np.int64),
            "fslot": np.full((n, w), -1, np.int64),
            "fstamp": np.full((n, w), -1, np.int64),
        }
        if old is not None:
            for name, arr in new.items():
                arr[: old.shape[0]] = getattr(self, name)
        for name, arr in new.items():
            setattr(self, name, arr)
        self.pix_words = words(self.pix.reshape(n, w, int(np.prod(self.frame_shape))))
        self.pix_bytes = self.pix.reshape(n, w, int(np.prod(self.frame_shape))).view(np.uint8)

    def ensure(self, streams: int) -> None:
        """Room for stream ids below ``streams`` (grows by doubling)."""
        if streams > self.pix.shape[0]:
            self._alloc(max(streams, 2 * self.pix.shape[0]))

    def check_and_push(self, obs: np.ndarray, next_obs: np.ndarray, streams: np.ndarray, t: np.ndarray,
                       ep: np.ndarray) -> tuple[int, int]:
        """Check one step's frame contract; if it holds, cache its new frames. Returns (code, row).

        ``t``/``ep`` are the writer's per-stream step and episode counters before the step.
        """
        b, k = obs.shape[:2]
        d = int(np.prod(self.frame_shape))
        return _check_and_push(words(obs.reshape(b, k, d)), words(next_obs.reshape(b, k, d)), self.pix_words,
                               self.ftime, self.fep, self.fslot, self.fstamp, streams, t, ep)


class FrameStorage:
    """Rows of scalar fields plus frame indices; ``obs``/``next_obs`` rebuilt from a frame ring on gather."""

    def __init__(self, capacity: int, fields: Mapping[str, Field], frame_capacity: int | None = None,
                 reuse_window: int | None = None) -> None:
        obs, nxt = fields.get("obs"), fields.get("next_obs")
        if obs is None or nxt is None or obs != nxt or len(obs.shape) < 2:
            raise ValueError(
                "frame dedup needs fields 'obs' and 'next_obs' with the same (stack, *frame) shape "
                f"and dtype, got obs={obs}, next_obs={nxt}"
            )
        self.capacity = int(capacity)
        self.fields = dict(fields)
        self.stack = obs.shape[0]
        self.frame_shape = obs.shape[1:]
        k = self.stack
        # Defaults: reuse across a quarter of the capacity in rows (a stream may fall that far
        # behind the others before its frames are copied again), and frames for rows of
        # episodes of 16+ steps (1 + K/16 frames a row) to fill the row ring before frames evict them.
        self.reuse_window = int(reuse_window) if reuse_window is not None else max(self.capacity // 4, 16 * k)
        default_frames = self.capacity + self.capacity // 4 + self.reuse_window + 2 * k
        self.frame_capacity = int(frame_capacity) if frame_capacity is not None else default_frames
        if self.frame_capacity <= 2 * k or self.reuse_window < 0:
            raise ValueError(
                f"frame_capacity must exceed 2 * stack = {2 * k} and reuse_window be >= 0, got "
                f"{self.frame_capacity} and {self.reuse_window}"
            )
        d = int(np.prod(self.frame_shape))
        # The ring is bytes with 64-byte aligned rows (padded), for the streaming stores;
        # ``frames`` is the typed view of the unpadded part, which gather indexes.
        row_bytes = d * obs.dtype.itemsize
        self.ring = aligned_empty((self.frame_capacity, -(-row_bytes // 64) * 64), np.uint8)
        self.frames = self.ring[:, :row_bytes].view(obs.dtype)
        self.stamps = np.full(self.frame_capacity, -1, np.int64)  # g when written: identity of the frame
        self.frame_row = np.full(self.frame_capacity, -1, np.int64)  # id of the row that wrote it
        self.g = 0  # frames ever written
        self.rows_total = 0  # rows ever written (the next row's id)
        self.epoch = 0  # bumped by load_state_dict: stream caches then forget their slots
        others = {n: f for n, f in fields.items() if n not in ("obs", "next_obs")}
        internal = {"_obs_frames": Field((k,), np.dtype(np.int32)),
                    "_next_frames": Field((k,), np.dtype(np.int32)),
                    "_row_id": Field((), np.dtype(np.int64))}
        self.rows = RingStorage(capacity, {**others, **internal})
        self.scalar_fields = others

    # The ring window (same names as RingStorage, which the samplers read).
    head = property(lambda self: self.rows.head)
    size = property(lambda self: self.rows.size)
    written = property(lambda self: self.rows.written)
    tail = property(lambda self: self.rows.tail)

    def live_rows(self) -> np.ndarray:
        """Indices of the live rows, oldest first."""
        return self.rows.live_rows()

    def new_stream_cache(self, n_step: int) -> StreamFrames:
        """A cache big enough for rows of up to ``n_step`` steps."""
        return StreamFrames(n_step + self.stack + 1, self.stack, self.frame_shape, self.fields["obs"].dtype)


    def add(self, batch: Mapping[str, np.ndarray], count: int) -> np.ndarray:
        """Refused: rows of a dedup storage come through NStepWriter, which knows the streams."""
        raise TypeError(
            "a frame-deduplicating replay is written through NStepWriter(replay, ...): it needs "
            "streams and episode boundaries to know which frames rows share"
        )

    def write_stream_rows(self, batch: Mapping[str, np.ndarray], cache: StreamFrames, streams: np.ndarray,
                          episodes: np.ndarray, t_obs: np.ndarray,
                          t_next: np.ndarray) -> tuple[np.ndarray, int, int]:
        """Write rows whose obs/next_obs are frames ``t_obs``/``t_next`` (newest) of their stream.

        Returns (rows, first evicted row, number evicted). Rows are evicted oldest first, and
        with a small frame ring that can include rows written earlier in the same call:
        the caller keeps only rows still in the live window.
        """
        n = len(streams)
        if n > self.capacity:
            raise ValueError(f"a batch of {n} rows does not fit a capacity of {self.capacity}")
        if cache.epoch != self.epoch:  # after a load, cached ring slots mean nothing
            cache.fslot[:] = -1
            cache.epoch = self.epoch
        st = np.array([self.g, self.rows.head, self.rows.size, self.rows.written, self.rows_total], np.int64)
        first_tail, head0 = self.rows.tail, self.rows.head
        arr = self.rows.arrays
        out = np.empty(n, np.int64)
        code, bad, evicted = _write_rows(
            self.ring, self.stamps, self.frame_row, st, self.reuse_window,
            arr["_obs_frames"], arr["_next_frames"], arr["_row_id"],
            cache.pix_bytes, cache.ftime, cache.fep, cache.fslot, cache.fstamp,
            streams, episodes, t_obs, t_next, out,
        )
        self.g, self.rows_total = int(st[0]), int(st[4])
        self.rows.head, self.rows.size, self.rows.written = int(st[1]), int(st[2]), int(st[3])
        if code != 0:
            raise RuntimeError(
                f"internal error: frame {t_obs[bad]}/{t_next[bad]} of stream {streams[bad]} episode "
                f"{episodes[bad]} is not in the writer's cache"
            )
        self.rows.write(batch, head0, n)
        return out, first_tail, int(evicted)

    def gather(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Fresh copies of ``rows``, ``obs``/``next_obs`` rebuilt as ``[n, K, *frame]``."""
        out = {name: self.rows.arrays[name][rows] for name in self.scalar_fields}
        shape = (len(rows), self.stack, *self.frame_shape)
        out["obs"] = self.frames[self.rows.arrays["_obs_frames"][rows]].reshape(shape)
        out["next_obs"] = self.frames[self.rows.arrays["_next_frames"][rows]].reshape(shape)
        return out

    def nbytes(self) -> int:
        """Bytes of the preallocated arrays (frame ring, stamps, rows)."""
        return self.ring.nbytes + self.stamps.nbytes + self.frame_row.nbytes + self.rows.nbytes()

    def state_dict(self) -> dict[str, Any]:
        """Frame ring (written part), stamps, counters and rows."""
        used = min(self.g, self.frame_capacity)
        return {"frames": self.frames[:used].copy(), "stamps": self.stamps.copy(),
                "frame_row": self.frame_row.copy(), "g": self.g, "rows_total": self.rows_total,
                "frame_capacity": self.frame_capacity, "reuse_window": self.reuse_window,
                "rows": self.rows.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict returned; writers' caches re-copy frames they still need."""
        if (state["frame_capacity"], state["reuse_window"]) != (self.frame_capacity, self.reuse_window):
            raise ValueError(
                f"checkpoint frame_capacity/reuse_window {state['frame_capacity']}/{state['reuse_window']} "
                f"differ from {self.frame_capacity}/{self.reuse_window}"
            )
        frames = state["frames"]
        if frames.shape[1:] != self.frames.shape[1:] or frames.dtype != self.frames.dtype:
            raise ValueError(f"checkpoint frames {frames.shape} {frames.dtype} do not match {self.frames.shape}")
        self.rows.load_state_dict(state["rows"])
        self.frames[: len(frames)] = frames
        self.stamps[:] = state["stamps"]
        self.frame_row[:] = state["frame_row"]
        self.g, self.rows_total = int(state["g"]), int(state["rows_total"])
        self.epoch += 1
