"""End-to-end training on a native family against the Python-env path (before issue 19's
native families: `native=False`), same trainer defaults, same seed. Writes
`benchmarks/results/native_ppo.md` (PPO on CartPole-v1) or `native_apex.md` (Ape-X on
MinAtar/Breakout-v1).

    .venv/bin/python benchmarks/native_end_to_end.py                     # PPO: 3 rounds of 40k steps per case
    .venv/bin/python benchmarks/native_end_to_end.py --trainer apex      # Ape-X: 3 rounds of 150k steps per case
    .venv/bin/python benchmarks/native_end_to_end.py --rounds 5 --steps 100000

Each round trains both cases, alternating which goes first, with the trainer's defaults for
the task (`ppo_defaults`, `apex_defaults`) and the same seed; steps/s is the run's own `sps`
(env steps over the run's wall time, from the first reset on), and the time shares are the
run's own breakdown. Medians over the rounds; the ratio is native / python per round, then
its median. A short untimed run of each case comes first, so that neither pays the process's
one-time imports (torch's optimizer, plotting, numba) inside a timed round.
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
from typing import Any, Callable, NamedTuple

from seedpool.bench.report import machine_info

RESULTS = Path(__file__).resolve().parent / "results"
CASES = {"native": {}, "python": {"native": False}}


class Trainer(NamedTuple):
    """One end-to-end case: a trainer, its task and how the table describes it."""

    title: str
    env: str
    defaults: Callable[[str], Any]
    train: Callable[[Any], Any]
    steps: int
    out: str
    layout: str
    learn_share: Callable[[Any], float]  # the learner's share of the run


def _trainers() -> dict[str, Trainer]:
    from seedpool.trainers.apex import apex_defaults, train_apex
    from seedpool.trainers.ppo import ppo_defaults, train_ppo

    return {
        "ppo": Trainer("PPO on CartPole-v1", "CartPole-v1", ppo_defaults, train_ppo, 40_000, "native_ppo.md",
                       "8 envs, sync sampler; the learner runs between rollouts",
                       lambda r: r.time_shares.get("learn", float("nan"))),
        "apex": Trainer("Ape-X on MinAtar/Breakout-v1", "MinAtar/Breakout-v1", apex_defaults, train_apex, 150_000,
                        "native_apex.md", "16 envs in one async pool (batches of 8), central inference, a learner "
                        "thread at replay ratio 1", lambda r: r.thread_shares.get("time/share_learn", float("nan"))),
    }


def load_note(before: float, after: float) -> str:
    """What the load averages say about the figures."""
    if max(before, after) >= 2.0:  # more runnable jobs than the 2 cores
        return ("- **Taken on a loaded machine** (2 cores shared with other jobs; load averages above): the paired "
                "per-round ratio is what to read.")
    return "- Taken on a quiet machine (load averages above); the paired per-round ratio is what to read."


def run_case(trainer: Trainer, name: str, steps: int, seed: int, runs_dir: Path) -> dict:
    """Train one case; its steps/s, time shares and the whole call's wall time."""
    cfg = dataclasses.replace(trainer.defaults(trainer.env), total_timesteps=steps, seed=seed, runs_dir=runs_dir,
                              env_options={**trainer.defaults(trainer.env).env_options, **CASES[name]},
                              progress="off")
    start = time.perf_counter()
    result = trainer.train(cfg)
    wall = time.perf_counter() - start  # the whole call: the pool's build and the run's end too
    return {"sps": result.sps, "shares": result.time_shares, "learn": trainer.learn_share(result),
            "return": result.final_return, "wall": wall}


def render(trainer: Trainer, rows: dict[str, list[dict]], rounds: int, steps: int, loads: tuple[float, float]) -> str:
    """The results page."""
    ratios = [n["sps"] / p["sps"] for n, p in zip(rows["native"], rows["python"])]
    python_env = statistics.median(x["shares"].get("env", float("nan")) for x in rows["python"])
    info = machine_info()
    info["load average (1 min) before / after"] = f"{loads[0]:.1f} / {loads[1]:.1f}"
    out = [f"# {trainer.title}: native family vs Python-env path", ""]
    out += [f"- **{k}:** {v}" for k, v in info.items()]
    out += [f"- **method:** after an untimed short run of each case, {rounds} rounds of {steps:,} env steps per "
            "case, the trainer's defaults for "
            f"{trainer.env} ({trainer.layout}), seed 1; cases alternate which runs first. steps/s is the run's "
            "own sps.", ""]
    out += ["| case | steps/s (median) | per round | env share | inference share | learn share | whole call (s) "
            "| final return |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, runs in rows.items():
        sps = [x["sps"] for x in runs]
        env, infer, learn, wall, ret = (
            statistics.median(get(x) for x in runs)
            for get in (lambda x: x["shares"].get("env", float("nan")),
                        lambda x: x["shares"].get("inference", float("nan")),
                        lambda x: x["learn"], lambda x: x["wall"], lambda x: x["return"]))
        out.append(f"| {name} | {statistics.median(sps):,.0f} | {', '.join(f'{s:,.0f}' for s in sps)} | "
                   f"{env:.2f} | {infer:.2f} | {learn:.2f} | {wall:.1f} | {ret:.1f} |")
    out += ["", f"native / python per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median **{statistics.median(ratios):.2f}x**", "",
            "## Notes", "",
            load_note(*loads),
            "- time shares: the run's own breakdown (`time_shares`), fractions of its wall time; learn share: "
            + ("the same breakdown's learner share." if trainer.title.startswith("PPO") else
               "how busy the learner thread was (`thread_shares`), which runs beside acting and inference."),
            "- steps/s and the shares count the run's steps (from the first reset on); whole call: the trainer "
            "from start to end, with building the pool (a native pool gets numba's compiler ready then, "
            "~0.5 s once per process; a Python-env pool builds its envs) and the run's plots.",
            f"- The bound on this ratio from the env alone: the Python-env path spends {python_env:.2f} of its "
            f"time stepping envs, so an env that cost nothing would make it at most {1 / (1 - python_env):.2f}x "
            "faster; the rest is learning and inference, the same code on both paths."]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Run the rounds and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainer", choices=("ppo", "apex"), default="ppo")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default: the trainer's)")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help="an untimed run of each case first (default: a 20th of the trainer's steps)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    trainer = _trainers()[args.trainer]
    steps = args.steps or trainer.steps
    load_before = os.getloadavg()[0]
    rows: dict[str, list[dict]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:  # untimed: the process's one-time imports and loads, paid by neither case
            run_case(trainer, name, args.warmup_steps or trainer.steps // 20, seed=1, runs_dir=Path(tmp))
        for r in range(args.rounds):
            order = list(CASES) if r % 2 == 0 else list(reversed(CASES))
            for name in order:
                rows[name].append(run_case(trainer, name, steps, seed=1, runs_dir=Path(tmp)))
                print(f"round {r + 1} {name}: {rows[name][-1]['sps']:,.0f} steps/s", file=sys.stderr)
    out = args.out or RESULTS / trainer.out
    out.write_text(render(trainer, rows, args.rounds, steps, (load_before, os.getloadavg()[0])))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
