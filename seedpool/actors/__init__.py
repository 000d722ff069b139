"""Actors: the loops that run the policy on the engine's envs and fill rollout buffers."""
from seedpool.actors.sampler import Episode, Rollout, SyncSampler

__all__ = ["Episode", "Rollout", "SyncSampler"]
