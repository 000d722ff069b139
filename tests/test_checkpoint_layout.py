"""One checkpoint layout for every trainer; checkpoints of format 1 (one layout per trainer,
written by the code of commit 32f471f: tests/fixtures/checkpoints_v1) still load, resume and
evaluate."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from seedpool.cli import main
from seedpool.experiment.checkpoint import VERSION, load_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"
ALGOS = ["ppo", "impala", "dqn", "apex"]
LAYOUT = {"format", "version", "algo", "model", "optimizer", "learner", "counters", "rng", "acting", "replay"}
QUIET = ["--progress", "off", "--no-tensorboard"]


def _old_run(tmp_path: Path, algo: str) -> Path:
    run = tmp_path / algo
    shutil.copytree(FIXTURES / algo, run)
    return run


@pytest.mark.parametrize("algo", ALGOS)
def test_a_format_1_checkpoint_loads_in_the_common_layout(algo):
    raw = torch.load(FIXTURES / algo / "checkpoint.pt", weights_only=True)
    assert raw["version"] == 1  # the fixture really is an old one
    state = load_checkpoint(FIXTURES / algo / "checkpoint.pt", algo)
    assert set(state) == LAYOUT and state["version"] == VERSION == 2
    assert {"version", "steps_trained"} <= set(state["learner"]) and "optimizer" not in state["learner"]
    assert state["optimizer"]["state"], "the optimizer's moments came along"
    assert (state["acting"] is not None) == (algo in ("ppo", "dqn"))  # the sync samplers keep state
    assert state["replay"] == ("replay.npz" if algo in ("dqn", "apex") else None)


@pytest.mark.parametrize("algo", ALGOS)
def test_a_format_1_run_resumes_and_is_saved_in_the_common_layout(tmp_path, algo):
    run = _old_run(tmp_path, algo)
    before = load_checkpoint(run / "checkpoint.pt")
    target = before["counters"]["step"] + 512
    assert main(["train", algo, "--resume", str(run), "--total-timesteps", str(target), *QUIET]) == 0
    after = torch.load(run / "checkpoint.pt", weights_only=True)
    assert set(after) == LAYOUT and after["version"] == 2 and after["algo"] == algo
    assert after["counters"]["step"] >= target
    assert after["learner"]["version"] > before["learner"]["version"]
    assert after["learner"]["steps_trained"] > before["learner"]["steps_trained"]
    if algo in ("dqn", "apex"):
        # The old run's replay came back: learning went on at once, without refilling first.
        assert after["learner"]["gradient_steps"] > before["learner"]["gradient_steps"]


@pytest.mark.parametrize("algo", ALGOS)
def test_a_format_1_run_evaluates(tmp_path, algo, capsys):
    run = _old_run(tmp_path, algo)
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "return" in capsys.readouterr().out.lower()


def test_every_trainer_writes_the_same_layout(tmp_path):
    common = ["--env", "CartPole-v1", "--runs-dir", str(tmp_path), "--model.hidden-sizes", "8", "8", *QUIET]
    budgets = {"ppo": ["--total-timesteps", "512", "--backend", "serial"],
               "impala": ["--total-timesteps", "1024"],
               "dqn": ["--total-timesteps", "1024", "--dqn.learning-starts", "256", "--backend", "serial"],
               "apex": ["--total-timesteps", "1024", "--dqn.learning-starts", "256", "--apex.utd-ratio", "0.0078125"]}
    for algo, budget in budgets.items():
        assert main(["train", algo, *common, *budget]) == 0
    runs = sorted(tmp_path.iterdir())
    assert len(runs) == 4
    for run in runs:
        state = torch.load(run / "checkpoint.pt", weights_only=True)
        assert set(state) == LAYOUT and state["version"] == 2, run.name
