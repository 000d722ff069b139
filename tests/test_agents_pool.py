"""Multi-agent envs through the engine: rows, flags, masks, seeds, async, bad input, faults."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

import seedpool  # noqa: E402
from seedpool.envs.agents import HeterogeneousAgentsError, IllegalActionError  # noqa: E402
from seedpool.errors import ConfigError  # noqa: E402
import agent_envs  # noqa: E402

BACKENDS = ["serial", "thread", "process"]


def _mpe_reference(seeds, actions_per_step):
    """mpe2's simple_spread stepped directly, one env per seed: rows in seedpool's order."""
    from mpe2 import simple_spread_v3

    envs = [simple_spread_v3.parallel_env() for _ in seeds]
    obs = [e.reset(seed=s)[0] for e, s in zip(envs, seeds)]
    agents = envs[0].possible_agents
    out = [np.stack([o[a] for o in obs for a in agents])]
    rewards = []
    for acts in actions_per_step:
        step_obs, step_rew = [], []
        for i, e in enumerate(envs):
            o, r, *_ = e.step({a: int(acts[i * len(agents) + k]) for k, a in enumerate(agents)})
            step_obs += [o[a] for a in agents]
            step_rew += [r[a] for a in agents]
        out.append(np.stack(step_obs))
        rewards.append(np.array(step_rew, np.float32))
    return out, rewards


@pytest.mark.parametrize("backend", BACKENDS)
def test_simple_spread_rows_are_mpe2_agents_in_env_agent_order(backend):
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 5, 9) for _ in range(10)]
    ref_obs, ref_rew = _mpe_reference([5, 6, 7], actions)
    with seedpool.make("simple_spread_v3", num_envs=3, seed=5, backend=backend) as pool:
        assert pool.num_agents == 3 and pool.num_rows == 9
        obs, info = pool.reset()
        np.testing.assert_array_equal(obs, ref_obs[0])
        np.testing.assert_array_equal(info["env_id"], np.repeat([0, 1, 2], 3))
        np.testing.assert_array_equal(info["agent_id"], np.tile([0, 1, 2], 3))
        assert info["active"].all() and info["state"].shape == (3, 54)  # one per env
        for t, acts in enumerate(actions):
            obs, rew, term, trunc, info = pool.step(acts)
            np.testing.assert_array_equal(obs, ref_obs[t + 1])
            np.testing.assert_array_equal(rew, ref_rew[t])


def test_dead_agents_are_inactive_zero_rows_and_the_env_resets_when_all_are_done():
    with seedpool.make(agent_envs.countdown, num_envs=2, backend="serial") as pool:
        obs, info = pool.reset(seed=0)
        assert info["active"].all()
        actions = np.tile([1, 2, 3], 2)
        history = []
        for _ in range(8):
            history.append(pool.step(actions))
        # Agent k of every env terminates at step 3 + 2k with its last observation and reward.
        for k in range(3):
            end = 3 + 2 * k - 1
            obs, rew, term, trunc, info = history[end]
            assert term[k] and term[3 + k]
            assert obs[k, 0] == end + 1 and rew[k] == pytest.approx(actions[k] + k / 10)
            assert info["episode_return"][k] == pytest.approx((end + 1) * (actions[k] + k / 10))
            assert info["episode_length"][k] == end + 1
            assert not info["active"][k]
            obs, rew, term, trunc, info = history[end + 1]  # afterwards: a zero row, reward 0
            if end + 1 < 7:
                assert not info["active"][k] and not term[k] and rew[k] == 0 and not obs[k].any()
        # The last agent ended at step 7: step 8 is the new episode's first observation.
        obs, rew, term, trunc, info = history[7]
        assert info["active"].all() and (info["elapsed_step"] == 0).all() and not rew.any()
        assert (obs[:, 0] == 0).all()


def test_inactive_rows_ignore_their_actions_even_out_of_range():
    with seedpool.make(agent_envs.countdown, num_envs=1, backend="serial") as pool:
        pool.reset(seed=0)
        for _ in range(3):
            pool.step(np.array([1, 1, 1]))
        actions = np.array([99, 1, 1])  # agent 0 is done: its action is ignored, not checked
        obs, rew, *_ = pool.step(actions)
        assert actions[0] == 99  # the caller's array is not changed
        assert rew[0] == 0 and rew[1] == pytest.approx(1.1)
        with pytest.raises(ConfigError, match="discrete actions must be in"):
            pool.step(np.array([0, 99, 1]))  # an active row's action is checked
        pool.step(np.array([0, 1, 1]))  # and the pool goes on


def test_wrong_number_of_action_rows_is_a_clear_error_and_the_pool_goes_on():
    with seedpool.make("simple_spread_v3", num_envs=2, backend="process") as pool:
        pool.reset(seed=0)
        with pytest.raises(ConfigError, match=r"expected actions for 6 rows \(2 envs x 3 agents"):
            pool.step(np.zeros(5, np.int64))
        obs, *_ = pool.step(np.zeros(6, np.int64))
        assert obs.shape == (6, 18)


def test_heterogeneous_agents_need_groups_and_rows_are_padded_per_group():
    with pytest.raises(HeterogeneousAgentsError, match="groups='prefix'"):
        seedpool.make(agent_envs.two_roles, num_envs=2)
    with pytest.raises(HeterogeneousAgentsError):
        seedpool.make("simple_tag_v3", num_envs=2)
    with seedpool.make(agent_envs.two_roles, num_envs=2, groups="prefix", backend="serial") as pool:
        assert pool.groups == {"scout": [0], "worker": [1, 2]}
        assert pool.single_observation_space.shape == (3,)
        assert pool.observation_space_of("scout").shape == (2,)
        obs, info = pool.reset(seed=0)
        np.testing.assert_array_equal(info["group"], [0, 1, 1, 0, 1, 1])
        obs, *_ = pool.step(np.full(6, 2))
        np.testing.assert_array_equal(obs[0], [1, 0, 0])  # the scout's [t, k] and a zero pad
        np.testing.assert_array_equal(obs[1], [1, 1, 2])
    with seedpool.make("simple_tag_v3", num_envs=2, groups="prefix") as pool:
        assert pool.groups == {"adversary": [0, 1, 2], "agent": [3]}
        obs, info = pool.reset(seed=0)
        assert obs.shape == (8, 16) and not obs[3, 14:].any()


def test_connect_four_turns_masks_and_an_illegal_move():
    with seedpool.make("connect_four_v3", num_envs=2, backend="process") as pool:
        obs, info = pool.reset(seed=0)
        np.testing.assert_array_equal(info["active"], [True, False, True, False])
        assert info["action_mask"][0].all() and not info["action_mask"][1].any()
        # In env 0 both players drop into column 0 three times each: the column fills.
        for _ in range(3):
            obs, rew, term, trunc, info = pool.step(np.array([0, 0, 3, 0]))
            obs, rew, term, trunc, info = pool.step(np.array([0, 0, 0, 4]))
        assert not info["action_mask"][0, 0] and info["active"][0]
        with pytest.raises(IllegalActionError, match=r"action 0 of row 0 \(env 0, agent 'player_0'\)"):
            pool.step(np.array([0, 0, 3, 0]))
        # Four in a row for player 0 in env 1 (column 3, player 1 in column 4): it wins.
        obs, rew, term, trunc, info = pool.step(np.array([2, 0, 3, 0]))
        assert term[2] and term[3] and rew[2] == 1 and rew[3] == -1
        assert info["episode_return"][3] == -1 and info["episode_length"][2] == 4


def test_async_recv_returns_whole_envs_and_send_takes_row_env_ids():
    with seedpool.make("simple_spread_v3", num_envs=6, batch_size=2, backend="process", seed=0) as pool:
        pool.async_reset()
        seen = set()
        for _ in range(30):
            obs, rew, term, trunc, info = pool.recv()
            assert obs.shape == (6, 18)
            envs = info["env_id"].reshape(2, 3)
            assert (envs == envs[:, :1]).all()
            np.testing.assert_array_equal(info["agent_id"], np.tile([0, 1, 2], 2))
            seen.update(envs[:, 0].tolist())
            pool.send(np.zeros(6, np.int64), info["env_id"])
        assert seen == set(range(6))


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_episode_ends_in_both_autoreset_modes(autoreset):
    with seedpool.make("simple_spread_v3", num_envs=2, autoreset=autoreset, backend="serial") as pool:
        pool.reset(seed=3)
        for _ in range(24):
            obs, rew, term, trunc, info = pool.step(np.zeros(6, np.int64))
        assert not trunc.any()
        obs, rew, term, trunc, info = pool.step(np.zeros(6, np.int64))
        assert trunc.all() and (info["episode_length"] == 25).all()
        if autoreset == "same_step":
            assert info["active"].all() and info["final_obs"].shape == (6, 18)
            assert not np.array_equal(info["final_obs"], obs)
        else:
            assert not info["active"].any()
            obs, rew, term, trunc, info = pool.step(np.zeros(6, np.int64))
            assert info["active"].all() and not rew.any() and (info["episode_return"] == 0).all()


def test_the_engine_time_limit_truncates_every_live_agent():
    with seedpool.make(agent_envs.countdown, num_envs=1, max_episode_steps=4, backend="serial") as pool:
        pool.reset(seed=0)
        for _ in range(3):
            obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))
        assert term[0] and not trunc.any()
        obs, rew, term, trunc, info = pool.step(np.ones(3, np.int64))
        np.testing.assert_array_equal(trunc, [False, True, True])
        assert not info["active"].any()


def test_seeds_reach_every_env_and_repeat_runs():
    def run():
        with seedpool.make("simple_spread_v3", num_envs=3, seed=11, backend="process") as pool:
            obs, _ = pool.reset()
            return obs
    a, b = run(), run()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:3], a[3:6])  # env 1 has its own seed


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_a_raising_env_is_named_with_its_traceback_and_the_pool_goes_on(backend):
    from seedpool.envs.errors import EnvStepError

    with seedpool.make(agent_envs.exploding, num_envs=2, backend=backend) as pool:
        pool.reset(seed=0)
        pool.step(np.zeros(4, np.int64))
        with pytest.raises(EnvStepError, match="countdown exploded") as err:
            pool.step(np.zeros(4, np.int64))
        assert err.value.env_id in (0, 1)
        obs, *_ = pool.reset(seed=0)
        assert obs.shape == (4, 3)


def test_close_leaves_no_worker_processes():
    import psutil

    pool = seedpool.make("simple_spread_v3", num_envs=4, backend="process")
    pool.reset(seed=0)
    pids = pool.worker_pids
    assert pids
    pool.close()
    assert pool.closed
    gone, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
    assert not alive


def test_multiagent_options_are_refused_for_single_agent_tasks():
    with pytest.raises(ConfigError, match="multi-agent"):
        seedpool.make("CartPole-v1", num_envs=2, groups="prefix")


def test_module_function_strings_and_factories_name_multiagent_tasks():
    with seedpool.make("agent_envs:countdown", num_envs=2, backend="serial") as pool:
        assert pool.num_agents == 3
    with seedpool.make(agent_envs.Countdown, num_envs=1, backend="serial") as pool:
        assert pool.possible_agents == ["agent_0", "agent_1", "agent_2"]


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_native_simple_spread_pool_gives_the_python_paths_rows(autoreset):
    rng = np.random.default_rng(1)
    actions = [rng.integers(0, 5, 12) for _ in range(60)]
    runs = []
    for native in (True, False):
        with seedpool.make("simple_spread_v3", num_envs=4, seed=2, native=native, autoreset=autoreset,
                           backend="auto" if native else "serial") as pool:
            assert type(pool).__name__ == ("NativeAgentPool" if native else "AgentPool")
            steps = [pool.reset()]
            steps += [pool.step(a) for a in actions]
            runs.append(steps)
    for a, b in zip(*runs):
        for x, y in zip(a[:-1], b[:-1]):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
        for key in ("active", "episode_return", "episode_length", "env_id", "agent_id", "state", "elapsed_step"):
            np.testing.assert_allclose(a[-1][key], b[-1][key], rtol=0, atol=1e-5, err_msg=key)
        if "final_obs" in b[-1]:
            np.testing.assert_allclose(a[-1]["final_obs"], b[-1]["final_obs"], atol=1e-6)


def test_native_pool_is_reproducible_without_a_reset_and_async_hands_out_batches():
    def run():
        with seedpool.make("simple_spread_v3", num_envs=4, seed=9) as pool:
            return pool.step(np.zeros(12, np.int64))[0]
    np.testing.assert_array_equal(run(), run())
    with seedpool.make("simple_spread_v3", num_envs=4, batch_size=2, seed=0) as pool:
        pool.async_reset()
        for _ in range(10):
            obs, rew, term, trunc, info = pool.recv()
            assert obs.shape == (6, 18)
            pool.send(np.ones(6, np.int64), info["env_id"])
        with pytest.raises(ConfigError, match="rows"):
            pool.send(np.ones(5, np.int64), [0, 1])


def test_a_killed_worker_is_reported_and_the_restart_policy_truncates_its_envs_agents():
    import os
    import signal

    from seedpool.envs.errors import WorkerDiedError

    with seedpool.make("simple_spread_v3", num_envs=4, native=False, backend="process", num_workers=2,
                       step_timeout=30.0) as pool:
        pool.reset(seed=0)
        os.kill(pool.worker_pids[0], signal.SIGKILL)
        with pytest.raises(WorkerDiedError):
            pool.step(np.zeros(12, np.int64))
    with seedpool.make("simple_spread_v3", num_envs=4, native=False, backend="process", num_workers=2,
                       on_worker_death="restart") as pool:
        pool.reset(seed=0)
        pool.step(np.zeros(12, np.int64))
        os.kill(pool.worker_pids[0], signal.SIGKILL)
        obs, rew, term, trunc, info = pool.step(np.zeros(12, np.int64))
        # Worker 0 held envs 0 and 1: each of their agents' episodes ends truncated.
        np.testing.assert_array_equal(trunc, np.repeat([True, True, False, False], 3))
        assert info["restarted"][:6].all() and not info["active"][:6].any()
        obs, rew, term, trunc, info = pool.step(np.zeros(12, np.int64))
        assert info["active"].all()


def test_the_agents_own_info_dicts_come_per_row_where_any_holds_something():
    with seedpool.make(agent_envs.chatty, num_envs=2, backend="process") as pool:
        obs, info = pool.reset(seed=0)
        assert [d.get("t") for d in info["agent_info"]] == [None, 0, None, None, 0, None]
        obs, rew, term, trunc, info = pool.step(np.ones(6, np.int64))
        assert info["agent_info"][4] == {"t": 1}
    with seedpool.make(agent_envs.countdown, num_envs=2, backend="serial") as pool:
        assert "agent_info" not in pool.reset(seed=0)[1]  # empty infos: nothing travels


def test_large_states_are_left_out_unless_asked_for():
    with seedpool.make("pistonball_v6", num_envs=1, backend="serial") as pool:
        assert pool.state_space is None and "state" not in pool.reset(seed=0)[1]
    with seedpool.make("pistonball_v6", num_envs=1, backend="serial", state=True) as pool:
        assert pool.reset(seed=0)[1]["state"].shape == (1, *pool.state_space.shape)
    with seedpool.make("simple_spread_v3", num_envs=2, state=False) as pool:
        assert pool.state_space is None and "state" not in pool.reset(seed=0)[1]
    with pytest.raises(ConfigError, match="no state_space"):
        seedpool.make(agent_envs.countdown, num_envs=1, state=True)
