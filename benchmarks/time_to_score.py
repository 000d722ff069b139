"""Time to score on Pong-v5: wall-clock to a mean of the last 20 games of 0, 10, 15 and 18,
seedpool against the systems a user would pick instead, on this machine, one after another.

    python benchmarks/time_to_score.py run seedpool-ppo --minutes 60
    python benchmarks/time_to_score.py run seedpool-ppo --minutes 60 --seed 2 --record seedpool-ppo-seed2
    python benchmarks/time_to_score.py run seedpool-ppo-8envs --minutes 60
    python benchmarks/time_to_score.py run seedpool-ppo-small-cnn --minutes 60
    python benchmarks/time_to_score.py run seedpool-ppo-2epochs --minutes 60
    python benchmarks/time_to_score.py run cleanrl-ppo --minutes 10 --cleanrl-file PATH/ppo_atari_envpool.py
    python benchmarks/time_to_score.py run sf-appo --minutes 10 --sf-python SF_VENV/bin/python
    python benchmarks/time_to_score.py ingest seedpool-ppo RUN_DIR --launched 2026-11-27T16:06:00Z --command "..."
    python benchmarks/time_to_score.py table

`run` starts the system in a fresh process with a wall-clock limit (SIGINT at the limit, as a
user's Ctrl-C: seedpool writes its checkpoint and summary) and writes
`results/time_to_score/<system>.json`: the command, the edits made to a peer's script, machine
and versions, the note, and each finished game as (seconds since launch, env steps, return).
`ingest` records a seedpool run started by hand with the same command (its run folder and the
time it was launched). `table` writes `results/time_to_score.md` from the records.

The peers run as shipped where today's packages allow: CleanRL 1.2.0's `ppo_atari_envpool.py`
with the edits listed in `CLEANRL_EDITS` (gym 0.x -> gymnasium 1.x through envpool's gymnasium
interface; the algorithm, its settings and its logging untouched), on torch's default threads.
Sample Factory 2.1.1 (it needs numpy<2 and gymnasium<1.0: its own virtualenv, `--sf-python`) runs
its shipped Atari example with its Atari defaults on the CPU; it logs no single games, so its
record holds its own mean of the last 20 episodes (`--stats_avg=20`) as it writes it, counted in
agent steps (`--summaries_use_frameskip=False`); neither option changes what it learns.
A system that does not reach a score within its run gets its measured steps/s and, where its
algorithm and settings are those of `seedpool-ppo-8envs` (seedpool's PPO with CleanRL's 8 envs x 4
minibatches, the Atari defaults before cb33512), a projection: the env steps that run needed for
that score divided by the peer's steps/s, marked as projected. `seedpool-ppo` is the defaults of
the day (32 envs x 16 minibatches since cb33512).

Records are tabled per machine (the `machine` line of each record: CPU model, family and vector
instructions), since one machine name has covered different processors here; ratios are taken
only within a machine's table.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from seedpool.bench.report import machine_info
from seedpool.bench.scripts import edited_script

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "results" / "time_to_score"
TABLE = ROOT / "benchmarks" / "results" / "time_to_score.md"
SCORES = (0.0, 10.0, 15.0, 18.0)
SF_ARGS = ["-m", "sf_examples.atari.train_atari", "--env=atari_pong", "--experiment=pong", "--device=cpu",
           "--seed=1", "--summaries_use_frameskip=False", "--stats_avg=20"]
WINDOW = 20  # games in the mean
# Peers whose algorithm and settings are those of seedpool's PPO in PROJECT_FROM, so that its env
# steps to a score at their steps/s is a fair projection: CleanRL's script is the same PPO; Sample
# Factory's Atari defaults are synchronous PPO without V-trace, 8 envs x 128 steps, 4 epochs of
# 4 minibatches of 256, clip 0.1, lr 2.5e-4 decayed linearly (it also normalises inputs and returns).
PROJECTED = {"cleanrl-ppo", "sf-appo"}
PROJECT_FROM = "seedpool-ppo-8envs"  # env steps do not depend on the machine: any machine's record

SEEDPOOL_PPO = ["seedpool", "train", "ppo", "--env", "Pong-v5", "--stop-at-return", "18"]
SEEDPOOL_SYSTEMS = {"seedpool-ppo": SEEDPOOL_PPO,
                    "seedpool-ppo-8envs": [*SEEDPOOL_PPO, "--num-envs", "8", "--ppo.num-minibatches", "4"],
                    "seedpool-ppo-small-cnn": [*SEEDPOOL_PPO, "--model.cnn", "small"],
                    "seedpool-ppo-2epochs": [*SEEDPOOL_PPO, "--ppo.update-epochs", "2", "--ppo.num-minibatches", "32"]}
CLEANRL_ARGS = ["--env-id", "Pong-v5", "--seed", "1", "--cuda", "False", "--total-timesteps", "10000000"]
CLEANRL_EDITS = [  # (what, old, new)
    ("gym 0.x -> gymnasium 1.x", "import gym\n", "import gymnasium as gym\n"),
    ("envpool's gymnasium interface", '        env_type="gym",\n', '        env_type="gymnasium",\n'),
    ("no assignment of num_envs and the single-env spaces (envpool's gymnasium env has them, read-only)",
     "    envs.num_envs = args.num_envs\n    envs.single_action_space = envs.action_space\n"
     "    envs.single_observation_space = envs.observation_space\n", ""),
    ("the wrapper forwards the single-env spaces (gymnasium 1.x wrappers forward no attributes)",
     '        self.num_envs = getattr(env, "num_envs", 1)\n',
     '        self.num_envs = getattr(env, "num_envs", 1)\n'
     "        self.single_action_space = env.single_action_space\n"
     "        self.single_observation_space = env.single_observation_space\n"),
    ("reset returns (obs, info)", "        observations = super().reset(**kwargs)\n",
     "        observations, _ = super().reset(**kwargs)\n"),
    ("step returns terminations and truncations",
     "        observations, rewards, dones, infos = super().step(action)\n",
     "        observations, rewards, terminated, truncated, infos = super().step(action)\n"
     "        dones = terminated | truncated\n"),
]


def patched_cleanrl(source: Path, dest: Path) -> Path:
    """CleanRL's script with `CLEANRL_EDITS` applied, as ``dest``/ppo_atari_envpool.py."""
    return edited_script(source, dest / "ppo_atari_envpool.py", CLEANRL_EDITS, "cleanrl 1.2.0's ppo_atari_envpool.py")


