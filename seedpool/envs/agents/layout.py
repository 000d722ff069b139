"""Where each agent's row goes: the agent slots of a multi-agent env, their groups, and the one
row space every row of the pool shares.

A pool of `N` envs with `A = len(possible_agents)` agent slots has `N * A` rows; row
`e * A + k` is `possible_agents[k]` of env `e`, always. Agents with different spaces form
groups (each with its own policy above the engine); their observations are zero-padded at
the end to the largest group's, and discrete actions of fewer choices are masked to theirs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from seedpool.errors import ConfigError

Groups = Mapping[str, Sequence[str]] | str | None

# PettingZoo names agents `<role>_<index>` (adversary_0, agent_1, ...): the role is the group.
_PREFIX = re.compile(r"^(.*?)_?\d+$")


class HeterogeneousAgentsError(ConfigError):
    """Agents with different spaces and no grouping that separates them."""


def role(agent: str) -> str:
    """The group an agent belongs to by PettingZoo's naming: its name without the index."""
    m = _PREFIX.match(agent)
    return m.group(1) if m and m.group(1) else agent


def split_observation(space: gym.Space) -> tuple[gym.Space, bool]:
    """An agent's row observation space, and whether its observations are PettingZoo's
    `{"observation": ..., "action_mask": ...}` dicts (the mask then goes to info)."""
    if isinstance(space, gym.spaces.Dict) and "observation" in space.spaces:
        extra = set(space.spaces) - {"observation", "action_mask"}
        if extra:
            raise ConfigError(f"a multi-agent observation dict with keys {sorted(extra)} besides "
                              "'observation' and 'action_mask' is not supported: flatten it in a wrapper")
        return space.spaces["observation"], True
    if not isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)):
        raise ConfigError(f"multi-agent observations must be Box, Discrete, MultiDiscrete, MultiBinary or "
                          f"PettingZoo's observation/action_mask dict; got {space}")
    return space, False


@dataclass
class AgentLayout:
    """The agent slots of one env and the spaces of their rows."""

    possible_agents: list[str]
    observation_spaces: dict[str, gym.Space]  # as the env gives them (its rows' real spaces)
    action_spaces: dict[str, gym.Space]
    groups: dict[str, list[int]]  # group name -> agent slots, in slot order
    row_observation_space: gym.Space  # every row's (padded where groups differ)
    row_action_space: gym.Space
    masked_obs: bool  # observations are {"observation", "action_mask"} dicts
    state_space: gym.Space | None = None
    group_of: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # slot -> group index

    @property
    def num_agents(self) -> int:
        return len(self.possible_agents)

    @property
    def group_names(self) -> list[str]:
        return list(self.groups)

    def group_spaces(self, name: str) -> tuple[gym.Space, gym.Space]:
        """The real (unpadded) observation and action space of a group's agents."""
        agent = self.possible_agents[self.groups[name][0]]
        return split_observation(self.observation_spaces[agent])[0], self.action_spaces[agent]

    @property
    def mask_size(self) -> int | None:
        """The width of `info["action_mask"]`: the row action space's choices, where actions
        are discrete and masks exist (from the env or from padding); else None."""
        if not isinstance(self.row_action_space, gym.spaces.Discrete):
            return None
        padded = any(self.action_spaces[a].n != self.row_action_space.n for a in self.possible_agents)
        return int(self.row_action_space.n) if (self.masked_obs or padded) else None

    def choices(self) -> np.ndarray | None:
        """Each slot's number of discrete choices (padding masks the rest), or None."""
        if not isinstance(self.row_action_space, gym.spaces.Discrete):
            return None
        return np.array([self.action_spaces[a].n for a in self.possible_agents], dtype=np.int64)


def build_layout(possible_agents: Sequence[str], observation_space: Any, action_space: Any,
                 groups: Groups = None, state_space: gym.Space | None = None) -> AgentLayout:
    """The layout of an env whose agents' spaces `observation_space(agent)` /
    `action_space(agent)` give (callables or dicts); `groups`: None (every agent alike, or an
    error), "prefix" (PettingZoo's roles) or a dict of group name -> agent names."""
    agents = list(possible_agents)
    if not agents:
        raise ConfigError("the multi-agent env has no possible_agents")
    get = lambda f, a: f(a) if callable(f) else f[a]  # noqa: E731
    obs_spaces = {a: get(observation_space, a) for a in agents}
    act_spaces = {a: get(action_space, a) for a in agents}
    split = {a: split_observation(obs_spaces[a]) for a in agents}
    masked = {m for _, m in split.values()}
    if len(masked) > 1:
        raise ConfigError("some agents' observations carry an action_mask and others' do not")
    by_group = _groups(agents, groups, {a: (split[a][0], act_spaces[a]) for a in agents})
    row_obs = _row_observation_space([split[agents[v[0]]][0] for v in by_group.values()])
    row_act = _row_action_space([act_spaces[agents[v[0]]] for v in by_group.values()])
    group_of = np.zeros(len(agents), np.int64)
    for g, slots in enumerate(by_group.values()):
        group_of[slots] = g
    return AgentLayout(agents, obs_spaces, act_spaces, by_group, row_obs, row_act, masked.pop(), state_space, group_of)


