"""SAC's and TD3's losses and their gradients written out (`seedpool.kernels.mlp_grad`).

`SACLearner` and `TD3Learner` compute the same update two ways: autograd (the reference, in
`seedpool.algos.sac` and `seedpool.algos.td3`) and, by default, this module, reached through
`seedpool.kernels.sac_gradients` and `seedpool.kernels.td3_gradients`, which writes the critics'
and the actor's gradients by hand and leaves the clip, check and optimizer step to the learner's
`GradientStep`. Nothing here holds a hyperparameter: the temperature comes with each call, TD3's
smoothing from the learner's ``next_actions`` (its current config), the learning rates from the
optimizers at their step. Both draw the same noise in the same
order, so on the same batch they agree to float32 rounding (`tests/test_offpolicy_gradients.py`).
With ``dtype=torch.bfloat16`` (``--precision bf16``) the networks' products run in bf16 as
under autocast, and everything between them (the squash, log-probabilities, targets, losses)
in float32.

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

SAC's joint update (`SACGradients.joint`) computes both losses on the same networks in one
pass: the actor's rows are ``next_obs`` then ``obs``, the critics' the replayed actions then
the policy's, and `twinq_backward` sends the first half's gradient to the critics' weights
and the second half's to the action, which the actor's backward takes from there.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

import torch
from torch import nn

from seedpool.models.continuous import (
    LOG_STD_MAX, LOG_STD_MIN, ContinuousAgent, squashed_gaussian, squashed_log_std,
)
from seedpool.kernels.mlp_grad import linear_layers, mlp_backward, mlp_forward, twinq_backward, twinq_forward

_HALF_RANGE = 0.5 * (LOG_STD_MAX - LOG_STD_MIN)


class Reference(NamedTuple):
    """The plain functions the hand-written updates share with autograd's (`seedpool.algos.offpolicy`'s
    ``td_target`` and ``critic_loss``), handed in by the learner so that the targets and loss values
    are computed once, in one place."""

    td_target: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    critic_loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def critic_gradients(critic: nn.Module, data: Mapping[str, torch.Tensor], y: torch.Tensor, reference: Reference,
                     dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the critics' gradients of their (IS-weighted) squared TD errors toward ``y`` into
    their ``.grad``; returns ``(loss, q [K, n])``; ``dtype``: the products'."""
    q, inputs = twinq_forward(critic, torch.cat([data["obs"], data["action"]], dim=-1), dtype=dtype)
    twinq_backward(critic, inputs, _td_grad(q, y, data.get("weights"), torch.empty_like(q)))
    return reference.critic_loss(q, y, data.get("weights")), q


