"""Return estimators as pure functions over time-major tensors ``[T, B]``.

Conventions shared by every estimator here:

- ``rewards[t]``, ``terminated[t]``, ``truncated[t]`` describe the transition taken from
  observation ``t`` (what the env returned for the action at ``t``).
- ``values`` has ``T + 1`` rows: ``values[t]`` is the value of observation ``t`` and
  ``values[T]`` the value of the observation that follows the last transition. When a step
  ends an episode, ``values[t + 1]`` is the value of that episode's *final* observation
  (the engine's ``autoreset="next_step"`` returns it), which is what a truncated episode
  bootstraps from. A terminated episode bootstraps from zero.
- No estimator ever propagates credit across an episode end (terminated or truncated).
"""
from __future__ import annotations

import numpy as np
import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates ``[T, B]`` (Schulman et al. 2016)."""
    _check_time_major(rewards, values, terminated, truncated)
    not_terminal = 1.0 - terminated.to(values.dtype)
    not_done = 1.0 - (terminated | truncated).to(values.dtype)
    # All the one-step TD errors at once; only the recursion below is sequential.
    deltas = rewards + gamma * values[1:] * not_terminal - values[:-1]
    decay = gamma * lam * not_done
    advantages = torch.empty_like(deltas)
    d, k, out = deltas, decay, advantages
    if deltas.device.type == "cpu" and not deltas.requires_grad and deltas.dtype in (torch.float32, torch.float64):
        # The recursion on NumPy views: the same float operations in the same order, a few
        # microseconds per step instead of torch's dispatch of each small operation.
        d, k, out = deltas.numpy(), decay.numpy(), advantages.numpy()
    running = np.zeros_like(d[-1]) if isinstance(d, np.ndarray) else torch.zeros_like(d[-1])
    for t in range(d.shape[0] - 1, -1, -1):
        running = d[t] + k[t] * running
        out[t] = running
    return advantages


def discounted_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """n-step discounted returns ``[T, B]`` bootstrapped from ``values`` (GAE with lambda 1, plus V)."""
    return gae(rewards, values, terminated, truncated, gamma, 1.0) + values[:-1]


def _check_time_major(
    rewards: torch.Tensor, values: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
) -> None:
    """Raise a ValueError naming the offending argument when shapes or dtypes disagree."""
    if rewards.dim() < 1:
        raise ValueError(f"rewards must be time-major [T, ...], got shape {tuple(rewards.shape)}")
    expected_values = (rewards.shape[0] + 1, *rewards.shape[1:])
    if tuple(values.shape) != expected_values:
        raise ValueError(
            f"values must have shape {expected_values} (one more row than rewards, for the "
            f"bootstrap value), got {tuple(values.shape)}"
        )
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if flag.shape != rewards.shape or flag.dtype != torch.bool:
            raise ValueError(
                f"{name} must be a bool tensor of shape {tuple(rewards.shape)}, "
                f"got {flag.dtype} {tuple(flag.shape)}"
            )


def nstep_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    n_step: int,
) -> torch.Tensor:
    """n-step targets ``[T, B]``: ``sum_{k<m} gamma^k r_{t+k} + gamma^m V(obs_{t+m})``, 0 bootstrap if terminated.

    ``m = n_step``, or fewer when the episode ends first (at the terminated or truncated step)
    or the rollout does (then the row bootstraps from ``values[T]``, as NStepWriter.flush does).
    """
    _check_time_major(rewards, values, terminated, truncated)
    if n_step < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step}")
    T = rewards.shape[0]
    ret = torch.zeros_like(rewards, dtype=values.dtype)
    scale = torch.ones_like(ret)  # gamma^k for rows still collecting rewards
    m = torch.zeros(rewards.shape, dtype=torch.long, device=rewards.device)
    going = torch.ones(rewards.shape, dtype=torch.bool, device=rewards.device)
    hit_terminal = torch.zeros(rewards.shape, dtype=torch.bool, device=rewards.device)
    for k in range(min(n_step, T)):
        rows = T - k  # rows t < T - k can still see step t + k
        g = going[:rows]
        ret[:rows] += torch.where(g, scale[:rows] * rewards[k:], 0.0)
        scale[:rows] = torch.where(g, scale[:rows] * gamma, scale[:rows])
        m[:rows] += g.long()
        hit_terminal[:rows] |= g & terminated[k:]
        going[:rows] = g & ~(terminated[k:] | truncated[k:])
    t_index = torch.arange(T, device=values.device).reshape(-1, *([1] * (rewards.dim() - 1)))
    bootstrap = torch.gather(values, 0, t_index + m)
    return ret + torch.where(hit_terminal, 0.0, scale) * bootstrap
