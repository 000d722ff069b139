"""DQN's learner (Mnih et al. 2015) with the Ape-X / Rainbow options: double Q, n-step
returns and prioritized replay (a dueling head is the network's: QModelConfig.dueling);
plus the exploration helpers acting needs.

:class:`DQNLearner` takes minibatches as a replay samples them, already reduced to one
transition per row (the n-step return and its discount are the replay's work)::

    batch = {"obs": [n, ...], "action": [n], "reward": [n], "discount": [n],
             "next_obs": [n, ...], "weights": [n], "indices": [n]}
    metrics, priorities = learner.update(batch, env_steps=k)   # a ReplayUpdate
    rb.update_priorities(batch["indices"], priorities)

``reward`` is ``sum_{i<m} gamma^i r_{t+i}``, ``discount`` is ``gamma^m`` (0 where the
episode terminated within the m steps) and ``next_obs`` is the observation m steps on; the
TD target is ``reward + discount * Q_target(next_obs, a*)`` with ``a*`` the online network's
argmax (double Q) or the target network's own (plain DQN).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seedpool.algos.gradient import Precision
from seedpool.algos.learner import GradientLearner, linear_decay, set_learning_rate
from seedpool.algos.replay_learner import ReplayUpdate
from seedpool.errors import ConfigError
from seedpool.models.flat import flatten_parameters
from seedpool.models.q import QNetwork


@dataclass
class QLearningConfig:
    """Q-learning and its replay: what DQN and Ape-X share (names and defaults as Stable-Baselines3's DQN where it has them)."""

    LIVE: ClassVar[tuple[str, ...]] = ("learning_rate", "target_network_frequency")
    """Fields the learner reads at every update: `Training.set_hyperparameters` may change them."""

    learning_rate: float = 1e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run (a steadier policy at the end)."""
    adam_eps: float = 1e-8
    """Adam epsilon (torch's default; Rainbow and Dopamine use 1.5e-4)."""
    gamma: float = 0.99
    """Discount factor; the replay folds it into each row's ``discount`` (gamma^m)."""
    buffer_size: int = 1_000_000
    """Replay capacity in transitions."""
    learning_starts: int = 100
    """Env steps collected before the first update."""
    minibatch_size: int = 32
    """Transitions sampled from the replay per gradient step (SB3 and CleanRL call it batch_size;
    here batch_size is only the engine's recv batch)."""
    target_network_frequency: int = 2500
    """Learner updates (gradient steps, not env steps) between target-network updates, as the
    Nature and Ape-X papers count. SB3 and CleanRL count env steps: their 10000 at one
    gradient step per 4 env steps is 2500 here."""
    tau: float = 1.0
    """Target update rate: target <- tau * online + (1 - tau) * target; 1.0 is a hard copy."""
    double_q: bool = False
    """Double DQN: the online network picks the next action, the target network values it."""
    n_step: int = 1
    """Steps per return (the replay computes the n-step return and gamma^n)."""
    prioritized: bool = False
    """Prioritized replay: sample by |TD error|^alpha and weight the loss by IS weights."""
    alpha: float = 0.6
    """Priority exponent (0: uniform sampling)."""
    beta0: float = 0.4
    """IS-weight exponent at the start; annealed linearly to 1 over the run (`ReplayLearner.beta`)."""
    max_grad_norm: float = 10.0
    """Clip the global gradient norm to this value."""
    loss: Literal["huber", "mse"] = "huber"
    """TD loss per row: Huber (smooth L1, delta 1) or squared error."""
    policy_average: int = 0
    """Time constant, in gradient steps, of a moving average of the online network's weights that
    the run keeps as its policy (what `seedpool eval`, the run's evaluations and videos use; acting
    and learning use the online network). 0: the policy is the online network itself."""


@dataclass
class DQNConfig(QLearningConfig):
    """DQN's hyperparameters: Q-learning and its replay, plus one epsilon schedule and the sync loop's pacing."""

    LIVE: ClassVar[tuple[str, ...]] = QLearningConfig.LIVE + (
        "exploration_initial_eps", "exploration_final_eps", "exploration_fraction")
    """Also the epsilon schedule, which DQN's sampler reads at every round."""

    utd_ratio: float = 0.25
    """Gradient steps (one minibatch each) per env step, summed over envs: how much it learns
    (SB3's train_freq 4 with gradient_steps 1 is 0.25; docs/training.md "Learning per env step")."""
    train_frequency: int = 4
    """Env steps (summed over envs, at least one per env) in each round the sampler hands the
    learner; the round's gradient steps are then utd_ratio x its env steps (fractions carry)."""
    exploration_fraction: float = 0.1
    """Share of the run over which epsilon falls from its initial to its final value."""
    exploration_initial_eps: float = 1.0
    """Epsilon of epsilon-greedy acting at the start of the run."""
    exploration_final_eps: float = 0.05
    """Epsilon after the exploration fraction of the run."""


POLICY_AVERAGE = "policy_average"
"""Checkpoint key of the averaged policy's weights (`QLearningConfig.policy_average`)."""

RENAMED_OPTIONS = {"batch_size": "minibatch_size"}
"""Old names of `QLearningConfig` options -> today's (still accepted, with a deprecation line)."""


def linear_schedule(start: float, end: float, fraction: float, progress: float) -> float:
    """``start`` at progress 0, linear to ``end`` at progress ``fraction``, then ``end``."""
    if fraction <= 0.0:
        return end
    return start + (end - start) * min(max(progress, 0.0) / fraction, 1.0)


def exploration_epsilon(cfg: DQNConfig, progress: float) -> float:
    """DQN's epsilon of epsilon-greedy acting at this fraction of the run."""
    return linear_schedule(cfg.exploration_initial_eps, cfg.exploration_final_eps, cfg.exploration_fraction,
                           progress)


def apex_epsilons(num_actors: int, eps: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X's fixed per-actor epsilons ``eps^(1 + alpha * i / (N - 1))``, i = 0..N-1 (N = 1: [eps])."""
    if num_actors < 1:
        raise ConfigError(f"num_actors must be >= 1, got {num_actors}")
    if num_actors == 1:
        return np.array([eps], dtype=np.float64)
    return eps ** (1.0 + alpha * np.arange(num_actors) / (num_actors - 1))


def epsilon_greedy(q_values: torch.Tensor, epsilon: float | torch.Tensor | np.ndarray,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Actions ``[B]``: per row, uniform with probability epsilon (a float or one per row), else argmax."""
    rows, num_actions = q_values.shape
    device = q_values.device
    greedy = q_values.argmax(dim=-1)
    # Both draws are made whatever epsilon is, so a generator's stream does not depend on it.
    explore = torch.rand(rows, generator=generator, device=device) < torch.as_tensor(
        epsilon, dtype=torch.float32, device=device)
    uniform = torch.randint(num_actions, (rows,), generator=generator, device=device)
    return torch.where(explore, uniform, greedy)


@torch.no_grad()
def td_targets(online: nn.Module, target: nn.Module, reward: torch.Tensor, discount: torch.Tensor,
               next_obs: torch.Tensor, double_q: bool) -> torch.Tensor:
    """``reward + discount * Q_target(next_obs, a*)``, a* from the online (double) or target network."""
    next_q = target(next_obs)
    if double_q:
        best = online(next_obs).argmax(dim=-1, keepdim=True)
        next_value = next_q.gather(-1, best).squeeze(-1)
    else:
        next_value = next_q.max(dim=-1).values
    # Where the episode ended, next_obs may be anything a replay left there (even NaN): 0 * NaN
    # is NaN, so those rows take no bootstrap at all rather than a zero-weighted one.
    return reward + torch.where(discount > 0, discount * next_value, torch.zeros_like(next_value))


def dqn_loss(online: nn.Module, target: nn.Module, batch: Mapping[str, torch.Tensor], double_q: bool,
             loss: str = "huber") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(IS-weighted mean TD loss, TD errors ``[n]`` detached, Q(s, a) ``[n]`` detached)."""
    y = td_targets(online, target, batch["reward"], batch["discount"], batch["next_obs"], double_q)
    q = online(batch["obs"]).gather(-1, batch["action"].unsqueeze(-1)).squeeze(-1)
    if loss == "huber":
        per_row = F.smooth_l1_loss(q, y, reduction="none")
    elif loss == "mse":
        per_row = F.mse_loss(q, y, reduction="none")
    else:
        raise ConfigError(f"loss must be 'huber' or 'mse', got {loss!r}")
    weights = batch.get("weights")
    weighted = per_row if weights is None else per_row * weights
    return weighted.mean(), (q - y).detach(), q.detach()


def _tensors(batch: Mapping[str, Any], device: torch.device) -> dict[str, torch.Tensor]:
    """The batch's arrays as tensors on the learner's device, in the dtypes the loss needs."""
    out = {k: torch.as_tensor(batch[k], device=device) for k in ("obs", "next_obs")}
    out["action"] = torch.as_tensor(batch["action"], device=device).long()
    for k in ("reward", "discount", "weights"):
        if batch.get(k) is not None:
            out[k] = torch.as_tensor(batch[k], device=device, dtype=torch.float32)
    return out


class TargetQLearner(GradientLearner):
    """What DQN's and R2D2's learners share: the Q network on the device as one flat tensor (so
    that Adam, clipping and the target update are one op each), its frozen target copy, Adam,
    and the target network in the checkpoint."""

    def __init__(self, model: nn.Module, name: str, learning_rate: float, adam_eps: float,
                 max_grad_norm: float | None, total_steps: int | None, device: str | torch.device,
                 precision: Precision) -> None:
        self.device = torch.device(device)
        model = model.to(self.device)
        self.params = flatten_parameters(model)
        self.target = copy.deepcopy(model)
        self.target_params = flatten_parameters(self.target).requires_grad_(False)
        for p in (self.target_params, *self.target.parameters()):
            p.grad = None  # the target network never takes a gradient
        self.target.requires_grad_(False)
        optimizer = torch.optim.Adam([self.params], lr=learning_rate, eps=adam_eps,
                                     fused=self.device.type in ("cpu", "cuda"))
        super().__init__(model, optimizer, total_steps, name=name, max_grad_norm=max_grad_norm, precision=precision)

    @torch.no_grad()
    def update_target(self, tau: float = 1.0) -> None:
        """target <- tau * online + (1 - tau) * target (a copy when tau is 1)."""
        if tau >= 1.0:
            self.target_params.copy_(self.params)
        else:
            self.target_params.lerp_(self.params, tau)

    def state_dict(self) -> dict:
        """Model, target network, optimizer and counters."""
        return {**super().state_dict(), "target": self.target.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        super().load_state_dict(state)
        self.target.load_state_dict(state["target"])


class DQNLearner(TargetQLearner):
    """DQN as a `MinibatchLearner`: ``update(batch)`` is one gradient step on one replay minibatch.

    It returns a `ReplayUpdate`: the metrics and the rows' |TD errors| before the step
    (float32 numpy ``[n]``) as their new priorities; the replay adds its own epsilon and
    exponent alpha.
    """

    def __init__(self, model: QNetwork, cfg: QLearningConfig, total_steps: int | None = None,
                 device: str | torch.device = "cpu", precision: Precision = "fp32") -> None:
        if not 0.0 < cfg.tau <= 1.0 or cfg.target_network_frequency < 1:
            raise ConfigError(f"need 0 < tau <= 1 and target_network_frequency >= 1, got tau={cfg.tau}, "
                              f"target_network_frequency={cfg.target_network_frequency}")
        if cfg.loss not in ("huber", "mse"):
            raise ConfigError(f"loss must be 'huber' or 'mse', got {cfg.loss!r}")
        if cfg.policy_average < 0:
            raise ConfigError(f"policy_average (gradient steps) must be >= 0, got {cfg.policy_average}")
        super().__init__(model, "DQN TD", cfg.learning_rate, cfg.adam_eps, cfg.max_grad_norm, total_steps, device,
                         precision)
        self.cfg = cfg
        self.average = self.average_params = None
        if cfg.policy_average:
            self.average = copy.deepcopy(self.model)
            self.average_params = flatten_parameters(self.average).requires_grad_(False)
            self.average_params.grad = None

    def update(self, batch: Mapping[str, Any], env_steps: int = 0) -> ReplayUpdate:
        """One gradient step on a replay minibatch; ``env_steps``: new env steps it accounts for
        (advances `progress`). Raises NonFiniteLossError before touching the parameters."""
        data = _tensors(batch, self.device)
        # Set at every step, so that a changed learning_rate (`Training.set_hyperparameters`) acts.
        set_learning_rate(self.optimizer, linear_decay(self.cfg.learning_rate, self.progress, self.cfg.anneal_lr))
        with self.gradient.autocast():
            loss, td_error, q = dqn_loss(self.model, self.target, data, self.cfg.double_q, self.cfg.loss)
        grad_norm = self.gradient(loss, self.version)
        self._advance(env_steps)
        if self.version % self.cfg.target_network_frequency == 0:
            self.update_target(self.cfg.tau)
        if self.average is not None:
            self.update_average()
        priorities = td_error.abs().float().cpu().numpy()
        metrics = {
            "losses/td_loss": float(loss.detach()),
            "losses/q_values": float(q.mean()),
            "losses/td_error_abs": float(priorities.mean()),
            "losses/grad_norm": float(grad_norm),
            **self.gradient.profile(),
        }
        return ReplayUpdate(metrics, priorities)

    @torch.no_grad()
    def update_average(self) -> None:
        """The policy's moving average: the mean of the weights so far for the first
        `policy_average` steps (no pull towards the initial ones), then an exponential average."""
        self.average_params.lerp_(self.params, 1.0 / min(self.version, self.cfg.policy_average))

    def state_dict(self) -> dict:
        """Model, target network, optimizer, counters, and the policy's average where kept."""
        state = super().state_dict()
        if self.average is not None:
            state[POLICY_AVERAGE] = self.average.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned (a checkpoint without an average starts one from the model)."""
        super().load_state_dict(state)
        if self.average is not None:
            self.average.load_state_dict(state.get(POLICY_AVERAGE, state["model"]))
