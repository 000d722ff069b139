"""Seaquest's state row (seaquest.py): its columns, and minatar's Python lists kept in it.

minatar keeps Seaquest's bullets, fish, subs and divers in Python lists that it walks
backwards while removing from them, with `list.remove` (the *first equal* element, which may
be another one than the element at hand). The order of those lists decides which of two
things in one cell is hit first, so each list is kept here in order, as a run of columns of
the env's state row, and the game walks it exactly as CPython walks `reversed(list)`: the
element at hand is a handle that follows it when an earlier equal element is removed, or
(-1) points at its values kept in the DETACHED columns once it left the list (minatar goes
on using them: an enemy sub that leaves the board on a step may still fire on it).
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar.family import ROW, move

# Columns of an env's state row: scalars, the element at hand once it left its list, then the lists.
(SUB_X, SUB_Y, SUB_RIGHT, OXYGEN, DIVER_COUNT, E_SPAWN_SPEED, E_SPAWN_TIMER, D_SPAWN_TIMER, MOVE_SPEED,
 RAMP_INDEX, SHOT_TIMER, SURFACE, TERMINAL, N_FRIENDLY, N_ENEMY, N_FISH, N_SUBS, N_DIVERS) = range(18)
DETACHED = 18
# Fields of list elements: x, y, direction (1: rightward), move timer (fish, subs, divers),
# shot timer (subs).
X, Y, DIR, TIMER, SHOT = range(5)
# A list: (column of its length, first column, columns per element, capacity). Capacities are
# well above what the game's timers allow on screen at once (one friendly shot per 6 steps,
# one diver per 31, at most one enemy a step); more raises an error rather than dropping one.
FRIENDLY_BULLETS = (N_FRIENDLY, DETACHED + 5, 3, 8)
ENEMY_BULLETS = (N_ENEMY, FRIENDLY_BULLETS[1] + 3 * 8, 3, 48)
FISH = (N_FISH, ENEMY_BULLETS[1] + 3 * 48, 4, 48)
SUBS = (N_SUBS, FISH[1] + 4 * 48, 5, 48)
DIVERS = (N_DIVERS, SUBS[1] + 5 * 48, 4, 8)
STATE_SIZE = DIVERS[1] + 4 * 8
LIST = types.UniTuple(types.int64, 4)


@njit(types.int64(LIST, types.int64, types.int64), cache=True, nogil=True)
def col(lst, at, field):  # pragma: no cover - compiled
    """The column of `field` of the element at handle `at` (-1: the one that left its list)."""
    return DETACHED + field if at < 0 else lst[1] + lst[2] * at + field


@njit(types.int64(ROW, LIST), cache=True, nogil=True)
def append(s, lst):  # pragma: no cover - compiled
    """Room for one more element at the end of `lst`; its index."""
    n = s[lst[0]]
    if n >= lst[3]:
        raise RuntimeError("native MinAtar Seaquest: more objects on screen than its state row holds")
    s[lst[0]] = n + 1
    return n


@njit(types.int64(ROW, LIST, types.int64), cache=True, nogil=True)
def _first_equal(s, lst, at):  # pragma: no cover - compiled
    """Index of the first element of `lst` equal (every field) to the element at handle `at`."""
    base, width = lst[1], lst[2]
    for k in range(s[lst[0]]):
        same = True
        for f in range(width):
            if s[base + width * k + f] != s[col(lst, at, f)]:
                same = False
                break
        if same:
            return k
    raise RuntimeError("native MinAtar Seaquest: removing an element that is not in its list")


@njit(types.void(ROW, LIST, types.int64), cache=True, nogil=True)
def _delete(s, lst, k):  # pragma: no cover - compiled
    """`del lst[k]`: the later elements move down one place."""
    n, base, width = s[lst[0]], lst[1], lst[2]
    move(s, base + width * k, base + width * (k + 1), width * (n - 1 - k))
    s[lst[0]] = n - 1


@njit(types.int64(ROW, LIST, types.int64), cache=True, nogil=True)
def remove(s, lst, at):  # pragma: no cover - compiled
    """`lst.remove(x)` for x the element at hand (handle `at`): the first element equal to it
    goes. Returns x's new handle: one lower if an earlier equal element went, -1 (its values
    kept in the DETACHED columns) if x itself went."""
    k = _first_equal(s, lst, at)
    if k == at:
        move(s, DETACHED, lst[1] + lst[2] * k, lst[2])
        at = -1
    elif k < at:
        at -= 1
    _delete(s, lst, k)
    return at


@njit(types.void(ROW, LIST, types.int64), cache=True, nogil=True)
def drop(s, lst, k):  # pragma: no cover - compiled
    """`lst.remove(lst[k])` for an element not at hand (no handle to keep)."""
    _delete(s, lst, _first_equal(s, lst, k))
