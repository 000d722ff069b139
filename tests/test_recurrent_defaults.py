"""`--model.core` carries what a recurrent core needs to learn into the defaults, for PPO, APPO and R2D2.

The learning tests (test_learning_recurrent.py, test_recurrent_appo_learning.py,
test_r2d2_learning.py) check that these defaults learn; these check that the CLI and a Python
caller get them, that feed-forward defaults are untouched, and that every family's recurrent
defaults form a config the trainers accept.
"""
import dataclasses

import pytest

from seedpool.cli import train_config
from seedpool.trainers.impala import impala_defaults
from seedpool.trainers.ppo import ppo_defaults
from seedpool.trainers.r2d2 import r2d2_defaults

USER_ENV = "pomdp_envs:CartPoleNoVel-v0"  # a user's module: the "anything else" family
DEFAULTS = {"ppo": ppo_defaults, "impala": impala_defaults, "r2d2": r2d2_defaults}


@pytest.mark.parametrize("algo", ["ppo", "impala", "r2d2"])
@pytest.mark.parametrize("core", ["lstm", "gru"])
@pytest.mark.parametrize("spelling", ["split", "equals"])
def test_the_cli_and_a_python_caller_get_the_same_recurrent_defaults(algo, core, spelling):
    option = ["--model.core", core] if spelling == "split" else [f"--model.core={core}"]
    cfg = train_config(algo, ["--env", USER_ENV, *option])
    assert cfg == DEFAULTS[algo](USER_ENV, core=core)
    assert cfg.model.core == core


@pytest.mark.parametrize("env", [USER_ENV, "CartPole-v1"])
def test_a_recurrent_core_brings_normalisation_epochs_and_sizes(env):
    ppo = train_config("ppo", ["--env", env, "--model.core", "lstm"])
    assert ppo.model.obs_norm and ppo.ppo.reward_norm and ppo.model.critic_core
    assert (ppo.ppo.update_epochs, ppo.ppo.num_minibatches, ppo.model.core_size, ppo.model.hidden_sizes) == (20, 1, 64, ())
    assert ppo.total_timesteps == 200_000
    appo = train_config("impala", ["--env", env, "--model.core", "lstm"])
    assert appo.model.obs_norm and appo.model.critic_core and appo.impala.reward_scale == 0.1
    assert (appo.impala.update_epochs, appo.impala.unroll_length, appo.impala.unrolls_per_batch) == (20, 32, 8)
    assert appo.total_timesteps == 300_000 and not appo.acting.serial


def test_options_given_beside_the_core_still_win():
    cfg = train_config("ppo", ["--env", USER_ENV, "--model.core", "lstm", "--ppo.update-epochs", "5",
                               "--model.no-obs-norm", "--total-timesteps", "1000"])
    assert (cfg.ppo.update_epochs, cfg.model.obs_norm, cfg.total_timesteps) == (5, False, 1000)
    assert cfg.ppo.reward_norm


@pytest.mark.parametrize("algo", ["ppo", "impala"])
@pytest.mark.parametrize("env", ["CartPole-v1", USER_ENV, "Pong-v5"])
def test_feed_forward_defaults_do_not_change(algo, env):
    assert train_config(algo, ["--env", env]) == DEFAULTS[algo](env)
    assert train_config(algo, ["--env", env, "--model.core", "none"]) == DEFAULTS[algo](env)


def test_plain_cartpole_ppo_keeps_its_tuned_settings():
    cfg = train_config("ppo", ["--env", "CartPole-v1"])
    assert (cfg.ppo.num_steps, cfg.ppo.update_epochs, cfg.ppo.num_minibatches, cfg.total_timesteps) == (32, 20, 1, 100_000)
    assert cfg.model.core == "none" and not cfg.model.obs_norm and not cfg.ppo.reward_norm
    assert cfg.model.hidden_sizes == (64, 64)


@pytest.mark.parametrize("env", ["Pong-v5", "HalfCheetah-v4", "Pendulum-v1", "CartPole-v1", USER_ENV])
def test_every_familys_recurrent_ppo_defaults_hold_whole_sequences_per_minibatch(env):
    # train_ppo refuses more minibatches than envs with a core (each minibatch is whole env sequences).
    cfg = ppo_defaults(env, core="lstm")
    plain = ppo_defaults(env)
    assert cfg.ppo.num_minibatches <= cfg.num_envs
    if env == "Pong-v5":  # images: scaled already, nothing to standardise
        assert not cfg.model.obs_norm and dataclasses.replace(cfg, model=plain.model) == plain


def test_help_shows_the_recurrent_defaults(capsys):
    with pytest.raises(SystemExit):
        train_config("ppo", ["--env", USER_ENV, "--model.core", "lstm", "--help"])
    text = capsys.readouterr().out
    assert "--model.core lstm" in text and "200000" in text
