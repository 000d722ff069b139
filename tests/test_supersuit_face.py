"""`seedpool.compat.supersuit`: SuperSuit scripts with `import seedpool.compat.supersuit as ss`.

Rows, autoreset and terminal observations step for step as SuperSuit's own vector envs
(SuperSuit itself is the reference where it is installed), agents that leave before their env
ends without `black_death_v3`, the SB3 base class under an SB3-style pistonball script, the
user's env left untouched, and the errors SuperSuit raises.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from pettingzoo import ParallelEnv  # noqa: E402

import seedpool.compat.supersuit as ss  # noqa: E402


class Leavers(ParallelEnv):
    """Agent k < n-1 leaves (terminated) at step k + 2; the last agent stays until `horizon`,
    where the env ends truncated. Observation [k + 1, t], reward the action taken. Counts its
    own resets and steps, so a test can tell whether it was stepped."""

    metadata = {"name": "leavers_v0"}

    def __init__(self, n: int = 3, horizon: int = 6):
        self.possible_agents = [f"agent_{k}" for k in range(n)]
        self.horizon = horizon
        self.resets = self.steps = 0
        self._obs = spaces.Box(-100, 100, (2,), np.float32)
        self._act = spaces.Discrete(3)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _o(self, agent):
        return np.array([self.possible_agents.index(agent) + 1, self.t], np.float32)

    def reset(self, seed=None, options=None):
        self.resets += 1
        self.agents, self.t = list(self.possible_agents), 0
        return {a: self._o(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.steps += 1
        self.t += 1
        last = len(self.possible_agents) - 1
        k = self.possible_agents.index
        term = {a: k(a) < last and self.t == k(a) + 2 for a in self.agents}
        trunc = {a: self.t >= self.horizon and not term[a] for a in self.agents}
        obs = {a: self._o(a) for a in self.agents}
        rew = {a: float(actions[a]) for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, {a: {} for a in obs}


@pytest.mark.parametrize("num_cpus", [0, 2])
def test_agents_that_leave_early_are_zero_rows_until_their_env_ends_without_black_death(num_cpus):
    env = Leavers()
    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=num_cpus)
    assert venv.num_envs == 6 and venv.observation_space == env.observation_space("agent_0")
    obs, infos = venv.reset(seed=0)
    np.testing.assert_array_equal(obs, [[1, 0], [2, 0], [3, 0]] * 2)
    assert infos == [{}] * 6
    actions = np.full(6, 2)
    for t in range(1, 7):
        obs, rew, term, trunc, infos = venv.step(actions)
        alive = [k for k in range(3) if (k < 2 and t <= k + 2) or (k == 2 and t <= 6)]
        leaving = {0: 2, 1: 3}
        for e in range(2):
            for k in range(3):
                r, info = e * 3 + k, infos[e * 3 + k]
                assert rew[r] == (2.0 if k in alive else 0.0), (t, r)
                if t == 6:  # the env ends truncated: every row ends, the next episode starts
                    assert trunc[r] and not term[r], r
                    last = [3, 6] if k == 2 else [0, 0]  # rows that left earlier end with zeros
                    np.testing.assert_array_equal(info["terminal_observation"], last)
                    np.testing.assert_array_equal(obs[r], [k + 1, 0])
                elif leaving.get(k) == t:  # the agent leaves: terminated, its last observation kept
                    assert term[r] and not trunc[r]
                    np.testing.assert_array_equal(info["terminal_observation"], [k + 1, t])
                    np.testing.assert_array_equal(obs[r], [0, 0])
                else:
                    assert not (term[r] or trunc[r]) and "terminal_observation" not in info
                    np.testing.assert_array_equal(obs[r], [k + 1, t] if k in alive else [0, 0])
    obs, rew, *_ = venv.step(actions)  # the new episode runs on every row
    np.testing.assert_array_equal(obs, [[1, 1], [2, 1], [3, 1]] * 2)
    venv.close()
    assert env.resets == 0 and env.steps == 0, "the env handed in was stepped: the vector must step copies"


def test_knights_archers_zombies_runs_with_agents_dying_and_without_black_death():
    kaz = pytest.importorskip("pettingzoo.butterfly.knights_archers_zombies_v11")
    env = kaz.parallel_env(spawn_delay=2, line_death=True, max_cycles=200)
    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 2)
    venv.reset(seed=1)
    rng = np.random.default_rng(0)
    left_early = envs_ended = 0
    for _ in range(300):
        obs, rew, term, trunc, infos = venv.step(rng.integers(0, 6, venv.num_envs))
        for e in range(2):
            rows = slice(4 * e, 4 * e + 4)
            done = term[rows] | trunc[rows]
            if done.all():
                envs_ended += 1
            elif done.any():
                left_early += int(done.sum())
                for r in np.flatnonzero(done) + 4 * e:
                    assert not obs[r].any() and infos[r]["terminal_observation"].any()
    venv.close()
    assert left_early > 0 and envs_ended > 0, "the test should see agents die and whole envs end"


def _supersuit():
    """SuperSuit itself, the reference (also where a routing has put the face under its name)."""
    mod = pytest.importorskip("supersuit")
    if mod is ss:
        pytest.skip("the name supersuit is routed to the face here")
    return mod


@pytest.mark.parametrize("num_cpus", [0, 2])
def test_rows_autoreset_and_terminal_observations_step_for_step_as_supersuit(num_cpus):
    real = _supersuit()
    from mpe2 import simple_spread_v3

    make = lambda lib, n: lib.concat_vec_envs_v1(  # noqa: E731
        lib.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env(max_cycles=10)), 2, num_cpus=n)
    ours, theirs = make(ss, num_cpus), make(real, 0)
    obs, _ = ours.reset(seed=7)
    ref, _ = theirs.reset(seed=7)
    np.testing.assert_array_equal(obs, ref)
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(25):
        actions = rng.integers(0, 5, ours.num_envs)
        got, want = ours.step(actions), theirs.step(list(actions))
        for mine, its in zip(got[:4], want[:4]):
            np.testing.assert_array_equal(mine, its)
        assert got[1].dtype == np.float32 and len(got[4]) == ours.num_envs
        for info, ref_info in zip(got[4], want[4]):
            assert info.keys() == ref_info.keys()
            if "terminal_observation" in info:
                ends += 1
                np.testing.assert_array_equal(info["terminal_observation"], ref_info["terminal_observation"])
    ours.close()
    theirs.close()
    assert ends == 2 * 6, "two episodes of 10 steps end on every row within 25 steps"


def test_an_sb3_pistonball_script_with_supersuits_wrappers_steps_on_the_engine():
    """The shape of PettingZoo's SB3 pistonball tutorial, with the face as `ss`."""
    pytest.importorskip("supersuit")
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    from pettingzoo.butterfly import pistonball_v6

    env = pistonball_v6.parallel_env(n_pistons=4, max_cycles=8, continuous=True)
    env = ss.color_reduction_v0(env, mode="B")
    env = ss.resize_v1(env, x_size=84, y_size=84)
    env = ss.frame_stack_v1(env, 3)
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    venv = ss.concat_vec_envs_v1(env, 2, num_cpus=0, base_class="stable_baselines3")
    assert isinstance(venv, vec_env.VecEnv) and venv.num_envs == 8
    assert venv.observation_space.shape == (84, 84, 3) and venv.action_space.shape == (1,)
    venv = vec_env.VecMonitor(venv)
    venv.seed(0)
    obs = venv.reset()
    assert obs.shape == (8, 84, 84, 3) and obs.dtype == np.uint8
    lengths, episodes = np.zeros(8, int), 0
    for _ in range(10):
        obs, rew, dones, infos = venv.step(np.stack([venv.action_space.sample() for _ in range(8)]))
        assert obs.shape == (8, 84, 84, 3) and rew.shape == (8,) and dones.dtype == bool and len(infos) == 8
        assert all("TimeLimit.truncated" in info for info in infos)
        lengths += 1
        for r in np.flatnonzero(dones):  # VecMonitor's record at each row's end (max_cycles=8 at most)
            episodes += 1
            assert infos[r]["episode"]["l"] == lengths[r] <= 8
            assert infos[r]["terminal_observation"].shape == (84, 84, 3)
            lengths[r] = 0
    assert episodes >= 8, "every row ends within max_cycles"
    assert venv.env_is_wrapped(gym.Wrapper) == [False] * 8
    venv.close()


