"""``NStepWriter``: per-stream n-step rows computed at insertion, written to a replay.

Each stream (env) keeps its last ``n`` steps. A row starting at step ``t`` of an episode is

    obs_t, action_t, reward = sum_{k<m} gamma^k r_{t+k}, discount = gamma^m, next_obs = obs_{t+m}

with ``m = n`` normally and ``m < n`` when the episode ends first. A terminated episode does
not bootstrap (discount 0); a truncated one does (discount gamma^m, next_obs = its final
observation). All per-stream state lives in arrays indexed by stream id, updated by one
compiled kernel per ``add`` (`seedpool.replay.nstep_kernels`): no Python loop over envs, and a
handful of NumPy calls.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from seedpool.errors import ConfigError

from .nstep_kernels import _advance, _count_rows, _flush, _occurrences
from .storage import SEP, Field, coerce, flatten_values, nest_values

WRITER_FIELDS = ("obs", "action", "reward", "discount", "next_obs")
MAX_STREAMS = 1 << 20


class NStepWriter:
    """Turn per-env steps into n-step rows of ``replay`` (fields among obs, action, reward, discount, next_obs)."""

    def __init__(self, replay: Any, n_step: int, gamma: float) -> None:
        if not isinstance(n_step, (int, np.integer)) or n_step < 1:
            raise ConfigError(f"n_step must be an int >= 1, got {n_step!r}")
        if not 0.0 <= gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {gamma}")
        tops = {name.split(SEP)[0] for name in replay.fields}
        unknown = sorted(tops - set(WRITER_FIELDS))
        if unknown:
            raise ValueError(
                f"NStepWriter writes fields {list(WRITER_FIELDS)}; the replay also has {unknown}, "
                "which it could not fill"
            )
        self.replay, self.n_step, self.gamma = replay, int(n_step), float(gamma)
        self.fields = dict(replay.fields)
        self._stored_obs = tops & {"obs", "next_obs"}
        # An observation's leaves: {"": field} for an array, {".key": field, ...} for a Dict observation.
        self._obs_leaves = _leaves(self.fields, "obs") or _leaves(self.fields, "next_obs")
        self._powers = self.gamma ** np.arange(self.n_step + 1, dtype=np.float64)
        self._cache = replay.storage.new_stream_cache(self.n_step) if replay.frame_dedup else None
        self._with_values: bool | None = None  # fixed by the first add
        self.w_obs: dict[str, np.ndarray] | None = None  # plain storage only: each pending step's obs
        self.last_next_obs: dict[str, np.ndarray] | None = None  # plain storage only: for flush()
        self._streams = 0
        self._grow(8)

    def _grow(self, streams: int) -> None:
        """Per-stream arrays for ids below ``streams`` (old contents kept)."""
        n, act = self.n_step, self.fields.get("action")
        shapes = {
            "t": ((), np.int64), "start": ((), np.int64), "ep": ((), np.int64),
            "w_reward": ((n,), np.float64), "w_q": ((n,), np.float64), "last_next_value": ((), np.float64),
            "w_action": ((n, *act.shape), act.dtype) if act else ((n,), np.int64),
            # -1 between calls: which step of the current call filled a window slot / came last.
            "w_batch": ((n,), np.int64), "last_batch": ((), np.int64),
        }
        for name, (shape, dtype) in shapes.items():
            new = np.full((streams, *shape), -1 if name in ("w_batch", "last_batch") else 0, dtype)
            if self._streams:
                new[: self._streams] = getattr(self, name)
            setattr(self, name, new)
        if self._cache is None and "obs" in self._stored_obs:
            old = self.w_obs or {}
            self.w_obs = {k: _resized(old.get(k), streams, (n, *f.shape), f.dtype) for k, f in self._obs_leaves.items()}
        if self._cache is None and "next_obs" in self._stored_obs:
            old = self.last_next_obs or {}
            self.last_next_obs = {k: _resized(old.get(k), streams, f.shape, f.dtype) for k, f in self._obs_leaves.items()}
        self._streams = streams
        if self._cache is not None:
            self._cache.ensure(streams)

    @property
    def pending(self) -> int:
        """Steps received whose rows are not written yet (rows flush() would write)."""
        return int((self.t - self.start).sum())

    def add(self, obs: Any, action: Any, reward: Any, terminated: Any, truncated: Any, next_obs: Any,
            streams: Any = None, q_value: Any = None, next_value: Any = None) -> int:
        """B env steps, each of stream ``streams[i]``; returns rows written.

        A stream may appear several times in one call (a whole unroll at once): its steps must
        come in its time order. ``next_obs`` is what the step returned: at an episode end, the
        final observation. Do not feed the extra step that next-step autoreset inserts between
        episodes. ``q_value`` and ``next_value`` (both or neither) give rows their initial
        priority ``|reward + discount * next_value[end] - q_value[start]|``.

        Every input is checked before anything changes. With frame dedup, the frames are checked
        one occurrence of each stream at a time: a step breaking the frame contract raises after
        the steps before it were written.
        """
        step = self._validate(obs, action, reward, terminated, truncated, next_obs, streams, q_value, next_value)
        if self._cache is not None:
            occurrence, most = _occurrences(step["streams"], self._streams)
            if most > 1:  # the frame cache takes one step per stream at a time
                self._check_room(self._rows_of(step))
                return sum(self._add(_take(step, np.flatnonzero(occurrence == k))) for k in range(most))
        return self._add(step)

    def _rows_of(self, step: dict) -> int:
        return _count_rows(step["streams"], step["terminated"] | step["truncated"], self.t, self.start,
                           self.n_step)

    def _add(self, step: dict) -> int:
        """Write a validated call's rows, then move the per-stream windows on."""
        ss = step["streams"]
        total = self._rows_of(step)
        self._check_room(total)
        if self._cache is not None:  # the last check, and the first change: caches the new frames
            self._check_frames(step, ss)
        out = _outputs(total)
        rows = _advance(ss, step["terminated"], step["truncated"], step["reward"], step["q_value"],
                        step["next_value"], self._powers, self.t, self.start, self.ep, self.w_reward, self.w_q,
                        self.last_next_value, self.w_batch, self.last_batch, out["stream"], out["batch"],
                        out["first"], out["ep"], out["end"], out["from"], out["ret"], out["disc"], out["prio"])
        assert rows == total, (rows, total)
        # Each row's first action and observation: from this call's step, or from the window
        # (read before the window moves on).
        start_pos = out["first"] % self.n_step
        action = _first_values(self.w_action, step["action"], out["stream"], start_pos, out["from"])
        obs = {k: _first_values(arr, step["obs"][k], out["stream"], start_pos, out["from"])
               for k, arr in (self.w_obs or {}).items()}
        ws, wp = np.nonzero(self.w_batch >= 0)
        filled_by = self.w_batch[ws, wp]
        self.w_action[ws, wp] = step["action"][filled_by]
        for k, arr in (self.w_obs or {}).items():
            arr[ws, wp] = step["obs"][k][filled_by]
        self.w_batch[ws, wp] = -1
        ls = np.flatnonzero(self.last_batch >= 0)
        for k, arr in (self.last_next_obs or {}).items():
            arr[ls] = step["next_obs"][k][self.last_batch[ls]]
        self.last_batch[ls] = -1
        next_obs = {k: v[out["batch"]] for k, v in step["next_obs"].items()} if self.last_next_obs else None
        return self._write(out, out["end"] + 1, action, obs, next_obs)  # every row ends at its step "end"

    def flush(self) -> int:
        """Write every pending row now, bootstrapping from the latest observation; returns rows written.

        A pending row (its n steps not all seen) becomes a shorter m-step row with discount
        gamma^m, exactly as at a truncation, so no step is dropped. The streams go on: their
        next rows start at the next step. Call it before saving or closing.
        """
        total = self.pending
        if not total:
            return 0
        self._check_room(total)
        out = _outputs(total)
        _flush(self._powers, self.t, self.start, self.ep, self.w_reward, self.w_q, self.last_next_value,
               out["stream"], out["first"], out["ep"], out["ret"], out["disc"], out["prio"])
        start_pos = out["first"] % self.n_step
        obs = {k: arr[out["stream"], start_pos] for k, arr in (self.w_obs or {}).items()}
        nxt = {k: v[out["stream"]] for k, v in self.last_next_obs.items()} if self.last_next_obs else None
        return self._write(out, self.t[out["stream"]], self.w_action[out["stream"], start_pos], obs, nxt)

    def _check_room(self, rows: int) -> None:
        """Refuse, before any state changes, a call that would write more rows than one write may hold."""
        if rows > self.replay.capacity:
            raise ValueError(
                f"this call would write {rows} rows at once, more than the replay's capacity "
                f"{self.replay.capacity}"
            )

    def _write(self, out: dict, t_next: np.ndarray, action: np.ndarray, obs: dict[str, np.ndarray],
               next_obs: dict[str, np.ndarray] | None) -> int:
        """Send computed rows to the replay: ``action``/``obs`` are each row's first, ``next_obs``
        its last; ``t_next`` is each row's next_obs step (frame dedup)."""
        rows = len(out["stream"])
        if not rows:
            return 0
        fields = {"reward": out["ret"], "discount": out["disc"], "action": action}
        prio = out["prio"] if self._with_values else None
        if self._cache is None:
            flat = {f: fields[f] for f in self.fields if f in fields}
            for k, arr in obs.items():
                flat["obs" + k] = arr
            for k, arr in (next_obs or {}).items():
                flat["next_obs" + k] = arr
            self.replay.add(priorities=prio, **nest_values(flat))
        else:
            scalars = {f: fields[f] for f in self.fields if f not in ("obs", "next_obs")}
            self.replay._add_stream_rows(scalars, prio, self._cache, out["stream"], out["ep"], out["first"],
                                         t_next)
        return rows

    def _check_frames(self, step: dict, ss: np.ndarray) -> None:
        """Frame dedup: obs continues its stream, next_obs is obs shifted by one frame (one frame each)."""
        code, row = self._cache.check_and_push(step["obs"][""], step["next_obs"][""], ss, self.t, self.ep)
        if code == 1:
            raise ValueError(
                f"row {row}: next_obs[-2] != obs[-1]; frame dedup needs stacked frames shifting by one "
                "(stack axis first)"
            )
        if code == 2:
            raise ValueError(
                f"row {row} (stream {ss[row]}): obs[-1] is not the newest frame of that stream's previous "
                "next_obs; steps must arrive in time order per stream (a new episode starts only after "
                "a terminated or truncated step)"
            )

    def _validate(self, obs, action, reward, terminated, truncated, next_obs, streams, q_value,
                  next_value) -> dict:
        """Every input checked and cast before any state changes; raises ValueError/TypeError."""
        reward = _floats("reward", reward, None)
        b = len(reward)
        step = {"reward": reward,
                "terminated": _flags("terminated", terminated, b), "truncated": _flags("truncated", truncated, b)}
        for name, value in (("obs", obs), ("next_obs", next_obs)):
            step[name] = self._observations(name, value, b)
        act = self.fields.get("action")
        step["action"] = coerce("action", action, act, b) if act else np.asarray(action, np.int64).reshape(b)
        if (q_value is None) != (next_value is None):
            raise ValueError("give both q_value and next_value (initial priorities) or neither")
        with_values = q_value is not None
        if self._with_values is not None and with_values != self._with_values:
            raise ValueError(f"q_value/next_value were {'given' if self._with_values else 'absent'} in earlier "
                             "adds: keep them the same for every add, so every row has a priority")
        step["q_value"] = _floats("q_value", q_value, b) if with_values else np.zeros(b)
        step["next_value"] = _floats("next_value", next_value, b) if with_values else np.zeros(b)
        step["streams"] = self._stream_ids(streams, b)
        self._with_values = with_values
        return step

    def _observations(self, name: str, value: Any, b: int) -> dict[str, np.ndarray]:
        """An observation batch as ``{leaf suffix: [B, ...] array}`` ("" for an array), each leaf checked and cast."""
        if not self._obs_leaves:  # the replay stores no observation: only the row count matters
            arr = np.asarray(value)
            if len(arr) != b:
                raise ValueError(f"{name} has {len(arr)} rows, reward has {b}")
            return {"": arr}
        got = {k[len(name):]: v for k, v in flatten_values({name: value}).items()}
        if sorted(got) != sorted(self._obs_leaves):
            raise ValueError(f"{name}: expected {sorted(name + k for k in self._obs_leaves)}, "
                             f"got {sorted(name + k for k in got)}")
        return {k: coerce(name + k, got[k], f, b) for k, f in self._obs_leaves.items()}

    def _stream_ids(self, streams: Any, b: int) -> np.ndarray:
        """Stream ids [B] (default arange(B)): ints in [0, MAX_STREAMS); grows per-stream state."""
        if streams is None:
            ss = np.arange(b, dtype=np.int64)
        else:
            ss = np.asarray(streams)
            if ss.shape != (b,) or (b and ss.dtype.kind not in "iu"):
                raise ValueError(f"streams must be ints of shape ({b},), got {ss.dtype} {ss.shape}")
            ss = ss.astype(np.int64)
            if b and (ss.min() < 0 or ss.max() >= MAX_STREAMS):
                raise ValueError(f"stream ids must be in [0, {MAX_STREAMS}), got {ss.min()}..{ss.max()}")
        if b and ss.max() >= self._streams:
            self._grow(max(int(ss.max()) + 1, 2 * self._streams))
        return ss


