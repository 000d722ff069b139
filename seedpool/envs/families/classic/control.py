"""Gymnasium's classic control tasks as native families: CartPole, MountainCar (discrete and
continuous) and Pendulum (Acrobot is in acrobot.py).

Each one follows its gymnasium implementation (gymnasium/envs/classic_control/) operation
for operation, including the dtypes NumPy computes each step in, and draws each env's reset
state from that env's own generator with the same calls: the same seeds and actions give
the same episodes (tests/test_native_envs.py checks them against gymnasium's). The spaces
are those of a gymnasium instance built once per family.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium.envs.classic_control import (
    CartPoleEnv,
    Continuous_MountainCarEnv,
    MountainCarEnv,
    PendulumEnv,
    utils,
)

from seedpool.envs.families.classic import kernels
from seedpool.envs.native import pcg64
from seedpool.envs.native.base import NativeEnv, Rows, reset_options

KERNELS = ("numba", "numpy")


def _take_reference(family: NativeEnv, reference: Any) -> None:
    """The family's spaces and metadata from a gymnasium instance, which it keeps as ``reference`` and
    as ``c``: its physical constants, read as the single env reads them."""
    family.c = reference
    family.single_observation_space = reference.observation_space
    family.single_action_space = reference.action_space
    family.metadata = dict(reference.metadata)
    family.reference = reference


class CartPole(NativeEnv):
    """CartPole-v1: gymnasium's `CartPoleEnv` (Euler integration), `num_envs` at once."""

    max_episode_steps = 500
    native_from = 2  # benchmarks/results/native_crossover.md
    pure_step = True  # no draws; its state (and `fell`) is rewritten by reset
    native_options = ("kernel",)

    def __init__(self, num_envs: int, sutton_barto_reward: bool = False, kernel: str = "numba"):
        """`kernel`: "numba" (compiled, the faster) or "numpy" (the same step as array expressions)."""
        super().__init__(num_envs)
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        self.kernel = kernel
        ref = CartPoleEnv(sutton_barto_reward=sutton_barto_reward)
        _take_reference(self, ref)
        self.sutton_barto = sutton_barto_reward
        self.state = np.zeros((4, num_envs))  # x, x_dot, theta, theta_dot
        self.fell = np.zeros(num_envs, np.bool_)  # terminated before (gymnasium: steps_beyond_terminated)
        self._rows = np.arange(num_envs)
        self.draws = pcg64.KernelStates(np.zeros((num_envs, 4), np.uint64))  # for the numba kernels
        self._low, self._high = np.full(num_envs, -0.05), np.full(num_envs, 0.05)  # default bounds
        c = ref
        self._consts = np.array([c.force_mag, c.gravity, c.masspole, c.total_mass, c.length, c.polemass_length, c.tau,
                                 c.x_threshold, c.theta_threshold_radians])  # as kernels.cartpole_fused reads them

    def seed(self, i: int, seed: int | None) -> None:
        """As NativeEnv's; the numba kernels then draw from a copy of the generator's state."""
        super().seed(i, seed)
        self.draws.copy(i, self._rngs[i])

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator, brought up to the kernels' draws (draws made on it are not
        seen by the kernels, which keep their own copy of its state)."""
        if self.kernel == "numba" and self.draws.sync(i, self._rngs[i]):
            return self._rngs[i]
        return super().rng(i)

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        if self.kernel == "numpy":
            return self._reset_numpy(ids, options)
        for i in self.draws.uncopied(ids):
            self.seed(i, None)
        if options is None:
            low, high = self._low[: len(ids)], self._high[: len(ids)]
        else:
            bounds = [utils.maybe_parse_reset_bounds(o, -0.05, 0.05) for o in options]
            low, high = (np.array(b, np.float64) for b in zip(*bounds))
        kernels.cartpole_reset(self.state, self.fell, self.draws.rows, ids, low, high)
        return self.state[:, ids].T.astype(np.float32)

    def _reset_numpy(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        for k, i in enumerate(ids.tolist()):
            low, high = utils.maybe_parse_reset_bounds(reset_options(options, k), -0.05, 0.05)
            self.state[:, i] = self.rng(i).uniform(low=low, high=high, size=(4,))
        self.fell[ids] = False
        return self.state[:, ids].T.astype(np.float32)

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.kernel == "numpy":
            return self._step_numpy(ids, actions)
        c, rows = self.c, self._rows[ids]
        obs = np.empty((len(rows), 4), np.float32)
        reward = np.empty(len(rows))
        terminated = np.empty(len(rows), np.bool_)
        kernels.cartpole_step(self.state, self.fell, rows, actions, c.force_mag, c.gravity, c.masspole,
                              c.total_mass, c.length, c.polemass_length, c.tau, c.x_threshold,
                              c.theta_threshold_radians, self.sutton_barto, obs, reward, terminated)
        return obs, reward, terminated

    def can_fuse(self) -> bool:
        """The numba kernel, once every env has its generator (the first reset gives them)."""
        return self.kernel == "numba" and self.draws.all_copied

    def step_autoreset(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray,
                       book: Any) -> None:
        """NativeEnv's fused step: one numba call (kernels.cartpole_fused)."""
        kernels.cartpole_fused(self.state, self.fell, self.draws.rows, self._consts, self.sutton_barto, rows, actions,
                               obs, final_obs, *book)

    def _step_numpy(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, s = self.c, self.state
        x, x_dot, theta, theta_dot = s[0, ids], s[1, ids], s[2, ids], s[3, ids]
        force = np.where(actions == 1, c.force_mag, -c.force_mag)
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + c.polemass_length * np.square(theta_dot) * sintheta) / c.total_mass
        thetaacc = (c.gravity * sintheta - costheta * temp) / (
            c.length * (4.0 / 3.0 - c.masspole * np.square(costheta) / c.total_mass))
        xacc = temp - c.polemass_length * thetaacc * costheta / c.total_mass
        # Euler, as gymnasium's default kinematics_integrator: positions from the old velocities.
        x_new = x + c.tau * x_dot
        s[1, ids] = x_dot + c.tau * xacc
        theta_new = theta + c.tau * theta_dot
        s[3, ids] = theta_dot + c.tau * thetaacc
        s[0, ids] = x_new
        s[2, ids] = theta_new
        terminated = ((x_new < -c.x_threshold) | (x_new > c.x_threshold)
                      | (theta_new < -c.theta_threshold_radians) | (theta_new > c.theta_threshold_radians))
        fell = self.fell[ids]
        if self.sutton_barto:
            reward = np.where(terminated, -1.0, 0.0)
        else:  # 1 per step, the falling step included; 0 for steps after it (autoreset="disabled")
            reward = np.where(terminated & fell, 0.0, 1.0)
        self.fell[ids] = fell | terminated
        return s[:, ids].T.astype(np.float32), reward, terminated


