"""Records that cross layers: what actors produce and learners consume.

This module imports nothing from seedpool, so the engine, the actors, the inference
server, the algorithms and the runners can all share these shapes without importing
each other. Arrays are time-major: ``[T, B, ...]``. Torch is imported only where a
record is allocated, so processes that only step envs (a Ray actor group) never load it.

- :class:`EnvBatch`: one ``recv`` of a source of envs (actors -> inference).
- :class:`ActOutput`: what a policy returns for a batch (inference).
- :class:`Unrolls`: fixed-length trajectories cut by the inference server (-> learners).
- :class:`Rollout`: the synchronous sampler's ``[T, B]`` buffers (-> on-policy learners).
- :class:`Episode`: a finished episode, for logging.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, NamedTuple, Optional

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    import torch


class Episode(NamedTuple):
    """A finished episode: the env step counter when it ended, its return and length."""

    step: int
    ret: float
    length: int
    slot: int = -1
    """The global env slot it ran in (central inference; -1 where not tracked)."""


State = Optional[dict[str, "torch.Tensor"]]
"""Recurrent state of a batch of rows (None for feed-forward policies)."""


class ActOutput(NamedTuple):
    """What a policy returns for a batch of observations."""

    actions: torch.Tensor
    logp: torch.Tensor
    state: State = None
    aux: torch.Tensor | None = None
    """Per-row values the learner wants recorded with each step, float32 [B, k] (Ape-X: the
    chosen action's Q-value and the greedy value); None records nothing."""


@dataclass
class EnvBatch:
    """One `recv` from a source: the envs that finished stepping, in completion order."""

    env_ids: np.ndarray
    """The source's own env ids, int64 [n]."""
    obs: np.ndarray
    """[n, *obs_shape]."""
    rewards: np.ndarray
    """float32 [n]."""
    terminated: np.ndarray
    """bool [n]."""
    truncated: np.ndarray
    """bool [n]."""
    restarted: np.ndarray
    """bool [n]: the env was reset because its worker died (its trajectory is cut)."""
    episode_done: np.ndarray
    """bool [n]: an episode as users count it ended on this row (Atari: the whole game, not a life)."""
    episode_returns: np.ndarray
    """float64 [n]: return of the episode that ended on this row (valid where episode_done)."""
    episode_lengths: np.ndarray
    """int64 [n]: length of the episode that ended on this row (valid where episode_done)."""
    active: np.ndarray | None = None
    """bool [n]: the row's next action is used (multi-agent rows: not a dead agent, nor one
    waiting for its turn); None: every row whose episode goes on."""


@dataclass
class Unrolls:
    """A batch of n unrolls, time-major. Step t is (obs[t], actions[t]) -> rewards[t]."""

    obs: np.ndarray
    """[T + 1, n, *obs_shape]; obs[T] is the bootstrap observation."""
    actions: np.ndarray
    """[T, n, *action_shape]."""
    logp: np.ndarray
    """Behaviour policy log-probability of each action, float32 [T, n]."""
    rewards: np.ndarray
    """float32 [T, n]."""
    terminated: np.ndarray
    """bool [T, n]: the episode ended at this step (no bootstrap)."""
    truncated: np.ndarray
    """bool [T, n]: the episode was cut at this step (bootstrap from obs[t + 1])."""
    valid: np.ndarray
    """bool [T, n]: False for an autoreset step (its obs is a final observation)."""
    first: np.ndarray
    """bool [T, n]: obs[t] opens an episode (recurrent state was reset here)."""
    versions: np.ndarray
    """Policy version that chose each action, int64 [T, n]."""
    slots: np.ndarray
    """Global env slot of each unroll, int64 [n]."""
    aux: np.ndarray | None = None
    """The policy's per-step `ActOutput.aux`, float32 [T, n, k]; None when it returned none."""
    start_state: dict[str, np.ndarray] | None = None
    """Recurrent policies: the state the policy was given at obs[0] of each unroll, float32
    arrays [n, ...] (after the reset where first[0] is set); None for feed-forward ones."""
    start_inputs: dict[str, np.ndarray] | None = None
    """Recurrent policies that read them: the previous action [n, ...] and reward float32 [n]
    the policy was given at obs[0] (``prev_action``, ``prev_reward``); None otherwise."""

    @property
    def num_steps(self) -> int:
        """T."""
        return self.actions.shape[0]

    def __len__(self) -> int:
        return self.slots.shape[0]


_PER_UNROLL = ("start_state", "start_inputs")


def concat_unrolls(parts: list[Unrolls]) -> Unrolls:
    """Join unroll batches along the batch axis (axis 1 for [T, n] arrays, 0 for slots)."""
    if not parts:
        raise ValueError("concat_unrolls needs at least one Unrolls")
    joined = {}
    for f in fields(Unrolls):
        arrays = [getattr(p, f.name) for p in parts]
        if arrays[0] is None:
            joined[f.name] = None
        elif f.name in _PER_UNROLL:  # dicts of arrays whose batch axis is axis 0
            joined[f.name] = {k: np.concatenate([a[k] for a in arrays]) for k in arrays[0]}
        else:
            joined[f.name] = np.concatenate(arrays, axis=0 if f.name == "slots" else 1)
    return Unrolls(**joined)


def take_unrolls(u: Unrolls, index: slice | np.ndarray) -> Unrolls:
    """Select unrolls along the batch axis."""
    def take(name: str):
        a = getattr(u, name)
        if a is None:
            return None
        if name in _PER_UNROLL:
            return {k: v[index] for k, v in a.items()}
        return a[index] if name == "slots" else a[:, index]

    return Unrolls(**{f.name: take(f.name) for f in fields(Unrolls)})


@dataclass
class Rollout:
    """Preallocated rollout buffers with leading dims ``[T, B]`` (values: ``[T + 1, B]``)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    valid: torch.Tensor
    """False on the reset step that follows an episode end (its action was ignored)."""
    first: torch.Tensor | None = None
    """Recurrent policies only, bool [T, B]: obs[t] opens an episode (the state was reset there)."""
    prev_actions: torch.Tensor | None = None
    """Recurrent policies only, [T, B, *action_shape]: the previous action the policy was given."""
    prev_rewards: torch.Tensor | None = None
    """Recurrent policies only, float32 [T, B]: the previous reward the policy was given."""
    start_state: State = None
    """Recurrent policies only: the state entering obs[0] of each env, tensors [B, ...]."""

    @property
    def num_steps(self) -> int:
        """T x B: the env steps this rollout holds (reset steps included)."""
        return self.rewards.shape[0] * self.rewards.shape[1]

    @classmethod
    def allocate(cls, T: int, B: int, obs_space: gym.Space, action_space: gym.Space, device: str,
                 state: State = None) -> Rollout:
        """Zeroed buffers for T steps of B envs; ``state`` (a recurrent policy's ``[B, ...]`` state)
        also allocates the recurrent fields, the start state shaped like it."""
        import torch

        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        if isinstance(action_space, gym.spaces.Discrete):
            act_shape, act_dtype = (), torch.int64
        else:
            act_shape, act_dtype = tuple(action_space.shape), torch.float32

        def z(shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        if obs_dtype == torch.uint8 and len(obs_space.shape) == 3:
            # Frames [C, H, W] are stored channels-last (H, W, C in memory) behind a [C, H, W]
            # view: the sampler writes each frame once, and learning then reads minibatches
            # in the layout the CPU convolutions want without transposing every epoch.
            c, h, w = obs_space.shape
            obs = z((T, B, h, w, c), obs_dtype).movedim(-1, -3)
        else:
            obs = z((T, B, *obs_space.shape), obs_dtype)
        recurrent = {}
        if state is not None:
            recurrent = dict(first=z((T, B), torch.bool), prev_actions=z((T, B, *act_shape), act_dtype),
                             prev_rewards=z((T, B)), start_state={k: torch.zeros_like(v) for k, v in state.items()})
        return cls(
            obs=obs,
            actions=z((T, B, *act_shape), act_dtype),
            logprobs=z((T, B)),
            values=z((T + 1, B)),
            rewards=z((T, B)),
            terminated=z((T, B), torch.bool),
            truncated=z((T, B), torch.bool),
            valid=z((T, B), torch.bool),
            **recurrent,
        )
