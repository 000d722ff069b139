"""MinAtar SpaceInvaders as a native family (see minatar_family.py).

A cannon on the bottom row shoots at a block of aliens that sweeps sideways and drops a
row at each wall (+1 per alien hit); the nearest alien shoots every 10 steps. The episode
ends when an alien or its shot reaches the cannon. A cleared board comes back, faster when
ramping. Channels: cannon, alien, alien moving left, alien moving right, friendly bullet,
enemy bullet. The game draws no random numbers of its own: only the sticky actions do.
"""

from __future__ import annotations

from numba import njit

from seedpool.envs.native import minatar_rng as rng
from seedpool.envs.native.minatar_family import FIRE, LEFT, RIGHT, MinAtarFamily

SHOT_COOL_DOWN = 5
ENEMY_MOVE_INTERVAL = 12
ENEMY_SHOT_INTERVAL = 10
# Columns of an env's state row; each map is 100 columns, row-major.
(POS, ALIEN_DIR, MOVE_INTERVAL, MOVE_TIMER, ALIEN_SHOT_TIMER, RAMP_INDEX, SHOT_TIMER, TERMINAL,
 FRIENDLY, ENEMY, ALIENS) = (0, 1, 2, 3, 4, 5, 6, 7, 8, 108, 208)
STATE_SIZE = ALIENS + 100


@njit(cache=True, nogil=True)
def _reset_one(s):  # pragma: no cover - compiled
    s[:] = 0
    s[POS] = 5
    for y in range(4):
        s[ALIENS + 10 * y + 2:ALIENS + 10 * y + 8] = 1
    s[ALIEN_DIR] = -1
    s[MOVE_INTERVAL] = ENEMY_MOVE_INTERVAL
    s[MOVE_TIMER] = ENEMY_MOVE_INTERVAL
    s[ALIEN_SHOT_TIMER] = ENEMY_SHOT_INTERVAL


@njit(cache=True, nogil=True)
def _column_has(s, base, x):  # pragma: no cover - compiled
    for y in range(10):
        if s[base + 10 * y + x]:
            return True
    return False


@njit(cache=True, nogil=True)
def _move_aliens(s):  # pragma: no cover - compiled
    """The block's move: down a row (wrapping, as np.roll) at a wall, else a column sideways."""
    a = ALIENS
    d = s[ALIEN_DIR]
    if (d < 0 and _column_has(s, a, 0)) or (d > 0 and _column_has(s, a, 9)):
        s[ALIEN_DIR] = -d
        if s[a + 90:a + 100].any():
            s[TERMINAL] = 1
        bottom = s[a + 90:a + 100].copy()
        s[a + 10:a + 100] = s[a:a + 90].copy()
        s[a:a + 10] = bottom
    else:
        for y in range(10):
            row = s[a + 10 * y:a + 10 * y + 10].copy()
            for x in range(10):
                s[a + 10 * y + (x + d) % 10] = row[x]


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _act(s, a, ramping):  # pragma: no cover - compiled
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
    s[FRIENDLY:FRIENDLY + 90] = s[FRIENDLY + 10:FRIENDLY + 100].copy()  # friendly shots rise
    s[FRIENDLY + 90:FRIENDLY + 100] = 0
    s[ENEMY + 10:ENEMY + 100] = s[ENEMY:ENEMY + 90].copy()  # enemy shots fall
    s[ENEMY:ENEMY + 10] = 0
    if s[ENEMY + 90 + pos] or s[ALIENS + 90 + pos]:
        s[TERMINAL] = 1
    if s[MOVE_TIMER] == 0:
        s[MOVE_TIMER] = min(int(s[ALIENS:ALIENS + 100].sum()), s[MOVE_INTERVAL])
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
    if not s[ALIENS:ALIENS + 100].any():  # a new block; a faster one while ramping
        if s[MOVE_INTERVAL] > 6 and ramping:
            s[MOVE_INTERVAL] -= 1
            s[RAMP_INDEX] += 1
        for y in range(4):
            s[ALIENS + 10 * y + 2:ALIENS + 10 * y + 8] = 1
    return reward


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def reset(state, words, pos, rows, obs):  # pragma: no cover - compiled
    """Reset envs `rows`; draw the k-th into obs[k]."""
    for k in range(rows.size):
        _reset_one(state[rows[k]])
        _draw(state[rows[k]], obs[k])


@njit(cache=True, nogil=True)
def step(state, words, pos, last, rows, actions, action_set, sticky, ramping, obs, reward,
         terminated):  # pragma: no cover - compiled
    """Step envs `rows` (sticky action first, as minatar's `Environment.act`)."""
    for k in range(rows.size):
        i = rows[k]
        a = action_set[actions[k]]
        if rng.rand(words, pos, i) < sticky:
            a = last[i]
        last[i] = a
        s = state[i]
        reward[k] = _act(s, a, ramping)
        terminated[k] = s[TERMINAL] != 0
        _draw(s, obs[k])


class SpaceInvaders(MinAtarFamily):
    """MinAtar/SpaceInvaders-v1: minatar's SpaceInvaders, minimal actions (no-op, left, right, fire)."""

    channels = 6
    state_size = STATE_SIZE
    minimal_actions = (0, LEFT, RIGHT, FIRE)

    def _reset_rows(self, rows, obs):
        reset(self.state, self.words, self.word_pos, rows, obs)

    def _step_rows(self, rows, actions, obs, reward, terminated):
        step(self.state, self.words, self.word_pos, self.last_action, rows, actions, self.action_set,
             self.sticky_action_prob, self.difficulty_ramping, obs, reward, terminated)


class SpaceInvadersAllActions(SpaceInvaders):
    """MinAtar/SpaceInvaders-v0: the same game with all six actions."""

    all_actions = True
