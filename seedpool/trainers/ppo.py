"""`train_ppo`: the engine's envs -> sync sampler -> PPOLearner, driven by `SyncLoop` in a `Training`."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Literal

from seedpool import kernels
from seedpool.actors.sampler import make_sampler
from seedpool.algos.ppo import PPOConfig, PPOLearner
from seedpool.envs.agents.resolve import is_pettingzoo_id
from seedpool.envs.registry import is_atari, is_mujoco
from seedpool.errors import ConfigError
from seedpool.experiment import (
    CHECKPOINT_FILE, Run, RunConfig, RunResult, load_checkpoint, set_rng_state, setup_torch,
)
from seedpool.experiment.checkpoint import restore_learner, resume_env_seed, trainer_state
from seedpool.models import ModelConfig
from seedpool.models.team import MultiAgentConfig
from seedpool.models.precision import resolve_precision
from seedpool.experiment.training import Training
from seedpool.league import SelfPlay, SelfPlayConfig, SelfPlayOptions
from seedpool.runners.sync import SyncLoop
from seedpool.actors.agent_rows import make_envs
from seedpool.trainers.common import rows_and_policy


@dataclass
class PPOTrainConfig(RunConfig):
    """`seedpool train ppo`: run options, PPO hyperparameters and the policy network."""

    ppo: PPOConfig = field(default_factory=PPOConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: Literal["auto", "sync", "double"] = "auto"
    """Rollout loop: "sync" steps all envs in lockstep; "double" alternates two halves (async engine)."""
    ma: MultiAgentConfig = field(default_factory=MultiAgentConfig)
    """Multi-agent (PettingZoo) envs: shared or per-group policies, agent ids, a centralised critic."""
    replay_limit: int = 2_000_000
    """Exact resume keeps a log of actions sent to the envs while the run has at most this many env steps; 0 turns it off (see docs/training.md)."""
    selfplay: bool = False
    """Train one seat of a game against a league of past snapshots and bots (docs/selfplay.md)."""
    league: SelfPlayOptions = field(default_factory=SelfPlayConfig)
    """The league of --selfplay."""


def train_ppo(cfg: PPOTrainConfig, pool=None) -> RunResult:
    """Train PPO as configured (or continue ``cfg.resume``); returns the run's headline numbers.

    ``pool``: an already built pool with the engine's API to train on instead of
    ``seedpool.make(cfg.env, ...)`` (benchmarks feed EnvPool this way); it is closed at the end.
    """
    return build_ppo(cfg, pool).train()


def build_ppo(cfg: PPOTrainConfig, pool=None) -> Training:
    """The run ``train_ppo`` trains, built and ready to advance (see `Training`)."""
    if cfg.model.core != "none" and cfg.ppo.num_minibatches > cfg.num_envs:
        # Recurrent minibatches are groups of whole env sequences (checked here, before a run folder exists).
        raise ConfigError(f"--model.core {cfg.model.core}: a minibatch holds whole env sequences, so "
                          f"--ppo.num-minibatches must be at most --num-envs ({cfg.num_envs}), got {cfg.ppo.num_minibatches}")
    if cfg.selfplay:
        cfg.league.check()  # a league with no opponents is refused before any env starts
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, "ppo") if cfg.resume else None
    sampler_kind = _sampler_kind(cfg)
    if pool is None:
        pool = make_envs(cfg.env, num_envs=cfg.num_envs, backend=cfg.backend, seed=_env_seed(cfg, ckpt, sampler_kind),
                         batch_size=cfg.num_envs // 2 if sampler_kind == "double" else None, **cfg.env_options)
    with contextlib.ExitStack() as undo:  # a failure while building closes what was built
        undo.callback(pool.close)
        pool, policy, group_of = rows_and_policy(pool, cfg.model, cfg.ma)  # a multi-agent env's rows
        policy = policy.to(device)
        selfplay = SelfPlay(cfg.league, pool, policy, cfg.env, device, cfg.seed) if cfg.selfplay else None
        if selfplay is not None:  # the sampler steps the learner's rows only
            pool, group_of = selfplay.rows, None
        precision = resolve_precision(cfg.precision, device, policy)
        kernels.warm_up(policy, device, precision)  # before the run's clock, as pools do for native envs
        learner = PPOLearner(policy, cfg.ppo, cfg.total_timesteps, precision)
        run = Run.open(cfg, "ppo", cfg, ckpt)
        undo.callback(run.close, failed=True)
        # Opponents' moves are not logged, so a self-play run resumes with new games.
        sampler = make_sampler(sampler_kind, pool, policy, cfg.ppo.num_steps, device, run.timer,
                               0 if selfplay else cfg.replay_limit, precision)
        run.note(f"{pool!r}, {sampler_kind} sampler, policy on {device} ({precision})")
        if ckpt is not None:
            if selfplay is not None:
                selfplay.load_state_dict(ckpt["league"])
            _restore(ckpt, learner, sampler)
        loop = SyncLoop(sampler, learner, lambda: _state(learner, sampler), group_of)
        if selfplay is not None:
            loop = selfplay.loop(loop)
        training = Training(run, loop, learner, cfg, close=pool.close)
        undo.pop_all()
    return training


def _state(learner: PPOLearner, sampler) -> dict:
    """Everything a resumed run needs besides the run's counters."""
    return trainer_state(learner.state_dict(), acting=sampler.state_dict())


