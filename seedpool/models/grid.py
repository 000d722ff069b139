"""A small CNN for symbolic grid views (``--model.cnn grid``): MiniGrid's egocentric image.

MiniGrid's observation image is ``[H, W, 3]`` uint8 (7x7 by default) whose cells hold small
integer codes (object, colour, state), not pixels: the Nature CNN's 8x8 stride-4 filters do not
fit it. This is rl-starter-files' network (Willems, `model.py`): convolutions 16-32-64 of 2x2
with a 2x2 max pool after the first (a 7x7 view becomes 64 features), then separate policy and
value heads of one 64-wide tanh layer each. The codes are read as they come, unscaled, as
rl-starter-files reads them. Layers start from the PPO paper's orthogonal initialisation
(`layer_init`), as seedpool's other networks, not rl-starter-files' row-normalised Gaussian.
"""
from __future__ import annotations

import torch
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, layer_init
from seedpool.models.distributions import CategoricalHead, Params


def _grid_trunk(obs_shape: tuple[int, int, int]) -> tuple[nn.Sequential, int]:
    """The convolutions over ``[H, W, C]`` grids and their flattened output width."""
    h, w, c = obs_shape
    if h < 7 or w < 7:  # each 2x2 convolution takes a cell off, the pool halves: 7x7 comes out 1x1
        raise ConfigError(f"--model.cnn grid needs a grid of at least 7x7 cells ([H, W, C]); got {obs_shape}")
    trunk = nn.Sequential(
        layer_init(nn.Conv2d(c, 16, 2)), nn.ReLU(), nn.MaxPool2d(2),
        layer_init(nn.Conv2d(16, 32, 2)), nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 2)), nn.ReLU(), nn.Flatten(),
    )
    with torch.no_grad():
        flat = trunk(torch.zeros(1, c, h, w)).shape[1]
    return trunk, flat


def _channels_first(obs: torch.Tensor) -> torch.Tensor:
    """uint8 ``[B, H, W, C]`` -> float ``[B, C, H, W]``."""
    return obs.permute(0, 3, 1, 2).float()


class GridCNNTorso(nn.Module):
    """The grid CNN's convolutions: features for a recurrent core."""

    def __init__(self, obs_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.trunk, self.out_dim = _grid_trunk(obs_shape)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features ``[B, out_dim]`` of uint8 grids ``[B, H, W, C]``."""
        return self.trunk(_channels_first(obs))


class GridCNNActorCritic(ActorCritic):
    """The grid CNN with a 64-wide tanh policy head and value head; takes uint8 ``[B, H, W, C]``."""

    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int) -> None:
        super().__init__()
        self.trunk, flat = _grid_trunk(obs_shape)
        self.pi = nn.Sequential(layer_init(nn.Linear(flat, 64)), nn.Tanh(),
                                layer_init(nn.Linear(64, num_actions), std=0.01))
        self.vf = nn.Sequential(layer_init(nn.Linear(flat, 64)), nn.Tanh(), layer_init(nn.Linear(64, 1), std=1.0))
        self.head = CategoricalHead()

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        """Logits ``[B, A]`` and values ``[B]``."""
        x = self.trunk(_channels_first(obs))
        return self.pi(x), self.vf(x).squeeze(-1)
