"""Three contracts of the libraries seedpool replaces, kept to the letter (issue 48, item 1).

- A pool is reproducible from its seed whether or not the user resets it first (EnvPool lets
  a fresh pool be stepped: its envs reset themselves with the pool's seed), native families
  as the Python-env path.
- `make_vec` and `make_sb3` seed as Gymnasium and SB3 do: nothing until `reset(seed=...)` /
  `seed()`; `seedpool.make` keeps EnvPool's seed at construction (default 0).
- No env a user hands in (or that a user's factory builds for the pool) is reset or stepped
  by anyone but the user: `auto`'s probe runs on an extra instance, then closed.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

import seedpool

pytestmark = pytest.mark.timeout(600)

BACKENDS = ("serial", "thread", "process", "auto")


# -- 1. reproducible from the seed, reset first or not --------------------------------------
NATIVE_IDS = ["CartPole-v1", "Acrobot-v1"] + (
    ["MinAtar/Breakout-v1"] if importlib.util.find_spec("minatar") is not None else [])
N = 8  # enough envs that `auto` runs each of these natively (a family's native_from)


def step_trace(task: str, native: bool | None, seed: int, steps: int = 120, reset_first: bool = False) -> np.ndarray:
    """Observations, rewards, terminations and truncations of a pool stepped with fixed actions."""
    pool = seedpool.make(task, num_envs=N, seed=seed, native=native)
    try:
        if native is None:
            assert pool.task.native is not None, f"{task} x {N} did not run natively"
        space = gym.spaces.Discrete(pool.single_action_space.n)
        space.seed(123)
        rows = []
        if reset_first:  # in place of the first step: its actions are drawn and not used
            [space.sample() for _ in range(N)]
            obs, _ = pool.reset()
            rows.append(np.concatenate([np.asarray(obs, np.float64).reshape(N, -1), np.zeros((N, 3))], 1))
        for _ in range(steps):
            obs, rew, term, trunc, _ = pool.step(np.array([space.sample() for _ in range(N)]))
            rows.append(np.concatenate([np.asarray(obs, np.float64).reshape(N, -1), rew[:, None],
                                        term[:, None], trunc[:, None]], 1))
        return np.stack(rows)
    finally:
        pool.close()


@pytest.mark.parametrize("task", NATIVE_IDS)
def test_native_pool_stepped_without_reset_repeats_from_its_seed_as_the_python_env_path(task):
    first, again = step_trace(task, None, seed=0), step_trace(task, None, seed=0)
    np.testing.assert_array_equal(first, again)
    python_path = step_trace(task, False, seed=0)
    np.testing.assert_allclose(first, python_path, rtol=0, atol=1e-5)
    # The seed decides it: another seed, other episodes.
    assert not np.allclose(first, step_trace(task, None, seed=1))


@pytest.mark.parametrize("native", [None, False])
def test_a_fresh_pools_first_step_is_its_seeded_reset(native):
    """As EnvPool: stepping a fresh pool returns each env's first observation (reward 0), the
    one `reset()` of a pool made with the same seed returns."""
    stepped = step_trace("CartPole-v1", native, seed=0, steps=1)[0]
    reset = step_trace("CartPole-v1", native, seed=0, steps=0, reset_first=True)[0]
    np.testing.assert_array_equal(stepped, reset)
    # Resetting first and stepping on gives the same episodes as stepping at once: the
    # reset of the first step replaced by the explicit one.
    np.testing.assert_allclose(step_trace("CartPole-v1", native, 0, 50, reset_first=True)[1:],
                               step_trace("CartPole-v1", native, 0, 51)[1:], rtol=0, atol=1e-6)


# -- 2. make_vec and make_sb3 seed as their libraries ---------------------------------------
class SeedRecorder(gym.Env):
    """Records the seed each reset receives; its observation is a draw of its own generator."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.seen: list[int | None] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seen.append(seed)
        return self.np_random.random(1), {}

    def step(self, action):
        return self.np_random.random(1), 0.0, False, False, {}


