"""The games ale-py ships, their EnvPool-style names, and per-game facts read once from the ROM."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass

import ale_py
from ale_py import ALEInterface, LoggerMode

# ALE prints ROM banners and settings at INFO level on every load.
ALEInterface.setLoggerMode(LoggerMode.Error)

# ROMs without a single-player mode: loading one in the single-agent ALE exits the process
# (ale-py's own registration skips the same four).
_MULTIPLAYER_ONLY = frozenset({"combat", "joust", "maze_craze", "warlords"})


@functools.cache
def rom_ids() -> tuple[str, ...]:
    """Snake-case ids of the single-player ROMs installed with ale-py, sorted."""
    return tuple(sorted(r for r in ale_py.roms.get_all_rom_ids() if r not in _MULTIPLAYER_ONLY))


def camel_name(rom_id: str) -> str:
    """EnvPool's game name for a ROM id: "space_invaders" -> "SpaceInvaders"."""
    return "".join(part.capitalize() for part in rom_id.split("_"))


@functools.cache
def _by_name() -> dict[str, str]:
    return {camel_name(r): r for r in rom_ids()}


def resolve_game(game: str) -> str:
    """ROM id for a game given as ROM id ("space_invaders") or EnvPool name ("SpaceInvaders")."""
    if not isinstance(game, str):
        raise TypeError(f"game must be a str, got {game!r}")
    if game in rom_ids():
        return game
    if game in _by_name():
        return _by_name()[game]
    if is_multiplayer_only(game):
        raise ValueError(f"Atari game {game!r} has no single-player mode in ALE")
    raise ValueError(f"unknown Atari game {game!r}{suggest(game, list(_by_name()) + list(rom_ids()))}")


def is_multiplayer_only(game: str) -> bool:
    """Whether `game` (ROM id or EnvPool name) is a ROM that ALE only runs with several players."""
    return game in _MULTIPLAYER_ONLY or game in {camel_name(r) for r in _MULTIPLAYER_ONLY}


def suggest(word: str, choices: list[str]) -> str:
    """A ' (did you mean ...?)' hint listing close matches, or ''."""
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    if not close:  # case-only typos ("pong-v5") score low on the raw strings
        lowered = {c.lower(): c for c in choices}
        close = [lowered[c] for c in difflib.get_close_matches(word.lower(), list(lowered), n=3)]
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


@dataclass(frozen=True)
class GameInfo:
    """What an env needs to know about a ROM before it owns an emulator."""

    rom_path: str
    minimal_actions: tuple[int, ...]
    legal_actions: tuple[int, ...]
    modes: tuple[int, ...]
    difficulties: tuple[int, ...]
    screen: tuple[int, int]  # (height, width), 210x160 for every ROM ALE ships


@functools.cache
def game_info(rom_id: str) -> GameInfo:
    """Action sets, modes and difficulties of a ROM (one ROM load per process and game)."""
    path = str(ale_py.roms.get_rom_path(rom_id))
    ale = ALEInterface()
    ale.loadROM(path)
    return GameInfo(
        rom_path=path,
        minimal_actions=tuple(a.value for a in ale.getMinimalActionSet()),
        legal_actions=tuple(a.value for a in ale.getLegalActionSet()),
        modes=tuple(int(m) for m in ale.getAvailableModes()),
        difficulties=tuple(int(d) for d in ale.getAvailableDifficulties()),
        screen=(int(ale.getScreenDims()[0]), int(ale.getScreenDims()[1])),
    )
