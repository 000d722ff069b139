"""MinAtar Freeway as a native family (see minatar_family.py).

A chicken crosses eight lanes of cars from the bottom row to the top (+1 per crossing,
after which the cars get new random speeds and directions); a car that hits it sends it
back to the bottom. The episode ends after 2500 steps (a termination, as in minatar).
Channels: chicken, car, then the car's trail by speed (1 to 5).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from seedpool.envs.native import bookkeeping
from seedpool.envs.native import minatar_rng as rng
from seedpool.envs.native.minatar_family import DOWN, OBS, ROW, UP, MinAtarFamily
from seedpool.envs.native.minatar_rng import POS_T, WORDS_T

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


@njit(types.int64(ROW, types.int64, WORDS_T, POS_T, types.int64), cache=True, nogil=True)
def _act(s, a, words, pos, i):  # pragma: no cover - compiled
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


@njit(cache=True, nogil=True)
def fused(state, words, pos, last, action_set, sticky, ramping, rows, actions, obs, final_obs, reward, terminated,
          truncated, elapsed_step, episode_return, elapsed, returns, needs_reset, limit,
          mode):  # pragma: no cover - compiled
    """MinAtarFamily.step_autoreset: envs `rows` step (or reset, when marked) with the engine's
    bookkeeping (the arguments from `reward` on are a `Book`'s fields), drawn into the pool's rows."""
    for k in range(rows.size):
        i = rows[k]
        s = state[i]
        if not needs_reset[i]:
            a = rng.sticky_action(words, pos, last, i, action_set[actions[i]], sticky)
            r = _act(s, a, words, pos, i)
            obs[i] = False
            _draw(s, obs[i])
            if not bookkeeping.end_step(i, np.float64(r), s[TERMINAL] != 0, reward, terminated, truncated,
                                        elapsed_step, episode_return, elapsed, returns, needs_reset, limit, mode):
                continue
            final_obs[i] = obs[i]  # same_step autoreset: the episode ended, the env starts anew
        _reset_one(s, words, pos, i)
        obs[i] = False
        _draw(s, obs[i])
        bookkeeping.started(i, not needs_reset[i], reward, terminated, truncated, elapsed_step, episode_return,
                            elapsed, returns, needs_reset)


@njit(cache=True, nogil=True)
def reset(state, words, pos, rows, obs):  # pragma: no cover - compiled
    """Reset envs `rows`; draw the k-th into obs[k]."""
    for k in range(rows.size):
        _reset_one(state[rows[k]], words, pos, rows[k])
        _draw(state[rows[k]], obs[k])


@njit(cache=True, nogil=True)
def step(state, words, pos, last, rows, actions, action_set, sticky, obs, reward, terminated):  # pragma: no cover
    """Step envs `rows` (sticky action first, as minatar's `Environment.act`)."""
    for k in range(rows.size):
        i = rows[k]
        a = rng.sticky_action(words, pos, last, i, action_set[actions[k]], sticky)
        s = state[i]
        reward[k] = _act(s, a, words, pos, i)
        terminated[k] = s[TERMINAL] != 0
        _draw(s, obs[k])


class Freeway(MinAtarFamily):
    """MinAtar/Freeway-v1: minatar's Freeway, minimal actions (no-op, up, down)."""

    channels = 7
    state_size = STATE_SIZE
    fused = staticmethod(fused)
    minimal_actions = (0, UP, DOWN)

    def _reset_rows(self, rows, obs):
        reset(self.state, self.words, self.word_pos, rows, obs)

    def _step_rows(self, rows, actions, obs, reward, terminated):
        step(self.state, self.words, self.word_pos, self.last_action, rows, actions, self.action_set,
             self.sticky_action_prob, obs, reward, terminated)


class FreewayAllActions(Freeway):
    """MinAtar/Freeway-v0: the same game with all six actions."""

    all_actions = True
