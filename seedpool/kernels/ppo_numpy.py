"""PPO gradient steps in NumPy for small MLP actor-critics with a discrete action head.

On a CPU, a 64-wide MLP on a 256-row minibatch is limited by torch's per-operation overhead
(autograd, dispatch, optimizer bookkeeping), not by arithmetic. This module runs the same step,
forward, the objective of :func:`seedpool.algos.ppo.ppo_loss`, a hand-derived backward, global
grad-norm clipping and Adam, as a few dozen NumPy calls. It works in place on NumPy views of the
tensors :meth:`MLPActorCritic.linear_layers` exposes, their gradients and Adam's state
(``exp_avg``, ``exp_avg_sq``, ``step``), so checkpoints, inference and resuming see exactly what
the torch path leaves. Every hyperparameter is read when a step runs: the config's coefficients
(``ent_coef``, ``vf_coef``, ``max_grad_norm``, ...) from the config handed to `numpy_step_fn` for
this update, Adam's ``lr``, ``betas`` and ``eps`` from the optimizer's param group. Learners reach
it through `seedpool.kernels.ppo_update`; ``tests/test_ppo_numpy.py`` holds it to torch's
results and ``benchmarks/ppo_numpy_update.py`` measures what it saves
(``benchmarks/results/ppo_numpy_update.md``).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
from numba import njit

from seedpool.kernels import blas
from seedpool.models.distributions import CategoricalHead
from seedpool.models.mlp import Linear, MLPActorCritic

# What `bind` is handed: `seedpool.algos.ppo_objective`'s PPOBatch and PPOConfig, whose fields
# alone it reads (kernels sit below algos and import nothing from it: docs/architecture.md).
PPOBatch = PPOConfig = Any

# One gradient step over rows ``idx`` of the batch (None: all rows); returns statistics.
StepFn = Callable[[torch.Tensor | None, bool, bool], dict[str, torch.Tensor]]
Layer = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # weight, bias, their grads


def numpy_step_fn(policy, optimizer, batch: PPOBatch, cfg: PPOConfig, clip: float | None,
                  check: Callable[[float], None] | None = None) -> StepFn | None:
    """The NumPy gradient step for this policy and optimizer, or None when unsupported.

    ``check(grad_norm)`` runs between the backward pass and Adam (the learner's
    `GradientStep.check`: it raises on a non-finite gradient before any parameter changes).
    """
    if not supported(policy, optimizer):
        return None
    layers = policy.linear_layers()
    slots = _adam_slots(policy, optimizer, [*layers.policy, *layers.value])
    if slots is None:
        return None
    pi, vf = _layers(layers.policy), _layers(layers.value)
    relu = layers.activation == "relu"
    data = _as_numpy(batch, policy)

    def step(idx: torch.Tensor | None, normalized: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        # NaN/inf in the data surfaces as the checked gradient norm, not as NumPy warnings.
        with blas.one_blas_thread(), np.errstate(invalid="ignore", over="ignore"):
            return _step(idx, normalized, with_stats)

    def _step(idx: torch.Tensor | None, normalized: bool, with_stats: bool) -> dict[str, torch.Tensor]:
        mb = data if idx is None else [a[idx.numpy()] for a in data]
        obs = mb[0]
        pi_acts, vf_acts = _forward(obs, pi, relu), _forward(obs, vf, relu)
        if (normalized or not cfg.norm_adv) and not with_stats:
            # The common step (no statistics, advantages as given): the policy term's gradient in
            # one compiled pass over the rows instead of ~25 NumPy calls.
            dlogits = _policy_grads(pi_acts[-1], mb[1], mb[2], mb[4], -1.0 if clip is None else float(clip),
                                    float(cfg.ent_coef))
            _, dvalue = _value_loss_grad(vf_acts[-1][:, 0], mb[3], mb[5], cfg, clip)
            stats = {}
        else:
            dlogits, dvalue, stats = _loss_grads(pi_acts[-1], vf_acts[-1][:, 0], mb, cfg, clip,
                                                 normalized, with_stats)
        _backward(dlogits, obs, pi_acts, pi, relu)
        _backward(dvalue[:, None], obs, vf_acts, vf, relu)
        norm = _clip_grad_norm([s[1] for s in slots], cfg.max_grad_norm)
        if check is not None:
            check(norm)
        _adam(slots, optimizer.param_groups[0])  # lr, betas, eps as the optimizer holds them now
        return {k: torch.tensor(v) for k, v in stats.items()}

    return step


class NumpyPPOStep:
    """The NumPy step for one policy and its optimizer (what `seedpool.kernels.ppo_update` returns):
    `bind` makes each update's step, `scope` is held around the update's steps."""

    def __init__(self, policy, optimizer) -> None:
        self.policy, self.optimizer = policy, optimizer
        load_kernels()  # compiled (or loaded from numba's cache) at build, not in the first update

    def bind(self, batch: PPOBatch, cfg: PPOConfig, clip: float | None,
             check: Callable[[float], None] | None = None) -> StepFn | None:
        """The step over rows of ``batch`` for this update, reading ``cfg`` and the optimizer's
        param group at every step; None when the policy or optimizer no longer fits."""
        return numpy_step_fn(self.policy, self.optimizer, batch, cfg, clip, check)

    def scope(self):
        """The context held around all steps of one update (NumPy's BLAS on one thread)."""
        return blas.update_scope()


def _adam_slots(policy, optimizer, layers: list[Linear]) -> list[tuple[np.ndarray, ...]] | None:
    """``(param, grad, exp_avg, exp_avg_sq, step)`` views per optimizer tensor, or None if unsupported."""
    opt_params = list(optimizer.param_groups[0]["params"])
    layer_params = [t for pair in layers for t in pair]
    trainable = [p for p in policy.parameters() if p.requires_grad]
    if {id(p) for p in trainable} != {id(p) for p in layer_params}:
        return None  # parameters the kernel does not know about
    if not _is_flat_of(opt_params, layer_params):
        if [id(p) for p in opt_params] != [id(p) for p in trainable]:
            return None
        for p in opt_params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
    return [(_np(p), _np(p.grad), *_adam_state(optimizer, p)) for p in opt_params]


def supported(policy, optimizer) -> bool:
    """A float32 CPU MLP with a categorical head, trained by plain torch Adam in one group."""
    # Exactly the MLP: a subclass may compute forward() differently from its linear_layers().
    if type(policy) is not MLPActorCritic or policy.continuous or not isinstance(policy.head, CategoricalHead):
        return False
    if policy.activation not in ("tanh", "relu"):
        return False
    if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    plain = not (group.get("amsgrad") or group.get("weight_decay") or group.get("maximize")
                 or group.get("differentiable") or group.get("decoupled_weight_decay")
                 or torch.is_tensor(group["lr"]))
    tensors = list(policy.parameters()) + list(group["params"])
    return plain and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors)


