"""Does a bf16 PPO gradient point where the float32 one does, layer by layer, for a trained policy?

`benchmarks/precision.py` says how fast bf16 is; this says what it computes. A trained Atari
policy matters here: it sets its first layer so that the constant background sits at the
ReLU threshold, which a freshly initialised network does not. The script loads a PPO Pong
checkpoint, plays 32 steps of 8 envs with it (256 frames, the learner's minibatch), and takes
the PPO loss's gradient on them (the stored actions, log-probs and values; advantages and
returns drawn with a fixed seed) in float32 and in bf16:

- **bf16 as shipped**: `--precision bf16`, the first convolution's forward in float32 and its
  weight gradient in bf16 (`seedpool.models.base.scaled_trunk`);
- **bf16 everywhere**: the first convolution under autocast too (what seedpool did before);
- **SGD noise, for scale**: float32 gradients of the two halves of the batch, one against the other.

Each row is ``|g - g_fp32| / |g_fp32|`` per parameter tensor, and the share of the first
layer's ReLUs (over all frames and positions) on the other side of zero than in float32.

    .venv/bin/python benchmarks/precision_gradients.py RUN_DIR_OR_CHECKPOINT [--note TEXT]

writes benchmarks/results/precision_gradients.md.
"""
from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import seedpool
import seedpool.models.cnn as cnn
from seedpool.algos.ppo import PPOBatch, PPOConfig, ppo_loss
from seedpool.bench.report import machine_info, write_markdown
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.models import NatureCNNActorCritic
from seedpool.models.precision import autocast

OUT = Path(__file__).parent / "results" / "precision_gradients.md"


def first_conv(conv, obs, scale, memory_format):
    """The first convolution's pre-activations as `scaled_trunk` computes them, but left to
    whatever autocast is active (bf16 under it)."""
    x = obs.to(torch.float32, memory_format=memory_format)
    return F.conv2d(x, conv.weight * scale, conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups)


def trunk_all_bf16(trunk, obs, scale, memory_format):
    """`scaled_trunk` with its first convolution left to autocast."""
    return trunk[1:](first_conv(trunk[0], obs, scale, memory_format))


@contextlib.contextmanager
def first_conv_in_bf16():
    shipped = cnn.scaled_trunk
    cnn.scaled_trunk = trunk_all_bf16
    try:
        yield
    finally:
        cnn.scaled_trunk = shipped


def play(model: NatureCNNActorCritic, env_id: str, steps: int, envs: int, seed: int) -> PPOBatch:
    """``steps x envs`` frames the policy sees while playing, with what a rollout stores for them."""
    torch.manual_seed(seed)  # the policy samples its actions from torch's generator
    env = seedpool.make(env_id, num_envs=envs, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    obs, _ = env.reset()
    rows = []
    for _ in range(steps):
        frames = torch.as_tensor(obs)
        with torch.no_grad():
            action, logprob, value = model.act(frames)
        rows.append((frames.clone(), action, logprob, value))
        obs, *_ = env.step(action.numpy())
    env.close()
    frames, actions, logprobs, values = (torch.cat(column) for column in zip(*rows))
    n = len(frames)
    return PPOBatch(obs=frames, actions=actions, logprobs=logprobs, values=values,
                    advantages=torch.randn(n, generator=gen), returns=values + 0.3 * torch.randn(n, generator=gen))


def gradients(model, batch: PPOBatch, precision: str) -> dict[str, torch.Tensor]:
    model.zero_grad()
    with autocast(precision, "cpu"):
        loss, _ = ppo_loss(model, batch, PPOConfig(), clip_coef=0.1)
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def first_layer_preactivations(model, obs: torch.Tensor, precision: str) -> torch.Tensor:
    with torch.no_grad(), autocast(precision, "cpu"):
        return first_conv(model.trunk[0], obs, model.scale, model.memory_format).float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a PPO Atari run folder or its checkpoint.pt")
    parser.add_argument("--env", default="Pong-v5")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", default="")
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    path = a.checkpoint / "checkpoint.pt" if a.checkpoint.is_dir() else a.checkpoint
    checkpoint = load_checkpoint(path, "ppo")
    model = NatureCNNActorCritic((4, 84, 84), checkpoint["model"]["pi_head.bias"].numel())
    model.load_state_dict(checkpoint["model"])
    batch = play(model, a.env, 32, 8, a.seed)
    fp32 = gradients(model, batch, "fp32")
    shipped = gradients(model, batch, "bf16")
    with first_conv_in_bf16():
        everywhere = gradients(model, batch, "bf16")
    half = len(batch) // 2
    first, second = (gradients(model, batch.take(torch.arange(s, s + half)), "fp32") for s in (0, half))
    relu32 = first_layer_preactivations(model, batch.obs, "fp32") > 0
    pre16 = first_layer_preactivations(model, batch.obs, "bf16") > 0

    def error(g: dict[str, torch.Tensor], name: str, ref: dict[str, torch.Tensor] = fp32) -> str:
        return f"{float((g[name] - ref[name]).norm() / fp32[name].norm()):.3f}"

    counters = checkpoint.get("counters", {})
    recent = counters.get("recent_returns") or []
    lines = [
        f"# bf16 against float32 PPO gradients, layer by layer, on a trained {a.env} policy",
        "",
        *[f"- **{k}:** {v}" for k, v in machine_info().items() if k in ("date", "machine", "python", "seedpool", "torch")],
        f"- **checkpoint:** `{path}` at {counters.get('step', 0):,} env steps"
        + (f", mean of its last {len(recent)} games {np.mean(recent):.1f}" if recent else ""),
        f"- **batch:** {len(batch)} frames the policy saw playing {a.env} (8 envs x 32 steps, seed {a.seed}); "
        "PPO loss with clip 0.1, the stored actions, log-probs and values, advantages and returns drawn with a fixed seed",
        f"- **first-layer ReLUs flipped by bf16 everywhere:** {float((pre16 != relu32).float().mean()):.2%} "
        "of all frames x channels x positions",
        *([f"- **note:** {a.note}"] if a.note else []),
        "",
        "| parameter | bf16 as shipped (first conv forward fp32) | bf16 everywhere | fp32, one half-batch vs the other (SGD noise) |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [f"| `{name}` | {error(shipped, name)} | {error(everywhere, name)} | {error(first, name, second)} |"
              for name in fp32]
    lines += ["", "Each cell: |g - g_fp32| / |g_fp32| of that parameter's gradient over the whole batch "
              "(last column: the difference of the two half-batch gradients, over the whole batch's norm)."]
    write_markdown(a.out, lines)


if __name__ == "__main__":
    main()
