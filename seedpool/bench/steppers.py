"""Step loops the benchmark times: a for-loop over envs, a batched `step`, and `recv`/`send`.

Actions are drawn up front and cycled, so sampling is never timed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

ACTION_ROWS = 1024
"""Pre-drawn action rows; cycled."""


def random_actions(space: gym.Space, batch: int, seed: int = 0, rows: int = ACTION_ROWS) -> np.ndarray:
    """`rows` batches of `batch` random actions from `space`, shape [rows, batch, ...]."""
    if isinstance(space, gym.spaces.Discrete):
        rng = np.random.default_rng(seed)
        low = int(space.start)
        return rng.integers(low, low + int(space.n), size=(rows, batch)).astype(space.dtype)
    space.seed(seed)
    return np.stack([np.stack([space.sample() for _ in range(batch)]) for _ in range(rows)])


class LoopStepper:
    """A plain Python loop over gymnasium envs, as a minimal user loop writes it.

    Each step writes every observation into one preallocated [N, ...] array, and resets an
    env as soon as its episode ends.
    """

    def __init__(self, envs: Sequence[gym.Env], seed: int = 0) -> None:
        self.envs = list(envs)
        self.env_steps = len(self.envs)
        first = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
        self.obs = np.stack([np.asarray(o) for o in first])
        # Python lists: indexing them is what a hand-written loop over a policy's output costs.
        self._actions = random_actions(self.envs[0].action_space, self.env_steps, seed).tolist()
        self._row = 0

    def step(self) -> None:
        """Step every env once; reset the ones whose episode ended."""
        actions = self._actions[self._row]
        self._row = (self._row + 1) % len(self._actions)
        obs = self.obs
        for i, env in enumerate(self.envs):
            o, _, terminated, truncated, _ = env.step(actions[i])
            if terminated or truncated:
                o, _ = env.reset()
            obs[i] = o

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


class _BatchStepper:
    """What the batched steppers share: the engine they step, and pre-drawn action rows taken in turn."""

    def __init__(self, engine: Any, action_space: gym.Space, batch: int, seed: int = 0) -> None:
        self.engine = engine
        self.env_steps = batch
        self._actions = random_actions(action_space, batch, seed)
        self._row = 0

    def _next_actions(self) -> np.ndarray:
        """The next row of actions (the rows are cycled)."""
        actions = self._actions[self._row]
        self._row = (self._row + 1) % len(self._actions)
        return actions

    def close(self) -> None:
        """Close the engine."""
        self.engine.close()


class SyncStepper(_BatchStepper):
    """Anything with `step(actions)` over a whole batch: vector envs and pools in sync mode."""

    def step(self) -> None:
        """One batched step with the next row of actions."""
        self.engine.step(self._next_actions())


class AsyncStepper(_BatchStepper):
    """An EnvPool-style async pool: take the first finished batch, act for exactly those envs.

    The pool must already be started (`async_reset()`); each `step()` is one `recv` and one
    `send(actions, env_id)`.
    """

    def step(self) -> None:
        """Receive one batch and send its actions back."""
        info = self.engine.recv()[-1]
        self.engine.send(self._next_actions(), info["env_id"])


def closing_on_error(build: Callable[[], Any], then: Callable[[Any], Any]) -> Any:
    """`then(build())`, closing what `build` made if `then` raises (no leaked workers)."""
    made = build()
    try:
        return then(made)
    except BaseException:
        made.close()
        raise
