"""Interleaved timing of benchmark cases: warm-up, then repeated windows taken round-robin.

A *case* is one engine on one task at one size: `setup()` builds the engine and returns a
`Stepper`; the harness calls `stepper.step()` until a window of wall time has passed, and
`stepper.close()` at the end. All cases of a group are alive at once and their windows are
interleaved (case A, B, C, then A, B, C again, starting one later each repeat), so that a
burst of load from elsewhere on a noisy machine touches every case about equally.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import psutil


class Stepper(Protocol):
    """One engine, built and reset, ready to be stepped with pre-drawn actions."""

    env_steps: int
    """Env steps that one call of `step()` makes (the batch size)."""

    def step(self) -> None:
        """Make one batched step (or one send/recv round) with the next pre-drawn actions."""

    def close(self) -> None:
        """Release the engine: join workers, free shared memory."""


class Unavailable(Exception):
    """A case cannot run here for a known, benign reason (e.g. an optional package is missing)."""


@dataclass(frozen=True)
class Case:
    """One engine on one task at one size."""

    name: str
    """Row label, e.g. `seedpool_auto_async`."""
    setup: Callable[[], Stepper]
    """Builds, resets and returns the engine's stepper; may raise `Unavailable`."""
    num_envs: int
    """Envs the engine holds (async engines hold twice the batch); divides worker memory."""
    threaded: bool = False
    """Starts native threads in this process. Such cases are set up after the others, so that
    engines which fork workers never fork a process with foreign threads running."""


@dataclass(frozen=True)
class Group:
    """Cases measured together, interleaved, and shown as one table."""

    key: str
    """Short id used by targets, e.g. `cartpole-8`."""
    title: str
    """Table heading, e.g. `CartPole-v1, N=8`."""
    cases: Sequence[Case]
    baselines: tuple[str, ...] = ()
    """Case names that every row is divided by, shown as ratio columns."""
    frames_per_step: int = 1
    """Emulator frames per env step (Atari: frame skip 4); >1 adds a frames/s column."""


@dataclass(frozen=True)
class Timing:
    """How long to warm up and measure."""

    warmup: float = 1.0
    """Seconds each case runs untimed after setup."""
    window: float = 2.0
    """Seconds of one timed window."""
    repeats: int = 7
    """Timed windows per case; the median is reported."""


@dataclass
class CaseResult:
    """What the harness measured for one case."""

    name: str
    num_envs: int
    rates: list[float] = field(default_factory=list)
    """Env steps per second, one per window."""
    error: str | None = None
    """`error: ...` or `n/a (...)` when the case could not run (or stopped running)."""
    num_workers: int = 0
    """Worker processes the engine started (0 for in-process and threaded engines)."""
    worker_rss: int | None = None
    """Bytes of resident memory, summed over the worker processes, after warm-up."""
    worker_uss: int | None = None
    """Bytes of memory unique to the worker processes (not shared with anyone), summed."""
    worker_pss: int | None = None
    """Bytes of proportional set size (shared pages split among their users), summed."""

    @property
    def median(self) -> float | None:
        """Median env steps per second over the windows, or None when nothing was measured."""
        return statistics.median(self.rates) if self.rates else None


# Processes that multiprocessing starts once and keeps for the interpreter's life; they are
# no engine's workers and not a leak.
_INFRASTRUCTURE = ("resource_tracker", "forkserver", "semaphore_tracker")


def _worker_processes() -> dict[int, psutil.Process]:
    """Our descendant processes, less multiprocessing's shared helpers."""
    me = psutil.Process()
    found = {}
    for proc in me.children(recursive=True):
        try:
            # Only our direct children can be the helpers; a forkserver's own children
            # (which inherit its command line) are real workers.
            helper = proc.ppid() == me.pid and any(n in " ".join(proc.cmdline()) for n in _INFRASTRUCTURE)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if not helper:
            found[proc.pid] = proc
    return found


