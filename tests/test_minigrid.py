"""MiniGrid and BabyAI (seedpool/envs/families/minigrid/): native levels against the `minigrid`
package, EnvPool's observation layout and time-limit rule, the Python-env path, gymnasium's
own minigrid ids, and the generator the kernels draw from."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys

import numpy as np
import pytest

import seedpool
from seedpool.envs import registry
from seedpool.envs.families.minigrid import decode_mission, make_minigrid, minigrid_ids
from seedpool.envs.families.minigrid import rng as mg_rng
from seedpool.envs.families.minigrid.registration import NATIVE

needs_minigrid = pytest.mark.skipif(importlib.util.find_spec("minigrid") is None,
                                    reason="minigrid is not installed (pip install 'seedpool[minigrid]')")
needs_envpool = pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="envpool is not installed")
KEYS = ("direction", "image", "mission")
# Actions that open DoorKey's door now and then (pickup and toggle more often than done).
DOORKEY_ACTIONS = [0.12, 0.12, 0.3, 0.2, 0.04, 0.2, 0.02]


def _pools(task_id, num_envs, seed, **options):
    native = seedpool.make(task_id, num_envs=num_envs, seed=seed, **options)
    package = seedpool.make(task_id, num_envs=num_envs, seed=seed, native=False, backend="serial", **options)
    assert native.task.native is not None and package.task.native is None
    return native, package


def _quiet(fn, *args, **kwargs):
    """Call fn: BabyAI's levels print a line each time they draw a level again."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def _same_obs(t, got, want):
    for key in KEYS:
        bad = [e for e, (x, y) in enumerate(zip(got[key], want[key])) if not np.array_equal(x, y)]
        assert not bad, f"{key} differs at step {t} (-1: reset), env {bad[0]}"


def _play(task_id, seed, steps, num_envs=4, p=None, **options):
    """Step the native pool and the package's envs with the same random actions; compare
    everything they return. Returns (episodes ended, successes)."""
    native, package = _pools(task_id, num_envs, seed, **options)
    try:
        _same_obs(-1, native.reset()[0], _quiet(package.reset)[0])
        rng = np.random.default_rng(seed)
        ended = successes = 0
        for t in range(steps):
            act = rng.choice(7, size=num_envs, p=p)
            got, want = native.step(act), _quiet(package.step, act)
            _same_obs(t, got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1], err_msg=f"reward at step {t}")
            for k, name in ((2, "terminated"), (3, "truncated")):
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name} at step {t}")
            np.testing.assert_array_equal(got[4]["elapsed_step"], want[4]["elapsed_step"])
            if "final_obs" in got[4]:
                _same_obs(t, got[4]["final_obs"], want[4]["final_obs"])
            ended += int(np.sum(got[2] | got[3]))
            successes += int(np.sum(got[1] > 0))
        return ended, successes
    finally:
        native.close()
        package.close()


# -- identity with the package ---------------------------------------------------------
@needs_minigrid
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("task_id, steps, p", [
    ("MiniGrid-Empty-8x8-v0", 700, None),
    ("MiniGrid-Empty-Random-5x5-v0", 300, None),
    ("MiniGrid-DoorKey-5x5-v0", 900, DOORKEY_ACTIONS),
    ("MiniGrid-DoorKey-8x8-v0", 1300, DOORKEY_ACTIONS),
    ("BabyAI-GoToLocal-v0", 400, None),
    ("BabyAI-GoToLocalS5N2-v0", 200, None),
])
def test_native_levels_play_the_packages_episodes(task_id, steps, p, seed):
    """Observations, rewards, terminations, truncations and episode lengths, through episode
    ends (goals reached and time limits) and the resets after them."""
    ended, successes = _play(task_id, seed, steps, p=p)
    assert ended > 0 and successes > 0


@needs_minigrid
@pytest.mark.parametrize("task_id", ["MiniGrid-DoorKey-6x6-v0", "BabyAI-GoToLocalS8N7-v0"])
def test_same_step_autoreset_final_observations_match(task_id):
    ended, _ = _play(task_id, 5, 500, autoreset="same_step", p=DOORKEY_ACTIONS)
    assert ended > 0


@needs_minigrid
def test_every_native_id_starts_as_the_package():
    """Each native id's first observations for several seeds (sizes, starts, distractors)."""
    for task_id in NATIVE:
        native, package = _pools(task_id, 3, 11)
        try:
            _same_obs(-1, native.reset()[0], _quiet(package.reset)[0])
            act = np.array([2, 1, 3])
            _same_obs(0, native.step(act)[0], _quiet(package.step, act)[0])
        finally:
            native.close()
            package.close()


