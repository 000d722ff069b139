"""Hand-written fast paths, behind one seam.

The math of every algorithm lives in `seedpool.algos` as plain autograd code: it is the
reference, it runs on every model, device and precision, and every kernel here is tested
against it (the parity tests named in each module). A kernel computes the same thing faster
for the cases it fits: a small CPU MLP, float32, a fused optimizer.

**The seam.** A learner or sampler asks once, when it is built, for the kernel that fits its
model, device and precision; the answer is a kernel or None, and None means the plain math:

- :func:`acting` -- a categorical `MLPActorCritic` acting in one compiled call (PPO's samplers);
- :func:`continuous_acting` -- a SAC/TD3/DDPG actor acting in NumPy (the continuous sampler);
- :func:`ppo_update` -- PPO's minibatch steps in NumPy and numba (`PPOLearner`);
- :func:`sac_gradients`, :func:`td3_gradients` -- SAC's and TD3's gradients by hand;
- :func:`optimizer_step` -- a fused Adam stepped without torch's Python wrapper (`GradientStep`);
- :func:`keep_freed_memory` -- glibc's allocator thresholds for the process (`setup_torch`);
- :func:`warm_up` -- compile (or load from numba's cache) the acting kernel that fits a policy
  now, before a run's clock starts.

No kernel captures a hyperparameter when it is built: each reads the learner's config and the
optimizer's param groups (learning rate, betas, eps) at every call, so a run whose
``learner.cfg`` or ``optimizer.param_groups`` change between updates takes the same steps on
the kernel path as on the plain one (tests/test_kernel_hyperparameters.py).

The kernel modules are imported only when a kernel is asked for, so that importing this
package (every learner does) loads no compiler.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

if TYPE_CHECKING:
    from seedpool.kernels.continuous_act import UnitAction
    from seedpool.kernels.mlp_act import CompiledMLPAct
    from seedpool.kernels.offpolicy_gradients import SACGradients, TD3Gradients
    from seedpool.kernels.ppo_numpy import NumpyPPOStep

__all__ = ["acting", "continuous_acting", "keep_freed_memory", "optimizer_step", "ppo_update",
           "sac_gradients", "td3_gradients", "warm_up"]


def _fp32_cpu(device: str | torch.device, precision: str) -> bool:
    return torch.device(device).type == "cpu" and precision == "fp32"


def acting(policy, device: str | torch.device, precision: str) -> CompiledMLPAct | None:
    """Compiled acting for ``policy`` (``act`` and ``value`` on NumPy rows), or None: only an fp32
    CPU `MLPActorCritic` with a categorical head and no observation statistics fits."""
    from seedpool.kernels import mlp_act

    if not mlp_act.supports(policy, device, precision):
        return None
    mlp_act.load_kernels()
    return mlp_act.CompiledMLPAct(policy)


def continuous_acting(agent, device: str | torch.device, precision: str) -> UnitAction | None:
    """``unit_action(obs, deterministic=False, generator=None)`` in NumPy for a SAC/TD3/DDPG agent
    acting on a CPU in float32 (the same face as `ContinuousAgent.unit_action`), or None."""
    if not _fp32_cpu(device, precision):
        return None
    from seedpool.kernels.continuous_act import numpy_unit_action

    return numpy_unit_action(agent)


def ppo_update(policy, optimizer: torch.optim.Optimizer, device: str | torch.device,
               precision: str) -> NumpyPPOStep | None:
    """PPO's minibatch step in NumPy for ``policy`` trained by ``optimizer``, or None: it fits a
    float32 CPU `MLPActorCritic` with a categorical head trained by plain Adam in one group.

    The kernel's ``bind(batch, cfg, clip, check)`` makes each update's step (None if the policy or
    optimizer changed so that it no longer fits); `seedpool.algos.ppo.ppo_update` takes it."""
    if not _fp32_cpu(device, precision):
        return None
    from seedpool.kernels import ppo_numpy

    if not ppo_numpy.supported(policy, optimizer):
        return None
    return ppo_numpy.NumpyPPOStep(policy, optimizer)


def sac_gradients(agent, target_critic: torch.nn.Module, reference: tuple[Callable, Callable],
                  device: str | torch.device, precision: str) -> SACGradients | None:
    """SAC's hand-written critic and actor gradients (products in the precision's dtype), or None
    when the actor is not an MLP of Linear layers with one ReLU or Tanh between them.
    ``reference``: the plain ``(td_target, critic_loss)`` of the learner's autograd path."""
    from seedpool.kernels import offpolicy_gradients as grads
    from seedpool.models.precision import product_dtype

    if not _by_hand(agent):
        return None
    return grads.SACGradients(agent, target_critic, grads.Reference(*reference), product_dtype(precision))


def td3_gradients(agent, target_critic: torch.nn.Module, next_actions: Callable[[torch.Tensor], torch.Tensor],
                  reference: tuple[Callable, Callable], device: str | torch.device,
                  precision: str) -> TD3Gradients | None:
    """TD3's (and DDPG's) hand-written gradients, or None (as `sac_gradients`); ``next_actions``
    gives the target actor's smoothed actions, reading the learner's config at each call."""
    from seedpool.kernels import offpolicy_gradients as grads
    from seedpool.models.precision import product_dtype

    if not _by_hand(agent):
        return None
    return grads.TD3Gradients(agent, target_critic, next_actions, grads.Reference(*reference),
                              product_dtype(precision))


def _by_hand(agent) -> bool:
    """Can `seedpool.kernels.mlp_grad` differentiate this agent's actor?"""
    from seedpool.kernels.mlp_grad import linear_layers

    try:
        linear_layers(agent.actor.net)
    except ValueError:
        return False
    return True


def optimizer_step(optimizer: torch.optim.Optimizer) -> Callable[[], None]:
    """The step function for ``optimizer``: a fused Adam's kernel called directly where it can be
    (`seedpool.kernels.fused_adam`), else ``optimizer.step``."""
    from seedpool.kernels.fused_adam import fused_adam_step

    return fused_adam_step(optimizer) or optimizer.step


def keep_freed_memory() -> bool:
    """Set glibc's allocator thresholds for this process (`seedpool.kernels.allocator`); False
    where the C library is not glibc."""
    from seedpool.kernels import allocator

    return allocator.keep_freed_memory()


def warm_up(policy, device: str | torch.device, precision: str) -> None:
    """Compile (or load from numba's cache) now the acting kernel that fits ``policy``: trainers
    call it before a run's clock starts, as pools do for native envs (`ppo_update`'s kernel
    compiles when it is built)."""
    from seedpool.kernels import mlp_act

    if mlp_act.supports(policy, device, precision):
        mlp_act.load_kernels()
