"""simple_tag_v3 (mpe2 1.1.1, `mpe2/simple_tag/simple_tag.py`) as a native family.

Adversaries (size 0.075, accel 3, max speed 1) chase good agents (size 0.05, accel 4, max
speed 1.3) among obstacles (size 0.2, fixed); everything collides. Each touch of a good agent
by an adversary gives every adversary +10 and that good agent -10; good agents also pay for
leaving the screen. Observation: own velocity and position, each obstacle's and each other
agent's position relative to its own, then the other good agents' velocities, so the good
agents' observations are shorter (zero-padded at the end here). Agents: adversaries first.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from seedpool.envs.families.mpe.family import MpeFamily, ScenarioKernels, unsupported
from seedpool.envs.families.mpe.kernels import distance, draw_world, observe_positions, world_step

ADVERSARY_SIZE, GOOD_SIZE, OBSTACLE_SIZE = 0.075, 0.05, 0.2
ADVERSARY_ACCEL, GOOD_ACCEL = 3.0, 4.0
ADVERSARY_MAX_SPEED, GOOD_MAX_SPEED = 1.0, 1.3
OBSTACLE_LOW, OBSTACLE_HIGH = -0.9, +0.9  # obstacles are placed uniformly in this square


@njit(cache=True, nogil=True, inline="always")
def _observe(pos, vel, i, k, num_adversaries, obs):  # pragma: no cover - compiled
    """Scenario.observation of every agent of env i, into obs[k] (zero-padded)."""
    num_agents = vel.shape[1]
    for j in range(num_agents):
        o = obs[k, j]
        c = observe_positions(pos, vel, i, j, o)
        for e in range(num_adversaries, num_agents):
            if e != j:
                o[c], o[c + 1] = vel[i, e, 0], vel[i, e, 1]
                c += 2
        for z in range(c, o.size):
            o[z] = 0.0


@njit(cache=True, nogil=True, inline="always")
def _bound(x):  # pragma: no cover - compiled
    """Scenario.agent_reward's penalty for a good agent at |coordinate| x."""
    if x < 0.9:
        return 0.0
    if x < 1.0:
        return (x - 0.9) * 10
    return min(math.exp(2 * x - 2), 10.0)


@njit(cache=True, nogil=True, inline="always")
def _rewards(pos, i, k, size, num_adversaries, reward):  # pragma: no cover - compiled
    """Scenario.reward of every agent of env i; returns whether every good agent is caught
    (Scenario.is_terminal's test)."""
    num_agents = reward.shape[1]
    touches = 0
    all_caught = True
    for g in range(num_adversaries, num_agents):
        own = 0.0
        for a in range(num_adversaries):
            if distance(pos, i, a, g) < size[a] + size[g]:
                own -= 10
                touches += 1
        all_caught = all_caught and own < 0.0
        for d in range(2):
            own -= _bound(abs(pos[i, g, d]))
        reward[k, g] = own
    for a in range(num_adversaries):
        reward[k, a] = 10.0 * touches
    return all_caught


@njit(cache=True, nogil=True)
def step(pos, vel, steps, rows, actions_d, actions_c, continuous, world, params, obs, reward,
         terminated):  # pragma: no cover - compiled
    """SimpleEnv's world step, rewards and termination for envs `rows`."""
    num_adversaries, terminate_on_success, max_cycles = params
    force = np.empty((vel.shape[1], 2))
    for k in range(rows.size):
        i = rows[k]
        world_step(pos, vel, i, k, actions_d, actions_c, continuous, world, force)
        steps[i] += 1
        caught = _rewards(pos, i, k, world[0], num_adversaries, reward)
        done = terminate_on_success and steps[i] < max_cycles and caught
        for j in range(reward.shape[1]):
            terminated[k, j] = done
        _observe(pos, vel, i, k, num_adversaries, obs)


@njit(cache=True, nogil=True)
def reset(pos, vel, steps, pcg, rows, params, obs):  # pragma: no cover - compiled
    """Scenario.reset_world for envs `rows`: agents uniform in [-1, 1)^2, obstacles in [-0.9, 0.9)^2."""
    for k in range(rows.size):
        i = rows[k]
        draw_world(pos, vel, pcg, i, vel.shape[1], OBSTACLE_LOW, OBSTACLE_HIGH - OBSTACLE_LOW)
        steps[i] = 0
        _observe(pos, vel, i, k, params[0], obs)


@njit(cache=True, nogil=True)
def observe(pos, vel, rows, params, obs):  # pragma: no cover - compiled
    """The observations of envs `rows`."""
    for k in range(rows.size):
        _observe(pos, vel, rows[k], k, params[0], obs)


class SimpleTag(MpeFamily):
    """mpe2's `simple_tag_v3.parallel_env`, `num_envs` at once (same arguments and defaults).

    `dynamic_rescaling` only changes mpe2's drawing, so it is accepted and has no effect here;
    rendering, benchmark data, the curriculum and partial observability are not implemented.
    """

    kernels = ScenarioKernels(step, reset, observe)

    def __init__(self, num_envs: int, num_good: int = 1, num_adversaries: int = 3, num_obstacles: int = 2,
                 max_cycles: int = 25, continuous_actions: bool = False, render_mode: str | None = None,
                 dynamic_rescaling: bool = True, benchmark_data: bool = False, curriculum: bool = False,
                 terminate_on_success: bool = False, num_agent_neighbors: int | None = None,
                 num_landmark_neighbors: int | None = None):
        unsupported(render_mode=render_mode, benchmark_data=benchmark_data, curriculum=curriculum,
                    num_agent_neighbors=num_agent_neighbors, num_landmark_neighbors=num_landmark_neighbors)
        self.num_good, self.num_adversaries, self.num_obstacles = num_good, num_adversaries, num_obstacles
        self.dynamic_rescaling = dynamic_rescaling
        num_agents = num_adversaries + num_good
        agents = [f"adversary_{i}" for i in range(num_adversaries)] + [f"agent_{i}" for i in range(num_good)]
        base = 4 + 2 * num_obstacles + 2 * (num_agents - 1)  # then the other good agents' velocities
        obs_dims = [base + 2 * num_good] * num_adversaries + [base + 2 * (num_good - 1)] * num_good
        adv, good = [True] * num_adversaries, [False] * num_good
        size = np.array([ADVERSARY_SIZE if a else GOOD_SIZE for a in adv + good] + [OBSTACLE_SIZE] * num_obstacles)
        world = (size, np.ones(num_agents + num_obstacles, np.bool_),
                 np.array([ADVERSARY_ACCEL if a else GOOD_ACCEL for a in adv + good]),
                 np.array([ADVERSARY_MAX_SPEED if a else GOOD_MAX_SPEED for a in adv + good]))
        params = (int(num_adversaries), bool(terminate_on_success), int(max_cycles))
        super().__init__(num_envs, agents, obs_dims, num_obstacles, world, params, max_cycles, continuous_actions)
        self.metadata["name"] = "simple_tag_v3"
