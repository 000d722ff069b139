"""Per-env calls: run a function on one env where it lives, and bring its result back.

Gymnasium's `call`/`get_attr`/`set_attr`/`render` and SB3's `env_method`/`get_attr`/
`set_attr`/`has_attr`/`env_is_wrapped` all reduce to "run `fn(env, *args)` on env i".
An env in the pool's own process (serial backend, the main process's share) is called
directly. An env in a worker gets a CALL command on its worker's command ring and the
`(fn, args)` request on the payload channel (the one reset options use); the worker runs it
between steps and sends the outcome back on its report channel. Nothing of this touches the
stepping path: the calls run only while no env is in flight.

`fn` must be picklable for worker processes: the functions below are module-level, and so
is any a caller passes (SB3's `is_wrapped`, a user's function).
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from seedpool.envs.errors import EnvStepError

CallFn = Callable[..., Any]


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back for one call: the value, or the exception and its traceback."""

    ok: bool
    value: Any = None  # the result, or the exception (None where it could not be pickled)
    traceback: str = ""
    type_name: str = ""


def run_call(env: gym.Env, fn: CallFn, args: tuple, pickled: bool) -> Outcome:
    """Run `fn(env, *args)`; with `pickled`, make sure the outcome can cross a process boundary."""
    try:
        out = Outcome(True, fn(env, *args))
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, who re-raises it
        out = Outcome(False, exc, traceback.format_exc(), type(exc).__name__)
    if not pickled:
        return out
    try:
        pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        return out
    except Exception as exc:  # noqa: BLE001 - any pickling failure means the same to the caller
        if out.ok:
            what = _describe(fn, args)
            err = TypeError(f"{what} returned {type(out.value).__name__}, which cannot be pickled to leave "
                            f"its worker process ({exc}); use backend='thread' or 'serial' for such calls")
            return Outcome(False, err, "", "TypeError")
        return Outcome(False, None, out.traceback, out.type_name)


def raise_outcome(env_id: int, out: Outcome) -> Any:
    """The call's value, or its exception raised again (the env's own type, with the worker's
    traceback as a note); an exception that could not be pickled comes as EnvStepError."""
    if out.ok:
        return out.value
    exc = out.value
    if exc is None:
        raise EnvStepError(env_id, "call", out.traceback)
    if out.traceback:
        exc.add_note(f"--- traceback of env {env_id} ---\n{out.traceback.rstrip()}\n--- end ---")
    raise exc


def _describe(fn: CallFn, args: tuple) -> str:
    name = args[0] if args and isinstance(args[0], str) else getattr(fn, "__name__", "the call")
    return f"{getattr(fn, '__name__', 'call')}({name!r})"


# -- the requests make_vec and make_sb3 send (module-level: they pickle by name) -----------
def call_attr(env: gym.Env, name: str, args: tuple, kwargs: dict) -> Any:
    """Gymnasium's `call`: the attribute `name` (through wrappers), called if callable."""
    attr = env.get_wrapper_attr(name)
    return attr(*args, **kwargs) if callable(attr) else attr


def get_attr(env: gym.Env, name: str) -> Any:
    """The attribute `name`, looked up through wrappers."""
    return env.get_wrapper_attr(name)


def set_attr(env: gym.Env, name: str, value: Any) -> None:
    """Set `name` where gymnasium's `set_wrapper_attr` sets it (the wrapper or env that has it)."""
    env.set_wrapper_attr(name, value)


def set_plain_attr(env: gym.Env, name: str, value: Any) -> None:
    """Set `name` on the outermost wrapper (SB3's `set_attr` does `setattr(env, name, value)`)."""
    setattr(env, name, value)


def call_method(env: gym.Env, name: str, args: tuple, kwargs: dict) -> Any:
    """SB3's `env_method`: call the method `name` found through wrappers."""
    return env.get_wrapper_attr(name)(*args, **kwargs)


def has_attr(env: gym.Env, name: str) -> bool:
    """Whether `name` exists on the env or any of its wrappers."""
    return env.has_wrapper_attr(name)


def render(env: gym.Env) -> Any:
    """The env's frame (or whatever its render mode returns)."""
    return env.render()


def is_wrapped(env: gym.Env, wrapper_class: type) -> bool:
    """Whether any wrapper of the env is an instance of `wrapper_class`."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, wrapper_class):
            return True
        env = env.env
    return False
