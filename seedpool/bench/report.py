"""The benchmark's markdown report: machine and versions, one table per group, memory, targets."""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psutil

from seedpool.bench.cases import Target
from seedpool.bench.harness import CaseResult, Group, Timing
from seedpool.envs.make import usable_cores

PACKAGES = ("numpy", "gymnasium", "ale-py", "envpool", "torch", "opencv-python-headless", "psutil")
THROUGHPUT_COLUMNS = ("engine", "envs", "steps/s (median)", "min–max")
MEMORY_COLUMNS = ("group", "engine", "envs", "workers", "worker RSS (MiB)", "RSS/env (MiB)", "PSS/env (MiB)",
                  "USS/env (MiB)")
TARGET_COLUMNS = ("group", "check", "measured", "required", "met")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name with its family, model and vector instructions (from /proc/cpuinfo
    where there is one): virtual machines of one name differ underneath ("AMD EPYC" has been
    CPUs of different families, with and without AVX-512), and torch's speed follows them."""
    try:
        fields: dict[str, str] = {}
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
            if key.strip() == "flags":
                break
    except OSError:
        return platform.processor() or "unknown"
    name = fields.get("model name", platform.processor() or "unknown")
    if "flags" not in fields:  # not x86 (an Arm cpuinfo lists "Features")
        return name
    flags = set(fields["flags"].split())
    if "avx512f" in flags:
        simd = "AVX-512" + (" with BF16" if "avx512_bf16" in flags else ", no BF16")
    else:
        simd = "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    if "amx_bf16" in flags:
        simd += ", AMX"
    return f"{name} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}; {simd})"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown (no commits)"


def machine_info() -> dict[str, str]:
    """Date, machine, OS and package versions, to print next to every figure."""
    usable = usable_cores()
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"nproc = {usable}; {cpu_model()}; "
                   f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM",
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "seedpool": _git_commit(),
    }
    info.update({name: _version(name) for name in PACKAGES})
    return info


def write_markdown(path: Path, lines: Sequence[str]) -> str:
    """A benchmark's report: ``lines`` written to ``path`` (its folder made) and printed."""
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
    return text


def _rate(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else ""


CELL_CHARS = 100
"""Longer error texts are cut in the table; the notes carry them whole."""


def _cell(result: CaseResult) -> str:
    if result.error and result.median is None:
        text = result.error
        return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"
    return _rate(result.median)


def group_table(group: Group, results: Sequence[CaseResult]) -> str:
    """One markdown table: each case's median throughput, spread, and ratios to the baselines."""
    by_name = {r.name: r for r in results}
    columns = list(THROUGHPUT_COLUMNS)
    if group.frames_per_step > 1:
        columns.append("frames/s")
    columns += [f"× {b}" for b in group.baselines]
    lines = [_row(columns), _row(["---"] + ["---:"] * (len(columns) - 1))]
    for r in results:
        spread = f"{_rate(min(r.rates))}–{_rate(max(r.rates))}" if r.rates else ""
        row = [r.name, str(r.num_envs), _cell(r), spread]
        if group.frames_per_step > 1:
            row.append(_rate(r.median * group.frames_per_step) if r.median else "")
        row += [_ratio(r, by_name.get(b)) for b in group.baselines]
        lines.append(_row(row))
    stopped = [f"`{r.name}`: {r.error}" for r in results if r.error and r.median is not None]
    if stopped:
        lines.append("")
        lines.append("Failed after some windows (the median of the finished ones stands): " + "; ".join(stopped))
    return "\n".join(lines)


def _ratio(result: CaseResult, baseline: CaseResult | None) -> str:
    if baseline is None or not result.median or not baseline.median:
        return ""
    return f"{result.median / baseline.median:.2f}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


def memory_table(measured: Sequence[tuple[Group, Sequence[CaseResult]]]) -> str:
    """Per-env memory of every case that ran worker processes."""
    mib = 2**20
    lines = [_row(MEMORY_COLUMNS), _row(["---"] * 2 + ["---:"] * (len(MEMORY_COLUMNS) - 2))]
    for group, results in measured:
        for r in results:
            if r.worker_rss is None:
                continue
            per_env = [(r.worker_rss or 0), (r.worker_pss or 0), (r.worker_uss or 0)]
            lines.append(_row([group.key, r.name, str(r.num_envs), str(r.num_workers),
                               f"{r.worker_rss / mib:,.0f}", *(f"{b / mib / r.num_envs:.1f}" for b in per_env)]))
    return "\n".join(lines)


def target_table(targets: Sequence[Target], measured: Sequence[tuple[Group, Sequence[CaseResult]]]) -> str:
    """The target ratios, each with the measured value and whether it is met."""
    found = {(g.key, r.name): r for g, results in measured for r in results}
    lines = [_row(TARGET_COLUMNS), _row(["---", "---", "---:", "---:", "---"])]
    for t in targets:
        case, base = found.get((t.group, t.case)), found.get((t.group, t.baseline))
        if case is None and base is None:
            continue  # the group was not run
        ratio = case.median / base.median if case and base and case.median and base.median else None
        met = "not run" if ratio is None else ("yes" if ratio >= t.at_least else "**no**")
        check = f"{t.case} / {t.baseline}" + (f" ({t.why})" if t.why else "")
        lines.append(_row([t.group, check, f"{ratio:.2f}" if ratio else "", f"≥ {t.at_least:g}", met]))
    return "\n".join(lines)


def render(info: dict[str, str], timing: Timing, measured: Sequence[tuple[Group, Sequence[CaseResult]]],
           targets: Sequence[Target], notes: Sequence[str] = ()) -> str:
    """The whole report as markdown."""
    out = ["# seedpool engine benchmark", ""]
    out += [f"- **{key}:** {value}" for key, value in info.items()]
    out += [
        f"- **method:** per group, every case is built and warmed up for {timing.warmup:g} s, then "
        f"{timing.repeats} timed windows of {timing.window:g} s per case, taken round-robin across the "
        "cases (each repeat starts one case later); the median window is reported, min–max is the spread. "
        "Random actions are drawn up front with numpy and cycled. For `_async` engines N is the batch "
        "size and the engine holds 2N envs. EnvPool and ale-py's vector env use one thread per core (at most one per env). "
        "Atari frames/s = 4 × steps/s. Ratios compare medians from the same run.",
        "",
    ]
    for group, results in measured:
        out += [f"## {group.title}", "", group_table(group, results), ""]
    if any(r.worker_rss is not None for _, results in measured for r in results):
        out += ["## Memory of worker processes (after warm-up)", "",
                "Summed over the engine's worker processes, divided by its envs. RSS counts shared pages "
                "(libraries, shared memory, pages inherited by fork) once per process; PSS splits them among "
                "the processes that map them; USS counts only pages no other process maps.", "",
                memory_table(measured), ""]
    out += ["## Targets", "", target_table(targets, measured), ""]
    out += ["## Notes", ""]
    out += [f"- {n}" for n in notes]
    out += [f"- not run: {n}" for n in _not_run(measured)] or ["- every case ran."]
    return "\n".join(out) + "\n"


def _not_run(measured: Sequence[tuple[Group, Sequence[CaseResult]]]) -> list[str]:
    """Cells without a figure, grouped by reason: `reason: group case, case; group case`."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for group, results in measured:
        for r in results:
            if r.error and r.median is None:
                by_reason.setdefault(r.error, {}).setdefault(group.key, []).append(f"`{r.name}`")
    return [f"{reason} — " + "; ".join(f"{key}: {', '.join(names)}" for key, names in where.items())
            for reason, where in by_reason.items()]