def _td_grad(q: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    """``dL/dQ_kn = 2 w_n (Q_kn - y_n) / n`` of the critics' loss, written into ``out``."""
    torch.mul(q - y, 2.0 / q.shape[-1], out=out)
    return out if weights is None else out.mul_(weights)


def _normal(like: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
    """``noise``, or a standard normal draw of ``like``'s shape."""
    return torch.randn(like.shape, device=like.device) if noise is None else noise


class _ByHand:
    """What both algorithms' hand-written gradients hold: the agent, its actor's input width and
    the dtype of the networks' products, and the plain functions they share with autograd's path."""

    def __init__(self, agent: ContinuousAgent, reference: Reference, dtype: torch.dtype = torch.float32) -> None:
        self.reference = reference
        self.actor_layers = linear_layers(agent.actor.net)  # refuses what it cannot differentiate, at construction
        self.agent = agent
        self.obs_dim = agent.actor.net[0].in_features
        self.dtype = dtype


class SACGradients(_ByHand):
    """SAC's critic and actor gradients (no autograd). ``data`` holds flat float32 ``obs`` and
    ``next_obs``, normalised as the networks read them."""

    def __init__(self, agent: ContinuousAgent, target_critic: nn.Module, reference: Reference,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__(agent, reference, dtype)
        self.target = target_critic

    def _policy(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """``(mean, log_std, tanh(raw), layer inputs)`` of the actor."""
        out, inputs = mlp_forward(self.actor_layers, obs, self.dtype)
        mean, raw = out.chunk(2, dim=-1)
        log_std, squashed = squashed_log_std(raw)
        return mean, log_std, squashed, inputs

    @torch.no_grad()
    def critic(self, data: Mapping[str, torch.Tensor], alpha: torch.Tensor, noise: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the critics' gradients of the soft TD loss; returns ``(loss, q [K, n])``.
        ``noise``: the next actions' standard normal draws (None: drawn here)."""
        next_obs = data["next_obs"]
        mean, log_std, _, _ = self._policy(next_obs)
        next_action, next_logp = squashed_gaussian(mean, log_std, _normal(mean, noise))
        next_q = twinq_forward(self.target, torch.cat([next_obs, next_action], dim=-1),
                               dtype=self.dtype)[0].min(dim=0).values
        y = self.reference.td_target(data["reward"], data["discount"], next_q - alpha * next_logp)
        return critic_gradients(self.agent.critic, data, y, self.reference, self.dtype)

    @torch.no_grad()
    def actor(self, obs: torch.Tensor, alpha: torch.Tensor, noise: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the actor's gradient of ``mean(alpha log pi - min_k Q_k)`` (the critics take
        none); returns ``(loss, log pi [n])``. ``noise`` as `critic`'s."""
        n = obs.shape[0]
        mean, log_std, squashed, inputs = self._policy(obs)
        noise = _normal(mean, noise)
        action, logp = squashed_gaussian(mean, log_std, noise)
        q, critic_inputs = twinq_forward(self.agent.critic, torch.cat([obs, action], dim=-1), dtype=self.dtype)
        q_min, chosen = q.min(dim=0)
        grad_q = torch.zeros_like(q).scatter_(0, chosen.unsqueeze(0), -1.0 / n)
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weight_rows=0, input_from=self.obs_dim)
        self._actor_backward(inputs, grad_action, action, log_std, squashed, noise, alpha)
        return (alpha * logp - q_min).mean(), logp

    @torch.no_grad()
    def joint(self, data: Mapping[str, torch.Tensor], alpha: torch.Tensor, noise: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write the critics' and the actor's gradients of their losses, both on the networks as
        they are now (the SAC authors' order: the actor's loss reads the critics before their
        step), in one pass: the actor reads ``obs`` and ``next_obs`` as one batch, the critics the
        replayed and the policy's actions as one. Returns ``(critic loss, q [K, n], actor loss,
        log pi [n])``. ``noise``: one draw for both, ``next_obs``' rows first (None: drawn here);
        with the same noise, the gradients are those of `critic` and `actor` on these networks."""
        obs, next_obs = data["obs"], data["next_obs"]
        n = obs.shape[0]
        mean, log_std, squashed, inputs = self._policy(torch.cat([next_obs, obs]))
        noise = _normal(mean, noise)
        action, logp = squashed_gaussian(mean, log_std, noise)
        next_q = twinq_forward(self.target, torch.cat([next_obs, action[:n]], dim=-1),
                               dtype=self.dtype)[0].min(dim=0).values
        y = self.reference.td_target(data["reward"], data["discount"], next_q - alpha * logp[:n])
        # The critics' rows: the replayed actions, then the policy's.
        rows = torch.cat([torch.cat([obs, obs]), torch.cat([data["action"], action[n:]])], dim=-1)
        q_both, critic_inputs = twinq_forward(self.agent.critic, rows, dtype=self.dtype)
        q, q_pi = q_both[:, :n], q_both[:, n:]
        q_min, chosen = q_pi.min(dim=0)
        grad_q = torch.empty_like(q_both)
        _td_grad(q, y, data.get("weights"), grad_q[:, :n])
        grad_q[:, n:].zero_().scatter_(0, chosen.unsqueeze(0), -1.0 / n)
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weight_rows=n, input_from=self.obs_dim)
        own = slice(n, None)  # the actor's loss reads the obs rows
        self._actor_backward([x[own] for x in inputs], grad_action, action[own], log_std[own], squashed[own],
                             noise[own], alpha)
        return self.reference.critic_loss(q, y, data.get("weights")), q, (alpha * logp[own] - q_min).mean(), logp[own]

    def _actor_backward(self, inputs: list[torch.Tensor], grad_action: torch.Tensor, action: torch.Tensor,
                        log_std: torch.Tensor, squashed: torch.Tensor, noise: torch.Tensor, alpha: torch.Tensor) -> None:
        """From ``dL/da`` (the critics' part of the actor's loss) to the actor's weight gradients,
        adding the entropy term's (see the module docstring)."""
        grad_logp = alpha / action.shape[0]
        grad_u = grad_action.mul_(1.0 - action * action).add_(action * (2.0 * grad_logp))
        grad_log_std = (grad_u * log_std.exp() * noise).sub_(grad_logp)
        grad_raw = grad_log_std.mul_(_HALF_RANGE * (1.0 - squashed * squashed))
        mlp_backward(self.actor_layers, inputs, torch.cat([grad_u, grad_raw], dim=-1))


class TD3Gradients(_ByHand):
    """TD3's (and DDPG's) critic and actor gradients (no autograd); ``data`` as `SACGradients`'."""

    def __init__(self, agent: ContinuousAgent, target_critic: nn.Module,
                 next_actions: Callable[[torch.Tensor], torch.Tensor], reference: Reference,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__(agent, reference, dtype)
        self.target_critic = target_critic
        self.next_actions = next_actions  # the target actor's smoothed actions (`td3.smoothed_actions`)

    @torch.no_grad()
    def critic(self, data: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the critics' gradients of the TD loss toward the smoothed target; returns ``(loss, q)``."""
        next_obs = data["next_obs"]
        next_action = self.next_actions(next_obs)
        next_q = twinq_forward(self.target_critic, torch.cat([next_obs, next_action], dim=-1),
                               dtype=self.dtype)[0].min(dim=0).values
        y = self.reference.td_target(data["reward"], data["discount"], next_q)
        return critic_gradients(self.agent.critic, data, y, self.reference, self.dtype)

    @torch.no_grad()
    def actor(self, obs: torch.Tensor) -> torch.Tensor:
        """Write the actor's gradient of ``-mean Q_1(s, mu(s))`` (only the first critic is run;
        none takes a gradient); returns the loss."""
        out, inputs = mlp_forward(self.actor_layers, obs, self.dtype)
        action = torch.tanh(out)
        q, critic_inputs = twinq_forward(self.agent.critic, torch.cat([obs, action], dim=-1), num_critics=1,
                                         dtype=self.dtype)
        grad_q = torch.full_like(q, -1.0 / obs.shape[0])
        grad_action = twinq_backward(self.agent.critic, critic_inputs, grad_q, weight_rows=0,
                                     input_from=self.obs_dim, num_critics=1)
        mlp_backward(self.actor_layers, inputs, grad_action.mul_(1.0 - action * action))
        return -q[0].mean()
