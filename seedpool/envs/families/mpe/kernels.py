"""Compiled steps of the MPE families: mpe2's physics and scenarios on arrays, every env in one call.

Each env's world lives in a row of two float64 arrays: `pos [num_envs, E, 2]` (the agents,
then the landmarks, mpe2's `world.entities` order) and `vel [num_envs, A, 2]` (only the agents
move). The kernels follow mpe2 1.1.1 (`_mpe_utils/core.py`, `simple_env.py` and the scenario
modules) operation for operation in float64, in the same order, so that the rounding is the
same; `math.exp` / `math.log1p` are the C library's, as are those behind NumPy's `logaddexp`.
The one NumPy call they cannot repeat bit for bit is simple_tag's `np.exp` in the boundary
penalty (NumPy's own vectorised exp, which can round the last float64 bit differently); it
reaches only that reward, never the state.
"""

from __future__ import annotations

import math

from numba import njit

from seedpool.envs.native import pcg64

# mpe2's World defaults (core.py), which both tasks keep.
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
LOGE2 = math.log(2.0)  # NumPy's NPY_LOGE2, the value logaddexp(x, x) adds
KEEP = 1 - DAMPING  # the fraction of velocity a step keeps, as mpe2 computes it


@njit(cache=True, nogil=True, inline="always")
def _logaddexp0(y):  # pragma: no cover - compiled
    """np.logaddexp(0, y), as NumPy's npy_logaddexp computes it."""
    if y == 0.0:
        return LOGE2
    tmp = 0.0 - y
    if tmp > 0:
        return 0.0 + math.log1p(math.exp(-tmp))
    return y + math.log1p(math.exp(tmp))


@njit(cache=True, nogil=True, inline="always")
def _action_force(force, k, j, actions_d, actions_c, continuous, sensitivity):  # pragma: no cover - compiled
    """Agent j's control force (SimpleEnv._set_action, then `u + noise` with no noise).
    Continuous actions subtract in their own dtype, as mpe2 does with the array it is given."""
    ux = 0.0
    uy = 0.0
    if continuous:
        ux += actions_c[k, j, 2] - actions_c[k, j, 1]
        uy += actions_c[k, j, 4] - actions_c[k, j, 3]
    else:
        a = actions_d[k, j]
        if a == 1:
            ux = -1.0
        if a == 2:
            ux = +1.0
        if a == 3:
            uy = -1.0
        if a == 4:
            uy = +1.0
    force[j, 0] = ux * sensitivity[j] + 0.0
    force[j, 1] = uy * sensitivity[j] + 0.0


@njit(cache=True, nogil=True, inline="always")
def _contacts(pos, i, force, size, collide, num_agents):  # pragma: no cover - compiled
    """World.apply_environment_force: the soft contact force of every colliding pair a < b,
    added to the agents in mpe2's pair order (landmarks never move, so pairs of two landmarks
    are skipped)."""
    for a in range(num_agents):
        if not collide[a]:
            continue
        for b in range(a + 1, size.size):
            if not collide[b]:
                continue
            dx = pos[i, a, 0] - pos[i, b, 0]
            dy = pos[i, a, 1] - pos[i, b, 1]
            dist = math.sqrt(dx * dx + dy * dy)
            penetration = _logaddexp0(-(dist - (size[a] + size[b])) / CONTACT_MARGIN) * CONTACT_MARGIN
            fx = CONTACT_FORCE * dx / dist * penetration
            fy = CONTACT_FORCE * dy / dist * penetration
            force[a, 0] = fx + force[a, 0]
            force[a, 1] = fy + force[a, 1]
            if b < num_agents:
                force[b, 0] = -fx + force[b, 0]
                force[b, 1] = -fy + force[b, 1]


@njit(cache=True, nogil=True, inline="always")
def _integrate(pos, vel, i, force, max_speed, num_agents):  # pragma: no cover - compiled
    """World.integrate_state for the agents (mass 1, so force / mass is the force)."""
    for j in range(num_agents):
        for d in range(2):
            pos[i, j, d] += vel[i, j, d] * DT
            vel[i, j, d] = vel[i, j, d] * KEEP
            vel[i, j, d] += force[j, d] * DT
        vx, vy = vel[i, j, 0], vel[i, j, 1]
        speed = math.sqrt(vx * vx + vy * vy)
        if speed > max_speed[j]:  # inf where mpe2's max_speed is None
            vel[i, j, 0] = vx / math.sqrt(vx * vx + vy * vy) * max_speed[j]
            vel[i, j, 1] = vy / math.sqrt(vx * vx + vy * vy) * max_speed[j]


@njit(cache=True, nogil=True, inline="always")
def world_step(pos, vel, i, k, actions_d, actions_c, continuous, world, force):  # pragma: no cover - compiled
    """One World.step of env i with the k-th rows of the actions. `world`: (size, collide,
    sensitivity, max_speed) per entity / agent; `force`: scratch [A, 2]."""
    size, collide, sensitivity, max_speed = world
    num_agents = sensitivity.size
    for j in range(num_agents):
        _action_force(force, k, j, actions_d, actions_c, continuous, sensitivity)
    _contacts(pos, i, force, size, collide, num_agents)
    _integrate(pos, vel, i, force, max_speed, num_agents)


@njit(cache=True, nogil=True, inline="always")
def observe_positions(pos, vel, i, j, o):  # pragma: no cover - compiled
    """What every MPE scenario's observation of agent j of env i starts with: its velocity and
    position, then each landmark's and each other agent's position relative to it; returns
    the next free column of `o`."""
    num_agents, num_entities = vel.shape[1], pos.shape[1]
    o[0], o[1], o[2], o[3] = vel[i, j, 0], vel[i, j, 1], pos[i, j, 0], pos[i, j, 1]
    c = 4
    for e in range(num_agents, num_entities):
        o[c], o[c + 1] = pos[i, e, 0] - pos[i, j, 0], pos[i, e, 1] - pos[i, j, 1]
        c += 2
    for e in range(num_agents):
        if e != j:
            o[c], o[c + 1] = pos[i, e, 0] - pos[i, j, 0], pos[i, e, 1] - pos[i, j, 1]
            c += 2
    return c


@njit(cache=True, nogil=True, inline="always")
def distance(pos, i, a, b):  # pragma: no cover - compiled
    """|p_a - p_b| in env i, as mpe2's np.sqrt(np.sum(np.square(delta)))."""
    dx = pos[i, a, 0] - pos[i, b, 0]
    dy = pos[i, a, 1] - pos[i, b, 1]
    return math.sqrt(dx * dx + dy * dy)


@njit(cache=True, nogil=True, inline="always")
def draw_world(pos, vel, pcg, i, num_agents, landmark_low, landmark_range):  # pragma: no cover - compiled
    """Env i's reset_world: each agent's position uniform in [-1, 1)^2, then each landmark's
    in [low, low + range)^2, from its PCG64 in that order (Generator.uniform: low + range * u)."""
    for j in range(num_agents):
        for d in range(2):
            pos[i, j, d] = -1.0 + 2.0 * pcg64.next_double(pcg, i)
            vel[i, j, d] = 0.0
    for e in range(num_agents, pos.shape[1]):
        for d in range(2):
            pos[i, e, d] = landmark_low + landmark_range * pcg64.next_double(pcg, i)
