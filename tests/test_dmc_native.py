"""The native dm_control tasks (seedpool/envs/families/dmc_native/) against the dm-control
package path (seedpool/envs/families/dmc/), and when `make` uses them.

Tolerance: none. Both sides run the same MuJoCo calls on the same model (dm_control's own
XML; its legacy step: mj_step2, mj_step, mj_step1) from the same initial states (each env's
`RandomState(seed)`, drawn in dm_control's order), and the kernels compute observations and
rewards with dm_control's expressions in float64, with NumPy's own exp and log1p and its
scalar power: observations (float64) and rewards (the pool's float32; the family's float64
against dm_control's directly) must be equal, as terminations, truncations and episode
lengths are.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")  # dm_control picks its GL backend on import (the package path's choice)

pytest.importorskip("mujoco", reason="the native dm_control tasks need mujoco: pip install 'seedpool[mujoco]'")
pytest.importorskip("dm_control", reason="the package path (the reference) needs dm-control")

import seedpool  # noqa: E402
from seedpool.envs.families.dmc_native.domains import TASKS  # noqa: E402

# (task, steps of 3 envs per seed, time limit): a limit below the steps ends episodes at the
# limit, so the resets after them (and their draws) are compared too.
CASES = [("CheetahRun-v1", 130, 50), ("WalkerWalk-v1", 130, 50), ("WalkerStand-v1", 60, 25),
         ("WalkerRun-v1", 60, 25), ("HopperStand-v1", 60, 25), ("HopperHop-v1", 60, 25),
         ("CartpoleBalance-v1", 100, 40), ("CartpoleSwingup-v1", 100, 40)]


def _pair(task_id: str, seed: int, threads: int | None = None, **options):
    fast = seedpool.make(task_id, num_envs=3, seed=seed, native=True, threads=threads, **options)
    slow = seedpool.make(task_id, num_envs=3, seed=seed, native=False, backend="serial", **options)
    return fast, slow


def _actions(pool, steps: int, seed: int) -> np.ndarray:
    """Uniform actions in the action space's bounds (these tasks' controls lie in [-1, 1])."""
    space = pool.single_action_space
    return np.random.default_rng(seed).uniform(space.low, space.high, (steps, pool.num_envs, *space.shape))


def _same(got, want, where: str) -> None:
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=f"{where}: observation {key!r}")


def _play(fast, slow, actions: np.ndarray, reset: bool = True) -> int:
    """Step both with `actions`, comparing everything; the episodes that ended."""
    if reset:
        _same(fast.reset()[0], slow.reset()[0], "reset")
    ended = 0
    for t, act in enumerate(actions):
        got, want = fast.step(act), slow.step(act)
        _same(got[0], want[0], f"step {t}")
        for k, name in ((1, "reward"), (2, "terminated"), (3, "truncated")):
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"step {t}: {name}")
        np.testing.assert_array_equal(got[4]["elapsed_step"], want[4]["elapsed_step"], err_msg=f"step {t}")
        if "final_obs" in want[4]:
            _same(got[4]["final_obs"], want[4]["final_obs"], f"step {t}: final_obs")
        ended += int(np.sum(got[3]))
    return ended


@pytest.mark.parametrize("task_id,steps,limit", CASES)
def test_native_plays_the_packages_episodes(task_id, steps, limit):
    seeds = (0, 7) if task_id in ("CheetahRun-v1", "WalkerWalk-v1") else (3,)
    for seed in seeds:
        fast, slow = _pair(task_id, seed, max_episode_steps=limit)
        with fast, slow:
            assert fast.backend == "native" and slow.backend == "serial"
            assert fast.single_observation_space == slow.single_observation_space
            assert list(fast.single_observation_space.spaces) == list(slow.single_observation_space.spaces)
            assert fast.single_action_space == slow.single_action_space
            assert _play(fast, slow, _actions(fast, steps, seed)) >= 3  # every env reached the limit


def test_rewards_are_not_all_alike():
    """The comparisons above must see rewards that vary (a reward stuck at 0 for both would
    not test the reward): walker's standing term moves with every step."""
    with seedpool.make("WalkerWalk-v1", num_envs=2, seed=1) as pool:
        pool.reset()
        rewards = [pool.step(a)[1] for a in _actions(pool, 30, 1)]
    assert len(np.unique(np.round(rewards, 6))) > 10


def test_a_seed_gives_the_same_episodes_before_any_reset():
    """A pool stepped without reset() starts from its seeds (its first step resets every env),
    as the package path's does; a second pool of the same seed repeats it."""
    fast, slow = _pair("CheetahRun-v1", 11, max_episode_steps=20)
    with fast, slow:
        actions = _actions(fast, 45, 11)
        _play(fast, slow, actions, reset=False)
    with seedpool.make("CheetahRun-v1", num_envs=3, seed=11, max_episode_steps=20) as again, \
            seedpool.make("CheetahRun-v1", num_envs=3, seed=11, max_episode_steps=20) as twin:
        _play(again, twin, actions, reset=False)


def test_a_reset_with_a_seed_reseeds_the_env():
    fast, slow = _pair("WalkerStand-v1", 2)
    with fast, slow:
        _play(fast, slow, _actions(fast, 5, 2))
        _same(fast.reset(seed=40)[0], slow.reset(seed=40)[0], "reseeded")
        _play(fast, slow, _actions(fast, 5, 3), reset=False)


@pytest.mark.parametrize("autoreset", ["same_step", "disabled"])
def test_autoreset_modes(autoreset):
    fast, slow = _pair("HopperHop-v1", 5, max_episode_steps=15, autoreset=autoreset)
    with fast, slow:
        actions = _actions(fast, 40, 5)
        if autoreset == "same_step":
            assert _play(fast, slow, actions) == 6
        else:  # an ended env is reset by the caller
            _same(fast.reset()[0], slow.reset()[0], "reset")
            for t, act in enumerate(actions[:15]):
                got, want = fast.step(act), slow.step(act)
                _same(got[0], want[0], f"step {t}")
            assert got[3].all()
            _same(fast.reset()[0], slow.reset()[0], "second reset")


