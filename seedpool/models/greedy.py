"""How a run's saved network is rebuilt and acts in evaluation: one `EvalPolicy` per kind of network.

Each trainer's entry in `seedpool.algorithms` names one of these, so evaluation asks the model,
not a list of algorithm names, how to act:

- `ACTOR_CRITIC`: PPO's and IMPALA's actor-critics act by their head (the mode with
  ``deterministic``, else a draw); a recurrent one steps its core (``act_step``).
- `Q_NETWORK`: DQN's and Ape-X's Q networks take the argmax (`GreedyQ`).
- `RECURRENT_Q`: R2D2's recurrent Q network takes the argmax with its state carried (`GreedyRecurrentQ`).
- `SQUASHED_GAUSSIAN_ACTOR` / `DETERMINISTIC_ACTOR`: SAC's actor (tanh of its mean with
  ``deterministic``, else a draw) and TD3's deterministic one, both in the action Box's bounds.

Every built module loads the checkpoint's ``model`` state with ``load_state_dict`` and has the
face `seedpool.actors.memory.PolicyMemory` and evaluation use: ``act(obs, deterministic)`` or,
for a recurrent one, ``initial_state`` and ``act_step``.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple

import gymnasium as gym
from torch import nn

from seedpool.models import ModelConfig, QModelConfig, make_policy, make_q_network
from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig
from seedpool.models.q import GreedyQ
from seedpool.models.recurrent_q import GreedyRecurrentQ, RecurrentQModelConfig, make_recurrent_q_network


class EvalPolicy(NamedTuple):
    """A kind of saved network: the model config class a run's config.json holds for it, and
    ``build(obs_space, action_space, model_config)`` -> the module that acts."""

    config: type
    build: Callable[[gym.Space, gym.Space, Any], nn.Module]


def _greedy_q(obs_space: gym.Space, action_space: gym.Space, cfg: QModelConfig) -> nn.Module:
    return GreedyQ(make_q_network(obs_space, action_space, cfg))


def _greedy_recurrent_q(obs_space: gym.Space, action_space: gym.Space, cfg: RecurrentQModelConfig) -> nn.Module:
    return GreedyRecurrentQ(make_recurrent_q_network(obs_space, action_space, cfg))


ACTOR_CRITIC = EvalPolicy(ModelConfig, make_policy)
Q_NETWORK = EvalPolicy(QModelConfig, _greedy_q)
RECURRENT_Q = EvalPolicy(RecurrentQModelConfig, _greedy_recurrent_q)
SQUASHED_GAUSSIAN_ACTOR = EvalPolicy(ContinuousModelConfig, partial(ContinuousAgent, stochastic=True))
DETERMINISTIC_ACTOR = EvalPolicy(ContinuousModelConfig, partial(ContinuousAgent, stochastic=False))
