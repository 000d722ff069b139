"""Small deterministic gymnasium envs for the engine tests.

Every env here is pure Python and cheap. The faulty ones misbehave only when reset with a
chosen seed, so one env of a pool (env i gets seed + i) can fail while the others run on.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class EchoEnv(gym.Env):
    """Discrete actions; the reward echoes the action, so a reward shows which action was used.

    obs = [seed of the last seeded reset, steps in this episode, last action], float32.
    The episode terminates after `episode_len` steps.
    """

    def __init__(self, n_actions: int = 5, episode_len: int = 7):
        self.action_space = spaces.Discrete(n_actions)
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.episode_len = episode_len
        self.seed_value = -1
        self.t = 0

    def _obs(self, last_action: float) -> np.ndarray:
        return np.array([self.seed_value, self.t, last_action], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.seed_value = seed
        self.t = 0
        return self._obs(-1.0), {}

    def step(self, action: Any):
        self.t += 1
        a = int(action)
        return self._obs(a), float(a), self.t >= self.episode_len, False, {}


class FaultyEnv(EchoEnv):
    """An EchoEnv that misbehaves on step `at_step` of each episode if reset with `bad_seed`.

    fault: "raise" (RuntimeError), "hang" (sleeps for an hour), "kill" (SIGKILLs its own
    process; it refuses to do so in the process `safe_pid`, the test runner).
    """

    def __init__(self, fault: str, at_step: int, bad_seed: int, safe_pid: int, episode_len: int = 50):
        super().__init__(episode_len=episode_len)
        self.fault, self.at_step, self.bad_seed, self.safe_pid = fault, at_step, bad_seed, safe_pid

    def step(self, action: Any):
        if self.seed_value == self.bad_seed and self.t + 1 == self.at_step:
            self._misbehave()
        return super().step(action)

    def _misbehave(self) -> None:
        if self.fault == "raise":
            raise RuntimeError(f"deliberate failure of FaultyEnv at step {self.at_step}")
        if self.fault == "hang":
            time.sleep(3600)
        if self.fault == "kill":
            if os.getpid() == self.safe_pid:
                raise RuntimeError("FaultyEnv(kill) refuses to kill the test runner")
            os.kill(os.getpid(), signal.SIGKILL)
        raise ValueError(f"unknown fault {self.fault!r}")


class DictObsEnv(gym.Env):
    """Dict observations (a Box and a Discrete); reward echoes the discrete action."""

    def __init__(self, episode_len: int = 4):
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(-10.0, 10.0, (2,), np.float32), "phase": spaces.Discrete(4)}
        )
        self.action_space = spaces.Discrete(3)
        self.episode_len = episode_len
        self.t = 0
        self.seed_value = -1

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self.seed_value, self.t], np.float32), "phase": self.t % 4}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.seed_value = seed
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any):
        self.t += 1
        return self._obs(), float(action), self.t >= self.episode_len, False, {}


class DiscreteObsEnv(gym.Env):
    """Discrete observations: obs = steps in the episode (mod 6); reward echoes the action."""

    def __init__(self, episode_len: int = 5):
        self.observation_space = spaces.Discrete(6)
        self.action_space = spaces.Discrete(2)
        self.episode_len = episode_len
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action: Any):
        self.t += 1
        return self.t % 6, float(action), self.t >= self.episode_len, False, {}


class BoxActionEnv(gym.Env):
    """Continuous Box(2,) actions; obs is the action, reward is a[0] + 10 * a[1]."""

    def __init__(self, episode_len: int = 6):
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.episode_len = episode_len
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any):
        self.t += 1
        a = np.asarray(action, np.float32)
        return a.copy(), float(a[0] + 10 * a[1]), self.t >= self.episode_len, False, {}


class MultiDiscreteEnv(gym.Env):
    """MultiDiscrete([3, 4]) actions; reward is 10 * a[0] + a[1]; obs is the action."""

    def __init__(self, episode_len: int = 6):
        self.action_space = spaces.MultiDiscrete([3, 4])
        self.observation_space = spaces.Box(0, 10, (2,), np.int64)
        self.episode_len = episode_len
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.int64), {}

    def step(self, action: Any):
        self.t += 1
        a = np.asarray(action, np.int64)
        return a.copy(), float(10 * a[0] + a[1]), self.t >= self.episode_len, False, {}


class CostlyCartPole(gym.Wrapper):
    """CartPole whose step busy-waits `cost_s` (so backend="auto" sees a non-trivial step cost)."""

    def __init__(self, cost_s: float = 60e-6, max_episode_steps: int = 60):
        super().__init__(gym.make("CartPole-v1", max_episode_steps=max_episode_steps))
        self.cost_s = cost_s

    def step(self, action: Any):
        end = time.perf_counter() + self.cost_s
        while time.perf_counter() < end:
            pass
        return self.env.step(action)


class ResetFailEnv(EchoEnv):
    """An EchoEnv whose reset raises when seeded with `bad_seed`."""

    def __init__(self, bad_seed: int):
        super().__init__()
        self.bad_seed = bad_seed

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed == self.bad_seed:
            raise RuntimeError(f"deliberate reset failure with seed {seed}")
        return super().reset(seed=seed, options=options)


class OptionsEnv(gym.Env):
    """obs = [options["x"] of the reset that began the episode (-1: none), steps so far].

    Each step busy-waits `cost_s` (so `auto` may share envs with the main process); the
    episode terminates after 3 steps.
    """

    def __init__(self, cost_s: float = 0.0):
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.cost_s, self.x, self.t = cost_s, -1.0, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.x = float(options["x"]) if options and "x" in options else -1.0
        self.t = 0
        return np.array([self.x, 0.0], np.float32), {}

    def step(self, action: Any):
        end = time.perf_counter() + self.cost_s
        while time.perf_counter() < end:
            pass
        self.t += 1
        return np.array([self.x, self.t], np.float32), 0.0, self.t >= 3, False, {}


class GatedEnv(EchoEnv):
    """An EchoEnv whose steps wait for `gate` (an Event) when reset with a seed below
    `gated_below`; each such step that got through adds one to `passed` (a shared Value).

    The gate and counter come from a fork context, so forked workers share them with the test.
    """

    def __init__(self, gate: Any, passed: Any, gated_below: int, wait_s: float = 30.0):
        super().__init__(episode_len=1000)
        self.gate, self.passed, self.gated_below, self.wait_s = gate, passed, gated_below, wait_s

    def step(self, action: Any):
        if self.seed_value < self.gated_below:
            self.gate.wait(self.wait_s)
            with self.passed.get_lock():
                self.passed.value += 1
        return super().step(action)


class BlockingEnv(EchoEnv):
    """An EchoEnv whose step `at_step` of each episode blocks on `gate` (an Event, for at most
    an hour) when reset with `bad_seed`: a hung env that a test can release at its end."""

    def __init__(self, gate: Any, at_step: int, bad_seed: int):
        super().__init__(episode_len=50)
        self.gate, self.at_step, self.bad_seed = gate, at_step, bad_seed

    def step(self, action: Any):
        if self.seed_value == self.bad_seed and self.t + 1 == self.at_step:
            self.gate.wait(3600)
        return super().step(action)


NESTED_OBS_SPACES = {
    "dict": lambda: spaces.Dict({
        "a": spaces.Box(-np.inf, np.inf, (2,), np.float32),
        "inner": spaces.Dict({"b": spaces.Box(-np.inf, np.inf, (3,), np.float32), "c": spaces.Discrete(50)}),
    }),
    "tuple": lambda: spaces.Tuple((
        spaces.Box(-np.inf, np.inf, (2,), np.float64),
        spaces.Dict({
            "x": spaces.Discrete(7, start=1),
            "y": spaces.Tuple((spaces.Box(0, 255, (2, 2), np.uint8), spaces.MultiBinary(3))),
        }),
    )),
}
NESTED_ACTION_SPACES = {
    "discrete": lambda: spaces.Discrete(5),
    "dict": lambda: spaces.Dict({
        "move": spaces.Box(-1.0, 1.0, (2,), np.float32),
        "pick": spaces.Discrete(4),
        "more": spaces.Dict({"k": spaces.MultiDiscrete([2, 3])}),
    }),
    "tuple": lambda: spaces.Tuple((spaces.Discrete(3), spaces.Dict({"z": spaces.Box(-1.0, 1.0, (1,), np.float32)}))),
}


class NestedEnv(gym.Env):
    """Nested Dict/Tuple observations (and optionally actions) drawn from the env's seeded RNG.

    Every leaf of the observation changes with each step and with the action (the reward is
    the sum of every number in the action), so a leaf left unwritten, a leaf of another env or
    an action routed to the wrong env shows. Episodes last 3 to 6 steps (drawn at reset).
    """

    def __init__(self, obs_kind: str = "dict", action_kind: str = "discrete"):
        self.observation_space = NESTED_OBS_SPACES[obs_kind]()
        self.action_space = NESTED_ACTION_SPACES[action_kind]()
        self.t, self.length = 0, 3

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 7))
        return self._draw(self.observation_space, 0.0), {}

    def step(self, action: Any):
        self.t += 1
        rew = _leaf_sum(action)
        return self._draw(self.observation_space, rew), rew, self.t >= self.length, False, {}

    def _draw(self, space: gym.Space, shift: float) -> Any:
        rng = self.np_random
        if isinstance(space, spaces.Dict):
            return {k: self._draw(s, shift) for k, s in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            return tuple(self._draw(s, shift) for s in space.spaces)
        if isinstance(space, spaces.Discrete):
            return int(space.start + (self.t + int(shift * 10) + rng.integers(space.n)) % space.n)
        if isinstance(space, spaces.MultiBinary):
            return rng.integers(0, 2, space.shape).astype(space.dtype)
        if space.dtype == np.uint8:
            return rng.integers(0, 256, space.shape).astype(np.uint8)
        return (rng.normal(size=space.shape) + self.t + shift).astype(space.dtype)


def _leaf_sum(x: Any) -> float:
    if isinstance(x, dict):
        return sum(_leaf_sum(v) for v in x.values())
    if isinstance(x, tuple):
        return sum(_leaf_sum(v) for v in x)
    return float(np.sum(x))


class TextObsEnv(EchoEnv):
    """An EchoEnv whose observation space nests a Text space (which the engine cannot batch)."""

    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "name": spaces.Text(8)})
