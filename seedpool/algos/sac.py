"""Soft Actor-Critic (Haarnoja et al. 2018, with the automatic temperature of the second paper).

Twin critics trained toward ``r + gamma * (min_k Q'_k(s', a') - alpha * log pi(a'|s'))`` with
``a' ~ pi(.|s')``; the policy (a squashed Gaussian, `seedpool.models.continuous`) minimises
``alpha * log pi(a|s) - min_k Q_k(s, a)``; the temperature ``alpha = exp(log_alpha)`` is
tuned so that the policy's entropy stays near ``target_entropy`` (``-A`` by default, A the
action dimension): it grows when the entropy falls below the target and shrinks above it.
Log-probabilities are those of unit actions, so the target means the same on every task.

:class:`SACLearner` is a `MinibatchLearner`: ``update(batch)`` takes one critic step and,
every ``policy_frequency`` of them, as many actor (and temperature) steps, as CleanRL does;
the critics' targets follow by Polyak averaging. With ``policy_frequency`` 1 and
``joint_update`` (the defaults) both losses read the networks as they were before the step,
as in the SAC authors' implementation, and come from one pass over the minibatch; without it
the actor's loss reads the critics after their step (SB3's and CleanRL's order). The autograd
code here is the reference; by default the gradients are computed by hand
(`seedpool.kernels.sac_gradients`: the same as autograd's, with bf16 products under ``bf16``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

import seedpool.kernels as kernels
from seedpool.algos.gradient import GradientStep, Precision
from seedpool.algos.learner import set_learning_rate
from seedpool.algos.offpolicy import (
    ActorCriticLearner, OffPolicyConfig, adam, batch_tensors, check_config, critic_loss, frozen, merged_profile,
    td_target,
)
from seedpool.algos.replay_learner import ReplayUpdate
from seedpool.models.continuous import ContinuousAgent


@dataclass
class SACConfig(OffPolicyConfig):
    """SAC's hyperparameters (CleanRL's names and defaults, SB3's delay-free actor by default)."""

    LIVE: ClassVar[tuple[str, ...]] = ("policy_lr", "q_lr", "tau")
    """Fields the learner reads at every update: `Training.set_hyperparameters` may change them."""

    policy_lr: float = 3e-4
    """Adam learning rate of the actor (and of the temperature)."""
    q_lr: float = 1e-3
    """Adam learning rate of the critics."""
    policy_frequency: int = 1
    """Critic steps per round of actor steps; each round takes this many actor steps, so the
    actor keeps the critics' pace (CleanRL's 2; SB3's 1)."""
    joint_update: bool = True
    """With ``policy_frequency`` 1: compute the actor's loss on the critics as they were before
    this step's critic step, as the SAC authors' implementation does, so that both losses come
    from one pass over the minibatch (one actor forward over ``obs`` and ``next_obs``, one
    critic forward over the replayed and the policy's actions). False: the actor's loss reads
    the critics after their step (SB3's and CleanRL's order), two passes."""
    alpha: float = 0.2
    """Entropy temperature: the initial value with autotune, the fixed one without."""
    autotune: bool = True
    """Tune alpha toward the target entropy."""
    target_entropy: float | None = None
    """Entropy the temperature aims at, in nats of unit actions; None: minus the action dimension."""


def squashed_target(agent: ContinuousAgent, target_critic: torch.nn.Module, batch: Mapping[str, torch.Tensor],
                    alpha: torch.Tensor) -> torch.Tensor:
    """SAC's soft TD target ``r + discount * (min_k Q'_k(s', a') - alpha log pi(a'|s'))``, a' ~ pi."""
    with torch.no_grad():
        next_action, next_logp = agent.actor.sample(batch["next_obs"])
        next_q = target_critic(batch["next_obs"], next_action).min(dim=0).values
        return td_target(batch["reward"], batch["discount"], next_q - alpha * next_logp)


