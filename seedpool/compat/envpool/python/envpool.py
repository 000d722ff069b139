"""`envpool.python.envpool` under `seedpool.install_as_envpool()`: `EnvPoolMixin`, the class
libraries test pools against (TorchRL's `MultiThreadedEnv` asserts it)."""

from __future__ import annotations

from abc import ABC

from seedpool.compat.envpool.dm import DMPool
from seedpool.envs.pool import EnvPool as _SeedpoolPool


class EnvPoolMixin(ABC):
    """What every EnvPool pool is an instance of; seedpool's pools are registered with it."""


EnvPoolMixin.register(_SeedpoolPool)
EnvPoolMixin.register(DMPool)
