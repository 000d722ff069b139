"""`train_impala`: env sources (local pools or Ray actor groups) -> central inference -> ImpalaLearner, driven by `CentralLoop` in a `Training`.

SEED RL: the central-inference system (seedpool.runners.central) does the acting,
batching and threading, with envs on this machine or on a Ray cluster (`--ray-address`);
this file only builds the config, sources, model and learner, and names the settings that
work per task family.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from seedpool.algos.impala import ImpalaConfig, ImpalaLearner, policy_act
from seedpool.algos.impala_recurrent import recurrent_policy_act
from seedpool.envs.registry import is_atari
from seedpool.experiment import Run, RunResult, set_rng_state
from seedpool.experiment.checkpoint import restore_learner, trainer_state
from seedpool.models import ModelConfig, is_recurrent
from seedpool.models.team import MultiAgentConfig
from seedpool.models.precision import autocast_fn, resolve_precision
from seedpool.experiment.training import Training
from seedpool.runners import (
    CentralLoop, CentralRunConfig, CentralSystem, TrainingError, close_all,
)
from seedpool.trainers.common import source_policy, start_central

__all__ = ["IMPALATrainConfig", "TrainingError", "build_impala", "impala_defaults", "train_impala", "upgrade_config"]


@dataclass
class IMPALATrainConfig(CentralRunConfig):
    """`seedpool train impala`: run options, acting layout (local or Ray), IMPALA hyperparameters, network."""

    impala: ImpalaConfig = field(default_factory=ImpalaConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    ma: MultiAgentConfig = field(default_factory=MultiAgentConfig)
    """Multi-agent (PettingZoo) envs: shared or per-group policies, agent ids, a centralised critic."""


def train_impala(cfg: IMPALATrainConfig) -> RunResult:
    """Train IMPALA with SEED-style central inference; returns the run's headline numbers."""
    return build_impala(cfg).train()


def build_impala(cfg: IMPALATrainConfig) -> Training:
    """The run ``train_impala`` trains, built and ready to advance (see `Training`)."""
    device, ckpt, sources = start_central(cfg, "impala")
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(close_all, sources)
        policy, group_of = source_policy(sources[0], cfg.model, cfg.ma)  # a team policy for agent rows
        precision = resolve_precision(cfg.precision, device, policy)
        learner = ImpalaLearner(policy, cfg.impala, device, total_steps=cfg.total_timesteps, precision=precision)
        if ckpt is not None:
            restore_learner(ckpt, learner)
            set_rng_state(ckpt["rng"])
        run = Run.open(cfg, "impala", cfg, ckpt)
        undo.callback(run.close, failed=True)
        act, initial = policy_act, None
        if is_recurrent(policy):  # the server keeps each env's state between requests
            act, initial = recurrent_policy_act, {k: v[0] for k, v in policy.initial_state(1).items()}
        system = CentralSystem(sources, learner, autocast_fn(act, precision, device), cfg.acting,
                               device=device, unrolls_per_batch=cfg.impala.unrolls_per_batch,
                               unroll_length=cfg.impala.unroll_length, env_steps=run.step,
                               initial_state=initial,
                               prev_inputs=is_recurrent(policy) and (cfg.model.prev_action or cfg.model.prev_reward))
        run.note(f"{len(sources)} source(s) of {sources[0].num_envs} envs, policy on {device} ({precision})")
        training = Training(run, CentralLoop(run, system, trainer_state, group_of), learner, cfg,
                            close=lambda: close_all(sources))
        undo.pop_all()
    return training


def impala_defaults(env_id: str, core: str = "none") -> IMPALATrainConfig:
    """Settings per task family; with a recurrent ``core`` ("lstm" or "gru", what
    ``--model.core`` gives the CLI) also what that core needs to learn (see `_with_core`)."""
    cfg = _family_defaults(env_id)
    return cfg if core == "none" else _with_core(cfg, env_id, core)


