"""The search space of `seedpool tune`: ranges written as Ray Tune's own sampling functions.

One range per option, ``NAME=FUNCTION(ARGS)``, on the command line (``--tune.space``) or one
per line of a file (``--tune.space-file``; blank lines and ``#`` comments are skipped)::

    ppo.learning_rate=loguniform(1e-4, 1e-2)
    ent_coef=choice(0, 0.01, 0.05)
    num_envs=choice(8, 16)                 # --search only: not a live field
    model.activation=choice(tanh, relu)    # a bare word is a string

NAME is a trainer option as its config spells it (``ppo.learning_rate``, or ``learning_rate``
where one section has it; dashes work too). FUNCTION is one of `FUNCTIONS`, with Ray Tune's
meaning: ``randint(a, b)`` and ``lograndint(a, b)`` exclude ``b``, ``qrandint`` includes it.
Each range is checked against the option's type here, before anything starts; Ray Tune's
search-space objects are built from the checked ranges (`Range.domain`) and imported only then.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

from seedpool.errors import ConfigError

# name -> (numbers of bound arguments, quantized, integer, logarithmic)
FUNCTIONS: dict[str, tuple[int, bool, bool, bool]] = {
    "uniform": (2, False, False, False), "quniform": (3, True, False, False),
    "loguniform": (2, False, False, True), "qloguniform": (3, True, False, True),
    "randint": (2, False, True, False), "qrandint": (3, True, True, False),
    "lograndint": (2, False, True, True), "qlograndint": (3, True, True, True),
}
CHOICE = "choice"
SYNTAX = "NAME=FUNCTION(ARGS), e.g. 'ppo.learning_rate=loguniform(1e-4,1e-2)' or 'ent_coef=choice(0,0.01)'"


@dataclass(frozen=True)
class Range:
    """One tuned option: its config path (``section.field`` or ``field``), the sampling function
    and its arguments (bounds and step, or the categories of ``choice``)."""

    path: str
    function: str
    args: tuple[Any, ...]
    text: str  # as the user wrote it, for messages and the experiment's record

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(lowest, highest) value the range can take; None for ``choice``."""
        if self.function == CHOICE:
            return None
        lower, upper = self.args[0], self.args[1]
        exclusive = self.function in ("randint", "lograndint")
        return lower, upper - 1 if exclusive else upper

    def domain(self) -> Any:
        """Ray Tune's search-space object for this range."""
        from ray import tune

        if self.function == CHOICE:
            return tune.choice(list(self.args))
        return getattr(tune, self.function)(*self.args)

    def mutation(self) -> Any:
        """What population-based training perturbs with: the categories as a list (explore moves
        to a neighbour) for ``choice``, Ray Tune's domain (scaled by 0.8 or 1.2) otherwise."""
        return list(self.args) if self.function == CHOICE else self.domain()

    def clamp(self, value: Any) -> Any:
        """``value`` brought back into the range (PBT's scaling can leave it) and onto its grid."""
        if self.function == CHOICE:
            return value
        _, quantized, integer, _ = FUNCTIONS[self.function]
        lower, upper = self.bounds
        value = min(max(value, lower), upper)
        if quantized:
            q = self.args[2]
            value = min(max(round(value / q) * q, lower), upper)
        return int(round(value)) if integer else float(value)


# Learning rates are what PBT papers tune first and what every trainer's config holds: without
# a --tune.space, each is searched a decade either side of the trainer's default.
_RATES = ("learning_rate", "policy_lr", "q_lr")


def default_space(cfg: Any) -> list[str]:
    """The ranges `seedpool tune` uses when none are given: each learning rate of the trainer's
    config, loguniform over a tenth to ten times its default."""
    out = []
    for f in dataclasses.fields(cfg):
        section = getattr(cfg, f.name)
        if not dataclasses.is_dataclass(section) or not hasattr(type(section), "LIVE"):
            continue
        for name in _RATES:
            value = getattr(section, name, None)
            if name in type(section).LIVE and isinstance(value, float) and value > 0:
                out.append(f"{f.name}.{name}=loguniform({value / 10:.3g},{value * 10:.3g})")
    return out


