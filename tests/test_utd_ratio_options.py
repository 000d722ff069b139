"""One name for learning per env step: ``utd_ratio`` (gradient steps per env step) in every
replay-based trainer, and the old options (DQN's gradient_steps, Ape-X's and R2D2's replay_ratio)
still read, converted, on the command line and from a resumed run's config.json."""
import json

import pytest

from seedpool.cli import UsageError, train_config
from seedpool.experiment.config import config_to_dict
from seedpool.trainers.r2d2 import r2d2_defaults

# (algo, old options, the same config in today's options); CartPole's defaults: DQN 8 envs,
# Ape-X 256-row minibatches, R2D2 40-step sequences with burn-in 10 and 32 sequences a step.
SAME = [
    ("dqn", ["--dqn.gradient-steps", "16", "--dqn.train-frequency", "128"],
     ["--dqn.train-frequency", "128", "--dqn.utd-ratio", "0.125"]),
    # A round is train_frequency env steps rounded down to whole steps per env: 3 x 3 here.
    ("dqn", ["--num-envs", "3", "--dqn.train-frequency", "10", "--dqn.gradient_steps=6"],
     ["--num-envs", "3", "--dqn.train-frequency", "10", "--dqn.utd-ratio", repr(6 / 9)]),
    ("apex", ["--apex.replay-ratio", "4"], ["--apex.utd-ratio", "0.015625"]),
    ("apex", ["--apex.replay-ratio", "4", "--dqn.minibatch-size", "64"],
     ["--dqn.minibatch-size", "64", "--apex.utd-ratio", "0.0625"]),
    ("r2d2", ["--r2d2.replay-ratio", "16"], ["--r2d2.utd-ratio", repr(16 / (30 * 32))]),
    ("r2d2", ["--r2d2.replay_ratio=9", "--r2d2.burn-in", "4"], ["--r2d2.burn-in", "4", "--r2d2.utd-ratio", repr(9 / (36 * 32))]),
]


@pytest.mark.parametrize("algo, old, new", SAME)
def test_an_old_option_gives_the_config_of_todays_with_one_deprecation_line(algo, old, new, capsys):
    from_old = train_config(algo, ["--env", "CartPole-v1", *old])
    err = capsys.readouterr().err.strip().splitlines()
    from_new = train_config(algo, ["--env", "CartPole-v1", *new])
    assert config_to_dict(from_old) == config_to_dict(from_new)
    flag = next(arg for arg in old if "ratio" in arg or "gradient" in arg).split("=")[0].replace("_", "-")
    assert len(err) == 1 and err[0].startswith(f"seedpool: deprecated: {flag} ")
    assert f"is now --{algo}.utd-ratio " in err[0] and err[0].endswith("; read as such")
    assert capsys.readouterr().err == ""  # today's option: no note


@pytest.mark.parametrize("algo, env", [("sac", "Pendulum-v1"), ("td3", "Pendulum-v1"), ("dqn", "CartPole-v1"),
                                       ("apex", "CartPole-v1"), ("r2d2", "CartPole-v1")])
def test_every_replay_trainer_takes_utd_ratio_in_gradient_steps_per_env_step(algo, env, capsys):
    cfg = train_config(algo, ["--env", env, f"--{algo}.utd-ratio", "0.75"])
    assert getattr(cfg, algo).utd_ratio == 0.75 and capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["--dqn.gradient-steps", "2", "--dqn.utd-ratio", "0.5"],
                                  ["--dqn.gradient-steps", "many"], ["--dqn.gradient-steps"]])
def test_an_old_option_given_twice_over_or_without_a_number_is_bad_input(argv):
    with pytest.raises(UsageError, match="gradient-steps"):
        train_config("dqn", ["--env", "CartPole-v1", *argv])


def test_an_old_r2d2_config_json_resumes_with_its_replay_ratio_converted(tmp_path, capsys):
    today = config_to_dict(r2d2_defaults("CartPole-v1"))
    old = json.loads(json.dumps(today))
    del old["r2d2"]["utd_ratio"]
    old["r2d2"]["replay_ratio"] = 16.0  # learned sequence steps (30 a sequence, 32 sequences) per env step
    (tmp_path / "config.json").write_text(json.dumps({"algo": "r2d2", "config": old}))
    cfg = train_config("r2d2", ["--resume", str(tmp_path)])
    assert config_to_dict(cfg) == {**today, "resume": str(tmp_path)}
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("seedpool: deprecated: r2d2.replay_ratio=16 ")
