"""`envpool.python.protocol` under `seedpool.install_as_envpool()`.

EnvPool types its public functions with these names (`make_gym(...) -> GymnasiumEnvPool`),
and scripts and libraries test pools against them. Here they are abstract classes with
seedpool's pools registered as virtual subclasses: `isinstance(seedpool_pool,
GymnasiumEnvPool)` holds, and nothing is inherited.
"""

from __future__ import annotations

from abc import ABC

from seedpool.compat.envpool.dm import DMPool
from seedpool.compat.envpool.spec import EnvSpec
from seedpool.envs.pool import EnvPool as _SeedpoolPool

__all__ = ["EnvSpec", "EnvPool", "DMEnvPool", "GymnasiumEnvPool"]


class EnvPool(ABC):
    """Any pool EnvPool's functions return (dm_env or Gymnasium API)."""


class DMEnvPool(EnvPool):
    """A pool with dm_env's TimeStep API (`envpool.make_dm`)."""


class GymnasiumEnvPool(EnvPool):
    """A pool with Gymnasium's API (`envpool.make_gym`, `make_gymnasium`): seedpool's own pool."""


GymnasiumEnvPool.register(_SeedpoolPool)
DMEnvPool.register(DMPool)
