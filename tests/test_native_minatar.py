"""Native MinAtar (seedpool/envs/families/minatar/): identity with the `minatar` package."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import seedpool
from seedpool.envs.families.minatar import rng as minatar_rng
from seedpool.envs.native import check_native_env

needs_minatar = pytest.mark.skipif(importlib.util.find_spec("minatar") is None,
                                   reason="minatar is not installed (pip install 'seedpool[minatar]')")
GAMES = ["Breakout", "SpaceInvaders", "Freeway", "Asterix", "Seaquest"]
# Per game: (envs, pool steps per seed) and the probabilities of its -v1 actions (None: uniform).
# Freeway's episodes last 2501 steps; going up 60% of the time it crosses (new traffic).
PLAN = {
    "Breakout": (4, 1000, None),
    "SpaceInvaders": (4, 1000, None),
    "Freeway": (2, 2600, [0.2, 0.6, 0.2]),
    "Asterix": (4, 1000, None),
    "Seaquest": (4, 1000, None),
}


def _python_env(task_id, **options):
    """seedpool's Python-env MinAtar id: minatar's own `Environment`, observations transposed."""
    from seedpool.envs.families.minatar import make_minatar

    return lambda: make_minatar(task_id, **options)


# -- identity: >= 12k random env steps per game (3 seeds), every episode end included -------
@needs_minatar
@pytest.mark.parametrize("seed", [0, 11, 123])
@pytest.mark.parametrize("game", GAMES)
def test_native_games_play_minatars_episodes(game, seed):
    """Observations, rewards, terminations, truncations and episode lengths, through every
    episode end and the resets after them (sticky actions and ramping at their defaults)."""
    task_id = f"MinAtar/{game}-v1"
    num_envs, steps, p = PLAN[game]
    actions = None if p is None else (lambda rng, n: rng.choice(len(p), size=n, p=p))
    report = check_native_env(task_id, _python_env(task_id), num_envs=num_envs, steps=steps, seed=seed,
                              actions=actions)
    assert report.episodes > 0


@needs_minatar
@pytest.mark.parametrize("game", GAMES)
def test_all_actions_and_options_match(game):
    """-v0 ids (six actions), other sticky probabilities, ramping off."""
    task_id = f"MinAtar/{game}-v0"
    options = {"sticky_action_prob": 0.5, "difficulty_ramping": False}
    steps = PLAN[game][1]
    report = check_native_env(task_id, _python_env(task_id, **options), num_envs=2, steps=steps, seed=5, **options)
    assert report.episodes > 0


def test_mt19937_rows_draw_numpys_numbers():
    words, pos = np.zeros((2, minatar_rng.WORDS), np.uint32), np.zeros(2, np.int64)
    minatar_rng.load(words, pos, 1, np.random.RandomState(42))
    ref = np.random.RandomState(42)
    for t in range(1500):  # past 624 words: the state is regenerated twice
        assert minatar_rng.rand(words, pos, 1) == ref.rand()
        n = t % 9 + 1  # ranges of one value draw nothing, others mask and redraw
        assert minatar_rng.randint(words, pos, 1, 0, n) == ref.randint(n)
        assert minatar_rng.randint(words, pos, 1, 1, 6) == ref.randint(1, 6)
    assert minatar_rng.store(words, pos, 1).rand() == ref.rand()


@pytest.mark.parametrize("game", GAMES)
def test_minatar_ids_are_native_by_default(game):
    with seedpool.make(f"MinAtar/{game}-v1", num_envs=4) as pool:
        assert pool.backend == "native"
        obs, _ = pool.reset()
        assert obs.dtype == np.bool_ and obs.shape[0] == 4 and obs.shape[2:] == (10, 10)
    with pytest.raises(ValueError, match="sticky_action_prob"):
        seedpool.make(f"MinAtar/{game}-v1", num_envs=2, sticky_action_prob=1.5)


def test_native_games_need_no_minatar(monkeypatch):
    monkeypatch.setitem(sys.modules, "minatar", None)  # `import minatar` now fails
    for game in GAMES:
        with seedpool.make(f"MinAtar/{game}-v1", num_envs=2, seed=0) as pool:
            pool.reset()
            pool.step(np.zeros(2, np.int64))


# -- difficulty ramping: scripted players that reach it, in lockstep with minatar's games -----
def _invaders_player(env, rng):
    """Shoot the nearest column of aliens, stepping out from under shots and low aliens."""
    def danger(x):
        return env.e_bullet_map[4:, x].any() or env.alien_map[8:, x].any()
    if danger(env.pos):
        for action, x in ((1, env.pos - 1), (3, env.pos + 1)):
            if 0 <= x <= 9 and not danger(x):
                return action
    cols = np.flatnonzero(env.alien_map.any(0))
    if len(cols) == 0:
        return 0
    target = cols[np.argmin(abs(cols - env.pos))]
    if target < env.pos and not danger(env.pos - 1):
        return 1
    if target > env.pos and not danger(env.pos + 1):
        return 3
    return 5


def _seaquest_player(env, rng):
    """Dive and roam; head up with divers aboard (surfacing with divers ramps the game)."""
    if env.diver_count > 0 and rng.random() < 0.8:
        return 2
    if env.sub_y == 0 and rng.random() < 0.7:
        return 4
    return rng.choice(6, p=[0.1, 0.25, 0.05, 0.25, 0.1, 0.25])


def _asterix_player(env, rng):
    """Move to a row with no enemy within three cells (ramping comes with time alive)."""
    def safe(y):
        return not any(e is not None and e[1] == y and not e[3] and abs(e[0] - env.player_x) <= 3
                       for e in env.entities)
    if safe(env.player_y):
        return rng.choice([0, 1, 3])
    for action, y in ((2, env.player_y - 1), (4, env.player_y + 1)):
        if 1 <= y <= 8 and safe(y):
            return action
    return rng.integers(6)


@needs_minatar
@pytest.mark.parametrize("game,player,sticky", [("SpaceInvaders", _invaders_player, 0.0),
                                                ("Seaquest", _seaquest_player, 0.1),
                                                ("Asterix", _asterix_player, 0.1)])
def test_difficulty_ramps_as_in_minatar(game, player, sticky):
    """Step minatar's `Environment` and a one-env family side by side (all six actions) with a
    player that gets the game to ramp: observations, rewards, terminations and the ramp level
    agree on every step, and the ramp was reached."""
    from importlib import import_module

    from minatar import Environment

    from seedpool.envs.families.minatar.factory import GAMES as MODULES

    module = import_module(f"seedpool.envs.families.minatar.{game.lower()}")
    reference = Environment(MODULES[game], sticky_action_prob=sticky)
    reference.seed(3)
    reference.reset()
    family = getattr(module, f"{game}AllActions")(1, sticky_action_prob=sticky)
    family.seed(0, 3)
    family.reset(np.array([0]), None)
    rng = np.random.default_rng(0)
    highest = 0
    for t in range(4000):
        action = int(player(reference.env, rng))
        reward, terminal = reference.act(action)
        obs, got_reward, got_terminal = family.step(slice(None), np.array([action]))
        assert np.array_equal(obs[0], reference.state().transpose(2, 0, 1)), f"step {t}"
        assert (got_reward[0], got_terminal[0]) == (reward, terminal), f"step {t}"
        assert family.state[0, module.RAMP_INDEX] == reference.env.ramp_index, f"step {t}"
        highest = max(highest, reference.env.ramp_index)
        if terminal:
            reference.reset()
            family.reset(np.array([0]), None)
    assert highest >= 2


@needs_minatar
@pytest.mark.parametrize("game,autoreset", [("Breakout", "disabled"), ("Breakout", "same_step"),
                                            ("Asterix", "same_step")])
def test_other_autoreset_modes_match(game, autoreset):
    """disabled: ended games are stepped on (minatar still draws the sticky action and keeps
    the last one; reward 0); same_step: resets within the step (its reset observations)."""
    task_id = f"MinAtar/{game}-v1"
    report = check_native_env(task_id, _python_env(task_id), num_envs=3, steps=600, seed=2, autoreset=autoreset)
    assert report.episodes > 0


def test_breakouts_fused_step_keeps_every_observation_row_whole():
    """The fused step updates the pool's observation rows in place (a few cells per step):
    through async batches of any rows, each row returned equals a full draw of its env."""
    from seedpool.envs.families.minatar import breakout

    with seedpool.make("MinAtar/Breakout-v1", num_envs=8, batch_size=3, seed=4) as pool:
        family = pool._exec.family
        pool.async_reset()
        rng = np.random.default_rng(0)
        drawn = np.zeros((4, 10, 10), np.bool_)
        ends = 0
        for _ in range(3000):
            obs, _, term, _, info = pool.recv()
            for k, i in enumerate(info["env_id"].tolist()):
                drawn[:] = False
                breakout._draw(family.state[i], drawn)
                np.testing.assert_array_equal(obs[k], drawn)
            ends += int(term.sum())
            pool.send(rng.integers(0, 3, len(obs)), info["env_id"])
        assert family.can_fuse()  # (from the first reset of every env on)
    assert ends > 0


@needs_minatar
def test_breakouts_fused_step_redraws_the_wall_it_rebuilds():
    """A player that keeps the paddle under the ball clears the wall and gets a new one: a
    one-env pool (the fused step) and minatar's game in lockstep, observation by observation."""
    from minatar import Environment

    reference = Environment("breakout", sticky_action_prob=0.0)
    reference.seed(3)
    reference.reset()
    rebuilt = 0
    with seedpool.make("MinAtar/Breakout-v0", num_envs=1, seed=3, native=True, sticky_action_prob=0.0) as pool:
        pool.reset()
        for t in range(3000):
            env = reference.env
            action = 3 if env.pos < env.ball_x else 1 if env.pos > env.ball_x else 0
            bricks = env.brick_map.sum()
            reward, terminal = reference.act(action)
            rebuilt += int(reference.env.brick_map.sum() > bricks)
            obs, got_reward, got_terminal, _, _ = pool.step(np.array([action]))
            assert pool._exec.family.can_fuse()
            assert np.array_equal(obs[0], reference.state().transpose(2, 0, 1)), f"step {t}"
            assert (got_reward[0], got_terminal[0]) == (reward, terminal), f"step {t}"
            if terminal:
                reference.reset()
                pool.step(np.array([0]))  # the pool's reset step (next_step autoreset)
    assert rebuilt >= 1
