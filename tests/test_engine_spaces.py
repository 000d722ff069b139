"""Dict and Tuple spaces nested to any depth, on every backend, against gymnasium's SyncVectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import seedpool
from envs_for_tests import NestedEnv, TextObsEnv

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

BACKENDS = {
    "serial": dict(backend="serial"),
    "thread": dict(backend="thread", num_workers=2),
    "process": dict(backend="process", num_workers=2),
    "process+main": dict(backend="auto"),  # forced below: 1 worker, half the envs in the main process
}
CASES = [("dict", "discrete"), ("tuple", "dict"), ("dict", "tuple")]
N = 4


def assert_same_tree(got, want, where: str) -> None:
    """Equal nesting (dict keys in order, tuples), and equal values and dtypes at every leaf."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same_tree(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, tuple):
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            assert_same_tree(g, w, f"{where}[{k}]")
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"


def tree_row(tree, i: int):
    """Row i of every leaf of a batched nesting."""
    if isinstance(tree, dict):
        return {k: tree_row(v, i) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_row(v, i) for v in tree)
    return tree[i]


def make_pool(name: str, obs_kind: str, action_kind: str, force_layout, autoreset: str = "next_step"):
    if name == "process+main":
        force_layout("process", 1, N // 2)
    pool = seedpool.make(lambda: NestedEnv(obs_kind, action_kind), num_envs=N, seed=3,
                         autoreset=autoreset, **BACKENDS[name])
    assert f"backend={name!r}" in repr(pool)
    return pool


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize("obs_kind,action_kind", CASES)
def test_nested_spaces_match_sync_vector_env_step_by_step(name, obs_kind, action_kind, force_layout):
    ref = gym.vector.SyncVectorEnv([lambda: NestedEnv(obs_kind, action_kind)] * N)
    ref.action_space.seed(7)
    ends = 0
    with make_pool(name, obs_kind, action_kind, force_layout) as pool:
        assert pool.single_observation_space == ref.single_observation_space
        assert pool.single_action_space == ref.single_action_space
        batched_obs_space = gym.vector.utils.batch_space(pool.single_observation_space, N)
        assert batched_obs_space == ref.observation_space
        assert gym.vector.utils.batch_space(pool.single_action_space, N) == ref.action_space
        obs, _ = pool.reset()
        ref_obs, _ = ref.reset(seed=3)
        assert_same_tree(obs, ref_obs, "reset obs")
        assert batched_obs_space.contains(obs)
        for t in range(40):
            action = ref.action_space.sample()
            obs, rew, term, trunc, info = pool.step(action)
            ref_obs, ref_rew, ref_term, ref_trunc, _ = ref.step(action)
            assert_same_tree(obs, ref_obs, f"step {t} obs")
            np.testing.assert_array_equal(rew, ref_rew.astype(np.float32), err_msg=f"step {t} reward")
            np.testing.assert_array_equal(term, ref_term, err_msg=f"step {t}")
            np.testing.assert_array_equal(trunc, ref_trunc, err_msg=f"step {t}")
            ends += int(term.sum())
    ref.close()
    assert ends >= 10, "the comparison must cross episode ends"


@pytest.mark.parametrize("name", list(BACKENDS))
def test_nested_final_obs_in_same_step_mode_matches_sync_vector_env(name, force_layout):
    ref = gym.vector.SyncVectorEnv([lambda: NestedEnv("tuple", "dict")] * N,
                                   autoreset_mode=AutoresetMode.SAME_STEP)
    ref.action_space.seed(1)
    finals = 0
    with make_pool(name, "tuple", "dict", force_layout, autoreset="same_step") as pool:
        pool.reset()
        ref.reset(seed=3)
        for t in range(30):
            action = ref.action_space.sample()
            obs, rew, term, trunc, info = pool.step(action)
            ref_obs, _, ref_term, _, ref_info = ref.step(action)
            assert_same_tree(obs, ref_obs, f"step {t} obs")
            for i in np.flatnonzero(ref_term):
                assert_same_values(tree_row(info["final_obs"], i), ref_info["final_obs"][i], f"step {t} final obs {i}")
                finals += 1
    ref.close()
    assert finals >= 5


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_async_batches_of_nested_observations_hold_each_envs_own_rows(backend):
    n, batch = 6, 2
    refs = [NestedEnv("dict", "tuple") for _ in range(n)]  # each env's twin, stepped by hand
    with seedpool.make(lambda: NestedEnv("dict", "tuple"), num_envs=n, batch_size=batch, backend=backend,
                       num_workers=2, seed=0) as pool:
        pool.async_reset()
        expected = {i: refs[i].reset(seed=i)[0] for i in range(n)}
        rng = np.random.default_rng(0)
        for _ in range(40):
            obs, rew, term, trunc, info = pool.recv()
            ids = info["env_id"].tolist()
            for k, i in enumerate(ids):
                assert_same_values(tree_row(obs, k), expected[i], f"env {i}")
            action = (rng.integers(0, 3, batch), {"z": rng.uniform(-1, 1, (batch, 1)).astype(np.float32)})
            for k, i in enumerate(ids):
                if term[k] or trunc[k]:  # the next step is the reset; its action is ignored
                    expected[i] = refs[i].reset()[0]
                else:
                    expected[i] = refs[i].step((action[0][k], {"z": action[1]["z"][k]}))[0]
            pool.send(action, ids)


def assert_same_values(got, want, where: str) -> None:
    """Equal nesting and equal leaf values (an env's own obs holds Python ints where a batch
    row holds numpy integers)."""
    if isinstance(want, (dict, tuple)):
        assert type(got) is type(want), where
        pairs = [(got[k], want[k], k) for k in want] if isinstance(want, dict) else list(zip(got, want, range(len(want))))
        assert len(got) == len(want), where
        for g, w, k in pairs:
            assert_same_values(g, w, f"{where}[{k!r}]")
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def test_bad_nested_actions_raise_before_reaching_an_env():
    with seedpool.make(lambda: NestedEnv("dict", "tuple"), num_envs=2, backend="process", num_workers=2) as pool:
        pool.reset()
        good = (np.array([0, 2]), {"z": np.zeros((2, 1), np.float32)})
        with pytest.raises(ValueError, match="tuple of 2"):
            pool.step({"z": np.zeros((2, 1), np.float32)})
        with pytest.raises(ValueError, match=r"\[0, 3\)"):
            pool.step((np.array([0, 3]), good[1]))
        with pytest.raises(ValueError, match="keys"):
            pool.step((good[0], {"w": np.zeros((2, 1), np.float32)}))
        with pytest.raises(ValueError, match="NaN"):
            pool.step((good[0], {"z": np.array([[0.0], [np.nan]], np.float32)}))
        *_, info = pool.step(good)
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1])


class NamedObsEnv(TextObsEnv):
    """Observations {"pos": Box, "name": Text}: the name says the env's seed."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        return {"pos": np.zeros(2, np.float32), "name": f"s{seed}"}, {}

    def step(self, action):
        _, rew, term, trunc, info = super().step(action)
        return {"pos": np.zeros(2, np.float32), "name": f"a{int(action)}"}, rew, term, trunc, info


def test_a_space_of_no_fixed_shape_is_batched_as_a_tuple_on_every_backend():
    # Text has no fixed shape: one object per env (pickled into a shared row for workers).
    for backend in ("serial", "process"):
        with seedpool.make(NamedObsEnv, num_envs=2, backend=backend, num_workers=2, seed=4) as pool:
            obs, _ = pool.reset()
            assert obs["name"] == ("s4", "s5") and obs["pos"].shape == (2, 2)
            obs, *_ = pool.step(np.array([1, 3]))
            assert obs["name"] == ("a1", "a3")
