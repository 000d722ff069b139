"""MinAtar task ids ("MinAtar/Breakout-v1", ...) as ``minatar.gym`` registers them.

``-v1`` ids act with each game's minimal action set, ``-v0`` ids with all six actions.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from seedpool.errors import ConfigTypeError, UnknownEnvError

# minatar's module name of each game, under the CamelCase name its gym ids use.
GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}
VERSIONS = {"v0": False, "v1": True}  # version -> minimal action set
INSTALL_HINT = "pip install 'seedpool[minatar]'"


def minatar_ids() -> list[str]:
    """Every MinAtar task id, e.g. "MinAtar/Breakout-v1"; needs no minatar install."""
    return sorted(f"MinAtar/{name}-{version}" for name in GAMES for version in VERSIONS)


def _parse(task_id: str) -> tuple[str, bool]:
    """(minatar game module name, minimal action set) of a MinAtar id."""
    name, _, version = task_id.removeprefix("MinAtar/").rpartition("-")
    if not task_id.startswith("MinAtar/") or name not in GAMES or version not in VERSIONS:
        raise UnknownEnvError(f"unknown MinAtar task id {task_id!r}; ids are {minatar_ids()}")
    return GAMES[name], VERSIONS[version]


def make_minatar(task_id: str, *, render_mode: str | None = None, sticky_action_prob: float = 0.1,
                 difficulty_ramping: bool = True, **options: Any) -> gym.Env:
    """Build a MinAtar env with channels-first bool observations ``[C, 10, 10]``.

    ``sticky_action_prob`` (0.1, MinAtar's default: the previous action repeats with this
    probability) and ``difficulty_ramping`` keep minatar's own names and defaults.
    """
    if options:
        raise ConfigTypeError(f"unknown MinAtar options {sorted(options)}; "
                              "MinAtar takes sticky_action_prob, difficulty_ramping and render_mode")
    game, minimal = _parse(task_id)
    try:
        from .env import MinAtarEnv
    except ImportError as err:
        raise ModuleNotFoundError(
            f"{task_id} needs the minatar package, which is not installed: {INSTALL_HINT} "
            f"(or pip install minatar) [{err}]", name="minatar") from err
    return MinAtarEnv(game, minimal_action_set=minimal, sticky_action_prob=sticky_action_prob,
                      difficulty_ramping=difficulty_ramping, render_mode=render_mode)