def test_sb3_base_class_seeds_env_i_with_seed_plus_i_and_trains():
    pytest.importorskip("stable_baselines3")
    from mpe2 import simple_spread_v3
    from stable_baselines3 import PPO

    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env()), 2,
                                 base_class="stable_baselines3")
    assert venv.seed(11) == [11, 11, 11, 12, 12, 12]
    first = venv.reset()
    venv.seed(11)
    np.testing.assert_array_equal(venv.reset(), first)
    ref = simple_spread_v3.parallel_env()
    ref_obs, _ = ref.reset(seed=12)
    np.testing.assert_array_equal(first[3:], np.stack([ref_obs[a] for a in ref.possible_agents]))
    assert venv.get_attr("possible_agents", indices=[0, 5]) == [ref.possible_agents] * 2
    PPO("MlpPolicy", venv, n_steps=16, batch_size=48, n_epochs=1, seed=0, device="cpu").learn(96)
    venv.close()


def test_num_cpus_picks_the_engines_backend_and_workers():
    from mpe2 import simple_spread_v3

    vec = ss.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env())
    for num_cpus, backend, workers in ((0, "serial", None), (1, "serial", None), (2, "process", 2), (8, "process", 3)):
        venv = ss.concat_vec_envs_v1(vec, 3, num_cpus=num_cpus)
        pool = venv.rows.pool
        assert pool.backend == backend and (workers is None or pool.num_workers == workers), (num_cpus, pool)
        venv.close()


