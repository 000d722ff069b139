"""MinAtar Breakout as a native family (see family.py).

A paddle on the bottom row bounces a ball that moves along diagonals into three rows of
bricks (+1 per brick; a new wall once the ball comes down to an empty board); the episode
ends when the ball reaches the bottom row past the paddle. Channels: paddle, ball, trail, brick.
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar import rng
from seedpool.envs.families.minatar.family import LEFT, OBS, RIGHT, ROW, MinAtarFamily, count, fill
from seedpool.envs.families.minatar.kernels import game_kernels
from seedpool.envs.families.minatar.rng import POS_T, WORDS_T

# Columns of an env's state row; the brick map is 100 columns, row-major from BRICKS.
BALL_X, BALL_Y, BALL_DIR, POS, LAST_X, LAST_Y, STRIKE, TERMINAL, BRICKS = range(9)
STATE_SIZE = BRICKS + 100
# Ball directions 0..3: up-left, up-right, down-right, down-left.


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _reset_one(s, words, pos, i):  # pragma: no cover - compiled
    s[BALL_Y] = 3
    if rng.randint(words, pos, i, 0, 2) == 0:  # the ball starts at either wall
        s[BALL_X], s[BALL_DIR] = 0, 2
    else:
        s[BALL_X], s[BALL_DIR] = 9, 3
    s[POS] = 4
    fill(s, BRICKS, BRICKS + 100, 0)
    fill(s, BRICKS + 10, BRICKS + 40, 1)  # rows 1-3
    s[STRIKE] = 0
    s[LAST_X], s[LAST_Y] = s[BALL_X], s[BALL_Y]
    s[TERMINAL] = 0


# Inlined into the kernels (numba's inline): a call per env measured slower.
@njit(types.int64(ROW, types.int64, types.boolean, WORDS_T, POS_T, types.int64), cache=True, nogil=True, inline="always")
def _act(s, a, ramping, words, pos, i):  # pragma: no cover - compiled
    """One step of one env with minatar action `a`; returns the reward."""
    if s[TERMINAL]:
        return 0
    if a == LEFT:
        s[POS] = max(0, s[POS] - 1)
    elif a == RIGHT:
        s[POS] = min(9, s[POS] + 1)
    x, y, d = s[BALL_X], s[BALL_Y], s[BALL_DIR]
    s[LAST_X], s[LAST_Y] = x, y
    new_x = x - 1 if d == 0 or d == 3 else x + 1
    new_y = y - 1 if d == 0 or d == 1 else y + 1
    reward = 0
    struck = False
    if new_x < 0 or new_x > 9:  # side wall: flip the horizontal direction
        new_x = min(max(new_x, 0), 9)
        d ^= 1
    if new_y < 0:  # ceiling: flip the vertical direction
        new_y = 0
        d = 3 - d
    elif s[BRICKS + 10 * new_y + new_x]:
        struck = True
        if not s[STRIKE]:  # one brick per strike; the ball passes while it stays in bricks
            reward = 1
            s[STRIKE] = 1
            s[BRICKS + 10 * new_y + new_x] = 0
            new_y = y
            d = 3 - d
    elif new_y == 9:
        if count(s, BRICKS, BRICKS + 100) == 0:
            fill(s, BRICKS + 10, BRICKS + 40, 1)
        if x == s[POS]:  # paddle under the ball: straight back up
            d = 3 - d
            new_y = y
        elif new_x == s[POS]:  # paddle hit on its corner: back the way it came
            d ^= 2
            new_y = y
        else:
            s[TERMINAL] = 1
    if not struck:
        s[STRIKE] = 0
    s[BALL_X], s[BALL_Y], s[BALL_DIR] = new_x, new_y, d
    return reward


@njit(types.void(ROW, OBS), cache=True, nogil=True)
def _draw(s, obs):  # pragma: no cover - compiled
    """minatar's `state()`, channels first, into a zeroed `obs [4, 10, 10]`."""
    obs[0, 9, s[POS]] = True
    obs[1, s[BALL_Y], s[BALL_X]] = True
    obs[2, s[LAST_Y], s[LAST_X]] = True
    for c in range(100):
        obs[3, c // 10, c % 10] = s[BRICKS + c] != 0


@njit(cache=True, nogil=True, inline="always")
def _act_drawn(s, a, ramping, words, pos, i, obs):  # pragma: no cover - compiled
    """`_act`, with `obs` (env s's observation before the step) brought up to date in place:
    the paddle, ball and trail move (one cell each), and the bricks, which can only be in rows
    1-3 (the wall's rows: strikes clear cells, an empty board refills them), are copied from
    the state there when they may have changed: a few cells instead of `_draw`'s 400."""
    obs[0, 9, s[POS]] = False
    obs[1, s[BALL_Y], s[BALL_X]] = False
    obs[2, s[LAST_Y], s[LAST_X]] = False
    reward = _act(s, a, ramping, words, pos, i)
    obs[0, 9, s[POS]] = True
    obs[1, s[BALL_Y], s[BALL_X]] = True
    obs[2, s[LAST_Y], s[LAST_X]] = True
    # A strike (reward 1) clears a brick; the wall refills only when the ball comes down to
    # row 9, after which it ends the step on row 8 or 9. Otherwise the bricks stand as drawn.
    if reward or s[BALL_Y] >= 8:
        for y in range(1, 4):
            for x in range(10):
                obs[3, y, x] = s[BRICKS + 10 * y + x] != 0
    return reward


class Breakout(MinAtarFamily):
    """MinAtar/Breakout-v1: minatar's Breakout, minimal actions (no-op, left, right)."""

    channels = 4
    state_size = STATE_SIZE
    kernels = game_kernels(_act, _reset_one, _draw, TERMINAL, _act_drawn)
    minimal_actions = (0, LEFT, RIGHT)


class BreakoutAllActions(Breakout):
    """MinAtar/Breakout-v0: the same game with all six actions."""

    all_actions = True
