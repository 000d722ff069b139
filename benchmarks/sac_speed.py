"""End-to-end SAC speed on HalfCheetah-v5: seedpool, Stable-Baselines3 and CleanRL, same hyperparameters.

All three train SAC with one common set: one env, 256-256 ReLU actor and twin critics,
minibatch 256, Adam 3e-4 for the critics, the actor and the temperature, gamma 0.99,
tau 0.005, automatic entropy tuning toward -6, one critic and one actor step per env
step (CleanRL's ``--policy-frequency 1``, SB3's only schedule), uniform actions for the
first ``learning_starts`` steps, torch with the same number of CPU threads for all three
(``--threads``, default 1; SB3's and CleanRL's own default is every core). Runs are interleaved
(seedpool, SB3, CleanRL, seedpool, ...) so that machine noise hits all of them; each row
records the load average (1 min) before it.

CleanRL is run as its shipped `cleanrl/sac_continuous_action.py` (pass the file with
``--cleanrl-file``, e.g. unpacked from the cleanrl 1.2.0 wheel) in a subprocess, after the
textual edits in ``CLEANRL_EDITS`` that port it from gym 0.23 to today's gymnasium (listed
in the report); its steps/s is its own clock (steps over the time since its start, setup
excluded), as seedpool's and SB3's are.

Measured per run: env steps per second over the whole run (setup excluded), which on this
budget is almost all gradient steps. Short budgets measure speed only, not learning.

    python benchmarks/sac_speed.py --cleanrl-file PATH [--repeats 3] [--steps 2000] [--learning-starts 500]
        [--precision auto,fp32] [--libs seedpool,sb3,cleanrl] [--threads 1]

writes benchmarks/results/sac_speed.md (machine, versions, load average, per-run rows, medians, ratios).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from seedpool.bench.report import machine_info
from seedpool.bench.scripts import edited_script

OUT = Path(__file__).parent / "results" / "sac_speed.md"
ENV = "HalfCheetah-v5"
LR = 3e-4

CLEANRL_EDITS: tuple[tuple[str, str, str], ...] = (
    ("gym -> gymnasium", "import gym\n", "import gymnasium as gym\n"),
    ("seed through reset, not env.seed", "        env.seed(seed)\n", ""),
    ("final observation in the same step (gymnasium 1.x autoreset mode)",
     "make_env(args.env_id, args.seed, 0, args.capture_video, run_name)])",
     "make_env(args.env_id, args.seed, 0, args.capture_video, run_name)], "
     "autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)"),
    ("reset returns (obs, info)", "obs = envs.reset()", "obs, _ = envs.reset(seed=args.seed)"),
    ("step returns terminations and truncations",
     "next_obs, rewards, dones, infos = envs.step(actions)",
     "next_obs, rewards, terminations, truncations, infos = envs.step(actions)\n"
     "        dones = terminations | truncations"),
    ("episode statistics as a dict of arrays", "        for info in infos:\n",
     "        for info in ([{'episode': {k: v[0] for k, v in infos['episode'].items()}}]\n"
     "                     if '_episode' in infos and infos['_episode'][0] else []):\n"),
    ("final observation from info['final_obs']", 'infos[idx]["terminal_observation"]', 'infos["final_obs"][idx]'),
    ("terminations (not time limits) end bootstrapping",
     "rb.add(obs, real_next_obs, actions, rewards, dones, infos)",
     "rb.add(obs, real_next_obs, actions, rewards, terminations, infos)"),
    ("the replay is told terminations only", "handle_timeout_termination=True", "handle_timeout_termination=False"),
    ("print the total training time at the end", "    envs.close()\n    writer.close()",
     "    print(f'TOTAL_SECONDS {time.time() - start_time}', flush=True)\n    envs.close()\n    writer.close()"),
)
"""(what, old text, new text): the edits that run CleanRL 1.2.0's gym-0.23 script on gymnasium 1.x."""


@dataclasses.dataclass
class Result:
    """One training run."""

    lib: str
    steps: int
    seconds: float
    load_before: float

    @property
    def sps(self) -> float:
        return self.steps / self.seconds


THREADS = 1
"""Torch CPU threads of every library's run (`--threads`)."""


