"""Native env families (seedpool/envs/families/classic/, on seedpool/envs/native/): identity with gymnasium's envs, and the pool API."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from seedpool.envs.errors import ActionBatchError, EnvPoolError, EnvStepError
from seedpool.envs.native import NativeEnv, NativeMismatch, check_native_env
from seedpool.envs.families.classic.control import CartPole

CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"]


# -- identity: 10k random env steps per id and seed, against gymnasium's own envs ------------
@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("task_id", CLASSIC)
def test_classic_control_plays_gymnasiums_episodes(task_id, seed):
    report = check_native_env(task_id, num_envs=8, steps=1250, seed=seed)
    assert report.episodes > 0  # episode ends (and the resets after them) were compared too
    assert report.max_obs_diff <= 1e-5


@pytest.mark.parametrize("task_id,options", [("CartPole-v1", {"kernel": "numpy"}), ("Pendulum-v1", {"g": 9.81}),
                                             ("MountainCar-v0", {"goal_velocity": 0.01})])
def test_family_options_match_gymnasiums(task_id, options):
    assert check_native_env(task_id, num_envs=4, steps=500, seed=3, **options).episodes > 0


@pytest.mark.parametrize("task_id,autoreset", [("CartPole-v1", "same_step"), ("Pendulum-v1", "same_step"),
                                               ("CartPole-v1", "disabled"), ("MountainCar-v0", "disabled")])
def test_other_autoreset_modes_match(task_id, autoreset):
    """same_step (final_obs aside: the checker compares the reset observations) and disabled
    (ended envs stepped on, CartPole's reward 0 after the fall, truncation once at the limit)."""
    report = check_native_env(task_id, num_envs=4, steps=600, seed=1, autoreset=autoreset)
    assert report.episodes > 0


def test_native_is_the_default_and_the_python_path_stays_available():
    with seedpool.make("CartPole-v1", num_envs=4) as pool:
        assert pool.backend == "native"
        assert pool.in_process_envs() is None
    with seedpool.make("CartPole-v1", num_envs=4, native=False, backend="serial") as pool:
        assert pool.backend == "serial"
        assert len(pool.in_process_envs()) == 4
    for backend in ("serial", "thread"):  # a backend named explicitly: gymnasium's env objects
        with seedpool.make("CartPole-v1", num_envs=2, backend=backend) as pool:
            assert pool.backend == backend
    with pytest.raises(ValueError, match="backend 'auto' or 'serial'"):
        seedpool.make("CartPole-v1", num_envs=4, backend="process", native=True)
    with pytest.raises(ValueError, match="no native family"):
        seedpool.make("FrozenLake-v1", num_envs=2, native=True)
    with seedpool.make("CartPole-v1", num_envs=2, render_mode="rgb_array") as pool:  # not a family option
        assert pool.backend != "native"
    # Below a family's native_from the Python-env path measured faster: auto keeps it there.
    with seedpool.make("MountainCarContinuous-v0", num_envs=4) as small, \
            seedpool.make("MountainCarContinuous-v0", num_envs=32) as large:
        assert small.backend != "native" and large.backend == "native"


def test_per_env_calls_read_constants_and_refuse_state():
    vec = seedpool.make_vec("CartPole-v1", num_envs=3, seed=4)
    vec.reset()
    assert vec.get_attr("render_mode") == (None, None, None)
    assert vec.get_attr("gravity") == (9.8,) * 3
    assert vec.np_random_seed == (4, 5, 6)
    for bad in (lambda: vec.get_attr("state"), lambda: vec.call("reset"), lambda: vec.render()):
        with pytest.raises((AttributeError, EnvPoolError), match="native=False"):
            bad()
    with pytest.raises(EnvPoolError, match="native=False"):
        vec.set_attr("gravity", 1.0)
    vec.close()


def test_async_send_recv_matches_the_python_path():
    """Async mode with env ids, against the serial Python-env pool (which also returns
    envs in the order they were sent)."""
    pools = [seedpool.make("CartPole-v1", num_envs=8, batch_size=3, seed=5, native=n, backend="serial")
             for n in (True, False)]
    rng = np.random.default_rng(0)
    for pool in pools:
        pool.async_reset()
    for _ in range(300):
        out = [pool.recv() for pool in pools]
        ids = out[0][4]["env_id"]
        np.testing.assert_array_equal(ids, out[1][4]["env_id"])
        for k in range(4):
            np.testing.assert_array_equal(out[0][k], out[1][k])
        for key in ("elapsed_step", "episode_return", "episode_length"):
            np.testing.assert_array_equal(out[0][4][key], out[1][4][key])
        action = rng.integers(0, 2, len(ids))
        for pool in pools:
            pool.send(action, ids)
    for pool in pools:
        pool.close()


def test_episode_infos_time_limit_and_seeds():
    with seedpool.make("Pendulum-v1", num_envs=3, seed=[4, None, 6], max_episode_steps=5, native=True) as pool:
        obs, info = pool.reset()
        for t in range(1, 6):
            obs, rew, term, trunc, info = pool.step(np.zeros((3, 1), np.float32))
            np.testing.assert_array_equal(info["elapsed_step"], t)
        assert trunc.all() and not term.any()
        np.testing.assert_array_equal(info["episode_length"], 5)
        assert np.all(info["episode_return"] < 0)
        obs, rew, *_ , info = pool.step(np.zeros((3, 1), np.float32))  # next_step: the reset step
        np.testing.assert_array_equal(info["elapsed_step"], 0)
        np.testing.assert_array_equal(rew, 0.0)
    single = gym.make("Pendulum-v1")
    with seedpool.make("Pendulum-v1", num_envs=3, seed=[4, None, 6], native=True) as pool:
        obs, _ = pool.reset()
        np.testing.assert_array_equal(obs[0], single.reset(seed=4)[0])
        np.testing.assert_array_equal(obs[2], single.reset(seed=6)[0])
        obs, _ = pool.reset(seed=10)  # a new seed per env: 10, 11, 12
        np.testing.assert_array_equal(obs[1], single.reset(seed=11)[0])


def test_reset_options_and_partial_reset():
    with seedpool.make("CartPole-v1", num_envs=4, seed=0, autoreset="disabled") as pool:
        obs, _ = pool.reset(options={"low": 0.2, "high": 0.3})
        assert np.all((obs >= 0.2) & (obs <= 0.3))
        for _ in range(3):
            pool.step(np.ones(4, np.int64))
        mask = np.array([True, False, True, False])
        obs, info = pool.reset(options={"reset_mask": mask})
        np.testing.assert_array_equal(info["elapsed_step"][mask], 0)
        np.testing.assert_array_equal(info["elapsed_step"][~mask], 3)


def test_bad_actions_are_refused_and_the_pool_stays_consistent():
    with seedpool.make("CartPole-v1", num_envs=4, seed=0) as pool, \
            seedpool.make("CartPole-v1", num_envs=4, seed=0, native=False, backend="serial") as ref:
        pool.reset()
        ref.reset()
        for bad, err in [(np.array([0, 1, 2, 0]), ValueError), (np.zeros(3, np.int64), ValueError),
                         (np.array([0.5, 0, 0, 0]), (TypeError, ValueError)), (1, ActionBatchError)]:
            with pytest.raises(err):
                pool.step(bad)
        with pytest.raises(EnvPoolError, match="recv"):
            pool.recv()
        for _ in range(50):
            a = np.array([0, 1, 1, 0])
            np.testing.assert_array_equal(pool.step(a)[0], ref.step(a)[0])
    with seedpool.make("Pendulum-v1", num_envs=2, native=True) as pool:
        pool.reset()
        with pytest.raises(ValueError, match="NaN|finite"):
            pool.step(np.array([[np.nan], [0.0]], np.float32))
        pool.step(np.zeros((2, 1), np.float32))


def test_make_vec_is_a_gymnasium_vector_env():
    vec = seedpool.make_vec("Acrobot-v1", num_envs=4, seed=0)
    assert isinstance(vec, gym.vector.VectorEnv)
    obs, _ = vec.reset()
    assert obs.shape == (4, 6)
    obs, rew, term, trunc, info = vec.step(vec.action_space.sample())
    assert rew.shape == (4,) and obs.dtype == np.float32
    vec.close()


# -- a user's own family ---------------------------------------------------------------------
class Walk(gym.Env):
    """A random walk on 0..9: action 1 steps right, 0 left, with a random slip; ends at 9."""

    observation_space = gym.spaces.Box(0, 9, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(0, 5))
        return np.array([self.pos], np.float32), {}

    def step(self, action):
        slip = self.np_random.random() < 0.1
        self.pos = min(max(self.pos + (1 if (action == 1) != slip else -1), 0), 9)
        return np.array([self.pos], np.float32), float(self.pos == 9), self.pos == 9, False, {}


class NativeWalk(NativeEnv):
    """`Walk`, every env at once; draws each env's slip from its own generator, in order."""

    max_episode_steps = 40

    def __init__(self, num_envs, slip=0.1):
        super().__init__(num_envs)
        self.single_observation_space = Walk.observation_space
        self.single_action_space = Walk.action_space
        self.slip = slip
        self.pos = np.zeros(num_envs, np.int64)
        self.rows = np.arange(num_envs)

    def reset(self, ids, options):
        for i in ids.tolist():
            self.pos[i] = self.rng(i).integers(0, 5)
        return self.pos[ids, None].astype(np.float32)

    def step(self, ids, actions):
        slip = np.array([self.rng(i).random() < self.slip for i in self.rows[ids].tolist()])
        pos = np.clip(self.pos[ids] + np.where((actions == 1) != slip, 1, -1), 0, 9)
        self.pos[ids] = pos
        return pos[:, None].astype(np.float32), (pos == 9).astype(np.float64), pos == 9


def test_a_users_family_passes_the_checker_and_a_wrong_one_fails():
    report = check_native_env(NativeWalk, Walk, num_envs=5, steps=400, seed=2)
    assert report.episodes > 5
    with pytest.raises(NativeMismatch, match="differs at step"):
        check_native_env(NativeWalk, Walk, num_envs=5, steps=400, seed=2, slip=0.3)
    with seedpool.make(NativeWalk, num_envs=3, batch_size=2) as pool:  # async, by class
        pool.async_reset()
        obs, *_, info = pool.recv()
        pool.send(np.ones(2, np.int64), info["env_id"])
        assert pool.recv()[0].shape == (2, 1)


class Broken(NativeWalk):
    def step(self, ids, actions):
        if (actions == 0).any():
            raise ZeroDivisionError("no left turns")
        return super().step(ids, actions)


def test_a_family_that_raises_surfaces_as_an_env_error_and_the_pool_goes_on():
    with seedpool.make(Broken, num_envs=3, seed=0) as pool:
        pool.reset()
        with pytest.raises(EnvStepError, match="no left turns") as caught:
            pool.step(np.array([1, 0, 1]))
        assert isinstance(caught.value, ZeroDivisionError)
        assert isinstance(caught.value.__cause__, ZeroDivisionError)
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))  # the batch restarts
        assert trunc.all()
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))
        np.testing.assert_array_equal(info["elapsed_step"], 0)


