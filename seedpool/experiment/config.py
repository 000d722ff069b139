"""Configs every trainer shares, and their round trip through ``config.json``."""
from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from seedpool.errors import ConfigError

T = TypeVar("T")

OptionValue = Union[bool, int, float, str]
"""A task option's value as the command line gives it (``--env-options NAME VALUE``)."""


@dataclass
class RunConfig:
    """Options of a training run that do not depend on the algorithm (each acts in every trainer)."""

    env: str = "CartPole-v1"
    """Task id: a seedpool id (e.g. Pong-v5) or any gymnasium id."""
    env_options: dict[str, OptionValue] = dataclasses.field(default_factory=dict)
    """Task options for seedpool.make, e.g. --env-options episodic_life True reward_clip True."""
    seed: int = 1
    """Seed for the policy, the minibatch order and the envs (env i gets seed + i)."""
    total_timesteps: int = 150_000
    """Env steps to train for (summed over envs). With --resume: the new total."""
    num_envs: int = 8
    """Environments stepped in parallel."""
    backend: Literal["auto", "serial", "thread", "process"] = "auto"
    """Engine backend; "auto" measures the env and picks."""
    device: str = "auto"
    """Torch device for the policy and the update: "cpu", "cuda", "cuda:1", or "auto" (cuda if present)."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Arithmetic of the forward passes (acting and learning): "bf16" autocast where the hardware
    computes bfloat16 natively (an error elsewhere), "fp32", or "auto": bf16 on such hardware for
    a convolutional network, or an MLP with 256-wide layers learning from 256-row minibatches
    (SAC, TD3), fp32 otherwise. Weights, optimizer state and losses stay fp32."""
    torch_threads: int = 1
    """Torch CPU threads (1 leaves the other cores to env workers); 0 keeps torch's default."""
    runs_dir: Path = Path("runs")
    """Parent folder of run folders."""
    resume: Path | None = None
    """Continue the run in this folder (its config applies; options given here override it)."""
    checkpoint_every_s: float = 60.0
    """Seconds between checkpoints (one is also written at the end and on Ctrl-C)."""
    progress: Literal["auto", "rich", "log", "off"] = "auto"
    """Progress display: "auto" is a live bar on a terminal and log lines otherwise."""
    log_every_s: float = 5.0
    """Seconds between progress log lines (when not drawing a live bar)."""
    tensorboard: bool = True
    """Also write TensorBoard event files next to metrics.csv."""
    track: bool = False
    """Also log to Weights & Biases (pip install 'seedpool[wandb]'; WANDB_MODE=offline works without an account)."""
    wandb_project_name: str = "seedpool"
    """W&B project of --track."""
    wandb_entity: str | None = None
    """W&B entity (team or user) of --track; None: your default."""
    metrics_every: int = 100
    """Env steps between logged updates (their losses, SPS and times; the last update is always
    logged, episodes always are; 0: every update). Off-policy learners update every env step:
    a row per update would cost more time than the update (TensorBoard's writer) and fill a
    1M-step run's metrics.csv with tens of millions of rows."""
    stop_at_return: float | None = None
    """Stop early once the mean return of the last 20 episodes reaches this (every trainer: after
    the update where it did, with a checkpoint as at the end of the budget)."""


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-friendly dict of a (nested) dataclass config."""
    def plain(v: Any) -> Any:
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return {k: plain(v) for k, v in dataclasses.asdict(cfg).items()}


def config_from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a dataclass config from :func:`config_to_dict` output; unknown keys are an error."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{cls.__name__} has no option(s) {unknown}; known: {sorted(names)}")
    return cls(**{k: _coerce(hints[k], v) for k, v in data.items()})


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        if dataclasses.is_dataclass(option) and isinstance(value, dict):
            return config_from_dict(option, value)
        if option is Path:
            return Path(value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            return tuple(value)
    return value


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)


Renames = Mapping[tuple[str, str], str]
"""Old option names -> today's: ``{(section, old_name): new_name}``, e.g. ``{("dqn", "batch_size"): "minibatch_size"}``."""


def deprecated(message: str) -> None:
    """Tell the user, in one line on stderr, that an old spelling was accepted and what replaces it."""
    print(f"seedpool: deprecated: {message}", file=sys.stderr)


def upgrade_options(data: dict[str, Any], renamed: Renames, dropped: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """A run folder's config dict in today's option names (one deprecation line per old name found);
    ``dropped`` options (``(section, name)``, section "" for a top-level option: they never acted
    in this trainer) are removed. ``data`` is not changed."""
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for (section, old), new in renamed.items():
        options = data.get(section)
        if isinstance(options, dict) and old in options:
            if new in options:
                raise ConfigError(f"config.json sets both {section}.{old} (the old name) and {section}.{new}: "
                                  "keep only the new one")
            options[new] = options.pop(old)
            deprecated(f"{section}.{old} in the run's config.json is now {section}.{new}; read as such")
    for section, name in dropped:
        if not section:
            data.pop(name, None)
        elif isinstance(data.get(section), dict):
            data[section].pop(name, None)
    return data


def upgrade_argv(argv: list[str], renamed: Renames) -> list[str]:
    """Command-line options in their old spelling (``--dqn.batch-size 64``, ``--dqn.batch_size=64``)
    rewritten to today's, with one deprecation line each; other arguments unchanged."""
    flags = {f"--{section}.{old}".replace("_", "-"): f"--{section}.{new}".replace("_", "-")
             for (section, old), new in renamed.items()}
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        new = flags.get(name.replace("_", "-")) if arg.startswith("--") else None
        if new is not None:
            deprecated(f"{name} is now {new}; read as such")
            arg = new + eq + value
        out.append(arg)
    return out
