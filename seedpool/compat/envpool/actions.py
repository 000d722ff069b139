"""Actions under the EnvPool names: EnvPool's engine casts a float action batch for a
Discrete space to its integer type (its DM tests send `np.ones(n)`); seedpool's own pools
refuse floats. Here an integer-valued float batch is cast; a fractional, NaN or infinite
value stays an error, and so does an out-of-range one (seedpool's check, after the cast).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.pool import EnvPool as _SeedpoolPool


def cast_discrete(space: gym.Space, action: Any) -> Any:
    """`action` with an integer-valued float batch for a Discrete `space` cast to int64;
    anything else as it came (seedpool's validation judges it)."""
    if not isinstance(space, gym.spaces.Discrete) or isinstance(action, dict):
        return action
    a = np.asarray(action)
    if a.dtype.kind != "f":
        return action
    whole = np.isfinite(a) & (a == np.round(a))
    if not whole.all():
        raise ValueError(f"discrete actions must be whole numbers (EnvPool's names cast integer-valued floats), "
                         f"got {a[~whole].tolist()[:8]}")
    return a.astype(np.int64)


class GymnasiumPool(_SeedpoolPool):
    """The pool `make_gym`/`make_gymnasium` return: seedpool's pool, whose `send` and `step`
    take integer-valued float actions for a Discrete space, as EnvPool's do. Nothing else
    differs (no state of its own)."""

    def send(self, action: Any, env_id: Any = None) -> None:
        """seedpool's send, after EnvPool's cast of float actions."""
        super().send(cast_discrete(self.single_action_space, action), env_id)

    def step(self, action: Any, env_id: Any = None):
        """seedpool's step, after EnvPool's cast of float actions."""
        return super().step(cast_discrete(self.single_action_space, action), env_id)
