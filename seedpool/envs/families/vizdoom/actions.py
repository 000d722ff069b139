"""EnvPool's `use_combined_action=True` action set: one Discrete index per combination of
the scenario's buttons, in the order and number EnvPool builds (envpool/vizdoom/utils.h,
`BuildActionSet`), so that a policy trained on EnvPool's indices presses the same buttons here.

The set is the Cartesian product of one group of choices per button id (vizdoom's `Button`
enum, ascending), the first group varying slowest and every group's first choice "nothing":
a binary button gives {off, on} (SPEED only {on} with `force_speed=True`); a pair that
cannot be pressed together (MOVE_RIGHT/MOVE_LEFT, MOVE_BACKWARD/MOVE_FORWARD,
TURN_RIGHT/TURN_LEFT, LOOK_UP/LOOK_DOWN, MOVE_UP/MOVE_DOWN, SELECT_NEXT/PREV_WEAPON,
SELECT_NEXT/PREV_ITEM) gives {neither, first, second} where the scenario has both, else its
one button counts as binary; SELECT_WEAPON1..0 give {none, each one the scenario has}; a
delta button (LOOK_UP_DOWN_DELTA ... MOVE_UP_DOWN_DELTA) stays 0 unless
`delta_button_config` names it with `(num, min, max)`, num > 1: then its `num` evenly spaced
values from min to max (float32 steps, as EnvPool adds them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seedpool.errors import ConfigError

# Button ids (vizdoom.Button's values, which EnvPool's table of names follows).
SPEED = 8
PAIRS = ((10, 11), (12, 13), (14, 15), (16, 17), (18, 19), (31, 32), (35, 36))
WEAPONS = tuple(range(21, 31))  # SELECT_WEAPON1 ... SELECT_WEAPON0
DELTAS = tuple(range(38, 43))  # LOOK_UP_DOWN_DELTA ... MOVE_UP_DOWN_DELTA
NUM_BUTTONS = 43
# Nothing pressed: every group's first choice.
_NONE = (-1, 0.0)


def combined_actions(buttons: list[int], force_speed: bool = False,
                     delta_config: dict[str, Any] | None = None, names: list[str] | None = None) -> np.ndarray:
    """EnvPool's combined action set of a scenario whose available buttons are `buttons`
    (button ids, in the scenario's order): `[n, len(buttons)]` float64, row i the button
    values that Discrete action i sets. `names` are the Button names by id (for
    `delta_config`'s keys, EnvPool's: names of no button are ignored, as EnvPool does)."""
    column = {b: i for i, b in enumerate(buttons)}
    deltas = _deltas(delta_config or {}, names or [])
    rows, button = np.zeros((1, len(buttons)), np.float64), 0
    while button < NUM_BUTTONS:
        choices, button = _group(button, column, force_speed, deltas)
        group = np.zeros((len(choices), len(buttons)), np.float64)
        for i, (col, value) in enumerate(choices):
            if col >= 0:  # col < 0: nothing pressed, or a delta button the scenario lacks
                group[i, col] = value
        # Groups press disjoint buttons: a sum is their union; earlier groups vary slowest.
        rows = (rows[:, None, :] + group[None, :, :]).reshape(-1, len(buttons))
    return rows


def _group(button: int, column: dict[int, int], force_speed: bool,
           deltas: dict[int, tuple[int, float, float]]) -> tuple[list[tuple[int, float]], int]:
    """The choices of the group starting at `button`, each the (column, value) it presses
    (column -1: none), and the id of the next group."""
    pair = next((p for p in PAIRS if p[0] == button), None)
    if pair is not None and all(b in column for b in pair):
        return [_NONE, (column[pair[0]], 1.0), (column[pair[1]], 1.0)], button + 2
    if button == WEAPONS[0]:
        return [_NONE] + [(column[w], 1.0) for w in WEAPONS if w in column], WEAPONS[-1] + 1
    if button in DELTAS:
        num, low, high = deltas.get(button, (0, 0.0, 0.0))
        if num <= 1:
            return [_NONE], button + 1
        # A configured delta button the scenario lacks still multiplies the set (its copies
        # press nothing): EnvPool's set has that size, and its indices are kept.
        col = column.get(button, -1)
        step = np.float32(np.float32(high) - np.float32(low)) / np.float32(num - 1)
        values, value = [], np.float32(low)
        for _ in range(num):
            values.append((col, float(value)))
            value = np.float32(value + step)
        return values, button + 1
    if button not in column:
        return [_NONE], button + 1
    on = (column[button], 1.0)
    return ([on] if button == SPEED and force_speed else [_NONE, on]), button + 1


def _deltas(config: dict[str, Any], names: list[str]) -> dict[int, tuple[int, float, float]]:
    """`delta_button_config` ({button name: (num, min, max)}) by delta button id."""
    out = {}
    for name, spec in config.items():
        try:
            num, low, high = spec
            num, low, high = int(num), float(low), float(high)
        except (TypeError, ValueError):
            raise ConfigError(f"delta_button_config[{name!r}] must be (num, min, max), as in EnvPool; "
                              f"got {spec!r}") from None
        button = names.index(name) if name in names else -1
        if button in DELTAS:  # EnvPool reads the config of delta buttons only
            out[button] = (num, low, high)
    return out
