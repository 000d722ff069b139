"""The synchronous sampler of off-policy continuous agents (SAC, TD3, DDPG): unit actions, as Unrolls.

Like DQN's epsilon-greedy sampler it is a `seedpool.actors.lockstep.LockstepSampler`: every
env stepped in lockstep ``num_steps`` times per `collect`, returned as
:class:`~seedpool.records.Unrolls` for a `ReplayLearner`. The policy chooses *unit* actions in ``[-1, 1]^A`` (what the replay
stores and the critics read); the envs get them rescaled to their Box bounds. Until
``random_steps`` env steps have been taken the actions are uniform in the unit box (the
usual warm-up of SAC and TD3, drawn from the sampler's own generator). ``observe``, if
given, sees every observation the envs return (the agent's running normalisation).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from seedpool.actors.lockstep import LockstepSampler
from seedpool.models.continuous import BoxScaler
from seedpool.models.precision import Precision, autocast
from seedpool.timing import PhaseTimer

UnitPolicy = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
"""policy(obs [B, ...], generator) -> unit actions [B, A] (exploration included)."""


class ContinuousSampler(LockstepSampler):
    """``collect()`` -> (Unrolls of ``num_steps`` x num_envs with unit actions, finished episodes)."""

    def __init__(self, pool, policy: UnitPolicy, num_steps: int, random_steps: int = 0,
                 device: str | torch.device = "cpu", timer: PhaseTimer | None = None, seed: int = 0,
                 precision: Precision = "fp32", observe: Callable[[np.ndarray], None] | None = None) -> None:
        self.scaler = BoxScaler(pool.single_action_space)  # refuses unbounded or non-Box actions
        self.action_dim = int(pool.single_action_space.shape[0])
        super().__init__(pool, num_steps, (self.action_dim,), np.float32, device, timer, seed, precision)
        self.policy, self.random_steps = policy, random_steps
        self.observe = observe  # sees every observation the envs return (running normalisation)
        space = pool.single_action_space
        self._scale, self._center = self.scaler.scale.numpy(), self.scaler.center.numpy()
        self._low, self._high, self._env_dtype = space.low, space.high, space.dtype
        self.rng = np.random.default_rng(seed)

    def seen(self, obs: np.ndarray) -> None:
        """Every observation the envs return goes to ``observe`` (the agent's running normalisation)."""
        if self.observe is not None:
            self.observe(obs)

    def state_dict(self) -> dict:
        """The env step counter and the generators (a resumed run starts fresh episodes on new env seeds)."""
        return {"env_steps": self.env_steps, "generator": self.generator.get_state(),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting (and drawing) from a checkpoint; the envs start new episodes."""
        self.start()
        self.env_steps = int(state["env_steps"])
        self.generator.set_state(state["generator"])
        self.rng.bit_generator.state = state["rng"]

    def unit_actions(self, obs: np.ndarray) -> np.ndarray:
        """Unit actions for a batch of observations: uniform during the warm-up, the policy's after."""
        if self.env_steps < self.random_steps:
            return self.rng.uniform(-1.0, 1.0, (self.B, self.action_dim)).astype(np.float32)
        with torch.inference_mode(), autocast(self.precision, self.device.type):
            action = self.policy(torch.as_tensor(obs, device=self.device), self.generator)
        return action.float().cpu().numpy()

    def to_env(self, unit: np.ndarray) -> np.ndarray:
        """Env actions in the Box's bounds (clipped: rescaling may round a hair past them)."""
        env = unit * self._scale + self._center
        return np.clip(env, self._low, self._high).astype(self._env_dtype, copy=False)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(unit actions to store, the envs' actions in their Box bounds)."""
        unit = self.unit_actions(obs)
        return unit, self.to_env(unit)
