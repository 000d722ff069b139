"""EnvPool's MiniGrid and BabyAI ids: native levels where there are (family.py), and the
`minigrid` package's envs with EnvPool's observations for all of them (`native=False`).

The Python-env family counts `make(..., max_episode_steps=)` itself, as MiniGrid's
`max_steps` (the reward reads it), as the native families read the pool's time limit. Its
pure-Python steps hold the GIL but cost only microseconds: the engine's auto layout measures
them, as for MinAtar's.
"""

from seedpool.envs.registry import Family, register_family, register_native

_HERE = "seedpool.envs.families.minigrid"

register_family(Family(
    name="minigrid",
    ids=f"{_HERE}.factory:minigrid_ids",
    factory=f"{_HERE}.factory:make_minigrid",
    prefer_processes=False,
    time_limit_option="max_steps",
))

# BabyAI's GoToLocal sizes and distractor counts (S{size}N{distractors}); family.py builds a class for each.
GOTO_LOCAL_VARIANTS = ("S5N2", "S6N2", "S6N3", "S6N4", "S7N4", "S7N5", "S8N2", "S8N3", "S8N4", "S8N5", "S8N6", "S8N7")

NATIVE = {
    "MiniGrid-Empty-5x5-v0": "Empty5x5",
    "MiniGrid-Empty-6x6-v0": "Empty6x6",
    "MiniGrid-Empty-8x8-v0": "Empty",
    "MiniGrid-Empty-16x16-v0": "Empty16x16",
    "MiniGrid-Empty-Random-5x5-v0": "EmptyRandom5x5",
    "MiniGrid-Empty-Random-6x6-v0": "EmptyRandom6x6",
    "MiniGrid-DoorKey-5x5-v0": "DoorKey5x5",
    "MiniGrid-DoorKey-6x6-v0": "DoorKey6x6",
    "MiniGrid-DoorKey-8x8-v0": "DoorKey",
    "MiniGrid-DoorKey-16x16-v0": "DoorKey16x16",
    "BabyAI-GoToLocal-v0": "GoToLocal",
    **{f"BabyAI-GoToLocal{v}-v0": f"GoToLocal{v}" for v in GOTO_LOCAL_VARIANTS},
}
for _task_id, _name in NATIVE.items():
    register_native(_task_id, f"{_HERE}.family:{_name}")
