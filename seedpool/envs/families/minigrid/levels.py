"""The levels' `_gen_grid` for numba, each draw from the env's generator in the package's order.

- Empty (`minigrid.envs.empty.EmptyEnv`): walls, the goal in the far corner, the agent at its
  start, or placed at random (the -Random- ids).
- DoorKey (`minigrid.envs.doorkey.DoorKeyEnv`): a wall splitting the room at a random column,
  the agent and the key left of it, a locked yellow door in it.
- GoToLocal (`minigrid.envs.babyai.goto.GoToLocal`, one room of `RoomGrid`): the agent, then
  `num_dists` objects of random kind and colour none next to the agent's start, the whole
  level drawn again while some object cannot be reached (`check_objs_reachable`'s
  RejectSampling); the mission names one of them at random.

`place` is `MiniGridEnv.place_obj`: two draws per try (x, then y, in the rectangle) until the
cell is empty, is not the agent's and passes the level's test, at most `max_tries + 1` tries.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from seedpool.envs.families.minigrid import grid as g
from seedpool.envs.families.minigrid.rng import integers

EMPTY_LEVEL, DOORKEY_LEVEL, GOTO_LOCAL_LEVEL = range(3)
# The columns of a family's int64 configuration row (`MiniGridFamily.cfg`); START_X -1: a
# random start; SEE_THROUGH: the view is not occluded (EmptyEnv's see_through_walls).
LEVEL, START_X, START_Y, START_DIR, NUM_DISTS, SEE_THROUGH = range(6)
NO_LIMIT = 1 << 62  # place_obj's default max_tries (math.inf)
ROOM_TRIES = 1000  # RoomGrid's max_tries for objects and the agent
# COLOR_NAMES (sorted names, as _rand_color draws them) as colour indices, and add_object's kinds.
COLOR_DRAW = np.array([g.BLUE, g.GREEN, g.GREY, g.PURPLE, g.RED, g.YELLOW], np.int64)
KIND_DRAW = np.array([g.KEY, g.BALL, g.BOX], np.int64)


def _words(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Names as a uint8 [n, longest] table and their lengths, for writing missions in numba."""
    table = np.zeros((len(names), max(len(n) for n in names)), np.uint8)
    for k, name in enumerate(names):
        table[k, : len(name)] = np.frombuffer(name.encode(), np.uint8)
    return table, np.array([len(n) for n in names], np.int64)


# Words by colour index (COLOR_TO_IDX) and by object type index (OBJECT_TO_IDX, from KEY).
COLOR_WORDS, COLOR_LENGTHS = _words(["red", "green", "blue", "purple", "yellow", "grey"])
KIND_WORDS, KIND_LENGTHS = _words(["key", "ball", "box"])
GO_TO_THE, GO_TO_THE_LENGTHS = _words(["go to the ", "go to a "])


@njit(cache=True, nogil=True)
def place(grid, states, i, x0, y0, w, h, agent, near, max_tries):  # pragma: no cover - compiled
    """`place_obj` in the w x h rectangle at (x0, y0) (clipped to the grid): the cell found, or
    (-1, -1) after `max_tries + 1` tries (its RecursionError). `near`: reject cells at a
    Manhattan distance under 2 from the agent (RoomGrid's `reject_next_to`)."""
    x_hi, y_hi = min(x0 + w, grid.shape[0]), min(y0 + h, grid.shape[1])
    tries = 0
    while True:
        if tries > max_tries:
            return -1, -1
        tries += 1
        x = integers(states, i, x0, x_hi)
        y = integers(states, i, y0, y_hi)
        if grid[x, y, 0] != g.EMPTY or (x == agent[0] and y == agent[1]):
            continue
        if near and abs(agent[0] - x) + abs(agent[1] - y) < 2:
            continue
        return x, y


@njit(cache=True, nogil=True)
def place_agent(grid, states, i, x0, y0, w, h, agent, max_tries):  # pragma: no cover - compiled
    """`MiniGridEnv.place_agent`: a free cell, then a random direction; False on failure."""
    agent[0], agent[1] = -1, -1
    x, y = place(grid, states, i, x0, y0, w, h, agent, False, max_tries)
    if x < 0:
        return False
    agent[0], agent[1] = x, y
    agent[2] = integers(states, i, 0, 4)
    return True


@njit(cache=True, nogil=True)
def gen_empty(grid, states, i, agent, cfg):  # pragma: no cover - compiled
    """EmptyEnv._gen_grid."""
    width, height = grid.shape[0], grid.shape[1]
    g.clear(grid)
    g.wall_rect(grid, 0, 0, width, height)
    g.put(grid, width - 2, height - 2, g.GOAL, g.GREEN, 0)
    if cfg[START_X] >= 0:
        agent[0], agent[1], agent[2] = cfg[START_X], cfg[START_Y], cfg[START_DIR]
    else:
        place_agent(grid, states, i, 0, 0, width, height, agent, NO_LIMIT)