def run_seedpool(total: int, learning_starts: int, seed: int, precision: str) -> Result:
    """``precision``: ``auto``, ``fp32`` or ``bf16``, optionally followed by ``-autograd`` (without
    the hand-written gradients of `seedpool.kernels.offpolicy_gradients`, as every fp32 update was
    before them) and/or ``-actor-after`` (without the joint update: the actor steps after the
    critics, in a pass of its own, as before it), e.g. ``fp32-actor-after``."""
    from seedpool.trainers.sac import sac_defaults, train_sac

    label, hand, joint = f"seedpool {precision}", "-autograd" not in precision, "-actor-after" not in precision
    precision = precision.split("-")[0]
    cfg = sac_defaults(ENV)
    cfg = dataclasses.replace(cfg, total_timesteps=total, seed=seed, runs_dir=Path(tempfile.mkdtemp()),
                              progress="off", checkpoint_every_s=1e9, backend="serial",
                              precision=precision, torch_threads=THREADS,
                              sac=dataclasses.replace(cfg.sac, learning_starts=learning_starts, q_lr=LR, policy_lr=LR,
                                                      policy_frequency=1, buffer_size=max(total, 10_000),
                                                      hand_gradients=hand, joint_update=joint))
    load = os.getloadavg()[0]
    result = train_sac(cfg)
    # The run's own clock: training time, setup excluded.
    return Result(label, result.step, result.step / result.sps, load)


def run_sb3(total: int, learning_starts: int, seed: int) -> Result:
    import gymnasium as gym
    from stable_baselines3 import SAC

    env = gym.make(ENV)
    model = SAC("MlpPolicy", env, learning_rate=LR, learning_starts=learning_starts, buffer_size=max(total, 10_000),
                seed=seed, device="cpu", verbose=0)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    model.learn(total_timesteps=total)
    seconds = time.perf_counter() - t0
    env.close()
    return Result("sb3", total, seconds, load)


def patched_cleanrl(source: Path, dest: Path) -> Path:
    """CleanRL's script with `CLEANRL_EDITS` applied, written to ``dest``; refuses a file they do not fit."""
    return edited_script(source, dest, CLEANRL_EDITS, "cleanrl 1.2.0's sac_continuous_action.py")


