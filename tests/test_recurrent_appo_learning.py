"""Learning regression: recurrent APPO on the central-inference system learns CartPole from
positions alone, to a mean return feed-forward APPO does not reach on the same task.

The issue's full bar (>= 400 within 300k env steps) takes far longer than a CI test may; it is
measured by ``benchmarks/recurrent_appo_cartpole_novel.py`` (its table holds every seed run,
feed-forward APPO's best among them). This test holds the weaker bar that separates the two.
"""
import dataclasses

import pytest

from seedpool.models import ModelConfig
from seedpool.trainers.impala import impala_defaults, train_impala

pytestmark = pytest.mark.slow


def recurrent_appo_config(tmp_path, total: int, seed: int = 1, **options):
    """The setting of benchmarks/recurrent_appo_cartpole_novel.py's ``BASE``: APPO in recurrent PPO's
    measured shape (8 envs, unrolls of 32 steps, 8 per batch, 20 epochs), an LSTM reading the
    observations and another for the value head; the serial twin, so one seed is one run."""
    cfg = impala_defaults("CartPole-v1")
    impala = dataclasses.replace(cfg.impala, unroll_length=32, unrolls_per_batch=8, update_epochs=20)
    return dataclasses.replace(cfg, env="pomdp_envs:CartPoleNoVel-v0", total_timesteps=total, seed=seed, num_envs=8,
                               backend="serial", acting=dataclasses.replace(cfg.acting, serial=True),
                               runs_dir=tmp_path, progress="off", tensorboard=False, impala=impala,
                               model=ModelConfig(core="lstm", core_size=64, hidden_sizes=(), critic_core=True),
                               **options)


def test_recurrent_appo_reaches_100_within_80k_steps_where_feed_forward_appo_stays_below_70(tmp_path):
    # Annealed over 120k steps, stopped once the mean of the last 20 episodes reaches 100. Seeds 1-3
    # got there at 21k, 24k and 32k env steps when first measured, at 30k, 39k and 25k on the CI
    # machine (2026-11-27), and seed 1 at 47k in one CI run with the two test workers busy (the
    # learner and the actors are threads, so timing moves the path). Feed-forward APPO in the same
    # shape peaked at 68 within 40k steps (benchmarks/results/recurrent_appo_cartpole_novel.md) and
    # at 63 and 65 within 80k (seeds 1 and 2, 2026-11-27).
    result = train_impala(recurrent_appo_config(tmp_path, 120_000, stop_at_return=100.0))
    assert result.final_return >= 100, f"mean of the last 20 episodes {result.final_return:.1f} after {result.step} steps"
    assert result.step <= 80_000, f"reached 100 only after {result.step} env steps"
