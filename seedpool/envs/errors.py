"""Exceptions raised by the environment engine."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from functools import lru_cache

from gymnasium.error import ClosedEnvironmentError

from seedpool.errors import ConfigError, SeedpoolError


class EnvPoolError(SeedpoolError, RuntimeError):
    """Base class of every error the engine raises on its own account."""


class EnvStepError(EnvPoolError):
    """An environment raised inside `reset` or `step`; carries its env id and traceback."""

    def __init__(self, env_id: int, op: str, remote_traceback: str):
        self.env_id = env_id
        self.op = op
        self.remote_traceback = remote_traceback
        RuntimeError.__init__(
            self,
            f"environment {env_id} raised during {op}; its traceback follows.\n"
            f"--- traceback of env {env_id} ---\n{remote_traceback.rstrip()}\n--- end ---"
        )


@dataclass(frozen=True)
class EnvFailure:
    """What a worker reports when an env raises: the traceback text, and the exception
    pickled (None where it does not pickle) so that the pool can raise it as its own type."""

    traceback: str
    exception: bytes | None

    @classmethod
    def of(cls, tb: str, exc: BaseException) -> "EnvFailure":
        """The report for `exc`, pickled if it pickles."""
        try:
            data: bytes | None = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - the traceback text still goes
            data = None
        return cls(tb, data)

    def exception_object(self) -> BaseException | None:
        """The env's exception, or None where it cannot be rebuilt here."""
        try:
            return pickle.loads(self.exception) if self.exception is not None else None
        except Exception:  # noqa: BLE001 - e.g. an exception class whose __init__ needs other arguments
            return None


def env_error(env_id: int, op: str, tb: str, exc: BaseException | None = None) -> EnvStepError:
    """The EnvStepError to raise for an env's exception: also an instance of the env's own
    exception type where Python allows the combination (gymnasium re-raises the env's type,
    so `except ValueError` works as it does there), with the original as `__cause__`."""
    cls = _with_type(type(exc)) if isinstance(exc, Exception) else EnvStepError
    err = cls(env_id, op, tb)
    err.__cause__ = exc
    return err


@lru_cache(maxsize=None)
def _with_type(kind: type) -> type:
    if issubclass(EnvStepError, kind):
        return EnvStepError
    try:
        # __init__ and __str__ are EnvStepError's: the env's exception class may need other arguments.
        return type(f"EnvStepError[{kind.__name__}]", (EnvStepError, kind),
                    {"__init__": EnvStepError.__init__, "__str__": EnvStepError.__str__,
                     "__module__": __name__})
    except TypeError:  # e.g. OSError's instance layout cannot be combined: EnvStepError alone
        return EnvStepError


class WorkerDiedError(EnvPoolError):
    """A worker process exited while envs it owns were in flight."""


class StepTimeoutError(EnvPoolError):
    """Envs stayed in flight longer than the pool's `step_timeout`."""


class ClosedError(EnvPoolError, ClosedEnvironmentError):
    """The pool was used after `close()` (also gymnasium's `ClosedEnvironmentError`)."""


class WaitTimeout(EnvPoolError):
    """A wait with a timeout ended before enough envs finished; they stay in flight."""


class ActionBatchError(ConfigError, TypeError):
    """A single action where a batch was expected (a TypeError too, as gymnasium raises it)."""


class SpaceMismatchError(ConfigError, RuntimeError):
    """Envs of one pool whose spaces differ (a RuntimeError too, as gymnasium raises it)."""
