"""`seedpool train sac|td3` end to end on tiny budgets: a run folder, resume (with the replay when
saved, the temperature, targets and optimizers as they were), eval and plot of the saved policy."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.cli import main, parse_command
from seedpool.experiment import load_checkpoint
from seedpool.experiment.evaluate import evaluate_run
from seedpool.replay import REPLAY_FILE
from training_spy import spy_training

OBS_SPACE = gym.spaces.Box(np.array([-1, -1, -8], np.float32), np.array([1, 1, 8], np.float32))  # Pendulum's
ACTION_SPACE = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
TINY = ["--env", "Pendulum-v1", "--seed", "3", "--progress", "off", "--no-tensorboard", "--backend", "serial",
        "--num-envs", "2", "--model.hidden-sizes", "16", "16", "--env-options", "max_episode_steps", "50"]


def _spy(monkeypatch, seen: list) -> None:
    """Record the learner's state when the run starts (after any restore) and ends (SAC and
    TD3 share the wiring)."""
    def start(t):
        learner, sampler = t.learner, t.loop.sampler
        seen.append({"start_version": learner.version, "start_replay": len(learner.replay),
                     "start_env_steps": learner.env_steps, "start_model": _model(learner),
                     "start_sampler": sampler.env_steps})

    def end(t):
        learner = t.learner
        seen[-1].update(end_version=learner.version, end_replay=len(learner.replay), run_dir=t.run.dir,
                        end_model=_model(learner), end_step=t.run.step, learner=learner.learner)

    spy_training(monkeypatch, start, end)


def _model(learner) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in learner.model.parameters()]).clone()


@pytest.mark.parametrize("algo, section", [("sac", "sac"), ("td3", "td3")])
def test_save_replay_and_resume_continue_the_learner_and_its_replay(algo, section, tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    args = [*TINY, "--runs-dir", str(tmp_path), f"--{section}.learning-starts", "50", f"--{section}.utd-ratio", "1",
            f"--{section}.minibatch-size", "16", f"--{section}.buffer-size", "5000", "--save-replay"]
    assert main(["train", algo, *args, "--total-timesteps", "150"]) == 0
    first = seen[0]
    run_dir = first["run_dir"]
    # Each env's step after its first episode's end (at 50) is a reset step, which stores no row.
    assert (run_dir / REPLAY_FILE).exists() and first["end_replay"] == 150 - 2
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", algo)
    assert set(ckpt["optimizer"]) >= {"critic", "actor"}
    # utd 1: a critic step per env step from the round (of 2 envs) that brings the replay to 50 rows
    assert first["end_version"] == 150 - 48
    if algo == "sac":
        saved_alpha = float(ckpt["learner"]["log_alpha"])
        assert saved_alpha != pytest.approx(np.log(0.2))  # the temperature was tuned
    assert main(["train", algo, "--resume", str(run_dir), "--total-timesteps", "200"]) == 0
    resumed = seen[1]
    assert resumed["run_dir"] == run_dir
    assert resumed["start_replay"] == 148 and resumed["start_version"] == first["end_version"]
    assert resumed["start_sampler"] == 150 and resumed["start_env_steps"] == 150
    assert torch.equal(resumed["start_model"], first["end_model"])
    assert resumed["end_version"] == first["end_version"] + 50 and resumed["end_replay"] == 198
    if algo == "sac":
        assert float(resumed["learner"].alpha.log()) != saved_alpha  # restored, then tuned on
    result = evaluate_run(run_dir, episodes=2, num_envs=2, backend="serial")
    assert len(result.returns) == 2 and all(-1000 < r <= 0 for r in result.returns)
    assert set(result.lengths) == {50}
    assert main(["plot", str(run_dir)]) == 0 and (run_dir / "curves.png").exists()


def test_a_resume_without_a_saved_replay_refills_it_before_learning(tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    args = [*TINY, "--runs-dir", str(tmp_path), "--sac.learning-starts", "50", "--sac.minibatch-size", "16",
            "--sac.utd-ratio", "1"]
    assert main(["train", "sac", *args, "--total-timesteps", "100"]) == 0
    assert not (seen[0]["run_dir"] / REPLAY_FILE).exists()
    assert main(["train", "sac", "--resume", str(seen[0]["run_dir"]), "--total-timesteps", "200"]) == 0
    resumed = seen[1]
    assert resumed["start_replay"] == 0 and resumed["end_replay"] == 100  # fresh episodes: no reset step
    # Refilled up to learning_starts first, then one critic step per env step.
    assert resumed["end_version"] - resumed["start_version"] == 100 - 48


def test_ddpg_and_the_update_to_data_ratio_are_options(tmp_path, capsys):
    cfg = parse_command(["train", "td3", "--env", "Pendulum-v1", "--td3.policy-noise", "0",
                         "--td3.policy-frequency", "1", "--model.num-critics", "1", "--td3.utd-ratio", "2"])
    assert (cfg.td3.policy_noise, cfg.td3.policy_frequency, cfg.model.num_critics, cfg.td3.utd_ratio) == (0, 1, 1, 2)
    assert main(["train", "td3", *TINY, "--runs-dir", str(tmp_path), "--td3.learning-starts", "64",
                 "--td3.minibatch-size", "16", "--td3.policy-noise", "0", "--td3.policy-frequency", "1",
                 "--model.num-critics", "1", "--td3.utd-ratio", "2", "--total-timesteps", "128"]) == 0
    run_dir = next(tmp_path.iterdir())
    with open(run_dir / "metrics.csv") as f:
        steps = [float(row["value"]) for row in csv.DictReader(f) if row["name"] == "charts/gradient_steps"]
    # Two critic steps per env step from the round (of 2 envs) that brings the replay to 64 rows.
    assert steps[-1] == 2 * (128 - 62)
    capsys.readouterr()
    assert main(["train", "sac", "--env", "Pendulum-v1", "--sac.utd-ratio", "0.25", "--dry-run"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["algo"] == "sac" and printed["config"]["sac"]["utd_ratio"] == 0.25


def test_sac_trains_on_a_mujoco_task(tmp_path):
    pytest.importorskip("mujoco", reason="MuJoCo tasks need the mujoco extra: pip install 'seedpool[mujoco]'")
    assert main(["train", "sac", "--env", "HalfCheetah-v5", "--total-timesteps", "120", "--sac.learning-starts", "60",
                 "--sac.minibatch-size", "16", "--model.hidden-sizes", "16", "--progress", "off",
                 "--no-tensorboard", "--runs-dir", str(tmp_path)]) == 0
    ckpt = load_checkpoint(next(tmp_path.iterdir()) / "checkpoint.pt", "sac")
    assert ckpt["learner"]["version"] == 120 - 59  # learning from the step that brought the replay to 60 rows
    assert ckpt["model"]["scaler.scale"].shape == (6,)


def test_a_missing_mujoco_is_reported_with_the_extra_to_install():
    # A fresh interpreter in which mujoco cannot be imported, as on a machine without the extra.
    code = ("import sys; sys.modules['mujoco'] = None\n"
            "import seedpool\n"
            "try:\n    seedpool.make('Hopper-v5', num_envs=1, backend='serial')\n"
            "except ValueError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert "needs the mujoco package: pip install 'seedpool[mujoco]'" in out.stdout, out.stdout + out.stderr


def test_observation_statistics_go_through_checkpoint_resume_and_eval(tmp_path, monkeypatch):
    from seedpool.experiment.evaluate import load_run_policy

    seen: list = []
    def norm(t):
        return t.learner.model.obs_norm

    spy_training(monkeypatch, lambda t: seen.append({"start": (norm(t).count.item(), norm(t).mean.clone())}),
                 lambda t: seen[-1].update(end=(norm(t).count.item(), norm(t).mean.clone()), run_dir=t.run.dir))
    args = [*TINY, "--runs-dir", str(tmp_path), "--td3.learning-starts", "40", "--td3.minibatch-size", "16",
            "--model.obs-norm"]
    assert main(["train", "td3", *args, "--total-timesteps", "80"]) == 0
    first = seen[0]
    assert first["start"][0] == 0
    assert first["end"][0] == 2 + 80  # the two reset observations and every one of the 80 env steps
    ckpt = load_checkpoint(first["run_dir"] / "checkpoint.pt", "td3")
    assert ckpt["model"]["obs_norm.count"].item() == 82
    torch.testing.assert_close(ckpt["model"]["obs_norm.mean"], first["end"][1])
    assert main(["train", "td3", "--resume", str(first["run_dir"]), "--total-timesteps", "120"]) == 0
    resumed = seen[1]
    assert resumed["start"][0] == 82 + 2  # continued from the checkpoint, plus the fresh reset
    spaces = (OBS_SPACE, ACTION_SPACE)
    policy = load_run_policy(first["run_dir"], spaces)
    torch.testing.assert_close(policy.obs_norm.mean, resumed["end"][1])
    obs = torch.tensor([[1.0, 0.0, 0.5]])
    expected = policy.scaler.to_env(policy.actor(policy.obs_norm(obs)))
    torch.testing.assert_close(policy.act(obs, deterministic=True)[0], expected)


def test_mujoco_ids_get_the_papers_defaults():
    from seedpool.envs.registry import is_mujoco

    assert is_mujoco("HalfCheetah-v5") and is_mujoco("Humanoid-v5")
    assert not any(is_mujoco(task) for task in ("Pendulum-v1", "Pong-v5", "MinAtar/Breakout-v1", "NoSuchTask-v0"))
    ppo = parse_command(["train", "ppo", "--env", "HalfCheetah-v5"])
    assert (ppo.num_envs, ppo.ppo.num_steps, ppo.ppo.num_minibatches, ppo.ppo.update_epochs) == (1, 2048, 32, 10)
    assert ppo.ppo.learning_rate == 3e-4 and ppo.total_timesteps == 1_000_000
    sac = parse_command(["train", "sac", "--env", "Hopper-v5"])
    td3 = parse_command(["train", "td3", "--env", "Hopper-v5"])
    assert sac.model.hidden_sizes == td3.model.hidden_sizes == (256, 256)
    assert (sac.sac.learning_starts, td3.td3.learning_starts) == (5_000, 25_000)
    # One env in this process: the learner takes every core (torch's default), Pendulum's small
    # networks keep one thread, as the other trainers do.
    assert sac.torch_threads == td3.torch_threads == 0
    assert parse_command(["train", "sac", "--env", "Pendulum-v1"]).torch_threads == 1
    assert parse_command(["train", "sac", "--env", "Hopper-v5", "--torch-threads", "1"]).torch_threads == 1


@pytest.mark.parametrize("algo, section", [("sac", "sac"), ("td3", "td3")])
def test_stop_at_return_ends_the_run_once_the_last_20_episodes_reach_it(algo, section, tmp_path, monkeypatch):
    """As PPO's and IMPALA's: the run stops after the update where the mean of the last 20
    episodes first reaches the target (Pendulum's returns are negative: -1e9 is reached as soon
    as 20 episodes have ended), checkpointed; an unreachable target runs the whole budget."""
    seen: list = []
    _spy(monkeypatch, seen)
    args = [*TINY, "--runs-dir", str(tmp_path), f"--{section}.learning-starts", "2000",
            f"--{section}.buffer-size", "5000", "--total-timesteps", "3000"]
    assert main(["train", algo, *args, "--stop-at-return", "-1e9"]) == 0
    # 2 envs x 50-step episodes (+ a reset step each): the 20th episode ends near 1,020 env steps
    assert 1000 <= seen[0]["end_step"] < 1100
    assert load_checkpoint(seen[0]["run_dir"] / "checkpoint.pt", algo)["counters"]["step"] == seen[0]["end_step"]
    assert main(["train", algo, *args, "--stop-at-return", "0"]) == 0
    assert seen[1]["end_step"] >= 3000
