"""MinAtar Asterix as a native family (see family.py).

The player moves on rows 1-8 while enemies and gold cross them (one per row at most);
gold gives +1, an enemy ends the episode. Spawning and movement speed up every 100 steps
while ramping. Channels: player, enemy, trail, gold.
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar import rng
from seedpool.envs.families.minatar.family import DOWN, LEFT, OBS, RIGHT, ROW, UP, MinAtarFamily, fill
from seedpool.envs.families.minatar.kernels import game_kernels
from seedpool.envs.families.minatar.rng import POS_T, WORDS_T

RAMP_INTERVAL = 100
INIT_SPAWN_SPEED = 10
INIT_MOVE_INTERVAL = 5
# Columns of an env's state row; then 8 entity slots (slot k on row k + 1) of 5 columns.
(PLAYER_X, PLAYER_Y, SPAWN_SPEED, SPAWN_TIMER, MOVE_SPEED, MOVE_TIMER, RAMP_TIMER, RAMP_INDEX, TERMINAL,
 ENTITIES) = range(10)
ALIVE, X, Y, RIGHTWARD, GOLD = range(5)
STATE_SIZE = ENTITIES + 8 * 5


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _reset_one(s, words, pos, i):  # pragma: no cover - compiled
    fill(s, 0, s.size, 0)
    s[PLAYER_X], s[PLAYER_Y] = 5, 5
    s[SPAWN_SPEED] = s[SPAWN_TIMER] = INIT_SPAWN_SPEED
    s[MOVE_SPEED] = s[MOVE_TIMER] = INIT_MOVE_INTERVAL
    s[RAMP_TIMER] = RAMP_INTERVAL


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _spawn(s, words, pos, i):  # pragma: no cover - compiled
    """An enemy or gold at a random free row, entering from a random side (minatar's draws:
    side, gold, then the row among the free ones; nothing spawns when all are taken)."""
    rightward = rng.rand(words, pos, i) < 0.5
    gold = rng.rand(words, pos, i) < 1.0 / 3.0
    free = [k for k in range(8) if not s[ENTITIES + 5 * k + ALIVE]]
    if len(free) == 0:
        return
    slot = free[rng.randint(words, pos, i, 0, len(free))]
    e = ENTITIES + 5 * slot
    s[e + ALIVE], s[e + X], s[e + Y] = 1, 0 if rightward else 9, slot + 1
    s[e + RIGHTWARD], s[e + GOLD] = rightward, gold


@njit(types.int64(ROW, types.int64), cache=True, nogil=True)
def _meet(s, e):  # pragma: no cover - compiled
    """Entity `e` on the player: gold is taken (returns 1), an enemy ends the episode."""
    if s[e + X] == s[PLAYER_X] and s[e + Y] == s[PLAYER_Y]:
        if s[e + GOLD]:
            s[e + ALIVE] = 0
            return 1
        s[TERMINAL] = 1
    return 0


@njit(types.int64(ROW, types.int64, types.boolean, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _act(s, a, ramping, words, pos, i):  # pragma: no cover - compiled
    """One step of one env with minatar action `a`; returns the reward."""
    if s[TERMINAL]:
        return 0
    if s[SPAWN_TIMER] == 0:
        _spawn(s, words, pos, i)
        s[SPAWN_TIMER] = s[SPAWN_SPEED]
    if a == LEFT:
        s[PLAYER_X] = max(0, s[PLAYER_X] - 1)
    elif a == RIGHT:
        s[PLAYER_X] = min(9, s[PLAYER_X] + 1)
    elif a == UP:
        s[PLAYER_Y] = max(1, s[PLAYER_Y] - 1)
    elif a == DOWN:
        s[PLAYER_Y] = min(8, s[PLAYER_Y] + 1)
    reward = 0
    for k in range(8):
        e = ENTITIES + 5 * k
        if s[e + ALIVE]:
            reward += _meet(s, e)
    if s[MOVE_TIMER] == 0:
        s[MOVE_TIMER] = s[MOVE_SPEED]
        for k in range(8):
            e = ENTITIES + 5 * k
            if s[e + ALIVE]:
                s[e + X] += 1 if s[e + RIGHTWARD] else -1
                if s[e + X] < 0 or s[e + X] > 9:
                    s[e + ALIVE] = 0  # off the board (it meets no one there)
                else:
                    reward += _meet(s, e)
    s[SPAWN_TIMER] -= 1
    s[MOVE_TIMER] -= 1
    if ramping and (s[SPAWN_SPEED] > 1 or s[MOVE_SPEED] > 1):
        if s[RAMP_TIMER] >= 0:
            s[RAMP_TIMER] -= 1
        else:  # faster spawns each ramp, faster moves every other ramp
            if s[MOVE_SPEED] > 1 and s[RAMP_INDEX] % 2:
                s[MOVE_SPEED] -= 1
            if s[SPAWN_SPEED] > 1:
                s[SPAWN_SPEED] -= 1
            s[RAMP_INDEX] += 1
            s[RAMP_TIMER] = RAMP_INTERVAL
    return reward


@njit(types.void(ROW, OBS), cache=True, nogil=True)
def _draw(s, obs):  # pragma: no cover - compiled
    """minatar's `state()`, channels first, into a zeroed `obs [4, 10, 10]`."""
    obs[0, s[PLAYER_Y], s[PLAYER_X]] = True
    for k in range(8):
        e = ENTITIES + 5 * k
        if s[e + ALIVE]:
            x, y = s[e + X], s[e + Y]
            obs[3 if s[e + GOLD] else 1, y, x] = True
            back_x = x - 1 if s[e + RIGHTWARD] else x + 1
            if 0 <= back_x <= 9:
                obs[2, y, back_x] = True


class Asterix(MinAtarFamily):
    """MinAtar/Asterix-v1: minatar's Asterix, minimal actions (no-op, left, up, right, down)."""

    channels = 4
    state_size = STATE_SIZE
    kernels = game_kernels(_act, _reset_one, _draw, TERMINAL)
    minimal_actions = (0, LEFT, UP, RIGHT, DOWN)


class AsterixAllActions(Asterix):
    """MinAtar/Asterix-v0: the same game with all six actions."""

    all_actions = True
