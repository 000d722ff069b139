"""EnvPool's own ids, options and action casts under the EnvPool names
(seedpool/compat/envpool/tasks.py, seedpool/envs/envpool_ids/, actions.py), each
checked against envpool 1.2.5 where it is installed; `seedpool.make` builds the ids gymnasium
does not (tests/test_envpool_ids.py) and keeps gymnasium's own ids and its own checks."""

from __future__ import annotations

from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest

import seedpool

pytest.importorskip("dm_env", reason="dm-env is not installed (the envpool-api extra)")
from seedpool.compat import envpool as shim  # noqa: E402 - needs dm_env
from seedpool.compat.envpool.tasks import ALIASES, OWN  # noqa: E402
from seedpool.envs.envpool_ids.toy import CatchEnv, NChainEnv  # noqa: E402

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(120)]
SERIAL = {"backend": "serial"}


def _envpool():
    return pytest.importorskip("envpool", reason="envpool not installed")


# EnvPool's LunarLander ports (v2 and v3 alike) give their observation's low bound as float32's
# smallest positive number; seedpool keeps gymnasium's bounds there.
_OWN_BOUNDS = {"LunarLander-v2", "LunarLanderContinuous-v2"}
# Box2D's renamed v2 ids: the box2d family's (seedpool/envs/families/box2d/), under both names.
_BOX2D_V2 = {"CarRacing-v2", *_OWN_BOUNDS}


def _same_kind_of_space(ours: gym.Space, theirs: gym.Space, bounds: bool = True) -> None:
    """The same space up to the dtype of Discrete values (EnvPool's int32, gymnasium's int64)."""
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(ours, gym.spaces.Discrete):
        assert (ours.n, ours.start) == (theirs.n, theirs.start)
    else:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours, theirs)
        if not bounds:
            return
        np.testing.assert_allclose(ours.low, theirs.low)
        np.testing.assert_allclose(ours.high, theirs.high)


@pytest.mark.parametrize("task_id", sorted({*ALIASES, *OWN, *_BOX2D_V2}))
def test_envpool_ids_have_envpools_spaces_and_time_limit(task_id):
    envpool = _envpool()
    theirs = envpool.make_spec(task_id)
    ours = shim.make_spec(task_id)
    assert ours.id == task_id
    _same_kind_of_space(ours.observation_space, theirs.observation_space, bounds=task_id not in _OWN_BOUNDS)
    _same_kind_of_space(ours.action_space, theirs.action_space)
    limit = theirs.config.max_episode_steps
    assert ours.config.max_episode_steps == (None if limit == 2**31 - 1 else limit)
    assert task_id in shim.list_all_envs()
    with pytest.raises(shim.EnvPoolArgumentError, match="already registered"):
        shim.register(task_id, entry_point=CatchEnv)


def test_seedpool_make_keeps_gymnasiums_ids_and_spaces():
    with seedpool.make("Blackjack-v1", **SERIAL) as pool:
        assert isinstance(pool.single_observation_space, gym.spaces.Tuple)


def test_pendulum_v0_is_v1_in_envpool_itself():
    """The premise of the alias: EnvPool's Pendulum-v0 and -v1 step identically."""
    envpool = _envpool()
    v0, v1 = (envpool.make_gym(f"Pendulum-v{v}", num_envs=2, seed=3) for v in (0, 1))
    rng = np.random.default_rng(0)
    with closing(v0), closing(v1):
        np.testing.assert_array_equal(v0.reset()[0], v1.reset()[0])
        for _ in range(250):  # past the 200-step limit: the autoreset too
            act = rng.uniform(-2, 2, (2, 1)).astype(np.float32)
            a, b = v0.step(act), v1.step(act)
            for x, y in zip(a[:4], b[:4]):
                np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("task_id", ["Taxi-v3", "CliffWalking-v0", "tabular/CliffWalking-v0"])
def test_deterministic_toy_text_ids_step_as_envpool(task_id):
    """Taxi and CliffWalking are deterministic from a state: EnvPool's start state is put
    into seedpool's env, then both take the same actions."""
    envpool = _envpool()
    theirs = envpool.make_gymnasium(task_id, num_envs=1, seed=5)
    rng = np.random.default_rng(1)
    with closing(theirs), shim.make_gymnasium(task_id, num_envs=1, seed=5, **SERIAL) as ours:
        ended = 0  # Taxi's 200-step limit ends its episodes; CliffWalking's may go on
        for _ in range(5):
            start = int(theirs.reset()[0][0])
            ours.reset()
            ours.in_process_envs()[0].unwrapped.s = start
            for _ in range(300):
                act = rng.integers(0, ours.single_action_space.n, 1)
                a, b = theirs.step(act.astype(np.int32)), ours.step(act)
                for x, y in zip(a[:4], b[:4]):
                    np.testing.assert_array_equal(x, y)
                if a[2][0] or a[3][0]:
                    ended += 1
                    break
        assert ended or task_id != "Taxi-v3", "no episode ended: the last transitions were not compared"


