"""The batch kernels of a MinAtar game, built once for every game from its per-env functions.

A game (asterix.py, ...) writes what is its own, for one env's state row `s`:

- `reset_one(s, words, pos, i)`: start a new game (drawing from env i's generator);
- `act(s, a, ramping, words, pos, i) -> reward`: one step with minatar action `a`;
- `draw(s, obs)`: minatar's `state()`, channels first, into a zeroed `obs [C, 10, 10]`;

and `game_kernels` compiles for it the three loops below over a batch's rows: `fused` (the
sticky-action draw, the step, the engine's bookkeeping and autoreset: `step_autoreset`),
`reset` and `step` (the engine's general path), numba `njit(nogil=True, cache=True)`.

Each game gets its own copy of each loop, whose global names `act`, `reset_one`, `draw`,
`act_drawn` and `TERMINAL` are that game's, and whose code object names the game's source
file: numba then caches a game's kernels beside the game and recompiles them when its source
changes, as it does for functions written in that file. (Closures over the game's functions
would not do: numba keys a closure's disk cache by a pickle of the functions it closes
over, which differs in every process, so it would compile them anew in every process.)
"""

from __future__ import annotations

import types
from typing import Any, Callable, NamedTuple

import numpy as np
from numba import njit

from seedpool.envs.families.minatar import rng
from seedpool.envs.native import bookkeeping

# The names a game's copy of the loops binds to its own (placeholders here).
act: Any = None
act_drawn: Any = None
reset_one: Any = None
draw: Any = None
TERMINAL = -1


class GameKernels(NamedTuple):
    """A game's compiled loops over the rows of a batch."""

    # (state, words, pos, last, action_set, sticky, ramping, rows, actions, obs, final_obs, *book):
    # envs `rows` step (or reset, when marked) with the engine's bookkeeping, into the pool's rows.
    fused: Callable[..., None]
    reset: Callable[..., None]  # (state, words, pos, rows, obs): reset envs `rows`, the k-th drawn into obs[k]
    # (state, words, pos, last, rows, actions, action_set, sticky, ramping, obs, reward, terminated)
    step: Callable[..., None]


def _redraw_act(s, a, ramping, words, pos, i, obs):  # pragma: no cover - compiled
    """`act`, then env s's observation (the pool's row) cleared and drawn anew."""
    r = act(s, a, ramping, words, pos, i)
    obs[:] = False
    draw(s, obs)
    return r


def _fused(state, words, pos, last, action_set, sticky, ramping, rows, actions, obs, final_obs, reward, terminated,
           truncated, elapsed_step, episode_return, elapsed, returns, needs_reset, limit,
           mode):  # pragma: no cover - compiled
    """MinAtarFamily.step_autoreset: envs `rows` step (or reset, when marked) with the engine's
    bookkeeping (the arguments from `reward` on are a `Book`'s fields), in the pool's rows."""
    for k in range(rows.size):
        i = rows[k]
        s = state[i]
        if not needs_reset[i]:
            a = rng.sticky_action(words, pos, last, i, action_set[actions[i]], sticky)
            r = act_drawn(s, a, ramping, words, pos, i, obs[i])
            if not bookkeeping.end_step(i, np.float64(r), s[TERMINAL] != 0, reward, terminated, truncated,
                                        elapsed_step, episode_return, elapsed, returns, needs_reset, limit, mode):
                continue
            final_obs[i] = obs[i]  # same_step autoreset: the episode ended, the env starts anew
        reset_one(s, words, pos, i)
        obs[i] = False
        draw(s, obs[i])
        bookkeeping.started(i, not needs_reset[i], reward, terminated, truncated, elapsed_step, episode_return,
                            elapsed, returns, needs_reset)


def _reset(state, words, pos, rows, obs):  # pragma: no cover - compiled
    """Reset envs `rows`; draw the k-th into obs[k]."""
    for k in range(rows.size):
        reset_one(state[rows[k]], words, pos, rows[k])
        draw(state[rows[k]], obs[k])


def _step(state, words, pos, last, rows, actions, action_set, sticky, ramping, obs, reward,
          terminated):  # pragma: no cover - compiled
    """Step envs `rows` (sticky action first, as minatar's `Environment.act`)."""
    for k in range(rows.size):
        i = rows[k]
        a = rng.sticky_action(words, pos, last, i, action_set[actions[k]], sticky)
        s = state[i]
        reward[k] = act(s, a, ramping, words, pos, i)
        terminated[k] = s[TERMINAL] != 0
        draw(s, obs[k])


def _compiled(template: types.FunctionType, namespace: dict[str, Any], source_file: str) -> Callable[..., Any]:
    """`template` with the game's names, as numba compiles a function of the game's file."""
    code = template.__code__.replace(co_filename=source_file)
    func = types.FunctionType(code, namespace, template.__name__)
    func.__qualname__ = f"kernels.{template.__name__.lstrip('_')}"  # numba's cache file: <game>.kernels.<loop>-...
    func.__doc__ = template.__doc__
    return njit(cache=True, nogil=True)(func)


def game_kernels(game_act: Any, game_reset_one: Any, game_draw: Any, terminal: int,
                 game_act_drawn: Any = None) -> GameKernels:
    """The kernels of a game from its per-env functions (numba dispatchers, see above);
    `terminal`: the state column that is nonzero once the game ended. `game_act_drawn(s, a,
    ramping, words, pos, i, obs)`: `act` with `obs` (env s's latest observation, the pool's
    row) brought up to date, for a game that updates only the cells that change (Breakout);
    by default the fused step clears and redraws the row."""
    source_file = game_act.py_func.__code__.co_filename
    namespace = dict(globals(), act=game_act, reset_one=game_reset_one, draw=game_draw, TERMINAL=terminal)
    namespace["act_drawn"] = game_act_drawn or _compiled(_redraw_act, namespace, source_file)
    return GameKernels(*(_compiled(t, namespace, source_file) for t in (_fused, _reset, _step)))