# -- EnvPool's face ----------------------------------------------------------------------
@pytest.mark.parametrize("native", [True, False])
def test_the_step_at_the_time_limit_is_a_truncation_with_its_reward(native):
    """EnvPool's rule: reaching the goal on the limit's step truncates (reward kept), and
    `max_episode_steps` is MiniGrid's max_steps, which the reward reads."""
    if not native and importlib.util.find_spec("minigrid") is None:
        pytest.skip("minigrid is not installed")
    path = [2, 2, 1, 2, 2]  # Empty-5x5: from (1, 1) facing right to the goal at (3, 3)
    for limit, terminated, truncated in ((5, False, True), (50, True, False)):
        pool = seedpool.make("MiniGrid-Empty-5x5-v0", num_envs=1, native=native, max_episode_steps=limit,
                             **({} if native else {"backend": "serial"}))
        pool.reset()
        for a in path:
            _, reward, term, trunc, _ = pool.step(np.array([a]))
        pool.close()
        assert reward[0] == np.float32(1 - 0.9 * 5 / limit)
        assert (term[0], trunc[0]) == (terminated, truncated)


def test_observations_are_envpools_dict():
    pool = seedpool.make("BabyAI-GoToLocal-v0", num_envs=2, seed=0)
    obs, _ = pool.reset()
    space = pool.single_observation_space
    assert list(space) == list(KEYS)
    assert obs["direction"].dtype == np.int32 and obs["image"].shape == (2, 7, 7, 3)
    assert obs["mission"].shape == (2, 512) and obs["mission"].dtype == np.uint8
    assert space.contains({k: v[0] for k, v in obs.items()})
    for text in decode_mission(obs["mission"]):
        words = text.split()
        assert words[:3] == ["go", "to", words[2]] and words[2] in ("the", "a")
        assert words[3] in ("red", "green", "blue", "purple", "yellow", "grey") and words[4] in ("key", "ball", "box")
    pool.close()
    small = seedpool.make("MiniGrid-Empty-8x8-v0", num_envs=1, agent_view_size=5, mission_bytes=8)
    obs, _ = small.reset()
    assert obs["image"].shape == (1, 5, 5, 3) and decode_mission(obs["mission"][0]) == "get to t"
    small.close()


@needs_envpool
@pytest.mark.parametrize("task_id", ["MiniGrid-Empty-8x8-v0", "MiniGrid-DoorKey-8x8-v0", "BabyAI-GoToLocal-v0"])
def test_spaces_and_arrays_are_envpools(task_id):
    """The arrays' keys, shapes and dtypes are EnvPool's; Empty's start (fixed) and the
    fixed missions are EnvPool's bytes."""
    import envpool

    theirs = envpool.make(task_id, env_type="gymnasium", num_envs=2, seed=0)
    ours = seedpool.make(task_id, num_envs=2, seed=0)
    want, _ = theirs.reset()
    got, _ = ours.reset()
    for key in KEYS:
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype, key
        assert ours.single_observation_space[key].shape == theirs.observation_space[key].shape
    assert ours.single_action_space == theirs.action_space
    # EnvPool's BabyAI config says 0: the level counts its own limit, room_size**2 = 64 steps.
    assert ours.spec.max_episode_steps == (theirs.spec.config.max_episode_steps or 64)
    if "GoTo" not in task_id:
        np.testing.assert_array_equal(got["mission"], want["mission"])
    if "Empty" in task_id:
        for key in KEYS:
            np.testing.assert_array_equal(got[key], want[key])
    ours.close()
    theirs.close()


def test_envpool_face_makes_the_ids():
    shim = pytest.importorskip("seedpool.compat.envpool", exc_type=ImportError)
    pool = shim.make("MiniGrid-DoorKey-8x8-v0", env_type="gymnasium", num_envs=3)
    obs, _ = pool.reset()
    assert pool.task.native is not None and pool.spec.id == "MiniGrid-DoorKey-8x8-v0"
    assert obs["image"].shape == (3, 7, 7, 3)
    pool.close()


# -- ids, the Python-env path, gymnasium's ids -------------------------------------------------
def test_every_envpool_id_is_registered():
    ids = minigrid_ids()
    assert len(ids) == 177 and all(registry.find(i) is not None for i in ids)
    assert set(NATIVE) <= set(ids) and all(registry.has_native(i) for i in NATIVE)
    if importlib.util.find_spec("envpool") is not None:
        import envpool

        assert set(ids) == {i for i in envpool.list_all_envs() if i.startswith(("MiniGrid-", "BabyAI-"))}


@needs_minigrid
@pytest.mark.parametrize("task_id", ["MiniGrid-FourRooms-v0", "BabyAI-GoToRedBall-v0", "MiniGrid-KeyCorridorS3R1-v0"])
def test_other_ids_run_the_package_with_envpools_layout(task_id):
    pool = seedpool.make(task_id, num_envs=2, seed=0, backend="serial")
    obs, _ = _quiet(pool.reset)
    assert pool.task.native is None and obs["mission"].shape == (2, 512 if task_id.startswith("BabyAI") else 96)
    env = _quiet(make_minigrid, task_id)
    first, _ = _quiet(env.reset, seed=0)
    for key in KEYS:
        np.testing.assert_array_equal(obs[key][0], first[key])
    _quiet(pool.step, np.array([2, 0]))
    pool.close()