def _is_flat_of(opt_params: list[torch.Tensor], layer_params: list[torch.Tensor]) -> bool:
    """Is the one optimizer tensor the flat home of every layer tensor and of its gradient?"""
    if len(opt_params) != 1 or opt_params[0].grad is None:
        return False
    flat = opt_params[0]
    if flat.numel() != sum(p.numel() for p in layer_params):
        return False
    home, grad_home = flat.untyped_storage().data_ptr(), flat.grad.untyped_storage().data_ptr()
    return all(p.untyped_storage().data_ptr() == home and p.grad is not None
               and p.grad.untyped_storage().data_ptr() == grad_home for p in layer_params)


def _adam_state(optimizer, p: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Views of Adam's state for ``p``, created as torch's first step would create it."""
    state = optimizer.state[p]
    if not state:
        # The same keys, dtypes and shapes torch.optim.Adam gives a fresh parameter.
        state["step"] = torch.zeros((), dtype=torch.float32)
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    return _np(state["exp_avg"]), _np(state["exp_avg_sq"]), _np(state["step"])


def _np(t: torch.Tensor) -> np.ndarray:
    """A NumPy view sharing ``t``'s memory."""
    return t.detach().numpy()


def _layers(pairs: tuple[Linear, ...]) -> list[Layer]:
    """NumPy views of each linear layer's weight, bias and their gradients."""
    return [(_np(w), _np(b), _np(w.grad), _np(b.grad)) for w, b in pairs]


def _as_numpy(batch: PPOBatch, policy) -> list[np.ndarray]:
    """obs (as the networks read them: flattened, float32, standardised if the policy does),
    actions, old log-probs, old values, advantages, returns."""
    obs = policy.features(batch.obs.detach()).numpy()
    rest = (batch.actions.long(), batch.logprobs, batch.values, batch.advantages, batch.returns)
    return [obs, *(t.detach().numpy() for t in rest)]


def _forward(x: np.ndarray, layers: list[Layer], relu: bool) -> list[np.ndarray]:
    """Each hidden layer's activations, then the head's output."""
    acts = []
    for w, b, _, _ in layers[:-1]:
        h = x @ w.T
        h += b
        x = np.maximum(h, 0.0, out=h) if relu else np.tanh(h, out=h)
        acts.append(x)
    w, b, _, _ = layers[-1]
    out = x @ w.T
    out += b
    acts.append(out)
    return acts


def _backward(dout: np.ndarray, x: np.ndarray, acts: list[np.ndarray], layers: list[Layer], relu: bool) -> None:
    """Write d(loss)/d(weights, biases) into the layers' gradient views."""
    inputs = [x, *acts[:-1]]
    d = dout
    for i in range(len(layers) - 1, -1, -1):
        w, _, gw, gb = layers[i]
        np.matmul(d.T, inputs[i], out=gw)
        np.sum(d, axis=0, out=gb)
        if i == 0:
            break
        d = d @ w
        h = acts[i - 1]
        if relu:
            d *= h > 0
        else:
            d *= 1.0 - h * h


def _loss_grads(logits, value, mb, cfg: PPOConfig, clip: float | None, normalized: bool, with_stats: bool):
    """d(PPO loss)/d(logits) and d(loss)/d(value), with ppo_loss's statistics when asked."""
    _, actions, old_logp, old_values, adv, returns = mb
    n = len(actions)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    probs = np.exp(logp)
    rows = np.arange(n)
    logratio = logp[rows, actions] - old_logp
    ratio = np.exp(logratio)
    if cfg.norm_adv and not normalized and n > 1:
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + np.float32(1e-8))
    # d min(adv r, adv clamp(r)) / dr: torch splits ties between the two; inside the clip
    # range both halves are adv, outside only the unclipped side has a gradient.
    unclipped = adv * ratio
    if clip is not None:
        clipped = adv * np.clip(ratio, np.float32(1.0 - clip), np.float32(1.0 + clip))
        inside = (ratio >= np.float32(1.0 - clip)) & (ratio <= np.float32(1.0 + clip))
        active = inside | (unclipped < clipped)
        surrogate = np.minimum(unclipped, clipped)
        dratio = np.where(active, adv, np.float32(0.0))
    else:
        surrogate, dratio = unclipped, adv
    dlogprob = dratio * ratio * np.float32(-1.0 / n)
    dlogits = probs * -dlogprob[:, None]
    dlogits[rows, actions] += dlogprob
    entropy = None
    if cfg.ent_coef or with_stats:
        entropy = -(probs * logp).sum(axis=1)
    if cfg.ent_coef:
        # dH/dz = -p (log p + H); the loss subtracts ent_coef * mean(H).
        dlogits += probs * (logp + entropy[:, None]) * np.float32(cfg.ent_coef / n)
    v_loss, dvalue = _value_loss_grad(value, old_values, returns, cfg, clip)
    stats = {}
    if with_stats:
        stats = {"policy_loss": -surrogate.mean(), "value_loss": v_loss, "entropy": entropy.mean(),
                 "approx_kl": ((ratio - np.float32(1.0)) - logratio).mean(),
                 "clipfrac": np.float32((np.abs(ratio - np.float32(1.0)) > (clip or np.inf)).mean())}
    return dlogits, dvalue, stats


