"""Info entries an env returns that the engine has no array for, forwarded as gymnasium does.

Declared keys (an env class's `info_spec`, or `make(..., info_keys=...)`) travel through
fixed shared arrays, one row per env, every step. Anything else an env puts in its `info`
goes through an `InfoBox`: a slot per env that holds that env's latest undeclared entries
until the pool returns the env's result, then is emptied. Nothing is written, pickled or
read for an env whose info holds only declared keys (or nothing at all): the pool looks at
the slots only while one holds something (in-process) or once a worker has filled one.

A runner in the pool's own process (serial backend, the main process's share, threads)
leaves the dict itself in the slot. A worker process pickles it into the env's row of a
shared byte array (only when there is something to forward; nothing goes through a pipe,
so nothing can block); what does not fit the row, or does not pickle, is dropped with a
warning naming the keys. The pool batches what it finds
with gymnasium's own rule (`VectorEnv._add_info`): every key with its `_key` mask, nested
dicts (RecordEpisodeStatistics' `episode`) batched recursively.
"""

from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs import spaces

# Bytes per env for pickled undeclared info in worker processes. Anonymous shared memory is
# only backed where it is written, so an unused row costs address space, not memory.
ROW_BYTES = 1 << 16
# Info keys the pool itself returns; an env's own entries under these names are not forwarded.
ENGINE_KEYS = frozenset(
    {"env_id", "elapsed_step", "episode_return", "episode_length", "final_obs", "restarted"}
)


@dataclass(frozen=True)
class Dropped:
    """What a worker leaves in a slot instead of info it could not forward."""

    env_id: int
    keys: tuple[str, ...]
    reason: str


