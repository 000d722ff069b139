"""One PettingZoo env as one engine env: every agent slot's row in one observation.

The engine steps `gymnasium.Env`s and writes their observations into shared arrays, so a
multi-agent env travels through it as an env whose observation is a dict of arrays with an
agent axis: the rows' observations, and each agent's reward, end flags, `active` flag and
action mask for this step. Putting them in the observation (not in `info`) lets them share
the engine's paths for observations, `final_obs` included: with same-step autoreset the final
step's rewards and flags arrive in `info["final_obs"]` beside the new episode's first rows.

The env-level reward is the team's (the sum over agents), `terminated` is set when every
agent is done and none was truncated, `truncated` when every agent is done and some was.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs.agents.layout import AgentLayout
from seedpool.envs.agents.shortcuts import raw_stepper, state_from_obs

ROW_KEYS = ("obs", "reward", "terminated", "truncated", "active")
AGENT_INFOS = "agent_infos"  # the engine forwards it as any undeclared info entry


def stacked_space(layout: AgentLayout) -> gym.spaces.Dict:
    """The engine-side observation space of one env of `layout`."""
    a = layout.num_agents
    row = layout.row_observation_space
    flag = gym.spaces.MultiBinary(a)
    parts: dict[str, gym.Space] = {
        "obs": _stack(row, a),
        "reward": gym.spaces.Box(-np.inf, np.inf, (a,), np.float32),
        "terminated": flag,
        "truncated": flag,
        "active": flag,
    }
    if layout.mask_size is not None:
        parts["action_mask"] = gym.spaces.Box(0, 1, (a, layout.mask_size), np.int8)
    if layout.state_space is not None:
        parts["state"] = layout.state_space
    return gym.spaces.Dict(parts)


def _stack(space: gym.Space, a: int) -> gym.Space:
    if isinstance(space, gym.spaces.Box):
        return gym.spaces.Box(np.broadcast_to(space.low, (a, *space.shape)),
                              np.broadcast_to(space.high, (a, *space.shape)), dtype=space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return gym.spaces.MultiDiscrete(np.full(a, space.n), start=np.full(a, space.start))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return gym.spaces.MultiDiscrete(np.broadcast_to(space.nvec, (a, *space.nvec.shape)))
    return gym.spaces.MultiBinary([a, *np.atleast_1d(space.n)])


def stacked_action_space(layout: AgentLayout) -> gym.Space:
    return _stack(layout.row_action_space, layout.num_agents)


class _Rows:
    """The arrays of one env's step, refilled in place (the engine copies them out)."""

    def __init__(self, layout: AgentLayout, space: gym.spaces.Dict):
        self.layout = layout
        self.arrays = {k: np.zeros(s.shape, s.dtype) for k, s in space.spaces.items()}
        self.obs = self.arrays["obs"]
        self.widths = [int(np.prod(split.shape)) if split.shape else 1 for split in
                       (layout.group_spaces(g)[0] for g in layout.group_names)]
        self.padded = layout.row_observation_space.shape != () and len(set(self.widths)) > 1
        self.mask = self.arrays.get("action_mask")
        choices = layout.choices()
        if self.mask is not None and choices is not None:  # padding: only each slot's own choices
            self.pad_mask = np.arange(self.mask.shape[1])[None, :] < choices[:, None]
        else:
            self.pad_mask = None

    def clear(self) -> None:
        """Zero every row: a row not written this step is inactive (no legal action either)."""
        for k in ROW_KEYS[1:]:
            self.arrays[k][:] = 0
        self.obs[:] = 0
        if self.mask is not None:
            self.mask[:] = 0

    def put_obs(self, k: int, value: Any) -> None:
        """Slot k's observation (PettingZoo's dict split into observation and mask)."""
        if self.layout.masked_obs:
            self.mask[k] = value["action_mask"]
            value = value["observation"]
        if self.padded:
            flat = np.asarray(value).reshape(-1)
            self.obs[k, :flat.size] = flat
            self.obs[k, flat.size:] = 0
        else:
            self.obs[k] = value

    def put_info_mask(self, k: int, info: dict | None) -> None:
        """A mask PettingZoo envs give in `infos[agent]["action_mask"]` instead of the observation."""
        if self.mask is not None and not self.layout.masked_obs:
            mask = None if not info else info.get("action_mask")
            if mask is not None:
                self.mask[k] = mask
            else:
                self.mask[k] = 1 if self.pad_mask is None else self.pad_mask[k]

    def snapshot(self) -> dict[str, np.ndarray]:
        return self.arrays


