"""Recurrent actor-critics: a torso (MLP or Nature CNN), an LSTM or GRU core, policy and value heads.

A recurrent policy carries a state per env from one step to the next. Where an episode
starts (the first observation after a reset: after ``terminated`` or ``truncated``, the
engine's autoreset step, and the very first step of a run) the caller sets ``first`` for
that row, and the core resets the row's state to zeros *before* using it, in acting and
in learning alike. So a state handed in is always the state "entering" the observation,
and the same masks make a step-by-step pass and a whole-sequence pass compute the same
numbers (``tests/test_recurrent.py``).

The state is a dict of ``[B, H]`` float32 tensors (``{"h", "c"}`` for an LSTM, ``{"h"}`` for
a GRU): the shape `seedpool.records.State` names and the inference server's state slots keep.

Optionally the core also sees the previous action (one-hot for discrete actions) and the
previous reward; both are zero on a row that opens an episode.
"""
from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import torch
from torch import nn

from seedpool.errors import ConfigError
from seedpool.models.base import ActorCritic, float32, layer_init
from seedpool.models.distributions import CategoricalHead, GaussianHead, Params
from seedpool.models.normalize import RunningNorm

State = dict[str, torch.Tensor]
CoreKind = Literal["lstm", "gru"]

# The Q learners keep every parameter as a view into one flat buffer (`seedpool.models.flat`: one
# copy updates a target network, one norm clips the gradient). cuDNN then gathers the core's
# weights into its own chunk at each call and warns at the first; the copy is small beside the
# sequence's work, so the warning says nothing a user can act on.
warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")


class RecurrentCore(nn.Module):
    """An LSTM or GRU stepped through time, its state reset where ``first`` is set.

    A whole sequence runs as one fused ``nn.LSTM``/``nn.GRU`` call, however many episodes start
    inside it: each env's column is cut where its episodes start, and the pieces run side by
    side as the columns of one padded batch, each from its own start state (the carried one for
    the piece that opens the column, zeros after a reset). A call on the CPU costs about what
    its time steps do, nearly whatever the batch, so one call for a sequence with ten resets
    inside costs about what one without them does, where a call per stretch between resets
    cost ten (`benchmarks/results/recurrent_pieces.md`). (A `PackedSequence` would save the
    padding, but leaves oneDNN's fused kernel for one that measured far slower.)
    """

    def __init__(self, kind: CoreKind, input_size: int, hidden_size: int) -> None:
        super().__init__()
        if kind == "lstm":
            self.rnn: nn.Module = nn.LSTM(input_size, hidden_size)
        elif kind == "gru":
            self.rnn = nn.GRU(input_size, hidden_size)
        else:
            raise ConfigError(f"the recurrent core must be 'lstm' or 'gru', got {kind!r}")
        self.kind, self.hidden_size = kind, hidden_size
        # Orthogonal weights and zero biases, as CleanRL's LSTM agents initialise their cores.
        for name, p in self.rnn.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(p, 1.0)
            else:
                nn.init.zeros_(p)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The keys of this core's state dict."""
        return ("h", "c") if self.kind == "lstm" else ("h",)

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> State:
        """Zero state for ``batch`` rows."""
        return {k: torch.zeros(batch, self.hidden_size, device=device) for k in self.state_names}

    def _run(self, x: torch.Tensor, state: State, keep: torch.Tensor) -> tuple[torch.Tensor, State]:
        """``x [L, B, F]`` with no reset after its first step, from ``state`` masked by ``keep [B]``."""
        keep = keep.to(torch.float32).unsqueeze(-1)
        out, end = self._call(x, {k: v * keep for k, v in state.items()})
        # Under bf16 autocast the core computes in bfloat16; the carried state stays float32.
        return out, {k: v.float() for k, v in end.items()}

    def _call(self, x: torch.Tensor, start: State) -> tuple[torch.Tensor, State]:
        """One fused call over ``x [L, S, F]`` from ``start`` (no reset inside)."""
        if self.kind == "lstm":
            out, (h, c) = self.rnn(x, (start["h"][None], start["c"][None]))
            return out, {"h": h[0], "c": c[0]}
        out, h = self.rnn(x, start["h"][None])
        return out, {"h": h[0]}

    def step(self, x: torch.Tensor, state: State, first: torch.Tensor) -> tuple[torch.Tensor, State]:
        """One time step: ``x [B, F]``, the state entering it, ``first [B]`` -> (output ``[B, H]``, next state)."""
        out, state = self._run(x[None], state, ~first)
        return out[0], state

    def sequence(self, x: torch.Tensor, state: State, first: torch.Tensor, final_state: bool = True,
                 ) -> tuple[torch.Tensor, State | None]:
        """``x [T, B, F]`` from ``state`` with resets at ``first [T, B]`` -> (outputs ``[T, B, H]``,
        final state, or None unless ``final_state``: the learners' re-scoring passes do not need it)."""
        return self.run_pieces(x, state, first, Pieces.of(first), final_state)

    def run_pieces(self, x: torch.Tensor, state: State, first: torch.Tensor, pieces: Pieces | None,
                   final_state: bool) -> tuple[torch.Tensor, State | None]:
        """`sequence` with ``first``'s pieces already cut (``Pieces.of(first)``), so that cores
        reading the same sequence cut it once."""
        if pieces is None:
            out, end = self._run(x, state, ~first[0])
            return out, end if final_state else None
        T, B = first.shape
        start = {k: v.index_select(0, pieces.column) * pieces.carried for k, v in state.items()}
        xs = x.reshape(T * B, -1).index_select(0, pieces.rows).reshape(*pieces.shape, -1)
        out, end = self._call(xs, start)
        out = out.reshape(-1, out.shape[-1]).index_select(0, pieces.unpack).reshape(T, B, -1)
        if not final_state:
            return out, None
        # A column's last piece that is shorter than the call ran on past its end: its final state
        # comes from a call of its own, one per length (such a piece opens with a reset: zeros).
        for length, at in pieces.short_ends():
            _, short = self._call(xs[:length].index_select(1, at), {k: v.index_select(0, at) for k, v in start.items()})
            end = {k: v.index_copy(0, at, short[k]) for k, v in end.items()}
        return out, {k: v.index_select(0, pieces.last).float() for k, v in end.items()}


