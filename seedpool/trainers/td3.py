"""`train_td3`: the engine's envs -> continuous sampler (actor + Gaussian noise) -> replay + TD3Learner,
driven by `run_sync`. DDPG is this trainer with options (docs/training.md).

The sync sampler steps every env ``train_frequency`` times per round (uniform actions for
the first ``learning_starts`` env steps); the `ReplayLearner` writes the steps into the
replay and takes ``utd_ratio`` critic steps per env step; `run_sync` logs and checkpoints.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import seedpool
from seedpool.actors.continuous_sampler import ContinuousSampler
from seedpool.algos.replay_learner import ReplayLearner
from seedpool.algos.td3 import TD3Config, TD3Learner, exploration_actions
from seedpool.experiment import (
    CHECKPOINT_FILE, Run, RunConfig, RunResult, finish_run, load_checkpoint, setup_torch,
)
from seedpool.experiment.checkpoint import replay_trainer_state, restore_replay_trainer, resume_env_seed
from seedpool.experiment.config import OptionValue
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig
from seedpool.models.precision import resolve_precision
from seedpool.replay import NStepWriter, make_replay
from seedpool.runners.sync import run_sync


@dataclass
class TD3TrainConfig(RunConfig):
    """`seedpool train td3`: run options, TD3 (or DDPG) hyperparameters and the actor/critic MLPs."""

    td3: TD3Config = field(default_factory=TD3Config)
    model: ContinuousModelConfig = field(default_factory=ContinuousModelConfig)
    env_options: dict[str, OptionValue] = field(default_factory=dict)
    """Task options for seedpool.make."""
    save_replay: bool = False
    """Also save the replay's contents next to each checkpoint (replay.npz), so a resumed run
    continues with its experience; otherwise a resumed run refills it first."""


def train_td3(cfg: TD3TrainConfig) -> RunResult:
    """Train TD3 (or DDPG) as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, "td3") if cfg.resume else None
    s = cfg.td3
    pool = seedpool.make(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend,
                         seed=cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt), **cfg.env_options)
    try:
        obs_space, action_space = pool.single_observation_space, pool.single_action_space
        agent = ContinuousAgent(obs_space, action_space, cfg.model, stochastic=False).to(device)
        # Learning's minibatches and acting's env batches can differ in what pays (bf16 for
        # 256-wide layers on 256-row minibatches, fp32 for one env's row): each gets its own.
        precision = resolve_precision(cfg.precision, device, agent, rows=s.minibatch_size)
        acting_precision = resolve_precision(cfg.precision, device, agent, rows=cfg.num_envs)
        replay = make_replay(obs_space, action_space, s.buffer_size, seed=cfg.seed)
        learner = ReplayLearner(
            TD3Learner(agent, s, cfg.total_timesteps, device, precision), replay,
            NStepWriter(replay, s.n_step, s.gamma), replay_ratio=s.utd_ratio * s.minibatch_size,
            minibatch_size=s.minibatch_size, learning_starts=s.learning_starts, total_steps=cfg.total_timesteps)
        with Run.open(cfg, "td3", cfg, ckpt) as run:
            explore = lambda obs, g: exploration_actions(agent.unit_action(obs), s.exploration_noise, g)  # noqa: E731
            sampler = ContinuousSampler(pool, explore, s.train_frequency, s.learning_starts, device, run.timer,
                                        cfg.seed, acting_precision, agent.observe)
            run.note(f"{pool!r}, replay {s.buffer_size:,}, TD3 on {device} (learning {precision}, "
                     f"acting {acting_precision}), {s.utd_ratio:g} updates/step")
            if ckpt is not None:
                restore_replay_trainer(run.dir, ckpt, learner, sampler)
            run_sync(run, sampler, learner, cfg.total_timesteps,
                     lambda: replay_trainer_state(run.dir, learner, sampler, cfg.save_replay))
    finally:
        pool.close()
    return finish_run(run, cfg.env, "td3")



def td3_defaults(env_id: str) -> TD3TrainConfig:
    """CleanRL's and the TD3 paper's settings (MuJoCo); smaller, faster ones measured here for
    Pendulum. The MuJoCo settings are the papers' (curves: benchmarks/results/*_halfcheetah_curve.md)."""
    if env_id.startswith("Pendulum"):
        return TD3TrainConfig(env=env_id, num_envs=4, total_timesteps=30_000,
                              td3=TD3Config(learning_starts=1_000, learning_rate=1e-3, utd_ratio=0.5),
                              model=ContinuousModelConfig(hidden_sizes=(64, 64)))
    return TD3TrainConfig(env=env_id, num_envs=1, total_timesteps=1_000_000, td3=TD3Config(learning_starts=25_000))