def _restore(ckpt: dict, learner: PPOLearner, sampler) -> None:
    """Load a checkpoint into freshly built objects, then rebuild the envs' state."""
    restore_learner(ckpt, learner)
    sampler.load_state_dict(ckpt["acting"])
    set_rng_state(ckpt["rng"])  # last: building and replaying must not shift the generators


def _sampler_kind(cfg: PPOTrainConfig) -> str:
    """Resolve "auto" to "sync": it was ahead of "double" on every setup tried (docs/training.md)."""
    if cfg.sampler == "double" and cfg.num_envs % 2:
        raise ConfigError("--sampler double splits the envs in two halves: --num-envs must be even, "
                          f"got {cfg.num_envs}")
    if cfg.sampler != "auto":
        return cfg.sampler
    return "sync"


def _env_seed(cfg: PPOTrainConfig, ckpt: dict | None, sampler_kind: str) -> int:
    """The pool's seed: the run's seed, or a fresh one when a resume cannot replay the envs."""
    if ckpt is None or (sampler_kind == "sync" and ckpt["acting"].get("actions") is not None):
        return cfg.seed
    return resume_env_seed(cfg.seed, ckpt)


def ppo_defaults(env_id: str, core: str = "none") -> PPOTrainConfig:
    """Well-known settings per task family; with a recurrent ``core`` ("lstm" or "gru", what
    ``--model.core`` gives the CLI) also what that core needs to learn (see `_with_core`)."""
    cfg = _family_defaults(env_id)
    return cfg if core == "none" else _with_core(cfg, env_id, core)


def _with_core(cfg: PPOTrainConfig, env_id: str, core: str) -> PPOTrainConfig:
    """The family's settings for a policy with a recurrent core (docs/recurrent.md).

    Vector tasks other than the named families (a user's own env, CartPole) get the shape
    measured on a velocity-hidden CartPole (benchmarks/results/recurrent_defaults_seeds.md):
    standardised observations and rewards scaled by their returns' spread (without them the
    same LSTM did not learn that task in the budget), 20 epochs of one minibatch of whole env
    sequences, a small core straight on the observations, and one of its own for the value head.
    """
    if is_atari(env_id) or _family(env_id) == "minigrid":
        # Atari: frames are scaled already, rewards clipped; MiniGrid: the grid CNN's features feed
        # the core (not measured with a core yet). Only the core changes.
        return replace(cfg, model=replace(cfg.model, core=core))
    if is_mujoco(env_id) or env_id.startswith("Pendulum"):
        # The same rollout cut into one env's sequence per minibatch (a minibatch holds whole
        # env sequences, so it cannot be smaller than one env's rollout): not measured yet.
        rows = cfg.num_envs * cfg.ppo.num_steps
        envs = cfg.ppo.num_minibatches
        ppo = replace(cfg.ppo, num_steps=rows // envs)
        return replace(cfg, num_envs=envs, ppo=ppo, model=replace(cfg.model, core=core, obs_norm=True))
    ppo = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=20, learning_rate=1e-3, gamma=0.98,
                    gae_lambda=0.8, clip_coef=0.2, anneal_clip=True, ent_coef=0.0, reward_norm=True)
    return PPOTrainConfig(env=env_id, num_envs=8, total_timesteps=200_000, ppo=ppo,
                          model=ModelConfig(core=core, core_size=64, hidden_sizes=(), critic_core=True,
                                            obs_norm=True))


