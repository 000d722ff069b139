"""Unrolls -> the env steps of each env, in time order, as a replay writer takes them.

Both value-based trainers hand their experience to the replay as `Unrolls` (the sync
sampler's lockstep steps, or the unrolls the central inference server cuts). A replay
writer wants them one time step at a time, each env's steps in order, as transitions
``(obs, action, reward, terminated, truncated, next_obs)``; this module does that cut.

When the acting network recorded its estimates with each step (``Unrolls.aux`` columns
``Q(s_t, a_t)`` and ``max_a Q(s_t, a)``), each transition also carries ``q_value`` and the
``next_value`` of its next observation, from which the writer sets initial priorities.
The next value of an unroll's last step is the first value of that env's next unroll, so
that step is held back until its env's next unroll arrives.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from seedpool.records import Unrolls, take_unrolls

Step = dict[str, np.ndarray]
"""One time step of some envs: streams, obs, action, reward, terminated, truncated,
next_obs (and q_value, next_value when the unrolls carry aux values)."""


class UnrollSteps:
    """Cuts batches of unrolls into time steps; keeps each env's last step until its value is known."""

    def __init__(self) -> None:
        self.held: dict[int, Step] = {}  # slot -> its last step, waiting for next_value

    def __call__(self, unrolls: Unrolls) -> Iterator[Step]:
        """The batch's valid steps, each env's in time order (held steps of earlier batches first)."""
        for part in _one_per_slot(unrolls):
            yield from self._steps(part)

    def _steps(self, u: Unrolls) -> Iterator[Step]:
        has_values = u.aux is not None
        if has_values:
            released = self._release(u)
            if released is not None:
                yield released
        T = u.num_steps
        for t in range(T):
            rows = np.flatnonzero(u.valid[t])
            if rows.size == 0:
                continue
            step = {
                "streams": u.slots[rows], "obs": u.obs[t, rows], "action": u.actions[t, rows],
                "reward": u.rewards[t, rows], "terminated": u.terminated[t, rows],
                "truncated": u.truncated[t, rows], "next_obs": u.obs[t + 1, rows],
            }
            if not has_values:
                yield step
                continue
            step["q_value"] = u.aux[t, rows, 0]
            if t + 1 < T:
                step["next_value"] = u.aux[t + 1, rows, 1]
                yield step
            else:
                for i, slot in enumerate(step["streams"]):
                    self.held[int(slot)] = {k: v[i:i + 1] for k, v in step.items()}

    def _release(self, u: Unrolls) -> Step | None:
        """The held last steps of these unrolls' envs, now that their next values are known."""
        rows, parts = [], []
        for j, slot in enumerate(u.slots):
            held = self.held.pop(int(slot), None)
            if held is None:
                continue
            held = dict(held)
            held["next_value"] = u.aux[0, j:j + 1, 1]
            if u.first[0, j] and not (held["terminated"][0] or held["truncated"][0]):
                # The env was restarted (its worker died) after this step: the episode was cut.
                held["truncated"] = np.ones(1, bool)
            rows.append(j)
            parts.append(held)
        if not parts:
            return None
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def pending(self) -> int:
        """Steps held back, waiting for their env's next unroll."""
        return len(self.held)


def _one_per_slot(u: Unrolls) -> Iterator[Unrolls]:
    """Split a batch so no slot appears twice in a part; a slot's earlier unroll comes first."""
    if len(np.unique(u.slots)) == len(u.slots):
        yield u
        return
    occurrence = np.zeros(len(u.slots), np.int64)
    seen: dict[int, int] = {}
    for j, slot in enumerate(u.slots):
        occurrence[j] = seen.get(int(slot), 0)
        seen[int(slot)] = occurrence[j] + 1
    for k in range(int(occurrence.max()) + 1):
        yield take_unrolls(u, np.flatnonzero(occurrence == k))
