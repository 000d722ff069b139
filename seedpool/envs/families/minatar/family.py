"""MinAtar (Young & Tian 2019) as native families: the five games, every env of a pool in one call.

Each game (breakout.py, ...) keeps the state of all its envs in one int32 array, a
row per env (named columns, and 10x10 maps as 100 columns where the game has them), and
steps the rows of a batch in one numba kernel, as the `minatar` package (1.0.15) steps one
game: sticky actions (the previous action repeats with probability `sticky_action_prob`,
drawn on every step), difficulty ramping, and every random draw from the env's own MT19937
generator in the package's order (rng.py). `reset(seed=s)` makes that generator
`RandomState(s)`, as `minatar`'s `Environment.seed(s)` does: the same seeds and actions give
the same episodes, observations `bool [C, 10, 10]` as seedpool's Python-env MinAtar ids give
them (tests/test_native_minatar.py compares them). The `minatar` package is not needed.

A game writes its per-env functions (reset, act, draw); kernels.py builds the batch loops
from them, among them a fused kernel (`step_autoreset`): sticky actions, the game, the
engine's bookkeeping and autoreset of a whole batch in one call, drawn straight into the
pool's rows (Breakout's updates the few cells that change; the others redraw the row).
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from numba import njit, types

from seedpool.envs.families.minatar import rng as minatar_rng
from seedpool.envs.families.minatar.kernels import GameKernels
from seedpool.envs.native.base import NativeEnv, Rows

# minatar's six actions, by index: no-op, left, up, right, down, fire.
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)


ROW = types.int32[::1]  # one env's state row (the kernels' argument types: see rng.py)
OBS = types.boolean[:, :, ::1]  # one env's observation [C, 10, 10]


# Cell helpers for the games' state rows. Plain loops: numba compiles slice expressions
# into far more code, and the games' kernels are compiled on first use (in CI, every run).
@njit(types.void(ROW, types.int64, types.int64, types.int64), cache=True, nogil=True)
def fill(s, lo, hi, value):  # pragma: no cover - compiled
    """s[lo:hi] = value."""
    for c in range(lo, hi):
        s[c] = value


@njit(types.int64(ROW, types.int64, types.int64), cache=True, nogil=True)
def count(s, lo, hi):  # pragma: no cover - compiled
    """How many of s[lo:hi] are nonzero."""
    n = 0
    for c in range(lo, hi):
        if s[c]:
            n += 1
    return n


@njit(types.void(ROW, types.int64, types.int64, types.int64), cache=True, nogil=True)
def move(s, dst, src, n):  # pragma: no cover - compiled
    """s[dst:dst + n] = s[src:src + n], the ranges may overlap (memmove)."""
    if dst < src:
        for c in range(n):
            s[dst + c] = s[src + c]
    else:
        for c in range(n - 1, -1, -1):
            s[dst + c] = s[src + c]


class MinAtarFamily(NativeEnv):
    """One MinAtar game, `num_envs` at once; a subclass per game names its kernels and state size.

    Ids ending in -v1 act with the game's minimal action set, -v0 with all six actions.
    Options are those of the Python-env ids: `sticky_action_prob` (0.1) and `difficulty_ramping`.
    """

    channels: int  # the game's observation channels
    state_size: int  # int32 columns of one env's state
    minimal_actions: tuple[int, ...]  # the game's minimal action set, as minatar lists it
    kernels: GameKernels  # the game's batch loops (`game_kernels` of its per-env functions)
    all_actions = False  # -v0 ids: the six actions
    max_episode_steps = None  # MinAtar has no time limit of its own (Freeway's is a termination)
    pure_step = False  # a step draws from the env's generator
    metadata = {"render_fps": 15}

    def __init__(self, num_envs: int, sticky_action_prob: float = 0.1, difficulty_ramping: bool = True):
        super().__init__(num_envs)
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob}")
        self.sticky_action_prob = float(sticky_action_prob)
        self.difficulty_ramping = bool(difficulty_ramping)
        self.action_set = np.array(range(6) if self.all_actions else self.minimal_actions, np.int64)
        self.single_observation_space = gym.spaces.Box(0, 1, (self.channels, 10, 10), np.bool_)
        self.single_action_space = gym.spaces.Discrete(len(self.action_set))
        self.state = np.zeros((num_envs, self.state_size), np.int32)
        self.words = np.zeros((num_envs, minatar_rng.WORDS), np.uint32)  # each env's MT19937 state
        self.word_pos = np.full(num_envs, minatar_rng.WORDS, np.int64)
        self.has_rng = np.zeros(num_envs, np.bool_)
        self.all_seeded = False  # every env has its generator: resets skip the check
        # minatar keeps the last action across episodes (and reseeds): only a new env starts at 0.
        self.last_action = np.zeros(num_envs, np.int64)
        self._rows = np.arange(num_envs)

    def seed(self, i: int, seed: int | None) -> None:
        """Env i's generator becomes `RandomState(seed)` (fresh entropy for None), as
        minatar's `Environment.seed`; gymnasium's generator is seeded too (`seed_of`)."""
        super().seed(i, seed)
        minatar_rng.load(self.words, self.word_pos, i, np.random.RandomState(seed))
        self.has_rng[i] = True

    def reset(self, ids: np.ndarray, options: Sequence[dict | None] | None) -> np.ndarray:
        if not self.all_seeded:
            for i in ids[~self.has_rng[ids]].tolist():  # never seeded: fresh entropy, as minatar
                self.seed(i, None)
            self.all_seeded = bool(self.has_rng.all())
        obs = np.zeros((len(ids), self.channels, 10, 10), np.bool_)
        self._reset_rows(ids, obs)
        return obs

    def step(self, ids: Rows, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = self._rows[ids]
        n = len(rows)
        obs = np.zeros((n, self.channels, 10, 10), np.bool_)
        reward = np.zeros(n, np.float64)
        terminated = np.zeros(n, np.bool_)
        self._step_rows(rows, np.asarray(actions, np.int64), obs, reward, terminated)
        return obs, reward, terminated

    def can_fuse(self) -> bool:
        """The game's fused step, once every env has its generator (the first reset gives them)."""
        return self.all_seeded

    def step_autoreset(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, final_obs: np.ndarray,
                       book: Any) -> None:
        """NativeEnv's fused step: one numba call of the game's `fused` kernel."""
        self.kernels.fused(self.state, self.words, self.word_pos, self.last_action, self.action_set, self.sticky_action_prob,
                   self.difficulty_ramping, rows, actions, obs, final_obs, *book)

    def _reset_rows(self, rows: np.ndarray, obs: np.ndarray) -> None:
        """Reset envs `rows` and draw their observations into `obs` (the game's kernel)."""
        self.kernels.reset(self.state, self.words, self.word_pos, rows, obs)

    def _step_rows(self, rows: np.ndarray, actions: np.ndarray, obs: np.ndarray, reward: np.ndarray,
                   terminated: np.ndarray) -> None:
        """Step envs `rows` with action indices `actions`; write the k-th rows of the outputs."""
        self.kernels.step(self.state, self.words, self.word_pos, self.last_action, rows, actions, self.action_set,
                          self.sticky_action_prob, self.difficulty_ramping, obs, reward, terminated)
