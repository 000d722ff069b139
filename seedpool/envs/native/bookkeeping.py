"""The engine's per-env bookkeeping of native families, compiled: what `EnvRunner` keeps
for each Python env (elapsed steps, the episode's return, the time limit, autoreset), kept
in arrays and written by numba code.

`account` and `clear_rows` serve the executor's general path (a family's `step`/`reset`
on arrays). `Book`, `end_step` and `started` serve fused steps (`NativeEnv.step_autoreset`):
a family's compiled loop calls them for each env, so that stepping, bookkeeping and
autoreset of a whole batch are one call from Python. At a few dozen envs the fixed cost of
each call from Python (argument typing, array allocation) is larger than the arithmetic of
all the envs: one call per batch instead of a dozen is where the time goes
(benchmarks/results/native_profile.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

# Autoreset modes as the compiled code sees them.
DISABLED, NEXT_STEP, SAME_STEP = 0, 1, 2
MODES = {"disabled": DISABLED, "next_step": NEXT_STEP, "same_step": SAME_STEP}


class Book(NamedTuple):
    """The arrays a fused step writes besides the family's own state (one row per env).

    The first five are the pool's result buffers, the next three the engine's own counters.
    Built once per pool and passed to compiled code as `*book`, field by field: numba types
    separate arrays on each call far faster than a tuple subclass, and its loops run faster
    on arrays passed as arguments than on arrays read out of a tuple."""

    reward: np.ndarray  # float32, the pool's
    terminated: np.ndarray  # bool, the pool's
    truncated: np.ndarray  # bool, the pool's
    elapsed_step: np.ndarray  # int32, the pool's (also the episode length)
    episode_return: np.ndarray  # float64, the pool's
    elapsed: np.ndarray  # int64: steps of the running episode
    returns: np.ndarray  # float64: return of the running episode
    needs_reset: np.ndarray  # bool: the next step of this env resets it (next_step autoreset)
    limit: int  # the time limit, 0 for none
    mode: int  # DISABLED, NEXT_STEP or SAME_STEP


@njit(cache=True)
def _nothing():  # pragma: no cover - compiled
    return 0


def load_numba() -> None:
    """Get numba's compiler ready now: the first compiled call of a process (even one loaded
    from numba's cache) first imports numba's array math, and scipy for its BLAS check, a
    fixed cost (docs/engine.md). A native pool pays it when it is built, as a Python-env pool
    starts its workers then, rather than on its first reset, inside a run's timed steps."""
    _nothing()


# Inlined into the family's loop (numba's inline): as calls, or reading the arrays out of a
# tuple, they made a fused CartPole step slower per env (benchmarks/results/native_profile.md).
@njit(cache=True, nogil=True, inline="always")
def end_step(i, reward, terminated, out_reward, out_terminated, out_truncated, elapsed_step, episode_return,
             elapsed, returns, needs_reset, limit, mode):  # pragma: no cover - compiled
    """Account env i's step (its reward and termination) with the arguments after them, a
    `Book`'s fields: count the step, add to the return, truncate at the limit, write the
    pool's row. True when env i must reset now (same_step autoreset: the caller copies the
    final observation, resets the env and calls `started` with `keep_row`); with next_step
    autoreset the env is marked to reset on its next step."""
    n = elapsed[i] + 1
    ret = returns[i] + reward
    truncated = limit > 0 and n == limit and not terminated
    elapsed[i] = n
    returns[i] = ret
    out_reward[i] = reward
    out_terminated[i] = terminated
    out_truncated[i] = truncated
    elapsed_step[i] = n
    episode_return[i] = ret
    if terminated or truncated:
        if mode == SAME_STEP:
            return True
        if mode == NEXT_STEP:
            needs_reset[i] = True
    return False


@njit(cache=True, nogil=True, inline="always")
def started(i, keep_row, out_reward, out_terminated, out_truncated, elapsed_step, episode_return, elapsed, returns,
            needs_reset):  # pragma: no cover - compiled
    """Env i was just reset: a new episode. `keep_row` (same_step autoreset): the pool's row
    keeps reporting the step that ended the episode; otherwise it reports the reset."""
    elapsed[i] = 0
    returns[i] = 0.0
    needs_reset[i] = False
    if not keep_row:
        out_reward[i] = 0.0
        out_terminated[i] = False
        out_truncated[i] = False
        elapsed_step[i] = 0
        episode_return[i] = 0.0


@njit(cache=True, nogil=True)
def account(rows, reward, terminated, limit, elapsed, returns, out_reward, out_terminated, out_truncated,
            out_elapsed, out_return, ended):  # pragma: no cover - compiled
    """The engine's per-env bookkeeping of a step, as EnvRunner keeps it: count the step, add
    the reward to the return, truncate at the time limit (`limit` 0: none), write each env's
    row; put the rows whose episode ended into `ended` and return how many there are.

    One compiled loop: as NumPy expressions it was a dozen calls, each costing more than
    the arithmetic of 32 envs."""
    n_ended = 0
    for k in range(rows.size):
        i = rows[k]
        n = elapsed[i] + 1
        ret = returns[i] + reward[k]
        term = terminated[k]
        trunc = limit > 0 and n == limit and not term
        elapsed[i] = n
        returns[i] = ret
        out_reward[i] = reward[k]
        out_terminated[i] = term
        out_truncated[i] = trunc
        out_elapsed[i] = n
        out_return[i] = ret
        if term or trunc:
            ended[n_ended] = i
            n_ended += 1
    return n_ended


@njit(cache=True, nogil=True)
def clear_rows(rows, after_fault, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
               returns, restart_marks, needs_reset):  # pragma: no cover - compiled
    """The engine's rows after a reset (as EnvRunner.reset / recover write them); returns
    how many restart marks it cleared. After a fault the row reports the episode truncated
    and the next step resets once more: callers see an ordinary episode boundary."""
    cleared = 0
    for k in range(rows.size):
        i = rows[k]
        reward[i] = 0.0
        terminated[i] = False
        truncated[i] = after_fault
        elapsed_step[i] = 0
        episode_return[i] = 0.0
        elapsed[i] = 0
        returns[i] = 0.0
        if restart_marks[i]:
            restart_marks[i] = False
            cleared += 1
        needs_reset[i] = after_fault
    return cleared


@njit(cache=True, nogil=True)
def started_rows(rows, keep_row, out_reward, out_terminated, out_truncated, elapsed_step, episode_return, elapsed,
                 returns, needs_reset):  # pragma: no cover - compiled
    """`started` for envs `rows` (just reset), `keep_row[k]` for env rows[k]: for a family
    whose fused step leaves its resets to Python (their draws are NumPy's)."""
    for k in range(rows.size):
        started(rows[k], keep_row[k], out_reward, out_terminated, out_truncated, elapsed_step, episode_return,
                elapsed, returns, needs_reset)
