"""The `seedpool` command line: bad input, Ctrl-C, resume, eval and plot."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from seedpool.cli import main

TINY = ["--num-envs", "2", "--ppo.num-steps", "32", "--ppo.update-epochs", "1", "--backend", "serial",
        "--no-tensorboard", "--progress", "off"]


def _train(tmp_path: Path, *extra: str) -> int:
    return main(["train", "ppo", "--env", "CartPole-v1", "--runs-dir", str(tmp_path / "runs"), *TINY, *extra])


def _runs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "runs"
    return sorted(root.iterdir()) if root.exists() else []


@pytest.fixture
def run_dir(tmp_path) -> Path:
    assert _train(tmp_path, "--total-timesteps", "256") == 0
    (run,) = _runs(tmp_path)
    return run


@pytest.mark.parametrize("args, message", [
    (["--env", "CartPol-v1"], "unknown task id 'CartPol-v1'.*Did you mean 'CartPole-v1'"),
    (["--env", "no_such_module:Task-v0"], "unknown task id 'no_such_module:Task-v0'.*No module named"),
    (["--model.kind", "cnn"], "CNN policy needs image observations.*Use --model.kind mlp"),
    (["--device", "cuda:7"] if not torch.cuda.is_available() else ["--num-envs", "0"], "device|num_envs"),
])
def test_bad_training_input_fails_clearly_and_leaves_no_run_folder(tmp_path, capsys, args, message):
    assert _train(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("seedpool: error:") and re.search(message, err), err
    assert _runs(tmp_path) == []


def test_unknown_option_and_unknown_algorithm_exit_nonzero(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _train(tmp_path, "--learning-rat", "3")
    assert exc.value.code == 2
    assert main(["train", "rainbow", "--env", "CartPole-v1"]) == 2
    assert "unknown algorithm 'rainbow'; available: ppo, impala, dqn, apex" in capsys.readouterr().err
    assert main(["fly"]) == 2
    assert _runs(tmp_path) == []


def test_bad_option_value_is_one_line_without_traceback(tmp_path, capsys):
    """A value seedpool's own checks refuse: one line, exit code 2, no traceback."""
    assert _train(tmp_path, "--sampler", "double", "--num-envs", "3") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("seedpool: error: --sampler double"), err
    assert "Traceback" not in err and "bug" not in err
    assert _runs(tmp_path) == []


@pytest.mark.parametrize("kind", [ValueError, TypeError, KeyError])
def test_an_internal_error_shows_its_traceback_and_asks_for_a_report(tmp_path, capsys, monkeypatch, kind):
    """A plain exception from inside seedpool is a bug, not bad input: traceback, report line, exit 1."""
    import seedpool.trainers.ppo

    def broken(cfg):
        raise kind("deep inside the trainer")

    monkeypatch.setattr(seedpool.trainers.ppo, "train_ppo", broken)
    assert _train(tmp_path, "--total-timesteps", "64") == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in broken" in err
    assert f"{kind.__name__}: " in err and "deep inside the trainer" in err
    assert "seedpool: error:" not in err
    report = err.strip().splitlines()[-1]
    assert "bug in seedpool" in report and "seedpool train ppo --env CartPole-v1" in report
    assert f"torch {torch.__version__}" in report and "Python 3." in report and "traceback" in report


def test_a_thread_that_failed_on_bad_input_is_still_one_line(capsys):
    """A run's component that failed with seedpool's own error (wrapped as the runner does) is bad input."""
    from seedpool.cli import run_command
    from seedpool.errors import ConfigError

    def command(argv):
        try:
            raise ConfigError("the env's observation space cannot be stored")
        except ConfigError as err:
            raise RuntimeError(f"the learner failed: {err}") from err

    assert run_command(command, []) == 2
    assert capsys.readouterr().err == "seedpool: error: the learner failed: the env's observation space cannot be stored\n"


