"""V-trace off-policy targets (Espeholt et al., 2018, "IMPALA"), as a pure function.

Shapes follow the `[T, B]` convention: time first, then the batch of unrolls.
`values[t]` is V(x_t) for t < T and `bootstrap_value` is V(x_T).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class VTraceReturns(NamedTuple):
    """V-trace value targets and policy-gradient advantages, both [T, B]."""

    vs: torch.Tensor
    """Value targets v_s, used for the baseline loss."""
    pg_advantages: torch.Tensor
    """rho_s * (r_s + gamma_s * v_{s+1} - V(x_s)), used for the policy gradient."""


def _check_shapes(**tensors: torch.Tensor) -> tuple[int, int]:
    """Every argument must be [T, B] except `bootstrap_value`, which is [B]."""
    ref = tensors["values"]
    if ref.dim() != 2:
        raise ValueError(f"values must be [T, B], got shape {tuple(ref.shape)}")
    for name, t in tensors.items():
        want = ref.shape[1:] if name == "bootstrap_value" else ref.shape
        if t.shape != want:
            raise ValueError(f"{name} must have shape {tuple(want)}, got {tuple(t.shape)}")
    return ref.shape[0], ref.shape[1]


@torch.no_grad()
def vtrace(
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    discounts: torch.Tensor,
    clip_rho: float | None = 1.0,
    clip_pg_rho: float | None = 1.0,
    clip_c: float | None = 1.0,
    lambda_: float = 1.0,
    mask: torch.Tensor | None = None,
) -> VTraceReturns:
    """V-trace targets and advantages for [T, B] unrolls; no gradient flows through them.

    `discounts[t]` is gamma * (1 - terminated_t). A clip of None means no clipping.
    `mask[t] = 0` marks a step that is not a real transition (e.g. the step an autoreset
    env spends resetting): there v_t = V(x_t), its advantage is 0, and nothing is carried
    across it, so a truncated episode bootstraps from V(x_{t}) of its final observation.
    """
    if mask is None:
        mask = torch.ones_like(values)
    num_steps, _ = _check_shapes(
        behaviour_logp=behaviour_logp, target_logp=target_logp, rewards=rewards,
        values=values, bootstrap_value=bootstrap_value, discounts=discounts, mask=mask,
    )
    mask = mask.to(values.dtype)
    ratios = torch.exp(target_logp - behaviour_logp)
    rhos = ratios if clip_rho is None else ratios.clamp(max=clip_rho)
    cs = lambda_ * (ratios if clip_c is None else ratios.clamp(max=clip_c))
    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
    deltas = mask * rhos * (rewards + discounts * next_values - values)

    # Backward recursion: v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})).
    carry = torch.zeros_like(bootstrap_value)
    corrections = torch.empty_like(values)
    for t in reversed(range(num_steps)):
        carry = deltas[t] + mask[t] * discounts[t] * cs[t] * carry
        corrections[t] = carry
    vs = values + corrections

    next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
    pg_rhos = ratios if clip_pg_rho is None else ratios.clamp(max=clip_pg_rho)
    pg_advantages = mask * pg_rhos * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)