class ParallelAgentsEnv(gym.Env):
    """A PettingZoo `ParallelEnv` as an engine env (see the module doc).

    A step writes each row array once, from Python lists built over the step's dicts (a
    handful of small numpy operations cost more than the step's own bookkeeping); where
    every agent has an observation, no row needs clearing first.
    """

    def __init__(self, env_fn: Callable[[], Any], layout: AgentLayout):
        self.env = env_fn()
        self.layout = layout
        self.observation_space = stacked_space(layout)
        self.action_space = stacked_action_space(layout)
        self.metadata = getattr(self.env, "metadata", {})
        self.render_mode = getattr(self.env, "render_mode", None)
        self.rows = _Rows(layout, self.observation_space)
        self.index = {a: k for k, a in enumerate(layout.possible_agents)}
        self.discrete = isinstance(layout.row_action_space, gym.spaces.Discrete)
        # See shortcuts.py: the same steps and states, without the work done twice.
        fast = raw_stepper(self.env, layout)
        self._stepper, self._raw = fast if fast is not None else (self.env, None)
        self._state_of = state_from_obs(self.env, layout.possible_agents) if "state" in self.rows.arrays else None

    def _agents(self) -> Any:
        """The live agents (the raw env's own list where the adapter steps it directly)."""
        if self._raw is not None:
            return self._raw.agents
        return self.env.agents

    def _fill(self, obs: dict, infos: dict, ended: list[bool] | None) -> None:
        """Write the observation rows, masks, active flags and state of a reset or step
        (`ended`: per slot, whether the agent ended this step)."""
        rows, index = self.rows, self.index
        if len(obs) != self.layout.num_agents:  # rows without an observation are zeros
            rows.obs[:] = 0
            if rows.mask is not None:
                rows.mask[:] = 0
        for agent, value in obs.items():
            k = index[agent]
            rows.put_obs(k, value)
            if rows.mask is not None:
                rows.put_info_mask(k, infos.get(agent))
        active = [False] * self.layout.num_agents
        alive = self._agents() if self._raw is not None else getattr(self.env, "agents", obs.keys())
        for agent in alive:
            active[index[agent]] = True
        if ended is not None:  # an agent that ended this step is no longer active
            active = [a and not e for a, e in zip(active, ended)]
        rows.arrays["active"][:] = active
        if "state" in rows.arrays:
            state = None if self._state_of is None else self._state_of(obs)
            rows.arrays["state"][...] = self.env.state() if state is None else state

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        arr = self.rows.arrays
        for k in ROW_KEYS[1:4]:
            arr[k][:] = 0
        self._fill(obs, infos or {}, None)
        return self.rows.snapshot(), self._agent_infos(infos)

    def _agent_infos(self, infos: dict | None) -> dict:
        """The agents' own info dicts, in slot order, where any holds something (most envs'
        are empty: then nothing travels)."""
        if not infos or not any(infos.values()):
            return {}
        return {AGENT_INFOS: tuple(infos.get(a) or {} for a in self.layout.possible_agents)}

    def step(self, action: np.ndarray):
        index = self.index
        agents = self._agents()
        if self.discrete:
            values = action.tolist()
            actions = {a: values[index[a]] for a in agents}
        else:
            actions = {a: action[index[a]] for a in agents}
        obs, rewards, terms, truncs, infos = self._stepper.step(actions)
        n = self.layout.num_agents
        reward, term, trunc = [0.0] * n, [False] * n, [False] * n
        for agent, r in rewards.items():
            reward[index[agent]] = r
        for agent, t in terms.items():
            term[index[agent]] = bool(t)
        for agent, t in truncs.items():
            trunc[index[agent]] = bool(t) and not terms.get(agent, False)
        arr = self.rows.arrays
        arr["reward"][:] = reward
        arr["terminated"][:] = term
        arr["truncated"][:] = trunc
        self._fill(obs, infos or {}, [a or b for a, b in zip(term, trunc)])
        done = not self._agents()
        cut = any(trunc)
        return arr, float(arr["reward"].sum()), done and not cut, done and cut, self._agent_infos(infos)

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