def test_actions_of_any_accepted_form_step_as_int64_arrays_do():
    """A sync step takes int64 arrays of one action per env in one compiled call; int32 arrays,
    lists and (n, 1) arrays go the general way: the same episodes either way."""
    forms = [lambda a: a.astype(np.int32), lambda a: a.tolist(), lambda a: a[:, None]]
    with seedpool.make("CartPole-v1", num_envs=4, seed=3) as pool, \
            seedpool.make("CartPole-v1", num_envs=4, seed=3) as twin:
        pool.reset()
        twin.reset()
        rng = np.random.default_rng(0)
        for t in range(300):
            a = rng.integers(0, 2, 4)
            got = pool.step(forms[t % 3](a))
            want = twin.step(a)
            for k in range(4):
                np.testing.assert_array_equal(got[k], want[k])
            np.testing.assert_array_equal(got[4]["elapsed_step"], want[4]["elapsed_step"])


def test_async_sends_refuse_bad_actions_and_write_nothing():
    """A refused send (range, dtype, count) leaves the pool as it was: the next good send steps
    the same episodes as a twin pool that never saw the bad actions."""
    pools = [seedpool.make("CartPole-v1", num_envs=6, batch_size=3, seed=2) for _ in range(2)]
    for pool in pools:
        pool.async_reset()
    rng = np.random.default_rng(1)
    for t in range(200):
        out = [pool.recv() for pool in pools]
        ids = out[0][4]["env_id"]
        np.testing.assert_array_equal(out[0][0], out[1][0])
        if t % 20 == 0:
            for bad, err in [(np.array([0, 2, 1]), ValueError), (np.zeros(2, np.int64), ValueError),
                             (np.array([0.5, 0, 1]), (TypeError, ValueError))]:
                with pytest.raises(err):
                    pools[0].send(bad, ids)
        action = rng.integers(0, 2, len(ids))
        for pool in pools:
            pool.send(action, ids)
    for pool in pools:
        pool.close()


