"""Progress display: a live rich bar on a terminal, periodic log lines otherwise."""
from __future__ import annotations

import math
import sys
import time
from typing import TextIO


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressDisplay:
    """Shows steps, SPS, recent return and time left; ``mode``: auto, rich, log or off."""

    def __init__(self, total_steps: int, start_step: int = 0, mode: str = "auto",
                 log_every_s: float = 5.0, stream: TextIO | None = None, title: str = "train") -> None:
        self.stream = stream or sys.stdout
        if mode == "auto":
            mode = "rich" if self.stream.isatty() else "log"
        self.mode, self.total, self.log_every_s = mode, total_steps, log_every_s
        self._last_log = time.monotonic()
        self._bar = None
        if mode == "rich":
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[sps]} SPS"), TextColumn("return {task.fields[ret]}"),
                TimeRemainingColumn(), console=Console(file=self.stream), transient=False,
            )
            self._task = self._bar.add_task(title, total=total_steps, completed=start_step, sps="-", ret="-")
            self._bar.start()

    def print(self, message: str) -> None:
        """A line of text that does not fight the live bar."""
        if self._bar is not None:
            self._bar.console.print(message, highlight=False, markup=False)
        else:
            print(message, file=self.stream, flush=True)

    def update(self, step: int, sps: float, recent_return: float, force: bool = False) -> None:
        """Report progress; in log mode a line is printed at most every ``log_every_s``."""
        ret = "-" if math.isnan(recent_return) else f"{recent_return:.1f}"
        if self._bar is not None:
            self._bar.update(self._task, completed=step, sps=f"{sps:,.0f}", ret=ret)
            return
        now = time.monotonic()
        if self.mode != "log" or (not force and now - self._last_log < self.log_every_s):
            return
        self._last_log = now
        # A rollout may end past the budget: nothing is left then, never a negative time.
        left = max(self.total - step, 0) / sps if sps > 0 else float("nan")
        pct = 100.0 * step / max(self.total, 1)
        print(f"step {step:,}/{self.total:,} ({pct:.0f}%) | {sps:,.0f} SPS | return {ret} (last 20) "
              f"| {_duration(left)} left", file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the live bar (leaving its last state on screen)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
