"""MiniGrid's world for numba: one env's grid as its encoding, the agent's view, one step.

A grid is `uint8 [width, height, 3]`, each cell as MiniGrid encodes it (`WorldObj.encode`:
object type, colour, state), an empty cell `(1, 0, 0)`: the observation is a view of it, and
nothing else of MiniGrid's objects is needed by the levels built here (keys, balls, boxes with
nothing inside, doors, goals, walls). The agent is `(x, y, dir)` and what it carries a cell
encoding (type 0: nothing). `observe` is `MiniGridEnv.gen_obs` (the view rotated to face up,
occlusion by `Grid.process_vis`, the carried object in the agent's cell) and `act` is
`MiniGridEnv.step`'s effect of an action, cell for cell.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# minigrid.core.constants: OBJECT_TO_IDX, COLOR_TO_IDX, and the door states.
UNSEEN, EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA = range(10)
RED, GREEN, BLUE, PURPLE, YELLOW, GREY = range(6)
OPEN, CLOSED, LOCKED = range(3)
# minigrid.core.actions.Actions
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
DIR_X = np.array([1, 0, -1, 0], np.int64)  # DIR_TO_VEC: right, down, left, up
DIR_Y = np.array([0, 1, 0, -1], np.int64)


@njit(cache=True, nogil=True, inline="always")
def put(grid, x, y, kind, color, state):  # pragma: no cover - compiled
    """Set cell (x, y) to an object's encoding."""
    grid[x, y, 0] = kind
    grid[x, y, 1] = color
    grid[x, y, 2] = state


@njit(cache=True, nogil=True)
def wall_rect(grid, x, y, w, h):  # pragma: no cover - compiled
    """`Grid.wall_rect`: the border of the w x h rectangle at (x, y) made of grey walls."""
    for i in range(w):
        put(grid, x + i, y, WALL, GREY, 0)
        put(grid, x + i, y + h - 1, WALL, GREY, 0)
    for j in range(h):
        put(grid, x, y + j, WALL, GREY, 0)
        put(grid, x + w - 1, y + j, WALL, GREY, 0)


@njit(cache=True, nogil=True)
def clear(grid):  # pragma: no cover - compiled
    """Every cell empty (a new `Grid`)."""
    for x in range(grid.shape[0]):
        for y in range(grid.shape[1]):
            put(grid, x, y, EMPTY, 0, 0)


@njit(cache=True, nogil=True, inline="always")
def see_behind(kind, state):  # pragma: no cover - compiled
    """`WorldObj.see_behind`: walls and doors that are not open block the view."""
    return not (kind == WALL or (kind == DOOR and state != OPEN))


@njit(cache=True, nogil=True)
def observe(grid, ax, ay, d, carry, see_through, view, cells, mask, image):  # pragma: no cover - compiled
    """`gen_obs()["image"]` into `image [V, V, 3]`: the V x V cells ahead of the agent, column
    vx left to right and row vy far to near (the agent at (V // 2, V - 1)), cells outside the
    grid walls; `cells [V, V, 3]` and `mask [V, V]` are scratch. Unless `see_through`, the
    cells `Grid.process_vis` hides read (0, 0, 0)."""
    width, height = grid.shape[0], grid.shape[1]
    dx, dy = DIR_X[d], DIR_Y[d]
    rx, ry = -dy, dx
    half = view // 2
    for vx in range(view):
        for vy in range(view):
            ahead, side = view - 1 - vy, vx - half
            x, y = ax + dx * ahead + rx * side, ay + dy * ahead + ry * side
            if 0 <= x < width and 0 <= y < height:
                for c in range(3):
                    cells[vx, vy, c] = grid[x, y, c]
            else:
                cells[vx, vy, 0], cells[vx, vy, 1], cells[vx, vy, 2] = WALL, GREY, 0
    if see_through:
        mask[:, :] = True
    else:
        _process_vis(cells, mask, half, view - 1)
    # The agent sees what it carries in its own cell (visible: process_vis starts there).
    if carry[0] != UNSEEN:
        for c in range(3):
            cells[half, view - 1, c] = carry[c]
    else:
        cells[half, view - 1, 0], cells[half, view - 1, 1], cells[half, view - 1, 2] = EMPTY, 0, 0
    for vx in range(view):
        for vy in range(view):
            for c in range(3):
                image[vx, vy, c] = cells[vx, vy, c] if mask[vx, vy] else 0


@njit(cache=True, nogil=True)
def _process_vis(cells, mask, px, py):  # pragma: no cover - compiled
    """`Grid.process_vis(agent_pos=(px, py))`: rows from the agent's outwards, each swept right
    then left, light passing through cells that do not block the view."""
    w, h = cells.shape[0], cells.shape[1]
    mask[:, :] = False
    mask[px, py] = True
    for j in range(h - 1, -1, -1):
        for i in range(0, w - 1):
            if not mask[i, j] or not see_behind(cells[i, j, 0], cells[i, j, 2]):
                continue
            mask[i + 1, j] = True
            if j > 0:
                mask[i + 1, j - 1] = True
                mask[i, j - 1] = True
        for i in range(w - 1, 0, -1):
            if not mask[i, j] or not see_behind(cells[i, j, 0], cells[i, j, 2]):
                continue
            mask[i - 1, j] = True
            if j > 0:
                mask[i - 1, j - 1] = True
                mask[i, j - 1] = True


@njit(cache=True, nogil=True)
def act(grid, agent, carry, a):  # pragma: no cover - compiled
    """One action's effect (`MiniGridEnv.step` without the step count and the observation):
    turns, moves, picks up, drops, toggles doors and boxes. Returns the type of the cell the
    agent stepped onto with `forward` (the caller rewards goals and lava), else EMPTY."""
    x, y, d = agent[0], agent[1], agent[2]
    fx, fy = x + DIR_X[d], y + DIR_Y[d]
    kind, color, state = grid[fx, fy, 0], grid[fx, fy, 1], grid[fx, fy, 2]
    if a == LEFT:
        agent[2] = (d + 3) % 4
    elif a == RIGHT:
        agent[2] = (d + 1) % 4
    elif a == FORWARD:
        # can_overlap: empty cells, floors, goals, lava and open doors
        if kind == EMPTY or kind == FLOOR or kind == GOAL or kind == LAVA or (kind == DOOR and state == OPEN):
            agent[0], agent[1] = fx, fy
            return kind
    elif a == PICKUP:
        if (kind == KEY or kind == BALL or kind == BOX) and carry[0] == UNSEEN:
            carry[0], carry[1], carry[2] = kind, color, state
            put(grid, fx, fy, EMPTY, 0, 0)
    elif a == DROP:
        if kind == EMPTY and carry[0] != UNSEEN:
            put(grid, fx, fy, carry[0], carry[1], carry[2])
            carry[0], carry[1], carry[2] = UNSEEN, 0, 0
    elif a == TOGGLE:
        if kind == DOOR:
            if state == LOCKED:  # opens with a key of its colour
                if carry[0] == KEY and carry[1] == color:
                    grid[fx, fy, 2] = OPEN
            else:
                grid[fx, fy, 2] = CLOSED if state == OPEN else OPEN
        elif kind == BOX:  # replaced by its contents: these levels' boxes hold nothing
            put(grid, fx, fy, EMPTY, 0, 0)
    return EMPTY
