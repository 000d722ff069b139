"""Learning regression: recurrent APPO on the central-inference system learns CartPole from
positions alone, to a mean return feed-forward APPO does not reach on the same task.

``benchmarks/recurrent_appo_cartpole_novel.py`` measures it across seeds (its table holds every
seed run, feed-forward APPO's best among them).
"""
import dataclasses

import pytest

from seedpool.models import ModelConfig
from seedpool.trainers.impala import impala_defaults, train_impala

pytestmark = pytest.mark.slow


def recurrent_appo_config(tmp_path, total: int, seed: int = 1, threaded: bool = False, **options):
    """APPO in recurrent PPO's measured shape (8 envs, unrolls of 32 steps, 8 per batch, 20
    epochs), an LSTM reading the standardised observations (--model.obs-norm) and another for
    the value head, rewards x 0.1 and no entropy bonus (benchmarks/results/recurrent_appo_cartpole_novel.md);
    the serial twin unless ``threaded``."""
    cfg = impala_defaults("CartPole-v1")
    impala = dataclasses.replace(cfg.impala, unroll_length=32, unrolls_per_batch=8, update_epochs=20, ent_coef=0.0,
                                 reward_scale=0.1)
    return dataclasses.replace(cfg, env="pomdp_envs:CartPoleNoVel-v0", total_timesteps=total, seed=seed, num_envs=8,
                               backend="serial", acting=dataclasses.replace(cfg.acting, serial=not threaded),
                               runs_dir=tmp_path, progress="off", tensorboard=False, impala=impala,
                               model=ModelConfig(core="lstm", core_size=64, hidden_sizes=(), critic_core=True,
                                                 obs_norm=True),
                               **options)


def test_recurrent_appo_ends_its_300k_steps_at_400_or_more_on_the_threaded_system(tmp_path):
    # The bar: 400 within 300k env steps, held to the end, on the threaded system (actors,
    # inference and learner at once). Seeds 1-4 of this setting ended 300k steps at 500, 500, 480.5 and 462.2
    # (mean of the last 20 episodes), first >= 400 at 47k-83k, 160-170 s each beside other jobs
    # (2026-11-27). Feed-forward APPO in the same shape (without the normalisations) peaked at 63-69.
    result = train_impala(recurrent_appo_config(tmp_path, 300_000, threaded=True))
    assert result.step >= 300_000
    assert result.final_return >= 400, f"mean of the last 20 episodes {result.final_return:.1f} at the end"
