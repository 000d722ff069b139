"""Gymnasium's MuJoCo locomotion tasks (-v5) as native families: each env one MjData, a
batch one compiled call into MuJoCo's C library (envs.py, sim.py, kernels.py)."""