class InfoBox:
    """One slot per env for undeclared info entries, filled by runners, emptied by the pool.

    The pool asks `pending()` once per batch (a set's truthiness and one shared byte) and
    calls `batch()` only when it is true.
    """

    def __init__(self, num_envs: int, shared: bool, row_bytes: int = ROW_BYTES):
        # Slots written in the pool's own process: the dicts themselves, and which are full.
        self.objects: list[Any] = [None] * num_envs
        self.filled: set[int] = set()
        # Slots written by worker processes: pickled bytes in a shared row per env.
        self.length = spaces.empty((num_envs,), np.int64, shared)  # 0: empty
        self.row_bytes = row_bytes
        # One flat byte view: slicing a memoryview is several times cheaper than a numpy row.
        self.data = memoryview(spaces.empty((num_envs * row_bytes,), np.uint8, shared)) if shared else None
        self.used = spaces.empty((1,), np.int8, shared)  # set once a worker filled a row
        self.home = os.getpid()
        self.warned: set[str] = set()  # dropped keys already reported
        self.add_info = _Batcher(num_envs)._add_info  # gymnasium's rule, for a batch of every env

    def writer(self) -> Callable[[int, dict[str, Any]], None]:
        """The `put(i, info)` for a runner in the calling process: a worker process pickles."""
        return self.put_object if os.getpid() == self.home else self.put_pickled

    def put_object(self, i: int, info: dict[str, Any]) -> None:
        """Leave env i's info in its slot (a runner in the pool's own process)."""
        self.objects[i] = info
        self.filled.add(i)

    def put_pickled(self, i: int, info: dict[str, Any]) -> None:
        """Pickle env i's info into its row (a worker process), or leave a `Dropped` notice."""
        try:
            data = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - whatever fails to pickle is reported the same way
            data = pickle.dumps(Dropped(i, tuple(map(str, info)), f"not picklable ({exc})"))
        if len(data) > self.row_bytes:
            reason = f"{len(data)} bytes pickled, over the {self.row_bytes} bytes per env"
            data = pickle.dumps(Dropped(i, tuple(map(str, info)), reason))
        start = i * self.row_bytes
        self.data[start : start + len(data)] = data
        self.length[i] = len(data)
        self.used[0] = 1

    def pending(self) -> bool:
        """Whether any slot may hold something (false for envs that never filled one)."""
        return bool(self.filled) or bool(self.used[0])

    def clear(self, i: int) -> None:
        """Empty env i's slot (its result is dropped, or superseded by a reset)."""
        self.filled.discard(i)
        self.objects[i] = None
        if self.length[i]:
            self.length[i] = 0

    def take(self, env_ids: np.ndarray, whole: bool = False) -> list[tuple[int, dict[str, Any]]]:
        """(position in `env_ids`, info) for each returned env whose slot holds something, in
        position order (gymnasium's dtypes follow the first env); those slots are emptied.
        `whole`: `env_ids` is every env in order (a sync step), so a position is the env id.
        Dropped info is reported when it holds a key not reported yet."""
        out: list[tuple[int, dict[str, Any]]] = []
        if self.filled and whole:  # every slot is returned: no membership test per env
            objects = self.objects
            out = [(i, objects[i]) for i in sorted(self.filled)]
            for i, _ in out:
                objects[i] = None
            self.filled.clear()
        elif self.filled:
            filled = self.filled
            for pos, i in enumerate(env_ids.tolist()):
                if i in filled:
                    filled.discard(i)
                    out.append((pos, self.objects[i]))
                    self.objects[i] = None
        if self.used[0]:
            local = len(out)
            lengths = self.length[env_ids]
            for pos in np.flatnonzero(lengths).tolist():
                i, n = int(env_ids[pos]), int(lengths[pos])
                start = i * self.row_bytes
                info = pickle.loads(self.data[start : start + n])
                self.length[i] = 0
                if type(info) is Dropped:
                    self._warn(info)
                else:
                    out.append((pos, info))
            if local and len(out) > local:
                out.sort(key=lambda entry: entry[0])
        return out

    def batch(self, env_ids: np.ndarray, whole: bool = False) -> dict[str, Any]:
        """The returned envs' undeclared info, batched as gymnasium's vector envs batch it
        (`whole`: `env_ids` is every env in order)."""
        return batch_infos(self.take(env_ids, whole), len(env_ids))

    def add_to(self, info: dict[str, Any], env_ids: np.ndarray, whole: bool = False) -> dict[str, Any]:
        """`info` (the batch's, whose keys no env's undeclared entry can have: they are the
        engine's or declared ones) with the returned envs' undeclared info added, batched."""
        if whole and self.filled and not self.used[0]:
            # A sync step of envs in this process (the serial loop): batched straight from the
            # slots, in env order, as SyncVectorEnv batches its envs' infos.
            objects, filled, add = self.objects, self.filled, self.add_info
            for i in (range(len(objects)) if len(filled) == len(objects) else sorted(filled)):
                info = add(info, objects[i], i)
                objects[i] = None
            filled.clear()
        else:
            info.update(self.batch(env_ids, whole))
        return info

    def _warn(self, dropped: Dropped) -> None:
        if self.warned.issuperset(dropped.keys):
            return
        self.warned.update(dropped.keys)
        warnings.warn(
            f"seedpool: info keys {list(dropped.keys)} of env {dropped.env_id} were not forwarded "
            f"from its worker process: {dropped.reason}. Declare fixed-shape entries with "
            "make(..., info_keys={'key': dtype or (dtype, shape)}) to send them through shared "
            "memory, or use backend='thread' or 'serial' (nothing is pickled there)",
            RuntimeWarning,
            stacklevel=4,
        )


def batch_infos(entries: list[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Batch per-env info dicts into arrays of `n` rows with `_key` masks.

    Gymnasium's own rule (`VectorEnv._add_info`, which reads only `num_envs`), so the result
    matches `SyncVectorEnv` key for key and dtype for dtype. (A column-at-a-time rewrite was
    measured: no faster for flat infos, slower for nested ones; see
    benchmarks/results/info_forwarding.md.)
    """
    batcher = _Batcher(n)
    out: dict[str, Any] = {}
    for pos, info in entries:
        out = batcher._add_info(out, info, pos)
    return out


class _Batcher:
    """Just what `VectorEnv._add_info` reads: `num_envs`, and itself for nested dicts."""

    _add_info = gym.vector.VectorEnv._add_info

    def __init__(self, num_envs: int):
        self.num_envs = num_envs


def undeclared(info: dict[str, Any], declared: frozenset[str]) -> dict[str, Any]:
    """The entries of `info` the engine has no array for (empty when all are declared; `info`
    itself when none is: the env steps again only after the pool has batched it)."""
    if declared.issuperset(info):
        return {}
    if declared.isdisjoint(info):
        return info
    return {k: v for k, v in info.items() if k not in declared}
