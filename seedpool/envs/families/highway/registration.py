"""EnvPool's highway-env ids, both spellings ("Highway-v0" and highway-env's own
"highway-v0"): a Python-env family over the highway-env package, listed without it
installed so that a missing package is reported with its extra. highway-env is pure
Python (it holds the GIL), so the family prefers processes.
"""

from seedpool.envs.registry import Family, register_family

register_family(Family(
    name="highway",
    ids="seedpool.envs.families.highway.env:highway_ids",
    factory="seedpool.envs.families.highway.env:make_highway",
    time_limit_option="max_episode_steps",
))
