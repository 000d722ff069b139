"""seedpool's env families, one folder each: `classic`, `minatar`, `mujoco`, `atari`.

Each folder holds its envs and a `registration.py` that enters its ids into the one
registry (seedpool/envs/registry.py). The registry runs the registration of each family
listed here on its first lookup; a new family is a folder and its name in this list.
A family imports the engine's native internals (seedpool/envs/native/) and the registry,
never `make`.
"""

FAMILIES = ("atari", "minatar", "classic", "mujoco", "dmc", "dmc_native", "box2d", "robotics", "highway", "vizdoom",
            "minigrid")
