"""`train_sac`: SAC on the off-policy continuous wiring (`seedpool.trainers.offpolicy`): a
squashed-Gaussian actor that explores by its own draws, and `SACLearner`."""
from __future__ import annotations

from dataclasses import dataclass, field

from seedpool.algos.sac import SACConfig, SACLearner
from seedpool.experiment import RunResult
from seedpool.experiment.training import Training
from seedpool.models.continuous import ContinuousModelConfig
from seedpool.trainers.offpolicy import ALL_CORES, ContinuousTrainConfig, build_continuous


@dataclass
class SACTrainConfig(ContinuousTrainConfig):
    """`seedpool train sac`: run options, SAC hyperparameters and the actor/critic MLPs."""

    sac: SACConfig = field(default_factory=SACConfig)


def train_sac(cfg: SACTrainConfig) -> RunResult:
    """Train SAC as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    return build_sac(cfg).train()


def build_sac(cfg: SACTrainConfig) -> Training:
    """The run ``train_sac`` trains, built and ready to advance (see `Training`)."""
    return build_continuous(
        cfg, "sac", cfg.sac, stochastic=True,
        make_learner=lambda agent, action_dim, device, precision: SACLearner(
            agent, cfg.sac, action_dim, cfg.total_timesteps, device, precision),
        explore=lambda unit_action, obs, generator: unit_action(obs, generator=generator))


def sac_defaults(env_id: str) -> SACTrainConfig:
    """CleanRL's and the SAC paper's settings (MuJoCo, on every core); smaller, quicker ones measured
    here for Pendulum. The MuJoCo settings are the papers' (curves: benchmarks/results/*_halfcheetah_curve.md)."""
    if env_id.startswith("Pendulum"):
        return SACTrainConfig(env=env_id, num_envs=4, total_timesteps=20_000,
                              sac=SACConfig(learning_starts=1_000, q_lr=1e-3, policy_lr=1e-3, utd_ratio=0.5),
                              model=ContinuousModelConfig(hidden_sizes=(64, 64)))
    return SACTrainConfig(env=env_id, num_envs=1, total_timesteps=1_000_000, torch_threads=ALL_CORES, sac=SACConfig())