def _same(a: gym.Space, b: gym.Space) -> bool:
    return a == b and a.dtype == b.dtype


def _groups(agents: list[str], groups: Groups, spaces: dict[str, tuple[gym.Space, gym.Space]]) -> dict[str, list[int]]:
    """Group name -> slots; every group's agents must have equal spaces."""
    if groups is None:
        first = spaces[agents[0]]
        odd = [a for a in agents if not (_same(spaces[a][0], first[0]) and _same(spaces[a][1], first[1]))]
        if odd:
            raise HeterogeneousAgentsError(
                f"agents {odd} have other observation or action spaces than {agents[0]!r} "
                f"({spaces[odd[0]][0]} / {spaces[odd[0]][1]} against {first[0]} / {first[1]}): pass "
                "groups='prefix' (groups by PettingZoo's role names, e.g. adversary_0 -> 'adversary') or "
                "groups={name: [agents]} so that each group's agents share spaces")
        return {"agents": list(range(len(agents)))}
    if groups == "prefix":
        named: dict[str, list[str]] = {}
        for a in agents:
            named.setdefault(role(a), []).append(a)
    elif isinstance(groups, Mapping):
        named = {str(k): list(v) for k, v in groups.items()}
    else:
        raise ConfigError(f"groups must be None, 'prefix' or a dict of group -> agent names, got {groups!r}")
    listed = [a for v in named.values() for a in v]
    missing, unknown = set(agents) - set(listed), set(listed) - set(agents)
    if missing or unknown or len(listed) != len(set(listed)):
        raise ConfigError(f"groups must name every agent exactly once: missing {sorted(missing)}, "
                          f"unknown {sorted(unknown)}")
    out: dict[str, list[int]] = {}
    for name, members in named.items():
        first = spaces[members[0]]
        odd = [a for a in members if not (_same(spaces[a][0], first[0]) and _same(spaces[a][1], first[1]))]
        if odd:
            raise HeterogeneousAgentsError(f"group {name!r}: agents {odd} have other spaces than {members[0]!r}")
        out[name] = sorted(agents.index(a) for a in members)
    return out


def _row_observation_space(spaces: list[gym.Space]) -> gym.Space:
    if len(spaces) == 1 or all(_same(s, spaces[0]) for s in spaces):
        return spaces[0]
    if not all(isinstance(s, gym.spaces.Box) and len(s.shape) == 1 and s.dtype == spaces[0].dtype for s in spaces):
        raise HeterogeneousAgentsError(
            "groups with different observation spaces share rows only when every group's observation is a "
            f"flat Box of one dtype (rows are zero-padded to the longest); got {spaces}")
    width = max(s.shape[0] for s in spaces)
    low = np.full(width, np.inf, spaces[0].dtype)
    high = np.full(width, -np.inf, spaces[0].dtype)
    for s in spaces:
        n = s.shape[0]
        low[:n] = np.minimum(low[:n], s.low)
        high[:n] = np.maximum(high[:n], s.high)
    padded = np.arange(width) >= min(s.shape[0] for s in spaces)  # some group's rows hold zeros there
    low[padded] = np.minimum(low[padded], 0)
    high[padded] = np.maximum(high[padded], 0)
    return gym.spaces.Box(low, high, dtype=spaces[0].dtype)


def _row_action_space(spaces: list[gym.Space]) -> gym.Space:
    if all(_same(s, spaces[0]) for s in spaces):
        return spaces[0]
    if all(isinstance(s, gym.spaces.Discrete) and s.start == 0 for s in spaces):
        return gym.spaces.Discrete(max(int(s.n) for s in spaces))  # fewer choices: masked in info
    raise HeterogeneousAgentsError(
        "groups with different action spaces share rows only when all are Discrete (padded and masked); "
        f"got {spaces}")
