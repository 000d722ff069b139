"""`NativeAgents`: a multi-agent family that steps all of its envs' agents in one call, on arrays.

It is the multi-agent form of `envs.native.base.NativeEnv`: the family holds `num_envs` envs
of `len(possible_agents)` agents each and answers `reset(ids)` and `step(ids, actions)` for a
set of envs, with one row per (env, agent) in `possible_agents` order. The agent pool
(`envs/agents/pool.py`) does the rest: seeds, the time limit, per-agent episode returns,
autoreset, validation of actions, the `active` mask and the engine's API.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding


class NativeAgents:
    """Base class of native multi-agent families.

    A subclass sets, in `__init__`: `possible_agents` (names, PettingZoo's order),
    `observation_spaces` / `action_spaces` (dicts by agent name, as PettingZoo's), `state_space`
    (a Box, or None when the family has no global state) and `max_cycles` (the time limit the
    family's PettingZoo version applies: every agent is truncated at that step). Arrays have
    a leading env axis and an agent axis: observations `[n, A, obs_dim]` (agents whose spaces
    are smaller are zero-padded at the end), rewards `[n, A]` float32, flags `[n, A]` bool.
    `self.rng(i)` is env i's generator, seeded as the PettingZoo env seeds itself
    (`reset(seed=...)`), so a family that draws env i's numbers from it, in the single env's
    order, repeats its episodes.
    """

    possible_agents: list[str]
    observation_spaces: dict[str, gym.Space]
    action_spaces: dict[str, gym.Space]
    state_space: gym.Space | None = None
    max_cycles: int | None = None
    metadata: dict[str, Any] = {}

    def __init__(self, num_envs: int):
        """Call it first in a subclass's `__init__`."""
        self.num_envs = num_envs
        self._rngs: list[np.random.Generator | None] = [None] * num_envs

    @property
    def num_agents(self) -> int:
        return len(self.possible_agents)

    def seed(self, i: int, seed: int | None) -> None:
        """Give env i a new generator from `seed` (PettingZoo's `reset(seed=seed)`)."""
        self._rngs[i], _ = seeding.np_random(seed)

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator; an unseeded one on first use."""
        if self._rngs[i] is None:
            self.seed(i, None)
        return self._rngs[i]

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None = None) -> np.ndarray:
        """Start a new episode in envs `ids` (int64); return their observations `[n, A, D]`."""
        raise NotImplementedError

    def step(self, ids: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step envs `ids` with `actions` (`[n, A]` for discrete actions, `[n, A, d]` for boxes);
        return (obs `[n, A, D]`, reward `[n, A]`, terminated `[n, A]`). Truncation at
        `max_cycles` is the pool's."""
        raise NotImplementedError

    def state(self, ids: np.ndarray) -> np.ndarray:
        """The global state of envs `ids`, `[n, *state_space.shape]` (PettingZoo's `state()`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the family holds (nothing, by default)."""