class BrokenFused(CartPole):
    def step_autoreset(self, rows, actions, obs, final_obs, book):
        if (actions[rows] == 0).any():
            raise ZeroDivisionError("no left pushes")
        super().step_autoreset(rows, actions, obs, final_obs, book)


def test_a_fused_step_that_raises_in_a_whole_sync_step_restarts_every_env():
    """The sync step of every env (NativeExecutor.step_whole) fails as the general path does."""
    with seedpool.make(BrokenFused, num_envs=3, seed=0) as pool:
        pool.reset()
        pool.step(np.ones(3, np.int64))
        assert pool._exec.family.can_fuse()
        with pytest.raises(EnvStepError, match="no left pushes") as caught:
            pool.step(np.array([1, 0, 1]))
        assert isinstance(caught.value, ZeroDivisionError)
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))  # every env restarts
        assert trunc.all() and not term.any()
        np.testing.assert_array_equal(info["elapsed_step"], 0)
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))
        np.testing.assert_array_equal(info["elapsed_step"], 0)  # the reset the fault asked for
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))
        np.testing.assert_array_equal(info["elapsed_step"], 1)


def test_pcg64_rows_draw_numpys_numbers():
    from numba import njit

    from seedpool.envs.native import pcg64

    @njit
    def draws(states, i, n):
        out = np.empty(n)
        for k in range(n):
            out[k] = pcg64.next_double(states, i)
        return out

    for seed in (0, 3, 2**40 + 7):
        gen = np.random.default_rng(seed)
        states = np.stack([pcg64.state_row(np.random.default_rng(99)), pcg64.state_row(gen)])
        np.testing.assert_array_equal(draws(states, 1, 500), gen.random(500))
        np.testing.assert_array_equal(states[1], pcg64.state_row(gen))  # the same state after


