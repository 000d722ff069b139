"""R2D2 (Kapturowski et al. 2019): recurrent Q-learning from replayed sequences with stored state.

A minibatch is ``n`` sequences from `seedpool.replay.SequenceReplay` (``obs [n, L + 1]``,
``action``/``reward``/``terminated``/``mask [n, L]``, ``first [n, L + 1]``, the recurrent
``state`` entering ``obs[0]``). For each:

- **burn-in**: the online and target networks run the first ``burn_in`` steps from the
  stored state with no gradient, to warm a state that is stale (it was recorded by an older
  network); the loss is taken on steps ``burn_in .. L - 1`` only. A sequence that opens an
  episode (``first[0]``) starts from the exact state (zeros) and needs no warm-up: with
  ``learn_from_episode_start`` its first steps are learned too (the burn-in of every other
  sequence is still cut off from the gradient).
- **n-step targets with value rescaling**: ``y_t = h(sum_{i<m} gamma^i r_{t+i} + gamma^m
  h^-1(Q_target(o_{t+m}, a*)))``, ``m <= n`` cut at a termination (no bootstrap), at the end
  of the valid steps (an episode truncated there bootstraps from its final observation) or of
  the sequence; ``a*`` is the online network's argmax (double Q), ``h(x) = sign(x)(sqrt(|x| +
  1) - 1) + eps x``. The network learns ``h(Q)``.
- **priorities** ``eta max_t |td_t| + (1 - eta) mean_t |td_t|`` over the learned steps,
  back to the replay by `ReplayLearner`.

The pure functions (`value_rescale`, `inverse_value_rescale`, `nstep_targets`) are tested
against naive loops; `r2d2_loss` against a step-by-step computation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from seedpool.algos.dqn import TargetQLearner, apex_epsilons, epsilon_greedy
from seedpool.algos.gradient import Precision
from seedpool.algos.learner import linear_decay, set_learning_rate
from seedpool.algos.replay_learner import ReplayUpdate
from seedpool.errors import ConfigError
from seedpool.models.recurrent_q import RecurrentQNetwork
from seedpool.records import ActOutput
from seedpool.replay.sequence import sequence_priority


@dataclass
class R2D2Config:
    """R2D2's hyperparameters (the paper's defaults where they apply; CleanRL/SB3 names)."""

    learning_rate: float = 1e-4
    """Adam learning rate."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run."""
    adam_eps: float = 1e-3
    """Adam epsilon (the paper's 1e-3)."""
    gamma: float = 0.997
    """Discount factor."""
    n_step: int = 5
    """Steps per return before bootstrapping."""
    buffer_size: int = 100_000
    """Replay capacity in sequences."""
    learning_starts: int = 5_000
    """Sequences in the replay before the first update."""
    minibatch_size: int = 64
    """Sequences per gradient step."""
    sequence_length: int = 80
    """Steps per replayed sequence (burn-in included)."""
    overlap: int = 40
    """Steps consecutive sequences of an episode share."""
    burn_in: int = 40
    """Steps at each sequence's start that only warm the state (no loss, no gradient)."""
    learn_from_episode_start: bool = True
    """Sequences that open an episode start from the exact (zero) state: learn their first burn_in steps too."""
    target_network_frequency: int = 2500
    """Gradient steps between target-network copies."""
    double_q: bool = True
    """The online network picks the bootstrap action, the target network values it."""
    value_rescaling: bool = True
    """Learn h(Q) and use h^-1 on bootstrap values (off: plain n-step targets)."""
    rescale_eps: float = 1e-3
    """eps of h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x."""
    priority_eta: float = 0.9
    """Sequence priority eta * max|td| + (1 - eta) * mean|td|."""
    prioritized: bool = True
    """Prioritized sequence replay (else uniform)."""
    alpha: float = 0.9
    """Priority exponent."""
    beta0: float = 0.6
    """IS-weight exponent at the start, annealed to 1 over the run."""
    max_grad_norm: float = 40.0
    """Clip the global gradient norm to this value."""
    loss: Literal["mse", "huber"] = "mse"
    """Per-step loss on the TD error: 0.5 * td^2 (the paper's) or Huber."""
    utd_ratio: float = 1 / 2560
    """Gradient steps (one minibatch of sequences each) per env step, summed over envs. The old
    --r2d2.replay-ratio counted learned steps: replay_ratio / ((sequence_length - burn_in) x
    minibatch_size), so its 1 with 80-step sequences, burn-in 40 and 64 sequences is 1/2560."""
    unroll_length: int = 16
    """Env steps per env between learning rounds (each round inserts them, then learns)."""
    epsilon: float = 0.4
    """Base of Ape-X's per-env exploration rates eps^(1 + epsilon_alpha * i / (N - 1))."""
    epsilon_alpha: float = 7.0
    """Spread of the per-env exploration rates."""

    def check(self) -> None:
        """Raise ValueError for settings that cannot work together."""
        L = self.sequence_length
        if not 0 <= self.burn_in < L:
            raise ConfigError(f"burn_in must be in [0, sequence_length={L}), got {self.burn_in}")
        if not 0 <= self.overlap < L:
            raise ConfigError(f"overlap must be in [0, sequence_length={L}), got {self.overlap}")
        if self.n_step < 1 or not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"need n_step >= 1 and 0 <= gamma <= 1, got {self.n_step}, {self.gamma}")
        if self.target_network_frequency < 1 or self.rescale_eps <= 0:
            raise ConfigError("target_network_frequency must be >= 1 and rescale_eps > 0, got "
                              f"{self.target_network_frequency}, {self.rescale_eps}")


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inverse_value_rescale(y: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1), the exact inverse of h."""
    s = (torch.sqrt(1.0 + 4.0 * eps * (y.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(y) * (s * s - 1.0)


def nstep_targets(rewards: torch.Tensor, terminated: torch.Tensor, mask: torch.Tensor, boot_values: torch.Tensor,
                  gamma: float, n: int) -> torch.Tensor:
    """Raw n-step returns ``[L, B]`` of time-major sequences (rescaling is the caller's).

    ``G_t = sum_{i<m} gamma^i r_{t+i} + gamma^m boot_values[t + m]``, with ``m`` the steps
    until the first of: ``n`` steps, a termination (then no bootstrap), an invalid step
    (``mask`` False: the episode ended, bootstrapping from its final observation), the
    sequence's end (bootstrapping from ``obs[L]``). ``boot_values [L + 1, B]``: the value of
    each observation. Rows whose own step is invalid get a meaningless value.
    """
    L = rewards.shape[0]
    t = torch.arange(L, device=rewards.device).unsqueeze(1).expand_as(rewards)
    ret = torch.zeros_like(rewards)
    disc = torch.ones_like(rewards)
    active = torch.ones_like(mask)
    bootstrap = torch.ones_like(mask)
    boot_idx = t + 1
    for i in range(n):
        idx = t + i
        at = idx.clamp(max=L - 1)
        step = mask.gather(0, at) & (idx < L) & active
        ret = ret + torch.where(step, disc * rewards.gather(0, at), torch.zeros_like(ret))
        disc = torch.where(step, disc * gamma, disc)
        boot_idx = torch.where(step, idx + 1, boot_idx)
        ended = terminated.gather(0, at) & step
        bootstrap = bootstrap & ~ended
        active = step & ~ended
    boot = boot_values.gather(0, boot_idx)
    # A terminal bootstrap observation may hold anything (even NaN): no 0 * NaN.
    return ret + torch.where(bootstrap, disc * boot, torch.zeros_like(boot))


def _time_major(batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    out = {k: batch[k].transpose(0, 1) for k in ("obs", "action", "reward", "terminated", "mask", "first")}
    out["state"] = batch["state"]
    out["weights"] = batch.get("weights")
    return out


def online_q_values(model: RecurrentQNetwork, obs: torch.Tensor, state: dict, first: torch.Tensor, burn_in: int,
                    learn_rows: torch.Tensor | None) -> torch.Tensor:
    """Online Q ``[L + 1, B, A]`` from the stored state; the first ``burn_in`` steps carry no gradient
    except on ``learn_rows`` (sequences that open an episode, when they are learned from the start)."""
    if burn_in == 0:
        return model.sequence(obs, state, first, final_state=False)[0]
    if learn_rows is None or not bool(learn_rows.any()):
        with torch.no_grad():
            q_burn, state = model.sequence(obs[:burn_in], state, first[:burn_in])
    else:
        q_burn, state = model.sequence(obs[:burn_in], state, first[:burn_in])
        keep = learn_rows.unsqueeze(1)
        state = {k: torch.where(keep, v, v.detach()) for k, v in state.items()}
    q_rest, _ = model.sequence(obs[burn_in:], state, first[burn_in:], final_state=False)
    return torch.cat([q_burn, q_rest])


def r2d2_loss(online: RecurrentQNetwork, target: RecurrentQNetwork, batch: Mapping[str, torch.Tensor],
              cfg: R2D2Config) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(IS-weighted loss, TD errors ``[B, L]`` detached, learned-step mask ``[B, L]``, Q(s, a) ``[B, L]`` detached).

    Tensors are batch-major as the replay samples them; the loss of a sequence is the mean
    over its learned steps, the batch loss the IS-weighted mean over sequences.
    """
    b = _time_major(batch)
    L, burn = b["action"].shape[0], cfg.burn_in
    learn_rows = b["first"][0] if cfg.learn_from_episode_start else None
    q_online = online_q_values(online, b["obs"], b["state"], b["first"], burn, learn_rows)
    with torch.no_grad():
        q_target, _ = target.sequence(b["obs"], b["state"], b["first"], final_state=False)
        pick = q_online.detach() if cfg.double_q else q_target
        best = pick.argmax(dim=-1, keepdim=True)
        boot = q_target.gather(-1, best).squeeze(-1)  # [L + 1, B]
        if cfg.value_rescaling:
            boot = inverse_value_rescale(boot, cfg.rescale_eps)
        ret = nstep_targets(b["reward"], b["terminated"], b["mask"], boot, cfg.gamma, cfg.n_step)
        y = value_rescale(ret, cfg.rescale_eps) if cfg.value_rescaling else ret
    q = q_online[:L].gather(-1, b["action"].long().unsqueeze(-1)).squeeze(-1)  # [L, B]
    steps = torch.arange(L, device=q.device).unsqueeze(1)
    learned = b["mask"] & ((steps >= burn) | (learn_rows.unsqueeze(0) if learn_rows is not None else False))
    td = q - y
    per_step = 0.5 * td.square() if cfg.loss == "mse" else F.smooth_l1_loss(q, y, reduction="none")
    count = learned.sum(dim=0)
    per_seq = torch.where(learned, per_step, torch.zeros_like(per_step)).sum(dim=0) / count.clamp(min=1)
    weights = b["weights"]
    loss = (per_seq if weights is None else per_seq * weights).mean()
    return loss, td.detach().transpose(0, 1), learned.transpose(0, 1), q.detach().transpose(0, 1)


def _tensors(batch: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """The replay's arrays as tensors on the learner's device."""
    if "frames" in batch:  # deduplicated frame stacks: move the distinct frames, stack them on the device
        K = batch["obs"].shape[2]
        frames = torch.as_tensor(batch["frames"], device=device)
        obs = frames.unfold(1, K, 1).permute(0, 1, 4, 2, 3)  # [n, L + 1, K, H, W], a view
    else:
        obs = torch.as_tensor(batch["obs"], device=device)
    out: dict[str, Any] = {"obs": obs}
    out["action"] = torch.as_tensor(batch["action"], device=device).long()
    for k in ("terminated", "mask", "first"):
        out[k] = torch.as_tensor(batch[k], device=device, dtype=torch.bool)
    out["reward"] = torch.as_tensor(batch["reward"], device=device, dtype=torch.float32)
    out["state"] = {k: torch.as_tensor(v, device=device, dtype=torch.float32) for k, v in batch["state"].items()}
    out["weights"] = None if batch.get("weights") is None else torch.as_tensor(batch["weights"], device=device,
                                                                              dtype=torch.float32)
    return out


class R2D2Learner(TargetQLearner):
    """R2D2 as a `MinibatchLearner`: ``update(batch)`` is one gradient step on a minibatch of sequences.

    Returns a `ReplayUpdate` whose priorities are each sequence's mix of |TD errors| before the step.
    """

    def __init__(self, model: RecurrentQNetwork, cfg: R2D2Config, total_steps: int | None = None,
                 device: str | torch.device = "cpu", precision: Precision = "fp32") -> None:
        cfg.check()
        if cfg.loss not in ("mse", "huber"):
            raise ConfigError(f"loss must be 'mse' or 'huber', got {cfg.loss!r}")
        super().__init__(model, "R2D2 TD", cfg.learning_rate, cfg.adam_eps, cfg.max_grad_norm, total_steps, device,
                         precision)
        self.cfg = cfg

    def update(self, batch: Mapping[str, Any], env_steps: int = 0) -> ReplayUpdate:
        """One gradient step on a minibatch of sequences (raises NonFiniteLossError before touching parameters)."""
        data = _tensors(batch, self.device)
        if self.cfg.anneal_lr:
            set_learning_rate(self.optimizer, linear_decay(self.cfg.learning_rate, self.progress))
        with self.gradient.autocast():
            loss, td, learned, q = r2d2_loss(self.model, self.target, data, self.cfg)
        grad_norm = self.gradient(loss, self.version)
        self._advance(env_steps)
        if self.version % self.cfg.target_network_frequency == 0:
            self.update_target()
        td_abs, mask = td.abs().float().cpu().numpy(), learned.cpu().numpy()
        priorities = sequence_priority(td_abs, mask, self.cfg.priority_eta)
        learned_steps = max(int(mask.sum()), 1)
        metrics = {
            "losses/td_loss": float(loss.detach()),
            "losses/q_values": float(q.cpu().numpy()[mask].mean()) if mask.any() else 0.0,
            "losses/td_error_abs": float(td_abs[mask].sum() / learned_steps),
            "losses/grad_norm": float(grad_norm),
            **self.gradient.profile(),
        }
        return ReplayUpdate(metrics, priorities)


class RecurrentEpsilonGreedyAct:
    """Acting for R2D2: each env slot's own epsilon (Ape-X's), and the state entering each step as ``aux``.

    Its signature is the inference server's act function's, ``(model, obs, state, first,
    slots) -> ActOutput``; ``aux`` holds the state's parts concatenated ``[B, sum of widths]``,
    which `SequenceWriter` stores at each sequence's start.
    """

    def __init__(self, epsilons: np.ndarray, seed: int, device: str | torch.device = "cpu") -> None:
        self.epsilons = torch.as_tensor(np.asarray(epsilons, np.float32), device=device)
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, model: RecurrentQNetwork, obs: torch.Tensor, state: dict, first: torch.Tensor,
                 slots: torch.Tensor) -> ActOutput:
        entering = torch.cat([state[k] for k in model.state_sizes], dim=1)
        q, next_state = model.step(obs, state, first)
        actions = epsilon_greedy(q, self.epsilons[slots], self.generator)
        return ActOutput(actions=actions, logp=torch.zeros(len(actions), device=q.device), state=next_state,
                         aux=entering)


def r2d2_epsilons(num_envs: int, cfg: R2D2Config) -> np.ndarray:
    """Each env slot's epsilon, Ape-X's ``eps^(1 + alpha * i / (N - 1))``."""
    return apex_epsilons(num_envs, cfg.epsilon, cfg.epsilon_alpha)
