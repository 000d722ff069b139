"""The thread behind an actor loop or the learner: start, join, and a pause gate between steps."""
from __future__ import annotations

import threading
from typing import Callable


class ThreadLoop:
    """A daemon thread running ``target``; `held` makes its loop wait while ``running`` is clear."""

    def __init__(self, target: Callable[[], None], name: str, running: threading.Event | None) -> None:
        self.running = running
        self._thread = threading.Thread(target=target, name=name, daemon=True)

    def start(self):
        """Start the thread."""
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (no-op if it never started: the serial twin)."""
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def held(self) -> bool:
        """True (after a short wait) while the run is paused: the loop should check its stop flag and come back."""
        if self.running is not None and not self.running.is_set():
            self.running.wait(0.2)
            return True
        return False