def resets(venv, sequence) -> tuple[list, list]:
    """The observations of resets with the seeds of `sequence`, and the seeds each env saw."""
    obs = [venv.reset(seed=s)[0].copy() for s in sequence]
    return obs, [list(seen) for seen in venv.get_attr("seen")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_vec_seeds_nothing_until_reset_seed_as_sync_vector_env(backend):
    sequence = [None, 7, None, None]
    fns = [SeedRecorder] * 3
    reference = gym.vector.SyncVectorEnv(fns)
    ref_obs, ref_seen = resets(reference, sequence)
    reference.close()
    venv = seedpool.make_vec(fns, backend=backend)
    try:
        assert venv.pool.space_seed is None  # the spaces too: unseeded until reset(seed=...)
        obs, seen = resets(venv, sequence)
    finally:
        venv.close()
    assert seen == ref_seen == [[None, 7 + i, None, None] for i in range(3)]
    # The seeded reset and the unseeded ones after it draw on from the same generators.
    np.testing.assert_array_equal(np.stack(obs[1:]), np.stack(ref_obs[1:]))


def test_make_vec_with_a_seed_and_seedpool_make_seed_at_construction():
    venv = seedpool.make_vec([SeedRecorder] * 2, seed=3, backend="serial")
    assert resets(venv, [None, None])[1] == [[3, None], [4, None]]
    venv.close()
    pool = seedpool.make([SeedRecorder] * 2, backend="serial")  # EnvPool's contract: seed 0 by default
    pool.reset()
    assert [env.seen for env in pool.in_process_envs()] == [[0], [1]]
    pool.close()


def test_make_sb3_seeds_nothing_until_seed_as_dummy_vec_env():
    fns = [SeedRecorder] * 2
    got = []
    for venv in (DummyVecEnv(fns), seedpool.make_sb3(fns)):
        venv.reset()
        venv.seed(5)
        venv.reset()
        venv.reset()
        got.append([list(seen) for seen in venv.get_attr("seen")])
        venv.close()
    assert got[0] == got[1] == [[None, 5, None], [None, 6, None]]


# -- 3. the user's envs are stepped by the user alone ---------------------------------------
class CallCounter(gym.Env):
    """Counts its resets and steps; a class-level tally counts instances built and closed."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    built = 0
    closed = 0

    def __init__(self) -> None:
        type(self).built += 1
        self.resets = 0
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.steps += 1
        return np.zeros(3, np.float32), 0.0, False, False, {}

    def close(self):
        type(self).closed += 1


def test_auto_probes_an_extra_instance_and_never_touches_the_users_envs(monkeypatch):
    monkeypatch.setattr(CallCounter, "built", 0)
    monkeypatch.setattr(CallCounter, "closed", 0)
    venv = seedpool.make_vec([CallCounter] * 2, backend="auto")
    try:
        # The user's envs have seen no call; the probe's instance was built and closed.
        assert venv.get_attr("resets") == (0, 0) and venv.get_attr("steps") == (0, 0)
        assert CallCounter.closed >= 1
        if venv.pool.backend == "serial":
            assert CallCounter.built == 3  # env 0 (read for its spaces, kept), the probe, env 1
        venv.reset(seed=0)
        venv.step(np.zeros((2, 1), np.float32))
        assert venv.get_attr("resets") == (1, 1) and venv.get_attr("steps") == (1, 1)
    finally:
        venv.close()


class NeedsSetup(CallCounter):
    """Steps only once the user has set `limit` (gymnasium's tests do it with set_attr)."""

    def step(self, action):
        self.steps += 1
        return np.zeros(3, np.float32), 0.0, self.steps >= self.limit, False, {}


def test_auto_steps_in_process_when_the_probes_env_needs_the_users_setup_first():
    """The probe's extra env has not had the user's setup: its error does not fail make_vec,
    which steps the envs in this process (as SyncVectorEnv), and the user's calls go on."""
    venv = seedpool.make_vec([NeedsSetup] * 2, backend="auto")
    try:
        assert venv.pool.backend == "serial" and "probe" in venv.pool.layout_reason
        venv.set_attr("limit", [1, 2])
        venv.reset(seed=0)
        _, _, term, _, _ = venv.step(np.zeros((2, 1), np.float32))
        assert term.tolist() == [True, False]
    finally:
        venv.close()


GAMMA = 0.99
TASK = "HalfCheetah-v5" if importlib.util.find_spec("mujoco") is not None else "Pendulum-v1"


def cleanrl_env():
    """CleanRL's `ppo_continuous_action.py` env: its stack of stateful wrappers."""
    env = gym.make(TASK, max_episode_steps=120)  # episodes end within the trace
    env = gym.wrappers.FlattenObservation(env)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.NormalizeObservation(env)
    env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
    env = gym.wrappers.NormalizeReward(env, gamma=GAMMA)
    env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
    return env


def wrapped_trace(venv, steps: int = 300) -> dict[str, np.ndarray]:
    """Observations, rewards, terminations, truncations and episode returns over fixed actions."""
    rng = np.random.default_rng(0)
    shape = venv.single_action_space.shape
    obs, _ = venv.reset(seed=1)
    out = {"obs": [obs], "rew": [], "term": [], "trunc": [], "episode": []}
    for _ in range(steps):
        action = rng.uniform(-1.5, 1.5, (venv.num_envs, *shape)).astype(np.float32)
        obs, rew, term, trunc, info = venv.step(action)
        for key, value in zip(("obs", "rew", "term", "trunc"), (obs, rew, term, trunc)):
            out[key].append(value)
        if "episode" in info:
            out["episode"].append(np.where(info["_episode"], info["episode"]["r"], np.nan))
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_stateful_wrappers_give_sync_vector_envs_trace_on_every_backend(backend):
    fns = [cleanrl_env for _ in range(2)]
    reference = gym.vector.SyncVectorEnv(fns)
    want = wrapped_trace(reference)
    reference.close()
    venv = seedpool.make_vec(fns, backend=backend)
    try:
        got = wrapped_trace(venv)
    finally:
        venv.close()
    want["rew"] = want["rew"].astype(np.float32)  # the engine's reward buffer (docs/compat.md)
    for key in ("obs", "rew", "term", "trunc"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} on {backend}")
    assert want["term"].any() or want["trunc"].any(), "no episode ended within the trace"
    np.testing.assert_array_equal(got["episode"], want["episode"])
