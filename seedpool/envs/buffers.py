"""The engine's per-env result and action arrays, `[num_envs, ...]`, written in place.

Workers write row `env_id` of every array; the pool reads the rows of the envs a batch
returns. Indices travel between processes, data stays where it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seedpool.envs import spaces
from seedpool.envs.infos import InfoBox
from seedpool.envs.spec import TaskSpec

# Status codes a worker leaves in `status[env_id]` with each completion.
OK, FAILED, RESTARTED = 0, 1, 2


@dataclass
class Buffers:
    """Every array the engine shares between the pool and its workers."""

    obs: spaces.Tree
    final_obs: spaces.Tree | None  # same_step autoreset only
    action: spaces.Tree
    reward: np.ndarray  # float32
    terminated: np.ndarray  # bool
    truncated: np.ndarray  # bool
    elapsed_step: np.ndarray  # int32; also the episode length (the pool copies it)
    episode_return: np.ndarray  # float64
    status: np.ndarray  # int8, OK / FAILED / RESTARTED
    seed: np.ndarray  # int64, seed for the next reset; -1 = none
    info: dict[str, np.ndarray]  # declared info keys, one row per env
    extra: InfoBox  # whatever else an env's info holds, forwarded as gymnasium does

    @classmethod
    def allocate(cls, spec: TaskSpec, n: int, shared: bool, same_step: bool) -> "Buffers":
        """Zeroed buffers for `n` envs of `spec` (the seed row starts at -1: no seed)."""
        e = lambda shape, dt: spaces.empty(shape, dt, shared)  # noqa: E731
        buffers = cls(
            obs=spaces.alloc(spec.observation_space, n, shared),
            final_obs=spaces.alloc(spec.observation_space, n, shared) if same_step else None,
            action=spaces.alloc(spec.action_space, n, shared),
            reward=e((n,), np.float32),
            terminated=e((n,), np.bool_),
            truncated=e((n,), np.bool_),
            elapsed_step=e((n,), np.int32),
            episode_return=e((n,), np.float64),
            status=e((n,), np.int8),
            seed=e((n,), np.int64),
            info={k: e((n, *dt.shape), dt.base) for k, dt in spec.info_spec.items()},
            extra=InfoBox(n, shared),
        )
        buffers.seed.fill(-1)
        return buffers
