"""The synchronous sampler of off-policy continuous agents (SAC, TD3, DDPG): unit actions, as Unrolls.

Like DQN's epsilon-greedy sampler it steps every env in lockstep for ``num_steps`` steps
per `collect` and returns them as :class:`~seedpool.records.Unrolls` for a
`ReplayLearner`. The policy chooses *unit* actions in ``[-1, 1]^A`` (what the replay
stores and the critics read); the envs get them rescaled to their Box bounds. Until
``random_steps`` env steps have been taken the actions are uniform in the unit box (the
usual warm-up of SAC and TD3, drawn from the sampler's own generator). ``observe``, if
given, sees every observation the envs return (the agent's running normalisation).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from seedpool.actors.episodes import EpisodeTracker
from seedpool.models.continuous import BoxScaler
from seedpool.models.precision import Precision, autocast
from seedpool.records import Episode, Unrolls
from seedpool.timing import PhaseTimer

UnitPolicy = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
"""policy(obs [B, ...], generator) -> unit actions [B, A] (exploration included)."""


class ContinuousSampler:
    """``collect()`` -> (Unrolls of ``num_steps`` x num_envs with unit actions, finished episodes)."""

    def __init__(self, pool, policy: UnitPolicy, num_steps: int, random_steps: int = 0,
                 device: str | torch.device = "cpu", timer: PhaseTimer | None = None, seed: int = 0,
                 precision: Precision = "fp32", observe: Callable[[np.ndarray], None] | None = None) -> None:
        self.scaler = BoxScaler(pool.single_action_space)  # refuses unbounded or non-Box actions
        self.pool, self.policy, self.T, self.device = pool, policy, num_steps, torch.device(device)
        self.random_steps, self.precision = random_steps, precision
        self.observe = observe  # sees every observation the envs return (running normalisation)
        self.B = pool.num_envs
        self.action_dim = int(pool.single_action_space.shape[0])
        space = pool.single_action_space
        self._scale, self._center = self.scaler.scale.numpy(), self.scaler.center.numpy()
        self._low, self._high, self._env_dtype = space.low, space.high, space.dtype
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(self.B)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0
        space = pool.single_observation_space
        self._obs = np.zeros((num_steps + 1, self.B, *space.shape), space.dtype)
        self.next_obs: np.ndarray | None = None
        self.next_valid = np.ones(self.B, dtype=bool)

    def start(self) -> None:
        """Reset every env (the pool's seeds apply)."""
        t0 = time.perf_counter()
        self.next_obs, _ = self.pool.reset()
        self.next_valid[:] = True
        if self.observe is not None:
            self.observe(self.next_obs)
        self.timer.add("env", time.perf_counter() - t0)

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

    def collect(self) -> tuple[Unrolls, list[Episode]]:
        """Step every env ``num_steps`` times; returns the steps and the episodes that ended."""
        if self.next_obs is None:
            self.start()
        T, B = self.T, self.B
        actions = np.zeros((T, B, self.action_dim), np.float32)
        rewards = np.zeros((T, B), np.float32)
        terminated = np.zeros((T, B), bool)
        truncated = np.zeros((T, B), bool)
        valid = np.zeros((T, B), bool)
        episodes: list[Episode] = []
        infer_s = env_s = 0.0
        obs = self.next_obs
        for t in range(T):
            t0 = time.perf_counter()
            self._obs[t] = obs
            valid[t] = self.next_valid
            a = self.unit_actions(obs)
            t1 = time.perf_counter()
            obs, rew, term, trunc, info = self.pool.step(self.to_env(a))
            t2 = time.perf_counter()
            if self.observe is not None:
                self.observe(obs)
            actions[t], rewards[t], terminated[t], truncated[t] = a, rew, term, trunc
            self.env_steps += B
            self.next_valid = ~(term | trunc)
            episodes += self.episodes.update(self.env_steps, term, trunc, info)
            infer_s += t1 - t0
            env_s += t2 - t1
        self._obs[T] = obs
        self.next_obs = obs
        self.timer.add("inference", infer_s)
        self.timer.add("env", env_s)
        zeros = np.zeros((T, B), np.int64)
        return Unrolls(obs=self._obs.copy(), actions=actions, logp=np.zeros((T, B), np.float32),
                       rewards=rewards, terminated=terminated, truncated=truncated, valid=valid,
                       first=np.zeros((T, B), bool), versions=zeros, slots=np.arange(B, dtype=np.int64)), episodes
