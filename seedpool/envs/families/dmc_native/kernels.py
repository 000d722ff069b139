"""The compiled step of the native dm_control tasks: for each env of a batch, its controls,
dm_control's physics step, its observation and reward, and the engine's bookkeeping, in one
numba call without the GIL; the resets of the envs it ends too (`_reset_env`).

MuJoCo's C functions are called through their addresses in the `libmujoco` the `mujoco`
package loaded (families/mujoco/kernels.py), on each env's own `MjData` (its address and
those of the fields read here, one row per env: `DATA`, `QPOS`, ...). A step is dm_control's
`Physics.step` with `legacy_step` (control.Environment's default): `mj_step2`, `mj_step`
for the other sub-steps, then `mj_step1`, so that the observation reads positions and
velocities of the new state (RK4 models: `mj_step` for every sub-step, then `mj_step1`).
A reset is dm_control's: `mj_resetData` and `mj_forward` with actuation disabled (on a copy
of the model with that flag: the shared model is never changed while other threads step),
the task's initial state (drawn beforehand in Python from the env's `RandomState`, into row
i of `init`), the task's settling steps (cheetah's 200), and `mj_forward` without actuation
again. Rewards follow dm_control's expressions (`rewards.tolerance`) in float64.

dm_control's `check_invalid_state`: around a step's physics (and a reset's, after its first
`mj_forward`), MuJoCo's warning counters (`data.warning[k].number`) are read before and
after; an env whose counter of some warning rose gets that bit set in `warned[i]` (the step
goes on as MuJoCo left it), and the family raises dm_control's `PhysicsError` for it in
Python (family.py): `step_rows` and `reset_rows` return how many envs warned, `step_fused`
hands them back among its `pending` envs. The counters before are kept in the last
`p[NWARNING]` entries of the scratch row `flat`, after the observation.

One kernel serves the domains (`kind`), their constants in a float64 vector (`p`, indexed
by the names below). The observation of an env is computed into a flat scratch row and
written into the pool's leaf arrays (one per key of the Dict observation, each a 2-D view:
a scalar key is one column), `widths` columns each.
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from seedpool.envs.families.mujoco.kernels import _call, _f64, typed_pointer  # MuJoCo's C functions, from numba
from seedpool.envs.native import bookkeeping, part_ring

# The domains, as the kernel tells them apart.
CHEETAH, WALKER, HOPPER, CARTPOLE = range(4)
# Entries of a task's constants `p`. T1_*, T2_*, T3_*: the (lower, upper, margin, scale) of
# the task's tolerance terms (which sigmoid each is, is the domain's code); MOVE: walker's
# move speed (0: stand), hopper's hopping (1.0) or standing (0.0); TWO: 2.0.
# NWARNING: how many warning counters MuJoCo keeps (mjNWARNING).
(SUB_STEPS, RK4, SETTLE, TWO, NSENSORDATA, TORSO, FOOT, SPEED, TOUCH_TOE, TOUCH_HEEL, SLIDER, MOVE,
 T1_LO, T1_HI, T1_MARGIN, T1_SCALE, T2_LO, T2_HI, T2_MARGIN, T2_SCALE, T3_LO, T3_HI, T3_MARGIN, T3_SCALE,
 NWARNING, PARAMS) = range(26)
# dm_control's sigmoids used here. Its gaussian squares with `**`: of an array, NumPy's
# square (x * x); of a scalar (a float64 read from the physics), the C library's pow(x, 2),
# which differs from x * x in the last bit now and then: GAUSSIAN and GAUSSIAN_OF_SCALAR.
GAUSSIAN, GAUSSIAN_OF_SCALAR, LINEAR, QUADRATIC = range(4)
# Columns of the address table (a row per env): its MjData and the arrays read or written here
# (WARNING: its first warning counter, `data.warning[0].number`; the next are 8 bytes apart).
DATA, QPOS, QVEL, CTRL, XPOS, XMAT, XIPOS, SENSORDATA, WARNING, ADDRESSES = range(10)
# MuJoCo's functions called here, in the order of `fns`; then NumPy's float64 loops of exp
# and log1p and their data (numpy_loops.py; 0 where not found: numba's functions instead).
FUNCTIONS = ("mj_step", "mj_step1", "mj_step2", "mj_forward", "mj_resetData")
MJ_STEP, MJ_STEP1, MJ_STEP2, MJ_FORWARD, MJ_RESET_DATA, EXP, EXP_DATA, LOG1P, LOG1P_DATA = range(9)
# `ready[i]`: whether row i of `init` holds env i's next initial state (drawn, not yet used),
# or was used by a reset here (Python draws the next one).
NONE, READY, USED = 0, 1, 2


def addresses(datas: list) -> np.ndarray:
    """The address table of `datas` (one `MjData` per env): a uint64 row per env."""
    table = np.zeros((len(datas), ADDRESSES), np.uint64)
    for i, d in enumerate(datas):
        counters = d.warning.number
        if counters.dtype != np.int32 or counters.strides != (8,):
            raise TypeError(f"internal error: MuJoCo's warning counters are not int32 8 bytes apart: {counters.strides}")
        table[i] = (d._address, d.qpos.ctypes.data, d.qvel.ctypes.data, d.ctrl.ctypes.data, d.xpos.ctypes.data,
                    d.xmat.ctypes.data, d.xipos.ctypes.data, d.sensordata.ctypes.data, counters.ctypes.data)
    return table


_i32 = typed_pointer(types.int32)  # MuJoCo's warning counters


@njit(cache=True, nogil=True, inline="always")
def _keep_warnings(p, a, flat):  # pragma: no cover - compiled
    """The env's warning counters now, into the last p[NWARNING] entries of `flat`."""
    n = int(p[NWARNING])
    counts, base = carray(_i32(a[WARNING]), 2 * n), flat.size - n
    for k in range(n):
        flat[base + k] = counts[2 * k]


