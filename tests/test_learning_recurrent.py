"""Learning regression: with memory, PPO learns CartPole from positions alone; without, it cannot.

The env (tests/pomdp_envs.py) shows only the cart position and the pole angle, and reaches the
trainer as a user's env does: ``--env pomdp_envs:CartPoleNoVel-v0``.
"""
import dataclasses

import numpy as np
import pytest

from seedpool.experiment.metrics import series
from seedpool.experiment.plot import smooth
from seedpool.models import ModelConfig
from seedpool.trainers.ppo import ppo_defaults, train_ppo

pytestmark = pytest.mark.slow

ENV = "pomdp_envs:CartPoleNoVel-v0"


def recurrent_config(tmp_path, total: int, seed: int = 1, **options):
    """Recurrent PPO's settings for this task, chosen by measurement (benchmarks/results/recurrent_cartpole_novel.md):
    20 epochs of 8 x 32 steps, an LSTM reading the observations, the value head with its own LSTM."""
    cfg = ppo_defaults("CartPole-v1")
    ppo = dataclasses.replace(cfg.ppo, update_epochs=20, num_minibatches=1)
    return dataclasses.replace(cfg, env=ENV, total_timesteps=total, seed=seed, num_envs=8, backend="serial",
                               runs_dir=tmp_path, progress="off", tensorboard=False, ppo=ppo,
                               model=ModelConfig(core="lstm", core_size=64, hidden_sizes=(), critic_core=True),
                               **options)


def _mean20(run_dir):
    steps, _, values = series(run_dir / "metrics.csv", "charts/episodic_return")
    return np.asarray(steps), smooth(np.asarray(values))  # mean of the last 20 episodes


def test_recurrent_ppo_reaches_100_within_100k_steps(tmp_path):
    # Annealed over 120k steps (the measured run), stopped once the mean of the last 20 episodes
    # reaches 100: feed-forward PPO's best on this task over 100k steps was 62.8 (test below).
    # Seeds 1-3 got there at 77k, 33k and 37k env steps on the CI machine (2026-11-27); seed 1
    # had reached it by 40k on the same code before, on other CPU kernels: an LSTM's path here
    # is sensitive to the last bits of its arithmetic, so the budget leaves room for that.
    result = train_ppo(recurrent_config(tmp_path, 120_000, stop_at_return=100.0))
    assert result.final_return >= 100, f"mean of the last 20 episodes {result.final_return:.1f} after {result.step} steps"
    assert result.step <= 100_000, f"reached 100 only after {result.step} env steps"


def test_feed_forward_ppo_stays_below_100_on_the_same_task_and_budget(tmp_path):
    # The same 100k steps the recurrent policy gets.
    cfg = dataclasses.replace(ppo_defaults("CartPole-v1"), env=ENV, total_timesteps=100_000, backend="serial",
                              runs_dir=tmp_path, progress="off", tensorboard=False)
    result = train_ppo(cfg)
    _, mean20 = _mean20(result.run_dir)
    assert mean20.max() < 100 and result.final_return < 100, (mean20.max(), result.final_return)