def test_kernel_states_hand_the_kernels_draws_back_to_each_generator():
    from numba import njit

    from seedpool.envs.native import pcg64

    @njit
    def draw(rows, i):
        return pcg64.next_double(rows, i)

    states = pcg64.KernelStates(np.zeros((3, 4), np.uint64))
    gens = [np.random.default_rng(s) for s in (5, 6, 7)]
    twins = [np.random.default_rng(s) for s in (5, 6, 7)]
    assert not states.sync(0, gens[0]) and states.uncopied(np.arange(3)) == [0, 1, 2]
    for i in (2, 0):
        states.copy(i, gens[i])
    assert not states.all_copied and states.uncopied(np.array([1, 2])) == [1]
    states.copy(1, gens[1])
    assert states.all_copied and states.uncopied(np.arange(3)) == []
    kernel_draws = [draw(states.rows, 1) for _ in range(4)]
    np.testing.assert_array_equal(kernel_draws, twins[1].random(4))
    assert states.sync(1, gens[1])
    assert gens[1].random() == twins[1].random()  # the generator goes on after the kernel's draws
    assert states.sync(0, gens[0]) and gens[0].random() == twins[0].random()  # no draws: where it was


def test_cartpole_generators_follow_the_kernels_draws():
    """np_random of a native CartPole env continues where gymnasium's env's would."""
    single = gym.make("CartPole-v1")
    single.reset(seed=8)
    with seedpool.make("CartPole-v1", num_envs=1, seed=8, autoreset="same_step", native=True) as pool:
        pool.reset()
        resets = 0
        for _ in range(40):  # a few episodes: resets draw from env 0's generator
            obs, rew, term, trunc, _ = pool.step(np.ones(1, np.int64))
            _, _, t, tr, _ = single.step(1)
            if t or tr:
                single.reset()
                resets += 1
        assert resets >= 3
        view_rng = pool.env_call(lambda env: env.np_random)[0]
        assert view_rng.random() == single.unwrapped.np_random.random()


