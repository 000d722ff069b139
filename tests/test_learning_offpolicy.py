"""Learning regression: SAC and TD3 with seedpool's Pendulum defaults end their budget (20k and 30k
env steps) with the mean of the last 20 training episodes >= -250, on the threaded engine with
several envs. One seed each here; `benchmarks/offpolicy_pendulum_seeds.py` sweeps three.

What a user runs: `seedpool train sac|td3 --env Pendulum-v1`. The check is the end of the budget,
not the best moment: the return must have got there and held.
"""
import dataclasses

import pytest

from seedpool.trainers.sac import sac_defaults, train_sac
from seedpool.trainers.td3 import td3_defaults, train_td3

pytestmark = pytest.mark.slow


# Their own timeout: 240-470 s each were seen on this 2-core machine with other jobs beside them
# (load average 8-11), and 145 s for SAC, 144 s for TD3 at load average 3-4 (2026-11-25); the suite's 300 s is
# for a quiet machine.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("algo, defaults, train, budget", [
    ("sac", sac_defaults, train_sac, 20_000),
    ("td3", td3_defaults, train_td3, 30_000),
])
def test_pendulum_last_20_episodes_at_least_minus_250_at_the_end_of_the_budget(algo, defaults, train, budget,
                                                                              tmp_path, learning_seed):
    cfg = dataclasses.replace(defaults("Pendulum-v1"), runs_dir=tmp_path, progress="off", tensorboard=False,
                              seed=learning_seed, backend="thread")
    assert cfg.total_timesteps == budget and cfg.num_envs > 1
    result = train(cfg)
    assert result.step >= budget
    assert result.final_return >= -250, f"{algo}: mean of the last 20 episodes {result.final_return:.1f}"
