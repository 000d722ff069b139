"""MinAtar Seaquest as a native family (see family.py).

A submarine shoots fish and enemy subs (+1 each), which cross the rows and enemy subs fire
back; it collects divers and must surface before its oxygen runs out. Surfacing with six
divers gives a bonus for the oxygen left; surfacing with none ends the episode. Each
surfacing with divers speeds enemies up while ramping. Channels: sub front, sub back,
friendly bullet, trail, enemy bullet, enemy fish, enemy sub, oxygen gauge, diver gauge, diver.

The state row's layout and minatar's list semantics are in seaquest_lists.py.
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar import rng
from seedpool.envs.families.minatar.family import DOWN, FIRE, LEFT, OBS, RIGHT, ROW, UP, MinAtarFamily, fill
from seedpool.envs.families.minatar.kernels import game_kernels
from seedpool.envs.families.minatar.rng import POS_T, WORDS_T
from seedpool.envs.families.minatar.seaquest_lists import (
    SUB_X, SUB_Y, SUB_RIGHT, OXYGEN, DIVER_COUNT, E_SPAWN_SPEED, E_SPAWN_TIMER, D_SPAWN_TIMER, MOVE_SPEED,
    RAMP_INDEX, SHOT_TIMER, SURFACE, TERMINAL, N_FRIENDLY, N_FISH, N_SUBS, X, Y, DIR,
    TIMER, SHOT, FRIENDLY_BULLETS, ENEMY_BULLETS, FISH, SUBS, DIVERS, STATE_SIZE, LIST, col, append,
    remove, drop,
)

RAMP_INTERVAL = 100
MAX_OXYGEN = 200
INIT_SPAWN_SPEED = 20
DIVER_SPAWN_SPEED = 30
INIT_MOVE_INTERVAL = 5
SHOT_COOL_DOWN = 5
ENEMY_SHOT_INTERVAL = 10
DIVER_MOVE_INTERVAL = 5


@njit(types.boolean(ROW, LIST, types.int64), cache=True, nogil=True)
def _on_sub(s, lst, at):  # pragma: no cover - compiled
    return s[col(lst, at, X)] == s[SUB_X] and s[col(lst, at, Y)] == s[SUB_Y]


@njit(types.boolean(ROW, LIST, types.int64, LIST, types.int64), cache=True, nogil=True)
def _same_cell(s, a, at_a, b, at_b):  # pragma: no cover - compiled
    return s[col(a, at_a, X)] == s[col(b, at_b, X)] and s[col(a, at_a, Y)] == s[col(b, at_b, Y)]


@njit(types.boolean(ROW, LIST, types.int64), cache=True, nogil=True)
def _advance(s, lst, at):  # pragma: no cover - compiled
    """Move one cell along its direction; True when that left the board."""
    c = col(lst, at, X)
    s[c] += 1 if s[col(lst, at, DIR)] else -1
    return s[c] < 0 or s[c] > 9


@njit(types.UniTuple(types.int64, 2)(ROW, LIST, types.int64), cache=True, nogil=True)
def _shot_by_friendly(s, lst, at):  # pragma: no cover - compiled
    """An enemy at handle `at` on a friendly bullet: both go. Returns (reward, new handle)."""
    for k in range(s[N_FRIENDLY]):
        if _same_cell(s, lst, at, FRIENDLY_BULLETS, k):
            at = remove(s, lst, at)
            drop(s, FRIENDLY_BULLETS, k)
            return 1, at
    return 0, at


# -- the game -------------------------------------------------------------------------------
@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _reset_one(s, words, pos, i):  # pragma: no cover - compiled
    fill(s, 0, s.size, 0)
    s[OXYGEN] = MAX_OXYGEN
    s[SUB_X] = 5
    s[E_SPAWN_SPEED] = s[E_SPAWN_TIMER] = INIT_SPAWN_SPEED
    s[D_SPAWN_TIMER] = DIVER_SPAWN_SPEED
    s[MOVE_SPEED] = INIT_MOVE_INTERVAL
    s[SURFACE] = 1


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _spawn_enemy(s, words, pos, i):  # pragma: no cover - compiled
    """A fish or a sub at a random row and side, unless that row has one heading the other way."""
    rightward = rng.rand(words, pos, i) < 0.5
    is_sub = rng.rand(words, pos, i) < 1.0 / 3.0
    y = rng.randint(words, pos, i, 1, 9)
    for lst in (SUBS, FISH):
        for k in range(s[lst[0]]):
            if s[col(lst, k, Y)] == y and s[col(lst, k, DIR)] != rightward:
                return
    lst = SUBS if is_sub else FISH
    e = col(lst, append(s, lst), 0)
    s[e + X], s[e + Y], s[e + DIR], s[e + TIMER] = 0 if rightward else 9, y, rightward, s[MOVE_SPEED]
    if is_sub:
        s[e + SHOT] = ENEMY_SHOT_INTERVAL


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _spawn_diver(s, words, pos, i):  # pragma: no cover - compiled
    rightward = rng.rand(words, pos, i) < 0.5
    y = rng.randint(words, pos, i, 1, 9)
    e = col(DIVERS, append(s, DIVERS), 0)
    s[e + X], s[e + Y], s[e + DIR], s[e + TIMER] = 0 if rightward else 9, y, rightward, DIVER_MOVE_INTERVAL


@njit(types.int64(ROW), cache=True, nogil=True)
def _move_friendly_bullets(s):  # pragma: no cover - compiled
    reward = 0
    lst = FRIENDLY_BULLETS
    j = s[lst[0]] - 1
    while 0 <= j < s[lst[0]]:  # CPython's reversed(list): one index, checked against the live length
        at = j
        if _advance(s, lst, at):
            remove(s, lst, at)
        else:
            hit = False
            for k in range(s[N_FISH]):
                if _same_cell(s, lst, at, FISH, k):
                    drop(s, FISH, k)
                    remove(s, lst, at)
                    reward += 1
                    hit = True
                    break
            if not hit:
                for k in range(s[N_SUBS]):
                    if _same_cell(s, lst, at, SUBS, k):
                        drop(s, SUBS, k)
                        remove(s, lst, at)
                        reward += 1
                        break
        j -= 1
    return reward


@njit(types.void(ROW), cache=True, nogil=True)
def _move_divers(s):  # pragma: no cover - compiled
    lst = DIVERS
    j = s[lst[0]] - 1
    while 0 <= j < s[lst[0]]:
        at = j
        if _on_sub(s, lst, at) and s[DIVER_COUNT] < 6:
            remove(s, lst, at)
            s[DIVER_COUNT] += 1
        elif s[col(lst, at, TIMER)] == 0:
            s[col(lst, at, TIMER)] = DIVER_MOVE_INTERVAL
            if _advance(s, lst, at):
                remove(s, lst, at)
            elif _on_sub(s, lst, at) and s[DIVER_COUNT] < 6:
                remove(s, lst, at)
                s[DIVER_COUNT] += 1
        else:
            s[col(lst, at, TIMER)] -= 1
        j -= 1


@njit(types.int64(ROW, LIST), cache=True, nogil=True)
def _move_enemies(s, lst):  # pragma: no cover - compiled
    """Fish or subs: move on their timers, meet the sub or a friendly bullet; subs also fire
    (the element at hand does, even once it left the list). Returns the reward."""
    reward = 0
    j = s[lst[0]] - 1
    while 0 <= j < s[lst[0]]:
        at = j
        if _on_sub(s, lst, at):
            s[TERMINAL] = 1
        if s[col(lst, at, TIMER)] == 0:
            s[col(lst, at, TIMER)] = s[MOVE_SPEED]
            if _advance(s, lst, at):
                at = remove(s, lst, at)
            elif _on_sub(s, lst, at):
                s[TERMINAL] = 1
            else:
                hit, at = _shot_by_friendly(s, lst, at)
                reward += hit
        else:
            s[col(lst, at, TIMER)] -= 1
        if lst[0] == N_SUBS:
            if s[col(lst, at, SHOT)] == 0:
                s[col(lst, at, SHOT)] = ENEMY_SHOT_INTERVAL
                b = col(ENEMY_BULLETS, append(s, ENEMY_BULLETS), 0)
                s[b + X], s[b + Y], s[b + DIR] = s[col(lst, at, X)], s[col(lst, at, Y)], s[col(lst, at, DIR)]
            else:
                s[col(lst, at, SHOT)] -= 1
        j -= 1
    return reward


@njit(types.void(ROW), cache=True, nogil=True)
def _move_enemy_bullets(s):  # pragma: no cover - compiled
    lst = ENEMY_BULLETS
    j = s[lst[0]] - 1
    while 0 <= j < s[lst[0]]:
        at = j
        if _on_sub(s, lst, at):
            s[TERMINAL] = 1
        if _advance(s, lst, at):
            remove(s, lst, at)
        elif _on_sub(s, lst, at):
            s[TERMINAL] = 1
        j -= 1


@njit(types.int64(ROW, types.boolean), cache=True, nogil=True)
def _surface(s, ramping):  # pragma: no cover - compiled
    """Surfacing with divers: a bonus with six, oxygen refilled, one diver fewer, faster enemies."""
    s[SURFACE] = 1
    reward = 0
    if s[DIVER_COUNT] == 6:
        s[DIVER_COUNT] = 0
        reward = s[OXYGEN] * 10 // MAX_OXYGEN
    s[OXYGEN] = MAX_OXYGEN
    s[DIVER_COUNT] -= 1  # after the bonus too: minatar's count then reads -1
    if ramping and (s[E_SPAWN_SPEED] > 1 or s[MOVE_SPEED] > 2):
        if s[MOVE_SPEED] > 2 and s[RAMP_INDEX] % 2:
            s[MOVE_SPEED] -= 1
        if s[E_SPAWN_SPEED] > 1:
            s[E_SPAWN_SPEED] -= 1
        s[RAMP_INDEX] += 1
    return reward


@njit(types.int64(ROW, types.int64, types.boolean, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _act(s, a, ramping, words, pos, i):  # pragma: no cover - compiled
    """One step of one env with minatar action `a`; returns the reward."""
    if s[TERMINAL]:
        return 0
    if s[E_SPAWN_TIMER] == 0:
        _spawn_enemy(s, words, pos, i)
        s[E_SPAWN_TIMER] = s[E_SPAWN_SPEED]
    if s[D_SPAWN_TIMER] == 0:
        _spawn_diver(s, words, pos, i)
        s[D_SPAWN_TIMER] = DIVER_SPAWN_SPEED
    if a == FIRE and s[SHOT_TIMER] == 0:
        b = col(FRIENDLY_BULLETS, append(s, FRIENDLY_BULLETS), 0)
        s[b + X], s[b + Y], s[b + DIR] = s[SUB_X], s[SUB_Y], s[SUB_RIGHT]
        s[SHOT_TIMER] = SHOT_COOL_DOWN
    elif a == LEFT:
        s[SUB_X] = max(0, s[SUB_X] - 1)
        s[SUB_RIGHT] = 0
    elif a == RIGHT:
        s[SUB_X] = min(9, s[SUB_X] + 1)
        s[SUB_RIGHT] = 1
    elif a == UP:
        s[SUB_Y] = max(0, s[SUB_Y] - 1)
    elif a == DOWN:
        s[SUB_Y] = min(8, s[SUB_Y] + 1)
    reward = _move_friendly_bullets(s)
    _move_divers(s)
    reward += _move_enemies(s, SUBS)
    _move_enemy_bullets(s)
    reward += _move_enemies(s, FISH)
    for timer in (E_SPAWN_TIMER, D_SPAWN_TIMER, SHOT_TIMER):
        if s[timer] > 0:
            s[timer] -= 1
    if s[OXYGEN] <= 0:
        s[TERMINAL] = 1
    if s[SUB_Y] > 0:
        s[OXYGEN] -= 1
        s[SURFACE] = 0
    elif not s[SURFACE]:
        if s[DIVER_COUNT] == 0:
            s[TERMINAL] = 1
        else:
            reward += _surface(s, ramping)
    return reward


@njit(types.void(ROW, LIST, types.int64, types.boolean, OBS), cache=True, nogil=True)
def _draw_list(s, lst, channel, trail, obs):  # pragma: no cover - compiled
    """Each element of `lst` on `channel`, and the cell behind it on the trail channel
    (`trail` True) where that is on the board. Columns wrap as Python's negative indices."""
    for k in range(s[lst[0]]):
        x, y = s[col(lst, k, X)], s[col(lst, k, Y)]
        obs[channel, y, x % 10] = True
        if trail:
            back_x = x - 1 if s[col(lst, k, DIR)] else x + 1
            if 0 <= back_x <= 9:
                obs[3, y, back_x] = True


