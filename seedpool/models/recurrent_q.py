"""Recurrent Q networks (R2D2): a torso, an LSTM or GRU core, a Q head (dueling or not).

The core is `seedpool.models.recurrent.RecurrentCore`, with the same state convention as
the recurrent actor-critics: the state handed in is the one *entering* an observation, and
it is zeroed on rows whose ``first`` is set (an episode starts there) before it is used, in
acting and in learning alike.

``step(obs, state, first)`` acts one step; ``sequence(obs [T, B], state, first [T, B])``
runs whole sequences from a stored state (the torso once on all ``T x B`` observations).
`GreedyRecurrentQ` puts a recurrent Q network behind the recurrent policy face
(``act_step``), so `seedpool eval` and `PolicyMemory` carry its state like a policy's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import layer_init
from seedpool.models.cnn import NatureCNNTorso
from seedpool.models.q import QHead
from seedpool.models.recurrent import MLPTorso, RecurrentCore, State


@dataclass
class RecurrentQModelConfig:
    """Which recurrent Q network to build (R2D2)."""

    kind: Literal["auto", "mlp", "cnn", "minatar_cnn"] = "auto"
    """Torso: "cnn" (Nature CNN, uint8 frames [C, H, W]), "minatar_cnn" (MinAtar's conv for [C, 10, 10]
    grids), "mlp" for vectors; "auto": cnn for 3-D uint8, minatar_cnn for 3-D bool, else mlp."""
    hidden_sizes: tuple[int, ...] = (64,)
    """MLP torso widths before the core (ReLU)."""
    cnn: Literal["nature", "small"] = "nature"
    """The CNN torso (kind cnn): "nature" (Mnih et al. 2015) or "small" (Mnih et al. 2013; see ModelConfig.cnn)."""
    core: Literal["lstm", "gru"] = "lstm"
    """Recurrent core after the torso (R2D2 needs one: --model.core lstm|gru)."""
    core_size: int = 128
    """Width of the core's state."""
    head_sizes: tuple[int, ...] = (64,)
    """Hidden widths of the Q head after the core (each dueling stream gets its own)."""
    dueling: bool = True
    """Dueling head: Q = V + A - mean(A) (R2D2 uses it)."""


class MinAtarTorso(nn.Module):
    """MinAtar's convolution (16 filters 3x3, stride 1, ReLU), flattened: features for a core."""

    def __init__(self, obs_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.net = nn.Sequential(layer_init(nn.Conv2d(obs_shape[0], 16, 3, stride=1)), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            self.out_dim = int(self.net(torch.zeros(1, *obs_shape)).shape[1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


class RecurrentQNetwork(nn.Module):
    """torso -> LSTM/GRU core -> Q head; ``forward(obs)`` without a state is refused."""

    recurrent = True

    def __init__(self, torso: nn.Module, feature_dim: int, core: str, core_size: int, num_actions: int,
                 head_sizes: tuple[int, ...], dueling: bool) -> None:
        super().__init__()
        self.torso = torso
        self.core = RecurrentCore(core, feature_dim, core_size)  # type: ignore[arg-type]
        self.head = QHead(core_size, tuple(head_sizes), num_actions, dueling)
        self.num_actions, self.dueling = num_actions, dueling

    @property
    def state_sizes(self) -> dict[str, int]:
        """The state's parts and widths (what sequence replay stores per sequence)."""
        return {k: self.core.hidden_size for k in self.core.state_names}

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> State:
        """Zero state for ``batch`` rows."""
        return self.core.initial_state(batch, device)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        raise TypeError("a recurrent Q network needs its state: call step(obs, state, first) or "
                        "sequence(obs, state, first), not forward(obs)")

    def step(self, obs: torch.Tensor, state: State, first: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Q-values ``[B, A]`` (float32) of one step and the state entering the next."""
        out, state = self.core.step(self.torso(obs), state, first)
        return self.head(out).float(), state

    def sequence(self, obs: torch.Tensor, state: State, first: torch.Tensor, final_state: bool = True,
                 ) -> tuple[torch.Tensor, State | None]:
        """Q-values ``[T, B, A]`` of time-major sequences ``obs [T, B, ...]`` from ``state``, reset at
        ``first [T, B]``, and the final state (None unless ``final_state``)."""
        T, B = first.shape
        features = self.torso(obs.reshape(T * B, *obs.shape[2:]))
        out, state = self.core.sequence(features.reshape(T, B, -1), state, first, final_state)
        return self.head(out).float(), state


class GreedyRecurrentQ(nn.Module):
    """A recurrent Q network behind the recurrent policy face: greedy actions, state carried by the caller."""

    recurrent = True

    def __init__(self, q_net: RecurrentQNetwork) -> None:
        super().__init__()
        self.q_net = q_net

    def load_state_dict(self, state, strict: bool = True):
        """Load the Q network's own state (checkpoints hold it unwrapped)."""
        return self.q_net.load_state_dict(state, strict)

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> State:
        """Zero state for ``batch`` envs."""
        return self.q_net.initial_state(batch, device)

    def act_step(self, obs, state, first, prev_action=None, prev_reward=None, deterministic: bool = True):
        """Greedy actions: ``(action, None, max Q, next state)`` (evaluation of Q-learning is greedy)."""
        q, state = self.q_net.step(obs, state, first)
        return q.argmax(dim=1), None, q.max(dim=1).values, state


def make_recurrent_q_network(obs_space: gym.Space, action_space: gym.Space,
                             cfg: RecurrentQModelConfig) -> RecurrentQNetwork:
    """The recurrent Q network for these spaces, or ValueError saying what would fit."""
    from seedpool.models import _q_kind

    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(f"Q networks need a Discrete action space (one Q-value per action); this env has "
                          f"{action_space}.")
    if not isinstance(obs_space, gym.spaces.Box):
        raise ConfigError(f"seedpool's Q networks need a Box observation space; this env has {obs_space}.")
    if cfg.core not in ("lstm", "gru"):
        raise ConfigError(f"R2D2 needs a recurrent core: --model.core lstm or gru, got {cfg.core!r}")
    if cfg.core_size < 1:
        raise ConfigError(f"--model.core-size must be at least 1, got {cfg.core_size}")
    kind = _q_kind(obs_space, cfg.kind)
    if kind == "cnn":
        torso: nn.Module = NatureCNNTorso(obs_space.shape, cfg.cnn)
    elif kind == "minatar_cnn":
        torso = MinAtarTorso(obs_space.shape)
    else:
        torso = MLPTorso(int(np.prod(obs_space.shape)), tuple(cfg.hidden_sizes), "relu")
    return RecurrentQNetwork(torso, torso.out_dim, cfg.core, cfg.core_size, int(action_space.n),
                             tuple(cfg.head_sizes), cfg.dueling)
