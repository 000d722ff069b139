"""SAC's and TD3's losses and their gradients written out (`seedpool.models.mlp_grad`), for fp32 updates.

`SACLearner` and `TD3Learner` compute the same update two ways: autograd (any precision) and,
by default in float32, this module, which writes the critics' and the actor's gradients by
hand and leaves the clip, check and optimizer step to the learner's `GradientStep`. Both
draw the same noise in the same order, so on the same batch they agree to float32 rounding
(`tests/test_offpolicy_gradients.py`).

The critics' loss is ``sum_k mean_n w_n (Q_k(s, a) - y_n)^2``, so ``dL/dQ_kn = 2 w_n (Q_kn - y_n) / n``.

SAC's actor, per row, with ``a = tanh(u)``, ``u = mean + std * noise`` and the loss
``alpha * log pi(a) - min_k Q_k(s, a)`` averaged over the n rows:

    dL/da      = -(1/n) dQ_k*/da          (k* the critic holding the minimum)
    dL/dlog pi = alpha / n
    dL/du      = dL/da * (1 - a^2) + dL/dlog pi * 2a     (d log pi/du = 2 tanh(u), the squash's log-det)
    dL/dmean   = dL/du
    dL/dlog std = dL/du * std * noise - dL/dlog pi      (the Gaussian's -log std)

and the log std's smooth squash into ``[LOG_STD_MIN, LOG_STD_MAX]`` multiplies by
``(LOG_STD_MAX - LOG_STD_MIN) / 2 * (1 - tanh(raw)^2)``. TD3's actor, ``a = tanh(out)`` with
the loss ``-mean_n Q_1(s, a)``, needs only the first critic: ``dL/dout = -(1/n) dQ_1/da * (1 - a^2)``.
"""
from __future__ import annotations

from typing import Callable, Mapping

import torch
from torch import nn

from seedpool.algos.offpolicy import critic_loss, td_target
from seedpool.models.continuous import (
    LOG_STD_MAX, LOG_STD_MIN, ContinuousAgent, squashed_gaussian, squashed_log_std,
)
from seedpool.models.mlp_grad import linear_layers, mlp_backward, mlp_forward, twinq_backward, twinq_forward

_HALF_RANGE = 0.5 * (LOG_STD_MAX - LOG_STD_MIN)


def critic_gradients(critic: nn.Module, data: Mapping[str, torch.Tensor], y: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the critics' gradients of their (IS-weighted) squared TD errors toward ``y`` into
    their ``.grad``; returns ``(loss, q [K, n])``."""
    q, inputs = twinq_forward(critic, torch.cat([data["obs"], data["action"]], dim=-1))
    weights = data.get("weights")
    grad_q = (q - y).mul_(2.0 / q.shape[-1])
    twinq_backward(critic, inputs, grad_q if weights is None else grad_q.mul_(weights))
    return critic_loss(q, y, weights), q


class _ByHand:
    """What both algorithms' hand-written gradients hold: the agent and its actor's input width."""

    def __init__(self, agent: ContinuousAgent) -> None:
        self.actor_layers = linear_layers(agent.actor.net)  # refuses what it cannot differentiate, at construction
        self.agent = agent
        self.obs_dim = agent.actor.net[0].in_features


class SACGradients(_ByHand):
    """SAC's critic and actor gradients (float32, no autograd). ``data`` holds flat float32
    ``obs`` and ``next_obs``, normalised as the networks read them."""

    def __init__(self, agent: ContinuousAgent, target_critic: nn.Module) -> None:
        super().__init__(agent)
        self.target = target_critic

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """``(mean, log_std, tanh(raw), layer inputs)`` of the actor."""
        out, inputs = mlp_forward(self.actor_layers, obs)
        mean, raw = out.chunk(2, dim=-1)
        log_std, squashed = squashed_log_std(raw)
        return mean, log_std, squashed, inputs

    @torch.no_grad()
    def critic(self, data: Mapping[str, torch.Tensor], alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the critics' gradients of the soft TD loss; returns ``(loss, q [K, n])``."""
        next_obs = data["next_obs"]
        mean, log_std, _, _ = self._policy(next_obs)
        next_action, next_logp = squashed_gaussian(mean, log_std, torch.randn(mean.shape, device=mean.device))
        next_q = twinq_forward(self.target, torch.cat([next_obs, next_action], dim=-1))[0].min(dim=0).values
        return critic_gradients(self.agent.critic, data, td_target(data["reward"], data["discount"],
                                                                   next_q - alpha * next_logp))

    @torch.no_grad()
    def actor(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the actor's gradient of ``mean(alpha log pi - min_k Q_k)`` (the critics take
        none); returns ``(loss, log pi [n])``."""
        n = obs.shape[0]
        mean, log_std, squashed, inputs = self._policy(obs)
        noise = torch.randn(mean.shape, device=mean.device)
        action, logp = squashed_gaussian(mean, log_std, noise)
        q, critic_inputs = twinq_forward(self.agent.critic, torch.cat([obs, action], dim=-1))
        q_min, chosen = q.min(dim=0)
        loss = (alpha * logp - q_min).mean()
        grad_q = torch.zeros_like(q).scatter_(0, chosen.unsqueeze(0), -1.0 / n)
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weights=False, input_from=self.obs_dim)
        grad_logp = alpha / n
        grad_u = grad_action.mul_(1.0 - action * action).add_(action * (2.0 * grad_logp))
        grad_log_std = (grad_u * log_std.exp() * noise).sub_(grad_logp)
        grad_raw = grad_log_std.mul_(_HALF_RANGE * (1.0 - squashed * squashed))
        mlp_backward(self.actor_layers, inputs, torch.cat([grad_u, grad_raw], dim=-1))
        return loss, logp


class TD3Gradients(_ByHand):
    """TD3's (and DDPG's) critic and actor gradients (float32, no autograd); ``data`` as `SACGradients`'."""

    def __init__(self, agent: ContinuousAgent, target_critic: nn.Module,
                 next_actions: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__(agent)
        self.target_critic = target_critic
        self.next_actions = next_actions  # the target actor's smoothed actions (`td3.smoothed_actions`)

    @torch.no_grad()
    def critic(self, data: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the critics' gradients of the TD loss toward the smoothed target; returns ``(loss, q)``."""
        next_obs = data["next_obs"]
        next_action = self.next_actions(next_obs)
        next_q = twinq_forward(self.target_critic, torch.cat([next_obs, next_action], dim=-1))[0].min(dim=0).values
        return critic_gradients(self.agent.critic, data, td_target(data["reward"], data["discount"], next_q))

    @torch.no_grad()
    def actor(self, obs: torch.Tensor) -> torch.Tensor:
        """Write the actor's gradient of ``-mean Q_1(s, mu(s))`` (only the first critic is run;
        none takes a gradient); returns the loss."""
        out, inputs = mlp_forward(self.actor_layers, obs)
        action = torch.tanh(out)
        q, critic_inputs = twinq_forward(self.agent.critic, torch.cat([obs, action], dim=-1), num_critics=1)
        grad_q = torch.full_like(q, -1.0 / obs.shape[0])
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weights=False,
                                     input_from=self.obs_dim, num_critics=1)
        mlp_backward(self.actor_layers, inputs, grad_action.mul_(1.0 - action * action))
        return -q[0].mean()
