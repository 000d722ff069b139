"""`train_r2d2`: the engine's envs -> recurrent epsilon-greedy acting -> sequence replay + R2D2Learner.

The dataflow, in one place::

    pool --obs--> make_acting(...) (per-env epsilons, per-env LSTM state)
         --Unrolls (+ first, entering state)--> SequenceReplayLearner
              .insert: SequenceWriter cuts each env's steps into sequences -> SequenceReplay
              .learn:  minibatches of sequences -> R2D2Learner -> new priorities back

Acting runs in-process on the lockstep sampler today; `make_acting` is the only place that
knows it. The issue's target is acting on the central-inference system (Ape-X's layout); the
act function (`RecurrentEpsilonGreedyAct`) already has the inference server's signature and
returns the entering state as ``aux``, so that source replaces `make_acting` once the server
carries recurrent state per env (see docs/recurrent.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import seedpool
from seedpool.actors.recurrent_q_sampler import RecurrentQSampler
from seedpool.algos.r2d2 import R2D2Config, R2D2Learner, RecurrentEpsilonGreedyAct, r2d2_epsilons
from seedpool.algos.replay_learner import ReplayLearner
from seedpool.envs.registry import is_atari
from seedpool.experiment import (
    CHECKPOINT_FILE, Run, RunConfig, RunResult, finish_run, load_checkpoint, setup_torch,
)
from seedpool.experiment.checkpoint import replay_trainer_state, restore_replay_trainer, resume_env_seed
from seedpool.experiment.config import OptionValue
from seedpool.models.recurrent_q import RecurrentQModelConfig, RecurrentQNetwork, make_recurrent_q_network
from seedpool.models.precision import resolve_precision
from seedpool.replay import is_frame_stack, space_field
from seedpool.replay.sequence import SequenceReplay
from seedpool.replay.sequence_writer import SequenceWriter
from seedpool.records import Unrolls
from seedpool.runners.sync import run_sync


@dataclass
class R2D2TrainConfig(RunConfig):
    """`seedpool train r2d2`: run options, R2D2 hyperparameters and the recurrent Q network."""

    r2d2: R2D2Config = field(default_factory=R2D2Config)
    model: RecurrentQModelConfig = field(default_factory=RecurrentQModelConfig)
    env_options: dict[str, OptionValue] = field(default_factory=dict)
    """Task options for seedpool.make, e.g. --env-options episodic_life True reward_clip True."""
    save_replay: bool = False
    """Also save the sequence replay next to each checkpoint (replay.npz; can be many GB)."""
    stop_at_return: float | None = None
    """Stop early once the mean return of the last 20 episodes reaches this."""


class SequenceReplayLearner(ReplayLearner):
    """`ReplayLearner` over a sequence replay: unrolls are cut into sequences, not n-step rows.

    ``replay_ratio`` here counts learned steps (sequence steps after burn-in) per env step.
    """

    def __init__(self, learner: R2D2Learner, replay: SequenceReplay, writer: SequenceWriter, cfg: R2D2Config,
                 total_steps: int) -> None:
        self.learned_per_row = cfg.sequence_length - cfg.burn_in
        super().__init__(learner, replay, writer, replay_ratio=cfg.replay_ratio / self.learned_per_row,
                         minibatch_size=cfg.minibatch_size, learning_starts=cfg.learning_starts,
                         total_steps=total_steps, beta0=cfg.beta0)

    def insert(self, unrolls: Unrolls) -> None:
        """Cut each env's steps into sequences (the writer keeps open episodes between calls)."""
        self.writer.add(unrolls)

    def measured_ratio(self) -> float:
        """Learned sequence steps per env step while learning was on."""
        return super().measured_ratio() * self.learned_per_row


def make_acting(cfg: R2D2TrainConfig, pool, q_net: RecurrentQNetwork, device: str, run: Run,
                precision) -> RecurrentQSampler:
    """The acting side: every env stepped in lockstep with its own epsilon and LSTM state."""
    act = RecurrentEpsilonGreedyAct(r2d2_epsilons(pool.num_envs, cfg.r2d2), cfg.seed, device)
    return RecurrentQSampler(pool, q_net, cfg.r2d2.unroll_length, act, device, run.timer, seed=cfg.seed,
                             precision=precision)


