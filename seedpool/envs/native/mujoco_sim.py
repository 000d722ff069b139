"""The simulations behind the native MuJoCo families: N envs of one `MjModel`, reset and
stepped as gymnasium's `MujocoEnv` resets and steps one.

Two ways to hold them, with the same face (`qpos`, `qvel` arrays with a row per env, `reset`,
`step`):

- `BatchSim`: MuJoCo's own `mujoco.batch.Batch` (mujoco >= 3.17). Each env is a row of
  integration state; one call steps the rows in C, on `threads` threads without the GIL,
  bit-identical to one `MjData` per env stepped by `mj_step`. `qpos`/`qvel` are live views
  of the rows: no per-env Python at all.
- `SerialSim`: one `MjData` per env, stepped one after another with `mj_step` and then
  `mj_rnePostConstraint`, as gymnasium does. For Ant, whose observation and reward read
  `cfrc_ext`: that is computed only by `mj_rnePostConstraint` after the step, which a batch
  does not run (a model sensor that needs accelerations makes MuJoCo compute it inside the
  step, but from different inputs: measured, it does not give gymnasium's values).
"""

from __future__ import annotations

import mujoco
import numpy as np
from mujoco.batch import Batch

from seedpool.envs.native.base import Rows


def sorted_sims(ids: Rows, num_envs: int) -> np.ndarray | None:
    """The envs of `ids` as a Batch wants them: None for all, else sorted int32 ids."""
    if isinstance(ids, slice):
        lo, hi, _ = ids.indices(num_envs)
        return None if (lo, hi) == (0, num_envs) else np.arange(lo, hi, dtype=np.int32)
    return np.sort(ids).astype(np.int32)


class BatchSim:
    """N simulations in one `mujoco.batch.Batch`, stepped in C on `threads` threads."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, threads: int):
        self.num_envs = num_envs
        self.batch = Batch(model, num_envs, nthread=threads)
        self.qpos = self.batch.bind("qpos")  # (N, nq) views of the state rows
        self.qvel = self.batch.bind("qvel")
        self.ctrl = self.batch.bind("ctrl")

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """gymnasium's reset of envs `rows` (sorted): `mj_resetData`, then `set_state(qpos, qvel)`."""
        sims = rows.astype(np.int32)
        self.batch.reset(sims, stage=mujoco.mjtStage.mjSTAGE_NONE)
        self.qpos[rows] = qpos
        self.qvel[rows] = qvel
        self.batch.forward(sims)  # set_state's mj_forward

    def step(self, ids: Rows, ctrl: np.ndarray, nstep: int) -> None:
        """`mj_step(nstep)` of envs `ids` with controls `ctrl` (a row per id)."""
        self.ctrl[ids] = ctrl
        self.batch.step(sorted_sims(ids, self.num_envs), nstep=nstep)


class SerialSim:
    """N `MjData`, stepped one after another with `mj_step` and `mj_rnePostConstraint`;
    their `qpos`, `qvel`, `xpos` and `cfrc_ext` copied into arrays with a row per env."""

    def __init__(self, model: mujoco.MjModel, num_envs: int):
        self.model = model
        self.datas = [mujoco.MjData(model) for _ in range(num_envs)]
        self.qpos = np.zeros((num_envs, model.nq))
        self.qvel = np.zeros((num_envs, model.nv))
        self.xpos = np.zeros((num_envs, model.nbody, 3))
        self.cfrc_ext = np.zeros((num_envs, model.nbody, 6))
        self._rows = np.arange(num_envs)

    def _read(self, i: int, d: mujoco.MjData) -> None:
        self.qpos[i] = d.qpos
        self.qvel[i] = d.qvel
        self.xpos[i] = d.xpos
        self.cfrc_ext[i] = d.cfrc_ext

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """gymnasium's reset of envs `rows`: `mj_resetData`, then `set_state(qpos, qvel)`."""
        m = self.model
        for k, i in enumerate(rows.tolist()):
            d = self.datas[i]
            mujoco.mj_resetData(m, d)
            d.qpos[:] = qpos[k]
            d.qvel[:] = qvel[k]
            mujoco.mj_forward(m, d)
            self._read(i, d)

    def step(self, ids: Rows, ctrl: np.ndarray, nstep: int) -> None:
        """gymnasium's `_step_mujoco_simulation` of envs `ids` (a row of `ctrl` per id)."""
        m, datas = self.model, self.datas
        for k, i in enumerate(self._rows[ids].tolist()):
            d = datas[i]
            d.ctrl[:] = ctrl[k]
            mujoco.mj_step(m, d, nstep=nstep)
            mujoco.mj_rnePostConstraint(m, d)
            self._read(i, d)
