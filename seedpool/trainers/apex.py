"""`train_apex`: env sources (local pools or Ray actor groups) -> central inference (per-env
epsilons) -> replay + DQNLearner.

Ape-X on the central-inference system (docs/replay.md draws it): the actor loops only step
envs; the inference server runs the Q network with each env's own epsilon and records the
Q-values the initial priorities come from; the learner thread writes each batch of
unrolls into the prioritized replay as n-step rows and learns at the configured UTD ratio
(gradient steps per env step), publishing parameters back to the server.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from seedpool.algos.apex import AUX_SIZE, ApexConfig, EpsilonGreedyAct, epsilon_group_names, slot_epsilons
from seedpool.algos.dqn import RENAMED_OPTIONS, DQNConfig, DQNLearner, QLearningConfig
from seedpool.algos.replay_learner import ReplayLearner
from seedpool.envs.registry import is_atari
from seedpool.experiment import Run, RunResult
from seedpool.experiment.checkpoint import restore_replay_trainer
from seedpool.experiment.config import upgrade_options
from seedpool.experiment.legacy_options import Converted, convert_options
from seedpool.models import QModelConfig, make_q_network
from seedpool.models.precision import autocast_fn, resolve_precision
from seedpool.replay import NStepWriter, make_replay
from seedpool.experiment.training import Training
from seedpool.runners import (
    CentralLoop, CentralRunConfig, CentralSystem, central_replay_state, close_all,
)
from seedpool.trainers.common import start_central


@dataclass
class ApexTrainConfig(CentralRunConfig):
    """`seedpool train apex`: run options, acting layout (local or Ray), Q-learning, Ape-X's exploration and pacing, network.

    DQN's epsilon schedule and train_frequency are not options here: exploration is per env
    (--apex.epsilon*) and pacing is --apex.utd-ratio.
    """

    dqn: QLearningConfig = field(default_factory=QLearningConfig)
    apex: ApexConfig = field(default_factory=ApexConfig)
    model: QModelConfig = field(default_factory=QModelConfig)
    save_replay: bool = False
    """Also save the replay's contents next to each checkpoint (replay.npz; can be many GB)."""


def train_apex(cfg: ApexTrainConfig) -> RunResult:
    """Train Ape-X DQN with central inference; returns the run's headline numbers."""
    return build_apex(cfg).train()


def build_apex(cfg: ApexTrainConfig) -> Training:
    """The run ``train_apex`` trains, built and ready to advance (see `Training`)."""
    device, ckpt, sources = start_central(cfg, "apex")
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(close_all, sources)
        space = sources[0].single_observation_space
        q_net = make_q_network(space, sources[0].single_action_space, cfg.model)
        precision = resolve_precision(cfg.precision, device, q_net)
        replay = make_replay(space, sources[0].single_action_space, cfg.dqn.buffer_size,
                             prioritized=cfg.dqn.prioritized, alpha=cfg.dqn.alpha, seed=cfg.seed)
        learner = ReplayLearner(
            DQNLearner(q_net, cfg.dqn, cfg.total_timesteps, device, precision), replay,
            NStepWriter(replay, cfg.dqn.n_step, cfg.dqn.gamma), utd_ratio=cfg.apex.utd_ratio,
            minibatch_size=cfg.dqn.minibatch_size, learning_starts=cfg.dqn.learning_starts,
            total_steps=cfg.total_timesteps, beta0=cfg.dqn.beta0)
        epsilons = slot_epsilons(cfg.num_envs, cfg.apex)
        groups = epsilon_group_names(epsilons, cfg.apex.epsilon_groups)
        run = Run.open(cfg, "apex", cfg, ckpt)
        undo.callback(run.close, failed=True)
        if ckpt is not None:
            restore_replay_trainer(run.dir, ckpt, learner)
        system = CentralSystem(sources, learner, autocast_fn(EpsilonGreedyAct(epsilons, cfg.seed, device), precision, device),
                               cfg.acting,
                               device=device, unrolls_per_batch=cfg.apex.unrolls_per_batch,
                               unroll_length=cfg.apex.unroll_length, env_steps=run.step, aux_size=AUX_SIZE)
        run.note(f"{len(sources)} source(s) of {sources[0].num_envs} envs, epsilons {epsilons.max():.3g}"
                 f"..{epsilons.min():.2g}, {type(replay).__name__}({cfg.dqn.buffer_size:,}), "
                 f"{cfg.apex.utd_ratio:g} gradient steps per env step, Q network on {device} ({precision})")

        state = central_replay_state(run, system, learner.replay, cfg.save_replay)
        training = Training(run, CentralLoop(run, system, state, episode_group=lambda ep: groups[ep.slot]),
                            learner, cfg, close=lambda: close_all(sources))
        undo.pop_all()
    return training


