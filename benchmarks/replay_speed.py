"""seedpool.replay against cpprb 11 on Atari-sized transitions: add, sample, update, memory, frame dedup.

Same process, same data. Within a window of ``--window`` seconds the libraries' calls
alternate one by one (the first rotating every round), so that load from elsewhere hits both
alike, and only the calls are timed (not building their inputs). Each figure is the median of
``--repeats`` windows, min-max beside it; a ratio is the median of the per-window ratios. Only
ratios taken in one run mean anything on a shared machine.

1. **Prioritized, plain storage.** ``--capacity`` (100k) transitions of obs 4x84x84 uint8,
   action int64, reward float32, done bool; alpha 0.6, eps 1e-6, both filled first. Timed:
   ``add`` of 256 rows, ``sample(512, beta=0.4)`` (IS weights included), ``update_priorities``
   of 512 random indices. Memory: RSS growth while building and filling each buffer (built one
   after the other), and seedpool's own array bytes.
2. **Frame dedup.** seedpool: ``PrioritizedReplay(..., frame_dedup=True)`` fed by
   ``NStepWriter`` (n = 1, the cpprb setting; n = 3 beside it) with 256 envs, one step each per
   call (256 rows). cpprb: ``PrioritizedReplayBuffer(..., next_of="obs", stack_compress="obs")``,
   which dedups one stream, so each call adds 256 consecutive steps of one stream (its stack
   axis last: 84x84x4). No episode ends. Both are filled to steady state first (seedpool's frame
   ring wrapped once). Memory is compared with plain storage of the same rows (obs + next_obs,
   2 x 28,224 bytes a row).

    nice -n 19 .venv/bin/python benchmarks/replay_speed.py [--capacity 100000] [--repeats 9] [--quick]

writes benchmarks/results/replay_speed.md (or ``--out``).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
import psutil

import seedpool
from seedpool.replay import NStepWriter, PrioritizedReplay

OUT = Path(__file__).parent / "results" / "replay_speed.md"
STACK, HW = 4, (84, 84)
ROW_OBS = STACK * HW[0] * HW[1]


def rss() -> int:
    """Resident bytes of this process now."""
    return psutil.Process().memory_info().rss


Case = tuple[Callable[..., object], Callable[[], dict] | None]  # (call, builds its kwargs untimed)


def round_robin(cases: dict[str, Case], window: float) -> dict[str, float]:
    """Calls per second of each case, the cases' calls alternating one by one for ``window`` seconds.

    Alternating single calls (the first case rotating every round) exposes every case to the
    same load from elsewhere, so the ratio within one window is what a repeat measures.
    Only the calls are timed; building their inputs is not.
    """
    names = list(cases)
    busy = dict.fromkeys(names, 0.0)
    calls = dict.fromkeys(names, 0)
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < window or min(calls.values()) < 3:
        for name in names[k % len(names):] + names[: k % len(names)]:
            fn, prepare = cases[name]
            kwargs = prepare() if prepare else {}
            t = time.perf_counter()
            fn(**kwargs)
            busy[name] += time.perf_counter() - t
            calls[name] += 1
        k += 1
    return {n: calls[n] / busy[n] for n in names}


def repeated(cases: dict[str, Case], repeats: int, window: float) -> dict[str, list[float]]:
    """``repeats`` round-robin windows: a list of calls/s per case."""
    out: dict[str, list[float]] = {n: [] for n in cases}
    for _ in range(repeats):
        for name, value in round_robin(cases, window).items():
            out[name].append(value)
    return out


# ---------------------------------------------------------------- plain prioritized


def plain_batches(rng: np.random.Generator, count: int = 4) -> list[dict]:
    """A few 256-row batches, cycled (filling 2.8 GB with fresh random data would dominate the run)."""
    return [{
        "obs": rng.integers(0, 256, (256, STACK, *HW), dtype=np.uint8),
        "action": rng.integers(0, 6, 256),
        "reward": rng.random(256, dtype=np.float32),
        "done": rng.random(256) < 0.01,
    } for _ in range(count)]


def bench_plain(args, rng) -> tuple[dict, dict]:
    """Rates of add/sample/update for both libraries, and their memory."""
    import cpprb

    batches = plain_batches(rng)
    fields = {"obs": ((STACK, *HW), np.uint8), "action": ((), np.int64), "reward": ((), np.float32),
              "done": ((), np.bool_)}
    env_dict = {"obs": {"shape": (STACK, *HW), "dtype": np.uint8}, "action": {"dtype": np.int64},
                "reward": {"dtype": np.float32}, "done": {"dtype": np.bool_}}
    mem, bufs = {}, {}
    builders = {
        "seedpool": lambda: PrioritizedReplay(args.capacity, fields, alpha=0.6, eps=1e-6, seed=0),
        "cpprb": lambda: cpprb.PrioritizedReplayBuffer(args.capacity, env_dict, alpha=0.6, eps=1e-6),
    }
    for name, build in builders.items():
        gc.collect()
        before = rss()
        buf = build()
        for i in range(-(-args.capacity // 256)):
            buf.add(**batches[i % len(batches)])
        mem[name] = rss() - before
        bufs[name] = buf
    mem["seedpool arrays"] = bufs["seedpool"].nbytes()
    idx = [rng.integers(0, args.capacity, 512) for _ in range(64)]
    prio = [rng.random(512) * 3 for _ in range(64)]
    counter = {"add": 0, "upd": 0}

    def add(buf):
        counter["add"] += 1
        buf.add(**batches[counter["add"] % len(batches)])

    def update(buf):
        counter["upd"] += 1
        buf.update_priorities(idx[counter["upd"] % 64], prio[counter["upd"] % 64])

    ops = {"add x256": add, "sample 512 + weights": lambda b: b.sample(512, beta=0.4), "update 512": update}
    rates = {}
    for op, fn in ops.items():
        for buf in bufs.values():  # warm-up (numba kernels are compiled or loaded from cache here)
            for _ in range(3):
                fn(buf)
        cases = {lib: (lambda f=fn, b=buf: f(b), None) for lib, buf in bufs.items()}
        rates[op] = repeated(cases, args.repeats, args.window)
        print(op, {k: f"{statistics.median(v):,.0f}" for k, v in rates[op].items()}, flush=True)
    del bufs
    gc.collect()
    return rates, mem


# ---------------------------------------------------------------- frame dedup


class FrameSource:
    """Synthetic stacked frames: stream s at step t shows pool frames base_s + t .. base_s + t + 3."""

    def __init__(self, rng: np.random.Generator, envs: int = 256, pool: int = 2048) -> None:
        self.pool = rng.integers(0, 256, (pool, *HW), dtype=np.uint8)
        self.base = np.arange(envs) * 7
        self.t = 0  # writer steps so far
        self.i = 0  # cpprb's single stream: rows so far

    def stacks(self, first: np.ndarray) -> np.ndarray:
        """Stacks whose oldest frame is ``first`` (one per entry)."""
        return self.pool[(first[:, None] + np.arange(STACK)) % len(self.pool)]

    def writer_step(self) -> dict:
        """One step of every env (kwargs of NStepWriter.add)."""
        first = self.base + self.t
        self.t += 1
        b = len(first)
        no = np.zeros(b, bool)
        return {"obs": self.stacks(first), "next_obs": self.stacks(first + 1), "action": np.zeros(b, np.int64),
                "reward": np.ones(b), "terminated": no, "truncated": no}

    def cpprb_rows(self, n: int = 256) -> dict:
        """``n`` consecutive steps of one stream, stack axis last (cpprb's stack_compress layout)."""
        first = self.i + np.arange(n)
        self.i += n
        obs = np.ascontiguousarray(self.stacks(first).transpose(0, 2, 3, 1))
        nxt = np.ascontiguousarray(self.stacks(first + 1).transpose(0, 2, 3, 1))
        return {"obs": obs, "next_obs": nxt, "act": np.zeros(n, np.int64), "rew": np.ones(n, np.float32),
                "done": np.zeros(n, np.float32)}


def bench_dedup(args, rng) -> tuple[dict, dict]:
    """Dedup add/sample/update rates and memory: seedpool (n = 1 and n = 3) and cpprb."""
    import cpprb

    fields = {"obs": ((STACK, *HW), np.uint8), "action": ((), np.int64), "reward": ((), np.float32),
              "discount": ((), np.float32), "next_obs": ((STACK, *HW), np.uint8)}
    env_dict = {"obs": {"shape": (*HW, STACK), "dtype": np.uint8}, "act": {"dtype": np.int64},
                "rew": {"dtype": np.float32}, "done": {"dtype": np.float32}}
    mem, bufs, feeders = {}, {}, {}
    for name in ("seedpool n=1", "seedpool n=3", "cpprb"):
        gc.collect()
        before = rss()
        src = FrameSource(np.random.default_rng(1))
        if name == "cpprb":
            buf = cpprb.PrioritizedReplayBuffer(args.capacity, env_dict, alpha=0.6, eps=1e-6,
                                                next_of="obs", stack_compress="obs")
            feed = (buf.add, src.cpprb_rows)
        else:
            buf = PrioritizedReplay(args.capacity, fields, alpha=0.6, eps=1e-6, seed=0, frame_dedup=True)
            writer = NStepWriter(buf, 1 if name.endswith("1") else 3, 0.99)
            feed = (writer.add, src.writer_step)
        if name == "cpprb":
            full = lambda b=buf: b.get_stored_size() >= args.capacity  # noqa: E731
        else:  # steady state: the frame ring wrapped once, so no call pays for first-touch page faults
            full = lambda b=buf: len(b) >= args.capacity and b.storage.g >= b.storage.frame_capacity  # noqa: E731
        while not full():
            feed[0](**feed[1]())
        mem[name] = rss() - before
        if name != "cpprb":
            mem[name + " arrays"] = buf.nbytes()
        bufs[name], feeders[name] = buf, feed
    mem["plain obs + next_obs"] = args.capacity * 2 * ROW_OBS
    idx = [rng.integers(0, args.capacity, 512) for _ in range(64)]
    prio = [rng.random(512) * 3 for _ in range(64)]
    counter = {"upd": 0}

    def update(buf):
        counter["upd"] += 1
        buf.update_priorities(idx[counter["upd"] % 64], prio[counter["upd"] % 64])

    rates = {}
    for f in feeders.values():
        f[0](**f[1]())
    rates["add x256"] = repeated(dict(feeders), args.repeats, args.window)
    print("dedup add", {k: f"{statistics.median(v):,.0f}" for k, v in rates["add x256"].items()}, flush=True)
    for op, fn in (("sample 512 + weights", lambda b: b.sample(512, beta=0.4)), ("update 512", update)):
        cases = {lib: (lambda f=fn, b=buf: f(b), None) for lib, buf in bufs.items()}
        rates[op] = repeated(cases, args.repeats, args.window)
        print("dedup", op, {k: f"{statistics.median(v):,.0f}" for k, v in rates[op].items()}, flush=True)
    return rates, mem


# ---------------------------------------------------------------- report


def machine() -> list[str]:
    """Date, hardware, load and versions, as bullet lines."""
    import cpprb

    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or "unknown"
    return [
        f"- **date:** {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- **machine:** nproc = {os.cpu_count()}; {cpu}; {psutil.virtual_memory().total / 2**30:.0f} GiB RAM",
        f"- **python:** {platform.python_version()}; **numpy:** {np.__version__}; **numba:** {numba.__version__}; "
        f"**cpprb:** {getattr(cpprb, '__version__', '11.0')}",
        f"- **seedpool:** {seedpool.__version__} ({commit}, working tree with uncommitted changes possible)",
    ]


def fmt(values: list[float]) -> str:
    """Median with [min-max]."""
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def ratio(ours: list[float], theirs: list[float]) -> str:
    """Median of per-repeat ratios (repeats taken seconds apart) and ratio of medians."""
    per = [a / b for a, b in zip(ours, theirs)]
    return (f"**{per_window_median(ours, theirs):.2f}x** [{min(per):.2f}-{max(per):.2f}]; "
            f"{statistics.median(ours) / statistics.median(theirs):.2f}x")


def mib(x: int) -> str:
    """Bytes in MiB."""
    return f"{x / 2**20:,.0f}"


def report(plain, plain_mem, dedup, dedup_mem, args, load) -> str:
    """The markdown file."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    lines = [
        "# Replay: seedpool.replay vs cpprb 11 (prioritized, Atari-sized transitions)", "", *machine(),
        f"- **load:** load average before {load[0]}, after {load[1]} (other jobs share the cores)",
        f"- **method:** capacity {args.capacity:,}; obs 4x84x84 uint8; alpha 0.6, eps 1e-6, beta 0.4; both "
        f"libraries in this one process, fed the same data; {args.repeats} windows of >= {args.window} s in "
        "which the libraries' calls alternate one by one (only the calls timed); median [min-max] calls/s. "
        "Ratio: median of per-window ratios [min-max]; then ratio of medians.",
        "- **not the same work:** cpprb also keeps a min tree (its IS weights are normalised by the "
        "buffer-wide max; seedpool's by the batch max, see docs/replay.md), so its update touches two trees.",
        "", "## Prioritized replay, plain storage", "",
        "| operation | seedpool (calls/s) | cpprb (calls/s) | seedpool / cpprb |",
        "| --- | ---: | ---: | ---: |",
    ]
    for op, r in plain.items():
        lines.append(f"| {op} | {fmt(r['seedpool'])} | {fmt(r['cpprb'])} | {ratio(r['seedpool'], r['cpprb'])} |")
    lines += [
        "", "| memory (MiB) | seedpool | cpprb |", "| --- | ---: | ---: |",
        f"| RSS growth, build + fill | {mib(plain_mem['seedpool'])} | {mib(plain_mem['cpprb'])} |",
        f"| preallocated arrays (incl. sum tree) | {mib(plain_mem['seedpool arrays'])} | |",
        f"| process peak RSS (whole run, both libraries) | {mib(peak)} | |",
        "", "## Frame dedup (obs and next_obs share frames)", "",
        "seedpool adds through `NStepWriter` (256 envs, one step each: 256 rows a call); cpprb adds "
        "256 consecutive steps of its single stream.", "",
        "| operation | seedpool n=1 | seedpool n=3 | cpprb dedup | n=1 / cpprb | n=3 / cpprb |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for op, r in dedup.items():
        lines.append(f"| {op} | {fmt(r['seedpool n=1'])} | {fmt(r['seedpool n=3'])} | {fmt(r['cpprb'])} | "
                     f"{ratio(r['seedpool n=1'], r['cpprb'])} | {ratio(r['seedpool n=3'], r['cpprb'])} |")
    plain_rows = dedup_mem["plain obs + next_obs"]
    lines += ["", "| memory | MiB | / plain obs + next_obs |", "| --- | ---: | ---: |",
              f"| plain storage of the same rows (obs + next_obs) | {mib(plain_rows)} | 1.00 |"]
    for name in ("seedpool n=1", "seedpool n=3", "cpprb"):
        grown = dedup_mem[name]
        lines.append(f"| {name}: RSS growth, build + fill | {mib(grown)} | {grown / plain_rows:.2f} |")
        if name + " arrays" in dedup_mem:
            a = dedup_mem[name + " arrays"]
            lines.append(f"| {name}: arrays as allocated (frame ring, rows, tree) | {mib(a)} | "
                         f"{a / plain_rows:.2f} |")
    lines += ["", "## Targets (from the replay issue)", "",
              "| target | measured | met |", "| --- | ---: | :---: |"]
    for op, r in plain.items():
        x = per_window_median(r["seedpool"], r["cpprb"])
        lines.append(f"| plain {op} >= 1.0x cpprb | {x:.2f}x | {'yes' if x >= 1.0 else 'no'} |")
    for n in ("1", "3"):
        x = per_window_median(dedup["add x256"][f"seedpool n={n}"], dedup["add x256"]["cpprb"])
        lines.append(f"| dedup add (n={n}) >= 5x cpprb dedup add | {x:.2f}x | {'yes' if x >= 5.0 else 'no'} |")
    x = dedup_mem["seedpool n=3 arrays"] / plain_rows
    lines.append(f"| dedup memory <= 0.35x plain obs + next_obs (arrays as allocated) | {x:.2f}x | "
                 f"{'yes' if x <= 0.35 else 'no'} |")
    return "\n".join(lines) + "\n"


def per_window_median(ours: list[float], theirs: list[float]) -> float:
    """Median of the per-window ratios."""
    return statistics.median(a / b for a, b in zip(ours, theirs))


def main() -> None:
    """Run both parts and write the markdown table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--capacity", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--window", type=float, default=1.0, help="seconds per timing window (all libraries)")
    p.add_argument("--quick", action="store_true", help="smoke run: 10k rows, 3 short windows")
    p.add_argument("--parts", default="plain,dedup", help="which parts to run (the file needs both)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.quick:
        args.capacity, args.repeats, args.window = 10_000, 3, 0.1
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rng = np.random.default_rng(0)
    parts = args.parts.split(",")
    plain, plain_mem = bench_plain(args, rng) if "plain" in parts else (None, None)
    dedup, dedup_mem = bench_dedup(args, rng) if "dedup" in parts else (None, None)
    if plain is None or dedup is None:
        return  # a partial run prints its figures only
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(plain, plain_mem, dedup, dedup_mem, args, (load_before, load_after))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