@needs_minigrid
def test_python_env_path_in_worker_processes_matches_serial():
    pools = [seedpool.make("MiniGrid-DoorKey-5x5-v0", num_envs=3, seed=4, native=False, backend=b)
             for b in ("process", "serial")]
    rng = np.random.default_rng(0)
    first = [p.reset()[0] for p in pools]
    _same_obs(-1, *first)
    for t in range(60):
        act = rng.integers(0, 7, size=3)
        a, b = (p.step(act) for p in pools)
        _same_obs(t, a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    for p in pools:
        p.close()


@needs_minigrid
@pytest.mark.parametrize("backend", ["serial", "process"])
def test_gymnasium_ids_of_the_package_keep_working(backend):
    """"module:Id" gives the package's env as it is (mission strings); an id only gymnasium
    knows (after `import minigrid`) runs too, in worker processes as well."""
    import gymnasium as gym
    import minigrid  # noqa: F401 - registers the package's gymnasium ids

    pool = seedpool.make("minigrid:MiniGrid-Empty-5x5-v0", num_envs=2, seed=0, backend=backend)
    obs, _ = pool.reset()
    assert obs["mission"] == ("get to the green goal square",) * 2
    ref, _ = gym.make("MiniGrid-Empty-5x5-v0").reset(seed=1)
    np.testing.assert_array_equal(obs["image"][1], ref["image"])
    pool.step(np.array([2, 2]))
    pool.close()
    other = seedpool.make("MiniGrid-MultiRoom-N4-S5-v1", num_envs=2, seed=0, backend=backend)
    assert other.task.native is None and registry.find("MiniGrid-MultiRoom-N4-S5-v1") is None
    other.reset()
    other.step(np.array([2, 2]))
    other.close()


def test_a_missing_package_names_the_extra(monkeypatch):
    """The Python-env path says what to install; the native ids need no package."""
    monkeypatch.setitem(sys.modules, "minigrid", None)  # import minigrid now raises ImportError
    with pytest.raises(ModuleNotFoundError, match=r"seedpool\[minigrid\]"):
        make_minigrid("MiniGrid-FourRooms-v0")
    with pytest.raises(ModuleNotFoundError, match=r"seedpool\[minigrid\]"):
        seedpool.make("MiniGrid-FourRooms-v0", num_envs=1)
    pool = seedpool.make("MiniGrid-DoorKey-8x8-v0", num_envs=2)
    pool.reset()
    pool.step(np.array([0, 1]))
    pool.close()


# -- the generator ------------------------------------------------------------------------------
def test_kernel_draws_are_numpys_integers():
    """`integers` over 1- to 2**32 - 1-valued ranges, with Python draws in between (store/load),
    gives NumPy's numbers and leaves the generator in NumPy's state."""
    states = np.zeros((2, mg_rng.WIDTH), np.uint64)
    for seed in (0, 5, 2**31 - 1):
        theirs, ours = np.random.default_rng(seed), np.random.default_rng(seed)
        mg_rng.load(states, 1, ours)
        spans = np.random.default_rng(seed + 1)
        for k in range(3000):
            low = int(spans.integers(-3, 5))
            high = low + int(spans.choice([1, 2, 3, 4, 6, 7, 8, 100, 2**31 + 5, 2**32 - 1]))
            assert mg_rng.integers(states, 1, low, high) == theirs.integers(low, high), (seed, k)
            if k % 500 == 7:  # a draw through Python between the kernels' draws
                theirs.integers(0, 3)
                mg_rng.store(states, 1, ours)
                ours.integers(0, 3)
                mg_rng.load(states, 1, ours)
        mg_rng.store(states, 1, ours)
        assert ours.bit_generator.state == theirs.bit_generator.state


@needs_minigrid
def test_python_draws_from_an_envs_generator_are_seen_by_the_kernels():
    """What a caller draws from env i's generator (`family.rng(i)`) comes before the level's
    next draws, as on the single env's `np_random`."""
    import gymnasium as gym
    from gymnasium.utils import seeding

    from seedpool.envs.families.minigrid.family import DoorKey

    family = DoorKey(2)
    for i in range(2):
        family.seed(i, 3)
    family.rng(0).integers(0, 100)
    got = family.reset(np.array([0, 1]), None)
    env = gym.make("MiniGrid-DoorKey-8x8-v0").unwrapped
    plain, _ = env.reset(seed=3)
    env.np_random, _ = seeding.np_random(3)
    env.np_random.integers(0, 100)
    after_draw, _ = env.reset()  # no seed: the generator as the draw left it
    np.testing.assert_array_equal(got["image"][1], plain["image"])
    np.testing.assert_array_equal(got["image"][0], after_draw["image"])
    assert family.rng(0).bit_generator.state == env.np_random.bit_generator.state
