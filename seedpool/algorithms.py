"""The algorithms seedpool trains, each as "module:attribute" paths imported on use.

The command line reaches a trainer through its entry (its config class, per-env defaults, train
function, older option names); evaluation reaches the network a run saved through the entry's
``policy``, an `seedpool.models.greedy.EvalPolicy` that says how that network is rebuilt and how
it acts greedily, so no layer below names an algorithm. This module imports nothing from
seedpool: importing a path is the caller's business, and `seedpool eval` loads no trainer.
"""
from __future__ import annotations

import importlib
from typing import Any, NamedTuple


ACTOR_CRITIC_POLICY = "seedpool.models.greedy:ACTOR_CRITIC"
"""The `EvalPolicy` of an actor-critic, also that of a run whose algorithm is not listed here (a
training loop of one's own that saves an `ActorCritic`)."""


class Trainer(NamedTuple):
    """How an algorithm is reached: "module:attribute" paths, imported on use."""

    config: str  # the dataclass of its options (tyro parses it)
    defaults: str  # env_id -> config instance with that env's well-known settings
    train: str  # config -> RunResult
    upgrade: str | None = None  # config dict of an older run folder -> today's option names
    renamed: str | None = None  # {(section, old name): new name}: old spellings still accepted on the command line
    converted: str | None = None  # [Converted]: old options whose value converts (command line and run folders)
    policy: str = ACTOR_CRITIC_POLICY  # EvalPolicy: how `seedpool eval` rebuilds the saved network and acts


TRAINERS: dict[str, Trainer] = {
    "ppo": Trainer("seedpool.trainers.ppo:PPOTrainConfig", "seedpool.trainers.ppo:ppo_defaults",
                   "seedpool.trainers.ppo:train_ppo"),
    "impala": Trainer("seedpool.trainers.impala:IMPALATrainConfig", "seedpool.trainers.impala:impala_defaults",
                      "seedpool.trainers.impala:train_impala", "seedpool.trainers.impala:upgrade_config"),
    "dqn": Trainer("seedpool.trainers.dqn:DQNTrainConfig", "seedpool.trainers.dqn:dqn_defaults",
                   "seedpool.trainers.dqn:train_dqn", "seedpool.trainers.dqn:upgrade_config",
                   "seedpool.trainers.dqn:RENAMED", "seedpool.trainers.dqn:CONVERTED",
                   policy="seedpool.models.greedy:Q_NETWORK"),
    "apex": Trainer("seedpool.trainers.apex:ApexTrainConfig", "seedpool.trainers.apex:apex_defaults",
                    "seedpool.trainers.apex:train_apex", "seedpool.trainers.apex:upgrade_config",
                    "seedpool.trainers.apex:RENAMED", "seedpool.trainers.apex:CONVERTED",
                    policy="seedpool.models.greedy:Q_NETWORK"),
    "r2d2": Trainer("seedpool.trainers.r2d2:R2D2TrainConfig", "seedpool.trainers.r2d2:r2d2_defaults",
                    "seedpool.trainers.r2d2:train_r2d2", "seedpool.trainers.r2d2:upgrade_config",
                    converted="seedpool.trainers.r2d2:CONVERTED", policy="seedpool.models.greedy:RECURRENT_Q"),
    "sac": Trainer("seedpool.trainers.sac:SACTrainConfig", "seedpool.trainers.sac:sac_defaults",
                   "seedpool.trainers.sac:train_sac", policy="seedpool.models.greedy:SQUASHED_GAUSSIAN_ACTOR"),
    "td3": Trainer("seedpool.trainers.td3:TD3TrainConfig", "seedpool.trainers.td3:td3_defaults",
                   "seedpool.trainers.td3:train_td3", policy="seedpool.models.greedy:DETERMINISTIC_ACTOR"),
}


def eval_policy_path(algo: str) -> str:
    """The path of the `EvalPolicy` of ``algo``'s saved network."""
    entry = TRAINERS.get(algo)
    return entry.policy if entry is not None else ACTOR_CRITIC_POLICY


def load(path: str) -> Any:
    """The object a "module:attribute" path names (the module imported now)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)
