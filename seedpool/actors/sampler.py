"""Rollout samplers: run the policy on a pool and fill time-major ``[T, B]`` buffers.

Both samplers follow the engine's ``autoreset="next_step"`` contract: when a step ends an
episode, the observation it returns is the episode's *final* observation (its value is the
bootstrap for a truncated episode), and the env's next step is a reset whose action is
ignored. That reset step is stored with ``valid=False`` so losses skip it.

- :class:`SyncSampler` steps every env in lockstep (the engine's sync mode). It is
  deterministic for a fixed seed on any backend and can replay its action log to rebuild
  the envs' state exactly after a resume.
- :class:`DoubleBufferedSampler` splits the envs into two halves with the engine's async
  mode (``batch_size = num_envs / 2``): the policy runs on one half while the other steps.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
import gymnasium as gym
import numpy as np
import torch

from seedpool.actors.episodes import Episode, EpisodeTracker
from seedpool.experiment.timing import PhaseTimer
from seedpool.models.base import ActorCritic


@dataclass
class Rollout:
    """Preallocated rollout buffers with leading dims ``[T, B]`` (values: ``[T + 1, B]``)."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    valid: torch.Tensor
    """False on the reset step that follows an episode end (its action was ignored)."""

    @classmethod
    def allocate(cls, T: int, B: int, obs_space: gym.Space, action_space: gym.Space, device: str) -> Rollout:
        """Zeroed buffers for T steps of B envs."""
        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        if isinstance(action_space, gym.spaces.Discrete):
            act_shape, act_dtype = (), torch.int64
        else:
            act_shape, act_dtype = tuple(action_space.shape), torch.float32

        def z(shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(
            obs=z((T, B, *obs_space.shape), obs_dtype),
            actions=z((T, B, *act_shape), act_dtype),
            logprobs=z((T, B)),
            values=z((T + 1, B)),
            rewards=z((T, B)),
            terminated=z((T, B), torch.bool),
            truncated=z((T, B), torch.bool),
            valid=z((T, B), torch.bool),
        )


class _HostViews:
    """numpy views of CPU rollout buffers: writing numpy rows costs far less than torch indexing."""

    def __init__(self, buf: Rollout) -> None:
        self.obs = buf.obs.numpy()
        self.valid = buf.valid.numpy()
        self.rewards = buf.rewards.numpy()
        self.terminated = buf.terminated.numpy()
        self.truncated = buf.truncated.numpy()


def _to_env(action: torch.Tensor, space: gym.Space) -> np.ndarray:
    """Policy actions as the env takes them: ints, or floats clipped to the Box bounds."""
    a = action.cpu().numpy()
    if isinstance(space, gym.spaces.Box):
        # The Gaussian is unbounded; the stored (unclipped) action keeps log-probs exact.
        a = np.clip(a, space.low, space.high)
    return a


def _compact(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Discrete actions in the smallest integer type that holds them (logs stay small)."""
    if isinstance(space, gym.spaces.Discrete) and space.start + space.n <= 2**15:
        return actions.astype(np.int16)
    return actions


class SyncSampler:
    """Lockstep sampler: every env steps once per policy call (engine sync mode)."""

    def __init__(self, pool, policy: ActorCritic, num_steps: int, device: str = "cpu",
                 timer: PhaseTimer | None = None, action_log_limit: int = 0) -> None:
        self.pool, self.policy, self.T, self.device = pool, policy, num_steps, device
        self.B = pool.num_envs
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(self.B)
        self.buf = Rollout.allocate(num_steps, self.B, pool.single_observation_space,
                                    pool.single_action_space, device)
        self._host = _HostViews(self.buf) if torch.device(device).type == "cpu" else None
        self.env_steps = 0
        self._action_dtype = np.int64 if isinstance(pool.single_action_space, gym.spaces.Discrete) else np.float32
        self.next_obs: np.ndarray | None = None
        self.next_valid = np.ones(self.B, dtype=bool)
        # Actions sent so far, to rebuild env state by replay on resume (see docs/training.md).
        self.action_log_limit = action_log_limit
        self.action_log: list[np.ndarray] | None = [] if action_log_limit > 0 else None

    def start(self) -> None:
        """Reset every env (the pool's seeds apply)."""
        t0 = time.perf_counter()
        self.next_obs, _ = self.pool.reset()
        self.next_valid[:] = True
        self.timer.add("env", time.perf_counter() - t0)

    def replay(self, actions: np.ndarray, env_steps: int) -> None:
        """Reset, then step the envs through logged ``actions [n, B]`` to rebuild their state."""
        self.start()
        term = trunc = np.zeros(self.B, dtype=bool)
        for a in actions.astype(self._action_dtype, copy=False):
            self.next_obs, _, term, trunc, info = self.pool.step(a)
            self.episodes.update(0, term, trunc, info)  # rebuilds partial-game counters only
        self.next_valid = ~(term | trunc)
        self.env_steps = env_steps
        if self.action_log is not None:
            self.action_log = list(actions)

    def state_dict(self) -> dict:
        """The env step counter and the action log (None when off or over its limit)."""
        actions = None
        if self.action_log is not None:
            log = np.stack(self.action_log) if self.action_log else np.zeros((0, self.B), np.int64)
            actions = torch.from_numpy(_compact(log, self.pool.single_action_space))
        return {"env_steps": self.env_steps, "actions": actions}

    def load_state_dict(self, state: dict) -> None:
        """Continue a run: replay the logged actions, or start fresh episodes without a log."""
        if state.get("actions") is not None:
            self.replay(state["actions"].numpy(), int(state["env_steps"]))
        else:
            self.start()
            self.env_steps = int(state["env_steps"])

    def collect(self) -> tuple[Rollout, list[Episode]]:
        """Fill the buffers with T steps of every env; returns them and the finished episodes."""
        if self.next_obs is None:
            self.start()
        buf, pool, policy, device = self.buf, self.pool, self.policy, self.device
        host = self._host  # numpy views of the buffers when they live in CPU memory
        space = pool.single_action_space
        obs, valid = self.next_obs, self.next_valid
        episodes: list[Episode] = []
        infer_s = env_s = 0.0
        for t in range(self.T):
            t0 = time.perf_counter()
            obs_t = torch.as_tensor(obs, device=device)
            with torch.inference_mode():
                action, logprob, value = policy.act(obs_t)
            buf.actions[t] = action
            buf.logprobs[t] = logprob
            buf.values[t] = value
            env_action = _to_env(action, space)
            t1 = time.perf_counter()
            next_obs, rew, term, trunc, info = pool.step(env_action)
            t2 = time.perf_counter()
            if host is not None:
                host.obs[t] = obs
                host.valid[t] = valid
                host.rewards[t] = rew
                host.terminated[t] = term
                host.truncated[t] = trunc
            else:
                buf.obs[t] = obs_t
                buf.valid[t] = torch.from_numpy(valid)
                buf.rewards[t] = torch.from_numpy(rew)
                buf.terminated[t] = torch.from_numpy(term)
                buf.truncated[t] = torch.from_numpy(trunc)
            self._log_action(env_action)
            self.env_steps += self.B
            valid = ~(term | trunc)
            episodes += self.episodes.update(self.env_steps, term, trunc, info)
            obs = next_obs
            infer_s += t1 - t0
            env_s += t2 - t1
        t0 = time.perf_counter()
        with torch.inference_mode():
            buf.values[self.T] = policy.value(torch.as_tensor(obs, device=device))
        self.timer.add("inference", infer_s + time.perf_counter() - t0)
        self.timer.add("env", env_s)
        self.next_obs, self.next_valid = obs, valid
        return buf, episodes

    def _log_action(self, action: np.ndarray) -> None:
        if self.action_log is None:
            return
        if len(self.action_log) * self.B >= self.action_log_limit:
            self.action_log = None  # too long to replay on resume: resume restarts episodes instead
            return
        self.action_log.append(action.copy())


def make_sampler(kind: str, pool, policy: ActorCritic, num_steps: int, device: str = "cpu",
                 timer: PhaseTimer | None = None, replay_limit: int = 0) -> SyncSampler:
    """The sampler named by ``kind`` ("auto", "sync" or "double")."""
    if kind not in ("auto", "sync", "double"):
        raise ValueError(f"sampler must be 'auto', 'sync' or 'double', got {kind!r}")
    return SyncSampler(pool, policy, num_steps, device, timer, replay_limit)