def _catch_state(board: np.ndarray) -> tuple[tuple[int, int], int]:
    """(ball row, ball column), paddle column of a Catch board (the ball's row is above the
    paddle's until the last step, where both are on the bottom row)."""
    rows, cols = np.nonzero(board)
    bottom = rows == board.shape[0] - 1
    paddle = int(cols[bottom][0]) if bottom.sum() == 1 else None
    ball = (int(rows[~bottom][0]), int(cols[~bottom][0])) if (~bottom).any() else None
    return ball, paddle


def test_catch_follows_envpools_transitions():
    """From each of EnvPool's Catch states, seedpool's CatchEnv gives EnvPool's next board,
    reward and end (the upstream test only checks a caught and a missed ball)."""
    envpool = _envpool()
    theirs = envpool.make_gymnasium("Catch-v0", num_envs=1, seed=2)
    ours = CatchEnv()
    ours.reset(seed=0)
    rng = np.random.default_rng(2)
    rewards = set()
    with closing(theirs):
        board = theirs.reset()[0][0]
        for _ in range(300):
            (ours._ball, ours._paddle) = _catch_state(board)
            act = int(rng.integers(0, 3))
            obs, rew, term, trunc, _ = theirs.step(np.array([act], np.int32))
            mine = ours.step(act)
            np.testing.assert_array_equal(mine[0], obs[0])
            assert (mine[1], mine[2], mine[3]) == (rew[0], term[0], trunc[0])
            rewards.add(float(rew[0]))
            board = obs[0] if not term[0] else theirs.step(np.array([1], np.int32))[0][0]
    assert rewards == {-1.0, 0.0, 1.0}


def test_nchain_transitions_and_slip_rate_match_envpool():
    """Each of EnvPool's NChain transitions is the chosen move or the other one (a slip), and
    slips happen at EnvPool's rate; the time limit is EnvPool's 1000 steps."""
    envpool = _envpool()
    n = 32
    theirs = envpool.make_gymnasium("NChain-v0", num_envs=n, seed=1)
    rule = NChainEnv(slip=0.0)
    rng = np.random.default_rng(3)
    slips = total = 0
    with closing(theirs), shim.make_gymnasium("NChain-v0", num_envs=n, seed=1, **SERIAL) as ours:
        state = theirs.reset()[0]
        ours.reset()
        for t in range(1000):
            act = rng.integers(0, 2, n)
            obs, rew, _, trunc, _ = theirs.step(act.astype(np.int32))
            mine = ours.step(act)
            assert (trunc == mine[3]).all() and trunc.all() == (t == 999)
            for s, a, s1, r in zip(state, act, obs, rew):
                outcomes = []
                for taken in (a, 1 - a):
                    rule._state = int(s)
                    outcomes.append(rule.step(taken)[:2])
                assert (int(s1), float(r)) in outcomes
                slips += outcomes[0] != outcomes[1] and (int(s1), float(r)) == outcomes[1]
                total += 1
            state = obs
    assert abs(slips / total - 0.2) < 0.01  # 4.5 standard deviations of 32000 draws


def test_blackjack_has_envpools_box_observation_and_rules():
    envpool = _envpool()
    theirs = envpool.make_spec("Blackjack-v1")
    with shim.make_gymnasium("Blackjack-v1", num_envs=8, seed=0, **SERIAL) as pool:
        assert pool.observation_space == theirs.observation_space == gym.spaces.Box(0, 31, (3,), np.int32)
        assert pool.spec.config.num_envs == 8
        env = pool.in_process_envs()[0].unwrapped
        assert (env.sab, env.natural) == (theirs.config.sab, theirs.config.natural) == (True, False)
        obs, _ = pool.reset()
        assert obs.dtype == np.int32 and obs.shape == (8, 3) and pool.observation_space.contains(obs[0])


