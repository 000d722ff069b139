"""Learning regression for teams: shared-parameter PPO on MPE's simple_spread, and a task that
needs both agents (tests/agent_envs.py's Switches) learned with per-group policies and with
MAPPO's centralised critic."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from seedpool.experiment.metrics import series  # noqa: E402
from seedpool.models.team import MultiAgentConfig  # noqa: E402
from seedpool.trainers.ppo import ppo_defaults, train_ppo  # noqa: E402

pytestmark = pytest.mark.slow

# simple_spread_v3 (N=3, local_ratio 0.5, 25 cycles, discrete): a uniformly random policy's mean
# per-agent episode return is -27.0 (200 episodes) and the heuristic "agent k walks to landmark
# k" -15.5; -20.1 is 60% of the way.
SPREAD_TARGET = -20.1


def _episodes(run_dir, name="charts/episodic_return"):
    steps, _, values = series(run_dir / "metrics.csv", name)
    return np.asarray(steps), np.asarray(values)


def _window(steps, values, end, width):
    """Mean of the episodes that ended in (end - width, end]."""
    m = (steps > end - width) & (steps <= end)
    return values[m].mean()


def _first(steps, values, n):
    """The first ``n`` episodes, cut back to whole logging steps: episodes that end at the same
    step are logged in the order the backend finishes them (auto picks the backend by load), so
    a cut inside one step would take a different subset of the same episodes from run to run."""
    return values[steps < steps[n - 1]]


def test_shared_ppo_on_simple_spread_reaches_60_percent_of_the_heuristic_and_holds_it(tmp_path, learning_seed):
    total = 700_000
    cfg = dataclasses.replace(ppo_defaults("simple_spread_v3"), total_timesteps=total, seed=learning_seed,
                              runs_dir=tmp_path, progress="off", tensorboard=False)
    result = train_ppo(cfg)
    steps, values = _episodes(result.run_dir)
    # Mean per-agent return of the episodes in each 100k-step window: reached by 500k, held to the end.
    windows = {end: _window(steps, values, end, 100_000) for end in (500_000, 600_000, total)}
    assert all(v >= SPREAD_TARGET for v in windows.values()), windows
    assert _first(steps, values, 200).mean() < -23, "the first episodes should be near the random policy's"


def _switches(tmp_path, seed, env, ma):
    base = ppo_defaults("switches")  # a user's own env: the generic settings, changed as below
    ppo = dataclasses.replace(base.ppo, num_steps=50, num_minibatches=4, update_epochs=10, learning_rate=1e-3,
                              gamma=0.95, gae_lambda=0.95, ent_coef=0.01, reward_norm=True)
    cfg = dataclasses.replace(base, env=env, num_envs=16, total_timesteps=150_000, seed=seed, ppo=ppo, ma=ma,
                              runs_dir=tmp_path, progress="off", tensorboard=False)
    return train_ppo(cfg)


@pytest.mark.parametrize("how", ["per-group", "mappo"])
def test_a_task_that_needs_both_agents_is_learned(tmp_path, learning_seed, how):
    if how == "per-group":
        env, ma = "agent_envs:switches_pair", MultiAgentConfig(policies="per-group")
    else:
        env, ma = "agent_envs:switches", MultiAgentConfig(critic="central", agent_id=True)
    result = _switches(tmp_path, learning_seed, env, ma)
    steps, values = _episodes(result.run_dir)
    # An episode's return is 25 steps of +1 (both switches pressed) or -0.01: a random team
    # scores about 0; pressing both from the second or third step scores over 20.
    assert _first(steps, values, 100).mean() < 3
    assert _window(steps, values, 150_000, 30_000) >= 15, _window(steps, values, 150_000, 30_000)
    if how == "per-group":
        _, left = _episodes(result.run_dir, "charts/episodic_return/left")
        _, right = _episodes(result.run_dir, "charts/episodic_return/right")
        assert len(left) == len(right) > 0