# -- speed paths: the fused step and its split over threads ----------------------------------
def test_thread_choice_follows_the_measured_crossover():
    from seedpool.envs.native.threads import choose_threads

    assert choose_threads(None, 10_000, 2, None)[0] == 1  # a family that cannot be split
    assert choose_threads(1024, 512, 2, None)[0] == 1  # below the crossover
    threads, why = choose_threads(1024, 1024, 2, None)
    assert threads == 2 and "1024" in why
    assert choose_threads(1024, 4096, 1, None)[0] == 1  # one core
    assert choose_threads(1024, 4096, 2, 1)[0] == 1  # num_workers caps the threads
    assert choose_threads(1024, 4096, 8, 2)[0] == 2
    assert choose_threads(1024, 4096, 8, None)[0] == 8


class _SplitCartPole(CartPole):
    split_from = 2  # split every batch: the threads' path, at test sizes


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_split_and_fused_steps_play_the_unsplit_numpy_episodes(monkeypatch, autoreset):
    """CartPole's fused step, split over two threads, against its NumPy step (no fusion)."""
    from seedpool.envs.native import threads

    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    split = seedpool.make(_SplitCartPole, num_envs=16, seed=3, autoreset=autoreset)
    plain = seedpool.make("CartPole-v1", num_envs=16, seed=3, autoreset=autoreset, kernel="numpy")
    assert split.num_workers == 2 and plain.num_workers == 1
    rng = np.random.default_rng(0)
    with split, plain:
        for pool in (split, plain):
            pool.reset()
        assert split._exec.family.can_fuse() and not plain._exec.family.can_fuse()
        ends = 0
        for _ in range(200):
            action = rng.integers(0, 2, 16)
            a, b = split.step(action), plain.step(action)
            np.testing.assert_allclose(a[0], b[0], atol=1e-6)  # numba's cos/sin vs NumPy's: last bits
            for k in (1, 2, 3):
                np.testing.assert_array_equal(a[k], b[k])
            for key in ("env_id", "elapsed_step", "episode_return"):
                np.testing.assert_array_equal(a[4][key], b[4][key])
            if autoreset == "same_step" and (a[2] | a[3]).any():
                np.testing.assert_allclose(a[4]["final_obs"], b[4]["final_obs"], atol=1e-6)
            ends += int((a[2] | a[3]).sum())
        assert ends > 50


def test_an_error_in_a_shard_thread_reaches_the_caller_and_the_threads_go_on():
    from seedpool.envs.native.threads import ShardThreads

    threads = ShardThreads(2)
    seen: list[list[int]] = []

    def fn(rows):
        if rows[0] >= 2:
            raise ValueError("shard two fails")
        seen.append(rows.tolist())

    with pytest.raises(ValueError, match="shard two fails"):
        threads.run(fn, np.arange(4))
    threads.run(lambda rows: seen.append(rows.tolist()), np.arange(4))
    threads.close()
    assert sorted(seen) == [[0, 1], [0, 1], [2, 3]]


def test_large_env_id_batches_are_checked_for_duplicates_and_range():
    """Over 64 ids the check marks them in a mask (no sort): the same errors, nothing sent."""
    with seedpool.make("CartPole-v1", num_envs=200, batch_size=100, seed=0) as pool:
        pool.async_reset()
        ids = pool.recv()[4]["env_id"]
        with pytest.raises(ValueError, match=r"duplicate env_id \[" + str(ids[0]) + r"\]"):
            pool.send(np.zeros(100, np.int64), np.r_[ids[:99], ids[0]])
        with pytest.raises(ValueError, match="unknown env_id"):
            pool.send(np.zeros(100, np.int64), np.r_[ids[:99], 200])
        pool.send(np.zeros(100, np.int64), ids)  # the pool took neither
        assert len(pool.recv()[4]["env_id"]) == 100