def _multiagent_defaults(env_id: str) -> PPOTrainConfig:
    """PettingZoo tasks (MPE's simple_spread, simple_tag, ...): the MAPPO paper's MPE settings
    (Yu et al. 2022: 10 epochs, clip 0.2, lr 7e-4, entropy 0.01, GAE 0.95) with rollouts of two
    25-step episodes, four minibatches, and returns scaled by their spread (its value
    normalisation's role) at gamma 0.95, which suits 25-step episodes: on simple_spread the
    paper's 0.99 without the scaling learned about half as fast here
    (benchmarks/results/multiagent_learning.md). Time steps count agent rows."""
    if env_id.startswith("connect_four"):
        return _board_game_defaults(env_id)
    ppo = PPOConfig(num_steps=50, num_minibatches=4, update_epochs=10, learning_rate=7e-4, ent_coef=0.01,
                    gamma=0.95, gae_lambda=0.95, clip_coef=0.2, reward_norm=True)
    return PPOTrainConfig(env=env_id, num_envs=32, total_timesteps=1_000_000, ppo=ppo)


def _board_game_defaults(env_id: str) -> PPOTrainConfig:
    """Connect four (with or without --selfplay): the MPE settings above with GAE at gamma 0.9
    and lambda 0.8, so that a move's advantage is mostly what it led to within the next moves
    (a win taken, a threat blocked); against the same league the MPE's 0.95/0.95 learned those
    tactics more slowly (benchmarks/results/selfplay_connect_four_settings.md). Time steps
    count the learner's rows (with --selfplay: its own moves)."""
    ppo = PPOConfig(num_steps=50, num_minibatches=4, update_epochs=10, learning_rate=7e-4, ent_coef=0.01,
                    gamma=0.9, gae_lambda=0.8, clip_coef=0.2, reward_norm=True)
    return PPOTrainConfig(env=env_id, num_envs=32, total_timesteps=1_000_000, ppo=ppo)