def make_sequence_replay(obs_space, action_space, q_net: RecurrentQNetwork, cfg: R2D2Config,
                         seed: int) -> SequenceReplay:
    """The sequence replay for these spaces (frame stacks deduplicated)."""
    return SequenceReplay(cfg.buffer_size, space_field(obs_space), space_field(action_space, "action"),
                          q_net.state_sizes, length=cfg.sequence_length, prioritized=cfg.prioritized,
                          alpha=cfg.alpha, seed=seed, frame_dedup=is_frame_stack(obs_space))


def train_r2d2(cfg: R2D2TrainConfig) -> RunResult:
    """Train R2D2 as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    cfg.r2d2.check()
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, "r2d2") if cfg.resume else None
    r = cfg.r2d2
    pool = seedpool.make(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend,
                         seed=cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt), **cfg.env_options)
    try:
        obs_space, action_space = pool.single_observation_space, pool.single_action_space
        q_net = make_recurrent_q_network(obs_space, action_space, cfg.model).to(device)
        precision = resolve_precision(cfg.precision, device, q_net)
        replay = make_sequence_replay(obs_space, action_space, q_net, r, cfg.seed)
        learner = SequenceReplayLearner(R2D2Learner(q_net, r, cfg.total_timesteps, device, precision), replay,
                                        SequenceWriter(replay, r.overlap), r, cfg.total_timesteps)
        with Run.open(cfg, "r2d2", cfg, ckpt) as run:
            sampler = make_acting(cfg, pool, q_net, device, run, precision)
            run.note(f"{pool!r}, SequenceReplay({r.buffer_size:,} x {r.sequence_length}, burn-in {r.burn_in}), "
                     f"recurrent Q network ({cfg.model.core} {cfg.model.core_size}) on {device} ({precision})")
            if ckpt is not None:
                restore_replay_trainer(run.dir, ckpt, learner, sampler)
            run_sync(run, sampler, learner, cfg.total_timesteps,
                     lambda: replay_trainer_state(run.dir, learner, sampler, cfg.save_replay), cfg.stop_at_return)
    finally:
        pool.close()
    return finish_run(run, cfg.env, "r2d2")


def r2d2_defaults(env_id: str) -> R2D2TrainConfig:
    """Settings per task family: the paper's Atari shape, MinAtar, and small vector tasks."""
    if is_atari(env_id):
        r2d2 = R2D2Config(learning_rate=1e-4, buffer_size=20_000, learning_starts=1_000, minibatch_size=64,
                          replay_ratio=1.0, unroll_length=40)
        return R2D2TrainConfig(env=env_id, num_envs=32, total_timesteps=10_000_000, r2d2=r2d2,
                               model=RecurrentQModelConfig(core_size=512, head_sizes=(512,)),
                               env_options={"episodic_life": True, "reward_clip": True})
    if env_id.startswith("MinAtar/"):
        r2d2 = R2D2Config(learning_rate=2.5e-4, buffer_size=20_000, learning_starts=500, minibatch_size=32,
                          target_network_frequency=1000, replay_ratio=1.0)
        return R2D2TrainConfig(env=env_id, num_envs=16, total_timesteps=5_000_000, r2d2=r2d2,
                               model=RecurrentQModelConfig(core_size=128, head_sizes=(128,)))
    # Small vector tasks (CartPole, its velocity-hidden twin): short sequences, a small core, and
    # Adam's usual eps: the paper's 1e-3 is larger than these gradients and stalled learning
    # (benchmarks/results/r2d2_cartpole_novel.md).
    r2d2 = R2D2Config(learning_rate=1e-3, adam_eps=1e-8, gamma=0.99, buffer_size=5_000, learning_starts=100,
                      minibatch_size=32, sequence_length=40, overlap=20, burn_in=10, target_network_frequency=100,
                      replay_ratio=16.0, unroll_length=16, epsilon=0.4, epsilon_alpha=7.0)
    return R2D2TrainConfig(env=env_id, num_envs=16, total_timesteps=300_000, r2d2=r2d2,
                           model=RecurrentQModelConfig(hidden_sizes=(64,), core_size=64, head_sizes=(64,)))
