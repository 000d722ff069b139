"""Reward normalisation by the running spread of each env's discounted return.

PPO on MuJoCo-like tasks learns far better when its value targets stay near unit scale. The
usual way (OpenAI baselines' and Stable-Baselines3's VecNormalize, CleanRL's
``NormalizeReward``) keeps, per env, the discounted sum of rewards so far
``ret <- gamma * ret + r`` (reset to 0 where an episode ends), tracks the running variance of
``ret`` over all envs and steps, and divides each reward by its standard deviation (no mean is
subtracted: the sign of a reward carries meaning), then clips.

:class:`ReturnNormalizer` does that on a whole rollout at a time: the statistics merge the
rollout's returns first, then every reward of that rollout is divided by the same spread (the
wrappers divide step by step as the statistics move; over a rollout of thousands of steps the
difference is negligible). Its state is part of the learner's checkpoint.
"""
from __future__ import annotations

import torch

from seedpool.models.normalize import RunningNorm


class ReturnNormalizer:
    """``rollout -> rewards / std(discounted return)``, clipped to ``[-clip, clip]``."""

    def __init__(self, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.gamma, self.clip, self.eps = float(gamma), float(clip), float(eps)
        self.stats = RunningNorm(())
        self.ret: torch.Tensor | None = None
        """Each env's discounted return so far, float64 ``[B]`` (None before the first rollout)."""

    def __call__(self, rewards: torch.Tensor, done: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Normalised rewards ``[T, B]`` float32 for a rollout's ``rewards``, episode ends ``done``
        (terminated or truncated at that step) and ``valid`` steps (False: an ignored reset step,
        whose reward is not part of any episode)."""
        T, B = rewards.shape
        if self.ret is None or self.ret.shape[0] != B:
            self.ret = torch.zeros(B, dtype=torch.float64)
        r = rewards.detach().to("cpu", torch.float64)
        done, valid = done.detach().cpu(), valid.detach().cpu()
        seen = torch.empty(T, B, dtype=torch.float64)
        ret = self.ret
        for t in range(T):
            ret = torch.where(valid[t], ret * self.gamma + r[t], ret)
            seen[t] = ret
            ret = torch.where(done[t], torch.zeros_like(ret), ret)
        self.ret = ret
        self.stats.update(seen[valid])
        std = float((self.stats.var + self.eps).sqrt())
        return (rewards.float() / std).clamp(-self.clip, self.clip)

    def state_dict(self) -> dict:
        """The statistics and the envs' running returns."""
        return {"stats": self.stats.state_dict(), "ret": None if self.ret is None else self.ret.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.stats.load_state_dict(state["stats"])
        self.ret = None if state["ret"] is None else state["ret"].clone()
