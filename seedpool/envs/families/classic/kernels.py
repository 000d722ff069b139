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

from seedpool.envs.native import bookkeeping, pcg64


@njit(cache=True, nogil=True, inline="always")
def _cartpole_move(state, fell, i, action, force_mag, gravity, masspole, total_mass, length, polemass_length, tau,
                   x_threshold, theta_threshold, sutton_barto, obs, k):  # pragma: no cover - compiled
    """One Euler step of env i (state column i); writes obs row k; returns (reward, terminated)."""
    x, x_dot, theta, theta_dot = state[0, i], state[1, i], state[2, i], state[3, i]
    force = force_mag if action == 1 else -force_mag
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
    if sutton_barto:
        reward = -1.0 if term else 0.0
    else:
        reward = 0.0 if term and fell[i] else 1.0
    fell[i] = fell[i] or term
    return reward, term


@njit(cache=True, nogil=True, inline="always")
def _cartpole_draw(state, fell, pcg, i, low, high):  # pragma: no cover - compiled
    """Env i's reset state: four uniform draws from its own PCG64 (gymnasium's
    `np_random.uniform(low, high, size=(4,))`), in order."""
    span = high - low
    for j in range(4):
        state[j, i] = low + span * pcg64.next_double(pcg, i)
    fell[i] = False


@njit(cache=True, nogil=True)
def cartpole_step(state, fell, rows, actions, force_mag, gravity, masspole, total_mass, length,
                  polemass_length, tau, x_threshold, theta_threshold, sutton_barto,
                  obs, reward, terminated):  # pragma: no cover - compiled
    """CartPole's Euler step for envs `rows`; writes their state and k-th output rows."""
    for k in range(rows.size):
        reward[k], terminated[k] = _cartpole_move(
            state, fell, rows[k], actions[k], force_mag, gravity, masspole, total_mass, length, polemass_length,
            tau, x_threshold, theta_threshold, sutton_barto, obs, k)


@njit(cache=True, nogil=True)
def cartpole_reset(state, fell, pcg, rows, low, high):  # pragma: no cover - compiled
    """CartPole's reset for envs `rows` (bounds `low[k]`, `high[k]` for the k-th)."""
    for k in range(rows.size):
        _cartpole_draw(state, fell, pcg, rows[k], low[k], high[k])


@njit(cache=True, nogil=True)
def cartpole_fused(state, fell, pcg, c, sutton_barto, rows, actions, obs, final_obs,
                   reward, terminated, truncated, elapsed_step, episode_return, elapsed, returns, needs_reset,
                   limit, mode):  # pragma: no cover - compiled
    """Step envs `rows` with their rows of `actions`, with the engine's bookkeeping and
    autoreset (bookkeeping.py; the arguments from `reward` on are a `Book`'s fields), writing
    the pool's rows of `obs` (and `final_obs`, same_step) in place. An env marked to reset
    is reset (default bounds) instead of stepped. `c`: force_mag, gravity, masspole,
    total_mass, length, polemass_length, tau, x_threshold, theta_threshold."""
    for k in range(rows.size):
        i = rows[k]
        if needs_reset[i]:
            _cartpole_draw(state, fell, pcg, i, -0.05, 0.05)
            for j in range(4):
                obs[i, j] = state[j, i]
            bookkeeping.started(i, False, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                                returns, needs_reset)
            continue
        r, term = _cartpole_move(state, fell, i, actions[i], c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8],
                                 sutton_barto, obs, i)
        if bookkeeping.end_step(i, r, term, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                                returns, needs_reset, limit, mode):  # same_step autoreset
            for j in range(4):
                final_obs[i, j] = obs[i, j]
            _cartpole_draw(state, fell, pcg, i, -0.05, 0.05)
            for j in range(4):
                obs[i, j] = state[j, i]
            bookkeeping.started(i, True, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                                returns, needs_reset)