def test_resume_refuses_corrupt_foreign_and_other_algorithm_runs(run_dir, capsys):
    ckpt = run_dir / "checkpoint.pt"
    good = ckpt.read_bytes()
    before = (run_dir / "metrics.csv").read_text()
    ckpt.write_bytes(good[: len(good) // 2])
    assert main(["train", "ppo", "--resume", str(run_dir)]) == 2
    assert "truncated, corrupt" in capsys.readouterr().err
    torch.save({"weights": torch.zeros(3)}, ckpt)
    assert main(["train", "ppo", "--resume", str(run_dir)]) == 2
    assert "not a seedpool checkpoint" in capsys.readouterr().err
    assert (run_dir / "metrics.csv").read_text() == before  # a refused resume touches nothing
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "algo": "impala"}))
    assert main(["train", "ppo", "--resume", str(run_dir)]) == 2
    assert "is a 'impala' run: resume it with `seedpool train impala --resume" in capsys.readouterr().err
    assert main(["train", "ppo", "--resume", str(run_dir.parent / "nope")]) == 2


def test_resume_continues_in_the_same_folder_and_eval_and_plot_read_it(run_dir, tmp_path, capsys):
    assert main(["train", "ppo", "--resume", str(run_dir), "--total-timesteps", "512"]) == 0
    assert _runs(tmp_path) == [run_dir]
    assert json.loads((run_dir / "config.json").read_text())["config"]["total_timesteps"] == 512
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert state["counters"]["step"] == 512 and state["counters"]["updates"] == 8
    from seedpool.experiment.metrics import read_metrics

    names = {name for _, _, name, _ in read_metrics(run_dir / "metrics.csv")}
    assert {"charts/episodic_return", "charts/SPS", "losses/policy_loss", "losses/value_loss", "losses/entropy",
            "losses/approx_kl", "time/env", "time/inference", "time/learn"} <= names
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "3"]) == 0
    assert "over 3 episodes" in capsys.readouterr().out
    out = tmp_path / "c.png"
    assert main(["plot", str(run_dir), str(run_dir), "--out", str(out)]) == 0 and out.stat().st_size > 0


def test_video_is_written(run_dir, capsys):
    pytest.importorskip("pygame", reason="classic-control rendering needs pygame")
    assert main(["eval", str(run_dir), "--episodes", "1", "--video"]) == 0
    videos = list((run_dir / "videos").iterdir())
    assert len(videos) == 1 and videos[0].stat().st_size > 1000


def test_ctrl_c_saves_a_checkpoint_and_leaves_no_process(tmp_path):
    cmd = [sys.executable, "-m", "seedpool.cli", "train", "ppo", "--env", "CartPole-v1", "--backend", "process",
           "--num-envs", "4", "--total-timesteps", "100000000", "--runs-dir", str(tmp_path / "runs"),
           "--progress", "log", "--log-every-s", "0", "--no-tensorboard"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        lines = []
        while not any(line.startswith("step ") for line in lines):  # training is under way
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the process backend should have started workers"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "continue with: seedpool train ppo --resume" in out
    (run,) = _runs(tmp_path)
    assert (run / "checkpoint.pt").is_file()
    deadline = time.monotonic() + 30  # ends when they are gone; generous for a loaded machine
    while any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children):
        assert time.monotonic() < deadline, f"left running: {children}"
        time.sleep(0.1)
    # The checkpoint is usable: the run loads it and goes on where it stopped.
    before = torch.load(run / "checkpoint.pt", weights_only=True)
    step, version = before["counters"]["step"], before["learner"]["version"]
    assert main(["train", "ppo", "--resume", str(run), "--total-timesteps", str(step + 1024),
                 "--progress", "off"]) == 0
    after = torch.load(run / "checkpoint.pt", weights_only=True)
    assert after["counters"]["step"] == step + 1024  # 4 envs x 32 steps per update: 8 more updates
    assert after["learner"]["version"] == version + 8
    adam_steps = [float(c["optimizer"]["state"][0]["step"]) for c in (before, after)]
    assert adam_steps[1] == adam_steps[0] + 8 * 20  # Adam's state came along: 20 epochs per update
    assert any(not torch.equal(after["model"][k], before["model"][k]) for k in before["model"])


