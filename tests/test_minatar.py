"""MinAtar family: ids, spaces, agreement with minatar's own gym env, determinism, install hint."""
import importlib.util
import sys

import gymnasium as gym
import numpy as np
import pytest

import seedpool
from seedpool.envs import registry
from seedpool.envs.families.minatar import make_minatar, minatar_ids

needs_minatar = pytest.mark.skipif(importlib.util.find_spec("minatar") is None,
                                   reason="minatar is not installed (pip install 'seedpool[minatar]')")

# id -> (channels, actions) as minatar 1.0.15 defines the games (v1: minimal action sets).
GAMES = {
    "MinAtar/Asterix-v1": (4, 5),
    "MinAtar/Breakout-v1": (4, 3),
    "MinAtar/Freeway-v1": (7, 3),
    "MinAtar/Seaquest-v1": (10, 6),
    "MinAtar/SpaceInvaders-v1": (6, 4),
}


def test_ids_are_registered_in_both_versions():
    ids = minatar_ids()
    assert set(GAMES) <= set(ids) and len(ids) == 10
    assert all(registry.find(i).name == "minatar" for i in ids)
    assert "MinAtar/Breakout-v0" in registry.registered_ids()
    with pytest.raises(ValueError, match="unknown MinAtar task id"):
        make_minatar("MinAtar/Pong-v1")


@needs_minatar
@pytest.mark.parametrize("task_id", sorted(GAMES))
def test_spaces_and_observations_are_channels_first_bool(task_id):
    channels, num_actions = GAMES[task_id]
    env = make_minatar(task_id)
    space = gym.spaces.Box(0, 1, (channels, 10, 10), np.bool_)
    assert env.observation_space == space and env.action_space == gym.spaces.Discrete(num_actions)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        assert obs.dtype == np.bool_ and obs.shape == space.shape and obs.flags.c_contiguous
        assert space.contains(obs)
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert isinstance(reward, float) and isinstance(terminated, bool) and truncated is False
    assert make_minatar(task_id.replace("-v1", "-v0")).action_space == gym.spaces.Discrete(6)


@needs_minatar
@pytest.mark.parametrize("task_id, game", [("MinAtar/Asterix-v1", "asterix"),
                                           ("MinAtar/SpaceInvaders-v0", "space_invaders")])
def test_same_episodes_as_minatars_own_env_transposed(task_id, game):
    from minatar.gym import BaseEnv  # minatar's own gymnasium env, the reference

    ours = make_minatar(task_id)
    ref = BaseEnv(game, use_minimal_action_set=task_id.endswith("-v1"))
    rng = np.random.default_rng(0)
    obs, _ = ours.reset(seed=7)
    ref_obs, _ = ref.reset(seed=7)
    episodes = 0
    for _ in range(400):
        np.testing.assert_array_equal(obs, ref_obs.transpose(2, 0, 1))
        action = int(rng.integers(ours.action_space.n))
        obs, reward, terminated, _, _ = ours.step(action)
        ref_obs, ref_reward, ref_terminated, _, _ = ref.step(action)
        assert (reward, terminated) == (ref_reward, ref_terminated)
        if terminated:
            episodes += 1
            obs, _ = ours.reset()
            ref_obs, _ = ref.reset()
    assert episodes >= 1  # the comparison crossed an episode boundary


@needs_minatar
def test_sticky_actions_default_and_override():
    assert make_minatar("MinAtar/Breakout-v1").game.sticky_action_prob == 0.1
    assert make_minatar("MinAtar/Breakout-v1", sticky_action_prob=0.0).game.sticky_action_prob == 0.0
    # Breakout's paddle (channel 0) under "right" (v1 action 2): sticky_action_prob=1 repeats
    # the first action (no-op) forever, 0 obeys every press.
    paddle_columns = []
    for prob in (0.0, 1.0):
        env = make_minatar("MinAtar/Breakout-v1", sticky_action_prob=prob)
        start, _ = env.reset(seed=0)
        for _ in range(3):
            obs = env.step(2)[0]
        paddle_columns.append((start[0, 9].argmax(), obs[0, 9].argmax()))
    assert paddle_columns[0][1] == paddle_columns[0][0] + 3
    assert paddle_columns[1][1] == paddle_columns[1][0]
    with pytest.raises(TypeError, match="unknown MinAtar options"):
        seedpool.make("MinAtar/Breakout-v1", num_envs=1, backend="serial", repeat_action_probability=0.25)


def _rollout(backend: str, seed: int, steps: int = 60) -> tuple[np.ndarray, np.ndarray]:
    with seedpool.make("MinAtar/Breakout-v1", num_envs=4, backend=backend, seed=seed,
                       num_workers=1 if backend == "process" else None) as pool:
        assert pool.single_observation_space == gym.spaces.Box(0, 1, (4, 10, 10), np.bool_)
        rng = np.random.default_rng(0)
        obs, _ = pool.reset()
        frames, rewards = [obs.copy()], []
        for _ in range(steps):
            obs, reward, _, _, _ = pool.step(rng.integers(0, 3, 4))
            frames.append(obs.copy())
            rewards.append(reward)
    return np.stack(frames), np.stack(rewards)


@needs_minatar
def test_pool_is_deterministic_and_backends_agree(no_leaks):
    serial, serial_rewards = _rollout("serial", seed=3)
    assert serial.shape == (61, 4, 4, 10, 10) and serial.dtype == np.bool_
    again, _ = _rollout("serial", seed=3)
    process, process_rewards = _rollout("process", seed=3)
    np.testing.assert_array_equal(serial, again)
    np.testing.assert_array_equal(serial, process)
    np.testing.assert_array_equal(serial_rewards, process_rewards)
    other, _ = _rollout("serial", seed=4)
    assert not np.array_equal(serial, other)


@needs_minatar
def test_rgb_render():
    env = make_minatar("MinAtar/Breakout-v1", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (160, 160, 3) and frame.dtype == np.uint8
    # Lit pixels exactly where some channel is set.
    np.testing.assert_array_equal(frame[::16, ::16].any(-1), obs.any(0))


def test_missing_minatar_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "minatar", None)  # `import minatar` now fails
    monkeypatch.delitem(sys.modules, "seedpool.envs.families.minatar.env", raising=False)
    assert "MinAtar/Breakout-v1" in registry.registered_ids()  # the ids need no minatar
    with pytest.raises(ImportError, match=r"pip install 'seedpool\[minatar\]'") as info:
        seedpool.make("MinAtar/Breakout-v1", num_envs=4, native=False)  # native needs no minatar
    assert "MinAtar/Breakout-v1" in str(info.value)
