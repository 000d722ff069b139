"""Native MuJoCo families (seedpool/envs/families/mujoco/envs.py): the same episodes as
gymnasium's v5 envs, and when `make` uses them.

Tolerance: none. Both sides run the same MuJoCo calls on the same model (mj_step with the
task's frame skip; Ant also mj_rnePostConstraint), and the families compute observations and
rewards with gymnasium's expressions in gymnasium's precisions, so observations (float64)
and rewards (the pool's float32) must be equal, as terminations and truncations are.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the native MuJoCo families need mujoco: pip install 'seedpool[mujoco]'")

import seedpool  # noqa: E402
from seedpool.envs.native import check_native_env  # noqa: E402
from seedpool.envs import registry  # noqa: E402
from seedpool.envs.families.mujoco.envs import HalfCheetah, Hopper  # noqa: E402

# (task, pool steps of 4 envs per seed): Ant's step costs ~5x the others'.
TASKS = [("HalfCheetah-v5", 400), ("Hopper-v5", 400), ("Walker2d-v5", 400), ("Ant-v5", 150), ("Humanoid-v5", 150),
         ("HumanoidStandup-v5", 100), ("Swimmer-v5", 400), ("InvertedPendulum-v5", 400)]
NEVER_END = {"HalfCheetah-v5", "HumanoidStandup-v5", "Swimmer-v5"}


@pytest.mark.parametrize("seed", [0, 11])
@pytest.mark.parametrize("task_id,steps", TASKS)
def test_native_mujoco_plays_gymnasiums_episodes(task_id, steps, seed):
    report = check_native_env(task_id, num_envs=4, steps=steps, seed=seed, atol=0.0)
    assert report.max_obs_diff == 0.0
    if task_id not in NEVER_END:  # their episodes are 1000 steps (the first reset is compared)
        assert report.episodes > 0  # terminations, and the resets after them, were compared too


def test_same_step_autoreset_matches():
    """same_step resets an ended env inside the step (the final observation aside, which the
    checker does not compare): Hopper ends often under random actions."""
    assert check_native_env("Hopper-v5", num_envs=4, steps=150, seed=4, atol=0.0, autoreset="same_step").episodes > 0


def test_batch_threads_give_the_same_episodes():
    """The envs split over threads (mujoco_sim.RowThreads): the same results as on one
    (tests/test_native_mujoco_split.py compares them byte for byte)."""
    assert check_native_env("HalfCheetah-v5", num_envs=5, steps=100, seed=2, atol=0.0, threads=2).steps == 100


@pytest.mark.parametrize("family", [HalfCheetah, Hopper])
def test_rows_in_any_order_step_the_envs_they_name(family):
    """The engine hands a family env ids in its own order (an array, a slice): each row of
    the results belongs to the env its id names."""
    ordered, shuffled = family(5), family(5)
    ids = np.arange(5)
    for fam in (ordered, shuffled):
        for i in range(5):
            fam.seed(i, 100 + i)
        fam.reset(ids, None)
    actions = np.random.default_rng(0).uniform(-1, 1, (5, ordered.model.nu)).astype(np.float32)
    order = np.array([3, 0, 4, 1])
    start = shuffled.sim.datas[2].qpos.copy()
    got = shuffled.step(order, actions[order])
    want = ordered.step(slice(None), actions)
    for k in range(3):
        np.testing.assert_array_equal(got[k], want[k][order])
    np.testing.assert_array_equal(shuffled.sim.datas[2].qpos, start)  # env 2, not named, was not stepped


def test_truncates_at_1000_and_resets_from_the_envs_generator():
    with seedpool.make("HalfCheetah-v5", num_envs=2, seed=5) as pool:
        assert pool.backend == "native" and pool.task.max_episode_steps == gym.spec("HalfCheetah-v5").max_episode_steps
        pool.reset()
        zeros = np.zeros((2, 6), np.float32)
        for _ in range(999):
            _, _, term, trunc, _ = pool.step(zeros)
            assert not (term | trunc).any()
        _, _, _, trunc, _ = pool.step(zeros)
        assert trunc.all()
        obs, _, _, _, info = pool.step(zeros)  # next_step autoreset: the new episode's first observation
    env = gym.make("HalfCheetah-v5")
    env.reset(seed=5)
    np.testing.assert_array_equal(obs[0], env.reset()[0])  # env 0's generator, after its first reset's draws
    assert (info["elapsed_step"] == 0).all()


def test_only_default_options_go_native():
    with seedpool.make("Hopper-v5", num_envs=2) as pool:
        assert pool.backend == "native"
        assert pool.env_call(lambda env: env.frame_skip) == [4, 4]  # constants come from a reference env
        with pytest.raises(AttributeError, match="native=False"):  # its MjData is per-env state
            pool.env_call(lambda env: env.data)
    with seedpool.make("Hopper-v5", num_envs=2, native=False, backend="serial") as pool:
        assert pool.backend == "serial"  # gymnasium's envs
    with seedpool.make("Hopper-v5", num_envs=2, ctrl_cost_weight=0.01) as pool:  # a gymnasium option
        assert pool.backend != "native"


@pytest.mark.parametrize("missing", [ImportError("no libmujoco"), gym.error.DependencyNotInstalled("no mujoco")])
def test_a_family_that_cannot_be_imported_leaves_the_python_path(monkeypatch, missing):
    """mujoco without its C library (ImportError), or no mujoco (gymnasium's error on importing its
    MuJoCo envs): gymnasium's envs, whose own error names the extra; native=True says why not."""

    def family_class(task_id):
        raise missing

    monkeypatch.setattr(registry, "family_class", family_class)
    with seedpool.make("Hopper-v5", num_envs=2) as pool:
        assert pool.backend != "native"
    with pytest.raises(ValueError, match="cannot be imported"):
        seedpool.make("Hopper-v5", num_envs=2, native=True)