@njit(cache=True, nogil=True)
def gen_doorkey(grid, states, i, agent):  # pragma: no cover - compiled
    """DoorKeyEnv._gen_grid."""
    width, height = grid.shape[0], grid.shape[1]
    g.clear(grid)
    g.wall_rect(grid, 0, 0, width, height)
    g.put(grid, width - 2, height - 2, g.GOAL, g.GREEN, 0)
    split = integers(states, i, 2, width - 2)
    for y in range(height):
        g.put(grid, split, y, g.WALL, g.GREY, 0)
    place_agent(grid, states, i, 0, 0, split, height, agent, NO_LIMIT)
    door_y = integers(states, i, 1, height - 2)
    g.put(grid, split, door_y, g.DOOR, g.YELLOW, g.LOCKED)
    x, y = place(grid, states, i, 0, 0, split, height, agent, False, NO_LIMIT)
    g.put(grid, x, y, g.KEY, g.YELLOW, 0)


@njit(cache=True, nogil=True)
def gen_goto_local(grid, states, i, agent, cfg, target, reach):  # pragma: no cover - compiled
    """GoToLocal: RoomGridLevel._gen_grid's loop around RoomGrid._gen_grid and gen_mission,
    until every object is reachable; `target` gets the kind and colour the mission names.
    `reach` ([W, H] bool) and the stack are scratch."""
    width, height = grid.shape[0], grid.shape[1]
    num = cfg[NUM_DISTS]
    kinds = np.empty(num, np.int64)
    colors = np.empty(num, np.int64)
    while True:
        g.clear(grid)
        g.wall_rect(grid, 0, 0, width, height)
        # RoomGrid.place_agent: a cell whose front is empty or a wall (always so here: the
        # agent is placed before any object), tried again otherwise.
        ok = True
        while True:
            if not place_agent(grid, states, i, 0, 0, width, height, agent, ROOM_TRIES):
                ok = False
                break
            front = grid[agent[0] + g.DIR_X[agent[2]], agent[1] + g.DIR_Y[agent[2]], 0]
            if front == g.EMPTY or front == g.WALL:
                break
        for k in range(num):  # add_distractors(all_unique=False): colour, kind, then place
            if not ok:
                break
            colors[k] = COLOR_DRAW[integers(states, i, 0, 6)]
            kinds[k] = KIND_DRAW[integers(states, i, 0, 3)]
            x, y = place(grid, states, i, 0, 0, width, height, agent, True, ROOM_TRIES)
            if x < 0:
                ok = False
                break
            g.put(grid, x, y, kinds[k], colors[k], 0)
        if ok and all_reachable(grid, agent, reach):
            break
    pick = integers(states, i, 0, num)
    target[0], target[1] = kinds[pick], colors[pick]


@njit(cache=True, nogil=True)
def all_reachable(grid, agent, reach):  # pragma: no cover - compiled
    """`check_objs_reachable` (without raising): every object that is not a wall is on a
    cell reached from the agent through empty cells and doors (objects are reached, not
    passed)."""
    width, height = grid.shape[0], grid.shape[1]
    reach[:, :] = False
    stack = np.empty((4 * width * height + 1, 2), np.int64)
    stack[0, 0], stack[0, 1] = agent[0], agent[1]
    top = 1
    while top > 0:
        top -= 1
        x, y = stack[top, 0], stack[top, 1]
        if x < 0 or x >= width or y < 0 or y >= height or reach[x, y]:
            continue
        reach[x, y] = True
        kind = grid[x, y, 0]
        if kind != g.EMPTY and kind != g.DOOR:
            continue
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            stack[top, 0], stack[top, 1] = x + dx, y + dy
            top += 1
    for x in range(width):
        for y in range(height):
            kind = grid[x, y, 0]
            if kind != g.EMPTY and kind != g.WALL and not reach[x, y]:
                return False
    return True


@njit(cache=True, nogil=True)
def find_targets(grid, target, poss):  # pragma: no cover - compiled
    """`ObjDesc.find_matching_objs`: the cells holding the target's kind and colour, into
    `poss [n, 2]`; returns how many. (No object appears after the reset, so the tracked
    objects still in the grid are exactly these: the update after a drop is this scan too.)"""
    n = 0
    for x in range(grid.shape[0]):
        for y in range(grid.shape[1]):
            if grid[x, y, 0] == target[0] and grid[x, y, 1] == target[1] and n < poss.shape[0]:
                poss[n, 0], poss[n, 1] = x, y
                n += 1
    return n


@njit(cache=True, nogil=True)
def goto_mission(mission, target, plural):  # pragma: no cover - compiled
    """"go to the|a <colour> <kind>" (`GoToInstr.surface`: "a" when several objects match),
    UTF-8 and zero-padded into `mission`, cut at its length."""
    mission[:] = 0
    n = 0
    art = 1 if plural else 0
    n = _write(mission, n, GO_TO_THE[art], GO_TO_THE_LENGTHS[art])
    n = _write(mission, n, COLOR_WORDS[target[1]], COLOR_LENGTHS[target[1]])
    if n < mission.size:
        mission[n] = 32  # a space
        n += 1
    _write(mission, n, KIND_WORDS[target[0] - g.KEY], KIND_LENGTHS[target[0] - g.KEY])


@njit(cache=True, nogil=True, inline="always")
def _write(mission, n, word, length):  # pragma: no cover - compiled
    for c in range(length):
        if n < mission.size:
            mission[n] = word[c]
            n += 1
    return n
