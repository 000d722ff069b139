"""Native MinAtar (seedpool/envs/native/minatar_*.py): identity with the `minatar` package."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import seedpool
from seedpool.envs.native import check_native_env, minatar_rng

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
    from seedpool.envs.minatar import make_minatar

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
