"""The compiled step of the native MuJoCo families: for each env of a batch, its controls,
MuJoCo's `mj_step` (the task's frame skip; Ant and Humanoid also `mj_rnePostConstraint`), its observation,
reward and termination, and the engine's bookkeeping, in one numba call without the GIL; for
the tasks whose reset noise is uniform, the resets of the envs it ends too (`_reset_env`).

MuJoCo's C functions are called from numba through their addresses in the `libmujoco` that
the `mujoco` package loaded (`c_functions`), on each env's own `MjData` (its address and
those of the fields read here, one row per env: `DATA`, `QPOS`, ...), so the physics is the
calls gymnasium makes, on the same model and data, byte for byte. Observations and rewards
follow gymnasium's `*_v5.py` expression for expression, in its precisions: the control cost
in float32 (from the float32 action, summed in NumPy's pairwise order; Humanoid's in float64
from `data.ctrl`), everything else in float64 (tests/test_native_mujoco.py compares with no
tolerance).

One kernel serves the eight families (`kind`), their constants in a float64 vector (`p`,
indexed by the names below). A fatal MuJoCo error inside `mj_step` (`mju_error`, e.g. its
arena exhausted) cannot become a Python exception from here: the gymnasium tasks stepped
here do not raise one with their default models.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from seedpool.envs.native import bookkeeping, part_ring, pcg64

# The families, as the kernel tells them apart.
HALF_CHEETAH, HOPPER, WALKER2D, ANT, HUMANOID, SWIMMER, INVERTED_PENDULUM, HUMANOID_STANDUP = range(8)
# Entries of a family's constants `p` (Humanoid's body masses follow them, from `PARAMS` on).
(FORWARD, CTRL_COST, HEALTHY_REWARD, TERMINATE, Z_LO, Z_HI, ANGLE_LO, ANGLE_HI, STATE_LO, STATE_HI,
 CONTACT_COST, FORCE_LO, FORCE_HI, DT, MAIN_BODY, CONTACT_LO, CONTACT_HI, MASS, TIMESTEP, RESET_HERE, NOISE,
 RESET_AT, PARAMS) = range(23)
# RESET_HERE: 1.0 where the kernels reset ended envs themselves (uniform reset noise, drawn from
# each env's PCG64 state in `pcg`), 0.0 where they leave them to Python; NOISE: the reset noise
# scale; RESET_AT: where in `p` the initial qpos (nq values), then qvel (nv), begin.
# Columns of the address table (a row per env): its MjData and the arrays read or written here.
DATA, QPOS, QVEL, CTRL, XPOS, CFRC_EXT, CINERT, CVEL, QFRC_ACTUATOR, XIPOS, ADDRESSES = range(11)
# Entries of `fns`: the addresses of MuJoCo's functions.
MJ_STEP, MJ_RNE_POST_CONSTRAINT, MJ_RESET_DATA, MJ_FORWARD = range(4)

_LIBRARY: list[ctypes.CDLL] = []  # kept loaded while the addresses are in use


def c_functions(names: tuple[str, ...] = ("mj_step", "mj_rnePostConstraint", "mj_resetData", "mj_forward")
                ) -> np.ndarray:
    """The addresses of MuJoCo's functions `names` (uint64; by default `mj_step`,
    `mj_rnePostConstraint`, `mj_resetData` and `mj_forward`, indexed by `MJ_STEP`, ...) in the
    libmujoco of the `mujoco` package; ImportError where there is none to load."""
    import mujoco

    if not hasattr(mujoco.MjData, "_address"):
        raise ImportError(f"the native MuJoCo families need MjData._address, which mujoco {mujoco.__version__} lacks")
    if not _LIBRARY:
        folder = os.path.dirname(mujoco.__file__)
        found = sorted(glob.glob(os.path.join(folder, "libmujoco.so*")) + glob.glob(os.path.join(folder, "libmujoco*.dylib"))
                       + glob.glob(os.path.join(folder, "mujoco.dll")))
        if not found:
            raise ImportError(f"the native MuJoCo families call MuJoCo's C library, and mujoco {mujoco.__version__} "
                              f"has none in {folder}")
        _LIBRARY.append(ctypes.CDLL(found[0]))
    lib = _LIBRARY[0]
    return np.array([ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                     for name in names], np.uint64)


def addresses(datas: list) -> np.ndarray:
    """The address table of `datas` (one `MjData` per env): a uint64 row per env."""
    table = np.zeros((len(datas), ADDRESSES), np.uint64)
    for i, d in enumerate(datas):
        table[i] = (d._address, d.qpos.ctypes.data, d.qvel.ctypes.data, d.ctrl.ctypes.data, d.xpos.ctypes.data,
                    d.cfrc_ext.ctypes.data, d.cinert.ctypes.data, d.cvel.ctypes.data, d.qfrc_actuator.ctypes.data,
                    d.xipos.ctypes.data)
    return table


def typed_pointer(item: types.Type):
    """A compiled cast of a uint64 address to a pointer to ``item`` values (for `carray`)."""

    @intrinsic
    def pointer(typingctx, address):
        sig = types.CPointer(item)(types.uint64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(item)))

        return sig, codegen

    return pointer


_f64 = typed_pointer(types.float64)


@intrinsic
def _call(typingctx, fn, model, data):
    """`fn(model, data)`, the C function at address `fn` taking (const mjModel*, mjData*)."""
    sig = types.void(types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        import llvmlite.ir as ir

        ptr = ir.IntType(8).as_pointer()
        target = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [ptr, ptr]).as_pointer())
        builder.call(target, [builder.inttoptr(args[1], ptr), builder.inttoptr(args[2], ptr)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _pairwise_sum(x, n):  # pragma: no cover - compiled
    """`np.sum(x[:n])` in NumPy's order and in x's precision: one running sum below 8 terms,
    else 8 interleaved partial sums combined pairwise, then the rest (n <= 128)."""
    if n < 8:  # NumPy adds the terms to -0.0, which leaves the first term as it is (n >= 1 here)
        total = x[0]
        for j in range(1, n):
            total += x[j]
        return total
    r0, r1, r2, r3, r4, r5, r6, r7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    j = 8
    while j < n - n % 8:
        r0 += x[j]
        r1 += x[j + 1]
        r2 += x[j + 2]
        r3 += x[j + 3]
        r4 += x[j + 4]
        r5 += x[j + 5]
        r6 += x[j + 6]
        r7 += x[j + 7]
        j += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while j < n:
        total += x[j]
        j += 1
    return total


@njit(cache=True, nogil=True, inline="always")
def _clip(v, lo, hi):  # pragma: no cover - compiled
    """np.clip of one value (NaN stays NaN)."""
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@njit(cache=True, nogil=True)
def _observe(kind, p, a, nq, nv, nbody, out):  # pragma: no cover - compiled
    """gymnasium's `_get_obs` (default options) of the env whose addresses are `a`, into `out`."""
    qpos = carray(_f64(a[QPOS]), nq)
    qvel = carray(_f64(a[QVEL]), nv)
    # the root's x (Ant, the humanoids, Swimmer: x and y) is left out; InvertedPendulum keeps all
    skip = 0 if kind == INVERTED_PENDULUM else 2 if kind == ANT or kind == SWIMMER or _humanoid(kind) else 1
    for j in range(nq - skip):
        out[j] = qpos[j + skip]
    at = nq - skip
    if kind == HOPPER or kind == WALKER2D:
        for j in range(nv):
            out[at + j] = _clip(qvel[j], -10.0, 10.0)
    else:
        for j in range(nv):
            out[at + j] = qvel[j]
    if kind == ANT:  # the clipped contact forces of every body but the world
        at += nv
        forces = carray(_f64(a[CFRC_EXT]), nbody * 6)
        for j in range(6, nbody * 6):
            out[at + j - 6] = _clip(forces[j], p[FORCE_LO], p[FORCE_HI])
    if _humanoid(kind):  # every body's but the world's inertia, velocity and contact forces; the joints' actuator forces
        at += nv
        at = _copy_from(out, at, carray(_f64(a[CINERT]), nbody * 10), 10)
        at = _copy_from(out, at, carray(_f64(a[CVEL]), nbody * 6), 6)
        at = _copy_from(out, at, carray(_f64(a[QFRC_ACTUATOR]), nv), 6)
        _copy_from(out, at, carray(_f64(a[CFRC_EXT]), nbody * 6), 6)


