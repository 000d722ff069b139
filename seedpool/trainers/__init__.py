"""Trainers: one short function per algorithm that wires envs, sampler, learner and run."""
