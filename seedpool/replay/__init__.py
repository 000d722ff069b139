"""Replay for value-based agents (DQN, Ape-X): prioritized and uniform buffers, frame dedup, n-step rows.

    from seedpool.replay import PrioritizedReplay, UniformReplay, NStepWriter

See docs/replay.md for the API, the sum tree and frame-dedup designs and their contracts.
"""
from .buffers import PrioritizedReplay, UniformReplay
from .nstep import WRITER_FIELDS, NStepWriter
from .sum_tree import SumTree

__all__ = ["PrioritizedReplay", "UniformReplay", "NStepWriter", "SumTree", "WRITER_FIELDS"]
