"""The simulations behind the native MuJoCo families, and the threads that step them.

- `DataSims`: N `MjData` of one `MjModel`, one per env, as gymnasium holds one per env; reset
  from Python (`mj_resetData`, the state, `mj_forward`, as gymnasium's `reset`), stepped by
  the compiled kernels of mujoco_kernels.py (MuJoCo's C functions on each env's data, with the
  family's observation, reward and bookkeeping, without the GIL).
- `RowThreads`: a call over n rows split into contiguous parts, one per thread (the caller
  takes the first, persistent helpers the others), or run whole in the calling thread:
  `split` True or False, None for `SplitTimer`'s choice, timed call by call. Each env's
  physics is the same calls on the same data either way, so the results are the same, byte
  for byte; any thread may step any env, so parts need no fixed assignment of envs.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable

import mujoco
import numpy as np

from seedpool.envs.families.mujoco import kernels
from seedpool.envs.native.threads import ShardThreads, SplitTimer

FUNCTIONS = kernels.c_functions()  # on import: without MuJoCo's C library the family cannot be imported


class DataSims:
    """`num_envs` envs of `model`: their `MjData` (`datas[i]` is env i's) and the fixed
    arguments of the kernels (the family `kind`, its constants `params`, the frame skip)."""

    def __init__(self, model: mujoco.MjModel, num_envs: int, kind: int, params: np.ndarray, frame_skip: int):
        if model.nbody * 6 > 128 or model.nu > 128:
            raise ValueError("the native MuJoCo kernels sum at most 128 terms (NumPy's pairwise block)")
        self.model = model
        self.num_envs = num_envs
        self.datas = [mujoco.MjData(model) for _ in range(num_envs)]
        self.table = kernels.addresses(self.datas)  # the kernels' way to each env's data
        self.params = np.array(params, np.float64)  # the family may switch RESET_HERE on later
        self.pcg = np.zeros((num_envs, 4), np.uint64)  # each env's PCG64 state, for resets in the kernels
        # The kernels' leading arguments: family, constants, MuJoCo's functions, the model,
        # the address table, sizes, frame skip, the generators' states.
        self.args = (kind, self.params, FUNCTIONS, np.uint64(model._address), self.table, model.nq, model.nv,
                     model.nu, model.nbody, frame_skip, self.pcg)

    def reset(self, i: int, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """gymnasium's reset of env i: `mj_resetData`, then `set_state(qpos, qvel)`."""
        m, d = self.model, self.datas[i]
        mujoco.mj_resetData(m, d)
        d.qpos[:] = qpos
        d.qvel[:] = qvel
        mujoco.mj_forward(m, d)

    def reset_rows(self, rows: np.ndarray, out: np.ndarray) -> None:
        """`reset` of envs `rows` with uniform noise drawn from their `pcg` states, in one compiled
        call; their observations into `out` (row k: env rows[k])."""
        kernels.reset_rows(*self.args, rows, out)

    def observe(self, rows: np.ndarray, out: np.ndarray) -> None:
        """The observations of envs `rows` into `out` (row k: env rows[k])."""
        kind, params, _, _, table, nq, nv, _, nbody, _, _ = self.args
        kernels.observe(kind, params, table, nq, nv, nbody, rows, out)

    def step(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, reward: np.ndarray,
             terminated: np.ndarray) -> None:
        """Step envs `rows` with `actions` (row k: env rows[k]), results into row k of the rest."""
        kernels.step_rows(*self.args, rows, actions, obs, reward, terminated)

    def step_fused(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray,
                   pending: np.ndarray, book: Any) -> int:
        """Step envs `rows` on the pool's buffers with the engine's bookkeeping; the envs left
        to reset go into `pending`, their number returned (`kernels.step_fused`)."""
        return kernels.step_fused(*self.args, rows, actions, obs, final_obs, pending, *book)


class RowThreads:
    """Runs `fn(part)` over contiguous parts (slices) of n rows on `k` threads at once, or
    `fn(slice(0, n))` in the calling thread: `split` True or False, None for `SplitTimer`'s
    choice. The helper threads start on first use, in the process that uses them (a forked
    child starts its own), and stop with `close()` or when this object is dropped."""

    def __init__(self, k: int, split: bool | None):
        self.k, self.split = k, split
        self.timer = SplitTimer() if split is None else None
        self._threads: ShardThreads | None = None
        self._finalizer: Any = None
        self._pid = os.getpid()  # the process the helper threads run in
        self._parts: dict[int, list[slice]] = {}  # the parts of n rows

    def splits(self, n: int) -> bool:
        """Whether a call over n rows is split now (`SplitTimer`'s choice times the calls)."""
        return n >= 2 and (self.split if self.timer is None else self.timer.choose(n))

    def run(self, fn: Callable[[slice], Any], n: int) -> list[Any]:
        """`fn`'s results, one per part (in row order)."""
        if not self.splits(n):
            return [fn(slice(0, n))]
        parts = self._parts.get(n)
        if parts is None:  # the same few batch sizes come back every call: cut each once
            k = min(self.k, n)
            parts = self._parts[n] = [slice(n * j // k, n * (j + 1) // k) for j in range(k)]
        k = len(parts)
        results: list[Any] = [None] * k

        def part(j: int) -> None:
            results[j] = fn(parts[j])

        self._helpers().run_parts(part, list(range(k)))
        return results

    def close(self) -> None:
        """Stop the helper threads (a dropped RowThreads stops them too)."""
        if self._finalizer is not None:
            self._finalizer()

    def _helpers(self) -> ShardThreads:
        if self._threads is None or self._pid != os.getpid():  # a forked child has no helper threads
            self._pid = os.getpid()
            self._threads = ShardThreads(self.k)
            # The helpers hold no reference to this object: dropping it closes them.
            self._finalizer = weakref.finalize(self, self._threads.close)
        return self._threads