def test_concat_of_a_gymnasium_env_gives_one_row_per_env_with_terminal_observations():
    env = gym.make("CartPole-v1")
    venv = ss.concat_vec_envs_v1(env, 3)
    obs, infos = venv.reset(seed=4)
    ref = [gym.make("CartPole-v1").reset(seed=4 + i)[0] for i in range(3)]
    np.testing.assert_allclose(obs, ref)
    ended = 0
    for _ in range(60):
        obs, rew, term, trunc, infos = venv.step(np.ones(3, np.int64))
        for i in np.flatnonzero(term | trunc):
            ended += 1
            assert infos[i]["terminal_observation"].shape == (4,)
    assert ended >= 3
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [True] * 3
    venv.close()


def test_supersuits_gymnasium_and_sb3_constructors_build_seedpools_vector_envs_of_copies():
    env = gym.make("CartPole-v1")
    venv = ss.gym_vec_env_v0(env, 2)
    assert isinstance(venv, gym.vector.VectorEnv) and venv.num_envs == 2
    obs, _ = venv.reset(seed=1)
    np.testing.assert_allclose(obs[1], gym.make("CartPole-v1").reset(seed=2)[0])
    venv.step(np.zeros(2, np.int64))
    venv.close()
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    venv = ss.stable_baselines3_vec_env_v0(env, 2, multiprocessing=True)
    assert isinstance(venv, vec_env.VecEnv) and venv.pool.backend == "process"
    assert venv.reset().shape == (2, 4)
    venv.close()
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)  # the env handed in was never reset: the vectors stepped copies


def test_supersuits_errors_and_the_extra_named_where_supersuit_is_missing(monkeypatch):
    from mpe2 import simple_spread_v3, simple_world_comm_v3

    with pytest.raises(AssertionError, match="spaces not consistent"):
        ss.pettingzoo_env_to_vec_env_v1(simple_world_comm_v3.parallel_env())
    with pytest.raises(AssertionError, match="ParallelEnv"):
        ss.pettingzoo_env_to_vec_env_v1(simple_spread_v3.env())
    with pytest.raises(TypeError, match="pettingzoo_env_to_vec_env_v1 first"):
        ss.concat_vec_envs_v1(simple_spread_v3.parallel_env(), 2)
    with pytest.raises(ValueError, match="base_class"):
        ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env()), 2, base_class="x")
    with pytest.raises(ss.DeprecatedWrapper, match="use concat_vec_envs_v1"):
        ss.concat_vec_envs_v0  # noqa: B018
    with pytest.raises(AttributeError):
        ss.no_such_wrapper_v0  # noqa: B018
    monkeypatch.setitem(sys.modules, "supersuit.generic_wrappers", None)  # as if SuperSuit were not installed
    with pytest.raises(ImportError, match=r"seedpool\[multiagent\]"):
        ss.resize_v1(simple_spread_v3.parallel_env(), 8, 8)


def test_each_rows_info_holds_its_agents_own_info_dict():
    import agent_envs

    import seedpool.compat.supersuit as ss

    envs = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(agent_envs.chatty()), 2, base_class="gymnasium")
    try:
        _, infos = envs.reset(seed=0)
        assert infos[1] == {"t": 0} and infos[0] == {}
        *_, infos = envs.step(np.ones(6, np.int64))
        assert infos[4]["t"] == 1
    finally:
        envs.close()
