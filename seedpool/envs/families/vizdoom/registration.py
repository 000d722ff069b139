"""EnvPool's ViZDoom ids ("Basic-v1", "HealthGathering-v1", ...): a Python-env family over
the vizdoom package (listed without it installed, so that a missing package is reported
with its extra). Each env runs its own Doom engine; the family prefers processes.
"""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="vizdoom",
    ids="seedpool.envs.families.vizdoom.env:vizdoom_ids",
    factory="seedpool.envs.families.vizdoom.env:make_vizdoom",
    time_limit_option="max_episode_steps",
))
