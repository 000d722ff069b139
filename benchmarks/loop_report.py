"""The tables of benchmarks/loop.py: per case, and the head with the ratio summaries.

An engine named `name@T` ran its loop with torch on T intra-op threads (the others on
torch's default); its ratio is given to the baseline as the user runs it (torch's default)
and to the baseline on the same threads, where that ran too.
"""

from __future__ import annotations

import argparse
import statistics

import torch

Runs = dict[str, list[dict[str, float]]]


def threads_of(engine: str) -> int | None:
    """T of an engine named `name@T`, None for torch's default."""
    return int(engine.split("@")[1]) if "@" in engine else None


def same_threads_base(engine: str, base: str) -> str:
    """The baseline run on the engine's own torch threads."""
    t = threads_of(engine)
    return base if t is None else f"{base}@{t}"


def paired_ratio(runs: Runs, engine: str, base: str) -> float | None:
    """Median over rounds of engine's rate over base's in the same round."""
    if base not in runs or engine not in runs:
        return None
    return statistics.median(a["sps"] / b["sps"] for a, b in zip(runs[engine], runs[base]))


def table(name: str, base: str, runs: Runs, layouts: dict[str, str]) -> list[str]:
    """One markdown table for a case."""
    med = {e: statistics.median(r["sps"] for r in v) for e, v in runs.items()}
    by_threads = any("@" in e for e in runs)
    extra = f" × {base} on its threads (paired) |" if by_threads else ""
    lines = [f"## {name}", "",
             f"| engine | steps/s (median) | min–max | × {base} (paired) |{extra} act % | env % | learn % | layout |",
             "| --- | ---: | ---: | ---: |" + (" ---: |" if by_threads else "") + " ---: | ---: | ---: | --- |"]
    for e, v in runs.items():
        sps = [r["sps"] for r in v]
        cells = [paired_ratio(runs, e, base)]
        if by_threads:
            cells.append(paired_ratio(runs, e, same_threads_base(e, base)))
        ratios = " | ".join(f"{x:.2f}" if x is not None else "" for x in cells)
        shares = [f"{statistics.median(r[k] for r in v):.0f}" for k in ("act%", "env%", "learn%")]
        lines.append(f"| {e} | {med[e]:,.0f} | {min(sps):,.0f}–{max(sps):,.0f} | {ratios} | "
                     f"{' | '.join(shares)} | {layouts.get(e, '')} |")
    return lines + [""]


Summary = dict[str, tuple[str, Runs]]  # case name -> (baseline, its runs)


def summary(cases: Summary, same_threads: bool) -> list[str]:
    """One table of every case's auto/overlap engines ÷ baseline (`same_threads`: ÷ the
    baseline on each engine's own torch threads, for the `name@T` engines only)."""
    engines: list[str] = []
    for _, runs in cases.values():
        engines += [e for e in runs if e.startswith(("auto", "overlap")) and e not in engines
                    and (threads_of(e) is not None or not same_threads)]
    if not engines:
        return []
    title = ("## `name@T` engines ÷ the baseline on the same torch threads" if same_threads
             else "## Engines ÷ the baseline on torch's default threads (as a user runs it)")
    lines = ["", title, "", "Medians of per-round ratios.", "",
             "| case | baseline | " + " | ".join(engines) + " |", "| --- | --- |" + " ---: |" * len(engines)]
    columns: dict[str, list[float]] = {e: [] for e in engines}
    for name, (base, runs) in cases.items():
        cells = []
        for e in engines:
            x = paired_ratio(runs, e, same_threads_base(e, base) if same_threads else base)
            cells.append("" if x is None else f"{x:.2f}")
            if x is not None:
                columns[e].append(x)
        lines.append(f"| {name} | {base} | " + " | ".join(cells) + " |")
    meds = [f"**{statistics.median(v):.2f}**" if v else "" for v in columns.values()]
    return lines + ["| **median** | | " + " | ".join(meds) + " |"]


def header(args: argparse.Namespace, info: dict[str, str], loads: tuple[float, float], cases: Summary) -> list[str]:
    """The report's head: machine, versions, method, load, and the ratio summaries."""
    head = ["# seedpool inside a training loop", ""]
    head += [f"- **{k}:** {v}" for k, v in info.items()]
    shared = ("other jobs were running when it started: compare ratios, not absolute rates" if loads[0] > 0.5
              else "the machine was quiet when it started")
    head += [f"- **torch threads:** {torch.get_num_threads()} (an engine named `name@T`: T for its loop)",
             f"- **method:** per case every engine is built side by side and warmed up with one iteration "
             f"(PPO cases: a rollout and an update, rollouts x{args.rollout_scale:g} the default lengths; "
             "off-policy cases: that many vector steps, each followed by one gradient step), then "
             f"{args.repeats} rounds time one iteration of each engine, in an order rotated every round. "
             "steps/s: median and min–max over rounds; × baseline: the median over rounds of the ratio "
             "to the baseline's rate in the same round. act/env/learn: share of the loop's wall time in "
             "the policy forward, the env step, the update (overlap: env includes waiting in recv after "
             "the update).",
             f"- **load average (1 min) before/after:** {loads[0]:.2f} / {loads[1]:.2f}; {shared}."]
    if args.note:
        head.append(f"- **note:** {args.note}")
    return head + summary(cases, False) + summary(cases, True)
