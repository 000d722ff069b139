"""seedpool's ViZDoom family (seedpool/envs/families/vizdoom/): EnvPool's
`use_combined_action=True` (a Discrete index into EnvPool's set of button combinations, with
its `force_speed` and `delta_button_config`), in EnvPool's order and size, each index
pressing its buttons; checked against envpool 1.2.5 where it is installed."""

from __future__ import annotations

import importlib.util
from contextlib import closing

import numpy as np
import pytest

import seedpool
from seedpool.envs.families.vizdoom.actions import combined_actions
from seedpool.errors import ConfigError

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]
vzd = pytest.importorskip("vizdoom", reason="vizdoom not installed (the vizdoom extra)")
NAMES = list(vzd.Button.__members__)
B = vzd.Button
HAS_ASSETS = importlib.util.find_spec("envpool_assets") is not None
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None

# The Discrete sizes envpool 1.2.5 builds with use_combined_action=True (its default options).
ENVPOOL_SIZES = {"Basic-v1": 6, "BasicAudio-v1": 6, "DeadlyCorridor-v1": 54, "Deathmatch-v1": 4536,
                 "DefendTheCenter-v1": 6, "HealthGathering-v1": 6, "MyWayHome-v1": 18, "TakeCover-v1": 3,
                 "D1Basic-v1": 6, "D2Navigation-v1": 6, "D3Battle-v1": 108, "D4Battle2-v1": 108}
# (id, options) -> size, from envpool's own tests (vizdoom_test.py) and envpool 1.2.5.
OPTION_SIZES = [
    ("D3Battle-v1", {"force_speed": True}, 54),  # SPEED always pressed: half the set
    ("Deathmatch-v1", {"delta_button_config": {"LOOK_UP_DOWN_DELTA": [11, -10, 10]}}, 11 * 4536),
    ("Deathmatch-v1", {"delta_button_config": {"MOVE_LEFT_RIGHT_DELTA": [11, -10, 10],
                                               "LOOK_UP_DOWN_DELTA": [11, -10, 10]}}, 121 * 4536),
    ("Deathmatch-v1", {"delta_button_config": {"ATTACK": [3, 0, 1]}}, 4536),  # not a delta button: ignored
    ("Basic-v1", {"delta_button_config": {"LOOK_UP_DOWN_DELTA": [11, -10, 10]}}, 66),  # Basic lacks it
]


def _ids(names):
    return [int(getattr(B, n)) for n in names]


def test_basics_set_is_envpools_order():
    """basic.cfg's buttons MOVE_LEFT, MOVE_RIGHT, ATTACK: ATTACK (the lowest id) varies slowest,
    then the MOVE_RIGHT/MOVE_LEFT pair as neither, right, left."""
    rows = combined_actions(_ids(["MOVE_LEFT", "MOVE_RIGHT", "ATTACK"]))
    expected = [[0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1], [1, 0, 1]]
    np.testing.assert_array_equal(rows, expected)


def test_groups_pairs_weapons_speed_and_deltas():
    # One button of a pair alone counts as a binary button.
    np.testing.assert_array_equal(combined_actions(_ids(["MOVE_LEFT"])), [[0], [1]])
    # SELECT_WEAPONx: none, or one of those the scenario has, in id order.
    np.testing.assert_array_equal(combined_actions(_ids(["SELECT_WEAPON3", "SELECT_WEAPON1"])),
                                  [[0, 0], [0, 1], [1, 0]])
    # force_speed keeps SPEED pressed; without it SPEED is a binary button.
    speed = _ids(["SPEED", "ATTACK"])
    np.testing.assert_array_equal(combined_actions(speed, force_speed=True), [[1, 0], [1, 1]])
    np.testing.assert_array_equal(combined_actions(speed), [[0, 0], [1, 0], [0, 1], [1, 1]])  # ATTACK slowest
    # A delta button: 0 unless configured, then num values from min to max in float32 steps.
    delta = _ids(["TURN_LEFT_RIGHT_DELTA"])
    np.testing.assert_array_equal(combined_actions(delta), [[0]])
    rows = combined_actions(delta, delta_config={"TURN_LEFT_RIGHT_DELTA": (4, -1, 1)}, names=NAMES)
    step = np.float32(2) / np.float32(3)
    expected = [np.float32(-1), np.float32(-1) + step, np.float32(np.float32(-1) + step) + step]
    np.testing.assert_array_equal(rows[:3, 0], np.array(expected, np.float32).astype(np.float64))
    assert rows.shape == (4, 1) and abs(rows[3, 0] - 1) < 1e-6
    with pytest.raises(ConfigError, match="num, min, max"):
        combined_actions(delta, delta_config={"TURN_LEFT_RIGHT_DELTA": 3}, names=NAMES)


@pytest.mark.parametrize("task_id", sorted(ENVPOOL_SIZES))
def test_sizes_are_envpools(task_id):
    if task_id.startswith("D") and task_id[1].isdigit() and not HAS_ASSETS:
        pytest.skip("EnvPool's own maps ship in envpool-assets")
    with closing(seedpool.make(task_id, num_envs=1, backend="serial", use_combined_action=True)) as pool:
        assert pool.single_action_space.n == ENVPOOL_SIZES[task_id]
    if HAS_ENVPOOL:
        import envpool

        assert envpool.make_spec(task_id, use_combined_action=True).action_space.n == ENVPOOL_SIZES[task_id]


