"""Compiled (numba) steps of native families, where they measure faster than the NumPy ones.

Each kernel performs its family's NumPy step operation for operation on one env at a time
(so the same arithmetic, in the same order and precision), for the rows `rows`; they differ
only where numba's `cos`/`sin` (the C library's) and NumPy's vectorised ones round the
last bit differently. At a few dozen envs a NumPy step is a few dozen calls whose fixed
cost dwarfs the arithmetic; one compiled loop has none of it (benchmarks/native_envs.py).
"""

from __future__ import annotations

import math

from numba import njit

from seedpool.envs.native import pcg64


@njit(cache=True, nogil=True)
def cartpole_step(state, fell, rows, actions, force_mag, gravity, masspole, total_mass, length,
                  polemass_length, tau, x_threshold, theta_threshold, sutton_barto,
                  obs, reward, terminated):  # pragma: no cover - compiled
    """CartPole's Euler step for envs `rows`; writes their state and k-th output rows."""
    for k in range(rows.size):
        i = rows[k]
        x, x_dot, theta, theta_dot = state[0, i], state[1, i], state[2, i], state[3, i]
        force = force_mag if actions[k] == 1 else -force_mag
        costheta = math.cos(theta)
        sintheta = math.sin(theta)
        temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (
            length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + tau * x_dot
        x_dot = x_dot + tau * xacc
        theta = theta + tau * theta_dot
        theta_dot = theta_dot + tau * thetaacc
        state[0, i], state[1, i], state[2, i], state[3, i] = x, x_dot, theta, theta_dot
        obs[k, 0], obs[k, 1], obs[k, 2], obs[k, 3] = x, x_dot, theta, theta_dot
        term = x < -x_threshold or x > x_threshold or theta < -theta_threshold or theta > theta_threshold
        terminated[k] = term
        if sutton_barto:
            reward[k] = -1.0 if term else 0.0
        else:
            reward[k] = 0.0 if term and fell[i] else 1.0
        fell[i] = fell[i] or term


@njit(cache=True, nogil=True)
def cartpole_reset(state, fell, pcg, rows, low, high):  # pragma: no cover - compiled
    """CartPole's reset for envs `rows`: four uniform draws each from the env's own PCG64
    (gymnasium's `np_random.uniform(low, high, size=(4,))`), in order."""
    for k in range(rows.size):
        i = rows[k]
        span = high[k] - low[k]
        for j in range(4):
            state[j, i] = low[k] + span * pcg64.next_double(pcg, i)
        fell[i] = False
