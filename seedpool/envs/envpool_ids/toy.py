"""EnvPool's own toy tasks: Catch-v0 and NChain-v0 (EnvPool's C++ ports, not gymnasium ids),
and Blackjack's observation as EnvPool gives it.

Written from the tasks' documented rules and checked against envpool 1.2.5
(tests/test_envpool_tasks.py); gymnasium.Env classes, so any seedpool backend runs them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class CatchEnv(gym.Env):
    """bsuite's Catch as EnvPool's Catch-v0: a ball falls one row per step from a random
    column of the top row; the paddle on the bottom row starts in the middle and moves left
    (action 0), stays (1) or right (2). When the ball reaches the bottom row the episode
    ends with reward +1 if the paddle is under it, else -1. The observation is the board,
    1.0 where the ball and the paddle are."""

    def __init__(self, height: int = 10, width: int = 5):
        """A board of `height` rows and `width` columns (EnvPool's defaults)."""
        if height < 2 or width < 1:
            raise ValueError(f"Catch needs height >= 2 and width >= 1, got height={height}, width={width}")
        self.height, self.width = int(height), int(width)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.height, self.width), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self._ball = (0, 0)
        self._paddle = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """A new ball in a random column of the top row; the paddle back in the middle."""
        super().reset(seed=seed)
        self._ball = (0, int(self.np_random.integers(self.width)))
        self._paddle = self.width // 2
        return self._board(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Move the paddle by action - 1 (kept on the board), the ball one row down."""
        self._paddle = min(max(self._paddle + int(action) - 1, 0), self.width - 1)
        row, col = self._ball[0] + 1, self._ball[1]
        self._ball = (row, col)
        if row == self.height - 1:
            return self._board(), 1.0 if col == self._paddle else -1.0, True, False, {}
        return self._board(), 0.0, False, False, {}

    def _board(self) -> np.ndarray:
        board = np.zeros((self.height, self.width), np.float32)
        board[self._ball] = 1.0
        board[self.height - 1, self._paddle] = 1.0
        return board


class NChainEnv(gym.Env):
    """The n-chain task of gym's old NChain-v0 (EnvPool's NChain-v0): states 0..n-1; action 0
    moves one state along the chain (reward 0; at the last state it stays there with reward
    `large`), action 1 goes back to state 0 with reward `small`; with probability `slip` the
    other action is taken. The episode never terminates (EnvPool's id truncates at 1000 steps)."""

    def __init__(self, n: int = 5, slip: float = 0.2, small: float = 2.0, large: float = 10.0):
        """EnvPool's (and gym's) defaults."""
        self.n, self.slip, self.small, self.large = int(n), float(slip), float(small), float(large)
        self.observation_space = gym.spaces.Discrete(self.n)
        self.action_space = gym.spaces.Discrete(2)
        self._state = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        """Back to state 0."""
        super().reset(seed=seed)
        self._state = 0
        return self._state, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        """One move along the chain or back to its start (see the class docstring)."""
        back = bool(action)
        if self.np_random.random() < self.slip:
            back = not back
        if back:
            self._state, reward = 0, self.small
        elif self._state < self.n - 1:
            self._state, reward = self._state + 1, 0.0
        else:
            reward = self.large
        return self._state, reward, False, False, {}


class BoxBlackjack(gym.ObservationWrapper):
    """Gymnasium's Blackjack with EnvPool's observation: (player's sum, dealer's card,
    usable ace) as one int32 array in a Box(0, 31, (3,)), not a Tuple of Discretes."""

    def __init__(self, env: gym.Env):
        """Wrap a Blackjack env this module built (never a user's)."""
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0, 31, (3,), np.int32)

    def observation(self, observation: tuple) -> np.ndarray:
        """The tuple as an int32 array."""
        return np.asarray(observation, dtype=np.int32)


def make_blackjack(**options: Any) -> gym.Env:
    """EnvPool's Blackjack-v1: gymnasium's rules, with EnvPool's defaults (sab=True,
    natural=False) and its Box observation."""
    from seedpool.envs.spec import peel

    kwargs = {"sab": True, "natural": False, **options}
    return BoxBlackjack(peel(gym.make("Blackjack-v1", disable_env_checker=True, **kwargs))[0])