class SACLearner(ActorCriticLearner):
    """SAC as a `MinibatchLearner` (see the module docstring); priorities are left to the replay (None)."""

    def __init__(self, agent: ContinuousAgent, cfg: SACConfig, action_dim: int, total_steps: int | None = None,
                 device: str | torch.device = "cpu", precision: Precision = "fp32") -> None:
        check_config(cfg)
        if not agent.stochastic:
            raise ValueError("SAC needs a squashed-Gaussian actor: build the agent with stochastic=True")
        super().__init__(agent, "SAC", cfg.q_lr, cfg.policy_lr, cfg.max_grad_norm, total_steps, device, precision)
        self.log_alpha = torch.tensor(math.log(cfg.alpha), device=self.device, requires_grad=cfg.autotune)
        self.alpha_optimizer = adam(self.log_alpha, cfg.policy_lr, self.device)
        self.alpha_step = GradientStep(self.alpha_optimizer, None, "SAC temperature", precision)
        self.target_entropy = -float(action_dim) if cfg.target_entropy is None else float(cfg.target_entropy)
        self.cfg = cfg
        # The hand-written gradients, asked for once (None: autograd's, the reference above).
        self.by_hand = kernels.sac_gradients(self.model, self.target_critic.net, (td_target, critic_loss),
                                             self.device, precision) if cfg.hand_gradients else None

    @property
    def alpha(self) -> torch.Tensor:
        """The entropy temperature now (no gradient)."""
        return self.log_alpha.detach().exp()

    def update(self, batch: Mapping[str, Any], env_steps: int = 0) -> ReplayUpdate:
        """One critic step on a replay minibatch (and the actor's turn when due); raises
        NonFiniteLossError before touching the parameters of the network whose loss went bad."""
        data = batch_tensors(batch, self.device)
        data["obs"], data["next_obs"] = self.model.normalize(data["obs"]), self.model.normalize(data["next_obs"])
        # Set at every step, so that a changed rate (`Training.set_hyperparameters`) acts.
        set_learning_rate(self.optimizer, self.cfg.q_lr)
        set_learning_rate(self.actor_optimizer, self.cfg.policy_lr)
        set_learning_rate(self.alpha_optimizer, self.cfg.policy_lr)
        if self.cfg.joint_update and self.cfg.policy_frequency == 1:
            loss, q, grad_norm = self.joint_step(data, env_steps)
        else:
            loss, q, grad_norm = self.critic_step(data, env_steps)
            if self.version % self.cfg.policy_frequency == 0:
                for _ in range(self.cfg.policy_frequency):
                    self._actor_metrics = self.actor_update(data)
        if self.version % self.cfg.target_network_frequency == 0:
            self.target_critic.update(self.cfg.tau)
        metrics = {
            "losses/qf_loss": float(loss.detach()), "losses/qf_values": float(q.detach().mean()),
            "losses/qf_grad_norm": float(grad_norm), **self._actor_metrics,
            **merged_profile(self.gradient.profile(), self.actor_step.profile(), self.alpha_step.profile()),
        }
        return ReplayUpdate(metrics, None)

    def critic_step(self, data: dict[str, torch.Tensor], env_steps: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One critic step; returns ``(loss, q, gradient norm)``."""
        if self.by_hand is not None:
            started = time.perf_counter()
            self._flat_obs(data)
            loss, q = self.by_hand.critic(data, self.alpha)
            grad_norm = self.gradient.apply(loss, self.version, started)
        else:
            agent = self.model
            with self.gradient.autocast():
                y = squashed_target(agent, self.target_critic.net, data, self.alpha)
                q = agent.critic(data["obs"], data["action"])
                loss = critic_loss(q, y, data.get("weights"))
            grad_norm = self.gradient(loss, self.version)
        self._advance(env_steps)
        return loss, q, grad_norm

    def joint_step(self, data: dict[str, torch.Tensor], env_steps: int = 0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A critic step and an actor step (and a temperature step with autotune) whose losses
        both read the networks as they are now (``joint_update``); returns the critics' ``(loss,
        q, gradient norm)``."""
        alpha = self.alpha
        if self.by_hand is not None:
            started = time.perf_counter()
            self._flat_obs(data)
            loss, q, actor_loss, logp = self.by_hand.joint(data, alpha)
            grad_norm = self.gradient.apply(loss, self.version, started)
            self.actor_step.apply(actor_loss, self.version, time.perf_counter())
        else:
            agent, n = self.model, data["obs"].shape[0]
            with self.gradient.autocast():
                action, all_logp = agent.actor.sample(torch.cat([data["next_obs"], data["obs"]]))
                with torch.no_grad():
                    next_q = self.target_critic.net(data["next_obs"], action[:n]).min(dim=0).values
                    y = td_target(data["reward"], data["discount"], next_q - alpha * all_logp[:n])
                q = agent.critic(data["obs"], data["action"])
                loss = critic_loss(q, y, data.get("weights"))
                logp = all_logp[n:]
                with frozen(agent.critic):
                    actor_loss = (alpha * logp - agent.critic(data["obs"], action[n:]).min(dim=0).values).mean()
            # The actor's backward reads the critics' weights: it goes before their step.
            self.actor_step(actor_loss, self.version)
            grad_norm = self.gradient(loss, self.version)
        self._advance(env_steps)
        self._actor_metrics = self._temperature_step(alpha, actor_loss, logp)
        return loss, q, grad_norm

    def actor_update(self, data: Mapping[str, torch.Tensor]) -> dict[str, float]:
        """One actor step (and one temperature step with autotune) on these observations."""
        agent = self.model
        alpha = self.alpha
        if self.by_hand is not None:
            started = time.perf_counter()
            actor_loss, logp = self.by_hand.actor(data["obs"], alpha)
            self.actor_step.apply(actor_loss, self.version, started)
        else:
            with self.actor_step.autocast(), frozen(agent.critic):
                action, logp = agent.actor.sample(data["obs"])
                q = agent.critic(data["obs"], action).min(dim=0).values
                actor_loss = (alpha * logp - q).mean()
            self.actor_step(actor_loss, self.version)
        return self._temperature_step(alpha, actor_loss, logp)

    def _temperature_step(self, alpha: torch.Tensor, actor_loss: torch.Tensor, logp: torch.Tensor) -> dict[str, float]:
        """The temperature's step with autotune, after an actor step; returns the actor's metrics."""
        metrics = {"losses/actor_loss": float(actor_loss.detach()), "losses/alpha": float(alpha),
                   "losses/entropy": float(-logp.detach().mean())}
        if self.cfg.autotune:
            if self.by_hand is not None:  # d loss / d log_alpha = -mean(log pi + target entropy)
                started = time.perf_counter()
                gap = logp.detach().mean() + self.target_entropy
                alpha_loss = -(self.log_alpha.detach() * gap)
                self.log_alpha.grad = -gap
                self.alpha_step.apply(alpha_loss, self.version, started)
            else:
                alpha_loss = self.temperature_loss(logp.detach())
                self.alpha_step(alpha_loss, self.version)
            metrics["losses/alpha_loss"] = float(alpha_loss.detach())
        return metrics

    @staticmethod
    def _flat_obs(data: dict[str, torch.Tensor]) -> None:
        """The observations as the hand-written gradients read them: flat float32 rows."""
        data["obs"], data["next_obs"] = data["obs"].flatten(1).float(), data["next_obs"].flatten(1).float()

    def temperature_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """``-log_alpha * (log pi + target_entropy)``: its gradient raises alpha while the entropy
        (``-log pi``) is below the target and lowers it above."""
        return -(self.log_alpha * (logp + self.target_entropy)).mean()

    def state_dict(self) -> dict:
        """Agent (actor, critics), target critics, the three optimizers, temperature and counters."""
        return {"model": self.model.state_dict(),
                "optimizer": {"critic": self.optimizer.state_dict(), "actor": self.actor_optimizer.state_dict(),
                              "alpha": self.alpha_optimizer.state_dict()},
                "version": self.version, "steps_trained": self.steps_trained,
                "target": self.target_critic.net.state_dict(), "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"]["critic"])
        self.actor_optimizer.load_state_dict(state["optimizer"]["actor"])
        self.alpha_optimizer.load_state_dict(state["optimizer"]["alpha"])
        self.target_critic.net.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.version = int(state["version"])
        self.steps_trained = int(state["steps_trained"])
