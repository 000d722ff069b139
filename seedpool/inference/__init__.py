"""SEED-style central inference: dynamic batching, per-env state, unrolls, parameter versions."""

from seedpool.inference.batcher import DynamicBatcher, Reply, Request
from seedpool.inference.server import ActFn, ActOutput, InferenceServer, StateSlots
from seedpool.inference.sources import EnvBatch, Source
from seedpool.inference.stats import InferenceStats
from seedpool.inference.unrolls import TrajectoryBuffers, Unrolls, concat_unrolls, take_unrolls

__all__ = [
    "ActFn", "ActOutput", "DynamicBatcher", "EnvBatch", "InferenceServer", "InferenceStats",
    "Reply", "Request", "Source", "StateSlots", "TrajectoryBuffers", "Unrolls",
    "concat_unrolls", "take_unrolls",
]
