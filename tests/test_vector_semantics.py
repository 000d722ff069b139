"""make_vec / make / make_sb3 give the results Gymnasium's and SB3's own vector envs give,
and leave the objects a user hands in as they were (issue 24)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import seedpool

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]

BACKENDS = ["serial", "thread", "process"]

# One space object shared by every env of a class, as envs commonly declare it.
SHARED_ACTIONS = spaces.Discrete(3)


class SharedSpaceEnv(gym.Env):
    """Every instance shares the class's (and the module's) action space object."""

    action_space = SHARED_ACTIONS
    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        return np.full(1, float(action), np.float32), float(action), False, False, {}


gym.register("SeedpoolTestSharedSpace-v0", entry_point=SharedSpaceEnv, max_episode_steps=5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["make_vec_env_fns", "make_factory", "make_id"])
def test_a_users_shared_space_keeps_its_class(backend, how):
    if how == "make_vec_env_fns":
        pool = seedpool.make_vec([SharedSpaceEnv] * 3, backend=backend)
    elif how == "make_factory":
        pool = seedpool.make(SharedSpaceEnv, num_envs=3, backend=backend)
    else:
        pool = seedpool.make("SeedpoolTestSharedSpace-v0", num_envs=3, backend=backend)
    try:
        pool.reset(seed=0)
        _, rew, *_ = pool.step(np.array([0, 1, 2]))
    finally:
        pool.close()
    assert rew.tolist() == [0.0, 1.0, 2.0]
    assert type(SHARED_ACTIONS) is spaces.Discrete
    assert SharedSpaceEnv.action_space is SHARED_ACTIONS
    assert "contains" not in vars(SHARED_ACTIONS)


def test_envs_sharing_a_space_still_work_in_gymnasium_after_seedpool():
    vec = seedpool.make_vec([SharedSpaceEnv] * 2, backend="serial")
    vec.reset(seed=0)
    vec.step(np.array([1, 2]))
    vec.close()
    # gymnasium tells spaces apart by exact class: a swapped class is refused here.
    batched = gym.vector.utils.batch_differing_spaces([SharedSpaceEnv.action_space] * 2)
    assert isinstance(batched, spaces.MultiDiscrete)
    envs = gym.vector.SyncVectorEnv([SharedSpaceEnv] * 2, observation_mode="different")
    envs.reset(seed=0)
    _, rew, *_ = envs.step(np.array([1, 2]))
    envs.close()
    assert rew.tolist() == [1.0, 2.0]


def test_engine_built_envs_still_reject_out_of_range_actions_themselves():
    """The engine's own envs (built from an id) check with a copy of the space that trusts
    the pool's validation; the answer for a value the pool never sends stays gymnasium's."""
    with seedpool.make("SeedpoolTestSharedSpace-v0", num_envs=1, backend="serial") as pool:
        env = pool._exec.local.envs[0]
        mine = env.unwrapped.action_space
        assert mine is not SHARED_ACTIONS and mine == SHARED_ACTIONS
        assert mine.contains(np.int64(2)) and not mine.contains(np.int64(3))
        assert not mine.contains(1.5) and mine.contains(1)


# -- make_sb3 keeps an env's own Monitor record ----------------------------------------


class HalfReward(gym.RewardWrapper):
    """Rewards x 0.5, outside the Monitor (as AtariWrapper's clipping sits outside it)."""

    def reward(self, reward):
        return 0.5 * reward


def _cartpole_half_reward_with_monitor():
    from stable_baselines3.common.monitor import Monitor

    return HalfReward(Monitor(gym.make("CartPole-v1")))


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_make_sb3_reports_the_monitors_raw_return_inside_a_reward_wrapper(backend):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
    venv = seedpool.make_sb3([_cartpole_half_reward_with_monitor] * 2, backend=backend, seed=0)
    episodes = []
    try:
        venv.reset()
        rng = np.random.default_rng(0)
        wrapped = np.zeros(2)
        while len(episodes) < 6:
            _, rew, dones, infos = venv.step(rng.integers(0, 2, size=2))
            wrapped += rew
            for i in np.flatnonzero(dones):
                episodes.append((infos[i]["episode"], wrapped[i]))
                wrapped[i] = 0.0
    finally:
        venv.close()
    for record, wrapped_return in episodes:
        # CartPole pays 1 per step: the raw return is the length; the wrapped one is half.
        assert record["r"] == pytest.approx(record["l"])
        assert wrapped_return == pytest.approx(0.5 * record["l"])


def test_make_sb3_writes_its_own_record_when_the_env_has_no_monitor():
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
    venv = seedpool.make_sb3([lambda: HalfReward(gym.make("CartPole-v1"))] * 2, backend="serial", seed=0)
    try:
        venv.reset()
        while True:
            _, _, dones, infos = venv.step(np.zeros(2, np.int64))
            if dones.any():
                record = infos[int(np.flatnonzero(dones)[0])]["episode"]
                break
    finally:
        venv.close()
    assert record["r"] == pytest.approx(0.5 * record["l"])


# -- per-env calls reach each env where it lives ---------------------------------------


class Gravity(gym.Env):
    """A settable attribute, a method with arguments, an unpicklable attribute and a frame."""

    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = spaces.Discrete(2)
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.gravity = 9.8
        self.lock = __import__("threading").Lock()  # cannot be pickled

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.full(1, self.gravity, np.float32), 0.0, False, False, {}

    def scaled(self, k, offset=0.0):
        return self.gravity * k + offset

    def render(self):
        return np.full((2, 3, 3), int(self.gravity), np.uint8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_vec_call_get_attr_set_attr_and_render_reach_every_env(backend):
    vec = seedpool.make_vec([lambda: Gravity("rgb_array")] * 3, backend=backend, num_workers=2)
    try:
        vec.reset(seed=0)
        assert vec.render_mode == "rgb_array"
        assert vec.get_attr("gravity") == (9.8, 9.8, 9.8)
        vec.set_attr("gravity", [1.0, 2.0, 3.0])
        assert vec.call("scaled", 2, offset=1.0) == (3.0, 5.0, 7.0)
        assert vec.call("gravity") == (1.0, 2.0, 3.0)  # not callable: the value, as gymnasium
        obs, *_ = vec.step(np.zeros(3, np.int64))
        assert obs[:, 0].tolist() == [1.0, 2.0, 3.0]  # the envs that step are the ones set
        frames = vec.render()
        assert [int(f[0, 0, 0]) for f in frames] == [1, 2, 3]
        with pytest.raises(AttributeError, match="no attribute 'missing'"):
            vec.get_attr("missing")
        with pytest.raises(ValueError, match="one value per env"):
            vec.set_attr("gravity", [1.0])
        if backend == "process":
            with pytest.raises(TypeError, match="'lock'.*cannot be pickled"):
                vec.get_attr("lock")
        assert vec.get_attr("gravity") == (1.0, 2.0, 3.0)  # the pool stays usable after errors
    finally:
        vec.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_sb3_per_env_calls_and_env_is_wrapped_are_truthful(backend):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
    from stable_baselines3.common.monitor import Monitor

    fns = [lambda: Monitor(Gravity("rgb_array")), lambda: Gravity("rgb_array")]
    venv = seedpool.make_sb3(fns, backend=backend)
    try:
        venv.reset()
        assert venv.env_is_wrapped(Monitor) == [True, False]
        assert venv.get_attr("render_mode") == ["rgb_array", "rgb_array"]
        venv.set_attr("gravity", 4.0, indices=[1])
        assert venv.get_attr("gravity") == [9.8, 4.0]
        assert venv.env_method("scaled", 2, indices=1) == [8.0]
        assert venv.has_attr("scaled") and not venv.has_attr("missing")
        image = venv.render(mode="rgb_array")  # SB3 tiles the envs' frames
        assert image is not None and image.shape[2] == 3
    finally:
        venv.close()


# -- gymnasium's autoreset-disabled mode, partial resets and the overlap API -------------


class Counter(gym.Env):
    """obs = steps since the last reset; the episode ends after 2 steps; reset info says so."""

    observation_space = spaces.Box(0, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"reset": True, "options": options}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 2, False, {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_autoreset_disabled_steps_on_and_a_reset_mask_resets_only_those_envs(backend):
    vec = seedpool.make_vec([Counter] * 3, backend=backend, num_workers=2, autoreset="disabled", seed=None)
    try:
        assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
        vec.reset(seed=5)
        for _ in range(3):
            obs, _, term, _, info = vec.step(np.zeros(3, np.int64))
        assert obs[:, 0].tolist() == [3, 3, 3] and term.all()  # no env was reset on its own
        options = {"reset_mask": np.array([True, False, True]), "level": 2}
        obs, info = vec.reset(options=options)
        assert "reset_mask" in options  # the caller's dict is left as it was
        assert obs[:, 0].tolist() == [0, 3, 0]
        assert info["_reset"].tolist() == [True, False, True]
        # Each reset env got the options less the mask (a dict entry is batched as gymnasium does).
        assert info["options"]["_level"].tolist() == [True, False, True]
        assert info["options"]["level"][[0, 2]].tolist() == [2, 2]
        obs, *_ = vec.step(np.zeros(3, np.int64))
        assert obs[:, 0].tolist() == [1, 4, 1]
        assert vec.np_random_seed == (5, 6, 7)  # reset(seed=None) keeps each env's seed
        with pytest.raises(ValueError, match=r"must have shape `\(3,\)`, got \(2,\)"):
            vec.reset(options={"reset_mask": np.array([True, False])})
        with pytest.raises(TypeError, match="must be a numpy array"):
            vec.reset(options={"reset_mask": [True, False, True]})
    finally:
        vec.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_async_and_wait_match_step_and_misuse_is_named(backend):
    vec = seedpool.make_vec([Counter] * 2, backend=backend, num_workers=2)
    ref = seedpool.make_vec([Counter] * 2, backend=backend, num_workers=2)
    try:
        vec.reset_async(seed=0)
        with pytest.raises(gym.error.AlreadyPendingCallError, match="pending call to `reset`"):
            vec.step_async(np.zeros(2, np.int64))
        obs, info = vec.reset_wait()
        ref_obs, _ = ref.reset(seed=0)
        np.testing.assert_array_equal(obs, ref_obs)
        with pytest.raises(gym.error.NoAsyncCallError, match="without any prior call to `step_async`"):
            vec.step_wait()
        for _ in range(3):
            vec.step_async(np.ones(2, np.int64))
            with pytest.raises(gym.error.AlreadyPendingCallError, match="pending call to `step`"):
                vec.step(np.ones(2, np.int64))  # step() is its own path: it must refuse too
            got = vec.step_wait()
            want = ref.step(np.ones(2, np.int64))
            for a, b in zip(got[:4], want[:4]):
                np.testing.assert_array_equal(a, b)
    finally:
        vec.close()
        ref.close()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        vec.reset()


# -- observation_mode, as gymnasium's vector envs take it -------------------------------


class BoundedObs(gym.Env):
    action_space = spaces.Discrete(2)

    def __init__(self, high, shape=(2,)):
        self.observation_space = spaces.Box(0.0, high, shape, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}

    def step(self, action):
        return np.zeros(self.observation_space.shape, np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_observation_mode_different_batches_each_envs_bounds(backend):
    fns = [lambda h=h: BoundedObs(h) for h in (1.0, 2.0, 3.0)]
    with pytest.raises(RuntimeError, match="not equivalent.*observation_mode='different'"):
        seedpool.make_vec(fns, backend=backend, num_workers=2)
    vec = seedpool.make_vec(fns, backend=backend, num_workers=2, observation_mode="different")
    try:
        assert vec.single_observation_space == BoundedObs(1.0).observation_space
        assert vec.observation_space.high[:, 0].tolist() == [1.0, 2.0, 3.0]
        vec.reset(seed=0)
        vec.step(np.zeros(3, np.int64))
    finally:
        vec.close()
    with pytest.raises(RuntimeError, match="other shapes or dtypes"):
        seedpool.make_vec([lambda: BoundedObs(1.0), lambda: BoundedObs(1.0, (3,))], backend=backend,
                          observation_mode="different")
    with pytest.raises(ValueError, match="Invalid `observation_mode`"):
        seedpool.make_vec(fns, backend=backend, observation_mode="invalid")


# -- an env's exception is catchable as its own type, as gymnasium re-raises it ----------


class Raises(gym.Env):
    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        if seed == 1:
            raise ValueError("Error in reset")
        return 0, {}

    def step(self, action):
        raise KeyError("bad step")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_envs_exception_is_caught_as_its_own_type_and_as_env_step_error(backend):
    vec = seedpool.make_vec([Raises] * 2, backend=backend, num_workers=2)
    try:
        vec.reset(seed=[0, 0])
        with pytest.raises(ValueError, match="Error in reset") as caught:
            vec.reset(seed=[1, 0])
        assert isinstance(caught.value, seedpool.EnvStepError) and caught.value.env_id == 0
        assert isinstance(caught.value.__cause__, ValueError)
        vec.reset(seed=[0, 0])  # the vector env stays usable
        with pytest.raises(KeyError, match="bad step"):
            vec.step(np.zeros(2, np.int64))
    finally:
        vec.close()


class ActionEcho(gym.Env):
    """Returns what it was handed, to see the action's type and value as the env sees them."""

    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)

    def __init__(self, action_space):
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.seen = action
        return np.full(1, float(np.sum(action)), np.float32), 0.0, False, False, {"kind": type(action).__name__}


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_box_and_scalar_box_actions_reach_envs_as_gymnasium_hands_them(backend):
    bools = seedpool.make_vec([lambda: ActionEcho(spaces.Box(0, 1, (2,), np.bool_))] * 2, backend=backend)
    scalar = seedpool.make_vec([lambda: ActionEcho(spaces.Box(0.0, 1.0, (), np.float32))] * 2, backend=backend)
    try:
        bools.reset()
        obs, *_ = bools.step(np.array([[True, True], [False, True]]))
        assert obs[:, 0].tolist() == [2.0, 1.0]
        scalar.reset()
        *_, info = scalar.step(np.array([0.25, 0.5], np.float32))
        assert info["kind"].tolist() == ["float32", "float32"]  # numpy scalars, as gymnasium's iterate gives
    finally:
        bools.close()
        scalar.close()


class StrictReset(gym.Env):
    """A reset that takes both arguments without defaults (gymnasium always passes both)."""

    observation_space = spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed, options):
        return np.full(1, -1.0 if options is None else options["x"], np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}


class SeedOnlyReset(StrictReset):
    """A reset without an `options` parameter (SB3 passes options only when there are some)."""

    def reset(self, seed=None):
        return np.zeros(1, np.float32), {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_envs_are_reset_as_gymnasium_and_sb3_call_reset(backend):
    vec = seedpool.make_vec([StrictReset] * 2, backend=backend)
    try:
        assert vec.reset()[0][:, 0].tolist() == [-1.0, -1.0]
        assert vec.reset(options={"x": 2.0})[0][:, 0].tolist() == [2.0, 2.0]
    finally:
        vec.close()
    vec = seedpool.make_vec([SeedOnlyReset] * 2, backend=backend)
    try:
        vec.reset(seed=0)
    finally:
        vec.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_make_sb3_gives_each_env_its_own_reset_options(backend):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
    venv = seedpool.make_sb3([StrictReset] * 3, backend=backend)
    try:
        venv.set_options([{"x": 1.0}, {}, {"x": 3.0}])  # {}: none, as DummyVecEnv reads it
        assert venv.reset()[:, 0].tolist() == [1.0, -1.0, 3.0]
        assert venv.reset()[:, 0].tolist() == [-1.0, -1.0, -1.0]  # used once
    finally:
        venv.close()


# -- spaces of no fixed shape, batched as gymnasium batches them (serial and thread) -----


class GraphEnv(gym.Env):
    """Graph observations and Text actions: elements of no fixed shape."""

    def __init__(self):
        self.observation_space = spaces.Graph(node_space=spaces.Box(0.0, 1.0, (2,)), edge_space=None)
        self.action_space = spaces.Text(5)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        graph = self.observation_space.sample()
        return graph, float(len(action)), len(action) >= 4, False, {}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_spaces_of_no_fixed_shape_match_sync_vector_env(backend, autoreset):
    mode = {"next_step": gym.vector.AutoresetMode.NEXT_STEP, "same_step": gym.vector.AutoresetMode.SAME_STEP}
    vec = seedpool.make_vec([GraphEnv] * 2, backend=backend, autoreset=autoreset)
    ref = gym.vector.SyncVectorEnv([GraphEnv] * 2, autoreset_mode=mode[autoreset])
    try:
        assert vec.observation_space == ref.observation_space and vec.action_space == ref.action_space
        got, _ = vec.reset(seed=3)
        want, _ = ref.reset(seed=3)
        assert isinstance(got, tuple) and got in vec.observation_space
        for actions in [("ab", "abcd"), ("abc", "a"), ("abcde", "ab")]:
            got = vec.step(actions)
            want = ref.step(actions)
            for g, w in zip(got[0], want[0]):
                np.testing.assert_array_equal(g.nodes, w.nodes)
            for a, b in zip(got[1:4], want[1:4]):
                np.testing.assert_array_equal(a, b)
            assert ("final_obs" in got[4]) == ("final_obs" in want[4])
        with pytest.raises(ValueError, match="one action per env"):
            vec.step(("ab",))
    finally:
        vec.close()
        ref.close()
    auto = seedpool.make_vec([GraphEnv] * 2)  # auto keeps such envs in this process (no pickling)
    assert auto.pool.backend == "serial"
    auto.close()


def test_a_single_action_for_a_vector_env_is_a_type_error_and_a_value_error():
    vec = seedpool.make_vec("CartPole-v1", num_envs=3, backend="serial")
    try:
        vec.reset(seed=0)
        with pytest.raises(TypeError, match="a batch of one action per env"):
            vec.step(0)
        with pytest.raises(ValueError, match="one action per env"):
            vec.step(np.zeros(2, np.int64))
        vec.step(np.zeros(3, np.int64))  # still usable
    finally:
        vec.close()