class TurnAgentsEnv(ParallelAgentsEnv):
    """A PettingZoo `AECEnv` (turn-based: one agent acts at a time) as an engine env.

    The agent whose turn it is is the one active row. A reward an agent earns while others
    move is held until its next turn, or until its episode ends, so each agent's row sees the
    return of its own action (PettingZoo's cumulative reward). Agents that are done are
    stepped with `None`, as the AEC API asks, without a round trip to the caller.
    """

    def __init__(self, env_fn: Callable[[], Any], layout: AgentLayout):
        super().__init__(env_fn, layout)
        self.pending = np.zeros(layout.num_agents, np.float64)
        self.ended = np.zeros(layout.num_agents, bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.env.reset(seed=seed, options=options)
        self.pending[:] = 0
        self.ended[:] = False
        self.rows.clear()
        self._advance()
        return self.rows.snapshot(), {}

    def step(self, action: np.ndarray):
        env = self.env
        agent = env.agent_selection
        a = action[self.index[agent]]
        self.rows.clear()
        env.step(int(a) if self.discrete else a)
        self._collect()
        self._advance()
        arr = self.rows.arrays
        done = not env.agents
        team = float(arr["reward"].sum())
        return arr, team, done and not arr["truncated"].any(), done and bool(arr["truncated"].any()), {}

    def _collect(self) -> None:
        """Add this move's rewards to every agent's pending reward."""
        for agent, r in self.env.rewards.items():
            self.pending[self.index[agent]] += r

    def _advance(self) -> None:
        """Step done agents with None until a live agent's turn (or the end), then write rows:
        the ended agents' last rows and the acting agent's observation."""
        env, rows, index = self.env, self.rows, self.index
        arr = rows.arrays
        while env.agents:
            self._end_rows()
            agent = env.agent_selection
            if not (env.terminations[agent] or env.truncations[agent]):
                break
            env.step(None)
            self._collect()
        self._end_rows()
        if env.agents:
            agent = env.agent_selection
            k = index[agent]
            rows.put_obs(k, env.observe(agent))
            rows.put_info_mask(k, env.infos.get(agent))
            arr["active"][k] = 1
            arr["reward"][k] = self.pending[k]
            self.pending[k] = 0
        if "state" in arr:
            arr["state"][...] = env.state()

    def _end_rows(self) -> None:
        """Rows of agents whose episode ended since the last look: last observation, the reward
        they still hold, and their end flag."""
        env, rows, index = self.env, self.rows, self.index
        arr = rows.arrays
        for agent in env.possible_agents:
            k = index[agent]
            if self.ended[k]:
                continue
            term, trunc = env.terminations.get(agent), env.truncations.get(agent)
            if agent in env.agents and not (term or trunc):
                continue
            if agent not in env.agents and term is None:
                continue  # not spawned yet
            self.ended[k] = True
            rows.put_obs(k, env.observe(agent))
            arr["reward"][k] = self.pending[k]
            self.pending[k] = 0
            arr["terminated"][k] = bool(term)
            arr["truncated"][k] = bool(trunc) and not term
