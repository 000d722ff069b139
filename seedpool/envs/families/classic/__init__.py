"""Gymnasium's classic control tasks as native families: CartPole, Acrobot, MountainCar,
MountainCarContinuous and Pendulum, every env of a pool in one call (control.py, acrobot.py;
their compiled steps in kernels.py)."""
