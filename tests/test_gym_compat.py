"""A script written for gymnasium's vector envs runs after one changed line.

Each test uses the API the way such a script does (`SyncVectorEnv([make_env(i) ...])` becomes
`seedpool.make_vec([make_env(i) ...])`) and compares with `SyncVectorEnv` step for step: the
envs' own wrappers are kept, every info entry comes back batched as gymnasium batches it, and
spaces are seeded so that `action_space.sample()` repeats run to run.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import seedpool
from seedpool import EnvStepError, WorkerDiedError

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

BACKENDS = {
    "serial": dict(backend="serial"),
    "thread": dict(backend="thread", num_workers=2),
    "process": dict(backend="process", num_workers=2),
}
MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
ENGINE_KEYS = {"env_id", "elapsed_step", "episode_return", "episode_length", "final_obs", "_final_obs"}


class InfoEnv(gym.Env):
    """Discrete(2) actions; an info holding each kind of entry gymnasium batches differently:
    a float every step, numpy scalars and arrays, strings and a nested dict some steps only."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, episode_len: int = 5, payload: Any = None):
        self.episode_len = episode_len
        self.payload = payload  # put in every step's info (too large or unpicklable tests)
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.episode_len], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"start": int(self.np_random.integers(100))}

    def step(self, action):
        self.t += 1
        info: dict[str, Any] = {"x": self.t + 0.5 * int(action)}
        # Gymnasium types a key's array by the first env that has it: a float here, ints after.
        info["kind"] = self.t + 0.5 if self.episode_len == 4 else self.t
        if self.t % 2:
            info["odd"] = np.int32(self.t)
        if self.t % 3 == 0:
            info["vec"] = np.arange(3.0) * self.t
            info["tag"] = f"t{self.t}"
        if action == 1:
            info["nested"] = {"a": self.t, "b": np.float32(0.25)}
        if self.payload is not None:
            info["payload"] = self.payload
        return self._obs(), float(action), self.t >= self.episode_len, False, info


def assert_info_equal(got: dict, ref: dict, msg: str) -> None:
    """Same keys, values and dtypes as gymnasium's batched info (the engine's own keys aside)."""
    got = {k: v for k, v in got.items() if k not in ENGINE_KEYS}
    ref = {k: v for k, v in ref.items() if k not in ("final_obs", "_final_obs")}
    assert sorted(got) == sorted(ref), msg
    for key, value in ref.items():
        if isinstance(value, dict):
            assert_info_equal(got[key], value, f"{msg} [{key!r}]")
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=f"{msg} [{key!r}]")
            assert got[key].dtype == value.dtype, f"{msg} [{key!r}]: {got[key].dtype} != {value.dtype}"


def run_both(env_fns: list[Callable[[], gym.Env]], actions: np.ndarray, seed: int,
             check_info: bool, **kwargs: Any) -> int:
    """Step make_vec(env_fns) and SyncVectorEnv(env_fns) side by side; return episode ends."""
    mode = MODES[kwargs.get("autoreset", "next_step")]
    ref = gym.vector.SyncVectorEnv(env_fns, autoreset_mode=mode)
    ends = 0
    with closing(seedpool.make_vec(env_fns, **kwargs)) as vec, closing(ref):
        obs, info = vec.reset(seed=seed)
        ref_obs, ref_info = ref.reset(seed=seed)
        np.testing.assert_allclose(obs, ref_obs, rtol=1e-6)
        if check_info:
            assert_info_equal(info, ref_info, "reset")
        for t, a in enumerate(actions):
            obs, rew, term, trunc, info = vec.step(a)
            ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step(a)
            msg = f"step {t}"
            np.testing.assert_allclose(obs, ref_obs, rtol=1e-6, err_msg=msg)
            np.testing.assert_allclose(rew, ref_rew, rtol=1e-6, err_msg=msg)
            np.testing.assert_array_equal(term, ref_term, err_msg=msg)
            np.testing.assert_array_equal(trunc, ref_trunc, err_msg=msg)
            if check_info:
                assert_info_equal(info, ref_info, msg)
            ends += int((term | trunc).sum())
    return ends


# -- item 6: a list of env factories, each env keeping its own wrappers ------------------------

