"""End-to-end steps/s of a trainer's defaults with different torch thread counts, side by side.

    .venv/bin/python benchmarks/torch_threads.py ppo Pong-v5 --threads 1,2 --steps 16384 --repeats 3

Each repeat runs every thread count once, in an order rotated every repeat, with the task's
defaults otherwise (`seedpool train ALGO --env ENV --torch-threads T`); the table gives each
run's steps/s (the run's own clock, setup excluded) and time shares, the medians, and the
median of the per-repeat ratios to the first thread count. Short runs measure speed, not
learning. Writes benchmarks/results/torch_threads_<algo>_<env>.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
from pathlib import Path

from seedpool.bench.report import machine_info

TRAINERS = {"ppo": ("seedpool.trainers.ppo", "ppo_defaults", "train_ppo"),
            "impala": ("seedpool.trainers.impala", "impala_defaults", "train_impala")}
RESULTS = Path(__file__).parent / "results"


def run_once(algo: str, env: str, threads: int, steps: int) -> dict:
    """One short run of the defaults at ``threads`` torch threads: steps/s, shares, load before."""
    import importlib

    module, defaults, train = TRAINERS[algo]
    mod = importlib.import_module(module)
    cfg = getattr(mod, defaults)(env)
    cfg = dataclasses.replace(cfg, total_timesteps=steps, torch_threads=threads, progress="off", tensorboard=False,
                              runs_dir=Path(tempfile.mkdtemp()), checkpoint_every_s=1e9)
    load = os.getloadavg()[0]
    result = getattr(mod, train)(cfg)
    return {"threads": threads, "sps": result.sps, "shares": result.time_shares, "load": load}


def report(algo: str, env: str, runs: list[dict], threads: list[int], args: argparse.Namespace) -> str:
    info = machine_info()
    lines = [f"# {algo.upper()} on {env}: end-to-end steps/s by torch threads", "",
             f"Written by `python benchmarks/torch_threads.py {algo} {env} --threads {args.threads} "
             f"--steps {args.steps} --repeats {args.repeats}` on {info['date']}.", "",
             f"- machine: {info['machine']}; {info['kernel']}; Python {info['python']}; seedpool {info['seedpool']}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in info.items()
                                       if k not in ("date", "machine", "kernel", "python", "seedpool")),
             f"- the task's defaults otherwise; {args.steps:,} env steps per run; note: {args.note}", "",
             "| run | torch threads | steps/s | shares of the run's time | load before |", "|---:|---:|---:|---|---:|"]
    for i, r in enumerate(runs):
        shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in r["shares"].items())
        lines.append(f"| {i + 1} | {r['threads']} | {r['sps']:.0f} | {shares} | {r['load']:.1f} |")
    base = threads[0]
    lines += ["", f"| torch threads | median steps/s | median of per-repeat ratios to {base} |", "|---:|---:|---:|"]
    rounds = [runs[i:i + len(threads)] for i in range(0, len(runs), len(threads))]
    for t in threads:
        med = statistics.median(r["sps"] for r in runs if r["threads"] == t)
        ratios = [next(r["sps"] for r in rnd if r["threads"] == t) / next(r["sps"] for r in rnd if r["threads"] == base)
                  for rnd in rounds]
        lines.append(f"| {t} | {med:.0f} | {statistics.median(ratios):.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("algo", choices=sorted(TRAINERS))
    parser.add_argument("env")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--steps", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--note", default="nothing else ran")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    runs = []
    for rep in range(args.repeats):
        order = threads[rep % len(threads):] + threads[:rep % len(threads)]
        for t in order:
            r = run_once(args.algo, args.env, t, args.steps)
            runs.append(r)
            print(f"RESULT threads={t} sps={r['sps']:.1f} load={r['load']:.1f}", flush=True)
    out = RESULTS / f"torch_threads_{args.algo}_{args.env.replace('/', '_').lower()}.md"
    out.write_text(report(args.algo, args.env, runs, threads, args))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
