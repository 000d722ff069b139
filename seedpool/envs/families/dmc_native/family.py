"""`DmcFamily`: a dm_control suite task run natively, with the EnvPool layout of the
Python-env family over the dm-control package (families/dmc/env.py): the same ids, spaces
and options (`frame_skip`), the same episodes for the same seeds.

The family is the native MuJoCo families' machinery (families/mujoco/envs.py: threads that
split a batch, the async pool's compiled ring of parts) on dm_control's model, stepping and
task (kernels.py). Each env's random numbers come from its own `numpy.random.RandomState`,
made from the env's seed as the package path makes dm_control's task generator
(`RandomState(seed)`), and drawn in dm_control's order; each env's next initial state is
drawn as soon as the previous one is used (nothing else draws from it in these tasks), so
that the compiled step resets the envs it ends itself. The package path's
`info["discount"]` is not returned (a native family returns no info entries): these tasks
never terminate, so dm_control's discount is 1 at every step.

As dm_control's `Physics.step` (`check_invalid_state`), a step (or reset) in which MuJoCo
raised a warning (its counters rose: a bad qpos, qvel, qacc or control, a full contact or
constraint buffer) raises dm_control's `PhysicsError`, with dm_control's message and the env
ids; the pool reports it as the package path does (an `EnvStepError` that is also a
`PhysicsError`), and restarts the batch's envs, as after any native family's error.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Sequence

import gymnasium as gym
import mujoco
import numpy as np

from seedpool.envs.families.dmc_native import kernels
from seedpool.envs.families.dmc_native.sim import DmcSims, load_model
from seedpool.envs.families.mujoco.envs import MujocoFamily
from seedpool.envs.families.mujoco.sim import RowThreads
from seedpool.envs.native import bookkeeping
from seedpool.envs.native.base import NativeEnv, Rows
from seedpool.envs.native.part_ring import CompiledStep

MJMAXVAL = 1e10  # dm_control's bound of an actuator without a control range (mujoco.mjMAXVAL)
NWARNING = int(mujoco.mjtWarning.mjNWARNING)
WARNINGS = list(mujoco.mjtWarning.__members__)[:NWARNING]  # the counters' names, as dm_control lists them


class DmcFamily(MujocoFamily):
    """One dm_control task, `num_envs` at once (subclasses say which: the model file, the
    domain `kind`, the observation's keys, the initial state and the reward's constants).

    `frame_skip`: physics steps per step (EnvPool's option; None: the suite's control
    timestep over the model's). `threads`: as the native MuJoCo families' (None: one per
    usable core, each call split or not by which measured faster)."""

    reference_class = None  # no gymnasium env: the model and task are dm_control's
    xml: str  # the model file in dm_control's suite folder
    kind: int  # kernels' name of the domain
    control_timestep: float | None = None  # the suite's (None: one physics step per step)
    settle = 0  # physics steps of the reset after the initial state (cheetah's 200)
    max_episode_steps = 1000  # EnvPool's time limit of every dm_control task
    native_options = ("threads",)

    def __init__(self, num_envs: int, frame_skip: int | None = None, threads: int | None = None):
        NativeEnv.__init__(self, num_envs)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive int (or None: chosen by measuring), got {threads!r}")
        if frame_skip is not None and (isinstance(frame_skip, bool) or not isinstance(frame_skip, int)
                                       or frame_skip < 1):
            raise ValueError(f"frame_skip must be a positive int (or None: the suite's), got {frame_skip!r}")
        self.reference = None
        self.metadata = {}
        self.model = load_model(self.xml)
        self.frame_skip = frame_skip if frame_skip is not None else self._suite_sub_steps(self.model.opt.timestep)
        self.layout = self.observation_layout()
        self.single_observation_space = gym.spaces.Dict(OrderedDict(
            (key, gym.spaces.Box(-np.inf, np.inf, shape, np.float64)) for key, shape in self.layout))
        self.single_action_space = self._action_space()
        self._widths = [int(np.prod(shape)) for _, shape in self.layout]
        self.sim = DmcSims(self.model, load_model(self.xml, actuation=False), num_envs, self.kind, self.params(),
                           self._widths)
        self._randoms: list[np.random.RandomState | None] = [None] * num_envs
        self._rows = np.arange(num_envs)
        self._threads_option = threads
        self.threads, self._threads_reason, split = self._layout(threads)
        self.row_threads = RowThreads(self.threads, split) if self.threads > 1 else None
        self._on_lanes = False
        self._ring = None
        self._ring_of: tuple = ()
        self._ring_restart: Any = None

    # -- the task: subclasses --------------------------------------------------------------
    def observation_layout(self) -> list[tuple[str, tuple[int, ...]]]:
        """The observation's keys, in dm_control's order, and their shapes."""
        raise NotImplementedError

    def initial_state(self, random: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
        """The task's `initialize_episode` draws: qpos and qvel (from `model.qpos0` and zeros,
        what `mj_resetData` leaves)."""
        raise NotImplementedError

    def params(self) -> np.ndarray:
        """The constants the kernels read (`kernels.SUB_STEPS`, ...); subclasses add theirs."""
        m, p = self.model, np.zeros(kernels.PARAMS)
        p[kernels.SUB_STEPS] = self.frame_skip
        p[kernels.RK4] = float(m.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4)
        p[kernels.SETTLE] = self.settle
        p[kernels.TWO] = 2.0
        p[kernels.NSENSORDATA] = m.nsensordata
        p[kernels.NWARNING] = NWARNING
        return p

    def body(self, name: str) -> int:
        return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)

    def sensor(self, name: str) -> int:
        """Where sensor `name`'s value begins in `sensordata`."""
        return int(self.model.sensor_adr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SENSOR, name)])

    def _suite_sub_steps(self, timestep: float) -> int:
        """control.Environment's `n_sub_steps` of the suite's control timestep."""
        if self.control_timestep is None:
            return 1
        return int(round(self.control_timestep / timestep))

    def _action_space(self) -> gym.spaces.Box:
        """dm_control's `action_spec` as the package path's Box."""
        m = self.model
        limited = m.actuator_ctrllimited.ravel().astype(bool)
        low, high = np.full(m.nu, -MJMAXVAL), np.full(m.nu, MJMAXVAL)
        low[limited], high[limited] = m.actuator_ctrlrange[limited].T
        return gym.spaces.Box(low, high, (m.nu,), np.float64)

    # -- seeds and initial states ------------------------------------------------------------
    def seed(self, i: int, seed: int | None) -> None:
        """Env i's generators from `seed`: NativeEnv's, and the task's `RandomState(seed)`,
        as the package path's `reset(seed=seed)` gives dm_control's task; its first initial
        state drawn now."""
        NativeEnv.seed(self, i, seed)
        self._randoms[i] = np.random.RandomState(seed)
        self._draw(np.array([i]))

    def rng(self, i: int) -> np.random.Generator:
        return NativeEnv.rng(self, i)

    def _draw(self, rows: np.ndarray) -> None:
        """The next initial states of envs `rows` from their RandomStates, into `sim.init`."""
        sim, nq = self.sim, self.model.nq
        for i in rows.tolist():
            qpos, qvel = self.initial_state(self._randoms[i])
            sim.init[i, :nq], sim.init[i, nq:] = qpos, qvel
            sim.ready[i] = kernels.READY

    def _after_reset(self, rows: np.ndarray) -> None:
        """What follows the kernels' resets of envs `rows`: dm_control's `time = 0` after the
        settling steps, and their next initial states."""
        if self.settle:
            for i in rows.tolist():
                self.sim.datas[i].time = 0.0
        self._draw(rows)

    # -- the engine's calls ----------------------------------------------------------------
    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> dict[str, np.ndarray]:
        """dm_control's `reset` of envs `ids` (no reset options), from their next initial states."""
        rows = np.asarray(ids, np.int64)
        for i in rows[self.sim.ready[rows] != kernels.READY].tolist():
            if self._randoms[i] is None:
                self.seed(i, None)
            else:
                self._draw(np.array([i]))
        obs = self._empty(len(rows))
        leaves = self._views(obs)
        warned = self._split(lambda s: self.sim.reset_rows(rows[s], tuple(v[s] for v in leaves)), len(rows))
        self._after_reset(rows)
        if any(warned):
            self._physics_error(rows)
        return obs

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        rows = self._rows[ids]
        actions = np.asarray(actions, np.float64)
        obs, reward = self._empty(len(rows)), np.empty(len(rows))
        leaves = self._views(obs)
        warned = self._split(lambda s: self.sim.step(rows[s], actions[s], tuple(v[s] for v in leaves), reward[s]),
                             len(rows))
        if any(warned):
            self._physics_error(rows)
        return obs, reward, np.zeros(len(rows), np.bool_)

    def can_fuse(self) -> bool:
        return True

    def compiled_step(self, actions: np.ndarray, obs: Any, final_obs: Any, book: Any) -> Any:
        """The kernels' ring loop on the pool's buffers (MujocoFamily's, with this family's kernels)."""
        return CompiledStep(kernels.run_parts, self.sim.ring_args(actions, obs, final_obs, book),
                            lambda rows: self._restart(rows, obs, book))

    def _restart(self, rows: np.ndarray, obs: Any, book: Any) -> None:
        """The Python half of the fused step for envs `rows`: those it reset get their next
        initial states; the others (no initial state ready) are reset here, as MujocoFamily's.
        Envs that warned are among them: dm_control's PhysicsError (the pool restarts the
        batch's envs, drawing the initial states not drawn here)."""
        if self.sim.warned[rows].any():
            self._physics_error(rows)
        used = self.sim.ready[rows] == kernels.USED
        if used.any():
            self._after_reset(rows[used])
        rest = rows[~used]
        if len(rest):
            keep_row = ~book.needs_reset[rest]
            obs[rest] = self.reset(rest, None)
            bookkeeping.started_rows(rest, keep_row, *book[:8])

    def _physics_error(self, rows: np.ndarray) -> None:
        """Raise dm_control's PhysicsError for the envs of `rows` that warned (`sim.warned`,
        cleared here), with dm_control's message (`Physics.check_invalid_state`) and their ids."""
        from dm_control.rl.control import PhysicsError

        warned = self.sim.warned
        hit = rows[warned[rows] != 0]
        mask = int(np.bitwise_or.reduce(warned[hit]))
        warned[hit] = 0
        names = ", ".join(name for k, name in enumerate(WARNINGS) if mask >> k & 1)
        envs = f"env {int(hit[0])}" if len(hit) == 1 else f"envs {hit.tolist()}"
        raise PhysicsError(f"Physics state is invalid. Warning(s) raised: {names} ({envs})")

    def _empty(self, n: int) -> dict[str, np.ndarray]:
        return {key: np.empty((n, *shape)) for key, shape in self.layout}

    def _views(self, obs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        return tuple(a.reshape(len(a), w) for a, w in zip(obs.values(), self._widths))
