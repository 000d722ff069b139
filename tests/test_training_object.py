"""Runs as objects (`seedpool.build_run` / `Training`): advance, pause, change, save, load.

The exactness tests use the serial backend and the serial twin of the central system: with
threads the OS decides the interleaving, so only the serial forms give bit-equal runs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import seedpool
from seedpool.errors import ConfigError
from seedpool.records import ActOutput

PPO = ["--env", "CartPole-v1", "--backend", "serial", "--progress", "off", "--no-tensorboard",
       "--total-timesteps", "4096", "--num-envs", "4"]


def _params(run) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in run.learner.model.parameters()]).clone()


def _ppo(tmp_path: Path, seed: int) -> seedpool.runs.Training:
    return seedpool.build_run("ppo", PPO + ["--seed", str(seed), "--runs-dir", str(tmp_path)])


def test_two_runs_advanced_in_turn_end_as_each_alone_with_the_same_change(tmp_path):
    def alone(seed: int, change_at: int | None) -> torch.Tensor:
        run = _ppo(tmp_path / f"alone{seed}", seed)
        if change_at is not None:
            run.advance(change_at)
            run.set_hyperparameters(learning_rate=3e-4, ent_coef=0.01)
        run.advance()
        params = _params(run)
        run.finish()
        return params

    a, b = _ppo(tmp_path / "a", 1), _ppo(tmp_path / "b", 2)
    a.advance(1024)
    b.advance(1024)
    a.advance(2048)
    a.set_hyperparameters(learning_rate=3e-4, ent_coef=0.01)
    b.advance(3000)
    a.advance()
    b.advance()
    together_a, together_b = _params(a), _params(b)
    assert a.step >= 4096 and b.step >= 4096
    a.finish()
    b.finish()
    alone_a, alone_b = alone(1, 2048), alone(2, None)
    torch.testing.assert_close(together_a, alone_a, rtol=0, atol=0)
    torch.testing.assert_close(together_b, alone_b, rtol=0, atol=0)
    assert not torch.equal(alone_a, alone(1, None))  # the change changed something
    saved = json.loads((a.dir / "config.json").read_text())["config"]["ppo"]
    assert saved["learning_rate"] == 3e-4 and saved["ent_coef"] == 0.01


def test_a_run_paused_saved_and_continued_in_a_fresh_process_equals_one_that_never_paused(tmp_path):
    whole = _ppo(tmp_path / "whole", 3)
    whole.advance()
    expected = _params(whole)
    whole.finish()

    paused = _ppo(tmp_path / "paused", 3)
    paused.advance(1500)
    paused.save()
    run_dir = paused.dir
    paused.close()
    out = tmp_path / "params.pt"
    script = ("import sys, torch, seedpool; r = seedpool.load_run(sys.argv[1]); r.advance(); "
              "torch.save(torch.cat([p.detach().flatten() for p in r.learner.model.parameters()]), sys.argv[2]); "
              "r.finish()")
    subprocess.run([sys.executable, "-c", script, str(run_dir), str(out)], check=True, timeout=240,
                   capture_output=True)
    torch.testing.assert_close(torch.load(out), expected, rtol=0, atol=0)


def test_hyperparameters_outside_the_live_set_are_refused_with_the_ones_that_can_change(tmp_path):
    run = _ppo(tmp_path, 1)
    try:
        assert run.hyperparameters()["ppo.learning_rate"] == pytest.approx(1e-3)
        with pytest.raises(ConfigError, match="ppo.learning_rate"):
            run.set_hyperparameters(num_steps=64)  # the rollout buffers are built for 32
        with pytest.raises(ConfigError, match="whole number"):
            run.set_hyperparameters(update_epochs=2.5)
        run.set_hyperparameters(target_kl=0.02)  # an unset optional number takes a value
        assert run.cfg.ppo.target_kl == 0.02
    finally:
        run.close()


def test_dqn_reads_a_changed_learning_rate_and_epsilon_at_the_next_round(tmp_path):
    run = seedpool.build_run("dqn", ["--env", "CartPole-v1", "--backend", "serial", "--progress", "off",
                                     "--no-tensorboard", "--runs-dir", str(tmp_path), "--total-timesteps", "4096",
                                     "--dqn.learning-starts", "256"])
    try:
        run.advance(1024)
        run.set_hyperparameters(**{"dqn.learning_rate": 1e-5, "exploration_final_eps": 0.5,
                                   "exploration_initial_eps": 0.5})
        run.advance(2048)
        assert run.learner.learner.optimizer.param_groups[0]["lr"] <= 1e-5
        sampler = run.loop.sampler
        assert sampler.epsilon(sampler.env_steps) == pytest.approx(0.5)
    finally:
        run.close()


def test_a_callback_sink_sees_every_logged_row(tmp_path):
    rows = []
    run = _ppo(tmp_path, 1)
    run.add_sink(lambda step, t, scalars: rows.append((step, scalars)))
    run.advance(2048)
    run.finish()
    names = {name for _, scalars in rows for name in scalars}
    assert {"charts/episodic_return", "losses/value_loss", "charts/SPS"} <= names
    assert rows[-1][0] >= 2048


def test_track_logs_to_weights_and_biases_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="pip install 'seedpool[wandb]'")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = seedpool.build_run("ppo", PPO + ["--seed", "1", "--runs-dir", str(tmp_path), "--track",
                                           "--total-timesteps", "1024"])
    run.train()
    offline = list((run.dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert offline and offline[0].stat().st_size > 0


class _ConstantAct:
    """A second policy that always takes action 1 (so its rows are told apart from policy 0's)."""

    def __call__(self, model, obs, state, first, slots, **extra) -> ActOutput:
        n = obs.shape[0]
        return ActOutput(torch.ones(n, dtype=torch.int64), torch.zeros(n), state)


def test_a_central_server_with_two_policies_acts_for_each_row_with_its_own(tmp_path):
    run = seedpool.build_run("impala", ["--env", "CartPole-v1", "--backend", "serial", "--acting.serial",
                                        "--progress", "off", "--no-tensorboard", "--runs-dir", str(tmp_path),
                                        "--total-timesteps", "3000", "--num-envs", "8", "--seed", "1"])
    server = run.loop.system.server
    other = server.add_policy(torch.nn.Linear(4, 2), _ConstantAct())
    server.assign(np.arange(4, 8), other)
    seen = []
    forward = server.on_unrolls
    server.on_unrolls = lambda unrolls: (seen.append(unrolls), forward(unrolls))
    try:
        run.advance()
    finally:
        run.close()
    slots = np.concatenate([u.slots for u in seen])
    actions = np.concatenate([u.actions.T for u in seen])  # [unrolls, T]
    logp = np.concatenate([u.logp.T for u in seen])
    mine = slots < 4
    assert mine.any() and (~mine).any()
    assert (actions[~mine] == 1).all() and (logp[~mine] == 0).all()
    assert set(np.unique(actions[mine])) == {0, 1} and (logp[mine] < 0).all()


def test_a_paused_threaded_run_takes_no_steps_until_it_advances_again(tmp_path):
    run = seedpool.build_run("impala", ["--env", "CartPole-v1", "--progress", "off", "--no-tensorboard",
                                        "--runs-dir", str(tmp_path), "--total-timesteps", "200000",
                                        "--num-envs", "8", "--seed", "1"])
    try:
        run.advance(2000)
        system = run.loop.system
        time.sleep(0.5)  # anything in flight when the pause came lands
        held = system.episodes.env_steps
        time.sleep(1.0)
        assert system.episodes.env_steps == held
        assert any(t.name.startswith("actor") for t in threading.enumerate())  # held, not ended
        run.advance(held + 2000)
        assert run.step > held
    finally:
        run.close()
    assert not any(t.name.startswith(("actor", "learner", "inference")) and t.is_alive()
                   for t in threading.enumerate())


def test_a_closed_run_says_how_to_load_it_again(tmp_path):
    run = _ppo(tmp_path, 1)
    run.close()
    with pytest.raises(ConfigError, match="load_run"):
        run.advance()
    assert (run.dir / "checkpoint.pt").exists()
    assert os.path.exists(run.dir / "config.json")


@pytest.mark.parametrize("algo, names", [("sac", {"q_lr": 1e-5, "policy_lr": 2e-5}), ("td3", {"learning_rate": 1e-5})])
def test_sac_and_td3_read_changed_learning_rates_at_the_next_update(algo, names, tmp_path):
    run = seedpool.build_run(algo, ["--env", "Pendulum-v1", "--backend", "serial", "--progress", "off",
                                    "--no-tensorboard", "--runs-dir", str(tmp_path), "--total-timesteps", "600",
                                    "--num-envs", "2", f"--{algo}.learning-starts", "100",
                                    "--model.hidden-sizes", "16", "16"])
    try:
        run.advance(300)
        run.set_hyperparameters(**names)
        run.advance(400)
        learner = run.learner.learner
        assert learner.optimizer.param_groups[0]["lr"] == min(names.values())
        assert learner.actor_optimizer.param_groups[0]["lr"] == max(names.values())
    finally:
        run.close()
