"""Actors: the loops that run the policy on the engine's envs and fill rollout buffers.

Names are imported on first use, so ``seedpool.actors.pool_source`` can be loaded by a
process that steps envs only (a Ray actor group) without the sampler's torch import.
"""
import importlib

_EXPORTS = {"Episode": "episodes", "EpisodeTracker": "episodes", "Rollout": "sampler", "SyncSampler": "sampler"}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seedpool.actors' has no attribute {name!r}")
    return getattr(importlib.import_module(f"seedpool.actors.{_EXPORTS[name]}"), name)
