"""What a `seedpool tune` experiment leaves in its folder, from the members' reports.

- ``reports.jsonl``: every report as it came (member, env steps, metric, hyperparameters, the
  member whose weights it took at its last restart, its run folder), appended live;
- ``results.csv``: a row per member per report: ``member, env_steps, metric``, then one column
  per tuned hyperparameter (the values the member trained with up to that report), appended live;
- ``best.json``: ``member``, ``run_dir``, ``metric`` and ``history``, the hyperparameters the
  best member's weights were trained with, step by step, through the members it copied;
- ``population.png``: every member's metric against its env steps, exploits marked.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

REPORTS = "reports.jsonl"
RESULTS = "results.csv"
BEST = "best.json"
PLOT = "population.png"


def append_report(folder: Path, names: list[str], report: dict[str, Any]) -> None:
    """Add one report to reports.jsonl and its row to results.csv."""
    folder = Path(folder)
    with open(folder / REPORTS, "a") as f:
        f.write(json.dumps(report) + "\n")
    path = folder / RESULTS
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["member", "env_steps", "metric", *names])
        hp = report["hyperparameters"]
        writer.writerow([report["member"], report["env_steps"], report["metric"], *(hp.get(n) for n in names)])


def load_reports(folder: Path) -> list[dict[str, Any]]:
    """Every report of the experiment, earlier sessions' included, in the order they came."""
    path = Path(folder) / REPORTS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_reports(reports: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each member's report at its most env steps."""
    last: dict[int, dict[str, Any]] = {}
    for r in reports:
        if r["member"] not in last or r["env_steps"] >= last[r["member"]]["env_steps"]:
            last[r["member"]] = r
    return dict(sorted(last.items()))


def best_member(reports: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    """The final report of the member that ends best (NaN metrics rank last)."""
    finals = [r for r in final_reports(reports).values()]
    if not finals:
        return None
    sign = 1.0 if mode == "max" else -1.0
    return max(finals, key=lambda r: sign * r["metric"] if math.isfinite(r["metric"]) else -math.inf)


def history(reports: list[dict[str, Any]], member: int) -> list[dict[str, Any]]:
    """The hyperparameters ``member``'s final weights were trained with: from the start, through
    every member it copied (PBT's exploit), one entry per stretch of env steps with the same values."""
    chain: list[dict[str, Any]] = []
    until = math.inf
    seen = set()
    while member is not None and (member, until) not in seen:
        seen.add((member, until))
        mine = sorted((r for r in reports if r["member"] == member and r["env_steps"] <= until),
                      key=lambda r: r["env_steps"])
        copy = next((r for r in reversed(mine) if r.get("copied_from") is not None), None)
        since = [r for r in mine if copy is None or r["env_steps"] >= copy["env_steps"]]
        chain = [{"member": member, "env_steps": r["env_steps"], "hyperparameters": r["hyperparameters"],
                  "copied_from": r.get("copied_from")} for r in since] + chain
        if copy is None:
            break
        member, until = copy["copied_from"], copy["copied_at"]
    out: list[dict[str, Any]] = []
    start = 0
    for entry in chain:  # one entry per stretch: where values or the member change
        if out and out[-1]["member"] == entry["member"] and out[-1]["hyperparameters"] == entry["hyperparameters"] \
                and entry["copied_from"] is None:
            out[-1]["to_env_steps"] = entry["env_steps"]
        else:
            out.append({"member": entry["member"], "from_env_steps": start, "to_env_steps": entry["env_steps"],
                        "hyperparameters": entry["hyperparameters"], "copied_from": entry["copied_from"]})
        start = entry["env_steps"]
    return out


def write_best(folder: Path, reports: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    """best.json: the best member, its run folder, its final metric and its history."""
    best = best_member(reports, mode)
    if best is None:
        return None
    out = {"member": best["member"], "run_dir": best["run_dir"], "metric": best["metric"],
           "history": history(reports, best["member"])}
    (Path(folder) / BEST).write_text(json.dumps(out, indent=2) + "\n")
    return out


def table(reports: list[dict[str, Any]], names: list[str], metric: str, mode: str) -> str:
    """The results table: each member's final report, then the best member's history."""
    finals = final_reports(reports)
    if not finals:
        return "no member reported yet"
    header = ["member", "env steps", metric, *names, "exploits"]
    rows = [[str(m), f"{r['env_steps']:,}", f"{r['metric']:.4g}",
             *(fmt(r["hyperparameters"].get(n)) for n in names),
             str(sum(1 for x in reports if x["member"] == m and x.get("copied_from") is not None))]
            for m, r in finals.items()]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in [header, *rows]]
    best = best_member(reports, mode)
    lines.append(f"best: member {best['member']} ({metric} {best['metric']:.4g}), run folder {best['run_dir']}")
    lines.append("its hyperparameters over training (through the members it copied):")
    for h in history(reports, best["member"]):
        values = ", ".join(f"{n} {fmt(h['hyperparameters'].get(n))}" for n in names)
        lines.append(f"  env steps {h['from_env_steps']:>10,} - {h['to_env_steps']:<10,} member {h['member']}: {values}")
    return "\n".join(lines)


def plot_population(folder: Path, reports: list[dict[str, Any]], metric: str) -> Path | None:
    """population.png: each member's metric against env steps; an x where it took another's weights."""
    if not reports:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for member in sorted({r["member"] for r in reports}):
        mine = sorted((r for r in reports if r["member"] == member), key=lambda r: r["env_steps"])
        (line,) = ax.plot([r["env_steps"] for r in mine], [r["metric"] for r in mine], label=f"member {member}")
        copies = [r for r in mine if r.get("copied_from") is not None]
        ax.scatter([r["env_steps"] for r in copies], [r["metric"] for r in copies], marker="x",
                   color=line.get_color())
    ax.set_xlabel("env steps (each member's)")
    ax.set_ylabel(metric)
    ax.set_title("population (x: after copying a better member)", fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    out = Path(folder) / PLOT
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def fmt(value: Any) -> str:
    """A hyperparameter value as the table prints it."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
