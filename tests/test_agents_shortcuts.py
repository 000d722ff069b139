"""The PettingZoo adapter's shortcuts (seedpool/envs/agents/shortcuts.py): the same rows, flags,
rewards and states as stepping the env the factory made, and taken only where they hold."""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from seedpool.envs.agents import adapter as adapter_mod  # noqa: E402
from seedpool.envs.agents.adapter import ParallelAgentsEnv  # noqa: E402
from seedpool.envs.agents.make import layout_of  # noqa: E402
import agent_envs  # noqa: E402


def _mpe(name: str, **kwargs):
    import importlib

    return functools.partial(importlib.import_module(f"mpe2.{name}").parallel_env, **kwargs)


def _pair(env_fn, monkeypatch):
    """The adapter with its shortcuts, and one built with them switched off."""
    probe = env_fn()
    layout = layout_of(probe, "prefix")
    probe.close()
    fast = ParallelAgentsEnv(env_fn, layout)
    with monkeypatch.context() as m:
        m.setattr(adapter_mod, "raw_stepper", lambda env, layout: None)
        m.setattr(adapter_mod, "state_from_obs", lambda env, order: None)
        plain = ParallelAgentsEnv(env_fn, layout)
    return fast, plain


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("name, kwargs, raw", [
    ("simple_spread_v3", {}, True),
    ("simple_adversary_v3", {}, True),  # groups with different observation sizes: padded rows
    # The leader's actions have more choices than the others': padded action rows, whose
    # out-of-range actions only the env's own wrapper catches.
    ("simple_world_comm_v3", {}, False),
    ("simple_spread_v3", {"continuous_actions": True}, False),  # ClipOutOfBounds: stepped as made
])
def test_shortcut_rows_equal_the_factory_envs_over_episodes(name, kwargs, raw, monkeypatch):
    fast, plain = _pair(_mpe(name, max_cycles=7, **kwargs), monkeypatch)
    assert fast._state_of is not None and plain._state_of is None
    assert (fast._raw is not None) == raw and plain._raw is None
    rng = np.random.default_rng(1)
    for episode in range(3):
        _same(fast.reset(seed=episode)[0], plain.reset(seed=episode)[0])
        np.testing.assert_array_equal(fast.rows.arrays["state"], fast.env.state())
        for t in range(7):
            choices = fast.layout.choices()
            action = fast.action_space.sample() if choices is None else rng.integers(0, choices)
            out_f, out_p = fast.step(action), plain.step(action)
            _same(out_f[0], out_p[0])
            assert out_f[1:4] == out_p[1:4]
            np.testing.assert_array_equal(fast.rows.arrays["state"], fast.env.state())
        assert out_f[3] and not fast._agents()  # mpe2's time limit ends every agent truncated
    fast.close()
    plain.close()


def test_other_envs_and_wrappers_take_no_shortcut():
    from pettingzoo.utils import conversions
    from pettingzoo.utils.wrappers import BaseWrapper, OrderEnforcingWrapper

    class Renamed(BaseWrapper):  # any other wrapper may change what the env sees or gives
        pass

    def wrapped():
        raw = _mpe("simple_spread_v3")().unwrapped
        return conversions.aec_to_parallel_wrapper(OrderEnforcingWrapper(Renamed(raw)))

    for env_fn in (wrapped, agent_envs.countdown):
        probe = env_fn()
        env = ParallelAgentsEnv(env_fn, layout_of(probe, None))
        assert env._raw is None and env._state_of is None
        env.close()


def test_state_from_a_step_with_missing_agents_asks_the_env():
    from seedpool.envs.agents.shortcuts import state_from_obs

    env = _mpe("simple_spread_v3")()
    obs, _ = env.reset(seed=3)
    state_of = state_from_obs(env, env.possible_agents)
    np.testing.assert_array_equal(state_of(obs), env.state())
    obs.pop(env.possible_agents[1])
    assert state_of(obs) is None


def test_out_of_range_actions_are_still_refused_where_the_wrappers_are_skipped():
    import seedpool
    from seedpool.errors import ConfigError

    with seedpool.make("simple_spread_v3", num_envs=2, native=False, backend="serial") as pool:
        pool.reset(seed=0)
        with pytest.raises(ConfigError, match="discrete actions must be in"):
            pool.step(np.array([0, 1, 2, 3, 4, 5]))
        with pytest.raises(ConfigError, match="discrete actions must be in"):
            pool.step(np.array([0, 1, 2, 3, 4, -1]))
        pool.step(np.array([0, 1, 2, 3, 4, 4]))  # and the pool goes on
