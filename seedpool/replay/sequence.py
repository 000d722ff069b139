"""Sequence replay (R2D2): a row is a fixed-length stretch of one env's episode and the
recurrent state entering its first step.

A row of length ``L`` holds::

    obs         [L + 1, *obs]   obs[t] is the observation step t acts on; obs[L] bootstraps
    action      [L, *action]
    reward      [L]             float32
    terminated  [L]             bool: the episode ended at step t (no bootstrap)
    mask        [L]             bool: a real step; False only on the padding after an episode's end
    first       [L + 1]         bool: obs[t] opens an episode (the core resets its state there)
    state       {name: [H]}     the recurrent state entering obs[0] (e.g. {"h", "c"} of an LSTM)

A row never mixes two envs' data (`SequenceWriter` cuts each env's stream on its own); an
episode that ends inside a row leaves its final observation at ``obs[E]`` (``E`` real steps)
and padding after it, masked out. The valid steps are a prefix: ``mask`` is True then False.

Priorities are R2D2's mix over a sequence's TD errors (`sequence_priority`), kept on the
same sum tree as the transition buffers: sequence replay is a storage layout, not a new
sampler. Every bad input is refused with the same errors as `PrioritizedReplay` before
anything is written, plus the sequence's own rules (mask a prefix, stacked frames that shift).

**Frame dedup** (``frame_dedup=True``, uint8 frame stacks ``[K, H, W]``): within a sequence
``obs[t + 1]`` repeats ``K - 1`` frames of ``obs[t]``, so a row stores its ``L + K`` distinct
frames once instead of ``(L + 1) K``, and `sample` returns ``obs`` as a read-only sliding view
over one fresh gather of those frames: a quarter of the bytes moved for Atari's 4-frame stacks.
Frames are shared within a row only: consecutive rows overlap (by 40 of 80 steps by
default), and those frames are stored twice, which keeps every row self-contained.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from .buffers import PrioritizedReplay, UniformReplay, check_header

FORMAT = "seedpool.sequence-replay/1"


def sequence_fields(obs_field: tuple, action_field: tuple, state_sizes: Mapping[str, int],
                    length: int) -> dict[str, Any]:
    """The fields of a sequence row of ``length`` steps (see the module docstring), frames not deduplicated."""
    (obs_shape, obs_dtype), (act_shape, act_dtype) = obs_field, action_field
    L = int(length)
    return {
        "obs": ((L + 1, *obs_shape), obs_dtype), "action": ((L, *act_shape), act_dtype),
        "reward": ((L,), np.float32), "terminated": ((L,), np.bool_), "mask": ((L,), np.bool_),
        "first": ((L + 1,), np.bool_), "state": {k: ((int(h),), np.float32) for k, h in state_sizes.items()},
    }


def sequence_priority(td_abs: np.ndarray, mask: np.ndarray, eta: float = 0.9) -> np.ndarray:
    """R2D2's priority of each sequence: ``eta * max|td| + (1 - eta) * mean|td|`` over its valid steps.

    ``td_abs``, ``mask``: ``[n, T]``; a sequence with no valid step gets 0.
    """
    td_abs = np.asarray(td_abs, np.float64)
    mask = np.asarray(mask, bool)
    if td_abs.shape != mask.shape or td_abs.ndim != 2:
        raise ValueError(f"td_abs and mask must both be [n, T], got {td_abs.shape} and {mask.shape}")
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    count = mask.sum(axis=1)
    masked = np.where(mask, np.abs(td_abs), 0.0)
    mean = masked.sum(axis=1) / np.maximum(count, 1)
    return eta * masked.max(axis=1, initial=0.0) + (1.0 - eta) * mean


class SequenceReplay:
    """Prioritized (or uniform) replay of fixed-length sequences with their start state.

    ``obs_field``/``action_field``: ``(shape, dtype)`` of one observation / action;
    ``state_sizes``: the recurrent state's parts and widths (``{"h": 128, "c": 128}``).
    """

    def __init__(self, capacity: int, obs_field: tuple, action_field: tuple, state_sizes: Mapping[str, int], *,
                 length: int = 80, prioritized: bool = True, alpha: float = 0.9, eps: float = 1e-6,
                 seed: int | None = None, frame_dedup: bool = False) -> None:
        if not isinstance(length, (int, np.integer)) or length < 1:
            raise ValueError(f"length must be a positive int, got {length!r}")
        if not state_sizes:
            raise ValueError("state_sizes must name the recurrent state's parts, e.g. {'h': 128, 'c': 128}")
        self.length = int(length)
        self.state_sizes = {str(k): int(v) for k, v in state_sizes.items()}
        fields = sequence_fields(obs_field, action_field, self.state_sizes, self.length)
        self.obs_shape = tuple(fields["obs"][0][1:])
        self.obs_dtype = np.dtype(fields["obs"][1])
        self.frame_dedup = bool(frame_dedup)
        if self.frame_dedup:
            if len(self.obs_shape) != 3 or self.obs_dtype != np.uint8:
                raise ValueError(f"frame_dedup needs uint8 frame stacks [K, H, W], got {self.obs_dtype} "
                                 f"{self.obs_shape}")
            self.stack = self.obs_shape[0]
            fields["frames"] = ((self.length + self.stack, *self.obs_shape[1:]), np.uint8)
            del fields["obs"]
        self.fields = fields
        if prioritized:
            self._rows: PrioritizedReplay | UniformReplay = PrioritizedReplay(capacity, fields, alpha=alpha, eps=eps,
                                                                              seed=seed)
        else:
            self._rows = UniformReplay(capacity, fields, seed=seed)
        self.prioritized = bool(prioritized)

    @property
    def capacity(self) -> int:
        """Most sequences held at once."""
        return self._rows.capacity

    def __len__(self) -> int:
        """Sequences that can be sampled now."""
        return len(self._rows)

    def add(self, obs: Any, action: Any, reward: Any, terminated: Any, mask: Any, first: Any,
            state: Mapping[str, Any], priorities: Any = None) -> np.ndarray:
        """Store ``B`` sequences (fields as in the module docstring, leading dimension B); returns their rows.

        Without ``priorities`` new sequences enter at the max priority so far. Everything is
        validated before anything is written.
        """
        obs = np.asarray(obs)
        want = (self.length + 1, *self.obs_shape)
        if obs.ndim != len(want) + 1 or obs.shape[1:] != want:
            raise ValueError(f"field 'obs': expected shape [B, {', '.join(map(str, want))}], got {obs.shape}")
        mask_arr = np.asarray(mask)
        if mask_arr.dtype != np.bool_ or mask_arr.shape != (obs.shape[0], self.length):
            raise ValueError(f"field 'mask': expected bool [B={obs.shape[0]}, {self.length}], got "
                             f"{mask_arr.dtype} {mask_arr.shape}")
        valid = mask_arr.sum(axis=1)
        prefix = np.arange(self.length)[None, :] < valid[:, None]
        bad = np.flatnonzero((mask_arr != prefix).any(axis=1) | (valid == 0))
        if bad.size:
            raise ValueError(f"mask of sequence {bad[0]} is {mask_arr[bad[0]].astype(int).tolist()}: expected "
                             "at least one valid step, all valid steps first and padding after them")
        fields = {"action": action, "reward": reward, "terminated": terminated, "mask": mask_arr,
                  "first": first, "state": dict(state)}
        if self.frame_dedup:
            fields["frames"] = self._frames(obs, valid)
        else:
            fields["obs"] = obs
        return self._rows.add(priorities=priorities, **fields)

    def _frames(self, obs: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """``[B, L + K, H, W]`` distinct frames of frame stacks that shift by one frame per step.

        Checked on every real observation (``obs[0..E]`` of a sequence with E valid steps):
        ``obs[t + 1][:-1]`` must equal ``obs[t][1:]``, or the stack could not be rebuilt.
        """
        K = self.stack
        if obs.dtype != np.uint8:
            raise TypeError(f"field 'obs': frame dedup stores uint8 frames, got {obs.dtype}")
        if K > 1:
            same = (obs[:, 1:, :-1] == obs[:, :-1, 1:]).reshape(obs.shape[0], self.length, -1).all(axis=2)
            real = np.arange(self.length)[None, :] < valid[:, None]
            broken = np.argwhere(real & ~same)
            if broken.size:
                b, t = broken[0]
                raise ValueError(
                    f"sequence {b}: obs[{t + 1}] is not obs[{t}] shifted by one frame (frames 0..{K - 2} of "
                    f"obs[{t + 1}] differ from frames 1..{K - 1} of obs[{t}]); frame dedup needs frame stacks "
                    "along the first axis (or build the replay with frame_dedup=False)"
                )
        return np.concatenate([obs[:, 0], obs[:, 1:, -1]], axis=1)

    def sample(self, n: int, beta: float = 0.6) -> dict[str, Any]:
        """``n`` sequences: every field ``[n, ...]``, ``state`` a dict, ``weights`` float32 [n], ``indices`` [n].

        With frame dedup ``obs`` is a read-only view over the gathered frames (no copy of the
        repeated frames; ``np.ascontiguousarray`` makes one if needed), and ``frames``
        ``[n, L + K, H, W]`` holds those frames: a learner on another device moves them and
        stacks them there.
        """
        out = self._rows.sample(n, beta)
        if self.frame_dedup:
            frames = out["frames"]
            view = np.lib.stride_tricks.sliding_window_view(frames, self.stack, axis=1)  # [n, L + 1, H, W, K]
            out["obs"] = np.moveaxis(view, -1, 2)
        return out

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """Set priorities (>= 0, finite) of sampled sequences; same checks as `PrioritizedReplay`."""
        self._rows.update_priorities(indices, priorities)

    def priorities(self, indices: Any) -> np.ndarray:
        """Stored ``(p + eps) ** alpha`` of rows (prioritized replay only)."""
        if not self.prioritized:
            raise TypeError("a uniform sequence replay keeps no priorities")
        return self._rows.priorities(indices)

    def nbytes(self) -> int:
        """Bytes of the storage arrays when full."""
        return self._rows.nbytes()

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume sampling exactly (nested NumPy arrays: `save_replay_file` writes it)."""
        return {"sequence_header": json.dumps(self._header(), sort_keys=True), "rows": self._rows.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict` of a replay built with the same settings."""
        check_header(state, "sequence_header", self._header(), "sequence replay")
        self._rows.load_state_dict(state["rows"])

    def _header(self) -> dict[str, Any]:
        return {"format": FORMAT, "length": self.length, "frame_dedup": self.frame_dedup,
                "prioritized": self.prioritized, "state_sizes": self.state_sizes}