def test_frame_skip_and_threads():
    """EnvPool's frame_skip (physics steps per step) on both paths; the batch split over two
    threads (any thread steps any env): the same episodes."""
    fast, slow = _pair("WalkerWalk-v1", 4, frame_skip=3, max_episode_steps=30)
    with fast, slow:
        assert fast.task.native.frame_skip == 3
        _play(fast, slow, _actions(fast, 40, 4))
    fast, slow = _pair("CheetahRun-v1", 4, threads=2, max_episode_steps=30)
    with fast, slow:
        _play(fast, slow, _actions(fast, 40, 4))


def test_async_batches_step_each_env_as_its_own():
    """An async pool (batches of 2 of 4 envs, the compiled ring on 2 threads): each env's
    episode is the one a sync pool plays with that env's actions, by env id."""
    steps, space_seed = 30, 9
    with seedpool.make("CheetahRun-v1", num_envs=4, seed=9, max_episode_steps=12) as sync:
        actions = _actions(sync, steps, space_seed)
        sync.reset()
        want = [sync.step(a)[0]["velocity"].copy() for a in actions]
    with seedpool.make("CheetahRun-v1", num_envs=4, batch_size=2, seed=9, max_episode_steps=12, threads=2) as pool:
        pool.async_reset()
        count = np.zeros(4, np.int64)
        for _ in range(2):  # the resets
            pool.recv()
        pool.send(actions[0, :2], np.array([0, 1]))
        pool.send(actions[0, 2:], np.array([2, 3]))
        while count.min() < steps:
            obs, _, _, _, info = pool.recv()
            ids = info["env_id"]
            for row, i in enumerate(ids.tolist()):
                np.testing.assert_array_equal(obs["velocity"][row], want[count[i]][i], err_msg=f"env {i}")
                count[i] += 1
            go = count[ids] < steps
            if go.any():
                pool.send(np.stack([actions[count[i], i] for i in ids[go].tolist()]), ids[go])
        assert (count == steps).all()


def test_make_routes_the_ids_natively():
    for task_id in TASKS:
        with seedpool.make(task_id, num_envs=2) as pool:
            assert pool.backend == "native", task_id
    with seedpool.make("CheetahRun-v1", num_envs=2, native=False) as pool:  # the package path
        assert pool.backend != "native"
    with seedpool.make("CheetahRun-v1", num_envs=2, frame_stack=2) as pool:  # an option only the package has
        assert pool.backend != "native"
    with pytest.raises(ValueError, match="frame_skip"):
        seedpool.make("CheetahRun-v1", num_envs=2, native=True, frame_skip=0)


def test_envpool_face_uses_the_native_family():
    from seedpool.compat import envpool

    with envpool.make_gymnasium("CheetahRun-v1", num_envs=2, seed=3) as pool:
        assert pool.backend == "native"
        obs, _ = pool.reset()
        assert obs["position"].shape == (2, 8) and obs["velocity"].dtype == np.float64
    dm = envpool.make_dm("WalkerWalk-v1", num_envs=2, seed=3)
    try:
        ts = dm.reset()
        ts = dm.step(np.zeros((2, 6)))
        assert (ts.discount == 1.0).all() and ts.observation.height.shape == (2,)
    finally:
        dm.close()


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_float64_rewards_and_observations_equal_dm_controls(task_id):
    """The family's own float64 results (before the pool's float32 reward) against dm_control's
    suite envs stepped directly, seeded as the package path seeds them: equal, bit for bit."""
    from dm_control import suite

    from seedpool.envs.families.dmc.env import _IDS

    domain, task = _IDS[task_id]
    family = TASKS[task_id](2, threads=1)
    envs = []
    for i in range(2):
        family.seed(i, 30 + i)
        env = suite.load(domain, task, task_kwargs={"time_limit": float("inf")})
        env.task._random = np.random.RandomState(30 + i)
        envs.append(env)
    got = family.reset(np.arange(2), None)
    for i, env in enumerate(envs):
        _same({key: got[key][i] for key in got}, env.reset().observation, "reset")
    actions = np.random.default_rng(3).uniform(-1, 1, (150, 2, family.model.nu))
    for t, act in enumerate(actions):
        obs, reward, terminated = family.step(slice(None), act)
        for i, env in enumerate(envs):
            ts = env.step(act[i])
            assert reward[i] == ts.reward, (t, i)
            _same({key: obs[key][i] for key in obs}, ts.observation, f"step {t}")
        assert not terminated.any()
    family.close()


def test_numpys_loops_are_numpys():
    """The kernels' exp and log1p are NumPy's own loops (numpy_loops.py), one value a call:
    found, and giving NumPy's values (on AVX-512 machines the C library's differ from them
    in the last bit for a few percent of values)."""
    from seedpool.envs.families.dmc_native import kernels
    from seedpool.envs.families.dmc_native.sim import FUNCTIONS

    assert FUNCTIONS[kernels.EXP] != 0 and FUNCTIONS[kernels.LOG1P] != 0
    rng = np.random.default_rng(5)
    for which, ufunc, x in ((kernels.EXP, np.exp, -rng.uniform(0, 30, 3000)),
                            (kernels.LOG1P, np.log1p, rng.uniform(0, 50, 3000))):
        got = np.array([kernels._numpy(FUNCTIONS, which, v) for v in x])
        np.testing.assert_array_equal(got, [ufunc(np.float64(v)) for v in x])
