"""Per-env trajectory buffers that emit complete unrolls of length T, time-major.

Each env slot writes its steps in place into preallocated `[T + 1, num_slots, ...]`
arrays. When a slot's unroll holds T steps and the next observation arrives (the
bootstrap observation), the unroll is copied out and that observation opens the next
unroll. With the engine's `autoreset="next_step"`, the step an env spends resetting (its
observation is the final one, its action is ignored) is kept but marked `valid=False`.
"""

from __future__ import annotations

import numpy as np

from seedpool.records import Unrolls


class TrajectoryBuffers:
    """One growing unroll per env slot; `observe` returns the unrolls it completed."""

    def __init__(self, num_slots: int, unroll_length: int, obs_shape: tuple, obs_dtype,
                 action_shape: tuple = (), action_dtype=np.int64, aux_size: int = 0) -> None:
        if unroll_length < 1:
            raise ValueError(f"unroll_length must be >= 1, got {unroll_length}")
        T, S = unroll_length, num_slots
        self.unroll_length = T
        self.obs = np.zeros((T + 1, S, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((T, S, *action_shape), dtype=action_dtype)
        self.logp = np.zeros((T, S), dtype=np.float32)
        self.rewards = np.zeros((T, S), dtype=np.float32)
        self.terminated = np.zeros((T, S), dtype=bool)
        self.truncated = np.zeros((T, S), dtype=bool)
        self.valid = np.zeros((T + 1, S), dtype=bool)
        self.first = np.zeros((T + 1, S), dtype=bool)
        self.versions = np.zeros((T, S), dtype=np.int64)
        self.aux = np.zeros((T, S, aux_size), dtype=np.float32) if aux_size else None
        self.pos = np.zeros(S, dtype=np.int64)  # observations written into the current unroll
        self.awaiting_action = np.zeros(S, dtype=bool)  # obs written, action not yet recorded
        self.next_is_first = np.ones(S, dtype=bool)  # the slot's next obs opens an episode
        self.dropped_steps = 0

    def observe(self, slots: np.ndarray, obs: np.ndarray, rewards: np.ndarray,
                terminated: np.ndarray, truncated: np.ndarray,
                restarted: np.ndarray, active: np.ndarray | None = None) -> tuple[Unrolls | None, np.ndarray]:
        """Record new observations (and the outcome of each slot's previous action).

        ``active`` (multi-agent rows): False where the row's next action is not used (a dead
        agent, a turn not its own); those steps are invalid too. Returns the unrolls this
        completed (or None) and the `first` flag of each row.
        """
        if self.awaiting_action[slots].any():
            raise RuntimeError("observe() for a slot whose previous action was never recorded")
        if len(np.unique(slots)) != len(slots):
            raise ValueError("a slot appears twice in one batch")
        if restarted.any():  # its partial unroll mixes two env lives: drop it
            self.dropped_steps += int(self.pos[slots[restarted]].sum())
            self.pos[slots[restarted]] = 0
        has_prev = self.pos[slots] > 0
        ps, pt = slots[has_prev], self.pos[slots[has_prev]] - 1
        self.rewards[pt, ps] = rewards[has_prev]
        self.terminated[pt, ps] = terminated[has_prev]
        self.truncated[pt, ps] = truncated[has_prev]

        pos = self.pos[slots]
        first = self.next_is_first[slots] | restarted
        # A final observation (or a restarted env's, whose next step resets it again) opens
        # no real transition: the env ignores the action taken there.
        ends = terminated | truncated | restarted
        self.obs[pos, slots] = obs
        self.valid[pos, slots] = ~ends if active is None else ~ends & active
        self.first[pos, slots] = first
        self.next_is_first[slots] = ends

        full = pos == self.unroll_length
        completed = self._emit(slots[full]) if full.any() else None
        self.awaiting_action[slots] = True
        return completed, first

    def record_action(self, slots: np.ndarray, actions: np.ndarray, logp: np.ndarray,
                      version: int, aux: np.ndarray | None = None) -> None:
        """Record the actions chosen for the rows of the last `observe` (and the policy's aux values)."""
        if not self.awaiting_action[slots].all():
            raise RuntimeError("record_action() for a slot with no pending observation")
        if (aux is None) != (self.aux is None):
            want = "no aux values" if self.aux is None else f"aux values [B, {self.aux.shape[2]}]"
            raise ValueError(f"the policy must return {want} (the server's aux_size), got "
                             f"{None if aux is None else aux.shape}")
        pos = self.pos[slots]
        if aux is not None:
            self.aux[pos, slots] = aux
        self.actions[pos, slots] = actions
        self.logp[pos, slots] = logp
        self.versions[pos, slots] = version
        self.pos[slots] = pos + 1
        self.awaiting_action[slots] = False

    def _emit(self, slots: np.ndarray) -> Unrolls:
        T = self.unroll_length
        out = Unrolls(
            obs=self.obs[:, slots], actions=self.actions[:, slots], logp=self.logp[:, slots],
            rewards=self.rewards[:, slots], terminated=self.terminated[:, slots],
            truncated=self.truncated[:, slots], valid=self.valid[:T, slots],
            first=self.first[:T, slots], versions=self.versions[:, slots], slots=slots.copy(),
            aux=None if self.aux is None else self.aux[:, slots],
        )  # fancy indexing copies, so the buffers can be reused at once
        # The bootstrap observation opens the next unroll.
        self.obs[0, slots] = self.obs[T, slots]
        self.valid[0, slots] = self.valid[T, slots]
        self.first[0, slots] = self.first[T, slots]
        self.pos[slots] = 0
        return out
