"""EnvPool-style Atari task ids ("Pong-v5", ...) for every single-player game ale-py ships."""

from __future__ import annotations

from typing import Any

from seedpool.errors import ConfigTypeError, UnknownEnvError

from .env import AtariEnv
from .games import camel_name, is_multiplayer_only, rom_ids, suggest
from .options import AtariOptions

_SUFFIX = "-v5"


def atari_ids() -> list[str]:
    """All Atari task ids, e.g. "Pong-v5", "SpaceInvaders-v5", sorted."""
    return sorted(camel_name(r) + _SUFFIX for r in rom_ids())


def make_atari(task_id: str, *, render_mode: str | None = None, **options: Any) -> AtariEnv:
    """Build the AtariEnv for an id such as "Breakout-v5", with EnvPool's option names."""
    if not isinstance(task_id, str):
        raise ConfigTypeError(f"task_id must be a str such as 'Pong-v5', got {task_id!r}")
    ids = atari_ids()
    if task_id not in ids and is_multiplayer_only(task_id.removesuffix(_SUFFIX)):
        raise UnknownEnvError(f"Atari task {task_id!r} has no single-player mode in ALE")
    if task_id not in ids:
        raise UnknownEnvError(f"unknown Atari task id {task_id!r}{suggest(task_id, ids)}; "
                              "ids look like 'Pong-v5' (see seedpool.envs.families.atari.factory.atari_ids())")
    AtariOptions.from_kwargs(options)  # fail on a typo before touching the ROM
    return AtariEnv(task_id[: -len(_SUFFIX)], render_mode=render_mode, **options)
