"""Learning regression: R2D2 learns CartPole from positions alone (`pomdp_envs:CartPoleNoVel-v0`).

The issue's bar: a greedy evaluation (20 episodes) of >= 400 at the end of 300k env steps,
with the defaults (the lockstep sampler, deterministic per seed). Seeds 1-4 ended 300k steps
greedy at 500.0 +- 0.0, ~57 s each on the 2-core machine (2026-11-27); feed-forward DQN's
greedy policy sat at 36 (`benchmarks/results/r2d2_cartpole_novel.md` has both).
"""
import dataclasses

import pytest
import torch

from seedpool.cli import train_config
from seedpool.experiment.evaluate import evaluate_run
from seedpool.trainers.r2d2 import train_r2d2

pytestmark = pytest.mark.slow

ENV = "pomdp_envs:CartPoleNoVel-v0"
GREEDY_BAR = 400.0  # greedy evaluation, 20 episodes
BUDGET = 300_000


def test_r2d2_learns_cartpole_without_velocities(tmp_path, learning_seed):
    threads = torch.get_num_threads()
    try:
        # What `seedpool train r2d2 --env ENV --model.core lstm --seed N` gives a user.
        cfg = train_config("r2d2", ["--env", ENV, "--model.core", "lstm", "--seed", str(learning_seed)])
        assert cfg.lockstep, "the CI test covers the default (lockstep) acting"
        assert cfg.total_timesteps == BUDGET
        cfg = dataclasses.replace(cfg, backend="serial", runs_dir=tmp_path, progress="off", tensorboard=False)
        result = train_r2d2(cfg)
    finally:
        torch.set_num_threads(threads)
    assert result.step >= BUDGET
    evaluation = evaluate_run(result.run_dir, episodes=20, backend="serial")
    assert evaluation.mean >= GREEDY_BAR, (f"greedy {evaluation.mean:.1f} +- {evaluation.std:.1f} after "
                                           f"{result.step} steps (training last 20: {result.final_return:.1f})")
