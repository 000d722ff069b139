"""`train_td3`: TD3 on the off-policy continuous wiring (`seedpool.trainers.offpolicy`): a
deterministic actor that explores with Gaussian noise, and `TD3Learner`. DDPG is this trainer
with options (docs/training.md)."""
from __future__ import annotations

from dataclasses import dataclass, field

from seedpool.algos.td3 import TD3Config, TD3Learner, exploration_actions
from seedpool.experiment import RunResult
from seedpool.experiment.training import Training
from seedpool.models.continuous import ContinuousModelConfig
from seedpool.trainers.offpolicy import ALL_CORES, ContinuousTrainConfig, build_continuous


@dataclass
class TD3TrainConfig(ContinuousTrainConfig):
    """`seedpool train td3`: run options, TD3 (or DDPG) hyperparameters and the actor/critic MLPs."""

    td3: TD3Config = field(default_factory=TD3Config)


def train_td3(cfg: TD3TrainConfig) -> RunResult:
    """Train TD3 as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    return build_td3(cfg).train()


def build_td3(cfg: TD3TrainConfig) -> Training:
    """The run ``train_td3`` trains, built and ready to advance (see `Training`)."""
    s = cfg.td3
    return build_continuous(
        cfg, "td3", s, stochastic=False,
        make_learner=lambda agent, action_dim, device, precision: TD3Learner(
            agent, s, cfg.total_timesteps, device, precision),
        explore=lambda unit_action, obs, generator: exploration_actions(unit_action(obs), s.exploration_noise,
                                                                         generator))


def td3_defaults(env_id: str) -> TD3TrainConfig:
    """CleanRL's and the TD3 paper's settings (MuJoCo, on every core); smaller, quicker ones measured
    here for Pendulum. The MuJoCo settings are the papers' (curves: benchmarks/results/*_halfcheetah_curve.md)."""
    if env_id.startswith("Pendulum"):
        return TD3TrainConfig(env=env_id, num_envs=4, total_timesteps=30_000,
                              td3=TD3Config(learning_starts=1_000, learning_rate=1e-3, utd_ratio=0.5),
                              model=ContinuousModelConfig(hidden_sizes=(64, 64)))
    return TD3TrainConfig(env=env_id, num_envs=1, total_timesteps=1_000_000, torch_threads=ALL_CORES,
                          td3=TD3Config(learning_starts=25_000))
