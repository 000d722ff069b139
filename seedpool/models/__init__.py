"""Policy networks (the :class:`ActorCritic` interface, an MLP, the Nature CNN, and either torso
with a recurrent core) and Q networks.

``make_policy(obs_space, action_space, ModelConfig())`` and
``make_q_network(obs_space, action_space, QModelConfig())`` pick the network that fits the
spaces and say clearly when a requested network cannot work on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic
from seedpool.models.cnn import NatureCNNActorCritic, NatureCNNTorso
from seedpool.models.distributions import CategoricalHead, GaussianHead
from seedpool.models.grid import GridCNNActorCritic, GridCNNTorso
from seedpool.models.mlp import MLPActorCritic
from seedpool.models.recurrent import MLPTorso, RecurrentActorCritic, is_recurrent
from seedpool.models.q import MinAtarQNetwork, MLPQNetwork, NatureCNNQNetwork, QNetwork

__all__ = [
    "ActorCritic",
    "CategoricalHead",
    "GaussianHead",
    "MLPActorCritic",
    "MLPQNetwork",
    "MinAtarQNetwork",
    "ModelConfig",
    "NatureCNNActorCritic",
    "NatureCNNQNetwork",
    "QModelConfig",
    "QNetwork",
    "RecurrentActorCritic",
    "is_recurrent",
    "make_policy",
    "make_q_network",
]


@dataclass
class ModelConfig:
    """Which policy network to build."""

    kind: Literal["auto", "mlp", "cnn"] = "auto"
    """Network: "cnn" for image observations [C, H, W], "mlp" for vectors; "auto" picks by the observation space."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the MLP's hidden layers (policy and value nets each get this stack)."""
    cnn: Literal["nature", "small", "grid"] = "nature"
    """The CNN's trunk: "nature" (Mnih et al. 2015: convolutions 32-64-64, 512 hidden units), "small"
    (Mnih et al. 2013, A3C's: 16-32, 256 hidden units; about half the learner's time per frame on a CPU),
    both over frames [C, H, W], or "grid" (rl-starter-files': 2x2 convolutions 16-32-64, 64-wide tanh
    heads) over symbolic grids [H, W, C] such as MiniGrid's 7x7x3 view (seedpool/models/grid.py)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """MLP activation function."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions only)."""
    core: Literal["none", "lstm", "gru"] = "none"
    """Recurrent core after the torso: "lstm" or "gru" give the policy memory (its state resets where
    an episode starts); "none" is feed-forward (see docs/recurrent.md)."""
    core_size: int = 128
    """Width of the recurrent core's state (with --model.core lstm|gru)."""
    prev_action: bool = False
    """Feed the previous action to the recurrent core (one-hot for discrete actions)."""
    prev_reward: bool = False
    """Feed the previous reward to the recurrent core."""
    critic_core: bool = False
    """Give the value head a recurrent core of its own (the policy's core then learns from the policy loss only)."""
    obs_norm: bool = False
    """Standardise vector observations by running mean/std inside the policy (MLP torsos, with or
    without a core): updated from each rollout or batch of unrolls after its update, saved in
    checkpoints, used by eval (SAC/TD3 share the spelling)."""


