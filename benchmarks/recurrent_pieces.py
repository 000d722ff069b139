"""A recurrent core over sequences with episode starts inside: one call per stretch between
resets against one fused call over the pieces of every column.

The learners re-score stored sequences through their LSTM/GRU cores every gradient step
(recurrent PPO and APPO, R2D2), and an episode that starts inside a sequence resets the state
of its row there. The stretch method (seedpool before this benchmark) ran one fused core call
per stretch of time steps in which no row reset, so a sequence with ten reset times cost ten
calls; `RecurrentCore.sequence` now cuts each column at its resets and runs the pieces side by
side as the columns of one padded call. Both give the same numbers (tests/test_recurrent.py).

Timed: forward and backward of the recurrent APPO test's shape (two LSTM cores of 64 on 2
inputs, sequences of 33 steps x 8 rows, as `tests/test_recurrent_appo_learning.py`), for reset
masks drawn at several rates (a CartPole episode of 20 steps resets a row 5% of its steps; one
of 500 steps 0.2%); the masks are fixed per rate and the two methods interleaved, medians.

    .venv/bin/python benchmarks/recurrent_pieces.py [--repeats 9] [--threads 2]

writes benchmarks/results/recurrent_pieces.md.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from seedpool.bench.report import machine_info, write_markdown
from seedpool.models.recurrent import RecurrentCore

OUT = Path(__file__).parent / "results" / "recurrent_pieces.md"
RATES = (0.0, 0.002, 0.01, 0.05, 0.1)


def stretches(core: RecurrentCore, x: torch.Tensor, state: dict, first: torch.Tensor):
    """The stretch method: one core call per stretch in which no row resets after its first step."""
    T = x.shape[0]
    starts = [0] + [int(t) for t in torch.nonzero(first[1:].any(dim=1)).flatten() + 1]
    outs = []
    for a, b in zip(starts, starts[1:] + [T]):
        out, state = core._run(x[a:b], state, ~first[a])
        outs.append(out)
    return torch.cat(outs), state


def pieces(core: RecurrentCore, x: torch.Tensor, state: dict, first: torch.Tensor):
    """The fused call, as the learners ask for it (no final state)."""
    return core.sequence(x, state, first, final_state=False)


METHODS = {"stretches": stretches, "pieces": pieces}


def timed(method, cores, x, state, first, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        total = sum(method(core, x, state, first)[0].sum() for core in cores)
        total.backward()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10, help="forward+backward passes per timed window")
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    T, B, F, H = 33, 8, 2, 64
    cores = [RecurrentCore("lstm", F, H) for _ in range(2)]
    x = torch.randn(T, B, F)
    state = cores[0].initial_state(B)
    gen = torch.Generator().manual_seed(1)
    masks = {}
    for rate in RATES:
        first = torch.rand(T, B, generator=gen) < rate
        first[0] = True
        masks[rate] = first
    times = {(m, r): [] for m in METHODS for r in RATES}
    for m in METHODS.values():  # warm-up: oneDNN picks and caches its kernels
        for first in masks.values():
            timed(m, cores, x, state, first, 2)
    for rep in range(a.repeats):
        order = list(METHODS)[rep % 2:] + list(METHODS)[:rep % 2]
        for rate, first in masks.items():
            for name in order:
                times[name, rate].append(timed(METHODS[name], cores, x, state, first, a.calls))
        print(f"repeat {rep + 1}/{a.repeats} done", flush=True)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    info = machine_info()
    lines = [
        "# Recurrent cores over sequences with resets inside: a call per stretch vs one fused call",
        "",
        *[f"- **{k}:** {v}" for k, v in info.items() if k in ("date", "machine", "python", "seedpool", "torch")],
        f"- **method:** torch threads {a.threads}; forward + backward of two LSTM cores ({F} inputs, {H} units) "
        f"over [{T}, {B}] sequences from a carried state; one reset mask per rate (row 0 opens every "
        f"column); {a.repeats} interleaved repeats of {a.calls} passes, medians (min-max).",
        "",
        "| reset rate per row-step | reset times inside | pieces | stretches (ms) | pieces (ms) | speed-up |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for rate, first in masks.items():
        inside = int(first[1:].any(dim=1).sum())
        n_pieces = B + int(first[1:].sum())
        s, p = times["stretches", rate], times["pieces", rate]
        lines.append(f"| {rate:g} | {inside} | {n_pieces} | {med['stretches', rate]:.2f} "
                     f"({min(s) * 1e3:.2f}-{max(s) * 1e3:.2f}) | {med['pieces', rate]:.2f} "
                     f"({min(p) * 1e3:.2f}-{max(p) * 1e3:.2f}) | {med['stretches', rate] / med['pieces', rate]:.2f}x |")
    lines += ["", "Without a reset inside (the first rows) both methods make the same single call: their "
              "ratio there is the spread of the timing, not a difference."]
    write_markdown(a.out, lines)


if __name__ == "__main__":
    main()