@njit(cache=True, nogil=True, inline="always")
def _new_warnings(p, a, flat):  # pragma: no cover - compiled
    """Bit k set for each warning whose counter rose since `_keep_warnings` (dm_control's test)."""
    n = int(p[NWARNING])
    counts, base = carray(_i32(a[WARNING]), 2 * n), flat.size - n
    mask = 0
    for k in range(n):
        if counts[2 * k] > flat[base + k]:
            mask |= 1 << k
    return mask


@intrinsic
def _loop(typingctx, fn, args, dims, steps, data):
    """`fn(args, dims, steps, data)`: a NumPy inner loop at address `fn` (char**, npy_intp*,
    npy_intp*, void*)."""
    sig = types.void(types.uint64, types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, arguments):
        import llvmlite.ir as ir

        ptr = ir.IntType(8).as_pointer()
        target = builder.inttoptr(arguments[0], ir.FunctionType(ir.VoidType(), [ptr] * 4).as_pointer())
        builder.call(target, [builder.inttoptr(a, ptr) for a in arguments[1:]])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True)
def _numpy(fns, which, x):  # pragma: no cover - compiled
    """NumPy's `exp` (which = EXP) or `log1p` (LOG1P) of one float64, by NumPy's own loop."""
    fn = fns[which]
    if fn == 0:
        return np.exp(x) if which == EXP else np.log1p(x)
    io = np.empty(2)
    meta = np.empty(5, np.int64)  # the loop's args (in, out), dimensions (1), steps (8, 8)
    io[0] = x
    meta[0], meta[1], meta[2], meta[3], meta[4] = io.ctypes.data, io.ctypes.data + 8, 1, 8, 8
    at = np.uint64(meta.ctypes.data)
    _loop(fn, at, at + np.uint64(16), at + np.uint64(24), fns[which + 1])
    return io[1]


@njit(cache=True, nogil=True, inline="always")
def _tolerance(fns, x, lower, upper, margin, scale, sigmoid, two):  # pragma: no cover - compiled
    """dm_control's `rewards.tolerance` of a scalar, its sigmoid's scale given (computed
    from `value_at_margin` as dm_control computes it)."""
    if lower <= x <= upper:
        return 1.0
    if margin == 0.0:
        return 0.0
    d = ((lower - x) if x < lower else (x - upper)) / margin
    s = d * scale
    if sigmoid == GAUSSIAN:
        return _numpy(fns, EXP, -0.5 * (s * s))
    if sigmoid == GAUSSIAN_OF_SCALAR:  # the exponent read at run time: the compiler keeps the pow call
        return _numpy(fns, EXP, -0.5 * s ** two)
    if abs(s) < 1.0:
        return 1.0 - s if sigmoid == LINEAR else 1.0 - s * s
    return 0.0


