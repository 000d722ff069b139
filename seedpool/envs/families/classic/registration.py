"""Gymnasium's classic control ids, run natively (gymnasium's envs with native=False), and EnvPool's
classic-control and toy-text ids that gymnasium does not build."""

from seedpool.envs.envpool_ids import envpool_family
from seedpool.envs.registry import register_family, register_native

_HERE = "seedpool.envs.families.classic"

register_native("CartPole-v1", f"{_HERE}.control:CartPole")
register_native("MountainCar-v0", f"{_HERE}.control:MountainCar")
register_native("MountainCarContinuous-v0", f"{_HERE}.control:MountainCarContinuous")
register_native("Pendulum-v1", f"{_HERE}.control:Pendulum")
register_native("Acrobot-v1", f"{_HERE}.acrobot:Acrobot")

# EnvPool's classic-control and toy-text ids that gymnasium does not build as EnvPool does
# (its aliases, Catch-v0, NChain-v0): a Python-env family over the table the EnvPool face reads
# too (seedpool/envs/envpool_ids/table.py); it counts EnvPool's time limit itself.
register_family(envpool_family("envpool_classic", "classic_ids"))
