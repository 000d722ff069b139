"""The replay an agent needs, built from its environment's observation and action spaces.

One factory for every family that learns from transitions (DQN, Ape-X, SAC
and TD3): a row is ``obs, action, reward, discount, next_obs``, the layout `NStepWriter`
writes, and each space maps to the fields that hold it:

=================  ==========================================================
space              stored as (per row)
=================  ==========================================================
Discrete           int64 scalar
Box                a vector (array) of the space's shape; float32 for float
                   Boxes (learners compute in float32: half float64's bytes),
                   the space's own dtype otherwise (uint8 frames stay uint8)
MultiDiscrete      int64 vector of its shape
MultiBinary        int8 array of its shape
Dict (obs only)    one field per key, ``obs.<key>`` (sample returns a dict)
=================  ==========================================================

A stack of uint8 frames (a Box shaped ``[stack, H, W]`` with ``stack > 1``) is stored
frame by frame, each frame once (``frames.py``). Any other space is refused with a
`TypeError` naming it.

Sequence items (R2D2) are one more layout on the same replays, not another replay: a row
is a whole sequence (`seedpool.replay.sequence.SequenceReplay`, its fields from
`space_field` of each space), written by `SequenceWriter` in place of `NStepWriter`; the
samplers (sum tree or uniform) draw rows whatever a row holds.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.errors import ConfigTypeError

from .buffers import PrioritizedReplay, UniformReplay

FieldSpec = Any
"""``(shape, dtype)``, or a dict of them for a Dict observation."""


def space_field(space: gym.Space, role: str = "observation") -> FieldSpec:
    """The field spec that stores one value of ``space``; ``role`` ("observation"/"action") names it in errors."""
    if isinstance(space, gym.spaces.Discrete):
        return (), np.int64
    if isinstance(space, gym.spaces.Box):
        dtype = np.float32 if np.issubdtype(space.dtype, np.floating) else space.dtype
        return tuple(space.shape), dtype
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(space.shape), np.int64
    if isinstance(space, gym.spaces.MultiBinary):
        return tuple(np.atleast_1d(space.shape)), np.int8
    if isinstance(space, gym.spaces.Dict) and role == "observation":
        if not len(space.spaces):
            raise ConfigTypeError("the replay cannot store an empty Dict observation space")
        return {key: space_field(sub, f"observation['{key}']") for key, sub in space.spaces.items()}
    raise ConfigTypeError(
        f"the replay cannot store a {type(space).__name__} {role} space ({space}): it stores Discrete, "
        "Box, MultiDiscrete and MultiBinary spaces"
        + (", and Dict observations of them" if role == "observation" else "")
    )


def replay_fields(obs_space: gym.Space, action_space: gym.Space) -> dict[str, FieldSpec]:
    """The fields of a transition row (what `NStepWriter` writes) for these spaces."""
    obs = space_field(obs_space, "observation")
    return {"obs": obs, "action": space_field(action_space, "action"), "reward": ((), np.float32),
            "discount": ((), np.float32), "next_obs": obs}


def is_frame_stack(space: gym.Space) -> bool:
    """A Box of uint8 frames stacked on its first axis ``[stack > 1, H, W]``: stored deduplicated."""
    return (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
            and space.shape[0] > 1)


def make_replay(obs_space: gym.Space, action_space: gym.Space, capacity: int, *, prioritized: bool = False,
                alpha: float = 0.6, seed: int | None = None) -> PrioritizedReplay | UniformReplay:
    """A prioritized (exponent ``alpha``) or uniform replay of ``capacity`` transition rows for these spaces.

    Stacked uint8 frames are stored once each (write rows through `NStepWriter`). Raises
    TypeError for a space it cannot store. The spaces are only read.
    """
    fields = replay_fields(obs_space, action_space)
    dedup = is_frame_stack(obs_space)
    if prioritized:
        return PrioritizedReplay(capacity, fields, alpha=alpha, seed=seed, frame_dedup=dedup)
    return UniformReplay(capacity, fields, seed=seed, frame_dedup=dedup)
