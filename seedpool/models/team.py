"""Policies for teams of agents: one network shared by every agent, or one per agent group,
each with its own critic or a centralised one (MAPPO: the value reads the env's global state).

A multi-agent run hands the policy one row per agent (see seedpool/actors/agent_rows.py),
whose features are blocks side by side: the agent's own observation, optionally its slot
as a one-hot, its group as a one-hot (per-group policies), and the env's `state()` (a
centralised critic). The actor never reads the state block: acting stays decentralised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, layer_init
from seedpool.models.distributions import CategoricalHead, GaussianHead

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


@dataclass
class MultiAgentConfig:
    """`--ma.*`: how a multi-agent env's agents share policies (ignored for single-agent envs)."""

    policies: Literal["shared", "per-group"] = "shared"
    """One policy for every agent, or one per agent group (groups by name prefix: adversary_0 -> adversary)."""
    agent_id: bool = False
    """Give each row its agent slot (one-hot) as an extra input, so a shared policy can tell agents apart."""
    critic: Literal["local", "central"] = "local"
    """"central": the value reads the env's global state() (MAPPO); the policy always its own observation."""


@dataclass(frozen=True)
class TeamInputs:
    """Widths of a row's feature blocks, in order: own observation, agent one-hot, group
    one-hot, state, action mask (0 where a block is absent)."""

    obs: int
    agent: int = 0
    group: int = 0
    state: int = 0
    mask: int = 0

    @property
    def width(self) -> int:
        return self.obs + self.agent + self.group + self.state + self.mask

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(own, agent, group, state, mask) columns of features `x`."""
        a = self.obs
        g = a + self.agent
        s = g + self.group
        m = s + self.state
        return x[:, :a], x[:, a:g], x[:, g:s], x[:, s:m], x[:, m:m + self.mask]


def _mlp(inputs: int, hidden: tuple[int, ...], out: int, activation: str, out_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [layer_init(nn.Linear(inputs, h)), _ACTIVATIONS[activation]()]
        inputs = h
    layers.append(layer_init(nn.Linear(inputs, out), std=out_std))
    return nn.Sequential(*layers)


class TeamActorCritic(ActorCritic):
    """Per-group (or one shared) actor and critic MLPs over team features (see the module doc)."""

    def __init__(self, inputs: TeamInputs, groups: int, action_dim: int, continuous: bool,
                 hidden: tuple[int, ...] = (64, 64), activation: str = "tanh", init_log_std: float = 0.0,
                 central: bool = False) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        if central and not inputs.state:
            raise ConfigError("a centralised critic needs the env's state block")
        self.inputs, self.groups, self.central, self.continuous = inputs, groups, central, continuous
        actor_in = inputs.obs + inputs.agent
        critic_in = (inputs.state if central else inputs.obs) + inputs.agent
        # The PPO paper's small policy-head init (0.01) keeps the first policy near uniform.
        self.actors = nn.ModuleList([_mlp(actor_in, hidden, action_dim, activation, 0.01) for _ in range(groups)])
        self.critics = nn.ModuleList([_mlp(critic_in, hidden, 1, activation, 1.0) for _ in range(groups)])
        self.head = GaussianHead() if continuous else CategoricalHead()
        if continuous:
            self.log_std = nn.Parameter(torch.full((groups, action_dim), float(init_log_std)))

    def forward(self, obs: torch.Tensor):
        x = obs.flatten(1).float()
        own, agent, group, state, mask = self.inputs.split(x)
        actor_x = torch.cat([own, agent], 1) if agent.shape[1] else own
        critic_base = state if self.central else own
        critic_x = torch.cat([critic_base, agent], 1) if agent.shape[1] else critic_base
        if self.groups == 1:
            out, value = self.actors[0](actor_x), self.critics[0](critic_x).squeeze(-1)
            gid = None
        else:
            gid = group.argmax(1)
            out = x.new_empty((x.shape[0], self.actors[0][-1].out_features))
            value = x.new_empty(x.shape[0])
            for g in range(self.groups):
                rows = (gid == g).nonzero().squeeze(1)
                if rows.numel():
                    out[rows] = self.actors[g](actor_x[rows])
                    value[rows] = self.critics[g](critic_x[rows]).squeeze(-1)
        if self.continuous:
            log_std = self.log_std[0].expand_as(out) if gid is None else self.log_std[gid]
            return (out, log_std), value
        if mask.shape[1]:
            # Ruled-out actions get no probability, in acting and in the loss alike (the mask is
            # part of the stored observation). A row with no legal action is inactive: its
            # action is ignored, so it keeps every choice rather than a distribution of NaNs.
            legal = (mask > 0.5) | (mask <= 0.5).all(1, keepdim=True)
            out = out.masked_fill(~legal, torch.finfo(out.dtype).min)
        return out, value


def make_team_policy(inputs: TeamInputs, groups: int, action_space, model_cfg, ma: MultiAgentConfig) -> TeamActorCritic:
    """The team policy for a multi-agent run's rows (an MLP per group; images are not supported yet)."""
    import gymnasium as gym

    if model_cfg.core != "none":
        raise ConfigError("--model.core lstm|gru is not supported for multi-agent envs yet: use --model.core none")
    if model_cfg.obs_norm:
        raise ConfigError("--model.obs-norm is not supported for multi-agent envs yet")
    if model_cfg.kind not in ("auto", "mlp"):
        raise ConfigError(f"multi-agent policies are MLPs over each agent's flat observation; got --model.kind {model_cfg.kind}")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    if not discrete and not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        raise ConfigError(f"multi-agent policies support Discrete or 1-D Box actions; this env has {action_space}")
    action_dim = int(action_space.n) if discrete else int(np.prod(action_space.shape))
    return TeamActorCritic(inputs, groups, action_dim, not discrete, tuple(model_cfg.hidden_sizes),
                           model_cfg.activation, model_cfg.init_log_std, ma.critic == "central")
