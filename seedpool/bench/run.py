"""`seedpool bench`: parse options, run the chosen groups, write the markdown report."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from seedpool.bench.cases import TARGETS, cartpole_group, pong_group, uneven_group
from seedpool.bench.harness import CaseResult, Group, Timing, reap_leftovers, run_group
from seedpool.bench.report import machine_info, render
from seedpool.errors import ConfigError

TASKS = ("cartpole", "pong", "uneven")
QUICK = Timing(warmup=0.2, window=0.5, repeats=2)


@dataclass
class BenchArgs:
    """Engine throughput: seedpool against a for-loop, gymnasium, EnvPool and ale-py, side by side."""

    tasks: str = ",".join(TASKS)
    """Comma-separated tasks: cartpole, pong, uneven."""
    sizes: str = "8,32"
    """CartPole batch sizes N, comma-separated (async engines hold 2N envs)."""
    pong_sizes: str = "8"
    """Pong batch sizes N, comma-separated (async engines hold 2N envs): more for machines with more cores."""
    cases: str = ""
    """Comma-separated case names to keep, e.g. `loop,seedpool_auto` (default: all)."""
    quick: bool = False
    """Smoke run: short windows, 2 repeats, CartPole at N=8 only."""
    warmup: float | None = None
    """Seconds of untimed stepping per case before the windows (default 1, quick 0.2)."""
    window: float | None = None
    """Seconds per timed window (default 5, quick 0.5)."""
    repeats: int | None = None
    """Timed windows per case; the median is reported (default 7, quick 2)."""
    out: str | None = None
    """Write the markdown report here (default: print it)."""


def timing_of(args: BenchArgs) -> Timing:
    """The warm-up/window/repeats to use: explicit flags win over `--quick` and the defaults."""
    base = QUICK if args.quick else Timing()
    timing = Timing(
        warmup=base.warmup if args.warmup is None else args.warmup,
        window=base.window if args.window is None else args.window,
        repeats=base.repeats if args.repeats is None else args.repeats,
    )
    if timing.window <= 0 or timing.repeats < 1 or timing.warmup < 0:
        raise ConfigError(f"expected window > 0, repeats >= 1, warmup >= 0; got {timing}")
    return timing


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _sizes(args: BenchArgs) -> list[int]:
    """CartPole sizes: `--sizes`, or N=8 alone for `--quick` when no sizes were given."""
    if args.quick and args.sizes == BenchArgs.sizes:
        return [8]
    return _positive_ints(args.sizes, "--sizes")


def _positive_ints(text: str, flag: str) -> list[int]:
    try:
        sizes = [int(s) for s in _split(text)]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated positive integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise ConfigError(f"{flag} expects comma-separated positive integers, got {text!r}")
    return sizes


def groups_of(args: BenchArgs) -> list[Group]:
    """The groups to run, with cases filtered by `--cases`."""
    tasks = _split(args.tasks)
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise ConfigError(f"unknown task(s) {unknown}; expected some of {list(TASKS)}")
    groups: list[Group] = []
    for task in tasks:
        if task == "cartpole":
            groups += [cartpole_group(n) for n in _sizes(args)]
        elif task == "pong":
            groups += [pong_group(n) for n in _positive_ints(args.pong_sizes, "--pong-sizes")]
        else:
            groups.append(uneven_group(8))
    keep = set(_split(args.cases))
    if keep:
        groups = [Group(g.key, g.title, [c for c in g.cases if c.name in keep], g.baselines, g.frames_per_step)
                  for g in groups]
    return [g for g in groups if g.cases]


def run(args: BenchArgs) -> str:
    """Run the benchmark described by `args`; return the markdown report."""
    timing, groups = timing_of(args), groups_of(args)
    if not groups:
        raise ConfigError(f"no case left to run (tasks={args.tasks!r}, cases={args.cases!r})")
    info = machine_info()
    info["selection"] = (f"tasks={args.tasks}; CartPole sizes={_sizes(args)}; Pong sizes={args.pong_sizes}; "
                         f"cases={args.cases or 'all'}")
    load_before = os.getloadavg()
    measured: list[tuple[Group, list[CaseResult]]] = []
    notes: list[str] = []
    for group in groups:
        measured.append((group, run_group(group, timing)))
        leaked = reap_leftovers()
        if leaked:
            notes.append(f"`{group.key}`: processes still alive after teardown (killed): {', '.join(leaked)}")
    load_after = os.getloadavg()
    notes.append(f"load average (1/5/15 min) before: {_load(load_before)}; after: {_load(load_after)}")
    return render(info, timing, measured, TARGETS, notes)


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `seedpool bench`; returns the process exit code."""
    args = tyro.cli(BenchArgs, args=sys.argv[1:] if argv is None else argv, prog="seedpool bench")
    try:
        report = run(args)
    except ValueError as exc:
        print(f"seedpool bench: {exc}", file=sys.stderr)
        return 2
    if args.out:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report)
        print(f"wrote {path}", file=sys.stderr)
    else:
        print(report)
    return 0