@njit(cache=True, nogil=True, inline="always")
def _term(fns, p, at, x, sigmoid):  # pragma: no cover - compiled
    """The tolerance term whose constants begin at `p[at]` (T1_LO, T2_LO, T3_LO), of `x`."""
    return _tolerance(fns, x, p[at], p[at + 1], p[at + 2], p[at + 3], sigmoid, p[TWO])


@njit(cache=True, nogil=True)
def _advance(fns, model, data, n, rk4):  # pragma: no cover - compiled
    """dm_control's `Physics.step(n)` with `legacy_step`."""
    if rk4:
        for _ in range(n):
            _call(fns[MJ_STEP], model, data)
    else:
        _call(fns[MJ_STEP2], model, data)
        for _ in range(n - 1):
            _call(fns[MJ_STEP], model, data)
    _call(fns[MJ_STEP1], model, data)


@njit(cache=True, nogil=True)
def _reward(kind, p, fns, a, nq, nv, nu, nbody):  # pragma: no cover - compiled
    """The task's `get_reward` of the env whose addresses are `a`."""
    sensors = carray(_f64(a[SENSORDATA]), int(p[NSENSORDATA]))
    torso = int(p[TORSO])
    if kind == CHEETAH:
        return _term(fns, p, T1_LO, sensors[int(p[SPEED])], LINEAR)
    if kind == WALKER:
        xpos, xmat = carray(_f64(a[XPOS]), nbody * 3), carray(_f64(a[XMAT]), nbody * 9)
        standing = _term(fns, p, T1_LO, xpos[3 * torso + 2], GAUSSIAN_OF_SCALAR)
        upright = (1 + xmat[9 * torso + 8]) / 2
        stand_reward = (3 * standing + upright) / 4
        if p[MOVE] == 0.0:
            return stand_reward
        move_reward = _term(fns, p, T2_LO, sensors[int(p[SPEED])], LINEAR)
        return stand_reward * (5 * move_reward + 1) / 6
    ctrl = carray(_f64(a[CTRL]), nu)
    if kind == HOPPER:
        xipos = carray(_f64(a[XIPOS]), nbody * 3)
        standing = _term(fns, p, T1_LO, xipos[3 * torso + 2] - xipos[3 * int(p[FOOT]) + 2], GAUSSIAN_OF_SCALAR)
        if p[MOVE] != 0.0:
            return standing * _term(fns, p, T2_LO, sensors[int(p[SPEED])], LINEAR)
        total = _term(fns, p, T3_LO, ctrl[0], QUADRATIC)  # .mean(): NumPy's sum, one term after another below 8
        for j in range(1, nu):
            total += _term(fns, p, T3_LO, ctrl[j], QUADRATIC)
        return standing * ((total / nu + 4) / 5)
    # CARTPOLE (one pole, the smooth reward)
    qpos, qvel, xmat = carray(_f64(a[QPOS]), nq), carray(_f64(a[QVEL]), nv), carray(_f64(a[XMAT]), nbody * 9)
    upright = (xmat[9 * 2 + 8] + 1) / 2
    centered = (1 + _term(fns, p, T1_LO, qpos[int(p[SLIDER])], GAUSSIAN_OF_SCALAR)) / 2
    small_control = (4 + _term(fns, p, T3_LO, ctrl[0], QUADRATIC)) / 5
    small_velocity = (1 + _term(fns, p, T2_LO, qvel[1], GAUSSIAN)) / 2  # of an array (qvel[1:])
    return upright * small_control * small_velocity * centered


