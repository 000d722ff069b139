"""Acting with a small categorical MLP policy in one compiled call.

A CartPole-sized policy (two 64-wide MLPs, 8 envs) does a few microseconds of arithmetic per
step, and torch's fixed cost per call (a dozen operator dispatches, a log-softmax, a multinomial
draw) is many times that: on a native env family, a large share of a PPO run
(``benchmarks/results/against_ba7f7ed_ppo.md`` measures the runs with this path). Here the
same forward, log-softmax and draw run as one numba loop over the rows, on a copy of the
weights that the sampler refreshes at the start of every rollout (between PPO's updates; a
copy of a few thousand floats).

The draw stays on torch's generator: one ``torch.rand(B)`` per call, turned into an action by
the inverse of the categorical CDF. A run is then still reproducible from its seed and resumes
exactly from a checkpoint (which saves torch's RNG state), and the actions follow the same
distribution as `CategoricalHead.sample_log_prob`'s (tests/test_mlp_act.py), though not the
same draws. Samplers reach it through `seedpool.kernels.acting`.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit

from seedpool.models.distributions import CategoricalHead
from seedpool.models.mlp import MLPActorCritic


def supports(policy, device: str | torch.device, precision: str) -> bool:
    """True for exactly an fp32 CPU `MLPActorCritic` with a categorical head and no observation
    statistics (the policies this path computes exactly as ``policy.act`` does)."""
    if type(policy) is not MLPActorCritic or policy.continuous or not isinstance(policy.head, CategoricalHead):
        return False
    if policy.obs_norm is not None or policy.activation not in ("tanh", "relu"):
        return False
    if torch.device(device).type != "cpu" or precision != "fp32":
        return False
    return all(p.dtype == torch.float32 and p.device.type == "cpu" for p in policy.parameters())


class CompiledMLPAct:
    """``act(obs) -> (action int64 [B], logprob float32 [B], value float32 [B])`` and
    ``value(obs)``, NumPy in and out, for a policy `supports` accepts.

    The weights are copied (transposed, into one buffer) by `refresh`: call it after the
    policy's parameters change (the sampler does at the start of every rollout)."""

    def __init__(self, policy: MLPActorCritic) -> None:
        self.policy = policy
        self.relu = policy.activation == "relu"
        self.refresh()

    def refresh(self) -> None:
        """Copy the policy's current weights: each layer's ``w.T`` and ``b`` into one float32 buffer,
        with a table of ``(in, out, offset of w.T, offset of b)`` rows per network."""
        layers = self.policy.linear_layers()
        parts, tables, offset = [], [], 0
        for net in (layers.policy, layers.value):
            rows = []
            for w, b in net:
                out_dim, in_dim = w.shape
                parts += [w.detach().numpy().T.ravel(), b.detach().numpy()]
                rows.append((in_dim, out_dim, offset, offset + in_dim * out_dim))
                offset += in_dim * out_dim + out_dim
            tables.append(np.array(rows, np.int64))
        self.flat = np.concatenate(parts).astype(np.float32, copy=False)
        self.pi_table, self.vf_table = tables
        width = max(int(t[:, 1].max()) for t in tables)
        self._scratch = np.empty((2, width), np.float32)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = _rows(obs)
        B = x.shape[0]
        u = torch.rand(B).numpy()
        actions = np.empty(B, np.int64)
        logprobs = np.empty(B, np.float32)
        values = np.empty(B, np.float32)
        _act(x, self.flat, self.pi_table, self.vf_table, self.relu, u, self._scratch, actions, logprobs, values)
        return actions, logprobs, values

    def value(self, obs: np.ndarray) -> np.ndarray:
        x = _rows(obs)
        values = np.empty(x.shape[0], np.float32)
        _values(x, self.flat, self.vf_table, self.relu, self._scratch, values)
        return values


def load_kernels() -> None:
    """Compile the kernels (or load them from numba's cache) now, for the types `act` and `value`
    call them with: trainers do it before a run's clock starts, as pools do for native envs."""
    x, flat, table = np.zeros((1, 1), np.float32), np.zeros(2, np.float32), np.array([[1, 1, 0, 1]], np.int64)
    scratch, out = np.zeros((2, 1), np.float32), np.zeros(1, np.float32)
    _act(x, flat, table, table, False, np.zeros(1, np.float32), scratch, np.zeros(1, np.int64), out, out)
    _values(x, flat, table, False, scratch, out)


