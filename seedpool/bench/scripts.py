"""Peers' shipped scripts, run with the few edits today's packages need (listed in each table)."""
from __future__ import annotations

from pathlib import Path


def edited_script(source: Path, dest: Path, edits: list[tuple[str, str, str]], expected: str) -> Path:
    """``source`` with each ``(what, old, new)`` edit applied, written to ``dest``; refuses a file an
    edit does not fit (``expected`` names the script the edits were written for)."""
    text = source.read_text()
    for what, old, new in edits:
        if old not in text:
            raise ValueError(f"{source}: the edit {what!r} does not apply (is this {expected}?)")
        text = text.replace(old, new)
    dest.write_text(text)
    return dest