def load_kernels() -> None:
    """Compile the compiled parts of the step (or load them from numba's cache) now, for the
    types the step calls them with: trainers do it before a run's clock starts."""
    logits, small = np.zeros((1, 2), np.float32), np.zeros(1, np.float32)
    _policy_grads(logits, np.zeros(1, np.int64), small, small, 0.2, 0.0)


@njit(cache=True, nogil=True)
def _policy_grads(logits, actions, old_logp, adv, clip, ent_coef):
    """d(policy loss - ent_coef * mean entropy)/d(logits), row by row: what `_loss_grads` computes
    for the logits (``clip`` < 0: no clipping), in float64 within a row, float32 out."""
    n, k = logits.shape
    out = np.empty((n, k), np.float32)
    logp = np.empty(k)
    for i in range(n):
        top = logits[i, 0]
        for j in range(1, k):
            top = max(top, logits[i, j])
        total = 0.0
        for j in range(k):
            total += math.exp(logits[i, j] - top)
        lse = top + math.log(total)
        entropy = 0.0
        for j in range(k):
            logp[j] = logits[i, j] - lse
            entropy -= math.exp(logp[j]) * logp[j]
        a = actions[i]
        ratio = math.exp(logp[a] - old_logp[i])
        dratio = adv[i]
        if clip >= 0.0:
            clipped = adv[i] * min(max(ratio, 1.0 - clip), 1.0 + clip)
            inside = 1.0 - clip <= ratio <= 1.0 + clip
            if not (inside or adv[i] * ratio < clipped):
                dratio = 0.0
        dlogprob = dratio * ratio * (-1.0 / n)
        for j in range(k):
            p = math.exp(logp[j])
            g = -p * dlogprob
            if ent_coef != 0.0:
                g += p * (logp[j] + entropy) * (ent_coef / n)
            out[i, j] = g
        out[i, a] += dlogprob
    return out


