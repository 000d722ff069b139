"""Action distributions written as a few tensor ops (no torch.distributions overhead).

A head turns the network's raw output ("params") into actions, log-probabilities and
entropies. Categorical params are logits ``[B, A]``; Gaussian params are ``(mean, log_std)``,
both ``[B, A]``.
"""
from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F

Params = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class ActionHead(Protocol):
    """What an algorithm needs from a policy's action distribution."""

    def sample(self, params: Params, deterministic: bool = False) -> torch.Tensor: ...
    def log_prob(self, params: Params, action: torch.Tensor) -> torch.Tensor: ...
    def entropy(self, params: Params) -> torch.Tensor: ...
    def log_prob_entropy(self, params: Params, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...
    def sample_log_prob(self, params: Params, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]: ...


class CategoricalHead:
    """Discrete actions from logits; actions are int64 ``[B]``."""

    def sample(self, params: Params, deterministic: bool = False) -> torch.Tensor:
        """Draw one action per row (the arg-max when deterministic)."""
        if deterministic:
            return params.argmax(dim=-1)
        # Gumbel-max draws straight from logits, cheaper than softmax + multinomial on small batches.
        noise = torch.empty_like(params).exponential_().log_()
        return (params - noise).argmax(dim=-1)

    def log_prob(self, params: Params, action: torch.Tensor) -> torch.Tensor:
        """log pi(action) ``[B]``."""
        return F.log_softmax(params, dim=-1).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def sample_log_prob(self, params: Params, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action, log pi(action))`` from one log-softmax (the acting hot path)."""
        logp = F.log_softmax(params, dim=-1)
        action = self.sample(logp, deterministic)  # log-probs are logits too
        return action, logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)

    def entropy(self, params: Params) -> torch.Tensor:
        """Entropy ``[B]`` in nats."""
        logp = F.log_softmax(params, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    def log_prob_entropy(self, params: Params, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy)`` sharing one log-softmax."""
        logp = F.log_softmax(params, dim=-1)
        return logp.gather(-1, action.long().unsqueeze(-1)).squeeze(-1), -(logp.exp() * logp).sum(-1)


class GaussianHead:
    """Continuous actions from a diagonal Gaussian; actions are float ``[B, A]``, unbounded."""

    def sample(self, params: Params, deterministic: bool = False) -> torch.Tensor:
        """Draw one action per row (the mean when deterministic)."""
        mean, log_std = params
        if deterministic:
            return mean
        return mean + log_std.exp() * torch.randn_like(mean)

    def log_prob(self, params: Params, action: torch.Tensor) -> torch.Tensor:
        """log pi(action) ``[B]``, summed over action dimensions."""
        mean, log_std = params
        z = (action - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def entropy(self, params: Params) -> torch.Tensor:
        """Entropy ``[B]`` in nats, summed over action dimensions."""
        _, log_std = params
        return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)

    def log_prob_entropy(self, params: Params, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy)``."""
        return self.log_prob(params, action), self.entropy(params)

    def sample_log_prob(self, params: Params, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action, log pi(action))``."""
        action = self.sample(params, deterministic)
        return action, self.log_prob(params, action)
