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
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Generalised advantage estimates ``[T, B]`` (Schulman et al. 2016).

    ``valid`` (bool ``[T, B]``): which steps are the row's own (see `has_gaps`); where a row
    has steps that are not its own inside an episode (a turn-based game's agent waiting for
    its turn), each of its steps bootstraps from its next own step instead (`gae_with_gaps`).
    """
    _check_time_major(rewards, values, terminated, truncated)
    if valid is not None and has_gaps(valid, terminated | truncated):
        return gae_with_gaps(rewards, values, terminated, truncated, valid, gamma, lam)
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


def has_gaps(valid: torch.Tensor, ended: torch.Tensor) -> bool:
    """Whether some row has a step that is not its own (``valid`` False) right after a step of
    the same episode: not the reset step that follows an episode's end, nor the rows of an
    agent that is done. Without such gaps plain GAE is exact on every valid step."""
    if bool(valid.all()):
        return False
    return bool((~valid[1:] & ~ended[:-1] & valid[:-1]).any())


def gae_with_gaps(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    valid: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """GAE where a row's own steps need not be consecutive: a valid step's transition runs to
    the row's next valid step (or its episode's end), its reward being every reward the row
    got on the way. Steps that are not the row's own get 0 (no loss reads them)."""
    r = rewards.detach().cpu().double().numpy()
    v = values.detach().cpu().double().numpy()
    term = terminated.cpu().numpy()
    ended = (terminated | truncated).cpu().numpy()
    own = valid.cpu().numpy()
    T, shape = r.shape[0], r.shape[1:]
    out = np.zeros(r.shape)
    v_next = v[T].copy()  # the value the next own step (or the rollout's end) bootstraps from
    adv_next = np.zeros(shape)
    acc = np.zeros(shape)  # rewards since the previous own step (later in time)
    stop = np.zeros(shape)  # 1 where an episode end lies between a step and its next own step
    cut = np.zeros(shape)  # 1 where that end was a termination: no bootstrap
    for t in range(T - 1, -1, -1):
        e = ended[t]
        # An episode ends here: nothing after it belongs to the steps before it.
        acc = np.where(e, 0.0, acc)
        v_next = np.where(e, v[t + 1], v_next)
        adv_next = np.where(e, 0.0, adv_next)
        stop = np.where(e, 1.0, stop)
        cut = np.where(e, term[t].astype(np.float64), cut)
        acc = acc + r[t]
        delta = acc + gamma * v_next * (1.0 - cut) - v[t]
        adv = delta + gamma * lam * (1.0 - stop) * adv_next
        mine = own[t]
        out[t] = np.where(mine, adv, 0.0)
        v_next = np.where(mine, v[t], v_next)
        adv_next = np.where(mine, adv, adv_next)
        acc = np.where(mine, 0.0, acc)
        stop = np.where(mine, 0.0, stop)
        cut = np.where(mine, 0.0, cut)
    return torch.from_numpy(out).to(dtype=values.dtype, device=values.device)


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
