"""Policy networks: the :class:`ActorCritic` interface, an MLP and the Nature CNN.

``make_policy(obs_space, action_space, ModelConfig())`` picks the network that fits the
spaces and says clearly when a requested network cannot work on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np

from seedpool.models.base import ActorCritic
from seedpool.models.cnn import NatureCNNActorCritic
from seedpool.models.distributions import CategoricalHead, GaussianHead
from seedpool.models.mlp import MLPActorCritic

__all__ = [
    "ActorCritic",
    "CategoricalHead",
    "GaussianHead",
    "MLPActorCritic",
    "ModelConfig",
    "NatureCNNActorCritic",
    "make_policy",
]


@dataclass
class ModelConfig:
    """Which policy network to build."""

    kind: Literal["auto", "mlp", "cnn"] = "auto"
    """Network: "cnn" for image observations [C, H, W], "mlp" for vectors; "auto" picks by the observation space."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the MLP's hidden layers (policy and value nets each get this stack)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """MLP activation function."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions only)."""


def is_image_space(space: gym.Space) -> bool:
    """True for uint8 Box spaces shaped [C, H, W] (stacked frames)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def make_policy(obs_space: gym.Space, action_space: gym.Space, cfg: ModelConfig) -> ActorCritic:
    """Build the actor-critic for these spaces, or raise ValueError saying what would fit."""
    discrete = isinstance(action_space, gym.spaces.Discrete)
    continuous = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (discrete or continuous):
        raise ValueError(
            f"seedpool's policies support Discrete or 1-D Box action spaces; this env has {action_space}."
        )
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"seedpool's policies need a Box observation space; this env has {obs_space}.")
    kind = cfg.kind
    if kind == "auto":
        kind = "cnn" if is_image_space(obs_space) else "mlp"
    if kind == "cnn":
        if not is_image_space(obs_space):
            raise ValueError(
                "the CNN policy needs image observations: uint8 frames shaped [C, H, W] such as "
                f"Atari's 4x84x84; this env gives {obs_space.dtype} {obs_space.shape}. "
                "Use --model.kind mlp (or auto)."
            )
        if not discrete:
            raise ValueError(f"the CNN policy supports Discrete actions only; this env has {action_space}.")
        return NatureCNNActorCritic(obs_space.shape, int(action_space.n))
    obs_dim = int(np.prod(obs_space.shape))
    action_dim = int(action_space.n) if discrete else int(action_space.shape[0])
    return MLPActorCritic(
        obs_dim, action_dim, continuous, tuple(cfg.hidden_sizes), cfg.activation, cfg.init_log_std
    )
