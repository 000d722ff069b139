"""The simulations behind the native dm_control tasks: dm_control's own model files, one
`MjData` per env, each env's next initial state, and the calls into the compiled kernels.

- `load_model`: a suite model (`cheetah.xml`, ...) compiled by MuJoCo from the files of the
  installed dm_control package, with the suite's common assets, as `suite.<domain>`'s
  `Physics.from_xml_string` compiles it (the package itself is not imported: it loads
  rendering and every domain). No dm_control installed: ImportError, and the ids take the
  Python-env path over the package (which says what to install).
- `DmcSims`: the envs' data and the kernels' fixed arguments; `init` row i holds env i's
  next initial state, drawn in Python from its `RandomState` (`ready[i]` says whether it
  is there), so that the kernels can reset the envs a step ends without Python; `warned[i]`
  the MuJoCo warnings env i raised since the family last looked (a bit per mjtWarning).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

import mujoco
import numpy as np

from seedpool.envs.families.dmc_native import kernels, numpy_loops
from seedpool.envs.families.mujoco.kernels import c_functions

# On import: without MuJoCo's C library the family cannot be imported.
FUNCTIONS = np.concatenate([c_functions(kernels.FUNCTIONS), numpy_loops.loops()])


def suite_folder() -> str:
    """The `suite` folder of the installed dm_control package (found, not imported)."""
    spec = importlib.util.find_spec("dm_control")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the native dm_control tasks load dm_control's model files: pip install dm-control")
    return os.path.join(list(spec.submodule_search_locations)[0], "suite")


@functools.lru_cache(maxsize=None)
def _model_files(xml: str) -> tuple[str, dict[str, bytes]]:
    """The model's XML and the suite's common assets, keyed as dm_control's `common.ASSETS`."""
    folder = suite_folder()
    with open(os.path.join(folder, xml)) as f:
        text = f.read()
    assets = {}
    for name in sorted(os.listdir(os.path.join(folder, "common"))):
        if name.endswith(".xml"):
            with open(os.path.join(folder, "common", name), "rb") as f:
                assets[f"./common/{name}"] = f.read()
    return text, assets


def load_model(xml: str, actuation: bool = True) -> mujoco.MjModel:
    """dm_control's model `xml` (a file of its suite folder); `actuation=False`: with
    actuation disabled, as dm_control's resets run `mj_forward` (a model of its own, so
    that the shared one never changes while other threads step)."""
    model = mujoco.MjModel.from_xml_string(*_model_files(xml))
    if not actuation:
        model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    return model


class DmcSims:
    """`num_envs` envs of `model` (`noact`: the same with actuation disabled): their `MjData`
    (`datas[i]` is env i's), their next initial states (`init`, `ready`) and the fixed
    arguments of the kernels (the domain `kind`, the task's constants `params`, the widths
    of the observation's keys)."""

    def __init__(self, model: mujoco.MjModel, noact: mujoco.MjModel, num_envs: int, kind: int, params: np.ndarray,
                 widths: list[int]):
        self.model, self.noact = model, noact
        m = model
        self.num_envs = num_envs
        self.datas = [mujoco.MjData(m) for _ in range(num_envs)]
        self.table = kernels.addresses(self.datas)
        self.init = np.zeros((num_envs, m.nq + m.nv))
        self.ready = np.zeros(num_envs, np.int8)
        self.warned = np.zeros(num_envs, np.int64)
        self.widths = np.asarray(widths, np.int64)
        # The kernels' scratch row: an observation, then the warning counters before a step.
        self.scratch = int(self.widths.sum()) + int(params[kernels.NWARNING])
        self.args = (kind, np.asarray(params, np.float64), FUNCTIONS, np.uint64(m._address),
                     np.uint64(self.noact._address), self.table, m.nq, m.nv, m.nu, m.nbody, self.init, self.ready,
                     self.warned, self.widths)
        self._views: dict[int, tuple[Any, tuple[np.ndarray, ...]]] = {}

    def leaves(self, tree: Any) -> tuple[np.ndarray, ...]:
        """The kernels' view of one of the pool's observation buffers (a `Nested`, or the
        executor's empty dict of them): a 2-D view per key (n rows, its width), in the
        observation's order. They are the same every call: made once, each kept with its buffer."""
        got = self._views.get(id(tree))
        if got is not None and got[0] is tree:
            return got[1]
        arrays = tree.arrays if hasattr(tree, "arrays") else list(tree.values())
        views = tuple(a.reshape(len(a), w) for a, w in zip(arrays, self.widths.tolist()))
        if not all(v.flags.c_contiguous and v.dtype == np.float64 for v in views) or len(views) != len(self.widths):
            raise TypeError("internal error: the observation buffers are not float64 rows of the keys' widths")
        self._views[id(tree)] = (tree, views)
        return views

    def reset_rows(self, rows: np.ndarray, leaves: tuple[np.ndarray, ...]) -> int:
        """Reset envs `rows` (their initial states ready) into row k of `leaves` (env rows[k]);
        how many of them warned (`warned`)."""
        return kernels.reset_rows(*self.args, rows, leaves, np.empty(self.scratch))

    def step(self, rows: np.ndarray, actions: np.ndarray, leaves: tuple[np.ndarray, ...],
             reward: np.ndarray) -> int:
        """Step envs `rows` with `actions` (row k: env rows[k]), results into row k of the rest;
        how many of them warned (`warned`)."""
        return kernels.step_rows(*self.args, rows, actions, leaves, reward, np.empty(self.scratch))

    def step_fused(self, rows: np.ndarray, actions: np.ndarray, obs: Any, final_obs: Any, pending: np.ndarray,
                   book: Any) -> int:
        """Step envs `rows` on the pool's buffers with the engine's bookkeeping; the envs it
        reset or left to reset (or that warned) go into `pending`, their number returned
        (`kernels.step_fused`)."""
        return kernels.step_fused(*self.args, rows, actions, self.leaves(obs), self.leaves(final_obs), pending,
                                  *book, np.empty(self.scratch))

    def ring_args(self, actions: np.ndarray, obs: Any, final_obs: Any, book: Any) -> tuple:
        """The arguments of `kernels.run_parts` after the ring's own, on the pool's buffers."""
        return (*self.args, actions, self.leaves(obs), self.leaves(final_obs), *book)
