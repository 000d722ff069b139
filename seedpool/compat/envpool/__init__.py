"""EnvPool's Python API on seedpool: the module `import envpool` gives after
`seedpool.install_as_envpool()` (see install.py), so that libraries that import envpool
themselves (Tianshou, TorchRL, rl-games, ...) build seedpool pools.

`make`, `make_gym`, `make_gymnasium`, `make_dm`, `make_spec`, `list_all_envs`, `register`
follow EnvPool's argument contract (registration.py); the pools are seedpool's.
"""

from seedpool.compat.envpool.python.protocol import DMEnvPool, EnvPool, EnvSpec, GymnasiumEnvPool
from seedpool.compat.envpool.registration import (
    EnvPoolArgumentError,
    list_all_envs,
    make,
    make_dm,
    make_gym,
    make_gymnasium,
    make_spec,
    register,
)

# The EnvPool API version this module follows (libraries may compare it), not seedpool's.
__version__ = "1.2.5"
__all__ = [
    "register",
    "make",
    "make_dm",
    "make_gym",
    "make_gymnasium",
    "make_spec",
    "list_all_envs",
    "EnvSpec",
    "EnvPool",
    "DMEnvPool",
    "GymnasiumEnvPool",
    "EnvPoolArgumentError",
]
