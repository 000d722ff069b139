"""`train_continuous`: the wiring SAC and TD3 (and DDPG) share.

    the engine's envs -> continuous sampler -> replay + the algorithm's learner, driven by `SyncLoop`

The sync sampler steps every env ``train_frequency`` times per round (uniform actions for
the first ``learning_starts`` env steps, then the algorithm's exploring policy); the
`ReplayLearner` writes the steps into the replay and takes ``utd_ratio`` critic steps per
env step; `Training` logs and checkpoints. `train_sac` and `train_td3` name what differs:
the actor (squashed Gaussian or deterministic), the learner, and how acting explores.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

import torch

import seedpool
from seedpool import kernels
from seedpool.actors.continuous_sampler import ContinuousSampler
from seedpool.actors.observations import policy_view
from seedpool.algos.offpolicy import OffPolicyConfig
from seedpool.algos.replay_learner import MinibatchLearner, ReplayLearner
from seedpool.experiment import CHECKPOINT_FILE, Run, RunConfig, load_checkpoint, setup_torch
from seedpool.experiment.checkpoint import restore_replay_trainer, resume_env_seed
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig
from seedpool.models.precision import Precision, resolve_precision
from seedpool.replay import NStepWriter, make_replay
from seedpool.experiment.training import Training
from seedpool.trainers.common import replay_sync_training

MakeLearner = Callable[[ContinuousAgent, int, str, Precision], MinibatchLearner]
"""(agent, action dimension, device, learning precision) -> the algorithm's learner."""
Explore = Callable[[Callable[..., torch.Tensor], torch.Tensor, torch.Generator], torch.Tensor]
"""(the agent's ``unit_action`` or its fast path, raw observations, generator) -> the unit actions acting takes."""


@dataclass
class ContinuousTrainConfig(RunConfig):
    """Run options and the actor/critic MLPs of the off-policy continuous trainers."""

    model: ContinuousModelConfig = field(default_factory=ContinuousModelConfig)
    save_replay: bool = False
    """Also save the replay's contents next to each checkpoint (replay.npz), so a resumed run
    continues with its experience; otherwise a resumed run refills it first."""


def build_continuous(cfg: ContinuousTrainConfig, algo: str, s: OffPolicyConfig, stochastic: bool,
                     make_learner: MakeLearner, explore: Explore) -> Training:
    """The run of ``algo`` ("sac", "td3") as configured (or continuing ``cfg.resume``), ready to advance."""
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, algo) if cfg.resume else None
    pool = seedpool.make(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend,
                         seed=cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt), **cfg.env_options)
    pool = policy_view(pool)  # dm_control's Dict of position, velocity, ... as one state vector
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(pool.close)
        obs_space, action_space = pool.single_observation_space, pool.single_action_space
        agent = ContinuousAgent(obs_space, action_space, cfg.model, stochastic=stochastic).to(device)
        # Learning's minibatches and acting's env batches can differ in what pays (bf16 for
        # 256-wide layers on 256-row minibatches, fp32 for one env's row): each gets its own.
        precision = resolve_precision(cfg.precision, device, agent, rows=s.minibatch_size)
        acting_precision = resolve_precision(cfg.precision, device, agent, rows=cfg.num_envs)
        replay = make_replay(obs_space, action_space, s.buffer_size, seed=cfg.seed)
        learner = ReplayLearner(
            make_learner(agent, action_space.shape[0], device, precision), replay,
            NStepWriter(replay, s.n_step, s.gamma), utd_ratio=s.utd_ratio,
            minibatch_size=s.minibatch_size, learning_starts=s.learning_starts, total_steps=cfg.total_timesteps)
        run = Run.open(cfg, algo, cfg, ckpt)
        undo.callback(run.close, failed=True)
        # Acting's fast path, asked for once (None: the agent's own torch forward).
        unit_action = kernels.continuous_acting(agent, device, acting_precision) or agent.unit_action
        sampler = ContinuousSampler(pool, lambda obs, g: explore(unit_action, obs, g), s.train_frequency,
                                    s.learning_starts, device, run.timer, cfg.seed, acting_precision, agent.observe)
        run.note(f"{pool!r}, replay {s.buffer_size:,}, {algo.upper()} on {device} (learning {precision}, "
                 f"acting {acting_precision}, {torch.get_num_threads()} torch thread(s)), "
                 f"{s.utd_ratio:g} updates/step")
        if ckpt is not None:
            restore_replay_trainer(run.dir, ckpt, learner, sampler)
        training = replay_sync_training(run, sampler, learner, cfg, pool)
        undo.pop_all()
    return training


ALL_CORES = 0
"""``torch_threads`` of the MuJoCo defaults: torch's own default, every core. One env steps in
this process between gradient steps, so no env worker needs a core, and the learner (nearly
all of a step) gains from every thread (SAC on HalfCheetah-v5 at 1 and 2 threads:
benchmarks/results/sac_speed_quiet.md, sac_speed_2threads.md)."""
