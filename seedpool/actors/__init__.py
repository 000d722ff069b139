"""Actors: the loops that run the policy on the engine's envs and fill rollout buffers."""
from seedpool.actors.episodes import Episode, EpisodeTracker
from seedpool.actors.sampler import Rollout, SyncSampler

__all__ = ["Episode", "EpisodeTracker", "Rollout", "SyncSampler"]
