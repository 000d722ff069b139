"""The compiled kernels behind `NStepWriter` (seedpool.replay.nstep): all per-stream n-step
state lives in arrays indexed by stream id, and each ``add`` or ``flush`` is one of these
calls over the whole batch, with no Python loop over envs.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _row(w_reward, w_q, powers, s, first, last, terminal, next_value):
    """(reward sum, discount, |TD| priority) of the row of stream ``s`` from step ``first`` to ``last``."""
    n = w_reward.shape[1]
    m = last - first + 1
    ret = 0.0
    for k in range(m):
        ret += powers[k] * w_reward[s, (first + k) % n]
    discount = 0.0 if terminal else powers[m]
    return ret, discount, abs(ret + discount * next_value - w_q[s, first % n])


@njit(cache=True)
def _advance(ss, terminated, truncated, reward, q, next_value, powers, t, start, ep, w_reward, w_q,
             last_value, w_batch, last_batch, out_stream, out_batch, out_first, out_ep, out_end, out_from,
             out_ret, out_disc, out_prio):
    """Record the steps in order, write out every row each completes, advance the counters; returns rows.

    A stream may have several steps in one call (in its time order). ``w_batch[s, pos]`` and
    ``last_batch[s]`` (-1 between calls) note which step of this call filled each window slot
    and the stream's last one; a row whose first step came in this call reads its first
    observation and action from that step (``out_from``, else -1: from the window).
    """
    n = w_reward.shape[1]
    rows = 0
    for b in range(ss.shape[0]):
        s = ss[b]
        ts = t[s]
        w_reward[s, ts % n] = reward[b]
        w_q[s, ts % n] = q[b]
        w_batch[s, ts % n] = b
        last_batch[s] = b
        last_value[s] = next_value[b]
        done = terminated[b] or truncated[b]
        pending = ts - start[s] + 1
        count = pending if done else (1 if pending == n else 0)
        for j in range(count):  # every completed row ends at this step
            first = start[s] + j
            ret, disc, prio = _row(w_reward, w_q, powers, s, first, ts, terminated[b], next_value[b])
            out_stream[rows], out_batch[rows], out_first[rows], out_ep[rows] = s, b, first, ep[s]
            out_end[rows], out_from[rows] = ts, w_batch[s, first % n]
            out_ret[rows], out_disc[rows], out_prio[rows] = ret, disc, prio
            rows += 1
        if done:
            t[s], start[s], ep[s] = 0, 0, ep[s] + 1
        else:
            t[s], start[s] = ts + 1, start[s] + count
    return rows


@njit(cache=True)
def _count_rows(ss, done, t, start, n):
    """Rows an `_advance` of these steps would write (no state changes)."""
    pending = t - start
    rows = 0
    for b in range(ss.shape[0]):
        s = ss[b]
        p = pending[s] + 1
        if done[b]:
            rows += p
            pending[s] = 0
        elif p == n:
            rows += 1
            pending[s] = n - 1
        else:
            pending[s] = p
    return rows


@njit(cache=True)
def _occurrences(ss, streams):
    """Each step's occurrence of its stream in this call (0 for the first), and the most of any stream."""
    seen = np.zeros(streams, np.int64)
    out = np.empty(ss.shape[0], np.int64)
    most = 0
    for b in range(ss.shape[0]):
        out[b] = seen[ss[b]]
        seen[ss[b]] += 1
        most = max(most, seen[ss[b]])
    return out, most


@njit(cache=True)
def _flush(powers, t, start, ep, w_reward, w_q, last_value, out_stream, out_first, out_ep, out_ret,
           out_disc, out_prio):
    """Write out every pending row, bootstrapping from its stream's latest observation; returns rows."""
    rows = 0
    for s in range(t.shape[0]):
        for first in range(start[s], t[s]):
            ret, disc, prio = _row(w_reward, w_q, powers, s, first, t[s] - 1, False, last_value[s])
            out_stream[rows], out_first[rows], out_ep[rows] = s, first, ep[s]
            out_ret[rows], out_disc[rows], out_prio[rows] = ret, disc, prio
            rows += 1
        start[s] = t[s]
    return rows
