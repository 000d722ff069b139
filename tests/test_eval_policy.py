"""`seedpool eval` asks each algorithm's registry entry how its saved network acts
(`seedpool.models.greedy.EvalPolicy`); experiment/evaluate.py names no algorithm."""
import dataclasses
import re
import typing
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from seedpool.algorithms import ACTOR_CRITIC_POLICY, TRAINERS, eval_policy_path, load
from seedpool.models.greedy import EvalPolicy

EVALUATE = Path(__file__).parent.parent / "seedpool" / "experiment" / "evaluate.py"
CARTPOLE = (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Box(-2.0, 2.0, (1,)))


def test_evaluate_names_no_algorithm():
    text = EVALUATE.read_text()
    named = [algo for algo in TRAINERS if re.search(rf"[\"']{algo}[\"']", text)]
    assert not named, f"evaluate.py names {named}"


@pytest.mark.parametrize("algo", sorted(TRAINERS))
def test_each_entrys_eval_policy_reads_the_model_config_its_trainer_writes(algo):
    kind = load(TRAINERS[algo].policy)
    assert isinstance(kind, EvalPolicy)
    train_config = load(TRAINERS[algo].config)
    assert typing.get_type_hints(train_config)["model"] is kind.config


@pytest.mark.parametrize("algo", sorted(TRAINERS))
def test_each_eval_policy_acts_in_the_action_space(algo):
    spaces = PENDULUM if algo in ("sac", "td3") else CARTPOLE
    kind = load(TRAINERS[algo].policy)
    cfg = kind.config()
    if algo == "r2d2":
        cfg = dataclasses.replace(cfg, core_size=8, hidden_sizes=(8,), head_sizes=(8,))
    policy = kind.build(*spaces, cfg).eval()
    obs = torch.zeros(3, spaces[0].shape[0])
    with torch.no_grad():
        if getattr(policy, "recurrent", False):
            action = policy.act_step(obs, policy.initial_state(3), torch.ones(3, dtype=torch.bool))[0]
        else:
            action = policy.act(obs, deterministic=True)[0]
    assert action.shape == (3, *spaces[1].shape)
    if isinstance(spaces[1], gym.spaces.Box):
        assert bool((action.abs() <= 2.0).all())


def test_q_networks_act_greedily():
    kind = load(TRAINERS["dqn"].policy)
    policy = kind.build(*CARTPOLE, kind.config(hidden_sizes=(8,)))
    obs = torch.randn(16, 4)
    assert torch.equal(policy.act(obs)[0], policy.q_net(obs).argmax(dim=1))


def test_a_run_of_an_unlisted_algorithm_is_read_as_an_actor_critic():
    assert eval_policy_path("a-trainer-of-ones-own") == ACTOR_CRITIC_POLICY == TRAINERS["ppo"].policy
