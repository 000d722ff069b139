"""Observation normalisation with running statistics, kept as module buffers.

:class:`RunningNorm` holds the mean and variance of every observation seen so far (merged
batch by batch with Chan et al.'s parallel formula, in float64) and maps observations to
``clip((x - mean) / sqrt(var + eps), -clip, clip)``, as Stable-Baselines3's VecNormalize
does. Its statistics are buffers, so they travel in the model's ``state_dict``: a
checkpoint carries them, a resumed run continues them, and `seedpool eval` normalises
with what training last saw. Only acting updates them (`update`); learning reads them.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn


class RunningNorm(nn.Module):
    """``forward(x)``: x standardised by the running mean/std of what `update` saw, clipped."""

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.clip, self.eps = float(clip), float(eps)

    @torch.no_grad()
    def update(self, batch: np.ndarray | torch.Tensor) -> None:
        """Merge a batch ``[n, *shape]`` of observations into the statistics."""
        x = torch.as_tensor(np.asarray(batch) if not isinstance(batch, torch.Tensor) else batch,
                            dtype=torch.float64, device=self.mean.device).reshape(-1, *self.mean.shape)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean += delta * n / total
        self.var.copy_(m2 / total)
        self.count.fill_(float(total))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised, clipped float32 observations (before any `update`: mean 0, variance 1)."""
        mean, std = self.mean.float(), (self.var + self.eps).sqrt().float()
        return ((x.float() - mean) / std).clamp(-self.clip, self.clip)