@njit(cache=True, nogil=True)
def _observe(kind, p, fns, a, nq, nv, nbody, flat):  # pragma: no cover - compiled
    """The task's `get_observation` of the env whose addresses are `a`, its keys one after
    another into `flat`."""
    qpos, qvel = carray(_f64(a[QPOS]), nq), carray(_f64(a[QVEL]), nv)
    at = 0
    if kind == WALKER:  # every body's but the world's xx and xz, the torso's height
        xmat = carray(_f64(a[XMAT]), nbody * 9)
        for b in range(1, nbody):
            flat[at], flat[at + 1] = xmat[9 * b], xmat[9 * b + 2]
            at += 2
        flat[at] = carray(_f64(a[XPOS]), nbody * 3)[3 * int(p[TORSO]) + 2]
        at += 1
    elif kind == CARTPOLE:  # the cart's position, each pole's zz and xz
        xmat = carray(_f64(a[XMAT]), nbody * 9)
        flat[0] = qpos[int(p[SLIDER])]
        at = 1
        for b in range(2, nbody):
            flat[at], flat[at + 1] = xmat[9 * b + 8], xmat[9 * b + 2]
            at += 2
    else:  # cheetah, hopper: the positions but the horizontal one
        for j in range(1, nq):
            flat[at] = qpos[j]
            at += 1
    for j in range(nv):
        flat[at + j] = qvel[j]
    at += nv
    if kind == HOPPER:  # the foot's touch sensors, log1p
        sensors = carray(_f64(a[SENSORDATA]), int(p[NSENSORDATA]))
        flat[at] = _numpy(fns, LOG1P, sensors[int(p[TOUCH_TOE])])
        flat[at + 1] = _numpy(fns, LOG1P, sensors[int(p[TOUCH_HEEL])])


@njit(cache=True, nogil=True, inline="always")
def _scatter(flat, leaves, widths, row):  # pragma: no cover - compiled
    """`flat` into row `row` of the leaf arrays, `widths[k]` columns of leaf k each."""
    at = 0
    for k in range(len(leaves)):
        leaf = leaves[k]
        for j in range(widths[k]):
            leaf[row, j] = flat[at + j]
        at += widths[k]


@njit(cache=True, nogil=True)
def _step_env(kind, p, fns, model, a, nq, nv, nu, nbody, act, flat, warned, i):  # pragma: no cover - compiled
    """dm_control's `Environment.step` of env i (addresses `a`) with action `act`: the
    controls, the physics (its new warnings into `warned[i]`), then its reward (returned)
    and observation (into `flat`)."""
    ctrl = carray(_f64(a[CTRL]), nu)
    for j in range(nu):
        ctrl[j] = act[j]
    _keep_warnings(p, a, flat)
    _advance(fns, model, a[DATA], int(p[SUB_STEPS]), p[RK4] != 0.0)
    mask = _new_warnings(p, a, flat)
    if mask:
        warned[i] = mask
    reward = _reward(kind, p, fns, a, nq, nv, nu, nbody)
    _observe(kind, p, fns, a, nq, nv, nbody, flat)
    return reward


@njit(cache=True, nogil=True)
def _reset_env(p, fns, model, noact, a, nq, nv, init, ready, warned, i, flat):  # pragma: no cover - compiled
    """dm_control's `Environment.reset` of env i (address row `a`), its initial state from
    row i of `init` (marked USED); the warnings after its first `mj_forward` (which
    `reset_context` lets pass) into `warned[i]`."""
    _call(fns[MJ_RESET_DATA], model, a[DATA])
    _call(fns[MJ_FORWARD], noact, a[DATA])
    _keep_warnings(p, a, flat)
    qpos, qvel = carray(_f64(a[QPOS]), nq), carray(_f64(a[QVEL]), nv)
    for j in range(nq):
        qpos[j] = init[i, j]
    for j in range(nv):
        qvel[j] = init[i, nq + j]
    ready[i] = USED
    settle = int(p[SETTLE])
    if settle > 0:  # cheetah's initialize_episode: physics.step(200) (its time set to 0 by the caller)
        _advance(fns, model, a[DATA], settle, p[RK4] != 0.0)
    _call(fns[MJ_FORWARD], noact, a[DATA])
    mask = _new_warnings(p, a, flat)
    if mask:
        warned[i] = mask


@njit(cache=True, nogil=True)
def reset_rows(kind, p, fns, model, noact, table, nq, nv, nu, nbody, init, ready, warned, widths, rows, leaves,
               flat):  # pragma: no cover - compiled
    """Reset envs `rows` (their initial states ready in `init`) and write their observations
    into row k of `leaves` (for env rows[k]); how many of them warned."""
    n_warned = 0
    for k in range(rows.size):
        a = table[rows[k]]
        _reset_env(p, fns, model, noact, a, nq, nv, init, ready, warned, rows[k], flat)
        n_warned += warned[rows[k]] != 0
        _observe(kind, p, fns, a, nq, nv, nbody, flat)
        _scatter(flat, leaves, widths, k)
    return n_warned


