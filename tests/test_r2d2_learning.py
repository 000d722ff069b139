"""Learning regression: R2D2 learns CartPole from positions alone (`pomdp_envs:CartPoleNoVel-v0`).

The issue's full bar (greedy >= 400 within 300k env steps) takes several minutes here and lives
in `benchmarks/r2d2_cartpole_novel.py` with its committed table; this CI test holds R2D2 to a
bar that feed-forward DQN does not reach on the same task (that table has both). It acts with
the default lockstep sampler (deterministic: seed 1 gave greedy 241.55 twice; seeds 2 and 3 gave
175 and 179, 2026-11-25). The central-inference layout (`--no-lockstep`) is not the default:
on its serial twin seed 1 gave 227 in one CI run and 108 in the next.
"""
import dataclasses

import pytest
import torch

from seedpool.experiment.evaluate import evaluate_run
from seedpool.trainers.r2d2 import r2d2_defaults, train_r2d2

pytestmark = pytest.mark.slow

ENV = "pomdp_envs:CartPoleNoVel-v0"
STOP_AT = 150.0  # mean of the last 20 training episodes (with exploration) that ends the run early
GREEDY_BAR = 150.0  # greedy evaluation, 20 episodes
BUDGET = 60_000


def test_r2d2_learns_cartpole_without_velocities(tmp_path):
    threads = torch.get_num_threads()
    try:
        cfg = r2d2_defaults(ENV)
        assert cfg.lockstep, "the CI test covers the default (lockstep) acting"
        cfg = dataclasses.replace(cfg, total_timesteps=BUDGET, seed=1, backend="serial", runs_dir=tmp_path,
                                  progress="off", tensorboard=False, stop_at_return=STOP_AT)
        result = train_r2d2(cfg)
    finally:
        torch.set_num_threads(threads)
    evaluation = evaluate_run(result.run_dir, episodes=20, backend="serial")
    assert evaluation.mean >= GREEDY_BAR, (f"greedy {evaluation.mean:.1f} +- {evaluation.std:.1f} after "
                                           f"{result.step} steps (training last 20: {result.final_return:.1f})")