@njit(cache=True, nogil=True, inline="always")
def _humanoid(kind):  # pragma: no cover - compiled
    """Humanoid and HumanoidStandup: the same body, observation and costs."""
    return kind == HUMANOID or kind == HUMANOID_STANDUP


@njit(cache=True, nogil=True, inline="always")
def _copy_from(out, at, x, start):  # pragma: no cover - compiled
    """`x[start:]` into `out` from `at` on; the next free place."""
    for j in range(start, x.size):
        out[at + j - start] = x[j]
    return at + x.size - start


@njit(cache=True, nogil=True, inline="always")
def _mass_center_x(p, a, nbody):  # pragma: no cover - compiled
    """gymnasium's `mass_center(...)[0]`: the bodies' `xipos` x weighted by their masses (einsum's
    order: body after body), over the total mass (`MASS`, NumPy's sum, set once)."""
    xipos = carray(_f64(a[XIPOS]), nbody * 3)
    total = 0.0
    for b in range(nbody):
        total += p[PARAMS + b] * xipos[3 * b]
    return total / p[MASS]


@njit(cache=True, nogil=True)
def _step_env(kind, p, fns, model, a, nq, nv, nu, nbody, frame_skip, act, out, squares, forces):  # pragma: no cover
    """gymnasium's `step` of one env (addresses `a`) with action `act`: the physics, then its
    observation into `out`; returns (reward, terminated). `squares` (float32, nu) and
    `forces` (float64, Ant: nbody * 6) are scratch."""
    qpos = carray(_f64(a[QPOS]), nq)
    qvel = carray(_f64(a[QVEL]), nv)
    xpos = carray(_f64(a[XPOS]), nbody * 3)
    at = 3 * int(p[MAIN_BODY])  # Ant: its main body's x in xpos
    before = xpos[at] if kind == ANT else _mass_center_x(p, a, nbody) if kind == HUMANOID else qpos[0]
    ctrl = carray(_f64(a[CTRL]), nu)
    for j in range(nu):
        ctrl[j] = act[j]
    for _ in range(frame_skip):
        _call(fns[MJ_STEP], model, a[DATA])
    if kind == ANT or _humanoid(kind):  # cfrc_ext, which they read (gymnasium calls it for all)
        _call(fns[MJ_RNE_POST_CONSTRAINT], model, a[DATA])
    after = xpos[at] if kind == ANT else _mass_center_x(p, a, nbody) if kind == HUMANOID else qpos[0]
    velocity = (after - before) / p[DT]
    if _humanoid(kind):
        _observe(kind, p, a, nq, nv, nbody, out)
        ctrl_cost, contact_cost = _humanoid_costs(p, a, ctrl, nu, nbody, forces)
        if kind == HUMANOID_STANDUP:  # the torso's height over the physics step, no termination
            return (qpos[2] - 0) / p[TIMESTEP] - ctrl_cost - contact_cost + 1, False
        healthy = p[Z_LO] < qpos[2] < p[Z_HI]
        rewards = p[FORWARD] * velocity + (p[HEALTHY_REWARD] if healthy else 0.0)
        return rewards - (ctrl_cost + contact_cost), not healthy and p[TERMINATE] != 0.0
    for j in range(nu):
        squares[j] = act[j] * act[j]
    ctrl_cost = np.float32(p[CTRL_COST]) * _pairwise_sum(squares, nu)  # float32, as gymnasium's
    _observe(kind, p, a, nq, nv, nbody, out)
    if kind == HALF_CHEETAH or kind == SWIMMER:
        return p[FORWARD] * velocity - ctrl_cost, False
    if kind == INVERTED_PENDULUM:  # 1 a step while the pole stays up (and the state finite)
        ended = abs(out[1]) > 0.2
        for j in range(nq + nv):
            ended = ended or not np.isfinite(out[j])
        return (0.0 if ended else 1.0), ended
    if kind == ANT:
        healthy = p[Z_LO] <= qpos[2] <= p[Z_HI]
        for j in range(nq):
            healthy = healthy and np.isfinite(qpos[j])
        for j in range(nv):
            healthy = healthy and np.isfinite(qvel[j])
        cfrc = carray(_f64(a[CFRC_EXT]), nbody * 6)
        for j in range(nbody * 6):
            f = _clip(cfrc[j], p[FORCE_LO], p[FORCE_HI])
            forces[j] = f * f
        contact_cost = p[CONTACT_COST] * _pairwise_sum(forces, nbody * 6)
        rewards = velocity * p[FORWARD] + (p[HEALTHY_REWARD] if healthy else 0.0)
        return rewards - (ctrl_cost + contact_cost), not healthy and p[TERMINATE] != 0.0
    # Hopper, Walker2d: healthy while z and the torso angle (Hopper: every other state too) stay in range
    healthy = p[Z_LO] < qpos[1] < p[Z_HI] and p[ANGLE_LO] < qpos[2] < p[ANGLE_HI]
    if kind == HOPPER:
        for j in range(2, nq):
            healthy = healthy and p[STATE_LO] < qpos[j] < p[STATE_HI]
        for j in range(nv):
            healthy = healthy and p[STATE_LO] < qvel[j] < p[STATE_HI]
    rewards = p[FORWARD] * velocity + (p[HEALTHY_REWARD] if healthy else 0.0)
    return rewards - ctrl_cost, not healthy and p[TERMINATE] != 0.0


