"""The CNN trunks (--model.cnn nature|small) for every network that reads Atari frames.

"small" is the network of the first DQN paper (Mnih et al. 2013), also A3C's: two
convolutions (16 filters 8x8 stride 4, 32 filters 4x4 stride 2) and 256 hidden units;
"nature" (the default) is Mnih et al. 2015's three convolutions and 512 hidden units.
"""
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.models import ModelConfig, QModelConfig, make_policy, make_q_network
from seedpool.models.cnn import cnn_trunk
from seedpool.models.recurrent_q import RecurrentQModelConfig, make_recurrent_q_network

FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
ACTIONS = gym.spaces.Discrete(6)
SHAPES = {
    # conv weights [out, in, k, k] in order, then the hidden layer's [out, in]
    "nature": ([(32, 4, 8, 8), (64, 32, 4, 4), (64, 64, 3, 3)], (512, 64 * 7 * 7)),
    "small": ([(16, 4, 8, 8), (32, 16, 4, 4)], (256, 32 * 9 * 9)),
}


def conv_shapes(module: torch.nn.Module) -> list[tuple[int, ...]]:
    return [tuple(m.weight.shape) for m in module.modules() if isinstance(m, torch.nn.Conv2d)]


def linear_shapes(module: torch.nn.Module) -> list[tuple[int, ...]]:
    return [tuple(m.weight.shape) for m in module.modules() if isinstance(m, torch.nn.Linear)]


def frames(n: int) -> torch.Tensor:
    return torch.randint(0, 256, (n, *FRAMES.shape), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("cnn", ["nature", "small"])
def test_actor_critic_has_the_papers_layers_and_acts_on_frames(cnn):
    convs, hidden = SHAPES[cnn]
    policy = make_policy(FRAMES, ACTIONS, ModelConfig(cnn=cnn))
    assert conv_shapes(policy) == convs
    assert linear_shapes(policy) == [hidden, (6, hidden[0]), (1, hidden[0])]
    logits, values = policy(frames(5))
    assert logits.shape == (5, 6) and values.shape == (5,)
    assert torch.isfinite(logits).all() and torch.isfinite(values).all()


def test_small_trunk_costs_under_half_the_nature_trunks_multiply_adds():
    def macs(cnn: str) -> int:
        total, size = 0, 84
        for out, cin, k, _ in SHAPES[cnn][0]:
            stride = {8: 4, 4: 2, 3: 1}[k]
            size = (size - k) // stride + 1
            total += size * size * out * cin * k * k
        out, flat = SHAPES[cnn][1]
        return total + out * flat

    assert macs("small") < 0.4 * macs("nature")
    trunk, flat = cnn_trunk(FRAMES.shape, "small")
    assert flat == SHAPES["small"][1][1]  # the arithmetic above is of the trunk built


@pytest.mark.parametrize("cnn", ["nature", "small"])
def test_recurrent_policy_and_q_networks_take_the_same_trunks(cnn):
    convs, hidden = SHAPES[cnn]
    recurrent = make_policy(FRAMES, ACTIONS, ModelConfig(cnn=cnn, core="lstm", core_size=32))
    assert conv_shapes(recurrent) == convs and hidden in linear_shapes(recurrent)
    q = make_q_network(FRAMES, ACTIONS, QModelConfig(cnn=cnn, dueling=True))
    assert conv_shapes(q) == convs and hidden in linear_shapes(q)
    assert q(frames(3)).shape == (3, 6)
    r2d2 = make_recurrent_q_network(FRAMES, ACTIONS, RecurrentQModelConfig(cnn=cnn, core_size=32))
    assert conv_shapes(r2d2) == convs and hidden in linear_shapes(r2d2)


def test_unknown_trunk_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="nature.*small"):
        make_policy(FRAMES, ACTIONS, ModelConfig(cnn="resnet"))
    with pytest.raises(ValueError, match="nature.*small"):
        make_q_network(FRAMES, ACTIONS, QModelConfig(cnn="tiny"))


def test_ppo_trains_and_resumes_the_small_trunk_from_its_run_config(tmp_path):
    pytest.importorskip("ale_py", reason="Atari needs ale-py")
    from seedpool.trainers.ppo import ppo_defaults, train_ppo

    cfg = ppo_defaults("Pong-v5")
    cfg = dataclasses.replace(cfg, total_timesteps=128, num_envs=2, runs_dir=tmp_path, progress="off",
                              tensorboard=False, model=dataclasses.replace(cfg.model, cnn="small"),
                              ppo=dataclasses.replace(cfg.ppo, num_steps=32, num_minibatches=2, update_epochs=1))
    first = train_ppo(cfg)
    state = torch.load(first.run_dir / "checkpoint.pt", weights_only=True)
    assert tuple(state["model"]["trunk.0.weight"].shape) == (16, 4, 8, 8)
    assert "trunk.4.weight" not in state["model"]  # two convolutions
    resumed = train_ppo(dataclasses.replace(cfg, total_timesteps=256, resume=first.run_dir))
    assert resumed.step == 256
    # Evaluation rebuilds the network from the run's config.json (the default would not load).
    from seedpool.experiment.evaluate import load_run_policy

    policy = load_run_policy(first.run_dir, (FRAMES, ACTIONS))
    assert conv_shapes(policy) == SHAPES["small"][0]
