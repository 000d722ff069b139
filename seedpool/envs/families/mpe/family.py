"""`MpeFamily`: what simple_spread and simple_tag share: the world arrays, the generators the
kernels draw from, the spaces and the calls into a scenario's three kernels."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np
from gymnasium import spaces

from seedpool.envs.agents.native import NativeAgents
from seedpool.envs.native import pcg64

MOVE_ACTIONS = 5  # no-op, left, right, down, up: a movable, silent agent's actions in mpe2


class ScenarioKernels(NamedTuple):
    """A scenario's batch kernels (numba), over the envs `rows`, writing the k-th output rows.
    step(pos, vel, steps, rows, actions_d, actions_c, continuous, world, params, obs, reward, terminated);
    reset(pos, vel, steps, pcg, rows, params, obs); observe(pos, vel, rows, params, obs)."""

    step: Callable[..., None]
    reset: Callable[..., None]
    observe: Callable[..., None]


def unsupported(**options: Any) -> None:
    """Refuse mpe2 options whose behaviour the kernels do not have (each is off by default)."""
    on = [name for name, value in options.items() if value is not None and value is not False]
    if on:
        raise NotImplementedError(f"the native MPE families do not implement {', '.join(on)}; "
                                  f"use the PettingZoo env through the agent pool instead")


class MpeFamily(NativeAgents):
    """An mpe2 task, `num_envs` worlds at once (see kernels.py for the state layout).

    A subclass names its agents and their observation sizes, its world constants and its kernels.
    """

    kernels: ScenarioKernels

    def __init__(self, num_envs: int, agents: list[str], obs_dims: list[int], num_landmarks: int,
                 world: tuple[np.ndarray, ...], params: tuple, max_cycles: int, continuous_actions: bool):
        """`world`: (size, collide) per entity and (sensitivity, max_speed) per agent, as
        kernels.world_step reads them; `params`: the scenario's constants for its kernels."""
        super().__init__(num_envs)
        num_agents = len(agents)
        self.possible_agents = list(agents)
        self.max_cycles = max_cycles
        self.continuous_actions = continuous_actions
        self.obs_dims = list(obs_dims)
        self.obs_dim = max(obs_dims)
        box = dict(low=-np.float32(np.inf), high=+np.float32(np.inf), dtype=np.float32)
        self.observation_spaces = {a: spaces.Box(shape=(d,), **box) for a, d in zip(agents, obs_dims)}
        self.action_spaces = {a: spaces.Box(low=0, high=1, shape=(MOVE_ACTIONS,)) if continuous_actions
                              else spaces.Discrete(MOVE_ACTIONS) for a in agents}
        self.state_space = spaces.Box(shape=(sum(obs_dims),), **box)
        self.metadata = {"is_parallelizable": True, "render_fps": 10}
        self.world = world
        self.params = params
        self.pos = np.zeros((num_envs, num_agents + num_landmarks, 2))
        self.vel = np.zeros((num_envs, num_agents, 2))
        self.steps = np.zeros(num_envs, np.int64)  # steps since reset (mpe2's truncation outranks termination)
        self.draws = pcg64.KernelStates(np.zeros((num_envs, 4), np.uint64))
        # Columns of the padded [A * D] observations that make up PettingZoo's state().
        self._state_cols = np.concatenate([j * self.obs_dim + np.arange(d) for j, d in enumerate(obs_dims)])
        self._no_discrete = np.zeros((0, 0), np.int64)
        self._no_box = np.zeros((0, 0, MOVE_ACTIONS), np.float32)

    def seed(self, i: int, seed: int | None) -> None:
        """As NativeAgents'; the kernels then draw from a copy of the generator's state."""
        super().seed(i, seed)
        self.draws.copy(i, self._rngs[i])

    def rng(self, i: int) -> np.random.Generator:
        """Env i's generator, brought up to the kernels' draws."""
        if self.draws.sync(i, self._rngs[i]):
            return self._rngs[i]
        return super().rng(i)

    def _obs(self, n: int) -> np.ndarray:
        return np.empty((n, self.num_agents, self.obs_dim), np.float32)

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None = None) -> np.ndarray:
        """mpe2's reset_world for envs `ids` (its reset takes no options)."""
        ids = np.asarray(ids, np.int64)
        for i in self.draws.uncopied(ids):
            self.seed(i, None)
        obs = self._obs(len(ids))
        self.kernels.reset(self.pos, self.vel, self.steps, self.draws.rows, ids, self.params, obs)
        return obs

    def step(self, ids: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.asarray(ids, np.int64)
        n = len(ids)
        if self.continuous_actions:
            actions = np.asarray(actions)
            if actions.dtype.kind != "f":
                actions = actions.astype(np.float32)
            # PettingZoo's ClipOutOfBoundsWrapper clips in the actions' own dtype.
            actions_d, actions_c = self._no_discrete, np.clip(actions, 0.0, 1.0)
        else:
            actions_d, actions_c = np.asarray(actions, np.int64), self._no_box
        obs = self._obs(n)
        reward = np.empty((n, self.num_agents), np.float32)
        terminated = np.empty((n, self.num_agents), np.bool_)
        self.kernels.step(self.pos, self.vel, self.steps, ids, actions_d, actions_c, self.continuous_actions,
                          self.world, self.params, obs, reward, terminated)
        return obs, reward, terminated

    def observe(self, ids: np.ndarray) -> np.ndarray:
        """The current observations of envs `ids`, `[n, A, D]`."""
        ids = np.asarray(ids, np.int64)
        obs = self._obs(len(ids))
        self.kernels.observe(self.pos, self.vel, ids, self.params, obs)
        return obs

    def state(self, ids: np.ndarray) -> np.ndarray:
        """PettingZoo's state(): every agent's observation, unpadded, in agent order."""
        obs = self.observe(ids)
        return obs.reshape(len(obs), -1)[:, self._state_cols]
