"""Environments only the benchmark uses: a pure-Python env that EnvPool cannot run."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np


def burn_cpu(seconds: float) -> None:
    """Spin until this thread has used `seconds` of CPU time.

    Thread CPU time, not wall time: a worker that is descheduled mid-step must still
    do its full amount of work, or an overloaded engine would look better than it is.
    """
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class UnevenEnv(gym.Env):
    """Pure-Python env with CPU-heavy, uneven steps: `step_cpu_us` each, every `slow_every`-th `slow_factor` x that.

    Which steps are slow depends only on the seed given at reset (a per-env phase), so envs
    seeded differently are slow at different times, as real envs with uneven costs are.
    The step counter runs across episodes: the slow phase does not restart at reset.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        step_cpu_us: float = 30.0,
        slow_every: int = 10,
        slow_factor: float = 10.0,
        episode_length: int = 200,
    ) -> None:
        if step_cpu_us < 0 or slow_every < 1 or slow_factor < 0 or episode_length < 1:
            raise ValueError(
                "UnevenEnv expects step_cpu_us >= 0, slow_every >= 1, slow_factor >= 0 and "
                f"episode_length >= 1; got {step_cpu_us}, {slow_every}, {slow_factor}, {episode_length}"
            )
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.step_cpu = step_cpu_us * 1e-6
        self.slow_every = slow_every
        self.slow_factor = slow_factor
        self.episode_length = episode_length
        self.total_steps = 0
        self.phase = 0
        self._t = 0
        self._obs = np.zeros(4, dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; a seed fixes this env's slow-step phase."""
        super().reset(seed=seed)
        if seed is not None:
            self.phase = int(self.np_random.integers(self.slow_every))
        self._t = 0
        self._obs = self.np_random.uniform(-0.05, 0.05, size=4).astype(np.float32)
        return self._obs.copy(), {}

    def is_slow(self, step_index: int) -> bool:
        """Whether the env's `step_index`-th step (0-based, counted across episodes) is a slow one."""
        return (step_index + self.phase) % self.slow_every == 0

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Burn the step's CPU cost, then move the observation a little."""
        cost = self.step_cpu * (self.slow_factor if self.is_slow(self.total_steps) else 1.0)
        burn_cpu(cost)
        self.total_steps += 1
        self._t += 1
        direction = 1.0 if int(action) == 1 else -1.0
        self._obs = np.clip(self._obs * 0.9 + 0.01 * direction, -1.0, 1.0).astype(np.float32)
        terminated = self._t >= self.episode_length
        return self._obs.copy(), 1.0, terminated, False, {}
