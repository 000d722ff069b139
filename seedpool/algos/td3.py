"""TD3 (Fujimoto et al. 2018), and DDPG (Lillicrap et al. 2016) as its special case by options.

Critics are trained toward ``r + gamma * min_k Q'_k(s', clip(mu'(s') + clip(eps, -c, c), -1, 1))``
with ``eps ~ N(0, policy_noise^2)``: target policy smoothing. The actor (deterministic, unit
actions) maximises ``Q_1(s, mu(s))`` once every ``policy_frequency`` critic steps (delayed
policy updates), and the target actor and critics follow by Polyak averaging at that moment.
Acting adds ``N(0, exploration_noise^2)`` to the actor's unit action (`exploration_actions`).

DDPG is ``--td3.policy-noise 0 --td3.policy-frequency 1 --model.num-critics 1``: one critic,
no smoothing, an actor step after every critic step. The autograd code here is the reference;
by default the gradients are computed by hand (`seedpool.kernels.td3_gradients`: the same as
autograd's, with bf16 products under ``bf16``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

import seedpool.kernels as kernels
from seedpool.algos.gradient import Precision
from seedpool.algos.learner import set_learning_rate
from seedpool.algos.offpolicy import (
    ActorCriticLearner, OffPolicyConfig, PolyakTarget, batch_tensors, check_config, critic_loss, frozen,
    merged_profile, td_target,
)
from seedpool.algos.replay_learner import ReplayUpdate
from seedpool.errors import ConfigError
from seedpool.models.continuous import ContinuousAgent


@dataclass
class TD3Config(OffPolicyConfig):
    """TD3's hyperparameters (CleanRL's names and defaults)."""

    LIVE: ClassVar[tuple[str, ...]] = ("learning_rate", "tau", "policy_noise", "noise_clip",
                                       "exploration_noise")
    """Fields read at every update or action: `Training.set_hyperparameters` may change them."""

    learning_rate: float = 3e-4
    """Adam learning rate of the actor and the critics."""
    policy_noise: float = 0.2
    """Std of the target policy smoothing noise, in unit actions (0: none, as DDPG)."""
    noise_clip: float = 0.5
    """Smoothing noise is clipped to +-noise_clip."""
    exploration_noise: float = 0.1
    """Std of the Gaussian noise acting adds to the actor's unit action."""


