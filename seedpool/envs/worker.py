"""The loop a worker (process or thread) runs: take env ids, step them, publish them."""

from __future__ import annotations

import ctypes
import os
import signal
import traceback
from time import perf_counter
from dataclasses import dataclass
from typing import Any, Callable

from seedpool.envs.buffers import FAILED
from seedpool.envs.errors import EnvFailure
from seedpool.envs.calls import run_call
from seedpool.envs.channel import CALL, CLOSE, ENV_MASK, OP_SHIFT, OPTIONS, Doorbell, Ring, spin_until
from seedpool.envs.runner import EnvRunner

OP_NAMES = {0: "step", 1: "reset", 3: "reset"}
PUBLISH_EVERY_S = 20e-6


@dataclass
class Completions:
    """Where every worker publishes finished env ids, and how the pool is woken."""

    ring: Ring  # many producers, guarded by `lock`
    lock: Any
    bell: Doorbell
    target: Any  # memoryview of one int64: ring head the pool is waiting for

    def publish(self, env_ids: list[int]) -> None:
        """Publish finished envs; wake the pool if that completes what it waits for."""
        with self.lock:  # the release is also the fence that orders head before target
            self.ring.push(env_ids)
        if self.ring.head[0] >= self.target[0]:
            self.target[0] = 1 << 62  # one wake-up per wait: later publishers need not ring
            self.bell.ring()


@dataclass
class WorkerLink:
    """One worker's command ring and doorbell, how it reports env errors, and how it reads
    the Python objects the pool sends it (reset options)."""

    commands: Ring
    bell: Doorbell
    # Env errors (env id, op, traceback) and call outcomes (env id, "call", Outcome): a pipe's
    # send (processes), a queue's put (threads).
    report: Callable[[tuple[int, str, Any]], None]
    spin_s: float
    read_payload: Callable[[], Any]  # blocks until the pool's next object arrives


def serve(runner: EnvRunner, link: WorkerLink, done: Completions, parent_pid: int | None) -> None:
    """Run commands until CLOSE (or until the parent process is gone)."""
    commands, status = link.commands, runner.b.status
    run = runner.run
    has_work = lambda: commands.available() > 0  # noqa: E731
    while True:
        n = commands.available()
        if n == 0:
            if link.spin_s and spin_until(has_work, link.spin_s):
                continue
            if not link.bell.wait(1.0) and parent_pid is not None and os.getppid() != parent_pid:
                return  # orphaned: the pool's process died without closing us
            continue
        finished: list[int] = []
        last = perf_counter()
        for entry in commands.take(n):
            op, i = entry >> OP_SHIFT, entry & ENV_MASK
            if op == CLOSE:
                return
            if op == OPTIONS:
                options, ids = link.read_payload()
                runner.reset_options.update((j, options) for j in ids)
                continue
            if op == CALL:
                fn, args = link.read_payload()
                link.report((i, "call", run_call(runner.envs[i], fn, args, pickled=parent_pid is not None)))
                continue
            try:
                status[i] = run(op, i)
            except Exception as exc:  # noqa: BLE001 - reported to the pool, which raises it
                status[i] = FAILED
                runner.mark_for_reset(i)
                link.report((i, OP_NAMES.get(op, "?"), EnvFailure.of(traceback.format_exc(), exc)))
            finished.append(i)
            # Slow envs are published one by one (async callers get them as soon as they are
            # done); cheap ones in groups, so publishing does not cost more than stepping.
            now = perf_counter()
            if now - last > PUBLISH_EVERY_S:
                done.publish(finished)
                finished = []
                last = now
        if finished:
            done.publish(finished)


def process_main(
    make_runner, link: WorkerLink, done: Completions, ready, index: int, parent_pid: int, pdeathsig: bool
) -> None:
    """Entry point of a forked worker process."""
    if pdeathsig:
        # Linux sends it when the *thread* that forked us exits, so the pool asks for it only
        # when created on the main thread; otherwise the idle loop's getppid() check serves.
        _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the pool's to handle
    try:
        runner = make_runner()
    except Exception:  # noqa: BLE001
        link.report((-1, "make", traceback.format_exc()))
        os._exit(1)
    ready[index] = 1
    done.bell.ring()
    try:
        serve(runner, link, done, parent_pid)
    finally:
        runner.close()
    os._exit(0)  # skip atexit handlers inherited from the parent


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
