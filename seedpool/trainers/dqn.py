"""`train_dqn`: the engine's envs -> epsilon-greedy sampler -> replay + DQNLearner, driven by `SyncLoop` in a `Training`.

The sync sampler steps every env ``train_frequency / num_envs`` times per round; the
`ReplayLearner` writes those steps into the replay as n-step rows and takes ``utd_ratio``
minibatch updates per env step of the round (fractions carry to the next); `Training` logs and checkpoints.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import seedpool
from seedpool.actors.epsilon_sampler import EpsilonGreedySampler
from seedpool.algos.dqn import RENAMED_OPTIONS, DQNConfig, DQNLearner, epsilon_greedy, exploration_epsilon
from seedpool.algos.replay_learner import ReplayLearner
from seedpool.envs.registry import is_atari
from seedpool.experiment import (
    CHECKPOINT_FILE, Run, RunConfig, RunResult, load_checkpoint, setup_torch,
)
from seedpool.experiment.checkpoint import restore_replay_trainer, resume_env_seed
from seedpool.experiment.config import upgrade_options
from seedpool.experiment.legacy_options import Converted, convert_options
from seedpool.models import QModelConfig, make_q_network
from seedpool.models.precision import resolve_precision
from seedpool.replay import NStepWriter, make_replay
from seedpool.experiment.training import Training
from seedpool.trainers.common import replay_sync_training


@dataclass
class DQNTrainConfig(RunConfig):
    """`seedpool train dqn`: run options, DQN hyperparameters and the Q network."""

    dqn: DQNConfig = field(default_factory=DQNConfig)
    model: QModelConfig = field(default_factory=QModelConfig)
    save_replay: bool = False
    """Also save the replay's contents next to each checkpoint (replay.npz; can be many GB), so a
    resumed run continues with its experience; otherwise a resumed run refills it first."""


def train_dqn(cfg: DQNTrainConfig) -> RunResult:
    """Train DQN as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    return build_dqn(cfg).train()


def build_dqn(cfg: DQNTrainConfig) -> Training:
    """The run ``train_dqn`` trains, built and ready to advance (see `Training`)."""
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, "dqn") if cfg.resume else None
    d = cfg.dqn
    steps_per_round = max(1, d.train_frequency // cfg.num_envs)
    pool = seedpool.make(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend,
                         seed=cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt), **cfg.env_options)
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(pool.close)
        q_net = make_q_network(pool.single_observation_space, pool.single_action_space, cfg.model).to(device)
        precision = resolve_precision(cfg.precision, device, q_net)
        replay = make_replay(pool.single_observation_space, pool.single_action_space, d.buffer_size,
                             prioritized=d.prioritized, alpha=d.alpha, seed=cfg.seed)
        learner = ReplayLearner(
            DQNLearner(q_net, d, cfg.total_timesteps, device, precision), replay, NStepWriter(replay, d.n_step, d.gamma),
            utd_ratio=d.utd_ratio,
            minibatch_size=d.minibatch_size, learning_starts=d.learning_starts, total_steps=cfg.total_timesteps,
            beta0=d.beta0)
        run = Run.open(cfg, "dqn", cfg, ckpt)
        undo.callback(run.close, failed=True)
        sampler = EpsilonGreedySampler(
            pool, q_net, steps_per_round, lambda step: exploration_epsilon(d, step / cfg.total_timesteps),
            epsilon_greedy, device, run.timer, seed=cfg.seed, precision=precision)
        run.note(f"{pool!r}, {type(replay).__name__}({d.buffer_size:,}), Q network on {device} ({precision})")
        if ckpt is not None:
            restore_replay_trainer(run.dir, ckpt, learner, sampler)
        training = replay_sync_training(run, sampler, learner, cfg, pool)
        undo.pop_all()
    return training



def dqn_defaults(env_id: str) -> DQNTrainConfig:
    """Well-known settings: rl-zoo3's tuned CartPole DQN, the Nature/Ape-X-era Atari, MinAtar's DQN."""
    if is_atari(env_id):
        dqn = DQNConfig(learning_rate=1e-4, buffer_size=100_000, learning_starts=80_000, minibatch_size=32,
                        train_frequency=4, utd_ratio=0.25, target_network_frequency=1000, exploration_fraction=0.1,
                        exploration_final_eps=0.01, double_q=True, n_step=3, prioritized=True)
        return DQNTrainConfig(env=env_id, num_envs=4, total_timesteps=10_000_000, dqn=dqn,
                              env_options={"episodic_life": True, "reward_clip": True})
    if env_id.startswith("MinAtar/"):
        # The MinAtar paper's DQN: replay 100k, batch 32, RMSProp lr 2.5e-4 (Adam here), target
        # every 1000 updates, epsilon 1 -> 0.1 over the first 100k frames of 5M.
        dqn = DQNConfig(learning_rate=2.5e-4, buffer_size=100_000, learning_starts=5_000, minibatch_size=32,
                        train_frequency=1, utd_ratio=1.0, target_network_frequency=1000, exploration_fraction=0.02,
                        exploration_final_eps=0.1)
        return DQNTrainConfig(env=env_id, num_envs=1, total_timesteps=5_000_000, dqn=dqn)
    # rl-zoo3's tuned CartPole-v1 DQN (500 at 50k steps), with 8 envs. Its target network
    # (synced every 10 env steps while collecting) is the online one of the previous round:
    # one round is 128 updates (256 env steps at 0.5 per env step). As it is, its final greedy
    # policy ended at 483, 228 and 43 for seeds 1-3 here; double Q, 3-step returns and a learning rate annealed to 0 steady it
    # (benchmarks/results/value_cartpole_seeds.md).
    dqn = DQNConfig(learning_rate=2.3e-3, anneal_lr=True, buffer_size=100_000, learning_starts=1_000,
                    minibatch_size=64, train_frequency=256, utd_ratio=0.5, target_network_frequency=128,
                    gamma=0.99, exploration_fraction=0.16, exploration_final_eps=0.04, double_q=True, n_step=3)
    return DQNTrainConfig(env=env_id, num_envs=8, total_timesteps=100_000, dqn=dqn,
                          model=QModelConfig(hidden_sizes=(256, 256)))


RENAMED = {("dqn", old): new for old, new in RENAMED_OPTIONS.items()}
"""Old option names of `seedpool train dqn` -> today's: still accepted on the command line and in
a resumed run's config.json, with a deprecation line."""


def round_utd_ratio(cfg: Mapping[str, Any], gradient_steps: float) -> float:
    """The old ``gradient_steps`` (per round) as gradient steps per env step: a round is
    ``train_frequency`` env steps, at least one per env (what the sampler steps)."""
    num_envs = cfg["num_envs"]
    return gradient_steps / (max(1, cfg["dqn"]["train_frequency"] // num_envs) * num_envs)


CONVERTED = [Converted("dqn", "gradient_steps", "utd_ratio", round_utd_ratio,
                       "gradient steps per round of --dqn.train-frequency env steps", "gradient steps per env step")]
"""Old options of `seedpool train dqn` whose value converts: still accepted on the command line and
in a resumed run's config.json, with a deprecation line."""


def upgrade_config(data: dict) -> dict:
    """A config dict of an older DQN run folder in today's option names."""
    data = upgrade_options(data, RENAMED, dropped=[("", "replay_limit")])  # PPO's: it never acted here
    return convert_options(data, CONVERTED)
