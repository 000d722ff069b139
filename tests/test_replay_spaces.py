"""The replay for any family: fields from the env's spaces, float-vector actions, Dict observations, the replay file."""
import gymnasium as gym
import numpy as np
import pytest

from seedpool.replay import NStepWriter, load_replay_file, make_replay, replay_fields, save_replay_file

DICT_OBS = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (3,), np.float64),
                            "grid": gym.spaces.MultiBinary((2, 2)), "mode": gym.spaces.Discrete(4)})
FLOAT_ACTION = gym.spaces.Box(-2, 2, (2,), np.float32)


def test_each_space_maps_to_its_field():
    fields = replay_fields(DICT_OBS, FLOAT_ACTION)
    assert fields["obs"] == fields["next_obs"] == {"pos": ((3,), np.float32), "grid": ((2, 2), np.int8),
                                                    "mode": ((), np.int64)}
    assert fields["action"] == ((2,), np.float32)
    assert replay_fields(gym.spaces.Box(0, 255, (4, 8, 8), np.uint8), gym.spaces.Discrete(3))["action"] == ((), np.int64)
    assert replay_fields(gym.spaces.Box(0, 255, (4, 8, 8), np.uint8), gym.spaces.MultiDiscrete([3, 5]))["action"] == \
        ((2,), np.int64)
    assert replay_fields(gym.spaces.Box(0, 255, (4, 8, 8), np.uint8), gym.spaces.Discrete(3))["obs"] == \
        ((4, 8, 8), np.uint8)
    assert make_replay(gym.spaces.Box(0, 255, (4, 8, 8), np.uint8), FLOAT_ACTION, 100).frame_dedup
    assert not make_replay(gym.spaces.Box(0, 255, (1, 8, 8), np.uint8), FLOAT_ACTION, 100).frame_dedup


@pytest.mark.parametrize("obs_space, action_space, match", [
    (gym.spaces.Tuple((gym.spaces.Discrete(2),)), gym.spaces.Discrete(2), "Tuple observation space"),
    (gym.spaces.Box(-1, 1, (2,)), gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), "Dict action space"),
    (gym.spaces.Dict({"t": gym.spaces.Text(5)}), gym.spaces.Discrete(2), r"Text observation\['t'\] space"),
])
def test_a_space_it_cannot_store_is_refused_by_name(obs_space, action_space, match):
    with pytest.raises(TypeError, match=match):
        make_replay(obs_space, action_space, 100)


def _dict_steps(rng, steps, envs):
    """Random Dict observations of ``envs`` envs over ``steps + 1`` times, and float actions."""
    obs = [{"pos": rng.uniform(-1, 1, (envs, 3)), "grid": rng.integers(0, 2, (envs, 2, 2)),
            "mode": rng.integers(0, 4, envs)} for _ in range(steps + 1)]
    actions = rng.uniform(-2, 2, (steps, envs, 2)).astype(np.float32)
    rewards = rng.normal(size=(steps, envs))
    return obs, actions, rewards


def test_dict_observations_and_float_actions_round_trip_through_the_writer_replay_and_file(tmp_path):
    rng = np.random.default_rng(0)
    envs, steps = 3, 12
    obs, actions, rewards = _dict_steps(rng, steps, envs)
    rb = make_replay(DICT_OBS, FLOAT_ACTION, 64, prioritized=True, seed=5)
    writer = NStepWriter(rb, n_step=2, gamma=0.5)
    no = np.zeros(envs, bool)
    for t in range(steps):
        writer.add(obs=obs[t], action=actions[t], reward=rewards[t], terminated=no, truncated=no,
                   next_obs=obs[t + 1])
    assert len(rb) == (steps - 1) * envs  # the last step of each env waits for its second step
    s = rb.sample(200)
    assert set(s["obs"]) == {"pos", "grid", "mode"} and s["action"].dtype == np.float32
    # Each row of stream e starting at step t: obs_t, action_t, r_t + 0.5 r_{t+1}, next_obs = obs_{t+2}.
    for i, row in enumerate(s["indices"]):
        t, e = divmod(int(row), envs)
        np.testing.assert_allclose(s["obs"]["pos"][i], obs[t]["pos"][e].astype(np.float32))
        np.testing.assert_array_equal(s["obs"]["grid"][i], obs[t]["grid"][e])
        assert s["obs"]["mode"][i] == obs[t]["mode"][e] and s["next_obs"]["mode"][i] == obs[t + 2]["mode"][e]
        np.testing.assert_allclose(s["next_obs"]["pos"][i], obs[t + 2]["pos"][e].astype(np.float32))
        np.testing.assert_array_equal(s["action"][i], actions[t, e])
        assert s["reward"][i] == pytest.approx(rewards[t, e] + 0.5 * rewards[t + 1, e], rel=1e-6)
        assert s["discount"][i] == pytest.approx(0.25)
    rb.update_priorities(s["indices"], rng.uniform(0, 3, len(s["indices"])))

    save_replay_file(tmp_path / "replay.npz", rb)
    again = make_replay(DICT_OBS, FLOAT_ACTION, 64, prioritized=True, seed=99)
    load_replay_file(tmp_path / "replay.npz", again)
    assert not list(tmp_path.glob("*.tmp"))
    assert len(again) == len(rb)
    rows = np.arange(len(rb))
    np.testing.assert_array_equal(again.priorities(rows), rb.priorities(rows))
    a, b = rb.sample(50, beta=0.6), again.sample(50, beta=0.6)  # the generator state came back too
    for key in ("action", "reward", "discount", "weights", "indices"):
        np.testing.assert_array_equal(a[key], b[key])
    for key in ("pos", "grid", "mode"):
        np.testing.assert_array_equal(a["obs"][key], b["obs"][key])
        np.testing.assert_array_equal(a["next_obs"][key], b["next_obs"][key])


def test_a_dict_observation_missing_a_key_is_refused_before_anything_changes():
    rng = np.random.default_rng(1)
    obs, actions, rewards = _dict_steps(rng, 1, 2)
    rb = make_replay(DICT_OBS, FLOAT_ACTION, 16)
    writer = NStepWriter(rb, n_step=1, gamma=0.9)
    partial = {k: v for k, v in obs[0].items() if k != "grid"}
    with pytest.raises(ValueError, match=r"obs: expected \['obs.grid', 'obs.mode', 'obs.pos'\]"):
        writer.add(obs=partial, action=actions[0], reward=rewards[0], terminated=np.zeros(2, bool),
                   truncated=np.zeros(2, bool), next_obs=obs[1])
    with pytest.raises(ValueError, match="missing \\['obs.grid'\\]"):
        rb.add(obs=partial, action=actions[0], reward=rewards[0], discount=np.ones(2), next_obs=obs[1])
    assert len(rb) == 0 and writer.pending == 0


def test_a_replay_file_of_other_fields_is_refused(tmp_path):
    rb = make_replay(gym.spaces.Box(-1, 1, (3,)), FLOAT_ACTION, 16)
    rb.add(obs=np.zeros((2, 3)), action=np.zeros((2, 2)), reward=np.zeros(2), discount=np.ones(2),
           next_obs=np.zeros((2, 3)))
    save_replay_file(tmp_path / "replay.npz", rb)
    other = make_replay(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), 16)
    with pytest.raises(ValueError, match="does not match this replay"):
        load_replay_file(tmp_path / "replay.npz", other)
