"""Acrobot-v1 as a native family: gymnasium's `AcrobotEnv` ("book" dynamics, one RK4 step of
`dt`, no torque noise), `num_envs` at once, with the same arithmetic in the same order."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from gymnasium.envs.classic_control import AcrobotEnv, utils

from seedpool.envs.native.base import NativeEnv, Rows, reset_options
from seedpool.envs.families.classic.control import _take_reference

_TORQUES = np.array(AcrobotEnv.AVAIL_TORQUE, dtype=np.float64)


def _wrap(x: np.ndarray, m: float, big_m: float) -> np.ndarray:
    """Each entry moved into [m, M] by whole turns, one turn at a time (gymnasium's `wrap`)."""
    diff = big_m - m
    while True:
        over = x > big_m
        if not over.any():
            break
        x = np.where(over, x - diff, x)
    while True:
        under = x < m
        if not under.any():
            break
        x = np.where(under, x + diff, x)
    return x


class Acrobot(NativeEnv):
    """Acrobot-v1, `num_envs` at once."""

    max_episode_steps = 500
    native_from = 4  # benchmarks/results/native_crossover.md
    pure_step = True  # torque noise is zero in gymnasium's env: nothing is drawn while stepping

    def __init__(self, num_envs: int):
        super().__init__(num_envs)
        ref = AcrobotEnv()
        if ref.torque_noise_max > 0 or ref.book_or_nips != "book":
            raise NotImplementedError("the native Acrobot follows gymnasium's defaults (book dynamics, "
                                      "no torque noise); use native=False for other settings")
        _take_reference(self, ref)
        self.state = np.zeros((4, num_envs))  # theta1, theta2, dtheta1, dtheta2

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        for k, i in enumerate(ids.tolist()):
            low, high = utils.maybe_parse_reset_bounds(reset_options(options, k), -0.1, 0.1)
            self.state[:, i] = self.rng(i).uniform(low=low, high=high, size=(4,)).astype(np.float32)
        # The single env's reset state is float32, so its first observation is computed in float32.
        s = self.state[:, ids].astype(np.float32)
        return np.stack([np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1]), s[2], s[3]], axis=1)

    def _dsdt(self, s: tuple[np.ndarray, ...], a: np.ndarray) -> tuple[np.ndarray, ...]:
        """The time derivatives of (theta1, theta2, dtheta1, dtheta2), as gymnasium's `_dsdt`."""
        c = self.c
        m1, m2, l1 = c.LINK_MASS_1, c.LINK_MASS_2, c.LINK_LENGTH_1
        lc1, lc2, i1, i2 = c.LINK_COM_POS_1, c.LINK_COM_POS_2, c.LINK_MOI, c.LINK_MOI
        g, pi = 9.8, np.pi
        theta1, theta2, dtheta1, dtheta2 = s
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * np.cos(theta2)) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * np.cos(theta2)) + i2
        phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - pi / 2.0)
        phi1 = (-m2 * l1 * lc2 * dtheta2**2 * np.sin(theta2)
                - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * np.sin(theta2)
                + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - pi / 2)
                + phi2)
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * np.sin(theta2) - phi2) / (
            m2 * lc2**2 + i2 - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, st = self.c, self.state
        a = _TORQUES[actions]
        y0 = tuple(st[j, ids] for j in range(4))
        # One classical Runge-Kutta step over t = [0, dt] (gymnasium's rk4); the torque is
        # constant over the step (its derivative is 0), so it stays out of the state tuple.
        dt = float(c.dt - 0)
        dt2 = dt / 2.0
        k1 = self._dsdt(y0, a)
        k2 = self._dsdt(tuple(y + dt2 * k for y, k in zip(y0, k1)), a)
        k3 = self._dsdt(tuple(y + dt2 * k for y, k in zip(y0, k2)), a)
        k4 = self._dsdt(tuple(y + dt * k for y, k in zip(y0, k3)), a)
        ns = [y + dt / 6.0 * (p + 2 * q + 2 * r + w) for y, p, q, r, w in zip(y0, k1, k2, k3, k4)]
        ns[0] = _wrap(ns[0], -np.pi, np.pi)
        ns[1] = _wrap(ns[1], -np.pi, np.pi)
        ns[2] = np.minimum(np.maximum(ns[2], -c.MAX_VEL_1), c.MAX_VEL_1)
        ns[3] = np.minimum(np.maximum(ns[3], -c.MAX_VEL_2), c.MAX_VEL_2)
        for j in range(4):
            st[j, ids] = ns[j]
        terminated = -np.cos(ns[0]) - np.cos(ns[1] + ns[0]) > 1.0
        obs = np.stack([np.cos(ns[0]), np.sin(ns[0]), np.cos(ns[1]), np.sin(ns[1]), ns[2], ns[3]], axis=1)
        return obs.astype(np.float32), np.where(terminated, 0.0, -1.0), terminated