def run_cleanrl(script: Path, total: int, learning_starts: int, seed: int) -> Result:
    cmd = [sys.executable, str(script), "--env-id", ENV, "--total-timesteps", str(total), "--seed", str(seed),
           "--learning-starts", str(learning_starts), "--q-lr", str(LR), "--policy-lr", str(LR),
           "--policy-frequency", "1", "--buffer-size", str(max(total, 10_000)), "--cuda", "False"]
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS), "PYTHONWARNINGS": "ignore"}
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, cwd=tempfile.mkdtemp(), env=env, capture_output=True, text=True, check=False)
    match = re.search(r"TOTAL_SECONDS ([0-9.]+)", out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"CleanRL failed (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return Result("cleanrl", total, float(match.group(1)), load)


def _auto_precisions() -> tuple[str, str]:
    """What `--precision auto` resolves to here for SAC's learning (256 rows) and acting (1 env)."""
    import gymnasium as gym
    import numpy as np

    from seedpool.models.continuous import ContinuousAgent, ContinuousModelConfig
    from seedpool.models.precision import resolve_precision

    agent = ContinuousAgent(gym.spaces.Box(-np.inf, np.inf, (17,), np.float32), gym.spaces.Box(-1, 1, (6,), np.float32),
                            ContinuousModelConfig(), stochastic=True)
    return resolve_precision("auto", "cpu", agent, rows=256), resolve_precision("auto", "cpu", agent, rows=1)


def round_ratios(results: list[Result], libs: list[str]) -> list[str]:
    """Each seedpool row's steps/s over each other library's in the same round (runs close in time
    see similar load), and the median of those ratios."""
    rounds = [results[i:i + len(libs)] for i in range(0, len(results), len(libs))]
    lines = []
    for mine in (lib for lib in libs if lib.startswith("seedpool")):
        for other in (lib for lib in libs if not lib.startswith("seedpool")):
            ratios = [by[mine].sps / by[other].sps for by in ({r.lib: r for r in rnd} for rnd in rounds)
                      if mine in by and other in by]
            lines.append(f"- {mine} / {other}, per round: " + ", ".join(f"{x:.2f}" for x in ratios)
                         + f"; median **{statistics.median(ratios):.2f}x**")
    return ["Ratios within each round (the load drifts less within a round than across rounds):", *lines]


def report(results: list[Result], args, libs: list[str]) -> str:
    import stable_baselines3

    info = {**machine_info(), "stable-baselines3": stable_baselines3.__version__, "cleanrl": "1.2.0 (edited, below)"}
    cmd = " ".join(sys.argv[1:]).replace(args.note, "NOTE")
    cmd = cmd.replace(str(args.cleanrl_file), "CLEANRL_FILE") if args.cleanrl_file else cmd
    lines = [f"# SAC end to end on {ENV}: seedpool, Stable-Baselines3 and CleanRL, same hyperparameters", "",
             f"Written by `python benchmarks/sac_speed.py {cmd}` on {info['date']}.", "",
             f"- machine: {info['machine']}; {info['kernel']}; Python {info['python']}; seedpool {info['seedpool']}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in info.items()
                                       if k not in ("date", "machine", "kernel", "python", "seedpool")),
             f"- common settings: one env, 256-256 ReLU networks, minibatch 256, Adam {LR:g} for critics, actor and "
             "temperature, gamma 0.99, tau 0.005, autotuned entropy (target -6), one critic and one actor step "
             f"per env step after {args.learning_starts} uniform-random steps, torch {args.threads} thread(s) each, CPU",
             f"- seedpool's `--precision auto` on this machine: learning {_auto_precisions()[0]}, "
             f"acting {_auto_precisions()[1]}",
             f"- **note:** {args.note}: the load average (1 min) before each run is in its row. Compare the "
             "libraries only through the side-by-side ratios.", "",
             "| run | library | env steps | seconds | steps/s | load before |", "|---:|---|---:|---:|---:|---:|"]
    for i, r in enumerate(results):
        lines.append(f"| {i + 1} | {r.lib} | {r.steps:,} | {r.seconds:.1f} | {r.sps:.1f} | {r.load_before:.1f} |")
    med = {lib: statistics.median(r.sps for r in results if r.lib == lib) for lib in libs}
    lines += ["", "| library | median steps/s | vs SB3 | vs CleanRL |", "|---|---:|---:|---:|"]
    for lib, v in med.items():
        vs = [f"{v / med[o]:.2f}x" if o in med else "-" for o in ("sb3", "cleanrl")]
        lines.append(f"| {lib} | {v:.1f} | {vs[0]} | {vs[1]} |")
    lines += ["", *round_ratios(results, libs)]
    if "cleanrl" in libs:
        lines += ["", "CleanRL 1.2.0's `sac_continuous_action.py` was run with these edits (gym 0.23 -> gymnasium 1.x):"]
        lines += [f"- {what}" for what, _, _ in CLEANRL_EDITS]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--learning-starts", type=int, default=500)
    parser.add_argument("--precision", default="auto,fp32", help="seedpool precisions to run, comma separated")
    parser.add_argument("--libs", default="seedpool,sb3,cleanrl")
    parser.add_argument("--cleanrl-file", type=Path, help="cleanrl 1.2.0's cleanrl/sac_continuous_action.py")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads of every library")
    parser.add_argument("--note", default="the machine is shared (other training runs on both cores)",
                        help="what else ran on the machine, for the table")
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    torch.set_num_threads(THREADS)
    wanted = args.libs.split(",")
    if "cleanrl" in wanted and args.cleanrl_file is None:
        parser.error("--cleanrl-file is required to run CleanRL (or leave it out of --libs)")
    script = patched_cleanrl(args.cleanrl_file, Path(tempfile.mkdtemp()) / "sac_continuous_action.py") \
        if "cleanrl" in wanted else None
    runs = []
    if "seedpool" in wanted:
        runs += [(f"seedpool {p}", lambda n, ls, s, p=p: run_seedpool(n, ls, s, p)) for p in args.precision.split(",")]
    if "sb3" in wanted:
        runs.append(("sb3", run_sb3))
    if "cleanrl" in wanted:
        runs.append(("cleanrl", lambda n, ls, s: run_cleanrl(script, n, ls, s)))
    results = []
    for i in range(args.repeats):
        for _, run in runs:
            r = run(args.steps, args.learning_starts, i + 1)
            results.append(r)
            print(f"RESULT {r.lib} steps={r.steps} seconds={r.seconds:.1f} sps={r.sps:.1f} load={r.load_before:.1f}",
                  flush=True)
    text = report(results, args, [name for name, _ in runs])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
