"""Learning regression: PPO with seedpool's defaults must keep reaching known scores (fixed seeds)."""
import dataclasses

import numpy as np
import pytest

import seedpool
from seedpool.experiment.metrics import series
from seedpool.experiment.plot import smooth
from seedpool.trainers.ppo import ppo_defaults, train_ppo

pytestmark = pytest.mark.slow


def _returns(run_dir):
    steps, _, values = series(run_dir / "metrics.csv", "charts/episodic_return")
    return np.asarray(steps), smooth(np.asarray(values))  # mean of the last 20 episodes


def _train(tmp_path, env, total, seed):
    cfg = dataclasses.replace(ppo_defaults(env), total_timesteps=total, seed=seed, runs_dir=tmp_path,
                              progress="off", tensorboard=False)
    return train_ppo(cfg)


def test_cartpole_reaches_475_within_100k_steps_and_holds_it_to_150k(tmp_path, learning_seed):
    result = _train(tmp_path, "CartPole-v1", 150_000, learning_seed)
    steps, mean20 = _returns(result.run_dir)
    below = np.flatnonzero(mean20 < 475)
    # The step from which the mean of the last 20 episodes never again drops below 475.
    held_from = steps[below[-1] + 1] if len(below) else steps[0]
    assert below.size < len(mean20), f"never reached 475; best {mean20.max():.1f}"
    assert held_from <= 100_000, f"475 held only from step {held_from}"
    assert result.final_return >= 475


def _random_return(env, episodes=20, seed=123):
    with seedpool.make(env, num_envs=episodes, seed=seed, backend="serial") as pool:
        pool.reset()
        space = pool.single_action_space
        space.seed(seed)
        finished = np.zeros(episodes, bool)
        returns = np.zeros(episodes)
        while not finished.all():
            _, _, term, trunc, info = pool.step(np.stack([space.sample() for _ in range(episodes)]))
            done = (term | trunc) & ~finished
            returns[done] = info["episode_return"][done]
            finished |= done
    return returns.mean()


def test_pendulum_improves_clearly_over_a_random_policy(tmp_path, learning_seed):
    random_return = _random_return("Pendulum-v1")
    result = _train(tmp_path, "Pendulum-v1", 40_960, learning_seed)
    assert random_return < -1000
    assert result.final_return > random_return + 500, (result.final_return, random_return)
    assert result.final_return > -600
