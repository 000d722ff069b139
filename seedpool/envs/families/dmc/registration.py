"""EnvPool's dm_control suite ids ("CheetahRun-v1", ...): a Python-env family over dm-control.

The ids are listed without dm_control installed, so a missing package is reported by the
factory with the extra to install. dm_control steps MuJoCo from Python and holds the GIL
between physics calls, so the family prefers processes, as EnvPool's C++ threads run apart.
"""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="dmc",
    ids="seedpool.envs.families.dmc.env:dmc_ids",
    factory="seedpool.envs.families.dmc.env:make_dmc",
    time_limit_option="max_episode_steps",
))
