"""SEED-style central inference: dynamic batching, per-env state, unrolls, parameter versions."""

from seedpool.inference.batcher import DynamicBatcher, Reply, Request
from seedpool.inference.server import ActFn, InferenceServer
from seedpool.inference.state_slots import StateSlots
from seedpool.inference.sources import Source
from seedpool.inference.stats import InferenceStats
from seedpool.inference.unrolls import TrajectoryBuffers
from seedpool.records import ActOutput, EnvBatch, Unrolls, concat_unrolls, take_unrolls

__all__ = [
    "ActFn", "ActOutput", "DynamicBatcher", "EnvBatch", "InferenceServer", "InferenceStats",
    "Reply", "Request", "Source", "StateSlots", "TrajectoryBuffers", "Unrolls",
    "concat_unrolls", "take_unrolls",
]