def is_image_space(space: gym.Space) -> bool:
    """True for uint8 Box spaces shaped [C, H, W] (stacked frames)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def make_policy(obs_space: gym.Space, action_space: gym.Space, cfg: ModelConfig) -> ActorCritic:
    """Build the actor-critic for these spaces, or raise ValueError saying what would fit."""
    discrete = isinstance(action_space, gym.spaces.Discrete)
    continuous = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (discrete or continuous):
        raise ConfigError(
            f"seedpool's policies support Discrete or 1-D Box action spaces; this env has {action_space}."
        )
    if not isinstance(obs_space, gym.spaces.Box):
        raise ConfigError(f"seedpool's policies need a Box observation space; this env has {obs_space}.")
    kind = cfg.kind
    if kind == "auto":
        kind = "cnn" if is_image_space(obs_space) else "mlp"
    if cfg.obs_norm and kind != "mlp":
        raise ConfigError("--model.obs-norm standardises vector observations for MLP policies; this run's "
                          f"policy is {kind!r}. Drop --model.obs-norm (images are scaled by 1/255 already) "
                          "or use --model.kind mlp.")
    if cfg.core != "none":
        return make_recurrent_policy(obs_space, action_space, cfg, kind)
    if kind == "cnn":
        _check_cnn(obs_space, action_space, cfg.cnn)
        if cfg.cnn == "grid":
            return GridCNNActorCritic(obs_space.shape, int(action_space.n))
        return NatureCNNActorCritic(obs_space.shape, int(action_space.n), cfg.cnn)
    obs_dim = int(np.prod(obs_space.shape))
    action_dim = int(action_space.n) if discrete else int(action_space.shape[0])
    return MLPActorCritic(
        obs_dim, action_dim, continuous, tuple(cfg.hidden_sizes), cfg.activation, cfg.init_log_std,
        cfg.obs_norm,
    )


def _check_cnn(obs_space: gym.Space, action_space: gym.Space, cnn: str = "nature") -> None:
    """Raise ValueError unless the CNN policy fits these spaces."""
    if not is_image_space(obs_space):
        raise ConfigError(
            "the CNN policy needs image observations: uint8 frames shaped [C, H, W] such as "
            f"Atari's 4x84x84; this env gives {obs_space.dtype} {obs_space.shape}. "
            "Use --model.kind mlp (or auto)."
        )
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"the CNN policy supports Discrete actions only; this env has {action_space}.")
    least = _FRAME_MIN_SIZE.get(cnn)
    if least is not None and min(obs_space.shape[1:]) < least:
        raise ConfigError(
            f"the {cnn!r} CNN needs frames [C, H, W] of at least {least}x{least}; this env "
            f"gives {obs_space.shape}. For a small grid [H, W, C] (MiniGrid's 7x7x3) use --model.cnn grid, "
            "or --model.kind mlp."
        )


def make_recurrent_policy(obs_space: gym.spaces.Box, action_space: gym.Space, cfg: ModelConfig,
                          kind: str) -> RecurrentActorCritic:
    """The torso ``kind`` ("mlp" or "cnn") followed by the ``cfg.core`` recurrent core and the heads."""
    if cfg.core not in ("lstm", "gru"):
        raise ConfigError(f"--model.core must be lstm, gru or none, got {cfg.core!r}")
    if cfg.core_size < 1:
        raise ConfigError(f"--model.core-size must be at least 1, got {cfg.core_size}")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if kind == "cnn":
        _check_cnn(obs_space, action_space, cfg.cnn)
        torso: nn.Module = GridCNNTorso(obs_space.shape) if cfg.cnn == "grid" else NatureCNNTorso(obs_space.shape, cfg.cnn)
    else:
        torso = MLPTorso(int(np.prod(obs_space.shape)), tuple(cfg.hidden_sizes), cfg.activation, cfg.obs_norm)
    action_dim = int(action_space.n) if discrete else int(action_space.shape[0])
    return RecurrentActorCritic(torso, torso.out_dim, cfg.core, cfg.core_size, action_dim, not discrete,
                                cfg.prev_action, cfg.prev_reward, cfg.init_log_std, cfg.critic_core)


@dataclass
class QModelConfig:
    """Which Q network to build (value-based agents: DQN, Ape-X)."""

    kind: Literal["auto", "mlp", "cnn", "minatar_cnn"] = "auto"
    """"cnn": Nature CNN for uint8 frames [C, H, W] (at least 36x36); "minatar_cnn": MinAtar's
    small CNN for 0/1 grids [C, 10, 10]; "mlp" for vectors; "auto": cnn for 3-D uint8, minatar_cnn
    for 3-D bool, else mlp."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """MLP hidden widths (SB3's DQN default; rl-zoo3 tunes CartPole to (256, 256)). The CNNs keep
    their papers' widths (512 Nature, 256 small, 128 MinAtar)."""
    cnn: Literal["nature", "small"] = "nature"
    """The CNN's trunk (kind cnn): "nature" (Mnih et al. 2015) or "small" (Mnih et al. 2013: 16-32
    convolutions, 256 hidden units; see ModelConfig.cnn)."""
    dueling: bool = False
    """Dueling head: separate value and advantage streams, Q = V + A - mean(A)."""
    layer_norm: bool = False
    """LayerNorm after each hidden layer of the MLP (before its ReLU): steadier Q-values (the
    Ape-X CartPole default). MLP only: the CNNs keep their papers' layers."""


_NATURE_MIN_SIZE = 36  # the smallest frame the Nature CNN's three convolutions accept
_FRAME_MIN_SIZE = {"nature": _NATURE_MIN_SIZE, "small": 20}  # "small": 8x8 stride 4, then 4x4 stride 2


def _q_kind(obs_space: gym.spaces.Box, kind: str) -> str:
    """The network `kind` resolves to for these observations, or ValueError saying what fits."""
    image = len(obs_space.shape) == 3
    if kind == "auto":
        if image and obs_space.dtype == np.bool_:
            return "minatar_cnn"
        return "cnn" if is_image_space(obs_space) else "mlp"
    if kind == "cnn" and not (is_image_space(obs_space) and min(obs_space.shape[1:]) >= _NATURE_MIN_SIZE):
        raise ConfigError(
            "the Nature CNN Q network needs uint8 frames [C, H, W] of at least "
            f"{_NATURE_MIN_SIZE}x{_NATURE_MIN_SIZE} such as Atari's 4x84x84; this env gives "
            f"{obs_space.dtype} {obs_space.shape}. Use kind 'minatar_cnn' for small grids, or 'mlp'."
        )
    if kind == "minatar_cnn" and not image:
        raise ConfigError(f"the MinAtar CNN needs observations shaped [C, H, W]; this env gives {obs_space.shape}.")
    if kind not in ("mlp", "cnn", "minatar_cnn"):
        raise ConfigError(f"Q network kind must be auto, mlp, cnn or minatar_cnn, got {kind!r}")
    return kind


def make_q_network(obs_space: gym.Space, action_space: gym.Space, cfg: QModelConfig) -> QNetwork:
    """Build the Q network for these spaces, or raise ValueError saying what would fit."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(
            f"Q networks need a Discrete action space (one Q-value per action); this env has {action_space}."
        )
    if not isinstance(obs_space, gym.spaces.Box):
        raise ConfigError(f"seedpool's Q networks need a Box observation space; this env has {obs_space}.")
    num_actions = int(action_space.n)
    kind = _q_kind(obs_space, cfg.kind)
    if cfg.layer_norm and kind != "mlp":
        raise ConfigError(f"layer_norm applies to the MLP Q network only; this env's observations take {kind!r}.")
    if kind == "cnn":
        return NatureCNNQNetwork(obs_space.shape, num_actions, cfg.dueling, cfg.cnn)
    if kind == "minatar_cnn":
        return MinAtarQNetwork(obs_space.shape, num_actions, cfg.dueling)
    return MLPQNetwork(int(np.prod(obs_space.shape)), num_actions, tuple(cfg.hidden_sizes), cfg.dueling,
                       cfg.layer_norm)