def read_space(items: Sequence[str], file: Path | None) -> list[str]:
    """The range texts of ``--tune.space`` followed by those of ``--tune.space-file``."""
    texts = [t.strip() for t in items if t.strip()]
    if file is not None:
        if not Path(file).is_file():
            raise ConfigError(f"--tune.space-file {file}: no such file")
        for line in Path(file).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                texts.append(line)
    return texts


def parse_ranges(texts: Sequence[str], cfg: Any, *, live_only: bool) -> list[Range]:
    """Each text checked and resolved against the trainer's config ``cfg``; with ``live_only``
    (population-based training) only fields the run may change while it goes on are allowed."""
    if not texts:
        texts = default_space(cfg)
    if not texts:
        raise ConfigError(f"nothing to tune: give --tune.space {SYNTAX} (or --tune.space-file FILE)")
    ranges = [_parse_one(text, cfg, live_only) for text in texts]
    seen: dict[str, str] = {}
    for r in ranges:
        if r.path in seen:
            raise ConfigError(f"{r.path} is tuned twice: {seen[r.path]!r} and {r.text!r}")
        seen[r.path] = r.text
    return ranges


def _parse_one(text: str, cfg: Any, live_only: bool) -> Range:
    name, sep, call = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"cannot read the range {text!r}: write {SYNTAX}")
    function, args = _parse_call(call.strip(), text)
    path = resolve_field(name.strip(), cfg, live_only)
    hint = _field_hint(cfg, path)
    r = Range(path, function, args, text)
    _check(r, hint)
    return r


def _parse_call(call: str, text: str) -> tuple[str, tuple[Any, ...]]:
    """(function, arguments) of ``FUNCTION(ARGS)``: numbers, True/False/None, lists, bare words."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        node = None
    known = ", ".join([*FUNCTIONS, CHOICE])
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.keywords:
        raise ConfigError(f"cannot read the range {text!r}: write {SYNTAX} (functions: {known})")
    function = node.func.id
    if function not in FUNCTIONS and function != CHOICE:
        raise ConfigError(f"{text!r}: unknown function {function!r}; known: {known}")
    args = tuple(_literal(a, text) for a in node.args)
    if function == CHOICE and len(args) == 1 and isinstance(args[0], list):
        args = tuple(args[0])  # choice([a, b]) as Ray Tune writes it
    return function, args


def _literal(node: ast.AST, text: str) -> Any:
    if isinstance(node, ast.Name):
        return node.id  # a bare word: a string option value (choice(tanh, relu))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, text) for e in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ConfigError(f"{text!r}: {ast.unparse(node)!r} is not a value (numbers, words, lists)") from None


def _check(r: Range, hint: Any) -> None:
    """Raise unless every value ``r`` can sample is a value of the option's type."""
    base = _strip_optional(hint)
    if r.function == CHOICE:
        if not r.args:
            raise ConfigError(f"{r.text!r}: choice() needs at least one value")
        for value in r.args:
            coerce_value(r.path, hint, value, r.text)
        return
    count, quantized, integer, log = FUNCTIONS[r.function]
    if len(r.args) != count:
        need = "lower, upper" + (", q" if quantized else "")
        raise ConfigError(f"{r.text!r}: {r.function} takes {count} numbers ({need}), got {len(r.args)}")
    if not all(isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) for a in r.args):
        raise ConfigError(f"{r.text!r}: the bounds of {r.function} must be finite numbers")
    lower, upper = r.args[0], r.args[1]
    if integer and not all(float(a).is_integer() for a in r.args):
        raise ConfigError(f"{r.text!r}: {r.function} takes whole numbers")
    if lower >= upper:
        raise ConfigError(f"{r.text!r}: the lower bound {lower} must be below the upper bound {upper}")
    if log and lower <= 0:
        raise ConfigError(f"{r.text!r}: {r.function} needs a lower bound above 0, got {lower}")
    if integer and r.function in ("randint", "lograndint") and upper - lower < 1:
        raise ConfigError(f"{r.text!r}: {r.function}({lower}, {upper}) holds no whole number (the upper bound is excluded)")
    if quantized and not r.args[2] > 0:
        raise ConfigError(f"{r.text!r}: the step q must be above 0, got {r.args[2]}")
    if base is bool or base not in (int, float):
        raise ConfigError(f"{r.text!r}: {r.path} is not a number ({_type_name(hint)}); use choice(...)")
    if base is int and not integer:
        raise ConfigError(f"{r.text!r}: {r.path} takes whole numbers: use randint, qrandint, lograndint "
                          f"or choice, not {r.function}")


