"""`envpool.make_spec(...)`'s result, and dm_env specs of gymnasium spaces (for `make_dm`).

EnvPool's `EnvSpec` is its C++ spec object; scripts read `config` (a named tuple of every
option), the gymnasium spaces, dm_env's `observation_spec()`/`action_spec()` and
`reward_threshold`. This class is seedpool's pool spec with the dm_env methods added.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, fields
from typing import Any

import dm_env.specs as dm_specs
import gymnasium as gym
import numpy as np

from seedpool.envs.envpool_api import PoolSpec

# The ids EnvPool adds beside every observation and action (one env, one player).
_ID = dm_specs.Array((), np.int32, name="env_id")
Players = collections.namedtuple("Players", ["env_id"])


def dm_spec(space: gym.Space, name: str) -> Any:
    """The dm_env spec of one env's `space`: arrays for Box/Discrete/MultiBinary/MultiDiscrete,
    dicts and tuples of them for Dict/Tuple spaces."""
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) == 0:
            return dm_specs.DiscreteArray(int(space.n), dtype=np.int32, name=name)
        lo = int(space.start)
        return dm_specs.BoundedArray((), np.int32, lo, lo + int(space.n) - 1, name=name)
    if isinstance(space, gym.spaces.Box):  # uniform bounds as scalars, as EnvPool's specs
        return dm_specs.BoundedArray(space.shape, space.dtype, _scalar(space.low), _scalar(space.high), name=name)
    if isinstance(space, gym.spaces.MultiBinary):
        return dm_specs.BoundedArray(space.shape, space.dtype, 0, 1, name=name)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return dm_specs.BoundedArray(space.shape, space.dtype, space.start,
                                     space.start + space.nvec - 1, name=name)
    if isinstance(space, gym.spaces.Dict):
        return {k: dm_spec(s, f"{name}.{k}") for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(dm_spec(s, f"{name}.{i}") for i, s in enumerate(space.spaces))
    raise TypeError(f"no dm_env spec for a {type(space).__name__} space ({name}): "
                    "use make_gymnasium for this task")


def _scalar(bound: np.ndarray) -> Any:
    flat = bound.reshape(-1)
    return flat[0] if flat.size and (flat == flat[0]).all() else bound


State = collections.namedtuple("State", ["obs", "env_id", "players"])


@dataclass
class EnvSpec(PoolSpec):
    """A task's spec as EnvPool gives it: seedpool's pool spec (`id`, `config` as a named
    tuple, the single env's spaces, `reward_threshold`) with dm_env's specs added."""

    @classmethod
    def of_pool_spec(cls, spec: PoolSpec) -> EnvSpec:
        """The same spec, with EnvPool's dm_env methods."""
        return cls(**{f.name: getattr(spec, f.name) for f in fields(PoolSpec)})

    def observation_spec(self) -> Any:
        """dm_env's observation spec: the env's observation under `obs` (a Dict's keys as
        fields of their own, after the ids, as EnvPool's), with EnvPool's ids."""
        space = self.observation_space
        if isinstance(space, gym.spaces.Dict):
            kind = collections.namedtuple("State", ("env_id", "players", *space.spaces), rename=True)
            return kind(_ID, Players(_ID), *(dm_spec(s, k) for k, s in space.spaces.items()))
        return State(dm_spec(space, "obs"), _ID, Players(_ID))

    def action_spec(self) -> Any:
        """dm_env's spec of one action."""
        return dm_spec(self.action_space, "action")

    @property
    def action_array_spec(self) -> dict[str, Any]:
        """EnvPool's flat action layout: the ids and the action."""
        return {"env_id": _ID, "players.env_id": _ID, "action": self.action_spec()}