def make_pendulum(idx: int) -> Callable[[], gym.Env]:
    """A CleanRL-style continuous-control thunk: wrappers that hold per-env state."""

    def thunk() -> gym.Env:
        env = gym.make("Pendulum-v1", max_episode_steps=60 + 20 * idx)  # env i's own time limit
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda o: np.clip(o, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=0.99)
        return env

    return thunk


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_env_fns_keep_each_envs_wrappers_like_sync_vector_env(backend):
    n, steps = 3, 130
    actions = np.random.default_rng(0).uniform(-3, 3, (steps, n, 1)).astype(np.float32)  # ClipAction clips
    env_fns = [make_pendulum(i) for i in range(n)]
    ends = run_both(env_fns, actions, seed=7, check_info=False, **BACKENDS[backend])
    assert ends == 4, "env 0 (60 steps) ends twice, envs 1 and 2 (80, 100) once: each kept its own TimeLimit"


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_record_episode_statistics_in_env_fns_reports_like_sync_vector_env(backend):
    n = 4

    def make_env(idx: int) -> Callable[[], gym.Env]:
        def thunk() -> gym.Env:
            return gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
        return thunk

    env_fns = [make_env(i) for i in range(n)]
    ref = gym.vector.SyncVectorEnv(env_fns)
    rng = np.random.default_rng(1)
    seen = 0
    with closing(seedpool.make_vec(env_fns, engine_info=True, **BACKENDS[backend])) as envs, closing(ref):
        envs.reset(seed=3)
        ref.reset(seed=3)
        for step in range(150):
            a = rng.integers(0, 2, n)
            _, _, term, trunc, infos = envs.step(a)
            *_, ref_infos = ref.step(a)
            assert ("episode" in infos) == ("episode" in ref_infos), f"step {step}"
            if "episode" in ref_infos:  # what a CleanRL loop reads
                np.testing.assert_array_equal(infos["_episode"], ref_infos["_episode"])
                np.testing.assert_array_equal(infos["_episode"], term | trunc)
                for key in ("r", "l"):
                    np.testing.assert_array_equal(infos["episode"][key], ref_infos["episode"][key])
                    assert infos["episode"][key].dtype == ref_infos["episode"][key].dtype
                for i in np.flatnonzero(infos["_episode"]):
                    assert infos["episode"]["l"][i] == infos["episode_length"][i]
                seen += int(infos["_episode"].sum())
    assert seen >= 8


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_env_fns_whose_spaces_differ_are_refused_naming_the_env(backend):
    env_fns = [lambda: gym.make("CartPole-v1")] * 3 + [lambda: gym.make("MountainCar-v0")]
    # A worker process builds its envs itself: the same message arrives in WorkerDiedError.
    with pytest.raises((ValueError, WorkerDiedError), match=r"env_fns\[3\].*observation space.*differs"):
        seedpool.make_vec(env_fns, **BACKENDS[backend])


def test_make_takes_a_list_of_env_fns_for_the_pool_api():
    env_fns = [lambda i=i: InfoEnv(episode_len=3 + i) for i in range(4)]
    with pytest.raises(ValueError, match="4 env factories"):
        seedpool.make(env_fns, num_envs=3)
    with pytest.raises(ValueError, match="empty"):
        seedpool.make_vec([])
    with seedpool.make(env_fns, batch_size=2, backend="process", num_workers=2) as pool:
        assert pool.num_envs == 4 and pool.is_async
        pool.async_reset()
        lengths: dict[int, set] = {i: set() for i in range(4)}
        # Until every env ended an episode: which envs finish first is up to the scheduler (on a
        # loaded machine one worker's envs may take most of 60 recvs); the cap only ends a hang.
        for _ in range(5000):
            if all(lengths.values()):
                break
            obs, _, term, _, info = pool.recv()
            for i, o, done in zip(info["env_id"], obs, term):
                if done:
                    lengths[int(i)].add(int(o[0]))
                assert o[1] == 3 + i, "env i was built by env_fns[i]"
            pool.send(np.zeros(len(obs), np.int64), info["env_id"])
        pool.recv()
    assert lengths == {i: {3 + i} for i in range(4)}


# -- item 7: every info entry comes back, batched as gymnasium batches it ---------------------

@pytest.mark.parametrize("autoreset", sorted(MODES))
@pytest.mark.parametrize("backend", [*sorted(BACKENDS), "process+main"])
def test_undeclared_info_is_batched_like_sync_vector_env(backend, autoreset, force_layout):
    n, steps = 4, 40
    if backend == "process+main":  # envs 0-1 pickled by a worker, envs 2-3 stepped here
        force_layout("process", 1, 2)
    env_fns = [lambda i=i: InfoEnv(episode_len=4 + i) for i in range(n)]
    actions = np.random.default_rng(3).integers(0, 2, (steps, n))
    kwargs = BACKENDS.get(backend, dict(backend="auto"))
    ends = run_both(env_fns, actions, seed=11, check_info=True, autoreset=autoreset, **kwargs)
    assert ends >= 20


def test_pool_api_forwards_undeclared_info_beside_declared_keys():
    with seedpool.make(lambda: InfoEnv(), num_envs=2, backend="process", num_workers=2,
                       info_keys={"x": np.float64}) as pool:
        _, info = pool.reset(seed=0)
        assert "x" in info and "_x" not in info  # declared: a shared array, every step
        assert info["_start"].all() and "odd" not in info
        _, _, _, _, info = pool.step(np.array([1, 0]))
        np.testing.assert_array_equal(info["x"], [1.5, 1.0])
        np.testing.assert_array_equal(info["_odd"], [True, True])
        np.testing.assert_array_equal(info["_nested"], [True, False])
        assert info["nested"]["a"][0] == 1
        _, _, _, _, info = pool.step(np.array([0, 0]))
        assert "odd" not in info and "nested" not in info, "a step's entries do not outlive it"


