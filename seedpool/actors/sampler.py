"""Rollout samplers: run the policy on a pool and fill time-major ``[T, B]`` buffers.

Both samplers follow the engine's ``autoreset="next_step"`` contract: when a step ends an
episode, the observation it returns is the episode's *final* observation (its value is the
bootstrap for a truncated episode), and the env's next step is a reset whose action is
ignored. That reset step is stored with ``valid=False`` so losses skip it.

- :class:`SyncSampler` steps every env in lockstep (the engine's sync mode). It is
  deterministic for a fixed seed on any backend and can replay its action log to rebuild
  the envs' state exactly after a resume. With a recurrent policy it keeps each env's state
  between steps and records it at the start of every rollout (`seedpool.actors.memory`).
- :class:`DoubleBufferedSampler` splits the envs into two halves with the engine's async
  mode (``batch_size = num_envs / 2``): the policy runs on one half while the other steps.
"""
from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from seedpool import kernels
from seedpool.actors.actions import env_actions
from seedpool.actors.episodes import EpisodeTracker
from seedpool.actors.memory import PolicyMemory
from seedpool.errors import ConfigError
from seedpool.models.precision import Precision, autocast
from seedpool.timing import PhaseTimer
from seedpool.models.base import ActorCritic
from seedpool.models.recurrent import is_recurrent
from seedpool.records import Episode, Rollout


class _HostViews:
    """numpy views of CPU rollout buffers: writing numpy rows costs far less than torch indexing."""

    def __init__(self, buf: Rollout) -> None:
        self.obs = buf.obs.numpy()
        self.actions = buf.actions.numpy()
        self.logprobs = buf.logprobs.numpy()
        self.values = buf.values.numpy()
        self.valid = buf.valid.numpy()
        self.rewards = buf.rewards.numpy()
        self.terminated = buf.terminated.numpy()
        self.truncated = buf.truncated.numpy()


def _to_env(action: torch.Tensor, space: gym.Space) -> np.ndarray:
    """Policy actions as the env takes them (Box actions clipped; the rollout keeps them unclipped)."""
    return env_actions(action.cpu().numpy(), space)