def _mountain_car_reset(family: NativeEnv, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
    """Both MountainCars' reset: each env's position drawn uniformly from its bounds (-0.6, -0.4
    unless its options say otherwise), at rest; returns the envs' first observations."""
    for k, i in enumerate(ids.tolist()):
        low, high = utils.maybe_parse_reset_bounds(reset_options(options, k), -0.6, -0.4)
        family.state[:, i] = (family.rng(i).uniform(low=low, high=high), 0.0)
    return family.state[:, ids].T.astype(np.float32)


class MountainCar(NativeEnv):
    """MountainCar-v0: gymnasium's `MountainCarEnv`, `num_envs` at once."""

    max_episode_steps = 200
    native_from = 4
    pure_step = True

    def __init__(self, num_envs: int, goal_velocity: float = 0):
        super().__init__(num_envs)
        ref = MountainCarEnv(goal_velocity=goal_velocity)
        _take_reference(self, ref)
        self.state = np.zeros((2, num_envs))  # position, velocity

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        return _mountain_car_reset(self, ids, options)

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, s = self.c, self.state
        position, velocity = s[0, ids], s[1, ids]
        velocity = velocity + ((actions - 1) * c.force + np.cos(3 * position) * (-c.gravity))
        velocity = np.clip(velocity, -c.max_speed, c.max_speed)
        position = np.clip(position + velocity, c.min_position, c.max_position)
        velocity[(position == c.min_position) & (velocity < 0)] = 0.0
        terminated = (position >= c.goal_position) & (velocity >= c.goal_velocity)
        s[0, ids] = position
        s[1, ids] = velocity
        return s[:, ids].T.astype(np.float32), np.full(len(position), -1.0), terminated


class MountainCarContinuous(NativeEnv):
    """MountainCarContinuous-v0: gymnasium's `Continuous_MountainCarEnv`, `num_envs` at once.

    The single env keeps its state in float64 after a reset and in float32 after a step, and
    NumPy computes the next step in that precision: `fresh` marks the envs whose state is
    still the reset's, stepped once more in float64 after the float32 step of all.
    """

    max_episode_steps = 999
    native_from = 32  # its NumPy step is ~25 array operations: a Python loop wins below
    pure_step = True

    def __init__(self, num_envs: int, goal_velocity: float = 0):
        super().__init__(num_envs)
        ref = Continuous_MountainCarEnv(goal_velocity=goal_velocity)
        _take_reference(self, ref)
        self.state = np.zeros((2, num_envs))  # position, velocity (float32 values once stepped)
        self.fresh = np.ones(num_envs, np.bool_)

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        self.fresh[ids] = True
        return _mountain_car_reset(self, ids, options)

    def _next(self, position: np.ndarray, velocity: np.ndarray, action: np.ndarray):
        """One step in the state's own dtype (float32, or float64 just after a reset):
        (position, velocity, terminated)."""
        c = self.c
        force = np.minimum(np.maximum(action, np.float32(c.min_action)), np.float32(c.max_action))
        # math.cos of `3 * position` in double, then the float32 `force * power - ...`.
        pull = (0.0025 * np.cos((3 * position).astype(np.float64))).astype(np.float32)
        velocity = velocity + (force * c.power - pull)
        velocity = np.clip(velocity, -c.max_speed, c.max_speed)
        position = np.clip(position + velocity, c.min_position, c.max_position)
        velocity[(position == c.min_position) & (velocity < 0)] = 0
        return position, velocity, (position >= c.goal_position) & (velocity >= c.goal_velocity)

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self.state
        action = actions[:, 0].astype(np.float32)
        position, velocity, terminated = self._next(s[0, ids].astype(np.float32),
                                                    s[1, ids].astype(np.float32), action)
        fresh = self.fresh[ids]
        if fresh.any():
            rows = np.arange(self.num_envs)[ids][fresh]
            p64, v64, t64 = self._next(s[0, rows], s[1, rows], action[fresh])
            position[fresh], velocity[fresh], terminated[fresh] = p64, v64, t64  # rounded to float32
            self.fresh[rows] = False
        reward = np.where(terminated, 100.0, 0.0) - np.square(action.astype(np.float64)) * 0.1
        s[0, ids] = position
        s[1, ids] = velocity
        return np.stack([position, velocity], axis=1), reward, terminated


class Pendulum(NativeEnv):
    """Pendulum-v1: gymnasium's `PendulumEnv`, `num_envs` at once."""

    max_episode_steps = 200
    native_from = 4
    pure_step = True

    def __init__(self, num_envs: int, g: float = 10.0):
        super().__init__(num_envs)
        ref = PendulumEnv(g=g)
        _take_reference(self, ref)
        self.state = np.zeros((2, num_envs))  # theta, theta_dot

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        for k, i in enumerate(ids.tolist()):
            opts = reset_options(options, k)
            x = utils.verify_number_and_cast(opts.get("x_init", np.pi)) if opts else np.pi
            y = utils.verify_number_and_cast(opts.get("y_init", 1.0)) if opts else 1.0
            high = np.array([x, y])
            self.state[:, i] = self.rng(i).uniform(low=-high, high=high)
        return self._obs(ids)

    def _obs(self, ids: Rows) -> np.ndarray:
        theta, thetadot = self.state[0, ids], self.state[1, ids]
        return np.stack([np.cos(theta), np.sin(theta), thetadot], axis=1).astype(np.float32)

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c, s = self.c, self.state
        th, thdot = s[0, ids], s[1, ids]
        u = np.clip(actions[:, 0], -c.max_torque, c.max_torque)  # float32, as the single env's u
        norm = ((th + np.pi) % (2 * np.pi)) - np.pi
        costs = norm**2 + 0.1 * thdot**2 + 0.001 * (u**2)
        newthdot = thdot + (3 * c.g / (2 * c.l) * np.sin(th) + 3.0 / (c.m * c.l**2) * u) * c.dt
        newthdot = np.clip(newthdot, -c.max_speed, c.max_speed)
        s[0, ids] = th + newthdot * c.dt
        s[1, ids] = newthdot
        return self._obs(ids), -costs, np.zeros(len(th), np.bool_)

