"""The simulations behind the native MuJoCo families: N envs of one `MjModel`, reset and
stepped as gymnasium's `MujocoEnv` resets and steps one.

Three ways to hold them, with the same face (`qpos`, `qvel` arrays with a row per env, `reset`,
`step`):

- `BatchSim`: MuJoCo's own `mujoco.batch.Batch` (mujoco >= 3.17). Each env is a row of
  integration state; one call steps the rows in C, without the GIL, bit-identical to one
  `MjData` per env stepped by `mj_step`. `qpos`/`qvel` are live views of the rows: no per-env
  Python at all. On one thread: the Batch's own thread pool cost more CPU per env step than
  `ShardedSim`'s split (docs/engine.md, "MuJoCo").
- `SerialSim`: one `MjData` per env, stepped one after another with `mj_step` and then
  `mj_rnePostConstraint`, as gymnasium does. For Ant, whose observation and reward read
  `cfrc_ext`: that is computed only by `mj_rnePostConstraint` after the step, which a batch
  does not run (a model sensor that needs accelerations makes MuJoCo compute it inside the
  step, but from different inputs: measured, it does not give gymnasium's values).
- `ShardedSim`: k of either, env i in shard i % k; a call steps the shards at once on k
  threads (MuJoCo's calls release the GIL), or one after another where that measured faster.
  For an async pool stepped in the background (background.py) the shards hold blocks of
  envs instead, one thread each, so that a batch of contiguous envs is one shard's call.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Union

import mujoco
import numpy as np
from mujoco.batch import Batch

from seedpool.envs.native.base import Rows
from seedpool.envs.native.threads import ShardThreads, SplitTimer


def sorted_sims(ids: Rows, num_envs: int) -> np.ndarray | None:
    """The envs of `ids` as a Batch wants them: None for all, else sorted int32 ids."""
    if isinstance(ids, slice):
        lo, hi, step = ids.indices(num_envs)
        return None if (lo, hi, step) == (0, num_envs, 1) else np.arange(lo, hi, step, dtype=np.int32)
    return np.sort(ids).astype(np.int32)


class BatchSim:
    """N simulations in one `mujoco.batch.Batch`, stepped in C on the calling thread."""

    def __init__(self, model: mujoco.MjModel, num_envs: int):
        self.num_envs = num_envs
        self.batch = Batch(model, num_envs, nthread=1)
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
        self.load(ids, ctrl)
        self.advance(ids, nstep)

    def load(self, ids: Rows, ctrl: np.ndarray) -> None:
        """The first half of `step`: set the controls."""
        self.ctrl[ids] = ctrl

    def advance(self, ids: Rows, nstep: int) -> None:
        """The second half of `step`: the physics (in C, without the GIL)."""
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
        self.load(ids, ctrl)
        self.advance(ids, nstep)

    def load(self, ids: Rows, ctrl: np.ndarray) -> None:
        """The first half of `step`: set the controls."""
        datas = self.datas
        for k, i in enumerate(self._rows[ids].tolist()):
            datas[i].ctrl[:] = ctrl[k]

    def advance(self, ids: Rows, nstep: int) -> None:
        """The second half of `step`: the physics (`mj_step` without the GIL), and the copies."""
        m, datas = self.model, self.datas
        for i in self._rows[ids].tolist():
            d = datas[i]
            mujoco.mj_step(m, d, nstep=nstep)
            mujoco.mj_rnePostConstraint(m, d)
            self._read(i, d)


Sim = Union[BatchSim, SerialSim]
# A shard's part of a call: (shard, positions in the call's rows, the shard's own rows, env ids).
Part = tuple[int, Union[slice, np.ndarray], Union[slice, np.ndarray], Union[slice, np.ndarray]]


class ShardedSim:
    """`shards` sims made by `make_sim(n)`; env i is row i // k of shard i % k, so a contiguous
    run of envs (a sync step, an async batch) splits evenly. A step runs the shards' parts at
    once, the caller one and persistent helper threads (started on first use) the others, or
    all in the calling thread: `split` True or False, None for `SplitTimer`'s choice, timed
    call by call. Either way each env's physics is the same calls on the same data, so the
    results are the same, byte for byte. The fields a family reads are copied after each call
    into arrays with a row per env (`fields`: qpos, qvel; SerialSim's xpos and cfrc_ext too).

    `use_blocks()` (before the first reset) puts the envs in contiguous blocks instead, shard s
    holding as many as before: for threads that each step one shard's envs (background.py)."""

    def __init__(self, make_sim: Callable[[int], Sim], num_envs: int, shards: int, split: bool | None):
        if not 2 <= shards <= num_envs:
            raise ValueError(f"a ShardedSim needs 2 to num_envs={num_envs} shards, got {shards}")
        self.num_envs, self.k = num_envs, shards
        self.shards = [make_sim(len(range(s, num_envs, shards))) for s in range(shards)]
        first = self.shards[0]
        self.fields = ("qpos", "qvel") + (("xpos", "cfrc_ext") if isinstance(first, SerialSim) else ())
        for name in self.fields:
            setattr(self, name, np.zeros((num_envs, *getattr(first, name).shape[1:])))
        self.split = split
        self.blocks: list[int] | None = None  # None: env i in shard i % k; else block bounds
        self.shard_of = np.arange(num_envs) % shards  # each env's shard and row in it
        self.row_of = np.arange(num_envs) // shards
        self._reset_yet = False
        self.timer = SplitTimer() if split is None else None
        self._threads: ShardThreads | None = None
        self._finalizer: Any = None
        self._pid = os.getpid()  # the process the helper threads run in
        self._rows = np.arange(num_envs)
        self._runs: dict[tuple[int, int, int], list[Part]] = {}  # _parts of runs of envs

    def use_blocks(self) -> np.ndarray:
        """Put the envs in contiguous blocks, shard s holding envs bounds[s]..bounds[s+1]-1
        (the sizes the shards have); each env's shard. Only before the first reset."""
        if self._reset_yet:
            raise RuntimeError("use_blocks() after the envs were reset: their states are in place")
        sizes = [len(range(s, self.num_envs, self.k)) for s in range(self.k)]
        self.blocks = np.concatenate(([0], np.cumsum(sizes))).tolist()
        self.shard_of = np.repeat(np.arange(self.k), sizes)
        self.row_of = np.arange(self.num_envs) - np.asarray(self.blocks[:-1])[self.shard_of]
        self._runs.clear()
        return self.shard_of.copy()

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Each shard's `reset` of its envs of `rows` (sorted), in the calling thread."""
        self._reset_yet = True
        for s, pos, local, env in self._parts(rows):
            self.shards[s].reset(local, qpos[pos], qvel[pos])
            self._copy_out(s, local, env)

    def step(self, ids: Rows, ctrl: np.ndarray, nstep: int) -> None:
        """Each shard's `step` of its envs of `ids`: the controls set and the results copied
        here, the physics of the shards at once or one after another."""
        parts = self._parts(ids)
        jobs = []
        for s, pos, local, _ in parts:
            self.shards[s].load(local, ctrl[pos])
            jobs.append((self.shards[s], local, nstep))
        split = len(jobs) > 1 and (self.split if self.timer is None else self.timer.choose(len(ctrl)))
        if split:
            self._helpers().run_parts(_advance, jobs)
        else:
            for job in jobs:
                _advance(job)
        for s, _, local, env in parts:
            self._copy_out(s, local, env)

    def close(self) -> None:
        """Stop the helper threads (a dropped ShardedSim stops them too)."""
        if self._finalizer is not None:
            self._finalizer()

    def _copy_out(self, s: int, local: Rows, env: Rows) -> None:
        sim = self.shards[s]
        for name in self.fields:
            getattr(self, name)[env] = getattr(sim, name)[local]

    def _helpers(self) -> ShardThreads:
        if self._threads is None or self._pid != os.getpid():  # a forked child has no helper threads
            self._pid = os.getpid()
            self._threads = ShardThreads(self.k)
            # The helpers hold no reference to this object: dropping it closes them.
            self._finalizer = weakref.finalize(self, self._threads.close)
        return self._threads

    def _parts(self, ids: Rows) -> list[Part]:
        """Each shard's part of the envs `ids`, shards without one left out. A contiguous run
        (or, interleaved, a run of one shard's envs: a slice with step k) gives slices (views),
        anything else index arrays in the order of `ids`."""
        parts: list[Part] | None
        if isinstance(ids, slice):
            lo, hi, step = ids.indices(self.num_envs)
            if step == 1 or (step == self.k and self.blocks is None):
                parts = self._runs.get((lo, hi, step))
                if parts is None:  # the same few runs come back every step: work each out once
                    parts = self._run_parts(lo, hi, step)
                    self._runs[(lo, hi, step)] = parts
                return parts
        rows = self._rows[ids]
        shard = self.shard_of[rows]
        parts = []
        for s in range(self.k):
            pos = np.flatnonzero(shard == s)
            if len(pos):
                env = rows[pos]
                parts.append((s, pos, self.row_of[env], env))
        return parts

    def _run_parts(self, lo: int, hi: int, step: int) -> list[Part]:
        """`_parts` of the envs lo, lo + step, ... below hi (step 1, or k when interleaved)."""
        k, parts = self.k, []
        if self.blocks is not None:  # step 1: each block's stretch of the run
            for s in range(k):
                first, end = max(lo, self.blocks[s]), min(hi, self.blocks[s + 1])
                if first < end:
                    row = first - self.blocks[s]
                    parts.append((s, slice(first - lo, end - lo), slice(row, row + end - first), slice(first, end)))
            return parts
        for s in range(k):
            first = lo + (s - lo) % k  # the shard's first env in [lo, hi)
            count = len(range(first, hi, k))
            if count and (step == 1 or s == lo % k):
                pos = slice(first - lo, hi - lo, k) if step == 1 else slice(None)
                parts.append((s, pos, slice(first // k, first // k + count), slice(first, hi, k)))
        return parts


def _advance(job: tuple[Sim, Rows, int]) -> None:
    """A shard's physics: what a helper thread runs (little Python, so little GIL)."""
    sim, ids, nstep = job
    sim.advance(ids, nstep)
