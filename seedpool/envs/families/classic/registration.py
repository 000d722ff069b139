"""Gymnasium's classic control ids, run natively (gymnasium's envs with native=False)."""

from seedpool.envs.registry import register_native

_HERE = "seedpool.envs.families.classic"

register_native("CartPole-v1", f"{_HERE}.control:CartPole")
register_native("MountainCar-v0", f"{_HERE}.control:MountainCar")
register_native("MountainCarContinuous-v0", f"{_HERE}.control:MountainCarContinuous")
register_native("Pendulum-v1", f"{_HERE}.control:Pendulum")
register_native("Acrobot-v1", f"{_HERE}.acrobot:Acrobot")
