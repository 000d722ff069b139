"""`train_r2d2`: env sources -> central inference (per-env epsilons, per-env recurrent state)
-> sequence replay + R2D2Learner.

The dataflow, in one place::

    sources (local pools or Ray groups) --obs--> InferenceServer
         runs RecurrentEpsilonGreedyAct with each env slot's state (StateSlots: reset at
         episode starts and env restarts) and epsilon
         --Unrolls (+ first, entering state in aux)--> LearnerThread: SequenceReplayLearner
              .insert: SequenceWriter cuts each env's steps into sequences -> SequenceReplay
              .learn:  minibatches of sequences -> R2D2Learner -> new priorities back
              -> publish(params) -> InferenceServer

That is the ``--no-lockstep`` layout, Ape-X's (`seedpool.trainers.apex`; ``--acting.serial``
is its serial twin). The default, ``--lockstep``, acts in-process (`RecurrentQSampler`, every
env stepped in turn, `SyncLoop`), the same act function on the same network: the defaults were
tuned on it and hold the CI bar there for seeds 1-3, not yet on the central layout.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import seedpool
from seedpool.actors.recurrent_q_sampler import RecurrentQSampler
from seedpool.algos.r2d2 import R2D2Config, R2D2Learner, RecurrentEpsilonGreedyAct, r2d2_epsilons
from seedpool.algos.replay_learner import ReplayLearner
from seedpool.envs.registry import is_atari
from seedpool.experiment import CHECKPOINT_FILE, Run, RunResult, load_checkpoint, setup_torch
from seedpool.experiment.checkpoint import restore_replay_trainer, resume_env_seed
from seedpool.experiment.legacy_options import Converted, convert_options
from seedpool.models.recurrent_q import RecurrentQModelConfig, RecurrentQNetwork, make_recurrent_q_network
from seedpool.models.precision import autocast_fn, resolve_precision
from seedpool.replay import is_frame_stack, space_field
from seedpool.replay.sequence import SequenceReplay
from seedpool.replay.sequence_writer import SequenceWriter
from seedpool.records import Unrolls
from seedpool.experiment.training import Training
from seedpool.runners import (
    CentralLoop, CentralRunConfig, CentralSystem, central_replay_state, close_all, make_pools, make_sources,
)
from seedpool.trainers.common import replay_sync_training


@dataclass
class R2D2TrainConfig(CentralRunConfig):
    """`seedpool train r2d2`: run options, acting layout (local or Ray), R2D2 hyperparameters, recurrent Q network."""

    r2d2: R2D2Config = field(default_factory=R2D2Config)
    model: RecurrentQModelConfig = field(default_factory=RecurrentQModelConfig)
    save_replay: bool = False
    """Also save the sequence replay next to each checkpoint (replay.npz; can be many GB)."""
    unrolls_per_batch: int = 4
    """Unrolls (of --r2d2.unroll-length steps) the learner takes from the inference server at a time."""
    lockstep: bool = True
    """Act in-process on the lockstep sampler (every env stepped in turn): the default, since its
    defaults hold the CI bar on CartPoleNoVel for seeds 1-3 (greedy 242, 175, 179 at the early
    stop); `--no-lockstep` acts on the central-inference system, whose defaults are not yet
    tuned (single runs 108-227 there)."""


class SequenceReplayLearner(ReplayLearner):
    """`ReplayLearner` over a sequence replay: unrolls are cut into sequences, not n-step rows.

    ``utd_ratio`` counts gradient steps of ``minibatch_size`` sequences per env step.
    """

    def __init__(self, learner: R2D2Learner, replay: SequenceReplay, writer: SequenceWriter, cfg: R2D2Config,
                 total_steps: int) -> None:
        super().__init__(learner, replay, writer, utd_ratio=cfg.utd_ratio,
                         minibatch_size=cfg.minibatch_size, learning_starts=cfg.learning_starts,
                         total_steps=total_steps, beta0=cfg.beta0)

    def insert(self, unrolls: Unrolls) -> None:
        """Cut each env's steps into sequences (the writer keeps open episodes between calls)."""
        self.writer.add(unrolls)


def make_acting(cfg: R2D2TrainConfig, pool, q_net: RecurrentQNetwork, device: str, run: Run,
                precision) -> RecurrentQSampler:
    """The lockstep acting side (``--lockstep``): every env stepped in turn with its own epsilon and state."""
    act = RecurrentEpsilonGreedyAct(r2d2_epsilons(pool.num_envs, cfg.r2d2), cfg.seed, device)
    return RecurrentQSampler(pool, q_net, cfg.r2d2.unroll_length, act, device, run.timer, seed=cfg.seed,
                             precision=precision)


