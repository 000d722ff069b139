"""A multi-agent pool as the samplers see it: one row per agent, each an "env" of its own.

Samplers fill `[T, B]` buffers with `B = num_envs * num_agents` rows and mark as invalid the
steps whose action is not used (`info["active"]`: a dead agent, an agent waiting for its
turn, the reset step after an episode's end), so those steps count in no loss. Each row's
features are the agent's observation with the blocks a team policy reads appended (its
agent slot, its group, the env's state: seedpool/models/team.py).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from seedpool.envs.agents.layout import role
from seedpool.errors import ConfigError
from seedpool.models.team import MultiAgentConfig, TeamInputs


def make_envs(env: Any, **kwargs: Any):
    """`seedpool.make(env, **kwargs)`; a multi-agent env whose agents' spaces differ is made with
    its agents grouped by role (PettingZoo's name prefixes), each group's rows padded to the
    largest (envs/agents/layout.py)."""
    from seedpool.envs import make
    from seedpool.envs.agents import HeterogeneousAgentsError

    try:
        return make(env, **kwargs)
    except HeterogeneousAgentsError:
        return make(env, groups="prefix", **kwargs)


def team_rows_and_policy(pool: Any, model_cfg: Any, ma: MultiAgentConfig):
    """A multi-agent pool's rows as `ma` arranges them and the team policy that acts on them."""
    from seedpool.models.team import make_team_policy

    rows = AgentRows(pool, ma)
    return rows, make_team_policy(rows.inputs, len(rows.groups), rows.single_action_space, model_cfg, ma)


def is_agent_pool(pool: Any) -> bool:
    """Whether `pool` has agents as rows (a multi-agent pool of seedpool's)."""
    return hasattr(pool, "num_rows") and hasattr(pool, "possible_agents")


def policy_groups(pool: Any, ma: MultiAgentConfig) -> list[str]:
    """The agent groups that get a policy each: one for a shared policy, else the pool's
    groups (by role: adversary_0 -> adversary)."""
    if ma.policies == "shared":
        return ["agents"]
    names: list[str] = []
    for agent in pool.possible_agents:
        if role(agent) not in names:
            names.append(role(agent))
    return names


class AgentRows:
    """`pool`'s rows with team features, behind the single-agent sync pool API."""

    def __init__(self, pool: Any, ma: MultiAgentConfig, allow_async: bool = False) -> None:
        """`allow_async`: for `AgentRowsSource`, which takes the pool's batches as they come."""
        if pool.is_async and not allow_async:
            raise ConfigError("the sync sampler steps every env in lockstep: use a sync pool")
        self.pool, self.ma = pool, ma
        a = pool.num_agents
        self.num_envs = self.batch_size = pool.num_rows
        self.is_async = False
        self.groups = policy_groups(pool, ma)
        slot_group = np.array([self.groups.index(role(x)) if len(self.groups) > 1 else 0
                               for x in pool.possible_agents])
        self.row_group = np.tile(slot_group, pool.num_envs)
        space = pool.single_observation_space
        mask = pool.layout.mask_size or 0  # action masks (legal moves): the policy reads them
        features = ma.agent_id or len(self.groups) > 1 or ma.critic == "central" or bool(mask)
        if features and not isinstance(space, gym.spaces.Box):
            raise ConfigError(f"--ma.agent-id, per-group policies and a central critic append inputs to each "
                              f"agent's flat observation; this env's is {space}")
        state = 0
        if ma.critic == "central":
            if pool.state_space is None:
                raise ConfigError("--ma.critic central reads the env's global state(), and this pool has none: "
                                  "the env declares no state_space (PettingZoo's convention for envs with "
                                  "state()), or a large one, which needs --env-options state True")
            state = int(np.prod(pool.state_space.shape))
        self.inputs = TeamInputs(obs=int(np.prod(space.shape)), agent=a if ma.agent_id else 0,
                                 group=len(self.groups) if len(self.groups) > 1 else 0, state=state, mask=mask)
        self._const = self._constant_blocks(slot_group, pool.num_envs)
        if features:
            low = np.concatenate([np.broadcast_to(space.low, space.shape).astype(np.float32).reshape(-1),
                                  np.zeros(self.inputs.agent + self.inputs.group, np.float32),
                                  np.full(state, -np.inf, np.float32), np.zeros(mask, np.float32)])
            high = np.concatenate([np.broadcast_to(space.high, space.shape).astype(np.float32).reshape(-1),
                                   np.ones(self.inputs.agent + self.inputs.group, np.float32),
                                   np.full(state, np.inf, np.float32), np.ones(mask, np.float32)])
            self.single_observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        else:
            self.single_observation_space = space
        self.single_action_space = pool.single_action_space
        self._features = features

    def _constant_blocks(self, slot_group: np.ndarray, num_envs: int) -> np.ndarray:
        """The agent and group one-hots of every row (they never change)."""
        a = len(slot_group)
        blocks = []
        if self.inputs.agent:
            blocks.append(np.tile(np.eye(a, dtype=np.float32), (num_envs, 1)))
        if self.inputs.group:
            blocks.append(np.eye(self.inputs.group, dtype=np.float32)[np.tile(slot_group, num_envs)])
        return np.concatenate(blocks, 1) if blocks else np.zeros((a * num_envs, 0), np.float32)

    def _rows(self, obs: np.ndarray, info: dict) -> np.ndarray:
        if not self._features:
            return obs
        const = self._const
        if len(obs) != len(const):  # the rows of some envs (a step of env_id): blocks by slot
            const = np.tile(const[:self.pool.num_agents], (len(obs) // self.pool.num_agents, 1))
        parts = [obs.reshape(len(obs), -1).astype(np.float32, copy=False), const]
        if self.inputs.state:
            state = info["state"].reshape(len(info["state"]), -1).astype(np.float32, copy=False)
            parts.append(np.repeat(state, self.pool.num_agents, axis=0))  # each env's, on its rows
        if self.inputs.mask:
            parts.append(info["action_mask"].astype(np.float32))
        return np.concatenate(parts, 1)

    def group_of(self, episode) -> str:
        """The group name of the row an episode ran in (per-group metrics)."""
        return self.groups[self.row_group[episode.slot]] if episode.slot >= 0 else "agents"

    def reset(self, *, seed: Any = None, options: dict | None = None):
        obs, info = self.pool.reset(seed=seed, options=options)
        return self._rows(obs, info), info

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None):
        """Step every env (or those of ``env_id``, their rows in that order: self-play steps
        the envs where an opponent is to move)."""
        obs, rew, term, trunc, info = self.pool.step(action, env_id)
        return self._rows(obs, info), rew, term, trunc, info

    def close(self) -> None:
        self.pool.close()

    def __repr__(self) -> str:
        return f"{self.pool!r} as {self.num_envs} agent rows ({'/'.join(self.groups)} policies)"


class AgentRowsSource:
    """An async multi-agent pool as an inference `Source` (central inference: IMPALA): each
    agent row is a slot of the server, its features as `AgentRows` gives them, and rows
    that are not active are invalid steps of their unrolls (`EnvBatch.active`)."""

    def __init__(self, pool: Any, ma: MultiAgentConfig) -> None:
        if not pool.is_async:
            raise ConfigError(f"a SEED source needs an async pool (batch_size < num_envs), got {pool!r}")
        self.pool = pool
        self.rows = AgentRows(pool, ma, allow_async=True)
        self.num_envs = pool.num_rows
        self.batch_size = pool.batch_size * pool.num_agents
        self.single_observation_space = self.rows.single_observation_space
        self.single_action_space = self.rows.single_action_space

    def start(self) -> None:
        self.pool.async_reset()

    def recv(self):
        from seedpool.records import EnvBatch

        obs, rew, term, trunc, info = self.pool.recv()
        ids = info["env_id"].astype(np.int64) * self.pool.num_agents + info["agent_id"]
        restarted = info.get("restarted")
        return EnvBatch(
            env_ids=ids, obs=self.rows._rows(obs, info), rewards=rew, terminated=term, truncated=trunc,
            restarted=np.zeros(len(rew), bool) if restarted is None else restarted,
            episode_done=term | trunc, episode_returns=info["episode_return"],
            episode_lengths=info["episode_length"], active=info["active"],
        )

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        """Step the envs of these rows (each env's rows together, as `recv` gave them)."""
        from seedpool.actors.actions import env_actions

        self.pool.send(env_actions(actions, self.single_action_space), env_ids // self.pool.num_agents)

    def group_of(self, episode) -> str:
        return self.rows.group_of(episode)

    def worker_restarts(self) -> int:
        return getattr(self.pool, "engine", self.pool).worker_restarts if hasattr(self.pool, "engine") else 0

    def close(self) -> None:
        self.pool.close()