def test_mujoco_frame_stack_as_envpool():
    _envpool()
    pytest.importorskip("mujoco", reason="MuJoCo tasks need mujoco (the mujoco extra)")
    import envpool

    assert shim.make_spec("HalfCheetah-v5", frame_stack=3).observation_space.shape == \
        envpool.make_spec("HalfCheetah-v5", frame_stack=3).observation_space.shape == (3, 17)
    with shim.make_gym("HalfCheetah-v5", num_envs=2, seed=0, frame_stack=3, **SERIAL) as stacked, \
            shim.make_gym("HalfCheetah-v5", num_envs=2, seed=0, **SERIAL) as plain:
        assert stacked.spec.config.max_episode_steps == 1000
        first, plain_first = stacked.reset()[0], plain.reset()[0]
        for k in range(3):  # after a reset every frame is the first observation
            np.testing.assert_array_equal(first[:, k], plain_first)
        act = np.full((2, 6), 0.3)
        for _ in range(2):
            prev = first
            first, plain_obs = stacked.step(act)[0], plain.step(act)[0]
            np.testing.assert_array_equal(first[:, :-1], prev[:, 1:])
            np.testing.assert_array_equal(first[:, -1], plain_obs)
    with pytest.raises(shim.EnvPoolArgumentError, match="frame_stack"):
        shim.make_gym("HalfCheetah-v5", frame_stack=0)
    with pytest.raises(TypeError):  # seedpool.make: gymnasium's HalfCheetah has no such option
        seedpool.make("HalfCheetah-v5", frame_stack=3, **SERIAL)


def _obs_reward(result):
    """(observations, rewards) of a Gymnasium step tuple or a dm_env TimeStep."""
    if isinstance(result, tuple) and not hasattr(result, "observation"):
        return result[0], result[1]
    return result.observation.obs, result.reward


@pytest.mark.parametrize("api", ["gym", "dm"])
def test_integer_valued_float_actions_are_cast_under_envpool_names_only(api):
    make = shim.make_gym if api == "gym" else shim.make_dm
    with closing(make("CartPole-v1", num_envs=3, seed=1, **SERIAL)) as floats, \
            closing(make("CartPole-v1", num_envs=3, seed=1, **SERIAL)) as ints:
        floats.reset(), ints.reset()
        for act in ([1.0, 0.0, 1.0], [0.0, 0.0, 1.0]):
            a, b = _obs_reward(floats.step(np.array(act))), _obs_reward(ints.step(np.array(act, np.int64)))
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
        with pytest.raises(ValueError, match="whole numbers"):
            floats.step(np.array([0.5, 0.0, 1.0]))
        with pytest.raises(ValueError, match="whole numbers"):
            floats.step(np.array([np.nan, 0.0, 1.0]))
        with pytest.raises(ValueError, match=r"in \[0, 2\)"):
            floats.step(np.array([2.0, 0.0, 1.0]))
        floats.step(np.array([1.0, 1.0, 1.0]))  # the pool is still usable
    with seedpool.make("CartPole-v1", num_envs=3, **SERIAL) as own:
        own.reset()
        with pytest.raises(TypeError, match="integers"):
            own.step(np.ones(3))


def _model(path) -> str:
    """An MJCF file's text without comments and spacing."""
    import re

    return " ".join(re.sub(r"<!--.*?-->", "", path.read_text(), flags=re.S).split())


def test_envpools_mujoco_model_files_are_gymnasiums():
    """EnvPool's `xml_file` names (its envpool-assets files) give gymnasium's file with the
    same model; the pool reports the name given, as EnvPool's config does."""
    pytest.importorskip("mujoco", reason="MuJoCo tasks need mujoco (the mujoco extra)")
    assets = pytest.importorskip("envpool_assets", reason="envpool-assets not installed (comes with envpool)")
    from pathlib import Path

    from seedpool.compat.envpool.tasks import ASSETS

    theirs = Path(assets.__file__).parent / "mujoco" / "assets_gym"
    ours = Path(gym.envs.mujoco.__file__).parent / "assets"
    for name, target in ASSETS.items():
        assert _model(theirs / name) == _model(ours / target), name
    spec = shim.make_spec("HalfCheetah-v5", xml_file="half_cheetah_envpool.xml")
    assert spec.config.xml_file == "half_cheetah_envpool.xml" and spec.observation_space.shape == (17,)
    with shim.make_gym("HalfCheetah-v5", num_envs=1, seed=4, xml_file="half_cheetah_envpool.xml", **SERIAL) as a, \
            shim.make_gym("HalfCheetah-v5", num_envs=1, seed=4, **SERIAL) as b:
        assert a.spec.config.xml_file == "half_cheetah_envpool.xml"
        np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
        act = np.full((1, 6), -0.4)
        np.testing.assert_array_equal(a.step(act)[0], b.step(act)[0])