def test_bench_is_reached_through_the_cli(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    assert exc.value.code == 0
    assert "seedpool bench" in capsys.readouterr().out


FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"
DQN_ONLY = ["--dqn.exploration-fraction", "--dqn.exploration-initial-eps", "--dqn.exploration-final-eps",
            "--dqn.train-frequency", "--dqn.utd-ratio"]


def _help(algo: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["train", algo, "--env", "CartPole-v1", "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_value_based_help_lists_only_options_that_act(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # no option name wrapped across lines
    apex, dqn = _help("apex", capsys), _help("dqn", capsys)
    for text in (apex, dqn):
        assert "--dqn.minibatch-size" in text and "--dqn.batch-size" not in text
    assert all(option in dqn for option in DQN_ONLY)
    assert not [option for option in DQN_ONLY if option in apex]
    assert "--apex.utd-ratio" in apex and "--apex.epsilon" in apex
    assert "--dqn.gradient-steps INT" not in dqn and "--apex.replay-ratio FLOAT" not in apex  # read, not listed
    # PPO's exact-resume action log: no other trainer has one.
    assert "--replay-limit" in _help("ppo", capsys)
    assert not [text for text in (apex, dqn, _help("impala", capsys)) if "--replay-limit" in text]


@pytest.mark.parametrize("algo", ["ppo", "impala", "dqn", "apex"])
def test_run_folders_of_every_trainer_written_before_still_load_their_config(algo, tmp_path):
    from seedpool.cli import train_config

    run = shutil.copytree(FIXTURES / algo, tmp_path / algo)
    old = json.loads((run / "config.json").read_text())["config"]
    cfg = train_config(algo, ["--resume", str(run)])
    assert (cfg.seed, cfg.total_timesteps, cfg.model.hidden_sizes) == (old["seed"], old["total_timesteps"], (8, 8))
    assert hasattr(cfg, "replay_limit") == (algo == "ppo")


@pytest.mark.parametrize("spelling", [["--dqn.batch-size", "17"], ["--dqn.batch_size=17"]])
@pytest.mark.parametrize("algo", ["dqn", "apex"])
def test_the_old_minibatch_option_is_read_with_one_deprecation_line(algo, spelling, capsys):
    from seedpool.cli import train_config

    cfg = train_config(algo, ["--env", "CartPole-v1", *spelling])
    assert cfg.dqn.minibatch_size == 17
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"seedpool: deprecated: {spelling[0].split('=')[0]} is now --dqn.minibatch-size; read as such"]


@pytest.mark.parametrize("algo", ["dqn", "apex"])
def test_old_value_based_run_folders_still_load_their_config(algo, tmp_path, capsys):
    from seedpool.cli import train_config

    run = tmp_path / algo
    shutil.copytree(FIXTURES / algo, run)
    old = json.loads((run / "config.json").read_text())["config"]["dqn"]
    cfg = train_config(algo, ["--resume", str(run)])
    assert cfg.dqn.minibatch_size == old["batch_size"] == 64
    assert (cfg.dqn.buffer_size, cfg.dqn.learning_starts, cfg.model.hidden_sizes) == (4096, 256, (8, 8))
    # Ape-X's copy of DQN's epsilon schedule and pacing never acted: they are gone, not carried.
    assert hasattr(cfg.dqn, "train_frequency") == (algo == "dqn")
    err = capsys.readouterr().err
    if algo == "dqn":  # 128 gradient steps per round of 256 env steps (8 envs x 32)
        assert (cfg.dqn.train_frequency, cfg.dqn.utd_ratio) == (old["train_frequency"], 128 / 256)
        assert "deprecated: dqn.gradient_steps=128 (gradient steps per round" in err
    else:  # 4 samples learned per env step, 64 a minibatch
        assert cfg.apex.utd_ratio == 4 / 64
        assert "deprecated: apex.replay_ratio=4 (samples learned per env step)" in err
    assert "deprecated: dqn.batch_size in the run's config.json is now dqn.minibatch_size" in err


@pytest.mark.parametrize("algo", ["ppo", "impala", "dqn", "apex", "r2d2", "sac", "td3"])
def test_every_trainer_takes_stop_at_return(algo):
    from seedpool.cli import train_config

    env = "Pendulum-v1" if algo in ("sac", "td3") else "CartPole-v1"
    assert train_config(algo, ["--env", env]).stop_at_return is None
    assert train_config(algo, ["--env", env, "--stop-at-return", "5000"]).stop_at_return == 5000