def _leaves(fields: dict[str, Field], name: str) -> dict[str, Field]:
    """The fields holding ``name``, keyed by what follows the name ("" or ".key")."""
    return {n[len(name):]: f for n, f in fields.items() if n == name or n.startswith(name + SEP)}


def _resized(old: np.ndarray | None, streams: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Zeros ``[streams, *shape]`` holding ``old``'s rows first."""
    new = np.zeros((streams, *shape), dtype)
    if old is not None:
        new[: len(old)] = old
    return new


def _first_values(window: np.ndarray, new: np.ndarray, stream: np.ndarray, pos: np.ndarray,
                  source: np.ndarray) -> np.ndarray:
    """Rows' first values: ``new[source]`` where the row began in this call (source >= 0), else the window's."""
    values = window[stream, pos]
    here = source >= 0
    if here.any():
        values[here] = new[source[here]]
    return values


def _take(step: dict, rows: np.ndarray) -> dict:
    """Some rows of a validated call (observations are dicts of leaves)."""
    return {k: ({leaf: a[rows] for leaf, a in v.items()} if isinstance(v, dict) else v[rows]) for k, v in step.items()}


def _outputs(size: int) -> dict[str, np.ndarray]:
    """Room for ``size`` rows computed by the kernels."""
    ints = ("stream", "batch", "first", "ep", "end", "from")
    return {k: np.empty(size, np.int64 if k in ints else np.float64)
            for k in (*ints, "ret", "disc", "prio")}


def _floats(name: str, value: Any, b: int | None) -> np.ndarray:
    """A finite float64 vector (of length ``b`` when given)."""
    arr = np.asarray(value)
    if arr.ndim != 1 or (b is not None and arr.shape[0] != b) or (arr.size and arr.dtype.kind not in "iuf"):
        want = f"[{b}]" if b is not None else "[B]"
        raise ValueError(f"{name} must be a real vector {want}, got {arr.dtype} {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)][:3]}")
    return arr


def _flags(name: str, value: Any, b: int) -> np.ndarray:
    """A bool vector [b]."""
    arr = np.asarray(value)
    if arr.shape != (b,) or arr.dtype != np.bool_:
        raise ValueError(f"{name} must be a bool vector [{b}], got {arr.dtype} {arr.shape}")
    return arr