@pytest.mark.parametrize("dtype,n", [(np.float32, 3), (np.float32, 6), (np.float32, 8), (np.float32, 17),
                                     (np.float64, 84), (np.float64, 128)])
def test_the_kernels_sum_in_numpys_order_and_precision(dtype, n):
    """The control cost (float32, nu terms) and Ant's contact cost (float64, 84 terms) are sums
    that gymnasium takes with np.sum: pairwise, so a plain running sum differs in the last bit
    for some rows. The kernels' sum must equal NumPy's on every row."""
    from seedpool.envs.families.mujoco.kernels import _pairwise_sum

    rng = np.random.default_rng(n)
    rows = np.square(rng.uniform(-1, 1, (3000, n)).astype(dtype) * dtype(rng.uniform(1, 300)))
    rows[0, 0] = np.inf  # a square that overflowed (an action of 1e20 is finite, its float32 square not)
    rows[1, :] = 0.0
    want = np.sum(rows, axis=1)
    got = np.array([_pairwise_sum(row, n) for row in rows], dtype)
    np.testing.assert_array_equal(got, want)
    running = np.array([sum(row[1:], row[0]) for row in rows[:, :]], dtype)  # a plain running sum
    assert n < 8 or (running != want).any()  # the test can tell the orders apart


def test_the_kernels_need_mujocos_c_library(monkeypatch):
    """Without it (or without MjData._address) the family cannot be imported, which leaves the
    ids on the Python-env path (test above)."""
    from seedpool.envs.families.mujoco import kernels as mujoco_kernels

    monkeypatch.setattr(mujoco_kernels, "_LIBRARY", [])
    monkeypatch.setattr(mujoco_kernels.glob, "glob", lambda pattern: [])
    with pytest.raises(ImportError, match="C library|has none"):
        mujoco_kernels.c_functions()


@pytest.mark.parametrize("task_id", ["InvertedPendulum-v5", "Hopper-v5"])
def test_kernel_resets_leave_each_generator_where_gymnasiums_is(task_id, monkeypatch):
    """Uniform reset noise is drawn inside the compiled step from a copy of each env's PCG64
    state: after many resets there, each env's `np_random` (brought up to the kernel's draws)
    is where gymnasium's env's is after the same episodes, and a draw from it matches."""
    from seedpool.envs.families.mujoco.envs import MujocoFamily

    def no_python_resets(*args):
        raise AssertionError("an env the step ended was reset in Python, not by the kernel")

    monkeypatch.setattr(MujocoFamily, "_restart", no_python_resets)
    envs = [gym.make(task_id).unwrapped for _ in range(3)]
    vec = seedpool.make_vec(task_id, num_envs=3)
    try:
        assert vec.pool.backend == "native"
        obs, _ = vec.reset(seed=7)
        want = np.stack([e.reset(seed=7 + i)[0] for i, e in enumerate(envs)])
        np.testing.assert_array_equal(obs, want)
        rng = np.random.default_rng(0)
        ended, pending = 0, [False] * 3
        for _ in range(300):
            actions = rng.uniform(-1, 1, (3, *envs[0].action_space.shape)).astype(np.float32)
            obs, _, term, _, _ = vec.step(actions)
            for i, e in enumerate(envs):
                if pending[i]:  # next-step autoreset: the step after an episode's end is its reset
                    o, pending[i] = e.reset()[0], False
                else:
                    o, _, pending[i], _, _ = e.step(actions[i])
                    ended += pending[i]
                np.testing.assert_array_equal(obs[i], o)
            assert list(term) == [pending[i] for i in range(3)]
        assert ended > 3
        for i, e in enumerate(envs):
            got = vec.get_attr("np_random")[i]
            assert got.bit_generator.state == e.np_random.bit_generator.state
            assert got.uniform() == e.np_random.uniform()
    finally:
        vec.close()
