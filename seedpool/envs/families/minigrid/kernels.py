"""The batch loops of native MiniGrid: reset, step and the fused step of a batch's rows.

One env's state is its row of each array of `World` (family.py): `grid [N, W, H, 3]` uint8,
`agent [N, 3]` (x, y, direction), `carry [N, 3]` (an encoding, type 0: nothing), `steps [N]`
(MiniGrid's `step_count`), `target [N, 2]`, `poss [N, P, 2]` and `npos [N]` (GoToLocal's
object to reach and the cells it is on), `states [N, 6]` (rng.py) and `missions [N, M]`.
Observations go to three arrays, the leaves of EnvPool's Dict: `direction [n]` int32,
`image [n, V, V, 3]` and `mission [n, M]` uint8.

A step is `MiniGridEnv.step` and, for GoToLocal, `RoomGridLevel.step` (the positions of the
target are found again after a drop, then the agent succeeds when it faces one), with
EnvPool's rule for the time limit: the step that reaches `max_steps` is a truncation, even
where the agent reached the goal on it (its reward is kept).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from seedpool.envs.families.minigrid import grid as g
from seedpool.envs.families.minigrid import levels as lv
from seedpool.envs.native.bookkeeping import SAME_STEP, end_step, started


@njit(cache=True, nogil=True)
def reset_one(i, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, reach):  # pragma: no cover
    """A new episode in env i: the level's `_gen_grid`, nothing carried, no steps."""
    level = cfg[lv.LEVEL]
    if level == lv.EMPTY_LEVEL:
        lv.gen_empty(grid[i], states, i, agent[i], cfg)
    elif level == lv.DOORKEY_LEVEL:
        lv.gen_doorkey(grid[i], states, i, agent[i])
    else:
        lv.gen_goto_local(grid[i], states, i, agent[i], cfg, target[i], reach)
        npos[i] = lv.find_targets(grid[i], target[i], poss[i])
        lv.goto_mission(missions[i], target[i], npos[i] > 1)
    carry[i, 0], carry[i, 1], carry[i, 2] = g.UNSEEN, 0, 0
    steps[i] = 0


@njit(cache=True, nogil=True)
def step_one(i, a, cfg, max_steps, grid, agent, carry, steps, target, poss, npos):  # pragma: no cover
    """Env i acts `a`: (reward, terminated)."""
    steps[i] += 1
    onto = g.act(grid[i], agent[i], carry[i], a)
    reward = 0.0
    terminated = False
    success = onto == g.GOAL
    if onto == g.LAVA:
        terminated = True
    if cfg[lv.LEVEL] == lv.GOTO_LOCAL_LEVEL:
        if a == g.DROP:  # update_objs_poss
            npos[i] = lv.find_targets(grid[i], target[i], poss[i])
        d = agent[i, 2]
        fx, fy = agent[i, 0] + g.DIR_X[d], agent[i, 1] + g.DIR_Y[d]
        for k in range(npos[i]):  # GoToInstr.verify_action: facing a target's cell
            if poss[i, k, 0] == fx and poss[i, k, 1] == fy:
                success = True
                break
    if success:
        terminated = True
        reward = 1.0 - 0.9 * (steps[i] / max_steps)
    if steps[i] >= max_steps:  # EnvPool: the time limit's step is a truncation (the engine's)
        terminated = False
    return reward, terminated


@njit(cache=True, nogil=True)
def write_obs(i, k, cfg, grid, agent, carry, missions, direction, image, mission, with_mission, cells,
              mask):  # pragma: no cover
    """Env i's observation into row k of the three arrays (its mission only `with_mission`:
    it does not change within an episode)."""
    view = image.shape[1]
    direction[k] = agent[i, 2]
    g.observe(grid[i], agent[i, 0], agent[i, 1], agent[i, 2], carry[i], cfg[lv.SEE_THROUGH] != 0, view, cells,
              mask, image[k])
    if with_mission:
        mission[k, :] = missions[i]


@njit(cache=True, nogil=True)
def reset_rows(rows, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, direction, image,
               mission):  # pragma: no cover - compiled
    """Reset envs `rows`; the k-th's observation into row k."""
    cells, mask, reach = _scratch(grid, image)
    for k in range(rows.size):
        i = rows[k]
        reset_one(i, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, reach)
        write_obs(i, k, cfg, grid, agent, carry, missions, direction, image, mission, True, cells, mask)


@njit(cache=True, nogil=True)
def step_rows(rows, actions, cfg, max_steps, grid, agent, carry, steps, target, poss, npos, missions, direction,
              image, mission, reward, terminated):  # pragma: no cover - compiled
    """Step envs `rows` with `actions` (one per row); the k-th's results into row k."""
    cells, mask, _ = _scratch(grid, image)
    for k in range(rows.size):
        i = rows[k]
        reward[k], terminated[k] = step_one(i, actions[k], cfg, max_steps, grid, agent, carry, steps, target,
                                            poss, npos)
        write_obs(i, k, cfg, grid, agent, carry, missions, direction, image, mission, True, cells, mask)


@njit(cache=True, nogil=True)
def fused(rows, actions, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, direction, image,
          mission, final_direction, final_image, final_mission, out_reward, out_terminated, out_truncated,
          elapsed_step, episode_return, elapsed, returns, needs_reset, limit, mode):  # pragma: no cover - compiled
    """NativeEnv.step_autoreset: envs `rows` step (or reset, when marked) with the engine's
    bookkeeping, straight into the pool's rows (row i is env i's); the time limit is the
    pool's (`limit`), which MiniGrid's reward reads as its `max_steps`."""
    cells, mask, reach = _scratch(grid, image)
    for k in range(rows.size):
        i = rows[k]
        if needs_reset[i]:
            reset_one(i, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, reach)
            write_obs(i, i, cfg, grid, agent, carry, missions, direction, image, mission, True, cells, mask)
            started(i, False, out_reward, out_terminated, out_truncated, elapsed_step, episode_return, elapsed,
                    returns, needs_reset)
            continue
        r, term = step_one(i, actions[i], cfg, limit, grid, agent, carry, steps, target, poss, npos)
        write_obs(i, i, cfg, grid, agent, carry, missions, direction, image, mission, False, cells, mask)
        if end_step(i, r, term, out_reward, out_terminated, out_truncated, elapsed_step, episode_return, elapsed,
                    returns, needs_reset, limit, mode) and mode == SAME_STEP:
            final_direction[i] = direction[i]
            final_image[i] = image[i]
            final_mission[i] = mission[i]
            reset_one(i, cfg, grid, agent, carry, steps, target, poss, npos, states, missions, reach)
            write_obs(i, i, cfg, grid, agent, carry, missions, direction, image, mission, True, cells, mask)
            started(i, True, out_reward, out_terminated, out_truncated, elapsed_step, episode_return, elapsed,
                    returns, needs_reset)


@njit(cache=True, nogil=True)
def _scratch(grid, image):  # pragma: no cover - compiled
    """One call's scratch: the view's cells and visibility, and the grid's reached cells."""
    view = image.shape[1]
    return (np.empty((view, view, 3), np.uint8), np.empty((view, view), np.bool_),
            np.empty((grid.shape[1], grid.shape[2]), np.bool_))
