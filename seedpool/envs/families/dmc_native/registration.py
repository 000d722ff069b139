"""EnvPool's ids of the dm_control tasks run natively (domains.py): the same ids as the
Python-env family over the dm-control package (dmc/), which `native=False` still gives.

They need mujoco (its libmujoco, called from compiled code) and the dm-control package's
model files; without them the family cannot be imported and these ids take the package path.
"""

from seedpool.envs.registry import register_native

_TASKS = ("CheetahRun", "WalkerStand", "WalkerWalk", "WalkerRun", "HopperStand", "HopperHop", "CartpoleBalance",
          "CartpoleSwingup")

for _name in _TASKS:
    register_native(f"{_name}-v1", f"seedpool.envs.families.dmc_native.domains:{_name}")
