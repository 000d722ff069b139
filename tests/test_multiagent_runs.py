"""A multi-agent run is a run like any other: CLI, checkpoint and resume, eval, per-group metrics, bad options."""

import dataclasses
import json
import subprocess
import sys

import pytest

pytest.importorskip("pettingzoo")

from seedpool.errors import ConfigError  # noqa: E402
from seedpool.experiment.evaluate import evaluate_run  # noqa: E402
from seedpool.experiment.metrics import series  # noqa: E402
from seedpool.models.team import MultiAgentConfig  # noqa: E402
from seedpool.trainers.ppo import build_ppo, ppo_defaults, train_ppo  # noqa: E402


def _cfg(tmp_path, env="simple_spread_v3", total=4_800, **changes):
    cfg = ppo_defaults(env)
    ppo = dataclasses.replace(cfg.ppo, num_steps=25, update_epochs=2)
    return dataclasses.replace(cfg, env=env, num_envs=4, total_timesteps=total, ppo=ppo, runs_dir=tmp_path,
                               progress="off", tensorboard=False, **changes)


def test_a_run_resumes_and_its_saved_team_policy_evaluates(tmp_path):
    first = train_ppo(_cfg(tmp_path, total=2_400))
    resumed = train_ppo(dataclasses.replace(_cfg(tmp_path), resume=first.run_dir))
    steps, _, _ = series(resumed.run_dir / "metrics.csv", "charts/episodic_return")
    assert max(steps) > 2_400
    result = evaluate_run(resumed.run_dir, episodes=12, num_envs=2)
    assert len(result.returns) == 12 and all(n == 25 for n in result.lengths)


def test_per_group_policies_log_each_groups_returns(tmp_path):
    result = train_ppo(_cfg(tmp_path, env="simple_tag_v3", ma=MultiAgentConfig(policies="per-group")))
    for group in ("adversary", "agent"):
        steps, _, values = series(result.run_dir / "metrics.csv", f"charts/episodic_return/{group}")
        assert len(values) > 0
    saved = json.loads((result.run_dir / "config.json").read_text())
    assert saved["config"]["ma"]["policies"] == "per-group"


def test_a_central_critic_needs_the_envs_state(tmp_path):
    with pytest.raises(ConfigError, match="state"):
        build_ppo(_cfg(tmp_path, env="agent_envs:countdown", ma=MultiAgentConfig(critic="central")))


def test_the_cli_trains_a_module_function_env(tmp_path):
    out = subprocess.run([sys.executable, "-m", "seedpool.cli", "train", "ppo", "--env", "agent_envs:switches",
                          "--total-timesteps", "1600", "--num-envs", "2", "--ppo.num-steps", "20",
                          "--ma.agent-id", "--runs-dir", str(tmp_path), "--progress", "off"],
                         capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parent)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "agent rows" in out.stdout + out.stderr


def test_impala_trains_a_multi_agent_env_on_central_inference(tmp_path):
    from seedpool.trainers.impala import impala_defaults, train_impala

    cfg = dataclasses.replace(impala_defaults("simple_spread_v3"), total_timesteps=6_000, num_envs=8,
                              ma=MultiAgentConfig(policies="per-group"), runs_dir=tmp_path,
                              progress="off", tensorboard=False)
    result = train_impala(cfg)
    steps, _, values = series(result.run_dir / "metrics.csv", "charts/episodic_return")
    assert len(values) >= 8 and result.step >= 6_000
    assert len(evaluate_run(result.run_dir, episodes=6, num_envs=2).returns) == 6


def test_inactive_rows_are_invalid_steps_of_their_unrolls():
    import numpy as np

    from seedpool.inference.unrolls import TrajectoryBuffers

    buf = TrajectoryBuffers(num_slots=2, unroll_length=2, obs_shape=(1,), obs_dtype=np.float32)
    no = np.zeros(2, bool)
    for t in range(3):
        active = np.array([True, t == 0])  # slot 1's agent is done after its first step
        done, _ = buf.observe(np.arange(2), np.zeros((2, 1), np.float32), np.zeros(2, np.float32), no, no, no, active)
        if t < 2:
            buf.record_action(np.arange(2), np.zeros(2, np.int64), np.zeros(2, np.float32), 0)
    assert done is not None
    np.testing.assert_array_equal(done.valid, [[True, True], [True, False]])
