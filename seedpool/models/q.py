"""Q networks for value-based agents (DQN, Ape-X): ``q_net(obs) -> Q-values [B, num_actions]``.

Each network is a torso (MLP layers or convolutions) followed by a :class:`QHead`. The
head's last hidden layer is its own, so with ``dueling=True`` the value and advantage
streams each get one, as in the dueling paper (Wang et al. 2016), and with
``dueling=False`` every network is exactly its paper's plain version:

- :class:`MLPQNetwork`: vector observations, ReLU hidden layers (SB3's DQN MLP).
- :class:`NatureCNNQNetwork`: uint8 frames ``[C, H, W]`` (Mnih et al. 2015), scaled by 1/255 inside.
- :class:`MinAtarQNetwork`: MinAtar's 0/1 grids ``[C, 10, 10]`` (Young & Tian 2019): one 3x3
  convolution with 16 filters, then 128 hidden units.
"""
from __future__ import annotations

import torch
from torch import nn

from seedpool.models.base import layer_init, scaled_trunk
from seedpool.models.cnn import TRUNKS, cnn_trunk


def _relu_stack(in_dim: int, widths: tuple[int, ...], layer_norm: bool = False) -> tuple[nn.Sequential, int]:
    """Linear (+ LayerNorm) + ReLU layers of the given widths, and the width they end with."""
    layers: list[nn.Module] = []
    for width in widths:
        layers += [layer_init(nn.Linear(in_dim, width)), *([nn.LayerNorm(width)] if layer_norm else []), nn.ReLU()]
        in_dim = width
    return nn.Sequential(*layers), in_dim


class QHead(nn.Module):
    """Q-values from features: one stream, or dueling ``V(s) + A(s, a) - mean_a A(s, a)``."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], num_actions: int, dueling: bool,
                 layer_norm: bool = False) -> None:
        super().__init__()
        self.dueling = dueling
        trunk, width = _relu_stack(in_dim, hidden, layer_norm)
        self.advantage = nn.Sequential(trunk, layer_init(nn.Linear(width, num_actions), std=1.0))
        self.value: nn.Sequential | None = None
        if dueling:
            trunk, width = _relu_stack(in_dim, hidden, layer_norm)
            self.value = nn.Sequential(trunk, layer_init(nn.Linear(width, 1), std=1.0))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, num_actions]``."""
        advantage = self.advantage(features)
        if self.value is None:
            return advantage
        # Subtracting the mean advantage makes V and A identifiable (the paper's eq. 9).
        return self.value(features) + advantage - advantage.mean(dim=-1, keepdim=True)


class QNetwork(nn.Module):
    """Base of seedpool's Q networks: ``forward(obs) -> [B, num_actions]``."""

    num_actions: int
    dueling: bool
    head: QHead

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """The torso's output ``[B, F]`` for a batch of raw observations."""
        raise NotImplementedError

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, num_actions]``, float32 (also under bf16 autocast), for a batch of
        observations (any numeric or bool dtype)."""
        return self.head(self.features(obs)).float()


class GreedyQ(nn.Module):
    """A Q network behind the policy face evaluation uses: ``act(obs)`` takes the action of the highest value."""

    def __init__(self, q_net: nn.Module) -> None:
        super().__init__()
        self.q_net = q_net

    def load_state_dict(self, state, strict: bool = True):
        """Load the Q network's own state (checkpoints hold it unwrapped)."""
        return self.q_net.load_state_dict(state, strict)

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> tuple[torch.Tensor, None, None]:
        """Greedy actions (``deterministic`` is moot: evaluation of Q-learning is greedy)."""
        return self.q_net(obs).argmax(dim=1), None, None


class MLPQNetwork(QNetwork):
    """ReLU MLP on flattened observations; the last hidden layer belongs to the head.

    ``layer_norm=True`` puts a LayerNorm after every hidden Linear layer (before its ReLU), which
    keeps bootstrapped Q-values from running away (Gallici et al. 2024, "Simplifying Deep
    Temporal Difference Learning")."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: tuple[int, ...] = (64, 64),
                 dueling: bool = False, layer_norm: bool = False) -> None:
        super().__init__()
        self.num_actions, self.dueling = num_actions, dueling
        hidden = tuple(hidden)
        self.torso, width = _relu_stack(obs_dim, hidden[:-1], layer_norm)
        self.head = QHead(width, hidden[-1:], num_actions, dueling, layer_norm)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Flattened float observations through the shared hidden layers."""
        return self.torso(obs.flatten(1).float())


class NatureCNNQNetwork(QNetwork):
    """The Nature-DQN network on uint8 frames ``[B, C, H, W]`` (at least 36x36); ``cnn="small"``: the
    2013 DQN network's trunk and a 256-wide hidden layer (`seedpool.models.cnn`)."""

    # Channels-last convolutions suit oneDNN on the CPU (see NatureCNNActorCritic).
    memory_format = torch.channels_last

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int, dueling: bool = False,
                 cnn: str = "nature") -> None:
        super().__init__()
        self.num_actions, self.dueling = num_actions, dueling
        self.torso, flat = cnn_trunk(obs_shape, cnn)
        self.head = QHead(flat, (TRUNKS[cnn][1],), num_actions, dueling)
        self.register_buffer("scale", torch.tensor(1.0 / 255.0), persistent=False)
        self.to(memory_format=self.memory_format)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Convolutional features; pixels are scaled to [0, 1] here, not in the env."""
        return scaled_trunk(self.torso, obs, self.scale, self.memory_format)


class MinAtarQNetwork(QNetwork):
    """MinAtar's network: conv 16x3x3 stride 1 + ReLU, then 128 ReLU units; input used as is (0/1)."""

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int, dueling: bool = False) -> None:
        super().__init__()
        self.num_actions, self.dueling = num_actions, dueling
        self.torso = nn.Sequential(layer_init(nn.Conv2d(obs_shape[0], 16, 3, stride=1)), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            flat = self.torso(torch.zeros(1, *obs_shape)).shape[1]
        self.head = QHead(flat, (128,), num_actions, dueling)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Convolutional features of the float grid (bool cells become 0.0 / 1.0)."""
        return self.torso(obs.float())
