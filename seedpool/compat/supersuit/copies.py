"""The envs a SuperSuit-style vector env steps: copies of the env the user handed in.

SuperSuit takes an env *instance* and builds every env of the vector from it with
`cloudpickle.loads(cloudpickle.dumps(env))`; the face does the same, once, when the vector
is built: the pickled bytes travel to the engine's workers and each env there is unpickled
from them. The user's env is only pickled, never stepped, reset or closed.

Rows the engine cannot carry as they are (Dict and Tuple spaces, PettingZoo's
`{"observation", "action_mask"}` dicts) travel flattened: each copy is wrapped in
`FlatSpaces`, which flattens observations with gymnasium's `flatten` and unflattens the
actions it receives; the face unflattens the rows it returns (see rows.py).
"""

from __future__ import annotations

from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.spaces import flatten, flatten_space, unflatten
from pettingzoo.utils.env import ParallelEnv

# The row spaces the engine carries without flattening (seedpool/envs/agents/layout.py).
ENGINE_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)


def pickled(env: Any) -> bytes:
    """The env's bytes, as SuperSuit copies it (the env itself is left as it was)."""
    try:
        return cloudpickle.dumps(env)
    except Exception as err:  # noqa: BLE001 - say what the face needs instead of a pickling traceback
        raise TypeError(
            f"the SuperSuit face builds its envs as copies of the env handed in (cloudpickle, as SuperSuit "
            f"does), and {type(env).__name__} cannot be pickled ({err}). Build the env without what cannot be "
            "pickled (an open window, a live connection), or pass a zero-argument factory to seedpool.make") from err


def needs_flattening(space: gym.Space) -> bool:
    """Whether rows of `space` travel flattened (anything but a Box, Discrete, MultiBinary or
    MultiDiscrete)."""
    return not isinstance(space, ENGINE_SPACES)


def flat_space(space: gym.Space) -> gym.Space:
    """The Box a space's values travel as (the space itself where it needs no flattening)."""
    if not needs_flattening(space):
        return space
    try:
        return flatten_space(space)
    except NotImplementedError as err:
        raise TypeError(f"the SuperSuit face cannot carry {space} through the engine: it has no flat form") from err


class EnvCopies:
    """A picklable zero-argument factory: a new copy of the pickled env per call, wrapped in
    `FlatSpaces` where its spaces need it."""

    def __init__(self, blob: bytes, name: str, obs_space: gym.Space | None = None,
                 act_space: gym.Space | None = None):
        self.blob = blob
        self.__name__ = name  # what the engine's messages call the env
        self.obs_space, self.act_space = obs_space, act_space

    @property
    def flattens(self) -> bool:
        return self.obs_space is not None

    def __call__(self) -> Any:
        env = cloudpickle.loads(self.blob)
        if self.flattens:
            env = FlatSpaces(env, self.obs_space, self.act_space)
        return env


class FlatSpaces(ParallelEnv):
    """A PettingZoo ParallelEnv whose every agent's observations and actions are flat (the
    agents share one observation and one action space, as SuperSuit requires)."""

    def __init__(self, env: Any, obs_space: gym.Space, act_space: gym.Space):
        self.env = env
        self.obs_space, self.act_space = obs_space, act_space
        self.flat_obs, self.flat_act = flat_space(obs_space), flat_space(act_space)
        self.possible_agents = list(env.possible_agents)
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    def observation_space(self, agent: str) -> gym.Space:
        return self.flat_obs

    def action_space(self, agent: str) -> gym.Space:
        return self.flat_act

    def _obs(self, obs: dict) -> dict:
        if not needs_flattening(self.obs_space):
            return obs
        return {a: flatten(self.obs_space, o).astype(self.flat_obs.dtype, copy=False) for a, o in obs.items()}

    def _act(self, action: Any) -> Any:
        if not needs_flattening(self.act_space):
            return action
        return unflatten(self.act_space, np.asarray(action))

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._obs(obs), infos

    def step(self, actions: dict):
        obs, rewards, terms, truncs, infos = self.env.step({a: self._act(x) for a, x in actions.items()})
        return self._obs(obs), rewards, terms, truncs, infos

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def state(self) -> np.ndarray:
        return self.env.state()

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped
