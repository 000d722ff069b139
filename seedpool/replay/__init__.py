"""Replay for agents that learn from stored transitions: prioritized and uniform buffers, frame
dedup, n-step rows, a factory from the env's spaces and the replay file.

    from seedpool.replay import make_replay, NStepWriter, save_replay_file, load_replay_file

See docs/replay.md for the API, the sum tree and frame-dedup designs and their contracts.
"""
from .buffers import PrioritizedReplay, UniformReplay
from .factory import is_frame_stack, make_replay, replay_fields, space_field
from .files import REPLAY_FILE, load_replay_file, save_replay_file
from .nstep import WRITER_FIELDS, NStepWriter
from .sum_tree import SumTree

__all__ = ["PrioritizedReplay", "UniformReplay", "NStepWriter", "SumTree", "WRITER_FIELDS", "make_replay",
           "replay_fields", "space_field", "is_frame_stack", "save_replay_file", "load_replay_file",
           "REPLAY_FILE"]