def _measure_memory(result: CaseResult, procs: Sequence[psutil.Process]) -> None:
    """Sum RSS and USS of the case's worker processes into `result`."""
    rss = uss = pss = 0
    for proc in procs:
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss += info.rss
        uss += info.uss
        pss += getattr(info, "pss", 0)  # Linux only
    result.num_workers = len(procs)
    if procs:
        result.worker_rss, result.worker_uss, result.worker_pss = rss, uss, pss


def time_window(stepper: Stepper, seconds: float) -> float:
    """Step until `seconds` of wall time have passed; return env steps per second."""
    step = stepper.step
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        step()
        calls += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    return calls * stepper.env_steps / (now - start)


def _describe(exc: BaseException) -> str:
    """One line for a table cell; `n/a` for benign absence, `error` otherwise."""
    if isinstance(exc, Unavailable):
        return f"n/a ({exc})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"error: {type(exc).__name__}: {text}"[:300]


def _safe_close(stepper: Stepper, result: CaseResult, log: Callable[[str], None]) -> None:
    """Close a stepper; a failure to close is recorded, never raised."""
    try:
        stepper.close()
    except Exception as exc:  # a broken close must not stop the other cases' teardown
        log(f"  {result.name}: close failed: {exc!r}")
        if result.error is None:
            result.error = _describe(exc).replace("error:", "error on close:", 1)


def _start(case: Case, timing: Timing, log: Callable[[str], None]) -> tuple[CaseResult, Stepper | None]:
    """Set up and warm up one case; on failure the result carries the error and no stepper."""
    result = CaseResult(case.name, case.num_envs)
    before = set(_worker_processes())
    stepper = None
    try:
        stepper = case.setup()
        if timing.warmup > 0:
            time_window(stepper, timing.warmup)
    except BaseException as exc:  # Ctrl-C during warm-up must still close what was built
        if stepper is not None:
            _safe_close(stepper, result, log)
        if not isinstance(exc, Exception):
            raise
        result.error = _describe(exc)
        log(f"  {case.name}: {result.error}")
        return result, None
    new = [p for pid, p in _worker_processes().items() if pid not in before]
    _measure_memory(result, new)
    return result, stepper


def run_group(group: Group, timing: Timing, log: Callable[[str], None] | None = None) -> list[CaseResult]:
    """Measure every case of `group`, interleaved; always closes everything it set up."""
    log = log or _stderr
    log(f"[{group.title}] setting up {len(group.cases)} cases")
    results = [CaseResult(case.name, case.num_envs) for case in group.cases]
    live: dict[int, Stepper] = {}
    try:
        setup_order = sorted(range(len(group.cases)), key=lambda i: group.cases[i].threaded)
        for index in setup_order:
            results[index], stepper = _start(group.cases[index], timing, log)
            if stepper is not None:
                live[index] = stepper
        for repeat in range(timing.repeats):
            order = sorted(live)
            shift = repeat % len(order) if order else 0
            for index in order[shift:] + order[:shift]:
                _run_window(index, results[index], live, timing, log)
            log(f"[{group.title}] repeat {repeat + 1}/{timing.repeats} done")
    finally:
        for index, stepper in live.items():
            _safe_close(stepper, results[index], log)
    return results


def _run_window(
    index: int, result: CaseResult, live: dict[int, Stepper], timing: Timing, log: Callable[[str], None]
) -> None:
    """Time one window of one live case; a case that fails is closed and dropped."""
    try:
        result.rates.append(time_window(live[index], timing.window))
    except Exception as exc:
        result.error = _describe(exc)
        log(f"  {result.name}: {result.error}")
        _safe_close(live.pop(index), result, log)


def reap_leftovers(timeout: float = 5.0) -> list[str]:
    """Wait for our worker processes to exit; kill and name those that outlive `timeout`."""
    procs = list(_worker_processes().values())
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    leaked = []
    for proc in alive:
        try:
            leaked.append(f"pid {proc.pid} ({' '.join(proc.cmdline())[:80]})")
            proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    psutil.wait_procs(alive, timeout=timeout)
    return leaked


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
