"""Networks of the off-policy continuous-control agents (SAC, TD3, DDPG).

Policies act in the unit box ``[-1, 1]^A``: the squashed Gaussian (SAC) is ``tanh`` of a
Gaussian draw, the deterministic actor (TD3, DDPG) ends in ``tanh``. :class:`BoxScaler`
maps unit actions to an env's ``Box`` bounds and back, so the critics, the replay and the
entropy target see the same well-conditioned range on every task (as Stable-Baselines3
stores actions); the env gets ``low + (a + 1) / 2 * (high - low)``.

:class:`TwinQ` holds any number of Q networks (2 for SAC and TD3, 1 for DDPG) as one
ensemble whose layers are batched matrix products: one op per layer for all critics.

:class:`ContinuousAgent` is the module a checkpoint's ``model`` holds: actor, critics and
the scaler, with the ``act`` face `seedpool eval` uses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.normalize import RunningNorm

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The squashed Gaussian's log std range (CleanRL's and SB3's bounds: wide enough to explore,
narrow enough that tanh's log-det stays finite)."""

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


@dataclass
class ContinuousModelConfig:
    """Actor and critic MLPs of the off-policy continuous agents (SAC, TD3, DDPG)."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers of the actor and of each critic (the SAC and TD3 papers' 256, 256)."""
    activation: Literal["relu", "tanh"] = "relu"
    """Activation after each hidden layer."""
    num_critics: int = 2
    """Q networks: 2 (twin critics, the minimum is the target: SAC, TD3) or 1 (DDPG)."""
    obs_norm: bool = False
    """Standardise observations by running mean/std (acting updates them; saved in checkpoints, used by eval)."""


def mlp(in_dim: int, hidden: tuple[int, ...], out_dim: int, activation: str = "relu") -> nn.Sequential:
    """Linear layers of the given widths with ``activation`` between them, ``out_dim`` outputs."""
    if activation not in _ACTIVATIONS:
        raise ConfigError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), _ACTIVATIONS[activation]()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class BoxScaler(nn.Module):
    """Unit actions ``[-1, 1]^A`` <-> a ``Box``'s ``[low, high]``; refuses infinite or empty bounds."""

    def __init__(self, space: gym.Space) -> None:
        super().__init__()
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ConfigError(f"SAC, TD3 and DDPG need a 1-D Box action space; this env has {space}")
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ConfigError(
                f"SAC, TD3 and DDPG squash actions into the action space's bounds, but this env's Box has "
                f"infinite bounds (low={space.low}, high={space.high}); wrap the env so that its actions are "
                "bounded (e.g. gymnasium.wrappers.RescaleAction or ClipAction over a bounded Box)")
        if np.any(high <= low):
            raise ConfigError(f"the action space's bounds are empty where high <= low: low={space.low}, high={space.high}")
        self.register_buffer("scale", torch.as_tensor((high - low) / 2, dtype=torch.float32))
        self.register_buffer("center", torch.as_tensor((high + low) / 2, dtype=torch.float32))
        self.dtype = space.dtype

    def to_env(self, unit: torch.Tensor) -> torch.Tensor:
        """Env actions from unit actions."""
        return unit * self.scale + self.center

    def to_unit(self, action: torch.Tensor) -> torch.Tensor:
        """Unit actions from env actions."""
        return (action - self.center) / self.scale


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor | None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tanh(u), log pi(tanh(u)))`` for ``u = mean + std * noise`` (``noise`` None: the mean, log-prob 0 rows).

    The log-probability is that of the unit action: the Gaussian's density at ``u`` less
    ``log(1 - tanh(u)^2)`` per dimension, written as ``2 (log 2 - u - softplus(-2u))``, which
    stays finite where ``tanh(u)`` rounds to +-1 (the naive form is -inf there).
    """
    if noise is None:
        return torch.tanh(mean), torch.zeros(mean.shape[:-1], device=mean.device)
    u = mean + log_std.exp() * noise
    gaussian = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_det = (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), gaussian - log_det


def squashed_log_std(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The actor's raw output squashed smoothly into ``[LOG_STD_MIN, LOG_STD_MAX]``, and
    ``tanh(raw)`` (the hand-written backward's derivative reads it)."""
    squashed = torch.tanh(raw)
    return log_std_of(squashed), squashed


def log_std_of(squashed):
    """The log std for ``tanh(raw)`` (a tensor or an array): ``[-1, 1]`` mapped onto ``[LOG_STD_MIN, LOG_STD_MAX]``."""
    return LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (squashed + 1.0)


