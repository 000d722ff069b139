"""Native MPE families (seedpool/envs/families/mpe/): identity with mpe2's parallel envs."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

needs_mpe2 = pytest.mark.skipif(importlib.util.find_spec("mpe2") is None,
                                reason="mpe2 is not installed (pip install 'seedpool[multiagent]')")

TASKS = ["simple_spread_v3", "simple_tag_v3"]


def _mpe2(task, **options):
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(f"mpe2.{task}").parallel_env(**options)


def _family(task, num_envs, **options):
    from seedpool.envs.families.mpe import NATIVE

    return NATIVE[task](num_envs, **options)


def _actions(rng, family, n):
    """Random actions for n envs; continuous ones reach past the box, which mpe2 clips."""
    if family.continuous_actions:
        return rng.uniform(-0.2, 1.2, (n, family.num_agents, 5)).astype(np.float32)
    return rng.integers(0, 5, (n, family.num_agents))


def _assert_obs(native, reference, agents):
    """One env's padded native observations [A, D] against mpe2's dict (padding zero)."""
    for j, a in enumerate(agents):
        d = reference[a].size
        np.testing.assert_array_equal(native[j, :d], reference[a], err_msg=a)
        assert not native[j, d:].any(), a


def _play(task, seeds, steps, actions=_actions, **options):
    """Step a family and one mpe2 env per seed in lockstep with the same random actions, an
    env reset as its episode ends (all agents terminated or truncated); compare every step.
    `actions(rng, family, n)` draws them. Returns (episodes ended, of them by termination)."""
    family = _family(task, len(seeds), **options)
    envs = [_mpe2(task, **options) for _ in seeds]
    ids = np.arange(len(seeds))
    for i, s in enumerate(seeds):
        family.seed(i, s)
    obs = family.reset(ids)
    for i, (env, s) in enumerate(zip(envs, seeds)):
        _assert_obs(obs[i], env.reset(seed=s)[0], family.possible_agents)
    np.testing.assert_array_equal(family.state(ids), np.stack([e.state() for e in envs]))
    rng = np.random.default_rng(seeds[0])
    elapsed = np.zeros(len(seeds), np.int64)
    episodes = terminations = 0
    for _ in range(steps):
        act = actions(rng, family, len(seeds))
        obs, reward, terminated = family.step(ids, act)
        elapsed += 1
        for i, env in enumerate(envs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # mpe2's clipping warns
                o, r, te, tr, _ = env.step({a: act[i, j] for j, a in enumerate(family.possible_agents)})
            _assert_obs(obs[i], o, family.possible_agents)
            for j, a in enumerate(family.possible_agents):
                assert reward[i, j] == np.float32(r[a]), (i, a)
                assert terminated[i, j] == te[a], (i, a)
                assert tr[a] == (elapsed[i] >= family.max_cycles), (i, a)
        np.testing.assert_array_equal(family.state(ids), np.stack([e.state() for e in envs]))
        ended = np.array([not e.agents for e in envs])
        if ended.any():
            episodes += int(ended.sum())
            terminations += int(terminated[ended, 0].sum())
            done = ids[ended]
            obs = family.reset(done)
            for k, i in enumerate(done):
                _assert_obs(obs[k], envs[i].reset()[0], family.possible_agents)
            elapsed[done] = 0
    return episodes, terminations


@needs_mpe2
@pytest.mark.parametrize("continuous_actions", [False, True])
@pytest.mark.parametrize("task", TASKS)
def test_episodes_match_mpe2(task, continuous_actions):
    """Defaults: three episodes of 25 steps per seed, the resets between them included."""
    episodes, _ = _play(task, [0, 1, 7, 42, 1234], 75, continuous_actions=continuous_actions)
    assert episodes == 15


@needs_mpe2
@pytest.mark.parametrize("task, options", [
    ("simple_spread_v3", dict(N=5, local_ratio=0.2, max_cycles=30)),
    ("simple_tag_v3", dict(num_good=2, num_adversaries=4, num_obstacles=3, max_cycles=30)),
    ("simple_tag_v3", dict(num_good=1, num_adversaries=1, num_obstacles=0, max_cycles=30)),
])
def test_options_match_mpe2(task, options):
    episodes, _ = _play(task, [3, 5, 9], 60, **options)
    assert episodes == 6


@needs_mpe2
def test_far_off_screen_penalty_matches_mpe2():
    """Everyone always moving right: the good agent leaves the screen far enough for the
    penalty's cap (exp(2x - 2) > 10, x > 2.15) and collisions pile up on the right."""
    def right(rng, family, n):
        return np.full((n, family.num_agents), 2)

    family = _family("simple_tag_v3", 1, max_cycles=60)
    family.seed(0, 4)
    family.reset(np.arange(1))
    for _ in range(60):
        obs, _, _ = family.step(np.arange(1), right(None, family, 1))
    assert obs[0, -1, 2] > 2.5  # the good agent's x: past the cap
    episodes, _ = _play("simple_tag_v3", [4, 8], 60, actions=right, max_cycles=60)
    assert episodes == 2