def make_central_system(cfg: R2D2TrainConfig, sources: list, learner: SequenceReplayLearner,
                        q_net: RecurrentQNetwork, device: str, precision, env_steps: int = 0) -> CentralSystem:
    """The central acting side: the server keeps each env slot's state and runs the recurrent Q network
    with each slot's epsilon; every unroll step carries the state entering it (``aux``)."""
    num_slots = sum(s.num_envs for s in sources)
    act = RecurrentEpsilonGreedyAct(r2d2_epsilons(num_slots, cfg.r2d2), cfg.seed, device)
    initial = {k: v[0] for k, v in q_net.initial_state(1, "cpu").items()}
    return CentralSystem(sources, learner, autocast_fn(act, precision, device), cfg.acting, device=device,
                         unrolls_per_batch=cfg.unrolls_per_batch, unroll_length=cfg.r2d2.unroll_length,
                         env_steps=env_steps, aux_size=sum(q_net.state_sizes.values()), initial_state=initial)


def make_sequence_replay(obs_space, action_space, q_net: RecurrentQNetwork, cfg: R2D2Config,
                         seed: int) -> SequenceReplay:
    """The sequence replay for these spaces (frame stacks deduplicated)."""
    return SequenceReplay(cfg.buffer_size, space_field(obs_space), space_field(action_space, "action"),
                          q_net.state_sizes, length=cfg.sequence_length, prioritized=cfg.prioritized,
                          alpha=cfg.alpha, seed=seed, frame_dedup=is_frame_stack(obs_space))


def train_r2d2(cfg: R2D2TrainConfig) -> RunResult:
    """Train R2D2 as configured (or continue ``cfg.resume``); returns the run's headline numbers."""
    return build_r2d2(cfg).train()


def build_r2d2(cfg: R2D2TrainConfig) -> Training:
    """The run ``train_r2d2`` trains, built and ready to advance (see `Training`)."""
    cfg.r2d2.check()
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, "r2d2") if cfg.resume else None
    env_seed = cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt)
    if cfg.lockstep:
        return _build_lockstep(cfg, device, ckpt, env_seed)
    sources = make_sources(cfg, env_seed, cfg.env_options, pools=make_pools)
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(close_all, sources)
        learner, q_net, precision = _build_learner(cfg, sources[0], device)
        run = Run.open(cfg, "r2d2", cfg, ckpt)
        undo.callback(run.close, failed=True)
        if ckpt is not None:
            restore_replay_trainer(run.dir, ckpt, learner)
        system = make_central_system(cfg, sources, learner, q_net, device, precision, run.step)
        _note(run, cfg, f"{len(sources)} source(s) of {sources[0].num_envs} envs", device, precision)
        state = central_replay_state(run, system, learner.replay, cfg.save_replay)
        training = Training(run, CentralLoop(run, system, state), learner, cfg, close=lambda: close_all(sources))
        undo.pop_all()
    return training


def _build_lockstep(cfg: R2D2TrainConfig, device: str, ckpt: dict | None, env_seed: int) -> Training:
    """``--lockstep``: one engine pool stepped in turn by `RecurrentQSampler`, learning in between."""
    pool = seedpool.make(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend, seed=env_seed, **cfg.env_options)
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(pool.close)
        learner, q_net, precision = _build_learner(cfg, pool, device)
        run = Run.open(cfg, "r2d2", cfg, ckpt)
        undo.callback(run.close, failed=True)
        sampler = make_acting(cfg, pool, q_net, device, run, precision)
        _note(run, cfg, f"{pool!r} (lockstep)", device, precision)
        if ckpt is not None:
            # A run that acted centrally kept no sampler state: the run's own step count stands for it.
            restore_replay_trainer(run.dir, {**ckpt, "acting": ckpt["acting"] or {"env_steps": run.step}},
                                   learner, sampler)
        training = replay_sync_training(run, sampler, learner, cfg, pool)
        undo.pop_all()
    return training


def _build_learner(cfg: R2D2TrainConfig, envs, device: str) -> tuple[SequenceReplayLearner, RecurrentQNetwork, str]:
    """The recurrent Q network, its sequence replay and the learner over both, for ``envs``' spaces."""
    r = cfg.r2d2
    obs_space, action_space = envs.single_observation_space, envs.single_action_space
    q_net = make_recurrent_q_network(obs_space, action_space, cfg.model).to(device)
    precision = resolve_precision(cfg.precision, device, q_net)
    replay = make_sequence_replay(obs_space, action_space, q_net, r, cfg.seed)
    learner = SequenceReplayLearner(R2D2Learner(q_net, r, cfg.total_timesteps, device, precision), replay,
                                    SequenceWriter(replay, r.overlap), r, cfg.total_timesteps)
    return learner, q_net, precision


