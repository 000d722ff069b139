"""Old options whose value means something else today: converted, not only renamed.

A renamed option (`seedpool.experiment.config.upgrade_argv` / `upgrade_options`) keeps its
value; a `Converted` one counts in other units (``--dqn.gradient-steps`` counted gradient steps
per round, ``--apex.replay-ratio`` samples per env step, ...), so its value is converted from
the rest of the run's config. The command line's old options are converted after parsing (the
other options they depend on may come after them, or from the defaults or the resumed run), a
run folder's config.json before it is read; each gives one deprecation line on stderr.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, NamedTuple

from seedpool.experiment.config import config_to_dict, deprecated


class Converted(NamedTuple):
    """An old option ``section.old`` whose value converts into today's ``section.new``."""

    section: str
    old: str
    new: str
    convert: Callable[[Mapping[str, Any], float], float]
    """(the whole config as a dict in today's names, the old option's value) -> the new option's value."""
    old_meaning: str
    """What the old option counted (said in the deprecation line)."""
    new_meaning: str
    """What the new option counts."""

    def flag(self, name: str) -> str:
        """The command-line spelling of one of its names (``--dqn.gradient-steps``)."""
        return f"--{self.section}.{name}".replace("_", "-")


class Found(NamedTuple):
    """An old option given on the command line, taken out of it until the rest is parsed."""

    option: Converted
    value: float


def take_converted(argv: Sequence[str], options: Iterable[Converted]) -> tuple[list[str], list[Found]]:
    """``argv`` without the old options of ``options`` (``--dqn.gradient-steps 4`` or ``=4``, dashes or
    underscores), and what they gave; ValueError for one without a number or given with its new name."""
    options = list(options)
    by_flag = {opt.flag(opt.old): opt for opt in options}
    rest, found = [], []
    args = list(argv)
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        opt = by_flag.get(name.replace("_", "-")) if args[i].startswith("--") else None
        if opt is None:
            rest.append(args[i])
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                raise ValueError(f"{name} needs a value")
            value, i = args[i + 1], i + 1
        try:
            found.append(Found(opt, float(value)))
        except ValueError:
            raise ValueError(f"{name} takes a number, got {value!r}") from None
        i += 1
    given = {arg.partition("=")[0].replace("_", "-") for arg in rest if arg.startswith("--")}
    for f in found:
        if f.option.flag(f.option.new) in given:
            raise ValueError(f"both {f.option.flag(f.option.old)} (the old option) and {f.option.flag(f.option.new)} "
                             "are given: keep only the new one")
    return rest, found


def apply_converted(cfg: Any, found: Iterable[Found]) -> Any:
    """``cfg`` with each found option's new field set from its converted value (one deprecation line
    each); sections are replaced, not changed in place."""
    for f in found:
        opt = f.option
        new_value = opt.convert(config_to_dict(cfg), f.value)
        setattr(cfg, opt.section, dataclasses.replace(getattr(cfg, opt.section), **{opt.new: new_value}))
        deprecated(f"{opt.flag(opt.old)} {f.value:g} ({opt.old_meaning}) is now {opt.flag(opt.new)} "
                   f"{new_value:g} ({opt.new_meaning}); read as such")
    return cfg


def convert_options(data: Mapping[str, Any], options: Iterable[Converted]) -> dict[str, Any]:
    """A run folder's config dict (renamed options already in today's names) with each old option of
    ``options`` replaced by today's, converted (one deprecation line each); ``data`` is not changed."""
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for opt in options:
        section = data.get(opt.section)
        if not isinstance(section, dict) or opt.old not in section:
            continue
        if opt.new in section:
            raise ValueError(f"config.json sets both {opt.section}.{opt.old} (the old option) and "
                             f"{opt.section}.{opt.new}: keep only the new one")
        old_value = section.pop(opt.old)
        section[opt.new] = opt.convert(data, float(old_value))
        deprecated(f"{opt.section}.{opt.old}={old_value:g} ({opt.old_meaning}) in the run's config.json is now "
                   f"{opt.section}.{opt.new}={section[opt.new]:g} ({opt.new_meaning}); read as such")
    return data