class SquashedGaussianActor(nn.Module):
    """SAC's policy: an MLP gives the mean and log std of a Gaussian whose draw goes through tanh."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], activation: str = "relu") -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, 2 * action_dim, activation)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)`` ``[B, A]`` each, log std squashed smoothly into its range."""
        mean, raw = self.net(obs.flatten(1).float()).float().chunk(2, dim=-1)
        return mean, squashed_log_std(raw)[0]

    def sample(self, obs: torch.Tensor, deterministic: bool = False,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(unit action [B, A], log pi [B])``; deterministic: tanh of the mean."""
        mean, log_std = self(obs)
        noise = None if deterministic else torch.randn(mean.shape, generator=generator, device=mean.device)
        return squashed_gaussian(mean, log_std, noise)


class DeterministicActor(nn.Module):
    """TD3's and DDPG's policy: an MLP ending in tanh, one unit action per observation."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...], activation: str = "relu") -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden, action_dim, activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Unit actions ``[B, A]``."""
        return torch.tanh(self.net(obs.flatten(1).float()).float())


class TwinQ(nn.Module):
    """``num_critics`` Q networks over ``(obs, unit action)`` as one ensemble: ``forward -> [num_critics, B]``.

    Each layer is one batched matrix product over the critics (``torch.baddbmm``) instead of
    one small product per critic: the per-op cost dominates networks this size on a CPU.
    Every critic is initialised as ``nn.Linear`` would initialise it.
    """

    def __init__(self, in_dim: int, hidden: tuple[int, ...], num_critics: int = 2, activation: str = "relu") -> None:
        super().__init__()
        if num_critics < 1:
            raise ConfigError(f"num_critics must be >= 1, got {num_critics}")
        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.num_critics = num_critics
        self.activation_name = activation
        self.activation = {"relu": torch.relu, "tanh": torch.tanh}[activation]
        widths = (in_dim, *hidden, 1)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            layers = [nn.Linear(fan_in, fan_out) for _ in range(num_critics)]
            self.weights.append(nn.Parameter(torch.stack([m.weight.detach().T for m in layers])))
            self.biases.append(nn.Parameter(torch.stack([m.bias.detach()[None] for m in layers])))

    def layer_params(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Each layer's stacked weights ``[K, in, out]`` and biases ``[K, 1, out]``, as plain lists
        (slicing a ``ParameterList`` builds a new module each time, a cost on every update)."""
        return list(self.weights._parameters.values()), list(self.biases._parameters.values())

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q-values ``[num_critics, B]`` (float32)."""
        x = torch.cat([obs.flatten(1).float(), action.float()], dim=-1)
        x = x.unsqueeze(0).expand(self.num_critics, *x.shape)
        weights, biases = self.layer_params()
        for w, b in zip(weights[:-1], biases[:-1]):
            x = self.activation(torch.baddbmm(b, x, w))
        # The output layer in float32 even under bf16 autocast: Q-values reach the hundreds,
        # where bf16's 8-bit mantissa would round them (and the TD errors) by whole units. A
        # product with one output column is a dot product per row: multiply and sum is cheaper
        # than a matrix product (and its backward than the outer product bmm's would take).
        with torch.autocast(x.device.type, enabled=False):
            return (x.float() * weights[-1].transpose(1, 2)).sum(-1) + biases[-1].squeeze(-1)


class ContinuousAgent(nn.Module):
    """What a SAC/TD3/DDPG checkpoint's ``model`` holds: ``actor``, ``critic``, the action ``scaler``
    and, with ``obs_norm``, the observation statistics (``normalize``; acting feeds them via `observe`).

    The actor and critics read normalised observations: learners pass replay observations
    through `normalize` first (the replay keeps raw ones)."""

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, cfg: ContinuousModelConfig,
                 stochastic: bool) -> None:
        super().__init__()
        if not isinstance(obs_space, gym.spaces.Box):
            raise ConfigError(f"SAC, TD3 and DDPG need a Box observation space; this env has {obs_space}")
        self.scaler = BoxScaler(action_space)
        obs_dim, action_dim = int(np.prod(obs_space.shape)), int(action_space.shape[0])
        hidden = tuple(cfg.hidden_sizes)
        actor_cls = SquashedGaussianActor if stochastic else DeterministicActor
        self.actor = actor_cls(obs_dim, action_dim, hidden, cfg.activation)
        self.critic = TwinQ(obs_dim + action_dim, hidden, cfg.num_critics, cfg.activation)
        self.stochastic = stochastic
        self.obs_norm = RunningNorm(tuple(obs_space.shape)) if cfg.obs_norm else None

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations as the networks read them (standardised with ``obs_norm``, else as they are)."""
        return obs if self.obs_norm is None else self.obs_norm(obs)

    def observe(self, obs: np.ndarray) -> None:
        """Acting's new observations ``[B, ...]``: they update the running statistics, if any."""
        if self.obs_norm is not None:
            self.obs_norm.update(obs)

    def unit_action(self, obs: torch.Tensor, deterministic: bool = False,
                    generator: torch.Generator | None = None) -> torch.Tensor:
        """The policy's unit actions ``[B, A]`` for raw observations (a deterministic actor's are its
        own; exploration noise is acting's)."""
        obs = self.normalize(obs)
        if not self.stochastic:
            return self.actor(obs)
        # The draw of `SquashedGaussianActor.sample`, without the log-probability acting has no use for.
        mean, log_std = self.actor(obs)
        if deterministic:
            return torch.tanh(mean)
        return torch.tanh(mean + log_std.exp() * torch.randn(mean.shape, generator=generator, device=mean.device))

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, None, None]:
        """Env actions ``[B, A]`` in the Box's bounds (the face evaluation uses)."""
        return self.scaler.to_env(self.unit_action(obs, deterministic)), None, None
