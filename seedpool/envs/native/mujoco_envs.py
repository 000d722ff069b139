"""Gymnasium's MuJoCo locomotion tasks as native families: HalfCheetah-v5, Hopper-v5,
Walker2d-v5 and Ant-v5, with their default options.

A family holds its N envs' simulations of one `MjModel` (mujoco_sim.py) and computes
observations, rewards and terminations for all of them in NumPy, following gymnasium's
`gymnasium/envs/mujoco/*_v5.py` expression for expression (the control cost in float32, as
gymnasium computes it from the float32 action). Each env's reset noise is drawn from its own
generator with gymnasium's calls, so the same seeds and actions give the same episodes
(tests/test_native_mujoco.py). The `info` entries gymnasium's step returns (`x_position`,
`x_velocity`, `reward_forward`, `reward_ctrl`, ...) are not returned: a native family's step
returns observations, rewards and terminations only.
"""

from __future__ import annotations

from typing import Sequence

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.ant_v5 import AntEnv
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv
from gymnasium.envs.mujoco.walker2d_v5 import Walker2dEnv

from seedpool.envs.native.base import NativeEnv, Rows
from seedpool.envs.native.mujoco_sim import BatchSim, SerialSim, ShardedSim


class MujocoFamily(NativeEnv):
    """A gymnasium `MujocoEnv` task, `num_envs` at once (subclasses say which, and how it rewards).

    `threads`: the threads a step of the batch runs on (`ShardedSim`: env i on thread i % k,
    MuJoCo's calls without the GIL). None (the default): one per usable core, at most one per
    env, each call split over them or not by which measured faster where the pool runs
    (`SplitTimer`); 1: the calling thread alone; k > 1: always k. The results are the same.
    In an async pool of k > 1 threads the k shards hold blocks of envs instead, one lane each
    (`background_lanes`): the caller steps block 0's batches, k - 1 threads the others' as
    soon as they are sent (background.py).
    """

    reference_class: type[gym.Env]
    max_episode_steps = 1000  # gymnasium's registration of every task here
    native_options = ("threads",)
    # A physics step is the cost here: step only the envs that go on, not those about to reset.
    pure_step = False
    normal_qvel_noise = False  # reset qvel noise: scale * standard normal (else uniform, as qpos)

    def __init__(self, num_envs: int, threads: int | None = None):
        super().__init__(num_envs)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive int (or None: chosen by measuring), got {threads!r}")
        ref = self.reference_class()
        self.single_observation_space = ref.observation_space
        self.single_action_space = ref.action_space
        self.metadata = dict(ref.metadata)
        self.reference = ref  # its constants: the weights and ranges below, read as the env reads them
        self.model = ref.model
        self.frame_skip = ref.frame_skip
        self.dt = ref.dt
        self.init_qpos, self.init_qvel = ref.init_qpos, ref.init_qvel
        self._threads_option = threads
        self.sim, self._threads_reason = self._make_sim(threads)
        self.threads = self.sim.k if isinstance(self.sim, ShardedSim) else 1

    def state_names(self) -> frozenset[str]:
        """As NativeEnv's, plus `data`: the single env's MjData is its state, but one object whose
        repr does not change as it steps, so the base's comparison of reprs does not see it."""
        return super().state_names() | {"data"}

    def _make_sim(self, threads: int | None) -> tuple[BatchSim | SerialSim | ShardedSim, str]:
        """One sim (`_one_sim`) for one thread, else a `ShardedSim` of them; and why."""
        if threads is None:
            from seedpool.envs.make import usable_cores  # make imports this package's registry

            cores = usable_cores()
            if min(cores, self.num_envs) < 2:
                return self._one_sim(self.num_envs), f"one thread: {min(cores, self.num_envs)} usable core(s) or env(s)"
            shards = min(cores, self.num_envs)
            return (ShardedSim(self._one_sim, self.num_envs, shards, split=None),
                    f"{shards} threads (env i on thread i % {shards}) or one: each call as measured faster")
        if min(threads, self.num_envs) < 2:
            return self._one_sim(self.num_envs), "one thread (threads=1)"
        shards = min(threads, self.num_envs)
        return ShardedSim(self._one_sim, self.num_envs, shards, split=True), f"{shards} threads (threads={threads})"

    def background_lanes(self, batch_size: int) -> tuple[np.ndarray, str] | None:
        """One lane per shard, the shards holding blocks of envs (so a batch of contiguous envs
        is one shard's call); None with one thread (`threads=1`: a batch is stepped when
        `recv` asks for it)."""
        if not isinstance(self.sim, ShardedSim):
            return None
        k = self.sim.k
        lanes = self.sim.use_blocks()
        b = self.sim.blocks
        blocks = ", ".join(f"{b[j]}-{b[j + 1] - 1}" for j in range(k)) if k <= 4 else f"{k} blocks"
        why = "one per usable core" if self._threads_option is None else f"threads={self._threads_option}"
        return lanes, (f"async: {k} threads ({why}), each stepping the batches of its block of envs "
                       f"({blocks}): the caller's in recv, {k - 1} in the background as soon as they are sent")

    def own_threads(self) -> tuple[int, str]:
        """The threads of the sim (one per shard), and why."""
        return self.threads, self._threads_reason

    def _one_sim(self, num_envs: int) -> BatchSim | SerialSim:
        return BatchSim(self.model, num_envs)

    def close(self) -> None:
        """Stop the sim's helper threads, if it has any."""
        if isinstance(self.sim, ShardedSim):
            self.sim.close()

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        """gymnasium's `reset_model`: noise on the initial state from each env's generator."""
        rows = np.sort(ids)
        scale = self.reference._reset_noise_scale
        nq, nv = self.model.nq, self.model.nv
        qpos, qvel = np.empty((len(rows), nq)), np.empty((len(rows), nv))
        for k, i in enumerate(rows.tolist()):
            rng = self.rng(i)
            qpos[k] = self.init_qpos + rng.uniform(low=-scale, high=scale, size=nq)
            if self.normal_qvel_noise:
                qvel[k] = self.init_qvel + scale * rng.standard_normal(nv)
            else:
                qvel[k] = self.init_qvel + rng.uniform(low=-scale, high=scale, size=nv)
        self.sim.reset(rows, qpos, qvel)
        return self._obs(ids)

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        before = self._position(ids).copy()  # a view of the state for a slice of envs
        self.sim.step(ids, actions, self.frame_skip)
        velocity = (self._position(ids) - before) / self.dt
        # float32 like the action, as gymnasium's `ctrl_cost_weight * np.sum(np.square(action))`
        ctrl_cost = self.reference._ctrl_cost_weight * np.sum(np.square(actions), axis=1)
        reward, terminated = self._reward(ids, velocity, ctrl_cost)
        return self._obs(ids), reward, terminated

    def _position(self, ids: Rows) -> np.ndarray:
        """What the forward reward differentiates: the root's x."""
        return self.sim.qpos[ids, 0]

    def _obs(self, ids: Rows) -> np.ndarray:
        """qpos without the root's x, then qvel (gymnasium's `_get_obs` with default options)."""
        return np.concatenate((self.sim.qpos[ids, 1:], self.sim.qvel[ids]), axis=1)

    def _reward(self, ids: Rows, velocity: np.ndarray, ctrl_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class HalfCheetah(MujocoFamily):
    """HalfCheetah-v5: never terminates; reward = forward velocity - control cost."""

    reference_class = HalfCheetahEnv
    normal_qvel_noise = True

    def _reward(self, ids: Rows, velocity: np.ndarray, ctrl_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        reward = self.reference._forward_reward_weight * velocity - ctrl_cost
        return reward, np.zeros(len(reward), np.bool_)


class _Hopping(MujocoFamily):
    """Hopper and Walker2d: velocities clipped to [-10, 10] in the observation; a healthy
    reward while healthy, termination when not."""

    def _obs(self, ids: Rows) -> np.ndarray:
        return np.concatenate((self.sim.qpos[ids, 1:], np.clip(self.sim.qvel[ids], -10, 10)), axis=1)

    def _healthy(self, ids: Rows) -> np.ndarray:
        raise NotImplementedError

    def _reward(self, ids: Rows, velocity: np.ndarray, ctrl_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ref = self.reference
        healthy = self._healthy(ids)
        reward = (ref._forward_reward_weight * velocity + healthy * ref._healthy_reward) - ctrl_cost
        return reward, ~healthy if ref._terminate_when_unhealthy else np.zeros(len(reward), np.bool_)


def _inside(x: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """gymnasium's `min < x < max` (strict)."""
    return (bounds[0] < x) & (x < bounds[1])


class Hopper(_Hopping):
    """Hopper-v5: healthy while z, the torso angle and every other state stay in range."""

    reference_class = HopperEnv

    def _healthy(self, ids: Rows) -> np.ndarray:
        ref, qpos = self.reference, self.sim.qpos[ids]
        state = np.concatenate((qpos[:, 2:], self.sim.qvel[ids]), axis=1)  # state_vector()[2:]
        return (_inside(state, ref._healthy_state_range).all(axis=1) & _inside(qpos[:, 1], ref._healthy_z_range)
                & _inside(qpos[:, 2], ref._healthy_angle_range))


class Walker2d(_Hopping):
    """Walker2d-v5: healthy while z and the torso angle stay in range."""

    reference_class = Walker2dEnv

    def _healthy(self, ids: Rows) -> np.ndarray:
        ref, qpos = self.reference, self.sim.qpos[ids]
        return _inside(qpos[:, 1], ref._healthy_z_range) & _inside(qpos[:, 2], ref._healthy_angle_range)


class Ant(MujocoFamily):
    """Ant-v5: the observation ends with the clipped external contact forces of every body
    but the world; the reward charges them too. Stepped by `SerialSim` (see mujoco_sim.py)."""

    reference_class = AntEnv
    normal_qvel_noise = True

    def _one_sim(self, num_envs: int) -> SerialSim:
        return SerialSim(self.model, num_envs)

    def _position(self, ids: Rows) -> np.ndarray:
        """The main body's x and y (gymnasium's `data.body(main_body).xpos[:2]`)."""
        return self.sim.xpos[ids, self.reference._main_body, :2]

    def _contact_forces(self, ids: Rows) -> np.ndarray:
        low, high = self.reference._contact_force_range
        return np.clip(self.sim.cfrc_ext[ids], low, high)

    def _obs(self, ids: Rows) -> np.ndarray:
        forces = self._contact_forces(ids)[:, 1:]
        return np.concatenate((self.sim.qpos[ids, 2:], self.sim.qvel[ids], forces.reshape(len(forces), -1)), axis=1)

    def _reward(self, ids: Rows, velocity: np.ndarray, ctrl_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ref, sim = self.reference, self.sim
        qpos = sim.qpos[ids]
        forces = self._contact_forces(ids)
        contact_cost = ref._contact_cost_weight * np.sum(np.square(forces).reshape(len(forces), -1), axis=1)
        finite = np.isfinite(qpos).all(axis=1) & np.isfinite(sim.qvel[ids]).all(axis=1)
        low, high = ref._healthy_z_range
        healthy = finite & (low <= qpos[:, 2]) & (qpos[:, 2] <= high)
        rewards = velocity[:, 0] * ref._forward_reward_weight + healthy * ref._healthy_reward
        reward = rewards - (ctrl_cost + contact_cost)
        return reward, ~healthy if ref._terminate_when_unhealthy else np.zeros(len(reward), np.bool_)
