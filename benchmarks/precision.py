"""fp32 against bf16 autocast for the networks seedpool trains, on this machine.

What `--precision auto` decides from (seedpool.models.precision): whether bf16 pays for a
convolutional network and for a small MLP. Each variant is the same seedpool policy with the
same weights, stepped through the learners' `GradientStep` (the path training takes), timed
side by side, interleaved, medians of repeats:

- cnn update: one Adam step of PPO-like loss terms on 256 stacked 4x84x84 frames (Nature CNN),
  in NCHW and channels-last;
- cnn act: one no-grad forward on 32 observations (central inference's batch);
- minatar q update / act: MinAtar's Q network (one 3x3 convolution, 128 units) on 32 rows / 8 rows;
- mlp update: the same on 256 CartPole-sized rows through a 64x64 MLP (torch path).

    .venv/bin/python benchmarks/precision.py [--repeats 7] [--threads 2] [--device cuda]

writes benchmarks/results/precision.md (precision_cuda.md for `--device cuda`), with whether the
device computes bf16 natively (where it does not, `--precision bf16` is refused).
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from cnn_layout import timed  # the same timing loop as the layout benchmark

from seedpool.algos.gradient import GradientStep
from seedpool.bench.report import machine_info, write_markdown
from seedpool.models import ModelConfig, QModelConfig, make_policy, make_q_network
from seedpool.models.precision import bf16_supported

OUT = Path(__file__).parent / "results" / "precision.md"


def build(kind: str, precision: str, layout: torch.memory_format, rows: int, act_rows: int,
          device: torch.device):
    """(update, act) callables for one variant, on ``device``."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if kind == "minatar":
        return build_minatar_q(precision, device, gen)
    if kind == "cnn":
        space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        obs = torch.randint(0, 256, (rows, 4, 84, 84), dtype=torch.uint8, generator=gen)
        num_actions = 6
    else:
        space = gym.spaces.Box(-1, 1, (4,), np.float32)
        obs = torch.randn(rows, 4, generator=gen)
        num_actions = 2
    policy = make_policy(space, gym.spaces.Discrete(num_actions), ModelConfig(kind=kind)).to(device)
    obs = obs.to(device)
    if kind == "cnn":
        policy.memory_format = layout
        policy.to(memory_format=layout)
    step = GradientStep(torch.optim.Adam(policy.parameters(), lr=2.5e-4), 0.5, "bench", precision)
    actions = torch.randint(0, num_actions, (rows,), generator=gen).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def update() -> None:
        with step.autocast():
            logprob, entropy, value = policy.evaluate(obs, actions)
        loss = -logprob.mean() + 0.5 * value.square().mean() - 0.01 * entropy.mean()
        step(loss, 0)
        sync()

    def act() -> None:
        with torch.no_grad(), step.autocast():
            policy.act(obs[:act_rows])
        sync()  # a GPU's time is counted until its work is done

    return update, act


def build_minatar_q(precision: str, device: torch.device, gen: torch.Generator):
    """(update, act) for MinAtar's Q network as Ape-X and DQN use it: a 32-row TD-style Adam step,
    an 8-row greedy forward (a batch of central inference)."""
    space = gym.spaces.Box(0, 1, (4, 10, 10), np.bool_)
    net = make_q_network(space, gym.spaces.Discrete(3), QModelConfig()).to(device)
    step = GradientStep(torch.optim.Adam(net.parameters(), lr=1e-4), 10.0, "bench", precision)
    obs = (torch.rand(32, 4, 10, 10, generator=gen) > 0.8).to(device)
    actions = torch.randint(0, 3, (32,), generator=gen).to(device)
    targets = torch.randn(32, generator=gen).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def update() -> None:
        with step.autocast():
            q = net(obs).float().gather(1, actions[:, None])[:, 0]
        step(((q - targets) ** 2).mean(), 0)
        sync()

    def act() -> None:
        with torch.no_grad(), step.autocast():
            net(obs[:8]).argmax(1)
        sync()

    return update, act


VARIANTS = {  # name -> (network, precision, memory layout)
    "cnn fp32": ("cnn", "fp32", torch.contiguous_format),
    "cnn fp32 channels-last": ("cnn", "fp32", torch.channels_last),
    "cnn bf16": ("cnn", "bf16", torch.contiguous_format),
    "cnn bf16 channels-last": ("cnn", "bf16", torch.channels_last),
    "minatar q fp32": ("minatar", "fp32", torch.contiguous_format),
    "minatar q bf16": ("minatar", "bf16", torch.contiguous_format),
    "mlp fp32": ("mlp", "fp32", torch.contiguous_format),
    "mlp bf16": ("mlp", "bf16", torch.contiguous_format),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--act-rows", type=int, default=32)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    out = a.out or (OUT if device.type == "cpu" else OUT.with_name(f"precision_{device.type}.md"))
    torch.set_num_threads(a.threads)
    ops = {name: build(kind, prec, fmt, a.rows, a.act_rows, device) for name, (kind, prec, fmt) in VARIANTS.items()}
    times: dict[tuple[str, str], list[float]] = {(n, op): [] for n in VARIANTS for op in ("update", "act")}
    for update, act in ops.values():  # warm-up: oneDNN picks and caches its kernels
        update(), act()
    names = list(VARIANTS)
    for r in range(a.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            update, act = ops[name]
            calls = 2 if name.startswith("cnn") else 20 if name.startswith("minatar") else 50
            times[name, "update"].append(timed(update, calls))
            times[name, "act"].append(timed(act, 10 * calls))
        print(f"repeat {r + 1}/{a.repeats} done", flush=True)
    med = {key: statistics.median(v) for key, v in times.items()}
    info = machine_info()
    native = bf16_supported(device.type)
    what = "this CPU" if device.type == "cpu" else torch.cuda.get_device_name(device)
    lines = [
        f"# fp32 vs bf16 autocast on {what}",
        "",
        *[f"- **{k}:** {v}" for k, v in info.items() if k in ("date", "machine", "python", "seedpool", "torch")],
        f"- **native bf16 on {what}:** {'yes' if native else 'no (autocast would emulate it; --precision bf16 is refused)'}",
        f"- **load average at the end:** {', '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}",
        f"- **method:** device {device}; torch threads {a.threads}; update = one Adam step through `GradientStep` on {a.rows} rows "
        f"(CNN: 4x84x84 uint8 frames; MLP: 4 floats, 64x64), act = one no-grad forward on {a.act_rows} rows "
        f"(MinAtar Q network: 32 and 8 rows of 4x10x10); "
        f"{a.repeats} interleaved repeats, medians; min-max in brackets.",
        "",
        "| variant | update (ms) | vs fp32 | act (ms) | vs fp32 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in VARIANTS:
        base = {"cnn": "cnn fp32", "minatar": "minatar q fp32", "mlp": "mlp fp32"}[name.split()[0]]
        u, c = times[name, "update"], times[name, "act"]
        lines.append(
            f"| {name} | {med[name, 'update'] * 1e3:.2f} [{min(u) * 1e3:.2f}-{max(u) * 1e3:.2f}] "
            f"| {med[base, 'update'] / med[name, 'update']:.2f}x "
            f"| {med[name, 'act'] * 1e3:.3f} [{min(c) * 1e3:.3f}-{max(c) * 1e3:.3f}] "
            f"| {med[base, 'act'] / med[name, 'act']:.2f}x |")
    lines += ["", "`vs fp32`: the fp32 NCHW time of the same network divided by this variant's (above 1: faster)."]
    write_markdown(out, lines)


if __name__ == "__main__":
    main()
