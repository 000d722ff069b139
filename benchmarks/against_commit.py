"""End-to-end training speed of this checkout against an earlier commit of seedpool, same machine,
same trainer defaults, alternating rounds.

    .venv/bin/python benchmarks/against_commit.py --commit ba7f7ed --trainer ppo     # PPO, CartPole-v1
    .venv/bin/python benchmarks/against_commit.py --commit ba7f7ed --trainer apex    # Ape-X, MinAtar/Breakout-v1
    .venv/bin/python benchmarks/against_commit.py --commit 32f471f --trainer ppo-pong  # PPO, Pong-v5 (issue 16)
    .venv/bin/python benchmarks/against_commit.py --commit 36a7a12 --commit ba7f7ed --out results/x.md

With several ``--commit``s every round trains once with each tree, the order rotated round by
round, and the table gives this checkout's ratio to each.

Issue targets of the form "steps/s >= k x today's" compare with the code of the day the issue
was written: this checks that commit out into a temporary git worktree and, in every round,
trains once with each tree (a fresh Python process each, `PYTHONPATH` pointing at the tree, the
same virtualenv), alternating (rotating) which goes first. steps/s is the run's own `sps` (its env steps
over its wall time from the first reset on). Writes `results/against_<commit>_<trainer>.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from seedpool.bench.report import machine_info

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TASKS = {"ppo": ("ppo", "CartPole-v1", 40_000), "apex": ("apex", "MinAtar/Breakout-v1", 150_000),
         "ppo-pong": ("ppo", "Pong-v5", 20_480)}

# One run, in a fresh process whose seedpool is the tree on PYTHONPATH: prints its result as JSON.
RUN = """
import dataclasses, importlib, json, sys, tempfile
algo, env, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
mod = importlib.import_module(f"seedpool.trainers.{algo}")
cfg = getattr(mod, f"{algo}_defaults")(env)
cfg = dataclasses.replace(cfg, total_timesteps=steps, seed=1, runs_dir=tempfile.mkdtemp(), progress="off",
                          tensorboard=False)
r = getattr(mod, f"train_{algo}")(cfg)
import seedpool
print("RESULT " + json.dumps({"sps": r.sps, "final": r.final_return, "step": r.step, "from": seedpool.__file__}))
"""


def run_once(tree: Path, trainer: str) -> dict:
    algo, env, steps = TASKS[trainer]
    out = subprocess.run([sys.executable, "-c", RUN, algo, env, str(steps)], cwd=tempfile.gettempdir(),
                         env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    if not Path(result["from"]).is_relative_to(tree):
        raise RuntimeError(f"the run imported seedpool from {result['from']}, not from {tree}")
    return result


def measure(trees: dict[str, Path], trainer: str, rounds: int) -> dict[str, list[dict]]:
    """One untimed run per tree, then ``rounds`` rounds of one run per tree, the order rotated each round."""
    for tree in trees.values():  # untimed: one-time compiles and caches of each tree
        run_once(tree, trainer)
    names = list(trees)
    got: dict[str, list[dict]] = {k: [] for k in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            got[name].append(run_once(trees[name], trainer))
            print(f"round {r + 1}: {name} {got[name][-1]['sps']:,.0f} steps/s", file=sys.stderr, flush=True)
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", required=True, action="append",
                   help="an earlier commit (any git revision); repeat for several")
    p.add_argument("--trainer", choices=sorted(TASKS), default="ppo")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--note", default="")
    p.add_argument("--out", type=Path, help="the table's path (default results/against_<commit>_<trainer>.md)")
    args = p.parse_args(argv)
    commits = [subprocess.run(["git", "rev-parse", "--short", c], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() for c in args.commit]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this checkout": ROOT} | {c: Path(tmp) / c for c in commits}
        try:
            for c in commits:
                subprocess.run(["git", "worktree", "add", "--detach", str(trees[c]), c], cwd=ROOT, check=True,
                               capture_output=True)
            got = measure(trees, args.trainer, args.rounds)
        finally:
            for c in commits:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees[c])], cwd=ROOT, capture_output=True)
    new = got["this checkout"]
    algo, env, steps = TASKS[args.trainer]
    lines = [f"# {algo} on {env}: this checkout against {', '.join(commits)}, end to end", ""]
    lines += [f"- **{k}:** {v}" for k, v in machine_info().items()]
    lines += [f"- **method:** {args.rounds} rounds; each round trains once with each tree ({algo}'s defaults for {env}, "
              f"{steps:,} env steps, seed 1, a fresh process each), rotating which goes first, after one untimed "
              "run of each; steps/s is the run's own sps; the ratio is per round, then its median.",
              f"- **load average (1 min) before/after:** {load_before:.2f} / {os.getloadavg()[0]:.2f}"]
    if args.note:
        lines.append(f"- **note:** {args.note}")
    lines += ["", "| tree | steps/s (median) | per round | final return (last 20), per round |", "| --- | ---: | --- | --- |"]
    for name, runs in got.items():
        rates = ", ".join(format(x["sps"], ",.0f") for x in runs)
        finals = ", ".join(format(x["final"], ".1f") for x in runs)
        median = statistics.median(x["sps"] for x in runs)
        lines.append(f"| {name} | {median:,.0f} | {rates} | {finals} |")
    lines.append("")
    for c in commits:
        ratios = [a["sps"] / b["sps"] for a, b in zip(new, got[c])]
        per_round = ", ".join(format(x, ".2f") for x in ratios)
        lines.append(f"- this checkout / {c} per round: {per_round}; median **{statistics.median(ratios):.2f}x**")
    out = args.out or RESULTS / f"against_{commits[0]}_{args.trainer}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
