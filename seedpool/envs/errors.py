"""Exceptions raised by the environment engine."""

from __future__ import annotations

from gymnasium.error import ClosedEnvironmentError


class EnvPoolError(RuntimeError):
    """Base class of every error the engine raises on its own account."""


class EnvStepError(EnvPoolError):
    """An environment raised inside `reset` or `step`; carries its env id and traceback."""

    def __init__(self, env_id: int, op: str, remote_traceback: str):
        self.env_id = env_id
        self.op = op
        self.remote_traceback = remote_traceback
        super().__init__(
            f"environment {env_id} raised during {op}; its traceback follows.\n"
            f"--- traceback of env {env_id} ---\n{remote_traceback.rstrip()}\n--- end ---"
        )


class WorkerDiedError(EnvPoolError):
    """A worker process exited while envs it owns were in flight."""


class StepTimeoutError(EnvPoolError):
    """Envs stayed in flight longer than the pool's `step_timeout`."""


class ClosedError(EnvPoolError, ClosedEnvironmentError):
    """The pool was used after `close()` (also gymnasium's `ClosedEnvironmentError`)."""


class WaitTimeout(EnvPoolError):
    """A wait with a timeout ended before enough envs finished; they stay in flight."""


class SpaceMismatchError(ValueError, RuntimeError):
    """Envs of one pool whose spaces differ (a RuntimeError too, as gymnasium raises it)."""