class Pieces:
    """A ``first [T, B]`` mask cut into pieces for one fused core call: each column cut where an
    episode starts (and at step 0); piece s is column s of the call's padded ``[L, S]`` inputs.
    Index tensors are on ``first``'s device:

    - ``column[s]``: the env column of piece s; ``carried [S, 1]``: 1 where the piece starts from
      its column's carried state (it opens the column, and the column's first step is not a
      reset), else 0 (it starts after a reset, from zeros);
    - ``rows [L * S]``: the row of the flattened ``[T * B]`` inputs at each step of each piece
      (past a piece's end: row 0, whose outputs there are never read and cannot reach the
      piece's own steps, an RNN being causal); ``shape``: ``(L, S)``;
    - ``unpack``: for each ``[T * B]`` row, its position in the flattened ``[L, S]`` outputs;
    - ``last[b]``: the piece that ends column b, whose final state is the column's.
    """

    @staticmethod
    def of(first: torch.Tensor) -> Pieces | None:
        """The pieces of ``first``, or None where no episode starts after step 0 (one plain call)."""
        if first.shape[0] == 1 or not bool(first[1:].any()):
            return None
        return Pieces(first)

    def __init__(self, first: torch.Tensor) -> None:
        mask = first.cpu().numpy()
        T, B = mask.shape
        starts = mask.T.copy()
        starts[:, 0] = True
        col, t0 = np.nonzero(starts)  # by column, then time
        ends_column = np.append(col[1:] != col[:-1], True)
        self._length = np.where(ends_column, T, np.append(t0[1:], T)) - t0
        steps = np.arange(self._length.max())[:, None]
        inside = steps < self._length[None, :]
        where = (t0[None, :] + steps) * B + col[None, :]
        unpack = np.empty(T * B, dtype=np.int64)
        unpack[where[inside]] = (steps * len(col) + np.arange(len(col))[None, :])[inside]
        self._last = np.flatnonzero(ends_column)
        self.shape = inside.shape
        take = lambda a: torch.as_tensor(a, device=first.device)  # noqa: E731
        self.column, self.last, self.unpack = take(col), take(self._last), take(unpack)
        self.rows = take(np.where(inside, where, 0).ravel())
        self.carried = take((t0 == 0) & ~mask[0, col]).to(torch.float32).unsqueeze(-1)
        self._take = take

    def short_ends(self) -> list[tuple[int, torch.Tensor]]:
        """(length, pieces) for the columns' last pieces shorter than the call, by length."""
        last = self._last[self._length[self._last] < self.shape[0]]
        return [(int(n), self._take(last[self._length[last] == n])) for n in np.unique(self._length[last])]


