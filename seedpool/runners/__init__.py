"""Runners: what drives a `Learner` with experience. A trainer builds the config, envs, model
and learner, then hands them to one of these.

- `run_sync` (runners/sync.py): the synchronous sampler loop: collect a rollout, update,
  log, checkpoint (PPO/A2C).
- `CentralSystem` + `run_central` (runners/central.py): SEED-style central inference:
  actor loops -> inference server -> unroll queue -> learner thread (IMPALA).
"""
from seedpool.runners.acting import ActingConfig, CentralRunConfig, make_pools, make_sources
from seedpool.runners.central import CentralSystem, TrainingError, run_central
from seedpool.runners.learner_thread import LearnerThread
from seedpool.runners.sync import run_sync

__all__ = ["ActingConfig", "CentralRunConfig", "CentralSystem", "LearnerThread", "TrainingError", "make_pools",
           "make_sources", "run_central", "run_sync"]
