"""Ape-X DQN's acting side (Horgan et al. 2018): per-env exploration and the actors' own Q-values.

In Ape-X every actor explores with its own fixed epsilon ``eps^(1 + alpha * i / (N - 1))``
and computes the initial priority of what it sends from its own Q-values, so new data is
not all at the maximal priority. With central inference the "actors' network" is the
inference server's copy: `EpsilonGreedyAct` is its act function. It chooses per row with
the epsilon of the row's env slot and records, with each step, ``Q(s, a)`` of the action
taken and the greedy value ``max_a Q(s, a)`` (`ActOutput.aux`); `UnrollSteps` and the
n-step writer turn these into ``|R + discount * V(s') - Q(s, a)|`` at insertion.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from seedpool.algos.dqn import apex_epsilons, epsilon_greedy
from seedpool.records import ActOutput

AUX_SIZE = 2
"""Columns of the aux values `EpsilonGreedyAct` records: Q(s, a_taken), max_a Q(s, a)."""


@dataclass
class ApexConfig:
    """Ape-X's acting and pacing (the Q-learning itself is configured by QLearningConfig)."""

    epsilon: float = 0.4
    """Base epsilon of the per-env exploration rates eps^(1 + epsilon_alpha * i / (N - 1))."""
    epsilon_alpha: float = 7.0
    """Spread of the per-env exploration rates (env 0 explores most, env N-1 least)."""
    utd_ratio: float = 0.25
    """Gradient steps (one minibatch each) per env step, summed over envs: the learner's pace,
    held on any machine (acting waits for it). The old --apex.replay-ratio counted samples:
    replay_ratio / minibatch_size."""
    unroll_length: int = 32
    """Steps per unroll the inference server cuts (n-step rows are stitched across unrolls)."""
    unrolls_per_batch: int = 4
    """Unrolls the learner inserts at a time before its next gradient steps."""
    epsilon_groups: int = 4
    """Training returns are also logged per group of envs with neighbouring epsilons."""


class EpsilonGreedyAct:
    """The inference server's act function for a Q network: each env slot keeps its own epsilon."""

    def __init__(self, epsilons: np.ndarray, seed: int, device: str | torch.device = "cpu") -> None:
        self.epsilons = torch.as_tensor(np.asarray(epsilons, np.float32), device=device)
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, model: torch.nn.Module, obs: torch.Tensor, state, first: torch.Tensor,
                 slots: torch.Tensor) -> ActOutput:
        q = model(obs)
        actions = epsilon_greedy(q, self.epsilons[slots], self.generator)
        q_taken = q.gather(1, actions.unsqueeze(1)).squeeze(1)
        aux = torch.stack([q_taken, q.max(dim=1).values], dim=1)
        return ActOutput(actions=actions, logp=torch.zeros_like(q_taken), state=state, aux=aux)


def slot_epsilons(num_envs: int, cfg: ApexConfig) -> np.ndarray:
    """Each env slot's epsilon."""
    return apex_epsilons(num_envs, cfg.epsilon, cfg.epsilon_alpha)


def epsilon_group_names(epsilons: np.ndarray, groups: int) -> list[str]:
    """A label per slot: its group of neighbouring epsilons, named by the group's range."""
    groups = max(1, min(groups, len(epsilons)))
    bounds = np.array_split(np.arange(len(epsilons)), groups)
    names = [""] * len(epsilons)
    for idx in bounds:
        label = f"eps_{epsilons[idx].max():.3g}-{epsilons[idx].min():.3g}"
        for i in idx:
            names[i] = label
    return names
