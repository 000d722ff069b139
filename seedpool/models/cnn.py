"""Convolutional actor-critics for stacked Atari frames.

Two trunks (``--model.cnn``): ``"nature"``, the Nature-DQN network (Mnih et al. 2015: three
convolutions 32-64-64, a 512-wide hidden layer), and ``"small"``, the network of the first DQN
paper (Mnih et al. 2013) that A3C also used: two convolutions 16-32 and a 256-wide hidden layer,
about a third of the Nature network's arithmetic per frame, so its updates cost far less on a
CPU (`benchmarks/results/time_to_score.md` has a run with it).
"""
from __future__ import annotations

import torch
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, layer_init, scaled_trunk
from seedpool.models.distributions import CategoricalHead, Params


# Each trunk's convolutions (out channels, kernel, stride) and the width of the hidden layer after them.
TRUNKS = {"nature": ([(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512), "small": ([(16, 8, 4), (32, 4, 2)], 256)}


def cnn_trunk(obs_shape: tuple[int, int, int], cnn: str = "nature") -> tuple[nn.Sequential, int]:
    """The convolutions of trunk ``cnn`` (flattened output) and their output width for ``obs_shape``."""
    if cnn not in TRUNKS:
        raise ConfigError(f"--model.cnn must be one of {tuple(TRUNKS)}, got {cnn!r}")
    convs = TRUNKS[cnn][0]
    layers: list[nn.Module] = []
    channels = obs_shape[0]
    for out, kernel, stride in convs:
        layers += [layer_init(nn.Conv2d(channels, out, kernel, stride=stride)), nn.ReLU()]
        channels = out
    # The last ReLU after the Flatten, not before: the same values, but flattening a channels-last
    # output copies it into a contiguous one, and the ReLU's backward over the contiguous gradient
    # of the layer after costs less than over mixed layouts.
    # Parameter names stay those of the convolutions at 0, 2, 4.
    trunk = nn.Sequential(*layers[:-1], nn.Flatten(), layers[-1])
    with torch.no_grad():
        flat = trunk(torch.zeros(1, *obs_shape)).shape[1]
    return trunk, flat


class NatureCNNTorso(nn.Module):
    """The CNN (Nature by default) up to its hidden layer: features for a recurrent core."""

    memory_format = torch.channels_last

    def __init__(self, obs_shape: tuple[int, int, int], cnn: str = "nature") -> None:
        super().__init__()
        self.trunk, flat = cnn_trunk(obs_shape, cnn)
        self.out_dim = TRUNKS[cnn][1]
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, self.out_dim)), nn.ReLU())
        self.register_buffer("scale", torch.tensor(1.0 / 255.0), persistent=False)
        self.to(memory_format=self.memory_format)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features ``[B, out_dim]`` of uint8 frames ``[B, C, H, W]``."""
        return self.fc(scaled_trunk(self.trunk, obs, self.scale, self.memory_format))


class NatureCNNActorCritic(ActorCritic):
    """Shared conv trunk (``cnn``: "nature" or "small") with linear policy and value heads; takes
    uint8 ``[B, C, H, W]``."""

    # oneDNN's convolutions prefer channels-last tensors on the CPU (benchmarks/results/
    # cnn_layout.md, cnn_layout_zen3.md); observations are converted to it together with the
    # uint8 -> float cast, in one copy.
    memory_format = torch.channels_last

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int, cnn: str = "nature") -> None:
        super().__init__()
        self.trunk, flat = cnn_trunk(obs_shape, cnn)
        hidden = TRUNKS[cnn][1]
        self.fc = nn.Sequential(layer_init(nn.Linear(flat, hidden)), nn.ReLU())
        self.pi_head = layer_init(nn.Linear(hidden, num_actions), std=0.01)
        self.vf_head = layer_init(nn.Linear(hidden, 1), std=1.0)
        self.head = CategoricalHead()
        self.register_buffer("scale", torch.tensor(1.0 / 255.0), persistent=False)
        self.to(memory_format=self.memory_format)

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Logits ``[B, A]`` and values ``[B]``; pixels are scaled to [0, 1] here, not in the env."""
        hidden = self.fc(scaled_trunk(self.trunk, obs, self.scale, self.memory_format))
        return self.pi_head(hidden), self.vf_head(hidden).squeeze(-1)

