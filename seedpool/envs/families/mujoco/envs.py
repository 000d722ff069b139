"""Gymnasium's MuJoCo tasks as native families: HalfCheetah-v5, Hopper-v5, Walker2d-v5, Ant-v5,
Humanoid-v5, HumanoidStandup-v5, Swimmer-v5 and InvertedPendulum-v5, with their default options.

A family holds one `MjData` per env (mujoco_sim.DataSims) and steps a batch in one compiled
call (mujoco_kernels.py): each env's controls, MuJoCo's `mj_step`, its observation, reward and
termination, following gymnasium's `gymnasium/envs/mujoco/*_v5.py` expression for expression
(the control cost in float32, as gymnasium computes it from the float32 action), and the
engine's bookkeeping. Each env's reset noise is drawn from its own generator as gymnasium's
calls draw it, so the same seeds and actions give the same episodes (tests/test_native_mujoco.py):
uniform noise (every task but HalfCheetah and Ant) inside the compiled step too, from a copy of
each generator's PCG64 state (pcg64.py; `mj_resetData` and `mj_forward` called there as the
step calls `mj_step`); HalfCheetah's and Ant's normal qvel noise by NumPy, in Python. The
`info` entries gymnasium's step returns (`x_position`, `x_velocity`, `reward_forward`,
`reward_ctrl`, ...) are not returned: a native family's step returns observations, rewards
and terminations only.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.ant_v5 import AntEnv
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv
from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv
from gymnasium.envs.mujoco.humanoidstandup_v5 import HumanoidStandupEnv
from gymnasium.envs.mujoco.inverted_pendulum_v5 import InvertedPendulumEnv
from gymnasium.envs.mujoco.swimmer_v5 import SwimmerEnv
from gymnasium.envs.mujoco.walker2d_v5 import Walker2dEnv

from seedpool.envs.native import bookkeeping, pcg64
from seedpool.envs.families.mujoco import kernels
from seedpool.envs.native.base import NativeEnv, Rows
from seedpool.envs.families.mujoco.sim import DataSims, RowThreads
from seedpool.envs.native.part_ring import CompiledStep, PartRing
from seedpool.envs.native.threads import available_cores


class MujocoFamily(NativeEnv):
    """A gymnasium `MujocoEnv` task, `num_envs` at once (subclasses say which: `kind`, and the
    constants its kernel reads, `params`).

    `threads`: the threads a step of the batch runs on (`RowThreads`: contiguous parts of the
    batch, the compiled step without the GIL). None (the default): one per usable core, at
    most one per env, each call split over them or not by which measured faster where the pool
    runs (`SplitTimer`); 1: the calling thread alone; k > 1: always k. The results are the same.
    An async pool of k > 1 threads gives each thread a block of envs instead, one lane each
    (`background_lanes`): the caller steps block 0's batches, k - 1 threads the others' as
    soon as they are sent (background.py).
    """

    reference_class: type[gym.Env]
    kind: int  # mujoco_kernels' name of the family
    max_episode_steps = 1000  # gymnasium's registration of every task here
    native_options = ("threads",)
    # A physics step is the cost here: step only the envs that go on, not those about to reset.
    pure_step = False
    normal_qvel_noise = False  # reset qvel noise: scale * standard normal (else uniform, as qpos)
    background_shared = True  # each env its own MjData: any thread may step it (background.py)

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
        p = self.params()
        p[kernels.NOISE], p[kernels.RESET_AT] = ref._reset_noise_scale, len(p)
        p = np.concatenate([p, self.init_qpos, self.init_qvel])
        self.sim = DataSims(self.model, num_envs, self.kind, p, self.frame_skip)
        # Uniform reset noise: resets in the kernels, once every env has its generator's state.
        self.compiled_reset = not self.normal_qvel_noise
        self.draws = pcg64.KernelStates(self.sim.pcg)
        self._obs_size = ref.observation_space.shape[0]
        self._rows = np.arange(num_envs)
        self._threads_option = threads
        self.threads, self._threads_reason, split = self._layout(threads)
        self.row_threads = RowThreads(self.threads, split) if self.threads > 1 else None
        self._on_lanes = False  # an async pool's lanes step its batches: no split of a batch
        self._ring: PartRing | None = None  # the split fused step's (`_split_ring`)
        self._ring_of: tuple = ()  # the buffers and process it serves
        self._ring_restart: Any = None  # its resets of the envs a part left pending (CompiledStep.restart)

    def params(self) -> np.ndarray:
        """The constants the kernel reads (`mujoco_kernels.FORWARD`, ...), from the reference env."""
        ref, p = self.reference, np.zeros(kernels.PARAMS)
        p[kernels.FORWARD] = getattr(ref, "_forward_reward_weight", 0.0)  # InvertedPendulum, HumanoidStandup: none
        p[kernels.CTRL_COST] = getattr(ref, "_ctrl_cost_weight", 0.0)
        p[kernels.DT] = self.dt
        p[kernels.TIMESTEP] = self.model.opt.timestep
        if hasattr(ref, "_healthy_reward"):  # every task here but HalfCheetah
            p[kernels.HEALTHY_REWARD] = ref._healthy_reward
            p[kernels.TERMINATE] = ref._terminate_when_unhealthy
            p[kernels.Z_LO], p[kernels.Z_HI] = ref._healthy_z_range
        return p

    def state_names(self) -> frozenset[str]:
        """As NativeEnv's, plus `data`: the single env's MjData is its state, but one object whose
        repr does not change as it steps, so the base's comparison of reprs does not see it."""
        return super().state_names() | {"data"}

    def _layout(self, threads: int | None) -> tuple[int, str, bool | None]:
        """How many threads step a batch, why, and whether they always split (None: as measured)."""
        if threads is None:
            cores = available_cores()
            k = min(cores, self.num_envs)
            if k < 2:
                return 1, f"one thread: {k} usable core(s) or env(s)", None
            return k, f"{k} threads (parts of each batch) or one: each call as measured faster", None
        k = min(threads, self.num_envs)
        if k < 2:
            return 1, "one thread (threads=1)", None
        return k, f"{k} threads (threads={threads})", True

    def background_lanes(self, batch_size: int) -> tuple[np.ndarray, str] | None:
        """One lane per thread (shared: any thread steps any env, a batch's parts go to whichever
        is free; the blocks of envs matter only to a family that is not shared); None with one
        thread (`threads=1`: a batch is stepped when `recv` asks for it)."""
        k = self.threads
        if k < 2:
            return None
        self._on_lanes = True
        sizes = [len(range(s, self.num_envs, k)) for s in range(k)]
        lanes = np.repeat(np.arange(k), sizes)
        why = "one per usable core" if self._threads_option is None else f"threads={self._threads_option}"
        if self.background_shared:
            return lanes, (f"async: {k} threads ({why}), the caller's in recv and {k - 1} in the background, "
                           "each taking the next part of the batches sent")
        b = np.concatenate(([0], np.cumsum(sizes))).tolist()
        blocks = ", ".join(f"{b[j]}-{b[j + 1] - 1}" for j in range(k)) if k <= 4 else f"{k} blocks"
        return lanes, (f"async: {k} threads ({why}), each stepping the batches of its block of envs "
                       f"({blocks}): the caller's in recv, {k - 1} in the background as soon as they are sent")

    def own_threads(self) -> tuple[int, str]:
        """The threads a batch is split over, and why."""
        return self.threads, self._threads_reason

    def close(self) -> None:
        """Stop the helper threads, if there are any."""
        if self.row_threads is not None:
            self.row_threads.close()
        if self._ring is not None and self._ring_of[-1] == os.getpid():
            self._ring.close()

    def _split(self, fn: Any, n: int) -> list[Any]:
        """`fn(part)` over parts (slices) of n rows: on the threads, or whole here."""
        if self.row_threads is None or self._on_lanes:
            return [fn(slice(0, n))]
        return self.row_threads.run(fn, n)

    def seed(self, i: int, seed: int | None) -> None:
        """As NativeEnv's; with compiled resets the kernels then draw from a copy of the
        generator's state (the step resets the envs it ends once every env has one)."""
        super().seed(i, seed)
        if self.compiled_reset:
            self.draws.copy(i, self._rngs[i])
            if self.sim.params[kernels.RESET_HERE] == 0.0 and self.draws.all_copied:
                self.sim.params[kernels.RESET_HERE] = 1.0

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator, brought up to the kernels' draws (with compiled resets, draws made
        on it are not seen by the kernels, which keep their own copy of its state)."""
        if self.compiled_reset and self.draws.sync(i, self._rngs[i]):
            return self._rngs[i]
        return super().rng(i)

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        """gymnasium's `reset_model`: noise on the initial state from each env's generator
        (gymnasium's MuJoCo tasks take no reset options)."""
        rows = np.asarray(ids, np.int64)
        if self.compiled_reset:
            for i in self.draws.uncopied(rows):
                self.seed(i, None)
            obs = np.empty((len(rows), self._obs_size))
            self.sim.reset_rows(rows, obs)
            return obs
        scale = self.reference._reset_noise_scale
        nq, nv = self.model.nq, self.model.nv
        for i in rows.tolist():
            rng = self.rng(i)
            qpos = self.init_qpos + rng.uniform(low=-scale, high=scale, size=nq)
            if self.normal_qvel_noise:
                qvel = self.init_qvel + scale * rng.standard_normal(nv)
            else:
                qvel = self.init_qvel + rng.uniform(low=-scale, high=scale, size=nv)
            self.sim.reset(i, qpos, qvel)
        obs = np.empty((len(rows), self._obs_size))
        self.sim.observe(rows, obs)
        return obs

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = self._rows[ids]
        actions = np.asarray(actions, np.float32)
        obs = np.empty((len(rows), self._obs_size))
        reward = np.empty(len(rows))
        terminated = np.empty(len(rows), np.bool_)
        self._split(lambda s: self.sim.step(rows[s], actions[s], obs[s], reward[s], terminated[s]), len(rows))
        return obs, reward, terminated

    def can_fuse(self) -> bool:
        """The compiled step, unless a subclass steps its own way (it overrides `step`)."""
        return type(self).step is MujocoFamily.step

    def step_autoreset(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray,
                       book: Any) -> None:
        """NativeEnv's fused step: the compiled step of the envs that go on, then the resets
        (their noise is drawn from each env's NumPy generator, in Python). Split over threads,
        the parts go through a ring as an async pool's do (part_ring.py): the helpers claim
        and step them without the GIL, the caller too, whichever is free first."""
        if self.row_threads is not None and not self._on_lanes and self.row_threads.splits(len(rows)):
            ring = self._split_ring(actions, obs, final_obs, book)
            first, end = ring.post(rows)
            try:
                ring.wait(first, end, None)
            except BaseException:  # Ctrl-C: the helpers' parts end before the pool is used again
                ring.settle(first, end)
                raise
            ring.finish(first, end, self._ring_restart)
            return
        pending = np.empty(len(rows), np.int64)
        n = self.sim.step_fused(rows, actions, obs, final_obs, pending, book)
        if n:
            self._restart(pending[:n], obs, book)

    def _split_ring(self, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray, book: Any) -> PartRing:
        """The ring of the split fused step on these buffers (the pool's, the same every call),
        made on first use in the process that steps (a forked child makes its own)."""
        key = (id(actions), id(obs), id(final_obs), id(book.reward), os.getpid())
        if self._ring_of != key:
            if self._ring is not None and self._ring_of[-1] == os.getpid():
                self._ring.close()
            step = self.compiled_step(actions, obs, final_obs, book)
            self._ring, self._ring_restart = PartRing(self.num_envs, self.threads - 1, step), step.restart
            self._ring_of = key
            weakref.finalize(self, self._ring.close)  # the ring's helpers hold no reference to the family
        return self._ring

    def compiled_step(self, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray, book: Any) -> Any:
        """The kernels' ring loop on the pool's buffers (an async pool's parts claimed and
        stepped without the GIL, part_ring.py), with the resets left to Python as in
        `step_autoreset`; None where the fused step does not apply (a subclass's own `step`)."""
        if not self.can_fuse():
            return None
        return CompiledStep(kernels.run_parts, (*self.sim.args, actions, obs, final_obs, *book),
                            lambda rows: self._restart(rows, obs, book))

    def _restart(self, rows: np.ndarray, obs: np.ndarray, book: Any) -> None:
        """Reset envs `rows` left by the fused step: those marked to reset (their row reports the
        reset) and, same_step autoreset, those that ended (their row keeps the ending step)."""
        keep_row = ~book.needs_reset[rows]
        obs[rows] = self.reset(rows, None)
        bookkeeping.started_rows(rows, keep_row, *book[:8])


class HalfCheetah(MujocoFamily):
    """HalfCheetah-v5: never terminates; reward = forward velocity - control cost."""

    reference_class = HalfCheetahEnv
    kind = kernels.HALF_CHEETAH
    normal_qvel_noise = True


class _Hopping(MujocoFamily):
    """Hopper and Walker2d: velocities clipped to [-10, 10] in the observation; a healthy
    reward while healthy, termination when not (strictly inside gymnasium's ranges)."""

    def params(self) -> np.ndarray:
        p = super().params()
        p[kernels.ANGLE_LO], p[kernels.ANGLE_HI] = self.reference._healthy_angle_range
        return p


class Hopper(_Hopping):
    """Hopper-v5: healthy while z, the torso angle and every other state stay in range."""

    reference_class = HopperEnv
    kind = kernels.HOPPER

    def params(self) -> np.ndarray:
        p = super().params()
        p[kernels.STATE_LO], p[kernels.STATE_HI] = self.reference._healthy_state_range
        return p


class Walker2d(_Hopping):
    """Walker2d-v5: healthy while z and the torso angle stay in range."""

    reference_class = Walker2dEnv
    kind = kernels.WALKER2D


class Ant(MujocoFamily):
    """Ant-v5: the observation ends with the clipped external contact forces of every body
    but the world (`mj_rnePostConstraint` after each step computes them); the reward charges
    them too; healthy while finite with z in range (inclusive)."""

    reference_class = AntEnv
    kind = kernels.ANT
    normal_qvel_noise = True

    def params(self) -> np.ndarray:
        ref, p = self.reference, super().params()
        p[kernels.CONTACT_COST] = ref._contact_cost_weight
        p[kernels.FORCE_LO], p[kernels.FORCE_HI] = ref._contact_force_range
        p[kernels.MAIN_BODY] = ref._main_body
        return p


class Humanoid(MujocoFamily):
    """Humanoid-v5: the observation adds every body's (but the world's) inertia, velocity and
    contact forces and the joints' actuator forces (`mj_rnePostConstraint` after each step);
    the reward is the mass center's forward velocity (the bodies' masses are constants here),
    a healthy reward, minus the control cost and the contact cost (clipped as a whole);
    healthy while z stays in range (strictly)."""

    reference_class = HumanoidEnv
    kind = kernels.HUMANOID

    def params(self) -> np.ndarray:
        ref, p = self.reference, super().params()
        p[kernels.CONTACT_COST] = ref._contact_cost_weight
        p[kernels.CONTACT_LO], p[kernels.CONTACT_HI] = ref._contact_cost_range
        masses = np.asarray(self.model.body_mass, np.float64)
        p[kernels.MASS] = masses.sum()  # NumPy's sum, as gymnasium's mass_center takes it
        return np.concatenate([p, masses])


class HumanoidStandup(Humanoid):
    """HumanoidStandup-v5: Humanoid's body and observation; the reward is the torso's height
    over the physics step (`model.opt.timestep`), minus the control and impact costs, plus 1;
    it never terminates."""

    reference_class = HumanoidStandupEnv
    kind = kernels.HUMANOID_STANDUP

    def params(self) -> np.ndarray:
        ref, p = self.reference, MujocoFamily.params(self)
        p[kernels.CONTACT_COST] = ref._impact_cost_weight
        p[kernels.CONTACT_LO], p[kernels.CONTACT_HI] = ref._impact_cost_range
        return p


class Swimmer(MujocoFamily):
    """Swimmer-v5: HalfCheetah's reward (forward velocity minus the float32 control cost) with
    x and y left out of the observation; it never terminates."""

    reference_class = SwimmerEnv
    kind = kernels.SWIMMER


class InvertedPendulum(MujocoFamily):
    """InvertedPendulum-v5: the whole state as the observation; 1 a step until the pole leans
    past 0.2 rad or the state is not finite, which terminates."""

    reference_class = InvertedPendulumEnv
    kind = kernels.INVERTED_PENDULUM
