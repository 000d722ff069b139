"""MinAtar Freeway as a native family (see family.py).

A chicken crosses eight lanes of cars from the bottom row to the top (+1 per crossing,
after which the cars get new random speeds and directions); a car that hits it sends it
back to the bottom. The episode ends after 2500 steps (a termination, as in minatar).
Channels: chicken, car, then the car's trail by speed (1 to 5).
"""

from __future__ import annotations

from numba import njit, types

from seedpool.envs.families.minatar import rng
from seedpool.envs.families.minatar.family import DOWN, OBS, ROW, UP, MinAtarFamily
from seedpool.envs.families.minatar.kernels import game_kernels
from seedpool.envs.families.minatar.rng import POS_T, WORDS_T

PLAYER_SPEED = 3
TIME_LIMIT = 2500
# Columns of an env's state row; then 8 cars of 4 columns: x, lane (y), move timer, speed
# (signed: its direction).
POS, MOVE_TIMER, TERMINATE_TIMER, TERMINAL, CARS = range(5)
CAR_X, CAR_Y, CAR_TIMER, CAR_SPEED = range(4)
STATE_SIZE = CARS + 8 * 4


@njit(types.void(ROW, WORDS_T, POS_T, types.int64, types.boolean), cache=True, nogil=True)
def _randomize_cars(s, words, pos, i, initialize):  # pragma: no cover - compiled
    """New speeds (`randint(1, 6, 8)`) and directions (`sign(rand(8) - 0.5)`), drawn in that
    order; a new episode also puts every car at the left edge of its lane."""
    speeds = [rng.randint(words, pos, i, 1, 6) for _ in range(8)]
    for c in range(8):
        u = rng.rand(words, pos, i) - 0.5
        speed = speeds[c] * (1 if u > 0 else (-1 if u < 0 else 0))
        car = CARS + 4 * c
        if initialize:
            s[car + CAR_X], s[car + CAR_Y] = 0, c + 1
        s[car + CAR_TIMER], s[car + CAR_SPEED] = abs(speed), speed


@njit(types.void(ROW, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _reset_one(s, words, pos, i):  # pragma: no cover - compiled
    _randomize_cars(s, words, pos, i, True)
    s[POS] = 9
    s[MOVE_TIMER] = PLAYER_SPEED
    s[TERMINATE_TIMER] = TIME_LIMIT
    s[TERMINAL] = 0


@njit(types.int64(ROW, types.int64, types.boolean, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _act(s, a, ramping, words, pos, i):  # pragma: no cover - compiled
    """One step of one env with minatar action `a`; returns the reward."""
    if s[TERMINAL]:
        return 0
    if a == UP and s[MOVE_TIMER] == 0:
        s[MOVE_TIMER] = PLAYER_SPEED
        s[POS] = max(0, s[POS] - 1)
    elif a == DOWN and s[MOVE_TIMER] == 0:
        s[MOVE_TIMER] = PLAYER_SPEED
        s[POS] = min(9, s[POS] + 1)
    reward = 0
    if s[POS] == 0:  # across: new traffic, back to the bottom
        reward = 1
        _randomize_cars(s, words, pos, i, False)
        s[POS] = 9
    for c in range(8):  # each car in turn: a hit before or after it moves sends the chicken back
        car = CARS + 4 * c
        if s[car + CAR_X] == 4 and s[car + CAR_Y] == s[POS]:
            s[POS] = 9
        if s[car + CAR_TIMER] == 0:
            s[car + CAR_TIMER] = abs(s[car + CAR_SPEED])
            s[car + CAR_X] = (s[car + CAR_X] + (1 if s[car + CAR_SPEED] > 0 else -1)) % 10
            if s[car + CAR_X] == 4 and s[car + CAR_Y] == s[POS]:
                s[POS] = 9
        else:
            s[car + CAR_TIMER] -= 1
    if s[MOVE_TIMER] > 0:
        s[MOVE_TIMER] -= 1
    s[TERMINATE_TIMER] -= 1
    if s[TERMINATE_TIMER] < 0:
        s[TERMINAL] = 1
    return reward


@njit(types.void(ROW, OBS), cache=True, nogil=True)
def _draw(s, obs):  # pragma: no cover - compiled
    """minatar's `state()`, channels first, into a zeroed `obs [7, 10, 10]`."""
    obs[0, s[POS], 4] = True
    for c in range(8):
        car = CARS + 4 * c
        x, y, speed = s[car + CAR_X], s[car + CAR_Y], s[car + CAR_SPEED]
        obs[1, y, x] = True
        back_x = (x - 1 if speed > 0 else x + 1) % 10
        obs[1 + abs(speed), y, back_x] = True  # speed 1..5: channels 2..6


class Freeway(MinAtarFamily):
    """MinAtar/Freeway-v1: minatar's Freeway, minimal actions (no-op, up, down)."""

    channels = 7
    state_size = STATE_SIZE
    kernels = game_kernels(_act, _reset_one, _draw, TERMINAL)
    minimal_actions = (0, UP, DOWN)


class FreewayAllActions(Freeway):
    """MinAtar/Freeway-v0: the same game with all six actions."""

    all_actions = True
