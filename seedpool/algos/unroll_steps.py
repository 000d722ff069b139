"""Unrolls -> the env steps of each env, in time order, as a replay writer takes them.

Both value-based trainers hand their experience to the replay as `Unrolls` (the sync
sampler's lockstep steps, or the unrolls the central inference server cuts). A replay
writer wants transitions ``(obs, action, reward, terminated, truncated, next_obs)`` with
each env's steps in time order; this module cuts a whole batch into one such call
(an env appears once per step it took: one writer call per batch, not per time step).

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
        """The batch's valid steps as one step dict (nothing when there are none): held steps of
        earlier batches first, then each env's steps in time order (an env appears once per step)."""
        parts = [step for part in _one_per_slot(unrolls) for step in self._steps(part)]
        if len(parts) == 1:
            yield parts[0]
        elif parts:
            yield {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def _steps(self, u: Unrolls) -> list[Step]:
        """The released held steps of these envs, then the unrolls' valid steps, time-major."""
        out = []
        has_values = u.aux is not None
        if has_values:
            released = self._release(u)
            if released is not None:
                out.append(released)
        T = u.num_steps
        tt, jj = np.nonzero(u.valid)  # time-major: each env's steps in time order
        step = {
            "streams": u.slots[jj], "obs": u.obs[tt, jj], "action": u.actions[tt, jj],
            "reward": u.rewards[tt, jj], "terminated": u.terminated[tt, jj],
            "truncated": u.truncated[tt, jj], "next_obs": u.obs[tt + 1, jj],
        }
        if has_values:
            step["q_value"] = u.aux[tt, jj, 0]
            last = tt == T - 1  # its next value comes with the env's next unroll: held until then
            for i in np.flatnonzero(last):
                self.held[int(step["streams"][i])] = {k: v[i:i + 1] for k, v in step.items()}
            keep = np.flatnonzero(~last)
            step = {k: v[keep] for k, v in step.items()}
            step["next_value"] = u.aux[tt[keep] + 1, jj[keep], 1]
        if len(step["streams"]):
            out.append(step)
        return out

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
