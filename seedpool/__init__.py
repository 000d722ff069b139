"""seedpool: fast deep RL — an EnvPool-class engine for any Gymnasium env, central inference, PPO and IMPALA."""

from seedpool.envs import (
    ClosedError,
    EnvPool,
    EnvPoolError,
    EnvStepError,
    StepTimeoutError,
    WorkerDiedError,
    make,
)
from seedpool.envs.vector import make_vec

__version__ = "0.1.0"
__all__ = [
    "make",
    "make_vec",
    "EnvPool",
    "EnvPoolError",
    "EnvStepError",
    "WorkerDiedError",
    "StepTimeoutError",
    "ClosedError",
    "__version__",
]