def launch(cmd: list[str], cwd: Path, minutes: float, log: Path) -> tuple[float, float]:
    """Run ``cmd`` until it ends or ``minutes`` pass (then SIGINT, and a kill 180 s later).
    Returns (launch time, seconds it ran) by the wall clock."""
    t0 = time.time()
    with open(log, "w") as out:
        # SIGINT back to its default in the child: a shell's background job inherits it ignored.
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            proc.wait(timeout=minutes * 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return t0, time.time() - t0


def seedpool_games(run_dir: Path, launched: float) -> list[tuple[float, int, float]]:
    """(seconds since launch, env steps, return) of each game in a seedpool run folder.

    metrics.csv's ``time_s`` counts from the run's clock start; the clock started when the run
    folder's config.json was written, so that file's time gives the offset from the launch."""
    offset = (run_dir / "config.json").stat().st_mtime - launched
    games = []
    with open(run_dir / "metrics.csv") as f:
        next(f)
        for line in f:
            step, time_s, name, value = line.rstrip("\n").split(",")
            if name == "charts/episodic_return":
                games.append((float(time_s) + offset, int(step), float(value)))
    return games


def tensorboard_series(logdir: Path, tag: str, launched: float) -> list[tuple[float, int, float]]:
    """(seconds since launch, step, value) of every event of ``tag`` in the event files under ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(Path(logdir).rglob("events.out.tfevents*"))
    if not files:
        raise SystemExit(f"no TensorBoard event files under {logdir}: did the run start? (see its log.txt)")
    acc = EventAccumulator(str(files[0].parent), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.wall_time - launched, int(e.step), float(e.value)) for e in acc.Scalars(tag)]


def record(system: str, command: str, launched: float, seconds: float, games: list, edits: list[str],
           note: str, means: bool = False, name: str | None = None) -> Path:
    """Write the system's record (json; ``name``.json, by default the system's name) and return
    its path; ``means``: the rows are the system's own means of the last 20 games rather than
    single games."""
    RECORDS.mkdir(parents=True, exist_ok=True)
    out = RECORDS / f"{name or system}.json"
    data = {"system": system, "command": command, "edits": edits, "note": note,
            "launched_utc": datetime.fromtimestamp(launched, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "seconds": round(seconds, 1), "machine": machine_info(),
            "means": means, "games": [[round(t, 2), s, r] for t, s, r in games]}
    out.write_text(json.dumps(data, indent=1))
    return out


def run(args: argparse.Namespace) -> Path:
    work = Path(tempfile.mkdtemp(prefix=f"tts_{args.system}_"))
    if args.system in SEEDPOOL_SYSTEMS:
        command = SEEDPOOL_SYSTEMS[args.system] + (["--seed", str(args.seed)] if args.seed is not None else [])
        launched, seconds = launch([*command, "--runs-dir", str(work / "runs")], work, args.minutes, work / "log.txt")
        (run_dir,) = (work / "runs").iterdir()
        games, edits = seedpool_games(run_dir, launched), []
        shown = " ".join(command)
    elif args.system == "cleanrl-ppo":
        if args.cleanrl_file is None:
            raise SystemExit("cleanrl-ppo needs --cleanrl-file (ppo_atari_envpool.py of cleanrl 1.2.0)")
        script = patched_cleanrl(args.cleanrl_file, work)
        cmd = [sys.executable, str(script), *CLEANRL_ARGS]
        launched, seconds = launch(cmd, work, args.minutes, work / "log.txt")
        games = tensorboard_series(work / "runs", "charts/episodic_return", launched)
        edits = [what for what, _, _ in CLEANRL_EDITS]
        shown = "python ppo_atari_envpool.py " + " ".join(CLEANRL_ARGS)
    elif args.system == "sf-appo":
        if args.sf_python is None:
            raise SystemExit("sf-appo needs --sf-python: the python of a virtualenv with sample-factory 2.1.1")
        cmd = [str(args.sf_python), *SF_ARGS, f"--train_dir={work / 'train_dir'}"]
        launched, seconds = launch(cmd, work, args.minutes, work / "log.txt")
        means = tensorboard_series(work / "train_dir" / "pong" / ".summary" / "0", "reward/reward", launched)
        shown = "python " + " ".join(SF_ARGS)
        print(f"{args.system}: {len(means)} reports in {seconds / 60:.1f} min; log and files in {work}")
        return record(args.system, shown, launched, seconds, means, [], args.note, means=True, name=args.record)
    else:
        raise SystemExit(f"unknown system {args.system!r}")
    print(f"{args.system}: {len(games)} games in {seconds / 60:.1f} min; log and files in {work}")
    system = args.system if args.seed is None else f"{args.system}, seed {args.seed}"
    return record(system, shown, launched, seconds, games, edits, args.note, name=args.record)


def ingest(args: argparse.Namespace) -> Path:
    launched = datetime.fromisoformat(args.launched.replace("Z", "+00:00")).timestamp()
    games = seedpool_games(args.run_dir, launched)
    seconds = args.seconds if args.seconds is not None else max(t for t, _, _ in games)
    return record(args.system, args.command, launched, seconds, games, [], args.note, name=args.record)


def first_reached(games: list, score: float, means: bool = False) -> tuple[float, int] | None:
    """(seconds, env steps) at the first game after which the mean of the last 20 is >= score
    (``means``: the rows are already such means)."""
    if means:
        return next(((t, step) for t, step, mean in games if mean >= score), None)
    returns = []
    for t, step, ret in games:
        returns.append(ret)
        if len(returns) >= WINDOW and sum(returns[-WINDOW:]) / WINDOW >= score:
            return t, step
    return None


def table(_: argparse.Namespace) -> Path:
    records = [json.loads(p.read_text()) for p in sorted(RECORDS.glob("*.json"))]
    if not records:
        raise SystemExit(f"no records in {RECORDS}: run `time_to_score.py run SYSTEM` first")
    steps_from = next((r for r in records if r["system"] == PROJECT_FROM), None)
    lines = ["# Time to score on Pong-v5: seedpool and the systems a user would pick instead", "",
             "Written by `python benchmarks/time_to_score.py table` from the records in "
             "`results/time_to_score/`. Each system ran alone on the machine, one after another; "
             f"a score is reached at the first game after which the mean of the last {WINDOW} games is at "
             "least that score; times are wall-clock from the process launch. One table per machine: "
             "compare systems only within one.", ""]
    machines = list(dict.fromkeys(r["machine"]["machine"] for r in records))
    for machine in machines:
        lines += [f"## {machine}", "", _score_table([r for r in records if r["machine"]["machine"] == machine],
                                                    steps_from), ""]
    lines += ["## Runs", ""]
    for r in records:
        m = r["machine"]
        lines += [f"### {r['system']}, {r['launched_utc'][:10]}", "", f"- command: `{r['command']}`",
                  f"- launched: {r['launched_utc']} UTC",
                  f"- machine: {m.get('machine', '')}; seedpool {m.get('seedpool', '')}; torch {m.get('torch', '')}; "
                  f"envpool {m.get('envpool', '')}"]
        if r["edits"]:
            lines.append("- edits to the shipped script (nothing else changed): " + "; ".join(r["edits"]))
        if r["note"]:
            lines.append(f"- note: {r['note']}")
        if r.get("machine_note"):
            lines.append(f"- machine line: {r['machine_note']}")
        lines.append("")
    lines += [f"Projected: the env steps `{PROJECT_FROM}` (seedpool's PPO with CleanRL's 8 envs x 128 steps "
              "and 4 minibatches) needed for that score at the system's own measured steps/s; a projection, "
              "not a run. Only for peers that run the same algorithm with the same settings: CleanRL's PPO, "
              "and Sample Factory's Atari defaults (synchronous PPO without V-trace, 8 envs x 128 steps, 4 "
              "epochs of 4 minibatches of 256, clip 0.1, lr 2.5e-4 decayed linearly; it also normalises "
              "inputs and returns).", ""]
    TABLE.write_text("\n".join(lines))
    return TABLE


def _score_table(records: list[dict], steps_from: dict | None) -> str:
    """The markdown table of one machine's records; peers in PROJECTED that did not reach a
    score get the time ``steps_from``'s env steps to it take at their steps/s."""
    head = "| system | ran (min) | env steps | steps/s | " + " | ".join(f"to {s:g}" for s in SCORES) + " |"
    rows = [head, "|---|---:|---:|---:|" + "---:|" * len(SCORES)]
    for r in records:
        games = r["games"]
        steps = games[-1][1] if games else 0
        sps = steps / games[-1][0] if games else 0.0
        cells = []
        for score in SCORES:
            hit = first_reached(games, score, r.get("means", False))
            if hit is not None:
                cells.append(f"{hit[0] / 60:.1f} min ({hit[1] / 1e6:.2f}M steps)")
                continue
            ref_hit = first_reached(steps_from["games"], score) if steps_from and r is not steps_from else None
            if ref_hit is not None and r["system"] in PROJECTED and sps > 0:
                cells.append(f"not in {r['seconds'] / 60:.0f} min; projected {ref_hit[1] / sps / 60:.0f} min")
            else:
                cells.append(f"not in {r['seconds'] / 60:.0f} min")
        rows.append(f"| {r['system']} | {r['seconds'] / 60:.1f} | {steps:,} | {sps:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("system", choices=[*SEEDPOOL_SYSTEMS, "cleanrl-ppo", "sf-appo"])
    r.add_argument("--minutes", type=float, default=60.0)
    r.add_argument("--cleanrl-file", type=Path)
    r.add_argument("--sf-python", type=Path)
    r.add_argument("--seed", type=int, default=None, help="seedpool's systems: train with --seed N (default: the trainer's)")
    r.add_argument("--note", default="")
    r.add_argument("--record", help="the record's file name (default: the system's): a run on another machine keeps both")
    i = sub.add_parser("ingest")
    i.add_argument("system")
    i.add_argument("run_dir", type=Path)
    i.add_argument("--launched", required=True, help="UTC launch time, ISO 8601")
    i.add_argument("--command", required=True)
    i.add_argument("--seconds", type=float, default=None, help="how long it ran (default: its last game)")
    i.add_argument("--note", default="")
    i.add_argument("--record", help="the record's file name (default: the system's)")
    sub.add_parser("table")
    args = p.parse_args(argv)
    out = {"run": run, "ingest": ingest, "table": table}[args.what](args)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