@pytest.mark.parametrize("task_id,options,size", OPTION_SIZES)
def test_force_speed_and_delta_button_config_sizes(task_id, options, size):
    if task_id.startswith("D3") and not HAS_ASSETS:
        pytest.skip("EnvPool's own maps ship in envpool-assets")
    with closing(seedpool.make(task_id, num_envs=1, backend="serial", use_combined_action=True,
                               **options)) as pool:
        assert pool.single_action_space.n == size
        assert pool.config["use_combined_action"] is True
    if HAS_ENVPOOL:
        import envpool

        assert envpool.make_spec(task_id, use_combined_action=True, **options).action_space.n == size


@pytest.mark.parametrize("task_id", ["Basic-v1", "MyWayHome-v1"])
def test_stepping_each_index_presses_its_buttons(task_id):
    from seedpool.envs.families.vizdoom.env import make_vizdoom

    env = make_vizdoom(task_id, use_combined_action=True, frame_skip=1)
    try:
        game = env.inner._game
        buttons = [int(b) for b in game.get_available_buttons()]
        rows = combined_actions(buttons)
        assert len(np.unique(rows, axis=0)) == len(rows)  # each index a different combination
        env.reset(seed=0)
        for index, row in enumerate(rows):
            *_, terminated, truncated, _ = env.step(np.int64(index))
            assert env.inner.last_buttons == row.tolist(), index
            if terminated or truncated:
                env.reset()
    finally:
        env.close()


def test_pool_steps_indices_and_rejects_one_out_of_range():
    with closing(seedpool.make("Basic-v1", num_envs=2, seed=3, backend="serial", use_combined_action=True)) as pool:
        pool.reset()
        obs, reward, *_ = pool.step(np.array([3, 5]))
        assert obs.shape == (2, 12, 84, 84) and reward.shape == (2,)
        with pytest.raises(ConfigError):
            pool.step(np.array([0, 6]))


@pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool not installed")
def test_attack_indices_spend_ammo_as_in_envpool():
    """An index spends ammo in Basic-v1 (after the pistol's delay) where EnvPool's does:
    where ATTACK, the slowest group, is pressed (indices 3..5)."""
    import envpool

    theirs = envpool.make_gymnasium("Basic-v1", num_envs=1, seed=0, use_combined_action=True)
    ours = seedpool.make("Basic-v1", num_envs=1, seed=0, backend="serial", use_combined_action=True)
    with closing(theirs), closing(ours):
        for index in range(6):
            spent = []
            for env in (theirs, ours):
                _, first = env.reset()
                for _ in range(3):
                    *_, info = env.step(np.array([index]))
                spent.append(bool(info["AMMO2"][0] < first["AMMO2"][0]))
            assert spent == [index >= 3] * 2, index


def test_the_face_gives_a_discrete_spec():
    pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
    from seedpool.compat import envpool as face

    spec = face.make_spec("Basic-v1", use_combined_action=True).action_spec()
    assert spec.num_values == 6 and np.issubdtype(spec.dtype, np.integer)


def test_a_bad_delta_button_config_is_refused():
    with pytest.raises(ConfigError, match="delta_button_config"):
        seedpool.make("Basic-v1", num_envs=1, backend="serial", use_combined_action=True, delta_button_config=[1])


def test_vizdoom_custom_takes_envpools_cfg_path_and_wad_path():
    """VizdoomCustom-v1 runs the scenario a cfg_path names (and wad_path's map, where given)."""
    import os

    cfg = os.path.join(vzd.scenarios_path, "defend_the_line.cfg")
    wad = os.path.join(vzd.scenarios_path, "defend_the_line.wad")
    with pytest.raises(ConfigError, match="cfg_path"):
        seedpool.make("VizdoomCustom-v1", num_envs=1, backend="serial")
    with closing(seedpool.make("DefendTheLine-v1", num_envs=1, seed=2, backend="serial")) as named, \
            closing(seedpool.make("VizdoomCustom-v1", num_envs=1, seed=2, backend="serial", cfg_path=cfg,
                                  wad_path=wad)) as custom:
        assert custom.single_action_space == named.single_action_space
        assert custom.config["cfg_path"] == cfg and custom.config["wad_path"] == wad
        first = [named.reset()[0], custom.reset()[0]]
        np.testing.assert_array_equal(*first)  # the same scenario, seeded alike
        action = np.zeros((1, *named.single_action_space.shape))
        np.testing.assert_array_equal(named.step(action)[0], custom.step(action)[0])
    pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
    from seedpool.compat import envpool as face

    env = face.make_gymnasium("VizdoomCustom-v1", num_envs=1, cfg_path=cfg, use_combined_action=True)
    try:
        assert env.action_space.n == 6  # defend_the_line: ATTACK, TURN_LEFT/TURN_RIGHT
        env.reset()
        assert env.step(np.array([5]))[0].shape == (1, 12, 84, 84)
    finally:
        env.close()


def test_envpools_maps_without_envpool_assets_name_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "envpool_assets" else real(name, *a))
    with pytest.raises(ModuleNotFoundError) as err:
        seedpool.make("D1Basic-v1", num_envs=1, backend="serial")
    message = str(err.value)
    assert "\n" not in message and "pip install 'seedpool[vizdoom]'" in message and "D1Basic-v1" in message
    assert err.value.name == "envpool_assets"
