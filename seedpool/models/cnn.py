"""The Nature-DQN convolutional actor-critic (Mnih et al. 2015) for stacked Atari frames."""
from __future__ import annotations

import torch
from torch import nn

from seedpool.models.base import ActorCritic, layer_init, scaled_trunk
from seedpool.models.distributions import CategoricalHead, Params


def nature_trunk(obs_shape: tuple[int, int, int]) -> tuple[nn.Sequential, int]:
    """The Nature-DQN convolutions (flattened output) and their output width for ``obs_shape``."""
    trunk = nn.Sequential(
        layer_init(nn.Conv2d(obs_shape[0], 32, 8, stride=4)),
        nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2)),
        nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1)),
        nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        flat = trunk(torch.zeros(1, *obs_shape)).shape[1]
    return trunk, flat


class NatureCNNTorso(nn.Module):
    """The Nature CNN up to its 512-wide hidden layer: features for a recurrent core."""

    memory_format = torch.channels_last
    out_dim = 512

    def __init__(self, obs_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.trunk, flat = nature_trunk(obs_shape)
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, 512)), nn.ReLU())
        self.register_buffer("scale", torch.tensor(1.0 / 255.0), persistent=False)
        self.to(memory_format=self.memory_format)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features ``[B, 512]`` of uint8 frames ``[B, C, H, W]``."""
        return self.fc(scaled_trunk(self.trunk, obs, self.scale, self.memory_format))


class NatureCNNActorCritic(ActorCritic):
    """Shared conv trunk with linear policy and value heads; takes uint8 ``[B, C, H, W]``."""

    # oneDNN's convolutions run faster on channels-last tensors on the CPU (update of 256
    # frames, 2 threads: 1.26x on an AVX-512 Zen 5, benchmarks/results/cnn_layout.md; 1.32x
    # on an AVX2 Zen 3, cnn_layout_zen3.md); observations are converted to it together with
    # the uint8 -> float cast, in one copy.
    memory_format = torch.channels_last

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int) -> None:
        super().__init__()
        self.trunk, flat = nature_trunk(obs_shape)
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, 512)), nn.ReLU())
        self.pi_head = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.vf_head = layer_init(nn.Linear(512, 1), std=1.0)
        self.head = CategoricalHead()
        self.register_buffer("scale", torch.tensor(1.0 / 255.0), persistent=False)
        self.to(memory_format=self.memory_format)

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Logits ``[B, A]`` and values ``[B]``; pixels are scaled to [0, 1] here, not in the env."""
        hidden = self.fc(scaled_trunk(self.trunk, obs, self.scale, self.memory_format))
        return self.pi_head(hidden), self.vf_head(hidden).squeeze(-1)