@njit(cache=True, nogil=True, inline="always")
def _humanoid_costs(p, a, ctrl, nu, nbody, squares):  # pragma: no cover - compiled
    """Humanoid's and HumanoidStandup's control cost (of `data.ctrl`, float64) and contact cost
    (of every body's `cfrc_ext`, clipped as a whole). `squares`: float64 scratch of nbody * 6."""
    for j in range(nu):
        squares[j] = ctrl[j] * ctrl[j]
    ctrl_cost = p[CTRL_COST] * _pairwise_sum(squares, nu)
    cfrc = carray(_f64(a[CFRC_EXT]), nbody * 6)
    for j in range(nbody * 6):
        squares[j] = cfrc[j] * cfrc[j]
    contact_cost = _clip(p[CONTACT_COST] * _pairwise_sum(squares, nbody * 6), p[CONTACT_LO], p[CONTACT_HI])
    return ctrl_cost, contact_cost


@njit(cache=True, nogil=True)
def _reset_env(p, fns, model, a, nq, nv, pcg, i):  # pragma: no cover - compiled
    """gymnasium's reset of env i (address row `a`) with uniform noise: `mj_resetData`, then
    `set_state(init_qpos + uniform(-noise, noise, nq), init_qvel + uniform(-noise, noise, nv))`,
    the draws from env i's PCG64 state as its `np_random.uniform` makes them, then `mj_forward`."""
    _call(fns[MJ_RESET_DATA], model, a[DATA])
    low = -p[NOISE]
    span = p[NOISE] - low  # NumPy's uniform: low + (high - low) * next_double
    at = int(p[RESET_AT])
    qpos, qvel = carray(_f64(a[QPOS]), nq), carray(_f64(a[QVEL]), nv)
    for j in range(nq):
        qpos[j] = p[at + j] + (low + span * pcg64.next_double(pcg, i))
    for j in range(nv):
        qvel[j] = p[at + nq + j] + (low + span * pcg64.next_double(pcg, i))
    _call(fns[MJ_FORWARD], model, a[DATA])