@njit(cache=True, nogil=True)
def step_rows(kind, p, fns, model, noact, table, nq, nv, nu, nbody, init, ready, warned, widths, rows, actions,
              leaves, reward, flat):  # pragma: no cover - compiled
    """Step envs `rows` with `actions` (row k for env rows[k]); their results into row k of
    `leaves` and `reward`; how many of them warned."""
    n_warned = 0
    for k in range(rows.size):
        i = rows[k]
        reward[k] = _step_env(kind, p, fns, model, table[i], nq, nv, nu, nbody, actions[k], flat, warned, i)
        n_warned += warned[i] != 0
        _scatter(flat, leaves, widths, k)
    return n_warned


@njit(cache=True, nogil=True)
def step_fused(kind, p, fns, model, noact, table, nq, nv, nu, nbody, init, ready, warned, widths, rows, actions,
               leaves, final_leaves, pending, reward, terminated, truncated, elapsed_step, episode_return, elapsed, returns,
               needs_reset, limit, mode, flat):  # pragma: no cover - compiled
    """Step envs `rows` with their rows of the pool's `actions`, writing their rows of the
    pool's observation leaves and the engine's bookkeeping (the arguments from `reward` on
    are a `Book`'s fields). The envs to reset (marked `needs_reset`, not stepped; or,
    same_step autoreset, ended now, their final observation copied) are reset here where
    their next initial state is ready; all of them go into `pending` (their number
    returned): the caller draws the next initial states of those reset here and resets the
    others; an env that warned goes into `pending` too (the caller raises for it). None of
    these tasks terminates: their episodes end at the time limit."""
    n_pending = 0
    for k in range(rows.size):
        i = rows[k]
        keep_row = False  # a marked env is not stepped: its row reports the reset
        if not needs_reset[i]:
            r = _step_env(kind, p, fns, model, table[i], nq, nv, nu, nbody, actions[i], flat, warned, i)
            _scatter(flat, leaves, widths, i)
            if not bookkeeping.end_step(i, r, False, reward, terminated, truncated, elapsed_step, episode_return,
                                        elapsed, returns, needs_reset, limit, mode):
                if warned[i]:
                    pending[n_pending] = i
                    n_pending += 1
                continue
            for c in range(len(leaves)):  # same_step autoreset: the row keeps reporting the end
                final_leaves[c][i, :] = leaves[c][i, :]
            keep_row = True
        if ready[i] == READY:
            _reset_env(p, fns, model, noact, table[i], nq, nv, init, ready, warned, i, flat)
            _observe(kind, p, fns, table[i], nq, nv, nbody, flat)
            _scatter(flat, leaves, widths, i)
            bookkeeping.started(i, keep_row, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                                returns, needs_reset)
        pending[n_pending] = i
        n_pending += 1
    return n_pending


@njit(cache=True, nogil=True)
def run_parts(ctl, slots, ring_rows, ring_pending, num_slots, first, end, spins, kind, p, fns, model, noact, table,
              nq, nv, nu, nbody, init, ready, warned, widths, actions, leaves, final_leaves, reward, terminated, truncated,
              elapsed_step, episode_return, elapsed, returns, needs_reset, limit, mode):  # pragma: no cover
    """The part ring's loop (part_ring.py; as families/mujoco/kernels.run_parts): claim the
    oldest part posted and not yet claimed, step it (`step_fused`), mark it done, and again.
    A helper's loop (`end` < 0): until `spins` rounds found nothing to claim, or at once when
    told to stop with nothing left; False. The caller's (in `recv`): until parts first..end-1
    are stepped (True), or False after `spins` rounds of waiting for the helpers."""
    idle = 0
    flat = np.empty(widths.sum() + int(p[NWARNING]))  # scratch for every part this call steps
    while end < 0 or not part_ring.all_done(slots, first, end, num_slots):
        s = part_ring.claim(ctl)
        if s >= 0:
            idle = 0
            rows, pending = part_ring.part_rows(slots, ring_rows, ring_pending, s, num_slots)
            n = step_fused(kind, p, fns, model, noact, table, nq, nv, nu, nbody, init, ready, warned, widths, rows,
                           actions, leaves, final_leaves, pending, reward, terminated, truncated, elapsed_step,
                           episode_return, elapsed, returns, needs_reset, limit, mode, flat)
            part_ring.finish(slots, s, num_slots, n)
            continue
        if idle >= spins or (end < 0 and part_ring.load_acquire(ctl, part_ring.STOP)):
            return False
        idle += 1
        part_ring.pause()
    return True
