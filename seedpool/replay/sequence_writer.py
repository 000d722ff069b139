"""`SequenceWriter`: each env's stream of steps cut into R2D2's overlapping sequences.

Every env (a stream, named by its env slot) is cut on its own, so a sequence never holds
another env's data. Within an episode, sequences start every ``length - overlap`` steps
(0, 40, 80, ... for the defaults 80 and 40) and are written once they hold ``length``
steps. When the episode ends (terminated or truncated), the one sequence still open that
covers its last steps is written padded (``mask`` False after the end), its final
observation kept as the bootstrap; later open starts would only repeat its steps.

The writer takes `Unrolls` whose ``aux`` holds, per step, the recurrent state *entering*
that observation (its parts concatenated in the replay's ``state_sizes`` order): the acting
side records it with each step (`seedpool.algos.r2d2.RecurrentEpsilonGreedyAct`), so the
state stored at a sequence's start is the one the policy used there. A stream's open
episode is cut (written as it is, bootstrapping from its last observation) if its env
restarts (``first`` set while an episode is open). Open episodes are not checkpointed: a
resumed run's envs start new episodes.
"""
from __future__ import annotations

import numpy as np

from seedpool.records import Unrolls

from .sequence import SequenceReplay


class _Stream:
    """One env's open episode: the steps since the earliest sequence start still open."""

    def __init__(self, L: int, obs_shape: tuple, obs_dtype, act_shape: tuple, act_dtype, state_dim: int) -> None:
        self.obs = np.zeros((L + 1, *obs_shape), obs_dtype)
        self.action = np.zeros((L, *act_shape), act_dtype)
        self.reward = np.zeros(L, np.float32)
        self.terminated = np.zeros(L, bool)
        self.state = np.zeros((L, state_dim), np.float32)
        self.open = False  # an episode is under way
        self.steps = 0  # steps buffered (from the earliest open sequence start)
        self.at_start = True  # buffer position 0 is the episode's first observation

    def shift(self, stride: int) -> None:
        """Drop the first ``stride`` steps (the next open sequence starts there)."""
        keep = len(self.reward) - stride
        for arr in (self.action, self.reward, self.terminated, self.state):
            arr[:keep] = arr[stride:stride + keep]
        self.obs[: keep + 1] = self.obs[stride:stride + keep + 1]
        self.steps -= stride
        self.at_start = False


class SequenceWriter:
    """``add(unrolls)``: append each env's steps; whole (or episode-ending) sequences go to ``replay``."""

    def __init__(self, replay: SequenceReplay, overlap: int = 40) -> None:
        L = replay.length
        if not 0 <= overlap < L:
            raise ValueError(f"overlap must be in [0, length={L}), got {overlap}")
        self.replay, self.L, self.stride = replay, L, L - overlap
        self.state_dim = sum(replay.state_sizes.values())
        self.streams: dict[int, _Stream] = {}
        self._out: list[dict] = []
        self.sequences_written = 0

    def add(self, unrolls: Unrolls) -> int:
        """Take a batch of unrolls (``aux``: entering states ``[T, n, sum of state sizes]``); returns sequences written."""
        if unrolls.aux is None or unrolls.aux.shape[:2] != unrolls.rewards.shape or \
                unrolls.aux.shape[2] != self.state_dim:
            got = None if unrolls.aux is None else unrolls.aux.shape
            raise ValueError(f"sequence replay needs the recurrent state entering each step in Unrolls.aux "
                             f"[T, n, {self.state_dim}], got {got}")
        for j in range(len(unrolls)):
            stream = self._stream(int(unrolls.slots[j]))
            steps = np.flatnonzero(unrolls.valid[:, j])
            i = 0
            while i < len(steps):
                i += self._chunk(stream, unrolls, j, steps[i:])
        return self._flush()

    def _stream(self, slot: int) -> _Stream:
        stream = self.streams.get(slot)
        if stream is None:
            act_shape, act_dtype = self.replay.fields["action"][0][1:], self.replay.fields["action"][1]
            stream = _Stream(self.L, self.replay.obs_shape, self.replay.obs_dtype, act_shape, act_dtype, self.state_dim)
            self.streams[slot] = stream
        return stream

    def _chunk(self, s: _Stream, u: Unrolls, j: int, steps: np.ndarray) -> int:
        """Append the longest run of ``steps`` (valid step indices of column ``j``) that stays in one
        episode and fits the buffer, in slices; returns how many steps it took."""
        t0 = int(steps[0])
        if u.first[t0, j] and s.open and s.steps:
            self._emit(s)  # the env restarted mid-episode: keep what it did, bootstrapping from its last obs
            s.open = False
        if not s.open:
            s.open, s.steps, s.at_start = True, 0, True
        run = steps[: self.L - s.steps]
        # Stop after an episode's end, before an episode start or a gap (a gap follows an end anyway).
        ends = u.terminated[run, j] | u.truncated[run, j]
        breaks = np.flatnonzero(ends)
        k = int(breaks[0]) + 1 if breaks.size else len(run)
        cut = np.flatnonzero((run[1:k] != run[:k - 1] + 1) | u.first[run[1:k], j])
        if cut.size:
            k = int(cut[0]) + 1
        t1 = t0 + k  # the run is contiguous: steps t0 .. t1 - 1
        a, b = s.steps, s.steps + k
        s.obs[a:b] = u.obs[t0:t1, j]
        s.action[a:b] = u.actions[t0:t1, j]
        s.reward[a:b] = u.rewards[t0:t1, j]
        s.terminated[a:b] = u.terminated[t0:t1, j]
        s.state[a:b] = u.aux[t0:t1, j]
        s.obs[b] = u.obs[t1, j]
        s.steps = b
        ended = bool(ends[k - 1])
        if s.steps == self.L:
            self._emit(s)
            if ended:
                s.open = False
            else:
                s.shift(self.stride)
        elif ended:
            self._emit(s)
            s.open = False
        return k

    def _emit(self, s: _Stream) -> None:
        """Queue the buffered steps as one sequence (padded and masked after them)."""
        n, L = s.steps, self.L
        mask = np.arange(L) < n
        first = np.zeros(L + 1, bool)
        first[0] = s.at_start
        # Padding is zeros (obs after the final observation, steps after the last one): never
        # learned from, and the same bytes whatever the buffer held before.
        seq = {"obs": s.obs.copy(), "action": s.action.copy(), "reward": s.reward.copy(),
               "terminated": s.terminated.copy()}
        seq["obs"][n + 1:] = 0
        for k in ("action", "reward", "terminated"):
            seq[k][n:] = 0
        self._out.append({**seq, "mask": mask, "first": first, "state": s.state[0].copy()})

    def _flush(self) -> int:
        """Write the queued sequences in one replay call."""
        if not self._out:
            return 0
        batch = {k: np.stack([o[k] for o in self._out]) for k in self._out[0]}
        flat = batch.pop("state")
        parts, at = {}, 0
        for name, size in self.replay.state_sizes.items():
            parts[name] = flat[:, at:at + size]
            at += size
        n = len(self._out)
        self._out = []
        for start in range(0, n, self.replay.capacity):  # a batch larger than the ring goes in ring-sized pieces
            piece = slice(start, start + self.replay.capacity)
            self.replay.add(state={k: v[piece] for k, v in parts.items()}, **{k: v[piece] for k, v in batch.items()})
        self.sequences_written += n
        return n
