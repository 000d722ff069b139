"""`seedpool.make` for multi-agent tasks: the layout from one env, then the envs in the engine
(or a native family's arrays)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from seedpool.envs.agents.adapter import ParallelAgentsEnv, TurnAgentsEnv
from seedpool.envs.agents.layout import AgentLayout, Groups, build_layout
from seedpool.envs.agents.resolve import AgentTask
from seedpool.errors import ConfigError

# make()'s options that only multi-agent pools take (the rest of task_options go to the env).
AGENT_OPTIONS = ("groups", "check_action_masks", "state")
# With state=None (the default), info["state"] holds an env's state() where its state_space has
# at most this many values (a vector, as MPE's); a larger one (pistonball's is its rendered
# screen) costs a render per step, and is there only with state=True.
STATE_VALUES = 16_384


def layout_of(env: Any, groups: Groups, state: bool | None = None) -> AgentLayout:
    """The agent layout of a PettingZoo env (parallel or AEC); `info["state"]` where the env
    declares a `state_space` (PettingZoo's convention for envs with a global `state()`) and
    `state` asks for it (`chosen_state_space`)."""
    try:
        state_space = getattr(env, "state_space", None)
    except Exception:  # noqa: BLE001 - a wrapper that forwards attributes only after reset
        state_space = None
    return build_layout(env.possible_agents, env.observation_space, env.action_space, groups,
                        chosen_state_space(state_space, state))


def chosen_state_space(space: Any, state: bool | None) -> Any:
    """The state space the rows carry: the env's, unless `state` is False or, with None, it
    holds more than STATE_VALUES values; state=True without one is an error."""
    if state is True and space is None:
        raise ConfigError("state=True: this env declares no state_space, so it has no global state to give")
    if space is None or state is False:
        return None
    if state is None and int(np.prod(space.shape)) > STATE_VALUES:
        return None
    return space


def make_agents(task: AgentTask, agent_options: dict[str, Any], num_envs: int, batch_size: int,
                make_engine: Any, engine_kwargs: dict[str, Any]) -> Any:
    """An `AgentPool` of `num_envs` envs of `task`, stepped by the engine that `make_engine`
    builds (`seedpool.make` itself, for the adapted factory)."""
    from seedpool.envs.agents.pool import AgentPool

    unknown = set(agent_options) - set(AGENT_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown multi-agent options {sorted(unknown)}")
    try:
        layout = layout_of(task.probe, agent_options.get("groups"), agent_options.get("state"))
    finally:
        task.close_probe()
    adapter = TurnAgentsEnv if task.turn_based else ParallelAgentsEnv
    factory = functools.partial(adapter, task.env_fn, layout)
    factory.__name__ = task.name  # type: ignore[attr-defined]  # what the engine's messages call it
    inner = make_engine(factory, num_envs=num_envs, batch_size=batch_size, **engine_kwargs)
    return AgentPool(inner, layout, task.name, agent_options.get("check_action_masks", True))


def native_agent_family(task: Any) -> type | None:
    """The native multi-agent family of a PettingZoo id, if seedpool has one."""
    if not isinstance(task, str):
        return None
    from seedpool.envs.families.mpe import NATIVE

    return NATIVE.get(task)


def make_native_agents(cls: type, task_id: str, native: bool | None, backend: str, num_envs: int, batch_size: int,
                       seeds: list, autoreset: str, max_episode_steps: int | None, agent_options: dict[str, Any],
                       task_options: dict[str, Any]) -> Any | None:
    """A `NativeAgentPool` of `cls`, or None where `make` should take the PettingZoo path
    (native=False, a backend named for env objects, options the family does not take)."""
    import inspect

    from seedpool.envs.agents.native_pool import NativeAgentPool

    if native is False or backend not in ("auto", "serial"):
        if native is True:
            raise ConfigError(f"native=True runs {task_id} in this process: backend must be 'auto' or 'serial'")
        return None
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "num_envs"}
    unknown = set(task_options) - accepted
    if unknown:
        if native is True:
            raise ConfigError(f"the native {task_id} takes options {sorted(accepted)}, not {sorted(unknown)}")
        return None
    family = cls(num_envs, **task_options)
    layout = build_layout(family.possible_agents, family.observation_spaces, family.action_spaces,
                          agent_options.get("groups"), chosen_state_space(family.state_space, agent_options.get("state")))
    return NativeAgentPool(family, layout, task_id, seeds, autoreset, batch_size, max_episode_steps,
                           agent_options.get("check_action_masks", True))
