"""End-to-end PPO on CartPole-v1: the native family against the Python-env path (before
issue 19's native families: `native=False`). Writes `benchmarks/results/native_ppo.md`.

    .venv/bin/python benchmarks/native_ppo.py                  # 3 rounds of 40k steps per case
    .venv/bin/python benchmarks/native_ppo.py --rounds 5 --steps 100000

Each round trains both cases, alternating which goes first, with the trainer's CartPole
defaults (rl-zoo3's settings) and the same seed; steps/s is the run's own `sps` (env steps
over wall time of the run), and the time shares are the run's env / inference / learn
breakdown. Medians over the rounds; the ratio is native / python per round, then its median.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seedpool.bench.report import machine_info
from seedpool.trainers.ppo import ppo_defaults, train_ppo

OUT = Path(__file__).resolve().parent / "results" / "native_ppo.md"
CASES = {"native": {}, "python": {"native": False}}


def load_note(before: float, after: float) -> str:
    """What the load averages say about the figures."""
    if max(before, after) >= 1.5:
        return ("- **Taken on a loaded machine** (2 cores shared with other jobs; load averages above): the paired "
                "per-round ratio is what to read.")
    return "- Taken on a quiet machine (load averages above); the paired per-round ratio is what to read."


def run_case(name: str, steps: int, seed: int, runs_dir: Path) -> dict:
    """Train one case; its steps/s and time shares."""
    cfg = dataclasses.replace(ppo_defaults("CartPole-v1"), total_timesteps=steps, seed=seed, runs_dir=runs_dir,
                              env_options=dict(CASES[name]))
    start = time.perf_counter()
    result = train_ppo(cfg)
    wall = time.perf_counter() - start  # the whole call: the pool's build and the run's end too
    return {"sps": result.sps, "shares": result.time_shares, "return": result.final_return, "wall": wall}


def main(argv: list[str]) -> int:
    """Run the rounds and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows: dict[str, list[dict]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = list(CASES) if r % 2 == 0 else list(reversed(CASES))
            for name in order:
                rows[name].append(run_case(name, args.steps, seed=1, runs_dir=Path(tmp)))
                print(f"round {r + 1} {name}: {rows[name][-1]['sps']:,.0f} steps/s", file=sys.stderr)
    ratios = [n["sps"] / p["sps"] for n, p in zip(rows["native"], rows["python"])]
    python_env = statistics.median(x["shares"].get("env", float("nan")) for x in rows["python"])
    info = machine_info()
    info["load average (1 min) before / after"] = f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"
    out = ["# PPO on CartPole-v1: native family vs Python-env path", ""]
    out += [f"- **{k}:** {v}" for k, v in info.items()]
    out += [f"- **method:** {args.rounds} rounds of {args.steps:,} env steps per case, `ppo_defaults('CartPole-v1')` "
            "(8 envs, sync sampler), seed 1; cases alternate which runs first. steps/s is the run's own sps.", ""]
    out += ["| case | steps/s (median) | per round | env share | inference share | learn share | whole call (s) "
            "| final return |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, runs in rows.items():
        sps = [x["sps"] for x in runs]
        env = statistics.median(x["shares"].get("env", float("nan")) for x in runs)
        learn = statistics.median(x["shares"].get("learn", float("nan")) for x in runs)
        infer = statistics.median(x["shares"].get("inference", float("nan")) for x in runs)
        out.append(f"| {name} | {statistics.median(sps):,.0f} | {', '.join(f'{s:,.0f}' for s in sps)} | "
                   f"{env:.2f} | {infer:.2f} | {learn:.2f} | {statistics.median(x['wall'] for x in runs):.1f} | "
                   f"{statistics.median(x['return'] for x in runs):.1f} |")
    out += ["", f"native / python per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median **{statistics.median(ratios):.2f}x**", "",
            "## Notes", "",
            load_note(load_before, os.getloadavg()[0]),
            "- time shares: the run's own breakdown (`time_shares`), fractions of wall time.",
            "- steps/s and the shares count the run's steps (from the first reset on); whole call: `train_ppo` "
            "from start to end, with building the pool (a native pool gets numba's compiler ready then, "
            "~0.5 s once per process; a Python-env pool builds its envs) and the run's plots.",
            f"- The bound on this ratio from the env alone: the Python-env path spends {python_env:.2f} of its "
            f"time stepping envs, so an env that cost nothing would make it at most {1 / (1 - python_env):.2f}x "
            "faster; the rest is learning and inference."]
    args.out.write_text("\n".join(out) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