def _value_loss_grad(value, old_values, returns, cfg: PPOConfig, clip: float | None):
    """The value loss and vf_coef * d(value loss)/d(value)."""
    n = len(value)
    err = value - returns
    if cfg.clip_vloss and clip is not None:
        delta = value - old_values
        v_clipped = old_values + np.clip(delta, np.float32(-clip), np.float32(clip))
        err_c = v_clipped - returns
        sq, sq_c = err * err, err_c * err_c
        d_c = np.where((delta >= -clip) & (delta <= clip), err_c, np.float32(0.0))
        # torch.max splits the gradient of ties between both sides.
        d = np.where(sq == sq_c, np.float32(0.5) * (err + d_c), np.where(sq > sq_c, err, d_c))
        loss = np.maximum(sq, sq_c).mean()
    else:
        d, loss = err, (err * err).mean()
    return loss, d * np.float32(2.0 * cfg.vf_coef / n)


def _clip_grad_norm(grads: list[np.ndarray], max_norm: float) -> float:
    """Scale gradients so that their global L2 norm is at most ``max_norm`` (as flat.clip_grad_norm);
    returns the norm before."""
    norm = np.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for g in grads))
    scale = min(max_norm / (norm + 1e-6), 1.0)
    for g in grads:
        g *= np.float32(scale)
    return norm


def _adam(slots: list[tuple[np.ndarray, ...]], group: dict) -> None:
    """torch.optim.Adam's update with bias correction, in place on the shared views."""
    lr, eps = float(group["lr"]), float(group["eps"])
    beta1, beta2 = (float(b) for b in group["betas"])
    for param, grad, exp_avg, exp_avg_sq, step in slots:
        step += np.float32(1.0)
        t = float(step)
        correction1, correction2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
        exp_avg += (grad - exp_avg) * np.float32(1.0 - beta1)
        exp_avg_sq *= np.float32(beta2)
        exp_avg_sq += grad * grad * np.float32(1.0 - beta2)
        denom = np.sqrt(exp_avg_sq)
        denom *= np.float32(1.0 / np.sqrt(correction2))
        denom += np.float32(eps)
        param -= exp_avg / denom * np.float32(lr / correction1)
