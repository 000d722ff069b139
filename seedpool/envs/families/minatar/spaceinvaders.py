"""MinAtar SpaceInvaders as a native family (see family.py).

A cannon on the bottom row shoots at a block of aliens that sweeps sideways and drops a
row at each wall (+1 per alien hit); the nearest alien shoots every 10 steps. The episode
ends when an alien or its shot reaches the cannon. A cleared board comes back, faster when
ramping. Channels: cannon, alien, alien moving left, alien moving right, friendly bullet,
enemy bullet. The game draws no random numbers of its own: only the sticky actions do.
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar.family import FIRE, LEFT, OBS, RIGHT, ROW, MinAtarFamily, count, fill, move
from seedpool.envs.families.minatar.kernels import game_kernels
from seedpool.envs.families.minatar.rng import POS_T, WORDS_T

SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
# Columns of an env's state row; each map is 100 columns, row-major.
(POS, ALIEN_DIR, MOVE_INTERVAL, MOVE_TIMER, ALIEN_SHOT_TIMER, RAMP_INDEX, SHOT_TIMER, TERMINAL,
 FRIENDLY, ENEMY, ALIENS) = (0, 1, 2, 3, 4, 5, 6, 7, 8, 108, 208)
STATE_SIZE = ALIENS + 100


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _reset_one(s, words, pos, i):  # pragma: no cover - compiled
    fill(s, 0, s.size, 0)
    s[POS] = 5
    for y in range(4):
        fill(s, ALIENS + 10 * y + 2, ALIENS + 10 * y + 8, 1)
    s[ALIEN_DIR] = -1
    s[MOVE_INTERVAL] = ENEMY_MOVE_INTERVAL
    s[MOVE_TIMER] = ENEMY_MOVE_INTERVAL
    s[ALIEN_SHOT_TIMER] = ENEMY_SHOT_INTERVAL


@njit(types.boolean(ROW, types.int64, types.int64), cache=True, nogil=True)
def _column_has(s, base, x):  # pragma: no cover - compiled
    for y in range(10):
        if s[base + 10 * y + x]:
            return True
    return False


@njit(types.void(ROW), cache=True, nogil=True)
def _move_aliens(s):  # pragma: no cover - compiled
    """The block's move: down a row (wrapping, as np.roll) at a wall, else a column sideways."""
    a = ALIENS
    d = s[ALIEN_DIR]
    if (d < 0 and _column_has(s, a, 0)) or (d > 0 and _column_has(s, a, 9)):
        s[ALIEN_DIR] = -d
        if count(s, a + 90, a + 100):
            s[TERMINAL] = 1
        for x in range(10):  # each column rolls down one row
            bottom = s[a + 90 + x]
            for y in range(9, 0, -1):
                s[a + 10 * y + x] = s[a + 10 * (y - 1) + x]
            s[a + x] = bottom
    else:
        for y in range(10):  # each row rolls one column along d (+1 or -1)
            r = a + 10 * y
            if d > 0:
                last = s[r + 9]
                move(s, r + 1, r, 9)
                s[r] = last
            else:
                first = s[r]
                move(s, r, r + 1, 9)
                s[r + 9] = first


@njit(types.void(ROW), cache=True, nogil=True)
def _alien_shoots(s):  # pragma: no cover - compiled
    """The lowest alien of the column nearest the cannon (the left one on a tie) shoots."""
    pos = s[POS]
    for dist in range(10):
        for x in (pos - dist, pos + dist):
            if 0 <= x <= 9 and _column_has(s, ALIENS, x):
                for y in range(9, -1, -1):
                    if s[ALIENS + 10 * y + x]:
                        s[ENEMY + 10 * y + x] = 1
                        return


@njit(types.int64(ROW, types.int64, types.boolean, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _act(s, a, ramping, words, pos, i):  # pragma: no cover - compiled
    """One step of one env with minatar action `a`; returns the reward."""
    if s[TERMINAL]:
        return 0
    if a == FIRE and s[SHOT_TIMER] == 0:
        s[FRIENDLY + 90 + s[POS]] = 1
        s[SHOT_TIMER] = SHOT_COOL_DOWN
    elif a == LEFT:
        s[POS] = max(0, s[POS] - 1)
    elif a == RIGHT:
        s[POS] = min(9, s[POS] + 1)
    pos = s[POS]
    move(s, FRIENDLY, FRIENDLY + 10, 90)  # friendly shots rise a row
    fill(s, FRIENDLY + 90, FRIENDLY + 100, 0)
    move(s, ENEMY + 10, ENEMY, 90)  # enemy shots fall a row
    fill(s, ENEMY, ENEMY + 10, 0)
    if s[ENEMY + 90 + pos] or s[ALIENS + 90 + pos]:
        s[TERMINAL] = 1
    if s[MOVE_TIMER] == 0:
        s[MOVE_TIMER] = min(count(s, ALIENS, ALIENS + 100), s[MOVE_INTERVAL])
        _move_aliens(s)
        if s[ALIENS + 90 + pos]:
            s[TERMINAL] = 1
    if s[ALIEN_SHOT_TIMER] == 0:
        s[ALIEN_SHOT_TIMER] = ENEMY_SHOT_INTERVAL
        _alien_shoots(s)
    reward = 0
    for c in range(100):  # a shot and an alien in one cell: both go
        if s[ALIENS + c] and s[FRIENDLY + c]:
            s[ALIENS + c] = 0
            s[FRIENDLY + c] = 0
            reward += 1
    if s[SHOT_TIMER] > 0:
        s[SHOT_TIMER] -= 1
    s[MOVE_TIMER] -= 1
    s[ALIEN_SHOT_TIMER] -= 1
    if count(s, ALIENS, ALIENS + 100) == 0:  # a new block; a faster one while ramping
        if s[MOVE_INTERVAL] > 6 and ramping:
            s[MOVE_INTERVAL] -= 1
            s[RAMP_INDEX] += 1
        for y in range(4):
            fill(s, ALIENS + 10 * y + 2, ALIENS + 10 * y + 8, 1)
    return reward


@njit(types.void(ROW, OBS), cache=True, nogil=True)
def _draw(s, obs):  # pragma: no cover - compiled
    """minatar's `state()`, channels first, into a zeroed `obs [6, 10, 10]`."""
    obs[0, 9, s[POS]] = True
    heading = 2 if s[ALIEN_DIR] < 0 else 3
    for c in range(100):
        y, x = c // 10, c % 10
        if s[ALIENS + c]:
            obs[1, y, x] = True
            obs[heading, y, x] = True
        obs[4, y, x] = s[FRIENDLY + c] != 0
        obs[5, y, x] = s[ENEMY + c] != 0


class SpaceInvaders(MinAtarFamily):
    """MinAtar/SpaceInvaders-v1: minatar's SpaceInvaders, minimal actions (no-op, left, right, fire)."""

    channels = 6
    state_size = STATE_SIZE
    kernels = game_kernels(_act, _reset_one, _draw, TERMINAL)
    minimal_actions = (0, LEFT, RIGHT, FIRE)


class SpaceInvadersAllActions(SpaceInvaders):
    """MinAtar/SpaceInvaders-v0: the same game with all six actions."""

    all_actions = True
