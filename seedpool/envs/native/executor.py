"""Runs a native family behind the pool: the `Executor` interface, on the pool's own buffers.

The pool's front (validation, env ids, in-flight bookkeeping, batching of results and
infos) is the same as for Python envs; only the envs' work differs. Where `EnvRunner`
steps env after env, this steps every env of a batch in one call of the family and keeps
the engine's per-env bookkeeping (elapsed steps, returns, autoreset, seeds) in arrays.
Envs are stepped in this process when the pool collects them, as the serial backend does;
a family with a fused step (`NativeEnv.step_autoreset`) does a whole batch in one compiled
call, split over threads from its `split_from` (threads.py). An async pool of a family with
background lanes (`NativeEnv.background_lanes`, `cfg.background`) instead starts each batch
on its lanes' threads when it is submitted (background.py).
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

import numpy as np

from seedpool.envs.buffers import Buffers
from seedpool.envs.channel import RESET, STEP, take_pending
from seedpool.envs.errors import env_error
from seedpool.envs.native.actions import ActionWriter
from seedpool.envs.native.background import BackgroundLanes, Job
from seedpool.envs.native.base import NativeEnv, Rows, select_rows
from seedpool.envs.native.bookkeeping import MODES, Book, account, clear_rows, load_numba
from seedpool.envs.native.threads import ShardThreads
from seedpool.envs.native.view import EnvView
from seedpool.envs.spec import TaskSpec


class NativeExecutor:
    """Steps a native family's envs in this process; answers what the pool asks an Executor."""

    def __init__(self, spec: TaskSpec, num_envs: int, buffers: Buffers, autoreset: str, cfg: Any):
        load_numba()
        self.cfg = cfg
        self.family: NativeEnv = spec.native
        self.num_envs = num_envs
        self.b = buffers
        self.same_step = autoreset == "same_step"
        self.autoreset = autoreset != "disabled"
        self.limit = spec.max_episode_steps or 0  # 0: no time limit
        self.local = None  # no env objects (the pool's `in_process_envs` answers None)
        self.workers: list[Any] = []
        self.restart_count = 0
        self.pending: list[tuple[int, list[int]]] = []  # submitted (op, env ids), run by wait()
        self.leftover: list[int] = []  # a failed batch's other envs, returned by the next wait
        self.reset_options: dict[int, Any] = {}
        self.needs_reset = np.ones(num_envs, np.bool_)
        self.restart_marks = np.zeros(num_envs, np.bool_)  # reset after a fault: report truncated
        self._marked = 0  # how many restart marks are set (none: skip looking)
        self._marks_lock = threading.Lock()  # lanes clear marks at once (background.py)
        self.elapsed = np.zeros(num_envs, np.int64)
        self.returns = np.zeros(num_envs, np.float64)
        self._rows = np.arange(num_envs)
        self._ended = np.empty(num_envs, np.int64)  # scratch: the rows whose episode ended
        # What a fused step (NativeEnv.step_autoreset) writes besides the family's state.
        self.book = Book(buffers.reward, buffers.terminated, buffers.truncated, buffers.elapsed_step,
                         buffers.episode_return, self.elapsed, self.returns, self.needs_reset, self.limit,
                         MODES[autoreset])
        self._final_obs = buffers.final_obs if buffers.final_obs is not None else buffers.obs[:0]
        # Threads that step shards of a batch at once (cfg.num_workers, chosen by native_config).
        # (A family that splits its step itself, `own_threads`, needs none of them.)
        self._threads = ShardThreads(cfg.num_workers) if cfg.num_workers > 1 and self.family.own_threads() is None \
            else None
        # An async pool's batches stepped in the background as soon as they are submitted.
        self._lanes = None
        if cfg.background is not None:
            shared = self.family.background_shared
            compiled = self.family.compiled_step(buffers.action, buffers.obs, self._final_obs, self.book) \
                if shared else None
            self._lanes = BackgroundLanes(self._run_part, cfg.background, shared, compiled)
        # Checks and copies flat action batches for the pool's send and for step_whole (None: nested).
        self.action_writer = ActionWriter(spec.action_space, buffers.action) \
            if isinstance(buffers.action, np.ndarray) else None
        self._seed_from_make()

    def _seed_from_make(self) -> None:
        """Give each env the generator of the seed `make` left for it, now: a fresh pool may be
        stepped without a reset (EnvPool's contract), and its first step's reset, an autoreset
        here, must start from the pool's seeds as the Python-env path's does. A later `reset()`
        without a seed then draws from these same generators, so it too matches that path."""
        b, fam = self.b, self.family
        given = np.flatnonzero(b.seed >= 0)
        for i, s in zip(given.tolist(), b.seed[given].tolist()):
            fam.seed(i, int(s))
        b.seed[given] = -1

    # -- the Executor interface -----------------------------------------------------------
    def submit(self, ids: list[int], op: int) -> None:
        """Start env ids with op STEP, RESET or RECOVER (they run when the pool waits, or at
        once on background lanes)."""
        if self._lanes is not None:
            # A step the family's fused step may take (as `_step` decides) goes to its compiled ring.
            self._lanes.submit(op, ids, op == STEP and not self._marked and not self.reset_options)
        else:
            self.pending.append((op, ids))

    def set_reset_options(self, options: Any, ids: list[int]) -> None:
        """Make `options` the reset options of the next RESET of envs `ids`."""
        self.reset_options.update((i, options) for i in ids)

    def call(self, i: int, fn: Any, args: tuple) -> Any:
        """`fn(view, *args)` on env i's read-only view (see view.py): a native family has no
        env objects."""
        return fn(EnvView(self.family, i), *args)

    def wait(self, n: int, timeout: float | None = None) -> list[int]:
        """Run submitted commands until `n` envs are done; their ids, oldest first.
        `timeout` applies to background lanes only (WaitTimeout, the envs stay in flight):
        otherwise the envs are stepped here, not waited for."""
        if self._lanes is not None:
            return self._lanes.wait(n, timeout, self._lane_fault)
        pending = self.pending
        if not self.leftover and len(pending) == 1 and len(pending[0][1]) == n:  # every sync step
            op, ids = pending.pop()
            self._run(op, ids)
            return ids
        got = self.leftover[:n]
        self.leftover = self.leftover[n:]
        while len(got) < n:
            if not pending:
                raise RuntimeError("internal error: nothing in flight to wait for")
            op, ids = take_pending(pending, n - len(got))
            self._run(op, ids)
            got += ids
        return got

    def drop_leftover(self) -> list[int]:
        """Forget completions kept back after an error (sync mode drops the failed batch)."""
        if self._lanes is not None:
            return self._lanes.drop_ready()
        dropped, self.leftover = self.leftover, []
        return dropped

    def close(self) -> None:
        """Stop the background and shard threads; close the family."""
        if self._lanes is not None:
            self._lanes.close()
        if self._threads is not None:
            self._threads.close()
        self.family.close()

    def step_whole(self, action: Any) -> bool:
        """A sync step of every env, from the pool's `step` with nothing in flight, without the
        general path's per-batch bookkeeping (ids, submit, wait): check and write the actions,
        one fused call. False, with nothing stepped, where the general path must run it (no fused
        step now, reset options or a fault to report, background lanes, nested actions, actions
        that are not an array of one row per env or are out of range)."""
        if (self.action_writer is None or self._lanes is not None or self._marked or self.reset_options
                or self.pending or self.leftover or not self.family.can_fuse()):
            return False
        if not self.action_writer.write(action):  # the general path checks it again and raises its error
            return False
        try:
            if self._threads is not None and self.num_envs >= self._threads.n:
                self._threads.run(self._fused, self._rows)
            else:
                self._fused(self._rows)
        except Exception as exc:
            raise self._fault(STEP, list(range(self.num_envs)), slice(None), exc, traceback.format_exc())  # noqa: B904
        return True

    # -- running commands -----------------------------------------------------------------
    def _run(self, op: int, ids: list[int]) -> None:
        """Run a batch in this thread; a failure restarts all of its envs (see `_fault`)."""
        sel = select_rows(ids, self.num_envs)
        try:
            self._run_part(op, sel, self._ended)
        except Exception as exc:
            self.leftover = ids[1:] + self.leftover
            raise self._fault(op, ids, sel, exc, traceback.format_exc())  # noqa: B904

    def _run_part(self, op: int, sel: Rows, ended: np.ndarray) -> None:
        """Op STEP, RESET or RECOVER on rows `sel`; `ended`: scratch of the calling thread."""
        if op == STEP:
            self._step(sel, ended)
        elif op == RESET:
            self._reset(self._rows[sel], after_fault=False, seeded=True)
        else:
            rows = self._rows[sel]
            for i in rows.tolist():
                self.reset_options.pop(i, None)
            self._reset(rows, after_fault=True)

    def _fault(self, op: int, ids: list[int], sel: Rows, exc: BaseException, tb: str) -> Exception:
        """The error of a batch that raised. One call (or one per lane) stepped them all: every
        env of the batch restarts, reported truncated."""
        self.needs_reset[sel] = True
        with self._marks_lock:
            self._marked += int(np.count_nonzero(~self.restart_marks[sel]))
            self.restart_marks[sel] = True
        # env_error makes the family's exception the cause (and the error its type too).
        return env_error(ids[0], "step" if op == STEP else "reset", tb, exc)

    def _lane_fault(self, job: Job, error: tuple[BaseException, str]) -> Exception:
        return self._fault(job.op, job.ids, select_rows(job.ids, self.num_envs), *error)

    def _step(self, sel: Rows, ended: np.ndarray) -> None:
        fam = self.family
        # One compiled call for the batch where the family has one and nothing needs Python:
        # no reset options waiting, no fault to report.
        if not self._marked and not self.reset_options and fam.can_fuse():
            rows = self._rows[sel]
            if self._threads is not None and len(rows) >= self._threads.n:
                self._threads.run(self._fused, rows)
            else:
                self._fused(rows)
            return
        starting = self.needs_reset[sel]
        restart = None
        if starting.any():
            rows = self._rows[sel]
            restart = rows[starting]
            if not fam.pure_step:  # step only the others: the family may draw or keep state
                live = rows[~starting]
                if len(live):
                    self._step_rows(live, ended)
                self._reset(restart, after_fault=False)
                return
        self._step_rows(sel, ended)
        if restart is not None:  # their step results are replaced by the reset's
            self._reset(restart, after_fault=False)

    def _fused(self, rows: np.ndarray) -> None:
        b = self.b
        self.family.step_autoreset(rows, b.action, b.obs, self._final_obs, self.book)

    def _step_rows(self, sel: Rows, ended: np.ndarray) -> None:
        b = self.b
        obs, reward, terminated = self.family.step(sel, b.action[sel])
        b.obs[sel] = obs
        rows = self._rows[sel]  # a view for a slice
        n_ended = account(rows, np.asarray(reward, np.float64), np.asarray(terminated, np.bool_), self.limit,
                          self.elapsed, self.returns, b.reward, b.terminated, b.truncated, b.elapsed_step,
                          b.episode_return, ended)
        if not n_ended:
            return
        rows = ended[:n_ended].copy()
        if self.same_step:  # the final observation goes to info["final_obs"], the row starts anew
            b.final_obs[rows] = b.obs[rows]
            b.obs[rows] = self.family.reset(rows, None)
            self.elapsed[rows] = 0
            self.returns[rows] = 0.0
        elif self.autoreset:
            self.needs_reset[rows] = True

    def _reset(self, rows: np.ndarray, after_fault: bool, seeded: bool = False) -> None:
        """Reset envs `rows` (with the seeds left for them when `seeded`: a reset the user
        asked for, not an autoreset) and the options left for them; write their rows."""
        b, fam = self.b, self.family
        if self._marked and not after_fault:
            marked = self.restart_marks[rows]
            if marked.any():  # their first reset after a fault reports it
                self._reset(rows[marked], after_fault=True, seeded=seeded)
                rows = rows[~marked]
                if not len(rows):
                    return
        if seeded:
            seeds = b.seed[rows]
            given = seeds >= 0
            for i, s in zip(rows[given].tolist(), seeds[given].tolist()):
                fam.seed(i, s)
            b.seed[rows] = -1
        options = None
        if self.reset_options:
            options = [self.reset_options.pop(i, None) for i in rows.tolist()]
        b.obs[rows] = fam.reset(rows, options)
        cleared = clear_rows(rows, after_fault, b.reward, b.terminated, b.truncated, b.elapsed_step,
                             b.episode_return, self.elapsed, self.returns, self.restart_marks, self.needs_reset)
        if cleared:
            with self._marks_lock:
                self._marked -= cleared
