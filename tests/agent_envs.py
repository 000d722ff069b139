"""Small PettingZoo envs for the multi-agent tests: module-level, so worker processes can build them."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Countdown(ParallelEnv):
    """Agent k lives `3 + 2k` steps (deaths at different times); its observation is
    [step, k, last action], its reward the action it took plus k/10. An env whose every agent
    is done ends terminated. `raise_at`: the step at which step() raises."""

    metadata = {"name": "countdown_v0"}

    def __init__(self, num_agents: int = 3, raise_at: int | None = None):
        self.possible_agents = [f"agent_{k}" for k in range(num_agents)]
        self.raise_at = raise_at
        self._obs = spaces.Box(-1e3, 1e3, (3,), np.float32)
        self._act = spaces.Discrete(4)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _o(self, agent, action=0):
        return np.array([self.t, self.possible_agents.index(agent), action], np.float32)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        self.seed_seen = seed
        return {a: self._o(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.raise_at is not None and self.t == self.raise_at:
            raise RuntimeError("countdown exploded")
        obs = {a: self._o(a, actions[a]) for a in self.agents}
        rew = {a: float(actions[a]) + self.possible_agents.index(a) / 10 for a in self.agents}
        term = {a: self.t >= 3 + 2 * self.possible_agents.index(a) for a in self.agents}
        trunc = {a: False for a in self.agents}
        self.agents = [a for a in self.agents if not term[a]]
        return obs, rew, term, trunc, {a: {} for a in obs}


def countdown(num_agents: int = 3):
    return Countdown(num_agents)


def exploding():
    return Countdown(2, raise_at=2)


class TwoRoles(Countdown):
    """A scout (observation of 2) and two workers (of 3): heterogeneous spaces."""

    def __init__(self):
        super().__init__(3)
        self.possible_agents = ["scout_0", "worker_0", "worker_1"]
        self._scout = spaces.Box(-1e3, 1e3, (2,), np.float32)

    def observation_space(self, agent):
        return self._scout if agent.startswith("scout") else self._obs

    def _o(self, agent, action=0):
        o = super()._o(agent, action)
        return o[:2] if agent.startswith("scout") else o


def two_roles():
    return TwoRoles()


class Switches(ParallelEnv):
    """Two agents on a line of `size` cells, two switches at the ends: the team earns 1 at
    each step where both switches are pressed at once (agent 0 on the left end, agent 1 on
    the right one, or the other way round), and -0.01 otherwise. Actions: stay, left, right.
    Needs both agents: neither can earn anything alone. Observation: both positions and
    one's own index, scaled to [0, 1]."""

    metadata = {"name": "switches_v0"}

    def __init__(self, size: int = 5, max_cycles: int = 25, names: tuple[str, str] = ("agent_0", "agent_1")):
        self.possible_agents = list(names)
        self.size, self.max_cycles = size, max_cycles
        self._obs = spaces.Box(0, 1, (3,), np.float32)
        self._act = spaces.Discrete(3)
        self.state_space = spaces.Box(0, 1, (2,), np.float32)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def state(self):
        return (self.pos / (self.size - 1)).astype(np.float32)

    def _obs_all(self):
        s = self.pos / (self.size - 1)
        return {a: np.array([s[0], s[1], k], np.float32) for k, a in enumerate(self.possible_agents)}

    def reset(self, seed=None, options=None):
        self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.pos = self.rng.integers(1, self.size - 1, size=2)
        self.t = 0
        return self._obs_all(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        for k, a in enumerate(self.possible_agents):
            move = (0, -1, 1)[int(actions[a])]
            self.pos[k] = np.clip(self.pos[k] + move, 0, self.size - 1)
        ends = {0, self.size - 1}
        both = set(self.pos.tolist()) == ends
        r = 1.0 if both else -0.01
        done = self.t >= self.max_cycles
        obs = self._obs_all()
        rew = {a: r for a in self.agents}
        term = {a: False for a in self.agents}
        trunc = {a: done for a in self.agents}
        if done:
            self.agents = []
        return obs, rew, term, trunc, {a: {} for a in obs}


def switches():
    return Switches()


def switches_pair():
    """Switches whose two agents are two groups (left_0, right_0): one policy each with per-group policies."""
    return Switches(names=("left_0", "right_0"))


class Chatty(Countdown):
    """Countdown whose agent_1 says its step count in its info dict."""

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        infos["agent_1"] = {"t": self.t}
        return obs, infos

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        if "agent_1" in infos:
            infos["agent_1"] = {"t": self.t}
        return obs, rew, term, trunc, infos


def chatty():
    return Chatty()
