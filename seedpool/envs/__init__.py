"""The environment engine: many environments behind one batched API."""

from seedpool.envs.errors import (
    ClosedError,
    EnvPoolError,
    EnvStepError,
    StepTimeoutError,
    WorkerDiedError,
)
from seedpool.envs.make import make
from seedpool.envs.pool import EnvPool

__all__ = [
    "make",
    "EnvPool",
    "EnvPoolError",
    "EnvStepError",
    "WorkerDiedError",
    "StepTimeoutError",
    "ClosedError",
]