@njit(cache=True, nogil=True)
def reset_rows(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, out):  # pragma: no cover
    """Reset envs `rows` (`_reset_env`) and write their observations into `out`'s rows k."""
    for k in range(rows.size):
        a = table[rows[k]]
        _reset_env(p, fns, model, a, nq, nv, pcg, rows[k])
        _observe(kind, p, a, nq, nv, nbody, out[k])


@njit(cache=True, nogil=True)
def observe(kind, p, table, nq, nv, nbody, rows, out):  # pragma: no cover - compiled
    """The observations of envs `rows` (after a reset), into `out`'s rows k."""
    for k in range(rows.size):
        _observe(kind, p, table[rows[k]], nq, nv, nbody, out[k])


@njit(cache=True, nogil=True)
def step_rows(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, actions, obs, reward,
              terminated):  # pragma: no cover - compiled
    """Step envs `rows` with `actions` (row k for env rows[k]); their results into row k of
    `obs`, `reward` and `terminated` (the family's `step`)."""
    squares = np.empty(nu, np.float32)
    forces = np.empty(nbody * 6)
    for k in range(rows.size):
        r, term = _step_env(kind, p, fns, model, table[rows[k]], nq, nv, nu, nbody, frame_skip, actions[k], obs[k],
                            squares, forces)
        reward[k] = r
        terminated[k] = term