class RecurrentActorCritic(ActorCritic):
    """torso -> [previous action, previous reward] -> LSTM/GRU core -> policy and value heads.

    Acting calls :meth:`act_step` once per step with the state entering it; learning calls
    :meth:`evaluate_sequence` over whole time-major sequences from the state stored at their
    start. ``forward(obs)`` (no state) is refused: a recurrent policy needs its state.
    """

    recurrent = True

    def __init__(self, torso: nn.Module, feature_dim: int, core: CoreKind, core_size: int, action_dim: int,
                 continuous: bool, prev_action: bool = False, prev_reward: bool = False,
                 init_log_std: float = 0.0, critic_core: bool = False) -> None:
        super().__init__()
        self.torso = torso
        self.continuous, self.action_dim = continuous, action_dim
        self.prev_action, self.prev_reward = prev_action, prev_reward
        extra = (action_dim if prev_action else 0) + (1 if prev_reward else 0)
        self.core = RecurrentCore(core, feature_dim + extra, core_size)
        # A second core of its own for the value head: value errors then do not shape the policy's memory.
        self.vf_core = RecurrentCore(core, feature_dim + extra, core_size) if critic_core else None
        self.pi_head = layer_init(nn.Linear(core_size, action_dim), std=0.01)
        self.vf_head = layer_init(nn.Linear(core_size, 1), std=1.0)
        self.head = GaussianHead() if continuous else CategoricalHead()
        if continuous:
            self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> State:
        """Zero state for ``batch`` envs."""
        state = self.core.initial_state(batch, device)
        if self.vf_core is not None:
            state.update({"vf_" + k: v for k, v in self.vf_core.initial_state(batch, device).items()})
        return state

    def _cores(self, x: torch.Tensor, state: State, first: torch.Tensor, whole: bool, final_state: bool = True,
               ) -> tuple[torch.Tensor, torch.Tensor, State | None]:
        """Policy and value features from the core(s): one step (``whole`` False) or a sequence
        (whose final state is None unless ``final_state``)."""
        if whole:
            pieces = Pieces.of(first)  # cut once for both cores
            run = lambda core, st: core.run_pieces(x, st, first, pieces, final_state)  # noqa: E731
        else:
            run = lambda core, st: core.step(x, st, first)  # noqa: E731
        pi_state = {k: state[k] for k in self.core.state_names}
        pi_hidden, next_state = run(self.core, pi_state)
        if self.vf_core is None:
            return pi_hidden, pi_hidden, next_state
        vf_hidden, vf_state = run(self.vf_core, {k: state["vf_" + k] for k in self.vf_core.state_names})
        if next_state is None:
            return pi_hidden, vf_hidden, None
        return pi_hidden, vf_hidden, {**next_state, **{"vf_" + k: v for k, v in vf_state.items()}}

    def forward(self, obs: torch.Tensor) -> tuple[Params, torch.Tensor]:
        raise TypeError("a recurrent policy needs its state: call act_step(obs, state, first, ...) or "
                        "evaluate_sequence(...), not forward(obs)")

    def observe(self, obs: torch.Tensor) -> None:
        """Merge observations into the torso's running statistics, where it keeps them (the
        learners call this after each update, as for the feed-forward MLP policy)."""
        observe = getattr(self.torso, "observe", None)
        if observe is not None:
            observe(obs)

    def _core_inputs(self, features: torch.Tensor, first: torch.Tensor, prev_action: torch.Tensor | None,
                     prev_reward: torch.Tensor | None) -> torch.Tensor:
        """Features ``[N, F]`` joined with the previous action and reward (zero on first rows)."""
        if not (self.prev_action or self.prev_reward):
            return features
        keep = (~first).to(features.dtype).unsqueeze(-1)
        parts = [features]
        if self.prev_action:
            if prev_action is None:
                raise ValueError("this policy takes the previous action as input (prev_action=True); none was given")
            if self.continuous:
                a = prev_action.to(features.dtype).reshape(len(features), -1)
            else:
                a = nn.functional.one_hot(prev_action.long().reshape(-1), self.action_dim).to(features.dtype)
            parts.append(a * keep)
        if self.prev_reward:
            if prev_reward is None:
                raise ValueError("this policy takes the previous reward as input (prev_reward=True); none was given")
            parts.append(prev_reward.to(features.dtype).reshape(-1, 1) * keep)
        return torch.cat(parts, dim=-1)

    def _outputs(self, pi_hidden: torch.Tensor, vf_hidden: torch.Tensor) -> tuple[Params, torch.Tensor]:
        out = self.pi_head(pi_hidden)
        value = self.vf_head(vf_hidden).squeeze(-1)
        if self.continuous:
            return (out, self.log_std.expand_as(out)), value
        return out, value

    def step(self, obs: torch.Tensor, state: State, first: torch.Tensor, prev_action: torch.Tensor | None = None,
             prev_reward: torch.Tensor | None = None) -> tuple[Params, torch.Tensor, State]:
        """One step of ``B`` envs: (distribution params, values ``[B]``, the state entering the next step)."""
        x = self._core_inputs(self.torso(obs), first, prev_action, prev_reward)
        pi_hidden, vf_hidden, state = self._cores(x, state, first, whole=False)
        params, value = self._outputs(pi_hidden, vf_hidden)
        return params, value, state

    def sequence(self, obs: torch.Tensor, state: State, first: torch.Tensor,
                 prev_actions: torch.Tensor | None = None, prev_rewards: torch.Tensor | None = None,
                 final_state: bool = True) -> tuple[Params, torch.Tensor, State | None]:
        """``T`` steps of ``B`` envs, time-major: params and values ``[T, B, ...]``, and the final
        state (None unless ``final_state``: re-scoring stored sequences does not need it).

        The torso runs once on all ``T x B`` observations; only the core steps through time.
        """
        T, B = first.shape
        flat_first = first.reshape(T * B)
        flat = lambda a: None if a is None else a.reshape(T * B, *a.shape[2:])  # noqa: E731
        features = self.torso(obs.reshape(T * B, *obs.shape[2:]))
        x = self._core_inputs(features, flat_first, flat(prev_actions), flat(prev_rewards))
        pi_hidden, vf_hidden, state = self._cores(x.reshape(T, B, -1), state, first, whole=True,
                                                  final_state=final_state)
        params, value = self._outputs(pi_hidden, vf_hidden)
        return params, value, state

    def act_step(self, obs: torch.Tensor, state: State, first: torch.Tensor, prev_action: torch.Tensor | None = None,
                 prev_reward: torch.Tensor | None = None, deterministic: bool = False,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        """Sample actions; returns ``(action, logprob, value, next state)``."""
        params, value, state = self.step(obs, state, first, prev_action, prev_reward)
        params, value = float32((params, value))
        action, logprob = self.head.sample_log_prob(params, deterministic)
        return action, logprob, value, state

    def evaluate_sequence(self, obs: torch.Tensor, actions: torch.Tensor, state: State, first: torch.Tensor,
                          prev_actions: torch.Tensor | None = None, prev_rewards: torch.Tensor | None = None,
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Re-score stored actions of whole sequences: ``(logprob, entropy, value)``, each ``[T, B]``."""
        params, value, _ = self.sequence(obs, state, first, prev_actions, prev_rewards, final_state=False)
        params, value = float32((params, value))
        logprob, entropy = self.head.log_prob_entropy(params, actions)
        return logprob, entropy, value


class MLPTorso(nn.Module):
    """Linear + activation layers over flattened vector observations, optionally standardised
    first by running statistics (``obs_norm``, as the feed-forward MLP policy's)."""

    def __init__(self, obs_dim: int, hidden: tuple[int, ...], activation: str, obs_norm: bool = False) -> None:
        super().__init__()
        from seedpool.models.mlp import _ACTIVATIONS, _stack

        if activation not in _ACTIVATIONS:
            raise ConfigError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.obs_norm = RunningNorm((obs_dim,)) if obs_norm else None
        # No hidden layers: the core reads the observations themselves.
        self.net = _stack(obs_dim, hidden, activation)
        self.out_dim = hidden[-1] if hidden else obs_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.flatten(1).float()
        return self.net(x if self.obs_norm is None else self.obs_norm(x))

    def observe(self, obs: torch.Tensor) -> None:
        """Merge observations ``[..., *obs_shape]`` into the running statistics (no-op without them)."""
        if self.obs_norm is not None:
            self.obs_norm.update(obs.detach())


def is_recurrent(policy: nn.Module) -> bool:
    """True for a policy that carries state between steps (see :class:`RecurrentActorCritic`)."""
    return bool(getattr(policy, "recurrent", False))