def _family_defaults(env_id: str) -> PPOTrainConfig:
    """Well-known settings per task family: rl-zoo3's tuned CartPole, the PPO paper's Atari,
    rl-starter-files' MiniGrid (measured here: `_minigrid_defaults`)."""
    if is_atari(env_id):
        # The PPO paper's Atari settings with 32 envs instead of 8 and 16 minibatches instead of
        # 4: the same minibatch (256 rows) and the same gradient steps per env step, so the same
        # learning cost per env step, but a rollout from four times as many games. On Pong three
        # seeds reached a 20-game mean of 18 at 1.01-1.09M env steps (gpu_h200.md); the paper's
        # 8 envs took 1.71M for seed 1 and never for seed 2 in 2.27M (ppo_pong_seed2_curve.md).
        ppo = PPOConfig(num_steps=128, num_minibatches=16, update_epochs=4, learning_rate=2.5e-4,
                        clip_coef=0.1, clip_vloss=True, ent_coef=0.01, vf_coef=0.25,
                        gamma=0.99, gae_lambda=0.95)
        # vf_coef 0.25 on the plain MSE equals the usual 0.5 x (1/2)MSE of baselines and CleanRL.
        # Two torch threads: learning is most of a run, and a second thread for it paid more end
        # to end than one thread with the envs in workers (the engine steps them in this process
        # between updates; benchmarks/results/torch_threads_ppo_pong-v5.md). With 32 envs `auto`
        # steps them in this process and one worker.
        return PPOTrainConfig(env=env_id, num_envs=32, total_timesteps=10_000_000, ppo=ppo, torch_threads=2,
                              env_options={"episodic_life": True, "reward_clip": True},
                              replay_limit=200_000)
    if is_pettingzoo_id(env_id):
        return _multiagent_defaults(env_id)
    if _family(env_id) == "minigrid":
        return _minigrid_defaults(env_id)
    if env_id.startswith("CartPole"):
        ppo = PPOConfig(num_steps=32, num_minibatches=1, update_epochs=20, learning_rate=1e-3,
                        gamma=0.98, gae_lambda=0.8, clip_coef=0.2, anneal_clip=True, ent_coef=0.0)
        return PPOTrainConfig(env=env_id, num_envs=8, total_timesteps=100_000, ppo=ppo)
    if env_id.startswith("Pendulum"):
        ppo = PPOConfig(num_steps=256, num_minibatches=16, update_epochs=10, learning_rate=1e-3,
                        gamma=0.9, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.0, reward_scale=0.1)
        return PPOTrainConfig(env=env_id, num_envs=8, total_timesteps=100_000, ppo=ppo)
    if is_mujoco(env_id):
        # The PPO paper's MuJoCo settings (Schulman et al. 2017, table 3: one env, T 2048, 10 epochs
        # of 32 minibatches, Adam 3e-4, gamma 0.99, lambda 0.95, clip 0.2) with the observation and
        # reward normalisation its baselines code (and CleanRL) apply, and CleanRL's value clip;
        # vf_coef 0.25 on the plain MSE is their 0.5 x (1/2)MSE.
        ppo = PPOConfig(num_steps=2048, num_minibatches=32, update_epochs=10, learning_rate=3e-4,
                        gamma=0.99, gae_lambda=0.95, clip_coef=0.2, clip_vloss=True, ent_coef=0.0,
                        vf_coef=0.25, reward_norm=True)
        return PPOTrainConfig(env=env_id, num_envs=1, total_timesteps=1_000_000, ppo=ppo,
                              model=ModelConfig(obs_norm=True))
    # Anything else: CleanRL's classic-control settings.
    ppo = PPOConfig(num_steps=128, num_minibatches=4, update_epochs=4, learning_rate=2.5e-4,
                    ent_coef=0.01, gamma=0.99, gae_lambda=0.95)
    return PPOTrainConfig(env=env_id, num_envs=8, total_timesteps=500_000, ppo=ppo)


def _family(env_id: str) -> str | None:
    """The name of the seedpool family that builds ``env_id`` ("minigrid", "dmc", ...), or None."""
    from seedpool.envs.registry import find

    family = find(env_id) if isinstance(env_id, str) else None
    return family.name if family is not None else None


def _minigrid_defaults(env_id: str) -> PPOTrainConfig:
    """MiniGrid and BabyAI: rl-starter-files' PPO (16 envs x 128 steps, 4 epochs of 256-row
    minibatches, Adam 1e-3 with eps 1e-8, entropy 0.01, value loss 0.5 clipped as the policy) and
    its CNN over the 7x7x3 view (--model.cnn grid), with advantages normalised per minibatch and
    the learning rate decayed to zero, as seedpool's other PPO defaults. On DoorKey-8x8 that
    change solved both seeds tried in 2M steps (20-episode mean >= 0.9 at 1.54M and 1.12M),
    where rl-starter-files' own settings (no normalisation, a constant rate) solved one at 1.96M and
    not the other, and an MLP over the flattened view learned nothing
    (benchmarks/results/ppo_minigrid_doorkey_curve.md)."""
    ppo = PPOConfig(num_steps=128, num_minibatches=8, update_epochs=4, learning_rate=1e-3, anneal_lr=True,
                    adam_eps=1e-8, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, clip_vloss=True, ent_coef=0.01,
                    vf_coef=0.5, max_grad_norm=0.5, norm_adv=True)
    return PPOTrainConfig(env=env_id, num_envs=16, total_timesteps=2_000_000, ppo=ppo,
                          model=ModelConfig(kind="cnn", cnn="grid"))