def _with_core(cfg: IMPALATrainConfig, env_id: str, core: str) -> IMPALATrainConfig:
    """The family's settings for a policy with a recurrent core (docs/recurrent.md).

    Vector tasks get recurrent PPO's shape, measured on a velocity-hidden CartPole on the
    threaded system (benchmarks/results/recurrent_defaults_seeds.md): 8 envs, batches of 8
    unrolls of 32 steps learned in 20 epochs, standardised observations, rewards x 0.1 and no
    entropy bonus, a small core straight on the observations and one of its own for the value head.
    """
    if is_atari(env_id):  # frames are scaled already, rewards clipped: only the core changes
        return replace(cfg, model=replace(cfg.model, core=core))
    impala = replace(cfg.impala, unroll_length=32, unrolls_per_batch=8, update_epochs=20, ent_coef=0.0,
                     reward_scale=0.1)
    return replace(cfg, num_envs=8, total_timesteps=300_000, impala=impala,
                   model=ModelConfig(core=core, core_size=64, hidden_sizes=(), critic_core=True, obs_norm=True))


def _family_defaults(env_id: str) -> IMPALATrainConfig:
    """Settings per task family: APPO on Atari (PPO's shape on V-trace targets), tuned CartPole."""
    if is_atari(env_id):
        # One batch is 32 unrolls of 32 steps (PPO's 8 x 128), learned in 4 epochs of 4
        # minibatches with PPO's clip on the behaviour ratio: plain IMPALA took one gradient
        # step per 640 env steps and stayed flat on Pong for millions of steps here.
        impala = ImpalaConfig(unroll_length=32, unrolls_per_batch=32, learning_rate=2.5e-4, ent_coef=0.01,
                              vf_coef=0.5, max_grad_norm=0.5, norm_adv=True, clip_coef=0.1,
                              update_epochs=4, num_minibatches=4)
        # Two torch threads for inference and learning: more end to end than one on Pong
        # (benchmarks/results/torch_threads_impala_pong-v5.md).
        return IMPALATrainConfig(env=env_id, num_envs=32, total_timesteps=10_000_000, impala=impala,
                                 torch_threads=2, env_options={"episodic_life": True, "reward_clip": True})
    # APPO in the shape of rl-zoo3's tuned PPO (256-step batches, many epochs, learning rate
    # and clip range annealed to 0). Plain IMPALA reached 475 but did not hold it, and
    # smaller APPO batches collapsed or stalled in 1-2 of 10 threaded runs (docs/seed.md).
    impala = ImpalaConfig(unroll_length=8, unrolls_per_batch=32, learning_rate=1e-3, gamma=0.98,
                          ent_coef=0.01, max_grad_norm=0.5, clip_coef=0.2, anneal_clip=True,
                          update_epochs=10, norm_adv=True)
    return IMPALATrainConfig(env=env_id, num_envs=16, total_timesteps=150_000, impala=impala)


# Option names of run folders written before the common vocabulary (old name -> new name;
# None: the option is gone). Resuming such a run maps them; see `upgrade_config`.
_RENAMED = {
    ("impala", "lr"): "learning_rate", ("impala", "entropy_coef"): "ent_coef",
    ("impala", "value_coef"): "vf_coef", ("impala", "batch_size"): "unrolls_per_batch",
    ("seed_rl", "env_batch_size"): "envs_per_recv", ("seed_rl", "max_batch"): "max_inference_batch",
    ("seed_rl", "queue_unrolls"): "queue_size",
}


def upgrade_config(data: dict) -> dict:
    """A config dict of an older IMPALA run folder in today's option names.

    ``impala.clip_rewards`` became the engine's ``reward_clip`` task option (same rewards
    reach the loss; episode returns are logged unclipped either way).
    """
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    if "seed_rl" in data:
        data["acting"] = data.pop("seed_rl")
    for (section, old), new in _RENAMED.items():
        section = "acting" if section == "seed_rl" else section
        if old in data.get(section, {}):
            data[section][new] = data[section].pop(old)
    data.pop("replay_limit", None)  # PPO's exact-resume option: it never acted here
    if data.get("impala", {}).pop("clip_rewards", False):
        data["env_options"] = {**data.get("env_options", {}), "reward_clip": True}
    return data