def smoothed_actions(target_actor: torch.nn.Module, next_obs: torch.Tensor, policy_noise: float,
                     noise_clip: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """The target actor's unit actions plus clipped Gaussian noise, clipped to [-1, 1] (no gradient)."""
    with torch.no_grad():
        action = target_actor(next_obs)
        if policy_noise > 0:
            noise = torch.randn(action.shape, generator=generator, device=action.device) * policy_noise
            action = action + noise.clamp(-noise_clip, noise_clip)
        return action.clamp(-1.0, 1.0)


def exploration_actions(actions: torch.Tensor, noise: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Unit actions plus ``N(0, noise^2)``, clipped to [-1, 1] (TD3's and DDPG's acting)."""
    if noise <= 0:
        return actions
    return (actions + noise * torch.randn(actions.shape, generator=generator, device=actions.device)).clamp(-1.0, 1.0)


class TD3Learner(ActorCriticLearner):
    """TD3 (or DDPG) as a `MinibatchLearner`: one critic step per minibatch, the actor's when due."""

    def __init__(self, agent: ContinuousAgent, cfg: TD3Config, total_steps: int | None = None,
                 device: str | torch.device = "cpu", precision: Precision = "fp32") -> None:
        check_config(cfg)
        if agent.stochastic:
            raise ValueError("TD3 and DDPG need a deterministic actor: build the agent with stochastic=False")
        if cfg.policy_noise < 0 or cfg.noise_clip < 0:
            raise ConfigError(f"policy_noise and noise_clip must be >= 0, got {cfg.policy_noise}, {cfg.noise_clip}")
        super().__init__(agent, "TD3", cfg.learning_rate, cfg.learning_rate, cfg.max_grad_norm, total_steps, device,
                         precision)
        self.target_actor = PolyakTarget(self.model.actor, self.actor_params)
        self.cfg = cfg
        # The hand-written gradients, asked for once (None: autograd's, the reference above).
        self.by_hand = kernels.td3_gradients(self.model, self.target_critic.net, self._next_actions,
                                             (td_target, critic_loss), self.device, precision) \
            if cfg.hand_gradients else None

    def _next_actions(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The target actor's smoothed unit actions for the critics' target."""
        return smoothed_actions(self.target_actor.net, next_obs, self.cfg.policy_noise, self.cfg.noise_clip)

    def update(self, batch: Mapping[str, Any], env_steps: int = 0) -> ReplayUpdate:
        """One critic step on a replay minibatch; every ``policy_frequency`` steps an actor step and the
        Polyak update of both targets. Raises NonFiniteLossError before a bad step."""
        data = batch_tensors(batch, self.device)
        data["obs"], data["next_obs"] = self.model.normalize(data["obs"]), self.model.normalize(data["next_obs"])
        agent, cfg = self.model, self.cfg
        # Set at every step, so that a changed rate (`Training.set_hyperparameters`) acts.
        set_learning_rate(self.optimizer, cfg.learning_rate)
        set_learning_rate(self.actor_optimizer, cfg.learning_rate)
        if self.by_hand is not None:
            started = time.perf_counter()
            data["obs"], data["next_obs"] = data["obs"].flatten(1).float(), data["next_obs"].flatten(1).float()
            loss, q = self.by_hand.critic(data)
            grad_norm = self.gradient.apply(loss, self.version, started)
        else:
            with self.gradient.autocast():
                with torch.no_grad():
                    next_action = self._next_actions(data["next_obs"])
                    next_q = self.target_critic.net(data["next_obs"], next_action).min(dim=0).values
                    y = td_target(data["reward"], data["discount"], next_q)
                q = agent.critic(data["obs"], data["action"])
                loss = critic_loss(q, y, data.get("weights"))
            grad_norm = self.gradient(loss, self.version)
        self._advance(env_steps)
        if self.version % cfg.policy_frequency == 0:
            self._actor_metrics = self.actor_update(data["obs"])
        if self.version % (cfg.policy_frequency * cfg.target_network_frequency) == 0:
            self.target_critic.update(cfg.tau)
            self.target_actor.update(cfg.tau)
        metrics = {"losses/qf_loss": float(loss.detach()), "losses/qf_values": float(q.detach().mean()),
                   "losses/qf_grad_norm": float(grad_norm), **self._actor_metrics,
                   **merged_profile(self.gradient.profile(), self.actor_step.profile())}
        return ReplayUpdate(metrics, None)

    def actor_update(self, obs: torch.Tensor) -> dict[str, float]:
        """One deterministic policy-gradient step: maximise the first critic's value of the actor's action."""
        agent = self.model
        if self.by_hand is not None:
            started = time.perf_counter()
            actor_loss = self.by_hand.actor(obs)
            self.actor_step.apply(actor_loss, self.version, started)
        else:
            with self.actor_step.autocast(), frozen(agent.critic):
                actor_loss = -agent.critic(obs, agent.actor(obs))[0].mean()
            self.actor_step(actor_loss, self.version)
        return {"losses/actor_loss": float(actor_loss.detach())}

    def state_dict(self) -> dict:
        """Agent, target actor and critics, both optimizers and counters."""
        return {"model": self.model.state_dict(),
                "optimizer": {"critic": self.optimizer.state_dict(), "actor": self.actor_optimizer.state_dict()},
                "version": self.version, "steps_trained": self.steps_trained,
                "target_critic": self.target_critic.net.state_dict(),
                "target_actor": self.target_actor.net.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"]["critic"])
        self.actor_optimizer.load_state_dict(state["optimizer"]["actor"])
        self.target_critic.net.load_state_dict(state["target_critic"])
        self.target_actor.net.load_state_dict(state["target_actor"])
        self.version = int(state["version"])
        self.steps_trained = int(state["steps_trained"])