def _compact(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Discrete actions in the smallest integer type that holds them (logs stay small)."""
    if isinstance(space, gym.spaces.Discrete) and space.start + space.n <= 2**15:
        return actions.astype(np.int16)
    return actions


def _next_valid(term: np.ndarray | None, trunc: np.ndarray | None, info: dict) -> np.ndarray | bool:
    """Which rows' next action is used (and learned from): a multi-agent pool says so per row
    (`info["active"]`: not a dead agent, nor one waiting for its turn, nor the reset step after
    an episode's end); for single-agent envs every env whose episode goes on."""
    active = info.get("active")
    if active is not None:
        return active
    return True if term is None else ~(term | trunc)


def _memory(policy: ActorCritic, num_envs: int, action_space: gym.Space, device: str) -> PolicyMemory | None:
    """A recurrent policy's per-env memory, or None for a feed-forward policy."""
    if not is_recurrent(policy):
        return None
    discrete = isinstance(action_space, gym.spaces.Discrete)
    shape = () if discrete else tuple(action_space.shape)
    return PolicyMemory(policy, num_envs, shape, torch.int64 if discrete else torch.float32, device)


class SyncSampler:
    """Lockstep sampler: every env steps once per policy call (engine sync mode)."""

    def __init__(self, pool, policy: ActorCritic, num_steps: int, device: str = "cpu",
                 timer: PhaseTimer | None = None, action_log_limit: int = 0, precision: Precision = "fp32") -> None:
        self.pool, self.policy, self.T, self.device = pool, policy, num_steps, device
        self.precision = precision
        self.B = pool.num_envs
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(self.B)
        # A recurrent policy's state between steps (None for a feed-forward policy).
        self.memory = _memory(policy, self.B, pool.single_action_space, device)
        self.buf = Rollout.allocate(num_steps, self.B, pool.single_observation_space,
                                    pool.single_action_space, device,
                                    None if self.memory is None else self.memory.state)
        self._host = _HostViews(self.buf) if torch.device(device).type == "cpu" else None
        # The fast path that fits the policy (a small categorical MLP: one compiled call), or None.
        self._compiled = kernels.acting(policy, device, precision)
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
        self.next_obs, info = self.pool.reset()
        self.next_valid[:] = _next_valid(None, None, info)
        if self.memory is not None:
            self.memory.reset()
        self.timer.add("env", time.perf_counter() - t0)

    def replay(self, actions: np.ndarray, env_steps: int) -> None:
        """Reset, then step the envs through logged ``actions [n, B]`` to rebuild their state."""
        self.start()
        term = trunc = np.zeros(self.B, dtype=bool)
        for a in actions.astype(self._action_dtype, copy=False):
            self.next_obs, _, term, trunc, info = self.pool.step(a)
            self.episodes.update(0, term, trunc, info)  # rebuilds partial-game counters only
        self.next_valid = _next_valid(term, trunc, info) if len(actions) else self.next_valid
        self.env_steps = env_steps
        if self.action_log is not None:
            self.action_log = list(actions)

    def state_dict(self) -> dict:
        """The env step counter, the action log (None when off or over its limit) and a recurrent
        policy's memory (None for a feed-forward one)."""
        actions = None
        if self.action_log is not None:
            log = np.stack(self.action_log) if self.action_log else np.zeros((0, self.B), np.int64)
            actions = torch.from_numpy(_compact(log, self.pool.single_action_space))
        memory = None if self.memory is None else self.memory.state_dict()
        return {"env_steps": self.env_steps, "actions": actions, "memory": memory}

    def load_state_dict(self, state: dict) -> None:
        """Continue a run: replay the logged actions (and restore the policy's memory of them), or
        start fresh episodes (and fresh memory) without a log."""
        if state.get("actions") is not None:
            self.replay(state["actions"].numpy(), int(state["env_steps"]))
            if self.memory is not None and state.get("memory") is not None:
                self.memory.load_state_dict(state["memory"])
        else:
            self.start()
            self.env_steps = int(state["env_steps"])
            self.action_log = None  # a log from here on could not rebuild these envs' earlier steps

    def collect(self) -> tuple[Rollout, list[Episode]]:
        """Fill the buffers with T steps of every env; returns them and the finished episodes."""
        if self.next_obs is None:
            self.start()
        buf, pool, policy, device = self.buf, self.pool, self.policy, self.device
        host = self._host  # numpy views of the buffers when they live in CPU memory
        space = pool.single_action_space
        obs, valid = self.next_obs, self.next_valid
        memory = self.memory
        if memory is not None:
            memory.begin(buf)
        compiled = self._compiled
        if compiled is not None:
            compiled.refresh()  # the learner may have replaced the parameter tensors since
        episodes: list[Episode] = []
        infer_s = env_s = 0.0
        for t in range(self.T):
            t0 = time.perf_counter()
            if compiled is not None:
                action, logprob, value = compiled.act(obs)
                env_action = env_actions(action, space)
                host.actions[t], host.logprobs[t], host.values[t] = action, logprob, value
                host.obs[t] = obs
                host.valid[t] = valid
            else:
                env_action = self._act(obs, t, valid)
            t1 = time.perf_counter()
            next_obs, rew, term, trunc, info = pool.step(env_action)
            t2 = time.perf_counter()
            if host is not None:
                host.rewards[t] = rew
                host.terminated[t] = term
                host.truncated[t] = trunc
            else:
                buf.rewards[t] = torch.from_numpy(rew)
                buf.terminated[t] = torch.from_numpy(term)
                buf.truncated[t] = torch.from_numpy(trunc)
            self._log_action(env_action)
            self.env_steps += self.B
            if memory is not None:
                memory.observe(rew, valid)
            valid = _next_valid(term, trunc, info)
            episodes += self.episodes.update(self.env_steps, term, trunc, info)
            obs = next_obs
            infer_s += t1 - t0
            env_s += t2 - t1
        t0 = time.perf_counter()
        if compiled is not None:
            host.values[self.T] = compiled.value(obs)
        else:
            with torch.inference_mode(), autocast(self.precision, torch.device(device).type):
                last = torch.as_tensor(obs, device=device)
                buf.values[self.T] = policy.value(last) if memory is None else memory.value(last)
        self.timer.add("inference", infer_s + time.perf_counter() - t0)
        self.timer.add("env", env_s)
        self.next_obs, self.next_valid = obs, valid
        return buf, episodes

    def _act(self, obs: np.ndarray, t: int, valid: np.ndarray) -> np.ndarray:
        """Run the torch policy on step ``t``'s observations, store the step's policy outputs
        (a recurrent policy also its state); returns the actions as the env takes them."""
        buf, host = self.buf, self._host
        obs_t = torch.as_tensor(obs, device=self.device)
        with torch.inference_mode(), autocast(self.precision, obs_t.device.type):
            if self.memory is None:
                action, logprob, value = self.policy.act(obs_t)
            else:
                action, logprob, value = self.memory.act(obs_t, t, buf)
        if host is not None:
            host.actions[t] = action.numpy()
            host.logprobs[t] = logprob.numpy()
            host.values[t] = value.numpy()
            host.obs[t] = obs
            host.valid[t] = valid
        else:
            buf.actions[t] = action
            buf.logprobs[t] = logprob
            buf.values[t] = value
            buf.obs[t] = obs_t
            buf.valid[t] = torch.from_numpy(valid)
        return _to_env(action, self.pool.single_action_space)

    def _log_action(self, action: np.ndarray) -> None:
        if self.action_log is None:
            return
        if len(self.action_log) * self.B >= self.action_log_limit:
            self.action_log = None  # too long to replay on resume: resume restarts episodes instead
            return
        self.action_log.append(action.copy())


class DoubleBufferedSampler:
    """Two halves of the envs alternate (engine async mode, ``batch_size = num_envs / 2``).

    While one half steps in the engine's workers, the policy runs on the other half's
    observations. Each env still contributes exactly T transitions per rollout, all from the
    current policy. When the last envs of a rollout are still stepping and too few envs are
    left in flight for the engine to return a full batch, envs that already have their T
    steps take one extra step with the current policy whose transition is not stored
    ("spinning"); their next observation starts the next rollout. On the serial backend the
    halves never mix and nothing spins.
    """

    def __init__(self, pool, policy: ActorCritic, num_steps: int, device: str = "cpu",
                 timer: PhaseTimer | None = None, precision: Precision = "fp32") -> None:
        if not pool.is_async or pool.batch_size * 2 != pool.num_envs:
            raise ConfigError(f"the double-buffered sampler needs an async pool with batch_size = num_envs / 2, "
                              f"got num_envs={pool.num_envs}, batch_size={pool.batch_size}")
        self.pool, self.policy, self.T, self.device = pool, policy, num_steps, device
        self.precision = precision
        self.B = N = pool.num_envs
        self.timer = timer or PhaseTimer()
        self.episodes = EpisodeTracker(N)
        self.buf = Rollout.allocate(num_steps, N, pool.single_observation_space, pool.single_action_space, device)
        self.env_steps = 0
        self.ptr = np.zeros(N, np.int64)  # index of each env's next observation in this rollout
        self.in_flight = np.zeros(N, bool)
        self.spinning = np.zeros(N, bool)  # in flight for a step whose transition is discarded
        self.latest_obs = np.zeros((N, *pool.single_observation_space.shape), pool.single_observation_space.dtype)
        self.latest_valid = np.ones(N, bool)
        self.resetting = np.zeros(N, bool)  # in flight for the first reset: not an env step
        self._started = False

    def state_dict(self) -> dict:
        """The env step counter; async stepping cannot be replayed, so a resume restarts episodes."""
        return {"env_steps": self.env_steps, "actions": None}

    def load_state_dict(self, state: dict) -> None:
        """Continue counting env steps (the pool's envs start fresh episodes)."""
        self.env_steps = int(state["env_steps"])

    def collect(self) -> tuple[Rollout, list[Episode]]:
        """Fill the buffers with T transitions of every env; returns them and finished episodes."""
        episodes: list[Episode] = []
        self.ptr[:] = 0
        if not self._started:
            self.pool.async_reset()
            self.in_flight[:] = True
            self.resetting[:] = True
            self._started = True
        else:
            waiting = np.flatnonzero(~self.in_flight)
            if len(waiting):
                self._act(waiting, self.latest_obs[waiting], self.latest_valid[waiting], spin=False)
        while not self._complete():
            t0 = time.perf_counter()
            obs, rew, term, trunc, info = self.pool.recv()
            self.timer.add("env", time.perf_counter() - t0)
            ids = info["env_id"].astype(np.int64)
            episodes += self._arrive(ids, obs, rew, term, trunc, info)
        return self.buf, episodes

    def _complete(self) -> bool:
        # Every env has its T-th observation and no stored transition is still in flight.
        return bool((self.ptr == self.T).all() and not (self.in_flight & ~self.spinning).any())

    def _arrive(self, ids, obs, rew, term, trunc, info) -> list[Episode]:
        """Record a batch of finished steps, then act for the envs that need more."""
        self.env_steps += len(ids) - int(self.resetting[ids].sum())
        self.resetting[ids] = False
        self.in_flight[ids] = False
        keep = ~self.spinning[ids] & (self.ptr[ids] > 0)
        t, cols = torch.as_tensor(self.ptr[ids][keep] - 1), torch.as_tensor(ids[keep])
        self.buf.rewards[t, cols] = torch.as_tensor(rew[keep], device=self.device)
        self.buf.terminated[t, cols] = torch.as_tensor(term[keep], device=self.device)
        self.buf.truncated[t, cols] = torch.as_tensor(trunc[keep], device=self.device)
        bootstrap = keep & (self.ptr[ids] == self.T)  # their obs is the rollout's final one
        self.spinning[ids] = False
        valid = ~(term | trunc)
        self.latest_obs[ids] = obs
        self.latest_valid[ids] = valid
        episodes = self.episodes.update(self.env_steps, term, trunc, info, ids)
        more = self.ptr[ids] < self.T
        if more.any() or bootstrap.any():
            self._act(ids[more], obs[more], valid[more], spin=False, bootstrap=(ids[bootstrap], obs[bootstrap]))
        self._top_up()
        return episodes

    def _act(self, ids, obs, valid, spin: bool, bootstrap=None) -> None:
        """Run the policy on ``obs`` of envs ``ids`` and send the actions; store unless spinning."""
        t0 = time.perf_counter()
        n = len(ids)
        all_obs = obs if bootstrap is None else np.concatenate([obs, bootstrap[1]])
        with torch.inference_mode(), autocast(self.precision, torch.device(self.device).type):
            action, logprob, value = self.policy.act(torch.as_tensor(all_obs, device=self.device))
        if bootstrap is not None and len(bootstrap[0]):
            self.buf.values[self.T, torch.as_tensor(bootstrap[0])] = value[n:]
        if n and not spin:
            t, cols = torch.as_tensor(self.ptr[ids]), torch.as_tensor(ids)
            self.buf.obs[t, cols] = torch.as_tensor(obs, device=self.device)
            self.buf.valid[t, cols] = torch.as_tensor(valid, device=self.device)
            self.buf.actions[t, cols] = action[:n]
            self.buf.logprobs[t, cols] = logprob[:n]
            self.buf.values[t, cols] = value[:n]
            self.ptr[ids] += 1
        self.timer.add("inference", time.perf_counter() - t0)
        if n:
            t0 = time.perf_counter()
            self.pool.send(_to_env(action[:n], self.pool.single_action_space), ids)
            self.timer.add("env", time.perf_counter() - t0)
            self.in_flight[ids] = True
            self.spinning[ids] = spin

    def _top_up(self) -> None:
        """Keep a full batch in flight while the rollout still waits for stored transitions."""
        deficit = self.pool.batch_size - int(self.in_flight.sum())
        if deficit <= 0 or self._complete():
            return
        idle = np.flatnonzero(~self.in_flight)[:deficit]  # envs holding their T-th observation
        self._act(idle, self.latest_obs[idle], self.latest_valid[idle], spin=True)


def make_sampler(kind: str, pool, policy: ActorCritic, num_steps: int, device: str = "cpu",
                 timer: PhaseTimer | None = None, replay_limit: int = 0, precision: Precision = "fp32"):
    """The sampler for ``kind``: "sync" (needs a sync pool) or "double" (needs batch_size = num_envs / 2);
    the policy acts at ``precision`` (`seedpool.algos.gradient.autocast`)."""
    if kind == "sync":
        return SyncSampler(pool, policy, num_steps, device, timer, replay_limit, precision)
    if kind == "double":
        if is_recurrent(policy):
            raise ConfigError("the double-buffered sampler does not carry a recurrent policy's state; "
                              "use --sampler sync (or auto) with --model.core lstm|gru")
        return DoubleBufferedSampler(pool, policy, num_steps, device, timer, precision)
    raise ConfigError(f"sampler must be 'sync' or 'double', got {kind!r}")
