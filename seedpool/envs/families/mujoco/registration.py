"""Gymnasium's MuJoCo -v5 ids, run natively.

They need mujoco (its libmujoco, called from compiled code); without it the family cannot
be imported and these ids take the Python-env path (gymnasium's envs, or their error).
"""

from seedpool.envs.registry import register_native

_TASKS = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup", "Swimmer", "InvertedPendulum")

for _name in _TASKS:
    register_native(f"{_name}-v5", f"seedpool.envs.families.mujoco.envs:{_name}")
