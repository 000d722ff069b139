"""AtariEnv: spaces, option checks, seeding, EnvPool's semantics, and bit-exact agreement with EnvPool."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="Atari tests need ale-py")
pytest.importorskip("cv2", reason="Atari tests need opencv-python-headless")

from seedpool.envs.families.atari.env import AtariEnv  # noqa: E402
from seedpool.envs.families.atari.factory import atari_ids, make_atari  # noqa: E402
from seedpool.envs.families.atari.options import option_names  # noqa: E402
from seedpool.envs.families.atari.noop import NoopSampler  # noqa: E402


def _actions(n: int, count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, count)


# ------------------------------------------------------------------ ids, options, spaces


def test_ids_cover_envpool_names() -> None:
    ids = atari_ids()
    for task_id in ("Pong-v5", "Breakout-v5", "SpaceInvaders-v5", "MontezumaRevenge-v5",
                    "TicTacToe3d-v5", "Pitfall2-v5"):
        assert task_id in ids
    assert len(ids) == len(set(ids)) >= 100
    assert "Combat-v5" not in ids  # multiplayer-only ROM: ALE cannot load it single-player


def test_ids_match_envpool() -> None:
    pytest.importorskip("envpool", reason="envpool not installed")
    from envpool.atari.registration import atari_game_list

    expected = {"".join(p.capitalize() for p in g.split("_")) + "-v5" for g in atari_game_list}
    assert expected <= set(atari_ids())


def test_default_spaces_and_info() -> None:
    env = make_atari("Pong-v5")
    assert env.observation_space.shape == (4, 84, 84)
    assert env.observation_space.dtype == np.uint8
    assert env.action_space.n == 6
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert set(info) == set(AtariEnv.info_spec)
    obs, rew, term, trunc, info = env.step(0)
    assert env.observation_space.contains(obs)
    assert isinstance(rew, float) and isinstance(term, bool) and isinstance(trunc, bool)
    for key, dtype in AtariEnv.info_spec.items():
        assert np.asarray(info[key]).astype(dtype) == info[key]


def test_rgb_and_custom_size_spaces() -> None:
    env = AtariEnv("space_invaders", gray_scale=False, stack_num=2, img_height=50, img_width=40,
                   full_action_space=True)
    assert env.observation_space.shape == (6, 50, 40)
    assert env.action_space.n == 18
    obs, _ = env.reset(seed=1)
    assert obs.shape == (6, 50, 40)
    assert (obs[:3] == obs[3:]).all()  # a new game fills the stack with its first frame
    obs, *_ = env.step(1)
    assert obs.shape == (6, 50, 40)


def test_option_errors() -> None:
    with pytest.raises(ValueError, match="unknown Atari option.*stack.*valid options are"):
        make_atari("Pong-v5", stack=3)
    with pytest.raises(ValueError, match="noop_max must be >= 1"):
        make_atari("Pong-v5", noop_max=0)
    with pytest.raises(ValueError, match="repeat_action_probability"):
        make_atari("Pong-v5", repeat_action_probability=1.5)
    with pytest.raises(TypeError, match="episodic_life must be bool"):
        make_atari("Pong-v5", episodic_life=1)
    with pytest.raises(TypeError, match="stack_num must be int"):
        make_atari("Pong-v5", stack_num=4.0)
    with pytest.raises(ValueError, match="mode=99 is not available"):
        make_atari("Pong-v5", mode=99)
    with pytest.raises(ValueError, match="render_mode"):
        make_atari("Pong-v5", render_mode="human")
    assert option_names()[:3] == ["stack_num", "frame_skip", "noop_max"]


def test_unknown_game_suggests_close_names() -> None:
    with pytest.raises(ValueError, match="did you mean 'Pong-v5'"):
        make_atari("pong-v5")
    with pytest.raises(ValueError, match="did you mean 'SpaceInvaders-v5'"):
        make_atari("SpaceInvader-v5")
    with pytest.raises(ValueError, match="no single-player mode"):
        AtariEnv("combat")
    with pytest.raises(ValueError, match="no single-player mode"):
        make_atari("Combat-v5")
    with pytest.raises(TypeError, match="task_id must be a str"):
        make_atari(3)
    with pytest.raises(ValueError, match="unknown Atari game"):
        AtariEnv("NotAGame")


def test_misuse_is_rejected() -> None:
    env = make_atari("Pong-v5", max_episode_steps=1)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (6, -1):
        with pytest.raises(ValueError, match=r"action must be an int in \[0, 6\)"):
            env.step(bad)
    env.step(np.int64(0))
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(0)
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match="takes no options"):
        env.reset(options={"x": 1})
    with pytest.raises(RuntimeError, match="render_mode='rgb_array'"):
        env.render()


def test_render_rgb_array() -> None:
    env = make_atari("Pong-v5", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8 and frame.any()


# ------------------------------------------------------------------ seeding


def test_noop_sampler_matches_std_mt19937() -> None:
    # std::mt19937 with its default seed 5489: the 10000th output is 4123659995 (C++ standard).
    sampler = NoopSampler(5489, 1)
    for _ in range(9999):
        sampler._bits.random_raw()
    assert int(sampler._bits.random_raw()) == 4123659995
    sampler = NoopSampler(7, 30)
    draws = [sampler.draw() for _ in range(200)]
    assert min(draws) == 0 and max(draws) == 29
    assert draws[:50] == [NoopSampler(7, 30).draw() for _ in range(1)] + draws[1:50]


def test_same_seed_same_observations() -> None:
    acts = _actions(4, 60)
    runs = []
    for _ in range(2):
        env = make_atari("Breakout-v5")
        frames = [env.reset(seed=123)[0]]
        frames += [env.step(a)[0] for a in acts]
        runs.append(np.stack(frames))
    assert (runs[0] == runs[1]).all()
    # Reseeding the same env reproduces the episode too.
    env.reset(seed=123)
    assert all((env.step(a)[0] == f).all() for a, f in zip(acts[:10], runs[0][1:11]))


def test_returned_obs_is_not_overwritten() -> None:
    env = make_atari("Breakout-v5")
    first, _ = env.reset(seed=0)
    kept = first.copy()
    for a in _actions(4, 20):
        obs, *_ = env.step(a)
    assert (first == kept).all() and obs is not first
    assert (obs[1:] == env.step(0)[0][:-1]).all()  # the stack shifts by one frame per step


# ------------------------------------------------------------------ EnvPool's semantics


def _play_until(env: AtariEnv, predicate, actions: np.ndarray):
    for t, a in enumerate(actions):
        out = env.step(a)
        if predicate(*out):
            return t, out
    raise AssertionError("condition never reached")


def test_episodic_life_ends_episode_but_not_game() -> None:
    env = make_atari("Breakout-v5", episodic_life=True)
    _, info = env.reset(seed=3)
    assert info["lives"] == 5
    _, (obs, _, term, trunc, info) = _play_until(
        env, lambda o, r, te, tr, i: te or tr, _actions(4, 2000, 3))
    assert term and not trunc and info["lives"] == 4 and info["terminated"] == 0
    assert info["discount"] == 0.0
    obs2, info2 = env.reset()  # a soft reset: the game goes on with 4 lives
    assert info2["lives"] == 4
    assert (obs2[:-1] == obs[1:]).all()  # and the frame stack is kept, not refilled


def test_game_over_resets_game_with_episodic_life() -> None:
    env = make_atari("Breakout-v5", episodic_life=True)
    env.reset(seed=4)
    ends = 0
    for a in _actions(4, 4000, 4):
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            ends += 1
            if info["terminated"]:
                break
            env.reset()
    assert info["terminated"] == 1 and info["lives"] == 0 and ends == 5
    obs, info = env.reset()
    assert info["lives"] == 5 and (obs == obs[-1]).all()


def test_zero_discount_on_life_loss() -> None:
    env = make_atari("Breakout-v5", zero_discount_on_life_loss=True)
    env.reset(seed=5)
    lives = 5
    for a in _actions(4, 2000, 5):
        _, _, term, trunc, info = env.step(a)
        if info["lives"] < lives:
            break
        assert info["discount"] == 1.0
    assert info["discount"] == 0.0 and not (term or trunc)  # life lost, episode goes on


def test_fire_reset_launches_the_ball() -> None:
    # In Breakout nothing happens until FIRE: with NOOPs only, a life is lost only if the
    # reset pressed FIRE.
    noop = np.zeros(400, np.int64)
    with_fire = make_atari("Breakout-v5")
    with_fire.reset(seed=0)
    _play_until(with_fire, lambda o, r, te, tr, i: i["lives"] < 5, noop)
    without = make_atari("Breakout-v5", use_fire_reset=False)
    without.reset(seed=0)
    assert all(without.step(a)[4]["lives"] == 5 for a in noop)


def test_reward_clip_keeps_raw_reward_in_info() -> None:
    env = make_atari("SpaceInvaders-v5", reward_clip=True)
    env.reset(seed=0)
    raw = []
    for a in _actions(6, 300):
        _, rew, term, trunc, info = env.step(a)
        assert rew == np.sign(info["reward"])
        raw.append(info["reward"])
        if term or trunc:
            env.reset()
    assert max(raw) > 1.0  # Space Invaders pays 5..30 per alien, so clipping did something


def test_time_limit_truncates_and_counts_across_lives() -> None:
    env = make_atari("Breakout-v5", max_episode_steps=30, episodic_life=True)
    env.reset(seed=6)
    steps = 0
    for a in _actions(4, 100, 6):
        _, _, term, trunc, info = env.step(a)
        steps += 1
        if term:
            env.reset()  # a life lost: the game's step count goes on
        if trunc:
            break
    assert trunc and not term and steps == 30
    _, info = env.reset()
    assert info["lives"] == 5  # truncation forces a real reset


# ------------------------------------------------------------------ agreement with EnvPool


def _compare_with_envpool(task: str, seed: int, steps: int, **options) -> int:
    """Step EnvPool and AtariEnv with the same actions; return the number of episodes ended."""
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    theirs = envpool.make(task, env_type="gymnasium", num_envs=1, num_threads=1, seed=seed,
                          **options)
    ours = make_atari(task, **options)
    obs_t, info_t = theirs.reset()
    obs_o, info_o = ours.reset(seed=seed)
    assert (obs_t[0] == obs_o).all()
    ended, done = 0, False
    for t, a in enumerate(_actions(ours.action_space.n, steps, seed)):
        obs_t, rew_t, term_t, trunc_t, info_t = theirs.step(np.array([a]))
        if done:  # EnvPool autoresets on the next step; do the same by hand
            (obs_o, info_o), rew_o, term_o, trunc_o = ours.reset(), 0.0, False, False
        else:
            obs_o, rew_o, term_o, trunc_o, info_o = ours.step(a)
        done = term_o or trunc_o
        ended += done
        where = f"{task} step {t}"
        assert (obs_t[0] == obs_o).all(), where
        assert (rew_t[0], term_t[0], trunc_t[0]) == (rew_o, term_o, trunc_o), where
        for key in ("lives", "reward", "terminated"):
            assert info_t[key][0] == info_o[key], f"{where}: info[{key!r}]"
    return ended


def test_pong_matches_envpool_exactly() -> None:
    # Default options, noop_max=30 included: the no-op counts follow EnvPool's generator.
    # The short time limit puts two truncations and autoresets into the run.
    assert _compare_with_envpool("Pong-v5", seed=0, steps=250, max_episode_steps=100) == 2


def test_breakout_episodic_life_reward_clip_matches_envpool() -> None:
    ended = _compare_with_envpool("Breakout-v5", seed=1, steps=500, episodic_life=True,
                                  reward_clip=True)
    assert ended >= 5  # includes a game over (5 lives)


def test_other_options_match_envpool() -> None:
    _compare_with_envpool("SpaceInvaders-v5", seed=2, steps=60, gray_scale=False, stack_num=2,
                          img_height=64, img_width=48, use_inter_area_resize=False)
    _compare_with_envpool("Breakout-v5", seed=3, steps=60, repeat_action_probability=0.25,
                          frame_skip=3, noop_max=5, full_action_space=True)
    _compare_with_envpool("Pong-v5", seed=4, steps=30, frame_skip=1, use_fire_reset=False)


# ------------------------------------------------------------------ as the engine uses it


@pytest.mark.filterwarnings("ignore:.*alternative render modes")  # needs a gymnasium spec
def test_passes_gymnasium_env_checker() -> None:
    from gymnasium.utils.env_checker import check_env

    check_env(make_atari("Breakout-v5", render_mode="rgb_array"), skip_render_check=False)


def test_engine_forwards_atari_info() -> None:
    import seedpool

    with seedpool.make("Breakout-v5", num_envs=2, backend="serial", seed=0,
                       episodic_life=True) as pool:
        obs, info = pool.reset()
        assert obs.shape == (2, 4, 84, 84)
        for _ in range(30):
            obs, rew, term, trunc, info = pool.step(np.array([1, 3]))
        assert info["lives"].dtype == np.int32 and (info["lives"] >= 1).all()
        for key, dtype in AtariEnv.info_spec.items():
            assert info[key].dtype == np.dtype(dtype) and info[key].shape == (2,)


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_pool_counts_steps_and_time_limit_across_lives_as_envpool(backend: str) -> None:
    # make()'s max_episode_steps is EnvPool's Atari option: a game's steps across lives, so
    # elapsed_step, and the truncation it drives, agree with EnvPool's pool step for step.
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    import seedpool

    opts = dict(num_envs=2, seed=1, episodic_life=True, reward_clip=True, max_episode_steps=50)
    theirs = envpool.make("Breakout-v5", env_type="gymnasium", num_threads=1, **opts)
    with seedpool.make("Breakout-v5", backend=backend, **opts) as ours:
        (obs_t, info_t), (obs_o, info_o) = theirs.reset(), ours.reset()
        assert (obs_t == obs_o).all() and (info_t["elapsed_step"] == info_o["elapsed_step"]).all()
        lives_lost = truncated = 0
        for t, a in enumerate(_actions(4, 800, 1).reshape(400, 2)):
            out_t, out_o = theirs.step(a), ours.step(a)
            for k, name in enumerate(("obs", "reward", "terminated", "truncated")):
                np.testing.assert_array_equal(out_o[k], out_t[k], err_msg=f"step {t} {name}")
            for key in ("elapsed_step", "lives", "reward", "terminated"):
                np.testing.assert_array_equal(out_o[4][key], out_t[4][key], err_msg=f"step {t} {key}")
            truncated += int(out_o[3].sum())
            lives_lost += int((out_o[2] & (out_o[4]["terminated"] == 0)).sum())
            assert (out_o[4]["elapsed_step"] <= 50).all()
    theirs.close()
    assert truncated >= 4 and lives_lost >= 4  # games cut by the limit after lives were lost


def test_pool_episode_statistics_are_per_life_and_clipped() -> None:
    # With episodic_life and reward_clip, the engine's episode is a life: episode_return sums
    # clipped rewards of that life, episode_length counts its steps; elapsed_step the game's.
    import seedpool

    with seedpool.make("Breakout-v5", num_envs=1, backend="serial", seed=2, episodic_life=True,
                       reward_clip=True) as pool:
        pool.reset()
        ret, length, game, raw, lives_lost = 0.0, 0, 0, 0.0, 0
        for a in _actions(4, 600, 2):
            _, rew, term, trunc, info = pool.step(np.array([a]))
            if info["episode_length"][0] == 0:  # the reset row after a lost life
                ret, length = 0.0, 0
                assert info["elapsed_step"][0] == game
                continue
            ret, length, game, raw = ret + rew[0], length + 1, game + 1, raw + info["reward"][0]
            assert info["episode_return"][0] == ret and info["episode_length"][0] == length
            assert info["elapsed_step"][0] == game
            lives_lost += int(term[0] and info["terminated"][0] == 0)
            if info["terminated"][0]:
                break
    assert lives_lost >= 2 and game > length and raw > 0