@needs_mpe2
def test_terminate_on_success_matches_mpe2():
    """Tag ends when every good agent is touched; with a small arena crowded by adversaries
    random play catches it within the episode often enough to compare the terminations."""
    options = dict(num_adversaries=6, num_obstacles=0, max_cycles=40, terminate_on_success=True)
    episodes, terminations = _play("simple_tag_v3", list(range(8)), 120, **options)
    assert terminations > 0 and episodes > terminations


@needs_mpe2
@pytest.mark.parametrize("continuous_actions", [False, True])
@pytest.mark.parametrize("task", TASKS)
def test_spaces_match_mpe2(task, continuous_actions):
    family = _family(task, 2, continuous_actions=continuous_actions)
    env = _mpe2(task, continuous_actions=continuous_actions)
    assert family.possible_agents == env.possible_agents
    for a in env.possible_agents:
        assert family.observation_spaces[a] == env.observation_space(a)
        assert family.action_spaces[a] == env.action_space(a)
    assert family.state_space == env.state_space
    assert family.max_cycles == 25
    assert family.metadata["name"] == env.metadata["name"] == task


@needs_mpe2
@pytest.mark.parametrize("task", TASKS)
def test_generators_follow_mpe2s(task):
    """The kernels draw from copies of the envs' generators; `rng(i)` catches up with them."""
    family = _family(task, 3)
    envs = [_mpe2(task) for _ in range(3)]
    for i, env in enumerate(envs):
        family.seed(i, 100 + i)
        env.reset(seed=100 + i)
    family.reset(np.arange(3))
    family.reset(np.array([0, 2]))
    envs[0].reset()
    envs[2].reset()
    for i, env in enumerate(envs):
        assert family.rng(i).bit_generator.state == env.unwrapped.np_random.bit_generator.state, i


@pytest.mark.parametrize("task", TASKS)
def test_reset_of_some_envs_leaves_the_others(task):
    """Resetting envs 1 and 3 mid-episode changes neither the other envs' states nor their
    next steps (compared with a twin family stepped with the same actions, never reset)."""
    a, b = _family(task, 5), _family(task, 5)
    ids = np.arange(5)
    for f in (a, b):
        for i in ids:
            f.seed(i, int(i))
        f.reset(ids)
    rng = np.random.default_rng(0)
    for _ in range(6):
        actions = _actions(rng, a, 5)
        a.step(ids, actions)
        b.step(ids, actions)
    before = a.state(ids)
    reset = a.reset(np.array([1, 3]))
    kept = np.array([0, 2, 4])
    np.testing.assert_array_equal(a.state(kept), before[kept])
    assert not np.array_equal(a.state(np.array([1, 3])), before[[1, 3]])
    np.testing.assert_array_equal(a.observe(np.array([1, 3])), reset)
    for _ in range(5):
        actions = _actions(rng, a, 5)
        oa, ra, ta = a.step(ids, actions)
        ob, rb, tb = b.step(ids, actions)
        np.testing.assert_array_equal(oa[kept], ob[kept])
        np.testing.assert_array_equal(ra[kept], rb[kept])
        np.testing.assert_array_equal(ta[kept], tb[kept])


@pytest.mark.parametrize("option", [dict(curriculum=True), dict(num_agent_neighbors=2),
                                    dict(num_landmark_neighbors=1), dict(render_mode="rgb_array")])
@pytest.mark.parametrize("task", TASKS)
def test_unimplemented_options_are_refused(task, option):
    with pytest.raises(NotImplementedError, match=next(iter(option))):
        _family(task, 1, **option)