def coerce_value(path: str, hint: Any, value: Any, text: str = "") -> Any:
    """``value`` as the option ``path`` of type ``hint`` takes it, or a ConfigError."""
    where = f"{text!r}: " if text else ""
    if value is None and _is_optional(hint):
        return None
    base = _strip_optional(hint)
    origin = typing.get_origin(base)
    if origin is Literal:
        if value not in typing.get_args(base):
            raise ConfigError(f"{where}{path} takes one of {list(typing.get_args(base))}, got {value!r}")
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}{path} takes True or False, got {value!r}")
        return value
    if base in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}{path} takes a number, got {value!r}")
        if base is int:
            if float(value) != int(value):
                raise ConfigError(f"{where}{path} takes a whole number, got {value!r}")
            return int(value)
        return float(value)
    if base is str:
        return str(value)
    if origin is tuple and isinstance(value, list):
        return tuple(coerce_value(path, typing.get_args(base)[0], v, text) for v in value)
    raise ConfigError(f"{where}{path} ({_type_name(hint)}) cannot be tuned with {value!r}")


def resolve_field(name: str, cfg: Any, live_only: bool) -> str:
    """The config path of ``name`` (``section.field`` or a top-level ``field``)."""
    name = name.replace("-", "_")
    fields = leaf_fields(cfg)
    live = live_fields(cfg)
    if name in fields:
        path = name
    else:
        matches = [p for p in fields if p.rsplit(".", 1)[-1] == name and "." in p]
        if len(matches) > 1:
            raise ConfigError(f"{name!r} is in several sections: say which ({', '.join(matches)})")
        if not matches:
            close = difflib.get_close_matches(name, list(fields) + [p.rsplit(".", 1)[-1] for p in fields], n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"{type(cfg).__name__} has no option {name!r}{hint}")
        path = matches[0]
    if live_only and path not in live:
        raise ConfigError(f"--pbt changes hyperparameters while the members run, and {path} cannot change "
                          f"in a running run; those that can: {', '.join(live) or 'none'} "
                          "(tune the others with --search)")
    return path


def leaf_fields(cfg: Any) -> list[str]:
    """Every option of a trainer config one value sets: ``field`` and ``section.field``."""
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += [f"{f.name}.{g.name}" for g in dataclasses.fields(value)
                    if not dataclasses.is_dataclass(getattr(value, g.name))]
        elif f.name != "resume":
            out.append(f.name)
    return out


def live_fields(cfg: Any) -> list[str]:
    """The ``section.field`` paths a running run may change (each section's ``LIVE``)."""
    return [f"{f.name}.{name}" for f in dataclasses.fields(cfg)
            if dataclasses.is_dataclass(getattr(cfg, f.name))
            for name in getattr(type(getattr(cfg, f.name)), "LIVE", ())]


def _field_hint(cfg: Any, path: str) -> Any:
    owner, _, name = path.rpartition(".")
    obj = getattr(cfg, owner) if owner else cfg
    return typing.get_type_hints(type(obj))[name]


def field_hint(cfg: Any, path: str) -> Any:
    """The type annotation of the option ``path`` of ``cfg``."""
    return _field_hint(cfg, path)


def apply_values(cfg: Any, values: dict[str, Any]) -> Any:
    """A copy of ``cfg`` with each ``path: value`` set (coerced to the option's type)."""
    sections: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for path, value in values.items():
        value = coerce_value(path, _field_hint(cfg, path), value)
        owner, _, name = path.rpartition(".")
        (sections.setdefault(owner, {}) if owner else top)[name] = value
    for owner, changes in sections.items():
        top[owner] = dataclasses.replace(getattr(cfg, owner), **changes)
    return dataclasses.replace(cfg, **top)


def plain(value: Any) -> Any:
    """A sampled value as plain Python (Ray Tune's samplers give NumPy scalars)."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple)):
        return value.item()
    return value


def _is_optional(hint: Any) -> bool:
    return type(None) in typing.get_args(hint)


def _strip_optional(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if _is_optional(hint) and len(args) == 1:
        return args[0]
    return hint


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
