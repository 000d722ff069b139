"""Where a PettingZoo env's per-step work can be done once for all its agents.

PettingZoo builds its parallel envs as `aec_to_parallel(OrderEnforcing(AssertOutOfBounds(raw)))`:
the wrappers check, for every agent on every step, that the env was reset and that the
action is in its space, and each of the converter's attribute reads passes through both.
In the engine those checks are already made once per batch: an env is always reset before
it steps, and `RowBook.actions` rejects every active row's out-of-range discrete action
before it is sent (only actions beyond the row space are: so every agent's action space must
be the row's own Discrete, without the padding of groups with fewer choices). Where a parallel
env is exactly that chain (and nothing else: a wrapper that changes actions or observations,
such as ClipOutOfBounds, keeps the chain), the adapter
steps PettingZoo's own converter over the raw env; resets, `state()`, `render()` and
`close()` still go through the env the factory made, which the raw env sits under.

mpe2's `state()` is, by its definition, its agents' observations concatenated in slot
order: recomputing them costs as much as a large part of the step, while the step has just
returned them. Where the raw env is an mpe2 env with mpe2's own `state` and `observe` and
the chain passes observations on unchanged, the state is built from the step's observations
whenever every agent has one.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from seedpool.envs.agents.layout import AgentLayout


def _standard_checks() -> tuple[type, ...]:
    try:
        from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, OrderEnforcingWrapper
    except ImportError:  # pragma: no cover - the adapter is only built for PettingZoo envs
        return ()
    return (OrderEnforcingWrapper, AssertOutOfBoundsWrapper)


def _converter() -> type | None:
    try:
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    except ImportError:  # pragma: no cover
        return None
    return aec_to_parallel_wrapper


def _chain(env: Any) -> tuple[list[type], Any] | None:
    """The wrapper types between PettingZoo's AEC-to-parallel converter `env` and its raw
    AEC env, and the raw env; None where `env` is not that converter."""
    converter = _converter()
    if converter is None or type(env) is not converter:
        return None
    from pettingzoo.utils.wrappers import BaseWrapper

    wrappers, inner = [], env.aec_env
    while isinstance(inner, BaseWrapper):
        wrappers.append(type(inner))
        inner = inner.env
    return wrappers, inner


def raw_stepper(env: Any, layout: AgentLayout) -> tuple[Any, Any] | None:
    """(a converter over the raw AEC env, the raw env) where `env` is PettingZoo's converter
    over only its standard checking wrappers and the engine checks every action those
    wrappers would (see the module doc); None otherwise."""
    row = layout.row_action_space
    if type(row) is not gym.spaces.Discrete or any(layout.action_spaces[a] != row for a in layout.possible_agents):
        return None
    found = _chain(env)
    if found is None:
        return None
    wrappers, raw = found
    checks = _standard_checks()
    if not wrappers or any(w not in checks for w in wrappers) or len(set(wrappers)) != len(wrappers):
        return None
    return _converter()(raw), raw


def state_from_obs(env: Any, order: list[str]) -> Callable[[dict], np.ndarray | None] | None:
    """For an mpe2 env whose observations reach the caller unchanged: a function of a step's
    observation dict giving the env's `state()` (None where some agent has no observation,
    and the env must be asked); None for any other env."""
    found = _chain(env)
    if found is None:
        return None
    wrappers, raw = found
    try:
        from mpe2._mpe_utils.simple_env import SimpleEnv
    except ImportError:
        return None
    from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, ClipOutOfBoundsWrapper, OrderEnforcingWrapper

    passing = (OrderEnforcingWrapper, AssertOutOfBoundsWrapper, ClipOutOfBoundsWrapper)  # observe passed on
    if any(w not in passing for w in wrappers) or not isinstance(raw, SimpleEnv):
        return None
    kind = type(raw)
    if kind.state is not SimpleEnv.state or kind.observe is not SimpleEnv.observe:
        return None
    if list(raw.possible_agents) != list(order):
        return None
    n = len(order)

    def state(obs: dict) -> np.ndarray | None:
        if len(obs) != n:
            return None
        return np.concatenate([obs[a] for a in order], axis=None)

    return state
