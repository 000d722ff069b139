"""simple_spread_v3 (mpe2 1.1.1, `mpe2/simple_spread/simple_spread.py`) as a native family.

N agents (size 0.15, colliding) and N landmarks (not colliding). Every agent gets the
shared reward, minus the distance from each landmark to its nearest agent, weighted
1 - local_ratio, plus its own, -1 per other agent it touches, weighted local_ratio.
Observation: own velocity and position, each landmark's and each other agent's position
relative to its own, then the others' communication (always zero: the agents are silent).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from seedpool.envs.families.mpe.family import MpeFamily, ScenarioKernels, unsupported
from seedpool.envs.families.mpe.kernels import distance, draw_world, observe_positions, world_step

AGENT_SIZE = 0.15
LANDMARK_SIZE = 0.05  # mpe2's Entity default; landmarks here do not collide
CAPTURE_RADIUS = 0.1  # a landmark is covered by an agent this close (terminate_on_success)


@njit(cache=True, nogil=True, inline="always")
def _observe(pos, vel, i, k, obs):  # pragma: no cover - compiled
    """Scenario.observation of every agent of env i, into obs[k]."""
    for j in range(vel.shape[1]):
        o = obs[k, j]
        c = observe_positions(pos, vel, i, j, o)
        for z in range(c, o.size):  # the other agents' communication states: zeros
            o[z] = 0.0


@njit(cache=True, nogil=True, inline="always")
def _rewards(pos, i, k, size, global_weight, local_weight, reward):  # pragma: no cover - compiled
    """SimpleEnv's blend of Scenario.global_reward and Scenario.reward for env i; returns
    whether every landmark is covered (Scenario.is_terminal's test)."""
    num_agents = reward.shape[1]
    shared = 0.0
    covered = True
    for e in range(num_agents, pos.shape[1]):
        nearest = distance(pos, i, 0, e)
        for a in range(1, num_agents):
            nearest = min(nearest, distance(pos, i, a, e))
        shared -= nearest
        covered = covered and nearest < CAPTURE_RADIUS
    for j in range(num_agents):
        own = 0.0
        for a in range(num_agents):
            if a != j and distance(pos, i, a, j) < size[a] + size[j]:
                own -= 1.0
        reward[k, j] = shared * global_weight + own * local_weight
    return covered


@njit(cache=True, nogil=True)
def step(pos, vel, steps, rows, actions_d, actions_c, continuous, world, params, obs, reward,
         terminated):  # pragma: no cover - compiled
    """SimpleEnv's world step, rewards and termination for envs `rows`."""
    global_weight, local_weight, terminate_on_success, max_cycles = params
    force = np.empty((vel.shape[1], 2))
    for k in range(rows.size):
        i = rows[k]
        world_step(pos, vel, i, k, actions_d, actions_c, continuous, world, force)
        steps[i] += 1
        covered = _rewards(pos, i, k, world[0], global_weight, local_weight, reward)
        done = terminate_on_success and steps[i] < max_cycles and covered
        for j in range(reward.shape[1]):
            terminated[k, j] = done
        _observe(pos, vel, i, k, obs)


@njit(cache=True, nogil=True)
def reset(pos, vel, steps, pcg, rows, params, obs):  # pragma: no cover - compiled
    """Scenario.reset_world for envs `rows`: positions uniform in [-1, 1)^2, agents first."""
    for k in range(rows.size):
        i = rows[k]
        draw_world(pos, vel, pcg, i, vel.shape[1], -1.0, 2.0)
        steps[i] = 0
        _observe(pos, vel, i, k, obs)


@njit(cache=True, nogil=True)
def observe(pos, vel, rows, params, obs):  # pragma: no cover - compiled
    """The observations of envs `rows`."""
    for k in range(rows.size):
        _observe(pos, vel, rows[k], k, obs)


class SimpleSpread(MpeFamily):
    """mpe2's `simple_spread_v3.parallel_env`, `num_envs` at once (same arguments and defaults).

    `dynamic_rescaling` only changes mpe2's drawing, so it is accepted and has no effect here;
    rendering, benchmark data, the curriculum and partial observability are not implemented.
    """

    kernels = ScenarioKernels(step, reset, observe)

    def __init__(self, num_envs: int, N: int = 3, local_ratio: float = 0.5, max_cycles: int = 25,
                 continuous_actions: bool = False, render_mode: str | None = None, dynamic_rescaling: bool = True,
                 benchmark_data: bool = False, curriculum: bool = False, terminate_on_success: bool = False,
                 num_agent_neighbors: int | None = None, num_landmark_neighbors: int | None = None):
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio is a proportion, in [0, 1]; got {local_ratio}")
        unsupported(render_mode=render_mode, benchmark_data=benchmark_data, curriculum=curriculum,
                    num_agent_neighbors=num_agent_neighbors, num_landmark_neighbors=num_landmark_neighbors)
        self.N, self.local_ratio, self.dynamic_rescaling = N, local_ratio, dynamic_rescaling
        obs_dim = 4 + 2 * N + 4 * (N - 1)  # positions of N landmarks, of N - 1 agents, and their comms
        world = (np.array([AGENT_SIZE] * N + [LANDMARK_SIZE] * N), np.array([True] * N + [False] * N),
                 np.full(N, 5.0), np.full(N, np.inf))  # accel None: mpe2's sensitivity 5; no max speed
        params = (float(1 - local_ratio), float(local_ratio), bool(terminate_on_success), int(max_cycles))
        super().__init__(num_envs, [f"agent_{i}" for i in range(N)], [obs_dim] * N, N, world, params,
                         max_cycles, continuous_actions)
        self.metadata["name"] = "simple_spread_v3"
