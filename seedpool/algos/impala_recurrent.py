"""Recurrent IMPALA/APPO: acting with per-env state on the inference server, learning through
time over whole unrolls from the state each unroll started with.

The inference server keeps each env's state (`seedpool.inference.StateSlots`) and cuts
unrolls that carry the state the policy was given at their first observation
(`Unrolls.start_state`). The learner re-runs the policy over each unroll's ``T + 1``
observations (the last one is V-trace's bootstrap) from that state, resetting it where
``first`` marks an episode start, exactly as it acted; V-trace and the IMPALA/APPO
objectives (`seedpool.algos.impala`) then take the log-probs and values as they come.
Minibatches are whole unrolls (the batch's columns), never shuffled steps.
"""
from __future__ import annotations

import numpy as np
import torch

from seedpool.models.base import float32
from seedpool.records import ActOutput, State, Unrolls

STATE_PREFIX = "state/"
"""Batch keys holding the start state (``state/h``, ``state/c``): tensors ``[B, ...]``, unroll axis 0."""


def recurrent_policy_act(model: torch.nn.Module, obs: torch.Tensor, state: State, first: torch.Tensor,
                         slots: torch.Tensor | None = None, prev_action: torch.Tensor | None = None,
                         prev_reward: torch.Tensor | None = None) -> ActOutput:
    """The inference server's act function for a recurrent actor-critic: sample, keep log-prob and next state
    (the previous action and reward come from a server built with ``prev_inputs=True``)."""
    action, logp, _, next_state = model.act_step(obs, state, first, prev_action, prev_reward)
    return ActOutput(actions=action, logp=logp, state=next_state)


def recurrent_tensors(u: Unrolls, device: torch.device) -> dict[str, torch.Tensor]:
    """The fields only a recurrent learner reads: ``first`` for all ``T + 1`` observations and the start state.

    The bootstrap observation opens an episode exactly when the observation before it was a
    final one (invalid): the same rule the server's buffers apply.
    """
    if u.start_state is None:
        raise ValueError("a recurrent policy learns from unrolls that carry their start state (Unrolls.start_state); "
                         "these came from a server that kept none: build the server with the policy's initial state")
    first = np.concatenate([u.first, ~u.valid[-1:]], axis=0)
    out = {"first": torch.from_numpy(np.ascontiguousarray(first)).to(device)}
    out.update({STATE_PREFIX + k: torch.from_numpy(np.ascontiguousarray(v)).to(device)
                for k, v in u.start_state.items()})
    if u.start_inputs is not None:
        # Observation t + 1's previous action and reward are step t's; obs[0]'s were recorded.
        prev_a = np.concatenate([u.start_inputs["prev_action"][None], u.actions], axis=0)
        prev_r = np.concatenate([u.start_inputs["prev_reward"][None], u.rewards], axis=0)
        out["prev_actions"] = torch.from_numpy(np.ascontiguousarray(prev_a)).to(device)
        out["prev_rewards"] = torch.from_numpy(np.ascontiguousarray(prev_r)).to(device)
    return out


def unroll_axis(key: str) -> int:
    """The axis of a batch tensor that indexes unrolls (the start state's is 0, the rest are time-major)."""
    return 0 if key.startswith(STATE_PREFIX) else 1


def evaluate_recurrent(model: torch.nn.Module, batch: dict[str, torch.Tensor], bootstrap: bool,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(target log-probs [T, B], entropies [T, B], values [T(+1), B]) from each unroll's start state."""
    obs, actions = batch["obs"], batch["actions"]
    T = actions.shape[0]
    steps = T + 1 if bootstrap else T
    state = {k[len(STATE_PREFIX):]: v for k, v in batch.items() if k.startswith(STATE_PREFIX)}
    prev_a, prev_r = batch.get("prev_actions"), batch.get("prev_rewards")
    params, values, _ = model.sequence(obs[:steps], state, batch["first"][:steps],
                                       None if prev_a is None else prev_a[:steps],
                                       None if prev_r is None else prev_r[:steps], final_state=False)
    params, values = float32((params, values))
    params_t = params[:T] if isinstance(params, torch.Tensor) else tuple(p[:T] for p in params)
    logp, entropy = model.head.log_prob_entropy(params_t, actions)
    return logp, entropy, values