@njit(types.void(ROW, OBS), cache=True, nogil=True)
def _draw(s, obs):  # pragma: no cover - compiled
    """minatar's `state()`, channels first, into a zeroed `obs [10, 10, 10]`."""
    x, y = s[SUB_X], s[SUB_Y]
    obs[0, y, x] = True
    obs[1, y, (x - 1 if s[SUB_RIGHT] else x + 1) % 10] = True
    for c in range(max(0, s[OXYGEN]) * 10 // MAX_OXYGEN):
        obs[7, 9, c] = True
    for c in range(max(0, 9 - s[DIVER_COUNT]), 9):  # a count of -1 (see _surface) shows none
        obs[8, 9, c] = True
    _draw_list(s, FRIENDLY_BULLETS, 2, False, obs)
    _draw_list(s, ENEMY_BULLETS, 4, False, obs)
    _draw_list(s, FISH, 5, True, obs)
    _draw_list(s, SUBS, 6, True, obs)
    _draw_list(s, DIVERS, 9, True, obs)


class Seaquest(MinAtarFamily):
    """MinAtar/Seaquest-v1: minatar's Seaquest (its minimal action set is all six actions)."""

    channels = 10
    state_size = STATE_SIZE
    kernels = game_kernels(_act, _reset_one, _draw, TERMINAL)
    minimal_actions = (0, LEFT, UP, RIGHT, DOWN, FIRE)


class SeaquestAllActions(Seaquest):
    """MinAtar/Seaquest-v0: the same game with all six actions (the same set, as in minatar)."""

    all_actions = True
