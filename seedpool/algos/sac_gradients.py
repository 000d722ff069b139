"""SAC's losses and their gradients written out (`seedpool.models.mlp_grad`), for fp32 updates.

`SACLearner` computes the same update two ways: autograd (any precision) and, by default in
float32, this module, which writes the critics' and the actor's gradients by hand and
leaves the clip, check and optimizer step to the learner's `GradientStep`. Both draw the
same noise in the same order, so on the same batch they agree to float32 rounding
(`tests/test_sac_gradients.py`). The derivation of the actor's gradient, per row, with
``a = tanh(u)``, ``u = mean + std * noise``, loss ``alpha * log pi(a) - min_k Q_k(s, a)``
averaged over the n rows:

    dL/da      = -(1/n) dQ_k*/da          (k* the critic holding the minimum)
    dL/dlog pi = alpha / n
    dL/du      = dL/da * (1 - a^2) + dL/dlog pi * 2a     (d log pi/du = 2 tanh(u), the squash's log-det)
    dL/dmean   = dL/du
    dL/dlog std = dL/du * std * noise - dL/dlog pi      (the Gaussian's -log std)

and the log std's smooth squash into ``[LOG_STD_MIN, LOG_STD_MAX]`` multiplies by
``(LOG_STD_MAX - LOG_STD_MIN) / 2 * (1 - tanh(raw)^2)``.
"""
from __future__ import annotations

from typing import Mapping

import torch

from seedpool.algos.offpolicy import td_target
from seedpool.models.continuous import LOG_STD_MAX, LOG_STD_MIN, ContinuousAgent, squashed_gaussian
from seedpool.models.mlp_grad import linear_layers, mlp_backward, mlp_forward, twinq_backward, twinq_forward

_HALF_RANGE = 0.5 * (LOG_STD_MAX - LOG_STD_MIN)


class SACGradients:
    """The critics' and the actor's SAC gradients of one agent, by hand (float32, no autograd)."""

    def __init__(self, agent: ContinuousAgent, target_critic: torch.nn.Module) -> None:
        linear_layers(agent.actor.net)  # refuses what it cannot differentiate, at construction
        self.agent = agent
        self.target = target_critic
        self.obs_dim = agent.actor.net[0].in_features

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """``(mean, log_std, tanh(raw), layer inputs)`` of the actor on flat float32 observations."""
        out, inputs = mlp_forward(self.agent.actor.net, obs)
        mean, raw = out.chunk(2, dim=-1)
        squashed = torch.tanh(raw)
        return mean, LOG_STD_MIN + _HALF_RANGE * (squashed + 1.0), squashed, inputs

    @torch.no_grad()
    def critic(self, data: Mapping[str, torch.Tensor], alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the critics' gradients of the soft TD loss into their ``.grad``; returns ``(loss, q [K, n])``.

        ``data`` holds flat float32 ``obs`` and ``next_obs`` (normalised as the networks read them)."""
        obs, next_obs = data["obs"], data["next_obs"]
        mean, log_std, _, _ = self._policy(next_obs)
        next_action, next_logp = squashed_gaussian(mean, log_std, torch.randn(mean.shape, device=mean.device))
        next_q = twinq_forward(self.target, torch.cat([next_obs, next_action], dim=-1))[0].min(dim=0).values
        y = td_target(data["reward"], data["discount"], next_q - alpha * next_logp)
        q, inputs = twinq_forward(self.agent.critic, torch.cat([obs, data["action"]], dim=-1))
        error = q - y
        weights = data.get("weights")
        # loss = sum_k mean_n w_n (q_kn - y_n)^2; its gradient is 2 w_n (q_kn - y_n) / n
        weighted = error if weights is None else error * weights
        loss = (weighted * error).mean(-1).sum()
        twinq_backward(self.agent.critic, inputs, weighted.mul_(2.0 / error.shape[-1]))
        return loss, q

    @torch.no_grad()
    def actor(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the actor's gradient of ``mean(alpha log pi - min_k Q_k)`` into its ``.grad`` (the
        critics take none); returns ``(loss, log pi [n])``."""
        n = obs.shape[0]
        mean, log_std, squashed, inputs = self._policy(obs)
        noise = torch.randn(mean.shape, device=mean.device)
        std = log_std.exp()
        action, logp = squashed_gaussian(mean, log_std, noise)
        q, critic_inputs = twinq_forward(self.agent.critic, torch.cat([obs, action], dim=-1))
        q_min, chosen = q.min(dim=0)
        loss = (alpha * logp - q_min).mean()
        grad_q = torch.zeros_like(q).scatter_(0, chosen.unsqueeze(0), -1.0 / n)
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weights=False, input_from=self.obs_dim)
        grad_logp = alpha / n
        grad_u = grad_action.mul_(1.0 - action * action).add_(action * (2.0 * grad_logp))
        grad_log_std = (grad_u * std * noise).sub_(grad_logp)
        grad_raw = grad_log_std.mul_(_HALF_RANGE * (1.0 - squashed * squashed))
        mlp_backward(self.agent.actor.net, inputs, torch.cat([grad_u, grad_raw], dim=-1))
        return loss, logp