@njit(cache=True, nogil=True)
def step_fused(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, actions, obs, final_obs,
               pending, reward, terminated, truncated, elapsed_step, episode_return, elapsed, returns, needs_reset,
               limit, mode):  # pragma: no cover - compiled
    """Step envs `rows` with their rows of the pool's `actions`, writing their rows of `obs`
    and the engine's bookkeeping (the arguments from `reward` on are a `Book`'s fields). The
    envs to reset (marked `needs_reset`, not stepped; or, same_step autoreset, ended now, their
    final observation copied) are reset here where `p[RESET_HERE]` says so (uniform noise from
    `pcg`); otherwise they go into `pending`, their number returned, and the caller resets them
    (a normal draw is NumPy's ziggurat: the env's NumPy generator makes it)."""
    return _step_fused(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, actions, obs, final_obs,
                       pending, reward, terminated, truncated, elapsed_step, episode_return, elapsed, returns,
                       needs_reset, limit, mode, np.empty(nu, np.float32), np.empty(nbody * 6))


@njit(cache=True, nogil=True)
def _step_fused(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, actions, obs, final_obs,
                pending, reward, terminated, truncated, elapsed_step, episode_return, elapsed, returns, needs_reset,
                limit, mode, squares, forces):  # pragma: no cover - compiled
    """`step_fused` with its scratch (`_step_env`'s) given: the ring's loop allocates it once."""
    n_pending = 0
    reset_here = p[RESET_HERE] != 0.0
    for k in range(rows.size):
        i = rows[k]
        keep_row = False  # a marked env is not stepped: its row reports the reset
        if not needs_reset[i]:
            r, term = _step_env(kind, p, fns, model, table[i], nq, nv, nu, nbody, frame_skip, actions[i], obs[i],
                                squares, forces)
            if not bookkeeping.end_step(i, r, term, reward, terminated, truncated, elapsed_step, episode_return,
                                        elapsed, returns, needs_reset, limit, mode):
                continue
            for j in range(obs.shape[1]):  # same_step autoreset: the row keeps reporting the end
                final_obs[i, j] = obs[i, j]
            keep_row = True
        if reset_here:
            _reset_env(p, fns, model, table[i], nq, nv, pcg, i)
            _observe(kind, p, table[i], nq, nv, nbody, obs[i])
            bookkeeping.started(i, keep_row, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                                returns, needs_reset)
        else:
            pending[n_pending] = i
            n_pending += 1
    return n_pending


# -- the part ring's loops (part_ring.py): a helper's, and the caller's in `recv` -----------

@njit(cache=True, nogil=True)
def run_parts(ctl, slots, ring_rows, ring_pending, num_slots, first, end, spins, kind, p, fns, model, table, nq, nv,
              nu, nbody, frame_skip, pcg, actions, obs, final_obs, reward, terminated, truncated, elapsed_step,
              episode_return, elapsed, returns, needs_reset, limit, mode):  # pragma: no cover - compiled
    """Claim the oldest part posted and not yet claimed, step it (`step_fused`), mark it done,
    and again. A helper's loop (`end` < 0): until `spins` rounds found nothing to claim, or at
    once when told to stop with nothing left; False. The caller's (in `recv`): until parts
    first..end-1 are stepped (True), or False after `spins` rounds of waiting for the helpers."""
    idle = 0
    squares, forces = np.empty(nu, np.float32), np.empty(nbody * 6)  # scratch for every part this call steps
    while end < 0 or not part_ring.all_done(slots, first, end, num_slots):
        s = part_ring.claim(ctl)
        if s >= 0:
            idle = 0
            rows, pending = part_ring.part_rows(slots, ring_rows, ring_pending, s, num_slots)
            n = _step_fused(kind, p, fns, model, table, nq, nv, nu, nbody, frame_skip, pcg, rows, actions, obs,
                            final_obs, pending, reward, terminated, truncated, elapsed_step, episode_return, elapsed,
                            returns, needs_reset, limit, mode, squares, forces)
            part_ring.finish(slots, s, num_slots, n)
            continue
        if idle >= spins or (end < 0 and part_ring.load_acquire(ctl, part_ring.STOP)):
            return False
        idle += 1
        part_ring.pause()
    return True
