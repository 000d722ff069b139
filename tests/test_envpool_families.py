"""EnvPool's families on their Python packages (seedpool/envs/families/{dmc,box2d,robotics,
highway,vizdoom}): each id EnvPool lists made by `seedpool.make` and by the EnvPool face,
with EnvPool's options and spaces (checked against envpool 1.2.5 where it is installed),
dm_control's episodes, worker processes, and the one-line error naming the extra."""

from __future__ import annotations

from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from seedpool.envs.families import packaged

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]
SERIAL = {"backend": "serial"}

# family -> (the module its package installs, ids to make and step)
FAMILY_IDS = {
    "dmc": ("dm_control", ["CheetahRun-v1", "WalkerWalk-v1", "BallInCupCatch-v1", "LqrLqr21-v1"]),
    "box2d": ("Box2D", ["LunarLander-v2", "LunarLanderContinuous-v2", "CarRacing-v2"]),
    "robotics": ("gymnasium_robotics", ["FetchReach-v1", "FetchPush-v4", "HandManipulateBlock-v0",
                                        "AdroitHandDoor-v1", "PointMaze_UMaze-v3", "FrankaKitchen-v1"]),
    "highway": ("highway_env", ["Highway-v0", "parking-v0", "LaneKeeping-v0", "IntersectionMultiAgent-v1"]),
    "vizdoom": ("vizdoom", ["Basic-v1", "DefendTheCenter-v1"]),
}
CASES = [(module, task_id) for module, ids in FAMILY_IDS.values() for task_id in ids]