def test_envs_without_info_never_touch_the_forwarding_slots():
    """The hot path stays as it was: CartPole returns an empty info, nothing is written."""
    with closing(seedpool.make_vec("CartPole-v1", num_envs=4, backend="process", num_workers=2)) as vec:
        vec.reset(seed=0)
        for _ in range(50):
            _, _, _, _, info = vec.step(np.ones(4, np.int64))
        assert not vec.pool._b.extra.pending()
        assert info == {}  # as SyncVectorEnv: the pool's own keys only with engine_info=True


class PayloadEnv(InfoEnv):
    """Every step's info: a counter and `payload`."""

    def step(self, action):
        obs, rew, term, trunc, _ = super().step(action)
        return obs, rew, term, trunc, {"x": self.t, "payload": self.payload}


@pytest.mark.parametrize("payload, reason", [
    (np.zeros(100_000, np.uint8), "bytes pickled"),
    (lambda: None, "not picklable"),
])
def test_info_a_worker_cannot_forward_is_dropped_with_one_warning_naming_it(payload, reason):
    with seedpool.make(lambda: PayloadEnv(payload=payload), num_envs=2, backend="process",
                       num_workers=2) as pool:
        pool.reset(seed=0)
        with pytest.warns(RuntimeWarning, match=rf"\['x', 'payload'\].*{reason}.*info_keys") as record:
            for _ in range(5):
                _, _, _, _, info = pool.step(np.zeros(2, np.int64))
        assert len([w for w in record if "not forwarded" in str(w.message)]) == 1
        assert "x" not in info  # the whole entry is dropped, not half of it
    with seedpool.make(lambda: PayloadEnv(payload=payload), num_envs=2, backend="serial") as pool:
        pool.reset(seed=0)
        _, _, _, _, info = pool.step(np.zeros(2, np.int64))
        assert info["_payload"].all(), "in the pool's own process nothing is pickled, nothing dropped"


class FailsAtStepTwo(InfoEnv):
    """Env 1 raises at its second step; env 0 returns a `tick` entry at its second step only."""

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.seed_value = seed if seed is not None else getattr(self, "seed_value", 0)
        return super().reset(seed=seed)

    def step(self, action):
        obs, rew, term, trunc, _ = super().step(action)
        if self.t == 2 and self.seed_value == 1:
            raise RuntimeError("env 1 fails")
        return obs, rew, term, trunc, {"tick": self.t} if self.t == 2 else {}


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_info_of_a_dropped_sync_step_does_not_come_back_later(backend):
    with seedpool.make(lambda: FailsAtStepTwo(episode_len=50), num_envs=2, **BACKENDS[backend]) as pool:
        pool.reset(seed=0)
        pool.step(np.zeros(2, np.int64))
        with pytest.raises(EnvStepError):
            pool.step(np.zeros(2, np.int64))
        _, _, _, _, info = pool.step(np.zeros(2, np.int64))
        assert "tick" not in info


# -- item 8: spaces are seeded, so action_space.sample() repeats run to run ---------------------

def samples(envs: Any, k: int = 5) -> list:
    """What an exploration loop draws: batched and single actions and observations."""
    return [(envs.action_space.sample(), envs.single_action_space.sample(),
             envs.observation_space.sample(), envs.single_observation_space.sample()) for _ in range(k)]


def same(a: list, b: list) -> bool:
    return all(np.array_equal(x, y) for s, t in zip(a, b) for x, y in zip(s, t))


@pytest.mark.parametrize("task", ["CartPole-v1", "Pendulum-v1"])
def test_pools_with_the_same_seed_sample_the_same_actions(task):
    def build(seed):
        return seedpool.make_vec(task, num_envs=3, backend="serial", seed=seed)

    with closing(build(1)) as a, closing(build(1)) as b, closing(build(2)) as c:
        first, second, other = samples(a), samples(b), samples(c)
        assert same(first, second)
        assert not same(first, other)
        c.reset(seed=1)  # reset(seed=...) reseeds the spaces, as it reseeds the envs
        assert same(samples(c), first)
    # The pool API (whose action_space is the single env's, as EnvPool's) is seeded the same way.
    with seedpool.make(task, num_envs=3, backend="serial", seed=1) as pool, \
            seedpool.make(task, num_envs=3, backend="serial", seed=[None, 1, 5]) as first_seeded, \
            seedpool.make(task, num_envs=3, backend="serial", seed=2) as pool2:
        assert same(samples(pool), samples(first_seeded)), "the first env's seed seeds the spaces"
        assert not same(samples(pool), samples(pool2))
