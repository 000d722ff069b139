"""Q networks: which one make_q_network picks, shapes, input dtypes, the dueling identity."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.models import (
    MinAtarQNetwork,
    MLPQNetwork,
    NatureCNNQNetwork,
    QModelConfig,
    make_q_network,
)

VECTOR = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
FRAMES = gym.spaces.Box(0, 255, (2, 44, 44), np.uint8)  # small frames: a fast orthogonal init
MINATAR = gym.spaces.Box(0, 1, (6, 10, 10), np.bool_)


def _batch(space: gym.spaces.Box, n: int = 5) -> torch.Tensor:
    space.seed(0)
    return torch.as_tensor(np.stack([space.sample() for _ in range(n)]))


@pytest.mark.parametrize("space, cls", [(VECTOR, MLPQNetwork), (FRAMES, NatureCNNQNetwork),
                                        (MINATAR, MinAtarQNetwork)])
@pytest.mark.parametrize("dueling", [False, True])
def test_auto_picks_by_observation_and_outputs_one_q_per_action(space, cls, dueling):
    torch.manual_seed(0)
    net = make_q_network(space, gym.spaces.Discrete(7), QModelConfig(dueling=dueling))
    assert type(net) is cls and net.num_actions == 7 and net.dueling == dueling
    q = net(_batch(space))
    assert q.shape == (5, 7) and q.dtype == torch.float32 and torch.isfinite(q).all()


def test_minatar_network_is_the_papers():
    net = make_q_network(MINATAR, gym.spaces.Discrete(4), QModelConfig())
    conv = net.torso[0]
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride) == (6, 16, (3, 3), (1, 1))
    hidden, out = net.head.advantage[0][0], net.head.advantage[1]
    assert (hidden.in_features, hidden.out_features, out.out_features) == (16 * 8 * 8, 128, 4)


@pytest.mark.parametrize("space", [VECTOR, FRAMES, MINATAR])
def test_dueling_q_is_value_plus_zero_mean_advantage(space):
    torch.manual_seed(1)
    net = make_q_network(space, gym.spaces.Discrete(5), QModelConfig(dueling=True))
    obs = _batch(space, 3)
    features = net.features(obs)
    value = net.head.value(features).squeeze(-1)
    q = net(obs)
    # mean_a Q(s, a) = V(s) exactly when the advantages are centred.
    torch.testing.assert_close(q.mean(-1), value)
    assert not torch.allclose(q, q[:, :1].expand_as(q))  # the actions still differ


def test_bool_and_uint8_grids_give_the_same_q_as_floats():
    torch.manual_seed(2)
    net = make_q_network(MINATAR, gym.spaces.Discrete(3), QModelConfig())
    grid = _batch(MINATAR, 4)
    assert grid.dtype == torch.bool
    torch.testing.assert_close(net(grid), net(grid.float()))
    torch.testing.assert_close(net(grid.to(torch.uint8)), net(grid.float()))


def test_nature_cnn_on_atari_frames_scales_pixels_inside():
    torch.manual_seed(3)
    net = make_q_network(ATARI, gym.spaces.Discrete(3), QModelConfig())
    assert net.head.advantage[0][0].in_features == 64 * 7 * 7
    frames = _batch(ATARI, 2)
    assert frames.dtype == torch.uint8
    torch.testing.assert_close(net(frames), net(frames.float()))
    torch.testing.assert_close(net.features(frames), net.torso(frames.float() / 255.0), rtol=1e-5, atol=1e-6)


def test_mlp_hidden_sizes_and_bool_vectors():
    net = make_q_network(gym.spaces.Box(0, 1, (3, 2), np.bool_), gym.spaces.Discrete(2),
                         QModelConfig(hidden_sizes=(256, 256)))
    assert type(net) is MLPQNetwork
    widths = [m.out_features for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert widths == [256, 256, 2]
    assert net(torch.ones(4, 3, 2, dtype=torch.bool)).shape == (4, 2)


def test_only_discrete_actions():
    with pytest.raises(ValueError, match="Discrete action space"):
        make_q_network(VECTOR, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), QModelConfig())


def test_requested_network_that_cannot_fit_is_refused():
    with pytest.raises(ValueError, match="minatar_cnn"):
        make_q_network(gym.spaces.Box(0, 255, (4, 10, 10), np.uint8), gym.spaces.Discrete(3),
                       QModelConfig(kind="cnn"))
    with pytest.raises(ValueError, match=r"\[C, H, W\]"):
        make_q_network(VECTOR, gym.spaces.Discrete(3), QModelConfig(kind="minatar_cnn"))
    with pytest.raises(ValueError, match="Box observation"):
        make_q_network(gym.spaces.Discrete(3), gym.spaces.Discrete(3), QModelConfig())


@pytest.mark.parametrize("dueling", [False, True])
def test_layer_norm_normalises_every_hidden_layer_of_the_mlp(dueling):
    torch.manual_seed(0)
    net = make_q_network(VECTOR, gym.spaces.Discrete(3), QModelConfig(hidden_sizes=(32, 16), dueling=dueling,
                                                                      layer_norm=True))
    norms = [m for m in net.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert [n.normalized_shape for n in norms] == [(32,), (16,)] + ([(16,)] if dueling else [])
    # Scaling the input of a hidden layer does not change its output: each layer is normalised.
    first = net.torso[0]
    x = _batch(VECTOR)
    q = net(x)
    with torch.no_grad():
        first.weight.mul_(7.0)
        first.bias.mul_(7.0)
    torch.testing.assert_close(net(x), q, atol=1e-4, rtol=1e-4)
    assert q.shape == (5, 3)


def test_layer_norm_is_refused_for_the_cnns():
    with pytest.raises(ValueError, match="MLP Q network only"):
        make_q_network(MINATAR, gym.spaces.Discrete(3), QModelConfig(layer_norm=True))