def _note(run: Run, cfg: R2D2TrainConfig, acting: str, device: str, precision) -> None:
    r = cfg.r2d2
    run.note(f"{acting}, SequenceReplay({r.buffer_size:,} x {r.sequence_length}, burn-in {r.burn_in}), "
             f"recurrent Q network ({cfg.model.core} {cfg.model.core_size}) on {device} ({precision})")


def r2d2_defaults(env_id: str, core: str = "lstm") -> R2D2TrainConfig:
    """Settings per task family for a recurrent Q network with this ``core`` ("lstm" or "gru",
    what ``--model.core`` gives the CLI): R2D2 always has one, so each family's settings are
    already those of a recurrent network; the small vector tasks' were measured on a
    velocity-hidden CartPole (benchmarks/results/recurrent_defaults_seeds.md)."""
    cfg = _family_defaults(env_id)
    return replace(cfg, model=replace(cfg.model, core=core))


def _family_defaults(env_id: str) -> R2D2TrainConfig:
    """Settings per task family: the paper's Atari shape, MinAtar, and small vector tasks."""
    if is_atari(env_id):
        r2d2 = R2D2Config(learning_rate=1e-4, buffer_size=20_000, learning_starts=1_000, minibatch_size=64,
                          utd_ratio=1 / (40 * 64), unroll_length=40)
        return R2D2TrainConfig(env=env_id, num_envs=32, total_timesteps=10_000_000, r2d2=r2d2,
                               model=RecurrentQModelConfig(core_size=512, head_sizes=(512,)),
                               env_options={"episodic_life": True, "reward_clip": True})
    if env_id.startswith("MinAtar/"):
        # Short sequences (20 with burn-in 10) give four times the gradient steps of the paper's
        # 80/40 for the same learner time; one gradient step per 40 env steps (8 learned steps of
        # 10 x 32 per env step) is near Ape-X's one per 32 on these games. Adam's usual eps: the
        # paper's 1e-3 stalled learning here as on CartPole. 400k-step pilots on Breakout
        # (benchmarks/results/r2d2_minatar_breakout_curve*.md): these settings 5.6, with gamma
        # 0.99 and n=3 5.5, the paper's 80/40 sequences at 8 learned steps per env step 2.4 (Ape-X: 4.8).
        r2d2 = R2D2Config(learning_rate=2.5e-4, adam_eps=1e-8, buffer_size=20_000, learning_starts=500,
                          minibatch_size=32, sequence_length=20, overlap=10, burn_in=10,
                          target_network_frequency=1000, utd_ratio=8 / (10 * 32))
        return R2D2TrainConfig(env=env_id, num_envs=16, total_timesteps=5_000_000, r2d2=r2d2,
                               model=RecurrentQModelConfig(core_size=128, head_sizes=(128,)))
    # Small vector tasks (CartPole, its velocity-hidden twin): short sequences, a small core, and
    # Adam's usual eps: the paper's 1e-3 is larger than these gradients and stalled learning
    # (benchmarks/results/r2d2_cartpole_novel.md).
    r2d2 = R2D2Config(learning_rate=1e-3, adam_eps=1e-8, gamma=0.99, buffer_size=5_000, learning_starts=100,
                      minibatch_size=32, sequence_length=40, overlap=20, burn_in=10, target_network_frequency=100,
                      utd_ratio=16 / (30 * 32), unroll_length=16, epsilon=0.4, epsilon_alpha=7.0)
    return R2D2TrainConfig(env=env_id, num_envs=16, total_timesteps=300_000, r2d2=r2d2,
                           model=RecurrentQModelConfig(hidden_sizes=(64,), core_size=64, head_sizes=(64,)))


def learned_steps_utd_ratio(cfg: Mapping[str, Any], learned_per_step: float) -> float:
    """The old ``replay_ratio`` (learned sequence steps after burn-in per env step) as gradient steps
    per env step: each gradient step learns ``sequence_length - burn_in`` steps of ``minibatch_size``
    sequences."""
    r = cfg["r2d2"]
    return learned_per_step / ((r["sequence_length"] - r["burn_in"]) * r["minibatch_size"])


CONVERTED = [Converted("r2d2", "replay_ratio", "utd_ratio", learned_steps_utd_ratio,
                       "learned sequence steps per env step", "gradient steps per env step")]
"""Old options of `seedpool train r2d2` whose value converts: still accepted on the command line and
in a resumed run's config.json, with a deprecation line."""


def upgrade_config(data: dict) -> dict:
    """A config dict of an older R2D2 run folder in today's option names."""
    return convert_options(data, CONVERTED)
