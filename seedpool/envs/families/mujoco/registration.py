"""Gymnasium's MuJoCo -v5 ids, run natively.

They need mujoco (its libmujoco, called from compiled code); without it the family cannot
be imported and these ids take the Python-env path (gymnasium's envs, or their error).
EnvPool's v2/v3 ids and Pusher-v4, which gymnasium 1.4 builds only with mujoco-py or
mujoco<3, are a Python-env family on gymnasium's v4 envs (seedpool/envs/envpool_ids/mujoco.py).
"""

from seedpool.envs.envpool_ids import envpool_family
from seedpool.envs.registry import register_family, register_native

_TASKS = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup", "Swimmer", "InvertedPendulum")

for _name in _TASKS:
    register_native(f"{_name}-v5", f"seedpool.envs.families.mujoco.envs:{_name}")

register_family(envpool_family("envpool_mujoco", "mujoco_ids"))