def _rows(obs: np.ndarray) -> np.ndarray:
    """Observations as ``[B, D]`` contiguous float32 (what ``features`` computes, without norm)."""
    x = np.asarray(obs)
    return np.ascontiguousarray(x.reshape(x.shape[0], -1), dtype=np.float32)


# tanh as a rational function of x (odd numerator of degree 13, even denominator of degree 6,
# the inputs clamped where float32 tanh is +-1): within 3.5e-7 of tanh everywhere (checked in
# tests/test_mlp_act.py), and plain arithmetic, so the loop over a layer's units vectorises where
# math.tanh, a call per unit, was most of the kernel's time.
_TANH_P = (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
           -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16)
_TANH_Q = (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06)
_TANH_CLAMP = 7.90531110763549805


@njit(inline="always")
def _tanh(x):
    x = min(max(x, np.float32(-_TANH_CLAMP)), np.float32(_TANH_CLAMP))
    x2 = x * x
    p = np.float32(_TANH_P[6])
    p = p * x2 + np.float32(_TANH_P[5])
    p = p * x2 + np.float32(_TANH_P[4])
    p = p * x2 + np.float32(_TANH_P[3])
    p = p * x2 + np.float32(_TANH_P[2])
    p = p * x2 + np.float32(_TANH_P[1])
    p = p * x2 + np.float32(_TANH_P[0])
    q = np.float32(_TANH_Q[3])
    q = q * x2 + np.float32(_TANH_Q[2])
    q = q * x2 + np.float32(_TANH_Q[1])
    q = q * x2 + np.float32(_TANH_Q[0])
    return p * x / q


@njit(cache=True, nogil=True)
def _mlp_row(x, flat, table, relu, scratch):
    """One row through the layers of ``table``; returns a view of the output in ``scratch``.
    Output units are the inner loop (over a row of ``w.T``): independent sums that vectorise."""
    src = x
    k = 0
    n_layers = table.shape[0]
    for i in range(n_layers):
        in_dim, out_dim, ow, ob = table[i, 0], table[i, 1], table[i, 2], table[i, 3]
        dst = scratch[k, :out_dim]
        dst[:] = flat[ob:ob + out_dim]
        for m in range(in_dim):
            s = src[m]
            w_row = flat[ow + m * out_dim:ow + (m + 1) * out_dim]  # indexed from 0 below: vectorises
            for j in range(out_dim):
                dst[j] += w_row[j] * s
        if i < n_layers - 1:
            if relu:
                for j in range(out_dim):
                    dst[j] = max(dst[j], np.float32(0.0))
            else:
                for j in range(out_dim):
                    dst[j] = _tanh(dst[j])
        src = dst
        k = 1 - k
    return src


@njit(cache=True, nogil=True)
def _act(x, flat, pi_table, vf_table, relu, u, scratch, actions, logprobs, values):
    B = x.shape[0]
    for r in range(B):
        values[r] = _mlp_row(x[r], flat, vf_table, relu, scratch)[0]
        logits = _mlp_row(x[r], flat, pi_table, relu, scratch)
        n = logits.shape[0]
        top = logits[0]
        for j in range(1, n):
            top = max(top, logits[j])
        total = 0.0
        for j in range(n):
            total += math.exp(logits[j] - top)
        lse = top + math.log(total)
        # Inverse CDF: the first action whose cumulative probability passes u (the last one if
        # rounding leaves the total just under u).
        a = n - 1
        cum = 0.0
        for j in range(n):
            cum += math.exp(logits[j] - lse)
            if u[r] < cum:
                a = j
                break
        actions[r] = a
        logprobs[r] = logits[a] - lse


@njit(cache=True, nogil=True)
def _values(x, flat, vf_table, relu, scratch, values):
    for r in range(x.shape[0]):
        values[r] = _mlp_row(x[r], flat, vf_table, relu, scratch)[0]
