"""Learning regression: recurrent APPO on the central-inference system learns CartPole from
positions alone, to a mean return feed-forward APPO does not reach on the same task.

``benchmarks/recurrent_appo_cartpole_novel.py`` measures it across seeds (its table holds every
seed run, feed-forward APPO's best among them). The config is the one `seedpool train impala
--env pomdp_envs:CartPoleNoVel-v0 --model.core lstm` gives a user (`cli.train_config`).
"""
import dataclasses

import pytest

from seedpool.cli import train_config
from seedpool.trainers.impala import train_impala

pytestmark = pytest.mark.slow

ENV = "pomdp_envs:CartPoleNoVel-v0"


def user_config(tmp_path, *options: str):
    """`seedpool train impala --env ENV OPTIONS...` as the CLI resolves it for a user (the
    threaded system, as a user gets it), writing under ``tmp_path``."""
    cfg = train_config("impala", ["--env", ENV, *options])
    return dataclasses.replace(cfg, runs_dir=tmp_path, progress="off", tensorboard=False)


def test_recurrent_appo_ends_its_300k_steps_at_400_or_more_on_the_threaded_system(tmp_path, learning_seed):
    # The bar: 400 at the end of the 300k env steps `--model.core lstm` trains for, on the
    # threaded system (actors, inference and learner at once), with nothing but that option.
    # Seeds 1-3 of these defaults: benchmarks/results/recurrent_defaults_seeds.md. Before the
    # defaults followed from the core, the same command ended at 201.
    cfg = user_config(tmp_path, "--model.core", "lstm", "--seed", str(learning_seed))
    assert cfg.total_timesteps == 300_000 and not cfg.acting.serial
    result = train_impala(cfg)
    assert result.step >= 300_000
    assert result.final_return >= 400, f"mean of the last 20 episodes {result.final_return:.1f} at the end"
