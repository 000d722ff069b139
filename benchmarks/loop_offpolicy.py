"""The off-policy loop shape of benchmarks/loop.py: one gradient step per vector step.

SAC, TD3 and DQN act, step every env once, store the transitions and take a gradient step
on a replay minibatch, every vector step. In the sync loop the envs wait for the learner and
the learner for the envs. The async pattern sends the actions before the gradient step and
receives the observations after it, so that envs living in workers (processes or threads)
step while the learner computes; the minibatch then lacks the newest transitions (one
vector step of lag, as in any actor-learner split).

The learner is TD3's shape without its twin critic and policy delay: a 256-256 ReLU actor
and Q critic with Polyak-averaged targets, Adam, one critic and one actor step on 256
transitions per gradient step. The replay is a ring of numpy arrays.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import torch
from torch import nn

MINIBATCH = 256
HIDDEN = 256
REPLAY_CAPACITY = 100_000


def mlp(n_in: int, n_out: int) -> nn.Module:
    """CleanRL's SAC/TD3 network body: two hidden ReLU layers of 256."""
    return nn.Sequential(nn.Linear(n_in, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, n_out))


class Replay:
    """Transitions `[capacity, ...]` in numpy rings, written in place; uniform minibatches."""

    def __init__(self, obs_dim: int, act_dim: int, capacity: int = REPLAY_CAPACITY, seed: int = 0):
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.act = np.zeros((capacity, act_dim), np.float32)
        self.rew = np.zeros((capacity, 1), np.float32)
        self.done = np.zeros((capacity, 1), np.float32)
        self.capacity, self.size, self.at = capacity, 0, 0
        self.rng = np.random.default_rng(seed)

    def add(self, obs: np.ndarray, act: np.ndarray, rew: np.ndarray, next_obs: np.ndarray,
            done: np.ndarray) -> None:
        """Store one vector step: a row per env."""
        rows = (self.at + np.arange(len(obs))) % self.capacity
        self.obs[rows], self.act[rows], self.next_obs[rows] = obs, act, next_obs
        self.rew[rows, 0], self.done[rows, 0] = rew, done
        self.at = int(rows[-1] + 1) % self.capacity
        self.size = min(self.size + len(obs), self.capacity)

    def sample(self, n: int) -> tuple[torch.Tensor, ...]:
        """`n` transitions drawn uniformly, as float32 tensors (obs, act, rew, next_obs, done)."""
        idx = self.rng.integers(0, self.size, n)
        return tuple(torch.from_numpy(a[idx]) for a in (self.obs, self.act, self.rew, self.next_obs, self.done))


class OffPolicyLearner:
    """A deterministic actor and a Q critic with Polyak targets; `gradient_step` is one critic
    and one actor step on a replay minibatch (TD3's arithmetic per step, one critic)."""

    def __init__(self, obs_dim: int, act_dim: int, seed: int = 0):
        torch.manual_seed(seed)
        self.actor, self.critic = mlp(obs_dim, act_dim), mlp(obs_dim + act_dim, 1)
        self.actor_target, self.critic_target = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.online = list(self.actor.parameters()) + list(self.critic.parameters())
        self.targets = list(self.actor_target.parameters()) + list(self.critic_target.parameters())
        self.noise = np.random.default_rng(seed)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The batch's actions: the actor's, with Gaussian exploration noise, in [-1, 1]."""
        with torch.no_grad():
            out = torch.tanh(self.actor(torch.as_tensor(obs, dtype=torch.float32))).numpy()
        return np.clip(out + 0.1 * self.noise.standard_normal(out.shape), -1.0, 1.0).astype(np.float32)

    def gradient_step(self, replay: Replay) -> None:
        """One critic step (TD target from the targets) and one actor step, then the targets."""
        obs, act, rew, next_obs, done = replay.sample(MINIBATCH)
        with torch.no_grad():
            next_act = torch.tanh(self.actor_target(next_obs))
            target = rew + 0.99 * (1.0 - done) * self.critic_target(torch.cat([next_obs, next_act], 1))
        q_loss = (self.critic(torch.cat([obs, act], 1)) - target).pow(2).mean()
        self.critic_opt.zero_grad()
        q_loss.backward()
        self.critic_opt.step()
        pi_loss = -self.critic(torch.cat([obs, torch.tanh(self.actor(obs))], 1)).mean()
        self.actor_opt.zero_grad()
        pi_loss.backward()
        self.actor_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.targets, self.online, 0.005)


class OffPolicyLoop:
    """One engine's off-policy loop, advanced `steps` vector steps (each with a gradient step)
    per iteration. `overlap`: the envs step between `send` and `recv`, during the gradient step."""

    def __init__(self, envs: Any, overlap: bool, steps: int):
        self.envs, self.overlap, self.steps = envs, overlap, steps
        space = getattr(envs, "single_action_space", envs.action_space)
        obs_space = getattr(envs, "single_observation_space", envs.observation_space)
        obs_dim, act_dim = int(np.prod(obs_space.shape)), int(np.prod(space.shape))
        self.learner = OffPolicyLearner(obs_dim, act_dim)
        self.replay = Replay(obs_dim, act_dim)
        self.obs = envs.reset(seed=0)[0]
        while self.replay.size < MINIBATCH:  # learning starts: enough rows for a minibatch
            action = self.learner.act(self.obs)
            next_obs, rew, term, _, _ = envs.step(action)
            self.replay.add(self.obs, action, rew, next_obs, term)
            self.obs = next_obs

    def iteration(self) -> dict[str, float]:
        """`steps` vector steps; steps/s and the share of each phase in the wall time."""
        envs, learner, replay = self.envs, self.learner, self.replay
        act_s = env_s = learn_s = 0.0
        start = time.perf_counter()
        for _ in range(self.steps):
            t0 = time.perf_counter()
            action = learner.act(self.obs)
            t1 = time.perf_counter()
            if self.overlap:
                envs.send(action)  # the envs step in their workers...
                t2 = time.perf_counter()
                learner.gradient_step(replay)  # ...while this process learns
                t3 = time.perf_counter()
                next_obs, rew, term, _, _ = envs.recv()
                env_s += (t2 - t1) + (time.perf_counter() - t3)
                learn_s += t3 - t2
            else:
                next_obs, rew, term, _, _ = envs.step(action)
                t2 = time.perf_counter()
                learner.gradient_step(replay)
                env_s += t2 - t1
                learn_s += time.perf_counter() - t2
            replay.add(self.obs, action, rew, next_obs, term)
            self.obs = next_obs
            act_s += t1 - t0
        elapsed = time.perf_counter() - start
        n = len(self.obs)
        return {"sps": self.steps * n / elapsed, "act%": 100 * act_s / elapsed, "env%": 100 * env_s / elapsed,
                "learn%": 100 * learn_s / elapsed}
