"""Runners: what drives a `Learner` with experience. A trainer builds the config, envs, model
and learner, then hands them to one of these.

- `SyncLoop` (runners/sync.py): the synchronous sampler loop: collect a rollout, update,
  log (PPO/A2C, DQN, SAC, TD3).
- `CentralSystem` + `CentralLoop` (runners/central.py): SEED-style central inference:
  actor loops -> inference server -> unroll queue -> learner thread (IMPALA, Ape-X, R2D2).

`seedpool.experiment.training.Training` drives either: advance, pause, change, save.
"""
from seedpool.runners.acting import ActingConfig, CentralRunConfig, close_all, make_pools, make_sources
from seedpool.runners.central import CentralLoop, CentralSystem, TrainingError, central_replay_state
from seedpool.runners.learner_thread import LearnerThread
from seedpool.runners.sync import SyncLoop

__all__ = ["ActingConfig", "CentralLoop", "CentralRunConfig", "CentralSystem", "LearnerThread", "SyncLoop",
           "TrainingError", "central_replay_state", "close_all", "make_pools", "make_sources"]