def apex_defaults(env_id: str) -> ApexTrainConfig:
    """Settings per task family: the Ape-X paper's Atari shape, and a tuned CartPole."""
    if is_atari(env_id):
        dqn = QLearningConfig(learning_rate=6.25e-5, adam_eps=1.5e-4, buffer_size=100_000, learning_starts=50_000,
                              minibatch_size=64, target_network_frequency=2500, double_q=True, n_step=3,
                              prioritized=True, alpha=0.6, beta0=0.4, max_grad_norm=40.0)
        apex = ApexConfig(utd_ratio=2 / 64, unroll_length=32, unrolls_per_batch=4)
        return ApexTrainConfig(env=env_id, num_envs=32, total_timesteps=10_000_000, dqn=dqn, apex=apex,
                               model=QModelConfig(dueling=True),
                               env_options={"episodic_life": True, "reward_clip": True})
    if env_id.startswith("MinAtar/"):
        dqn = QLearningConfig(learning_rate=2.5e-4, buffer_size=100_000, learning_starts=5_000, minibatch_size=32,
                              target_network_frequency=1000, double_q=True, n_step=3, prioritized=True)
        apex = ApexConfig(utd_ratio=1 / 32, unroll_length=16, unrolls_per_batch=4)
        return ApexTrainConfig(env=env_id, num_envs=16, total_timesteps=5_000_000, dqn=dqn, apex=apex)
    # DQN's CartPole settings (learning rate annealed to 0) at 32 samples learned per env step (utd 1/8),
    # and what keeps the final greedy policy steady: a replay that holds the whole run (early
    # failures stay in it), actors from exploring to near-greedy (below), minibatches of 256
    # (each gradient step less noisy than 64-row ones), a LayerNorm in every hidden layer and
    # gamma 0.995. Without the last two about one run in twelve ended below 475: its greedy
    # policy drifted the cart slowly to one side until it left the track after ~300 steps, a
    # failure that gamma 0.99's ~100-step horizon barely sees and that the exploring actors' own
    # episodes rarely reach. gamma 0.995 alone made more runs fail
    # (2 of 12: larger Q-values, less steady); with the LayerNorm every run measured held 500
    # (benchmarks/results/value_cartpole_seeds.md). Averaging the online weights as the policy
    # (--dqn.policy-average) or a 100k budget measured no better there. Even so about one run in
    # ten still ended drifting: the exploring actors' random actions keep the cart off the track's
    # end, so the replay never shows the greedy policy's own slow drift (apex_cartpole_flake.md).
    # epsilon_alpha 7 (the Ape-X paper's spread) gives the last actors near-greedy epsilons down to
    # 0.4^8, whose episodes carry that drift into the replay: no run drifted in 20 (apex_cartpole_drift.md).
    dqn = QLearningConfig(learning_rate=2.3e-3, anneal_lr=True, buffer_size=200_000, learning_starts=1_000,
                          minibatch_size=256, target_network_frequency=128, gamma=0.995, double_q=True, n_step=3,
                          prioritized=True)
    apex = ApexConfig(utd_ratio=32 / 256, epsilon_alpha=7.0, unroll_length=8, unrolls_per_batch=4)
    return ApexTrainConfig(env=env_id, num_envs=16, total_timesteps=150_000, dqn=dqn, apex=apex,
                           model=QModelConfig(hidden_sizes=(256, 256), layer_norm=True))


RENAMED = {("dqn", old): new for old, new in RENAMED_OPTIONS.items()}
"""Old option names of `seedpool train apex` -> today's: still accepted on the command line and in
a resumed run's config.json, with a deprecation line."""


def samples_utd_ratio(cfg: Mapping[str, Any], samples_per_step: float) -> float:
    """The old ``replay_ratio`` (samples learned per env step) as gradient steps per env step."""
    return samples_per_step / cfg["dqn"]["minibatch_size"]


CONVERTED = [Converted("apex", "replay_ratio", "utd_ratio", samples_utd_ratio, "samples learned per env step",
                       "gradient steps per env step")]
"""Old options of `seedpool train apex` whose value converts: still accepted on the command line and
in a resumed run's config.json, with a deprecation line."""

_DQN_ONLY = sorted({f.name for f in fields(DQNConfig)} - {f.name for f in fields(QLearningConfig)})


def upgrade_config(data: dict) -> dict:
    """A config dict of an older Ape-X run folder in today's option names.

    Such folders also list DQN's epsilon schedule, train_frequency and gradient_steps, which
    never acted in Ape-X (exploration is per env, pacing is --apex.utd-ratio), and PPO's
    replay_limit: they are dropped. Their apex.replay_ratio (samples per env step) is converted.
    """
    dropped = [("dqn", name) for name in (*_DQN_ONLY, "gradient_steps")] + [("", "replay_limit")]
    return convert_options(upgrade_options(data, RENAMED, dropped=dropped), CONVERTED)
