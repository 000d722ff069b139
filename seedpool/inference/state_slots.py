"""Per-env recurrent state kept by the inference server, on its device, between requests.

`StateSlots` holds one state per global env slot (source offset + env id):

- ``current``: the state entering each slot's next observation; `gather` hands it to the
  policy (reset to the initial state on rows that open an episode) and `scatter` keeps
  what the policy returned.
- ``starts``: the state the policy was given at the first observation of each slot's
  current unroll (or replay sequence); `record_starts` writes it when a slot opens an
  unroll, and `starts_for` copies it out when the unroll is cut, so a learner re-runs the
  policy from exactly the state it acted with.

`reset(slots)` drops the state of envs that start afresh (a restarted env worker, a
replaced Ray actor group). Every method is a no-op (or returns None) for a feed-forward
policy (``initial=None``), so the server calls them unconditionally.

The interface a sequence learner needs (R2D2's replay, recurrent IMPALA): `states_for`,
`reset`, `record_starts` and `starts_for`, all indexed by global env slot.
"""
from __future__ import annotations

import numpy as np
import torch

from seedpool.records import State


class StateSlots:
    """Per-env recurrent state (current and at the unroll's start) on the device."""

    def __init__(self, num_slots: int, initial: State, device: torch.device | str = "cpu") -> None:
        """``initial``: one env's initial state, e.g. ``{"h": zeros(H), "c": zeros(H)}`` (no batch
        axis); None for a feed-forward policy."""
        device = torch.device(device)
        self.num_slots = num_slots
        self.initial = None if initial is None else {k: v.to(device) for k, v in initial.items()}
        self.current = None if initial is None else self._fill(num_slots)
        self.starts = None if initial is None else self._fill(num_slots)

    @property
    def recurrent(self) -> bool:
        """True when there is a state to keep."""
        return self.initial is not None

    def _fill(self, n: int) -> dict[str, torch.Tensor]:
        return {k: v.unsqueeze(0).repeat(n, *([1] * v.dim())) for k, v in self.initial.items()}

    def gather(self, slots: torch.Tensor, first: torch.Tensor) -> State:
        """The state of each row (a copy), reset to the initial state where ``first`` is set."""
        if self.current is None:
            return None
        out = {}
        for k, v in self.current.items():
            rows = v[slots]
            rows[first] = self.initial[k]
            out[k] = rows
        return out

    def scatter(self, slots: torch.Tensor, state: State) -> None:
        """Keep the state each row's policy call returned (the state entering its next observation)."""
        if self.current is not None and state is not None:
            for k, v in state.items():
                self.current[k][slots] = v

    def states_for(self, slots: torch.Tensor | np.ndarray) -> State:
        """A copy of the state entering each slot's next observation, tensors ``[n, ...]``."""
        if self.current is None:
            return None
        index = self._index(slots)
        return {k: v[index].clone() for k, v in self.current.items()}

    def reset(self, slots: torch.Tensor | np.ndarray) -> None:
        """Drop these slots' state: their envs start afresh (restarted worker, replaced Ray group)."""
        if self.current is None or len(slots) == 0:
            return
        index = self._index(slots)
        for k, v in self.current.items():
            v[index] = self.initial[k]
            self.starts[k][index] = self.initial[k]

    def record_starts(self, slots: torch.Tensor, state: State) -> None:
        """Remember ``state`` (rows matching ``slots``) as the state at these slots' unroll start."""
        if self.starts is None or len(slots) == 0:
            return
        for k, v in state.items():
            self.starts[k][slots] = v

    def starts_for(self, slots: torch.Tensor | np.ndarray) -> dict[str, np.ndarray] | None:
        """The state recorded at these slots' unroll start, as float32 NumPy arrays ``[n, ...]``."""
        if self.starts is None:
            return None
        index = self._index(slots)
        return {k: v[index].float().cpu().numpy() for k, v in self.starts.items()}

    def _index(self, slots: torch.Tensor | np.ndarray) -> torch.Tensor:
        device = next(iter(self.initial.values())).device
        index = torch.as_tensor(np.asarray(slots) if not isinstance(slots, torch.Tensor) else slots,
                                dtype=torch.int64, device=device)
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= self.num_slots):
            raise ValueError(f"slots must lie in [0, {self.num_slots}), got {index.tolist()}")
        return index


class PreviousInputs:
    """Each env's previous action and reward, for a policy that reads them (``--model.prev-action``,
    ``--model.prev-reward``), kept beside `StateSlots`: the action the policy chose last for the
    slot, the reward that came with its new observation, and both as they were at the first
    observation of the slot's current unroll (what a learner needs to re-run it).
    Both read zero on a row that opens an episode."""

    def __init__(self, num_slots: int, action_shape: tuple, action_dtype: torch.dtype,
                 device: torch.device | str = "cpu") -> None:
        self.num_slots = num_slots
        self.action = torch.zeros((num_slots, *action_shape), dtype=action_dtype, device=device)
        self.start_action = torch.zeros_like(self.action)
        self.start_reward = torch.zeros(num_slots, device=device)

    def gather(self, slots: torch.Tensor, rewards: torch.Tensor, first: torch.Tensor,
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(previous action, previous reward) of each row, zero where ``first`` is set."""
        action = self.action[slots]
        action[first] = 0
        return action, torch.where(first, torch.zeros_like(rewards), rewards.float())

    def keep_actions(self, slots: torch.Tensor, actions: torch.Tensor) -> None:
        """The actions just chosen: each slot's previous action at its next observation."""
        self.action[slots] = actions.to(self.action.dtype)

    def record_starts(self, slots: torch.Tensor, action: torch.Tensor, reward: torch.Tensor) -> None:
        """Remember the inputs of the rows that open an unroll."""
        self.start_action[slots] = action
        self.start_reward[slots] = reward

    def starts_for(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """The inputs at these slots' unroll start: ``prev_action`` [n, ...], ``prev_reward`` float32 [n]."""
        index = torch.as_tensor(slots, dtype=torch.int64, device=self.action.device)
        return {"prev_action": self.start_action[index].cpu().numpy(),
                "prev_reward": self.start_reward[index].float().cpu().numpy()}