def _rollout(pool, steps: int, seed: int = 0) -> list:
    """reset, then `steps` random (seeded) batches; every observation, reward and flag."""
    batch = gym.vector.utils.batch_space(pool.single_action_space, pool.num_envs)
    batch.seed(seed)
    out = [pool.reset()[0]]
    for _ in range(steps):
        obs, rew, term, trunc, _ = pool.step(batch.sample())
        out += [obs, rew, term, trunc]
    return out


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return list(a) == list(b) and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return all(_equal(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


@pytest.mark.parametrize("module,task_id", CASES)
def test_make_reset_and_step_each_family(module, task_id):
    pytest.importorskip(module)
    with closing(seedpool.make(task_id, num_envs=2, seed=3, **SERIAL)) as pool:
        batch_obs = gym.vector.utils.batch_space(pool.single_observation_space, 2)
        obs, info = pool.reset()
        assert batch_obs.contains(obs), task_id
        batch = gym.vector.utils.batch_space(pool.single_action_space, 2)
        batch.seed(0)
        for _ in range(4):
            obs, rew, term, trunc, info = pool.step(batch.sample())
            assert batch_obs.contains(obs) and np.isfinite(rew).all() and rew.shape == (2,)
        assert list(info["elapsed_step"]) == [4, 4] or (term | trunc).any()


def _layout(ours: gym.Space, theirs: gym.Space, bounds: bool) -> None:
    """The same space: type, Dict keys in order, shape and dtype; bounds where `bounds`."""
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(ours, gym.spaces.Dict):
        assert list(ours.spaces) == list(theirs.spaces), (list(ours.spaces), list(theirs.spaces))
        for key in ours.spaces:
            _layout(ours[key], theirs[key], bounds)
    elif isinstance(ours, gym.spaces.Discrete):
        assert ours.n == theirs.n
    else:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours, theirs)
        if bounds:
            np.testing.assert_array_equal(ours.low, theirs.low)
            np.testing.assert_array_equal(ours.high, theirs.high)


# (id, options, whether the observation bounds are EnvPool's too). EnvPool's state
# observations of dm_control and Box2D carry the dtype's smallest positive number as their low
# bound, which negative observations fall outside; seedpool's are unbounded / gymnasium's
# (docs/compat.md). Action bounds are always EnvPool's.
SPACE_CASES = [
    ("dm_control", "CheetahRun-v1", {}, False), ("dm_control", "WalkerWalk-v1", {}, False),
    ("dm_control", "HumanoidRun-v1", {}, False), ("dm_control", "ManipulatorBringBall-v1", {}, False),
    ("dm_control", "CheetahRun-v1", {"frame_stack": 3}, False),
    ("dm_control", "CheetahRun-v1", {"from_pixels": True}, True),
    ("dm_control", "WalkerWalk-v1", {"from_pixels": True, "frame_stack": 2, "render_width": 64,
                                     "render_height": 48}, True),
    ("Box2D", "CarRacing-v2", {}, True), ("Box2D", "LunarLander-v2", {}, False),
    ("Box2D", "LunarLanderContinuous-v2", {}, False),
    ("gymnasium_robotics", "FetchReach-v1", {}, True), ("gymnasium_robotics", "HandManipulateEgg-v1", {}, True),
    ("gymnasium_robotics", "AdroitHandHammer-v1", {}, True), ("gymnasium_robotics", "PointMaze_Large-v3", {}, True),
    ("gymnasium_robotics", "FetchPush-v4", {"frame_stack": 2}, True),
    ("highway_env", "Highway-v0", {}, True), ("highway_env", "Parking-v0", {}, True),
    ("highway_env", "LaneKeeping-v0", {}, True), ("highway_env", "two-way-v0", {}, True),
    ("vizdoom", "Basic-v1", {}, True), ("vizdoom", "HealthGathering-v1", {"stack_num": 2, "img_width": 64}, True),
]


@pytest.mark.parametrize("module,task_id,options,obs_bounds", SPACE_CASES)
def test_spaces_are_envpools(module, task_id, options, obs_bounds):
    pytest.importorskip(module)
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    theirs = envpool.make_spec(task_id, **options)
    with closing(seedpool.make(task_id, num_envs=1, **SERIAL, **options)) as pool:
        _layout(pool.single_observation_space, theirs.observation_space, obs_bounds)
        vizdoom = module == "vizdoom"  # EnvPool's button Box is bounded by float64's tiny..max
        _layout(pool.single_action_space, theirs.action_space, bounds=not vizdoom)


def test_dmc_gives_dm_controls_episodes_for_each_envs_seed():
    pytest.importorskip("dm_control")
    from dm_control import suite

    actions = np.random.default_rng(0).uniform(-1, 1, (20, 2, 6))
    with closing(seedpool.make("CheetahRun-v1", num_envs=2, seed=7, **SERIAL)) as pool:
        obs, _ = pool.reset()
        for i in range(2):  # env i is seeded with seed + i
            env = suite.load("cheetah", "run", task_kwargs={"random": 7 + i})
            ts = env.reset()
            np.testing.assert_array_equal(obs["position"][i], ts.observation["position"])
            for a in actions:
                ts = env.step(a[i])
                got, rew, *_ = pool.step(a) if i == 0 else (None, None)
                if i == 0:
                    np.testing.assert_allclose(got["velocity"][0], ts.observation["velocity"], rtol=1e-12)
                    np.testing.assert_allclose(rew[0], ts.reward, rtol=1e-6)


def test_seeded_pools_repeat_and_seeds_differ():
    pytest.importorskip("dm_control")
    runs = []
    for seed in (0, 0, 1):
        with closing(seedpool.make("WalkerWalk-v1", num_envs=2, seed=seed, **SERIAL)) as pool:
            runs.append(_rollout(pool, 5))
    assert all(_equal(a, b) for a, b in zip(runs[0], runs[1]))
    assert not _equal(runs[0][0], runs[2][0])


def test_dmc_options_frame_skip_task_name_and_time_limit():
    pytest.importorskip("dm_control")
    with closing(seedpool.make("WalkerWalk-v1", num_envs=1, frame_skip=2, task_name="run",
                               max_episode_steps=3, **SERIAL)) as pool:
        assert pool.config["frame_skip"] == 2 and pool.config["task_name"] == "run"
        assert pool.config["max_episode_steps"] == 3
        pool.reset()
        flags = [pool.step(np.zeros((1, 6)))[3][0] for _ in range(3)]
        assert flags == [False, False, True]  # truncated at EnvPool's limit
    with closing(seedpool.make("WalkerWalk-v1", num_envs=1, **SERIAL)) as pool:
        assert pool.config["frame_skip"] == 10  # dm_control's own control timestep for walker
    with pytest.raises(ValueError, match="no option 'frameskip'"):
        seedpool.make("WalkerWalk-v1", num_envs=1, frameskip=2, **SERIAL)
    with pytest.raises(ValueError, match="not a task of walker"):
        seedpool.make("WalkerWalk-v1", num_envs=1, task_name="swingup", **SERIAL)


def test_dmc_pixels_render_channel_first():
    pytest.importorskip("dm_control")
    with closing(seedpool.make("CartpoleSwingup-v1", num_envs=2, from_pixels=True, render_width=32,
                               render_height=24, frame_stack=2, **SERIAL)) as pool:
        obs, _ = pool.reset()
        assert obs.shape == (2, 6, 24, 32) and obs.dtype == np.uint8
        assert obs.any() and np.array_equal(obs[:, :3], obs[:, 3:])  # the first frame repeated after reset
        first = obs[:, :3]
        for _ in range(20):
            obs = pool.step(np.ones((2, 1)))[0]
        assert not np.array_equal(obs[:, 3:], first)  # the cart moved


@pytest.mark.parametrize("module,task_id", [("dm_control", "CheetahRun-v1"), ("gymnasium_robotics", "FetchReach-v1"),
                                            ("highway_env", "Merge-v0"), ("vizdoom", "Basic-v1")])
def test_ids_work_in_worker_processes(module, task_id):
    pytest.importorskip(module)
    with closing(seedpool.make(task_id, num_envs=2, seed=1, backend="process", num_workers=2)) as pool:
        procs = _rollout(pool, 3)
    with closing(seedpool.make(task_id, num_envs=2, seed=1, **SERIAL)) as pool:
        serial = _rollout(pool, 3)
    assert all(_equal(a, b) for a, b in zip(procs, serial)), task_id


def test_a_missing_package_names_its_extra(monkeypatch):
    monkeypatch.setitem(packaged.PACKAGES, "dmc", ("no_such_module_for_this_test", "dm-control"))
    with pytest.raises(ModuleNotFoundError) as err:
        seedpool.make("CheetahRun-v1", num_envs=1, **SERIAL)
    message = str(err.value)
    assert "\n" not in message and "pip install 'seedpool[dm-control]'" in message and "CheetahRun-v1" in message


def test_face_lists_what_this_install_makes(monkeypatch):
    pytest.importorskip("dm_env")
    from seedpool.compat import envpool as face

    listed = set(face.list_all_envs())
    for module, ids in FAMILY_IDS.values():
        installed = packaged.importlib.util.find_spec(module) is not None
        assert all((i in listed) == installed for i in ids if i not in ("LunarLander-v2", "CarRacing-v2",
                                                                          "LunarLanderContinuous-v2")), module
    monkeypatch.setitem(packaged.PACKAGES, "dmc", ("no_such_module_for_this_test", "dm-control"))
    assert "CheetahRun-v1" not in face.list_all_envs()


def test_face_makes_the_ids_with_envpools_options_and_dm_state():
    pytest.importorskip("dm_control")
    pytest.importorskip("dm_env")
    from seedpool.compat import envpool as face

    with closing(face.make_gymnasium("CheetahRun-v1", num_envs=2, frame_skip=2, backend="serial")) as pool:
        assert pool.spec.config.frame_skip == 2 and pool.spec.id == "CheetahRun-v1"
        obs, _ = pool.reset()
        assert list(obs) == ["position", "velocity"] and obs["velocity"].shape == (2, 9)
    with closing(face.make_gymnasium("CheetahRun-v1", num_envs=1, from_pixels=True, render_width=40,
                                     render_height=30, backend="serial")) as pool:
        assert pool.reset()[0].shape == (1, 3, 30, 40)
    dm = face.make_dm("WalkerWalk-v1", num_envs=2, backend="serial")
    try:
        ts = dm.reset()
        spec = dm.observation_spec()
        assert ts.observation.height.shape == (2,) and ts.observation.orientations.shape == (2, 14)
        assert spec.orientations.shape == (14,) and spec.env_id.dtype == np.int32
        ts = dm.step(np.zeros((2, 6)))
        np.testing.assert_array_equal(ts.discount, [1.0, 1.0])
    finally:
        dm.close()


def test_every_dmc_id_has_envpools_keys_shapes_and_actions():
    pytest.importorskip("dm_control")
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    from seedpool.envs.families.dmc.env import dmc_ids, make_dmc

    assert set(dmc_ids()) == {i for i in envpool.list_all_envs() if envpool.registration.registry.specs[i][0]
                              == "envpool.mujoco.dmc"}
    for task_id in dmc_ids():
        theirs = envpool.make_spec(task_id)
        env = make_dmc(task_id)
        _layout(env.observation_space, theirs.observation_space, bounds=False)
        _layout(env.action_space, theirs.action_space, bounds=True)
        env.close()
