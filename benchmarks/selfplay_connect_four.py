"""Self-play on PettingZoo's connect_four_v3: the learner's Elo and its win rates over wall-clock,
and what the league costs in engine throughput.

1. Curve: `seedpool train ppo --env connect_four_v3 --selfplay` with its defaults, paused every
   ``--eval-every`` seconds of training for matches of ``--games`` games (every seat equally,
   the policy sampling its moves) against a depth-limited alpha-beta search bot of this
   script (``--depth`` plies, the line-counting heuristic below), the tests' one-ply bot
   (wins when it can, blocks when it must) and a random player; the learner's Elo in its
   league beside them.
2. Throughput: agent rows the engine steps per second (both seats' rows of every env stepped,
   training included) of the same PPO run with ``--selfplay`` (a league of snapshots, each
   opponent a network of its own) and without (one shared policy playing both seats),
   ``--repeats`` interleaved windows of ``--seconds`` each after a warm-up; medians. The
   goal is a league run at 0.8x the one-policy run or better.

Writes benchmarks/results/selfplay_connect_four.md (and .png with matplotlib).

    python benchmarks/selfplay_connect_four.py [--minutes 20] [--eval-every 120] [--games 100]
        [--depth 2] [--seconds 60] [--repeats 3] [--seed 1]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "tests"))  # the tests' one-ply bot

import connect_four_bots  # noqa: E402

import seedpool  # noqa: E402
from seedpool.actors.agent_rows import AgentRows  # noqa: E402
from seedpool.league import Member  # noqa: E402
from seedpool.league.match import play_match  # noqa: E402
from seedpool.league.players import PolicyPlayer, RandomPlayer, ScriptedPlayer  # noqa: E402
from seedpool.runs import build_run  # noqa: E402

# -- the search bot: negamax with alpha-beta on bitboards (column c's cells are bits c*7 .. c*7+5,
# bottom up; bit c*7+6 stays empty so that shifts never carry a line from one column into the next).
H, W = 6, 7
H1 = H + 1
ORDER = (3, 2, 4, 1, 5, 0, 6)  # centre columns first: alpha-beta cuts more
WIN = 100_000
LINE_VALUE = (0, 1, 4, 16, 0)  # a line open to one side holding 0..3 of its pieces


def _four(b: int) -> bool:
    for s in (1, H1, H1 - 1, H1 + 1):
        m = b & (b >> s)
        if m & (m >> 2 * s):
            return True
    return False


def _lines() -> list[int]:
    out = []
    for r in range(H):
        for c in range(W):
            for dr, dc in ((1, 0), (0, 1), (1, 1), (-1, 1)):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < H and 0 <= cc < W for rr, cc in cells):
                    out.append(sum(1 << (cc * H1 + rr) for rr, cc in cells))
    return out


LINES = _lines()


def to_bits(obs: np.ndarray) -> tuple[int, int]:
    """(mover's pieces, all pieces) of PettingZoo's (6, 7, 2) board (row 5 at the bottom)."""
    obs = np.asarray(obs).reshape(H, W, 2)
    mine = full = 0
    for c in range(W):
        for r in range(H):
            bit = 1 << (c * H1 + (H - 1 - r))
            if obs[r, c, 0] > 0.5:
                mine |= bit
            if obs[r, c, 0] > 0.5 or obs[r, c, 1] > 0.5:
                full |= bit
    return mine, full


def _moves(full: int) -> list[tuple[int, int]]:
    out = []
    for c in ORDER:
        height = ((full >> (c * H1)) & ((1 << H1) - 1)).bit_length()
        if height < H:
            out.append((c, 1 << (c * H1 + height)))
    return out


def _heuristic(mine: int, theirs: int) -> int:
    score = 0
    for line in LINES:
        a, b = mine & line, theirs & line
        if a and not b:
            score += LINE_VALUE[bin(a).count("1")]
        elif b and not a:
            score -= LINE_VALUE[bin(b).count("1")]
    return score


def negamax(mine: int, full: int, depth: int, alpha: int, beta: int) -> int:
    """The mover's value of the position (a win sooner is worth more)."""
    moves = _moves(full)
    if not moves:
        return 0
    for _, bit in moves:
        if _four(mine | bit):
            return WIN + depth
    theirs = full ^ mine
    if depth == 0:
        return _heuristic(mine, theirs)
    best = -2 * WIN
    for _, bit in moves:
        best = max(best, -negamax(theirs, full | bit, depth - 1, -beta, -alpha))
        alpha = max(alpha, best)
        if alpha >= beta:
            break
    return best


class SearchBot:
    """The best move of a ``depth``-ply search, ties broken at random."""

    def __init__(self, depth: int, seed: int = 0) -> None:
        self.depth, self.rng = depth, np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, mask: np.ndarray) -> int:
        mine, full = to_bits(obs)
        scored = [(-negamax(full ^ mine, full | bit, self.depth - 1, -2 * WIN, 2 * WIN), c)
                  for c, bit in _moves(full)]
        top = max(v for v, _ in scored)
        return int(self.rng.choice([c for v, c in scored if v == top]))


# -- 1. the curve --------------------------------------------------------------------------------
def curve(args) -> list[dict]:
    run = build_run("ppo", ["--env", "connect_four_v3", "--selfplay", "--seed", str(args.seed),
                            "--total-timesteps", str(10**9), "--progress", "off", "--no-tensorboard",
                            "--runs-dir", str(args.runs_dir)])
    pool = seedpool.make("connect_four_v3", num_envs=16, seed=10_000, backend="serial")
    rows = AgentRows(pool, run.cfg.ma)
    opponents = {
        f"search{args.depth}": ScriptedPlayer(SearchBot(args.depth, args.seed), f"search{args.depth}"),
        "one_ply": ScriptedPlayer(connect_four_bots.one_ply, "one_ply"),
        "random": RandomPlayer(7, np.random.default_rng(args.seed)),
    }
    points, trained = [], 0.0
    while trained < args.minutes * 60:
        t0 = time.perf_counter()
        run.advance(until=lambda r: time.perf_counter() - t0 >= args.eval_every)
        trained += time.perf_counter() - t0
        frozen = PolicyPlayer(_copy(run.learner.model), rows.num_envs)
        point = {"train_s": trained, "step": run.step, "elo": run.metrics.get("league/elo", float("nan")),
                 "members": run.metrics.get("league/members", float("nan"))}
        for name, player in opponents.items():
            point[name] = play_match(rows, frozen, Member(name, "bot", player, 0), args.games).win_rate
        points.append(point)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items()), flush=True)
    run.close()
    pool.close()
    return points


def _copy(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(model)


# -- 2. throughput -------------------------------------------------------------------------------
def rows_per_second(selfplay: bool, seconds: float, seed: int) -> float:
    """Agent rows the engine stepped per second of a PPO run (training included), after a warm-up."""
    options = ["--env", "connect_four_v3", "--seed", str(seed), "--total-timesteps", str(10**9),
               "--progress", "off", "--no-tensorboard", "--runs-dir", "/tmp/seedpool_selfplay_bench"]
    run = build_run("ppo", options + (["--selfplay"] if selfplay else []))
    sampler = run.loop.inner.sampler if selfplay else run.loop.sampler
    stepped = (lambda: sampler.pool.rows_stepped) if selfplay else (lambda: sampler.env_steps)
    start = time.perf_counter()  # a warm-up: the first updates, the league's first snapshots
    run.advance(until=lambda r: time.perf_counter() - start >= min(20.0, seconds / 3))
    rows0, t0 = stepped(), time.perf_counter()
    run.advance(until=lambda r: time.perf_counter() - t0 >= seconds)
    rate = (stepped() - rows0) / (time.perf_counter() - t0)
    run.close()
    return rate


def throughput(args) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"one policy": [], "league": []}
    for r in range(args.repeats):
        for name in (("one policy", "league") if r % 2 == 0 else ("league", "one policy")):
            out[name].append(rows_per_second(name == "league", args.seconds, args.seed))
            print(f"repeat {r + 1}/{args.repeats} {name}: {out[name][-1]:,.0f} rows/s", flush=True)
    return out


# -- the report ----------------------------------------------------------------------------------
def machine() -> list[str]:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip() or "unknown"
    import pettingzoo

    return [
        f"- **date:** {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- **machine:** nproc = {os.cpu_count()}; {cpu}; load average at the start {os.getloadavg()[0]:.1f}",
        f"- **python:** {platform.python_version()}; **seedpool** {commit}; **torch** {torch.__version__}; "
        f"**numpy** {np.__version__}; **pettingzoo** {pettingzoo.__version__}",
    ]


def report(args, points: list[dict], rates: dict[str, list[float]], lines: list[str]) -> str:
    out = ["# Self-play PPO on connect_four_v3: Elo and win rates over wall-clock; league throughput", "",
           *lines, f"- **command:** `python benchmarks/selfplay_connect_four.py {' '.join(sys.argv[1:])}`", "",
           f"## Win rates over training time ({args.games} games per point, every seat equally)", "",
           f"| training s | learner steps | Elo (league) | members | vs search depth {args.depth} | vs one-ply | vs random |",
           "|---|---|---|---|---|---|---|"]
    for p in points:
        out.append(f"| {p['train_s']:.0f} | {p['step']:,} | {p['elo']:.0f} | {p['members']:.0f} | "
                   f"{p[f'search{args.depth}']:.2f} | {p['one_ply']:.2f} | {p['random']:.2f} |")
    if rates["league"]:
        one, league = statistics.median(rates["one policy"]), statistics.median(rates["league"])
        out += ["", f"## Engine rows per second, {args.repeats} interleaved windows of {args.seconds:.0f} s "
                "(medians, [min-max])", "", "| run | rows/s |", "|---|---|"]
        for name, values in rates.items():
            out.append(f"| {name} | {statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}] |")
        out += ["", f"League run / one-policy run: **{league / one:.2f}x** (goal: 0.8x or more)."]
    return "\n".join(out) + "\n"


def plot(points: list[dict], depth: int, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    t = [p["train_s"] / 60 for p in points]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(t, [p["elo"] for p in points])
    a.set(xlabel="training minutes", ylabel="learner Elo in its league")
    for name in (f"search{depth}", "one_ply", "random"):
        b.plot(t, [p[name] for p in points], label=name)
    b.set(xlabel="training minutes", ylabel="win rate", ylim=(0, 1))
    b.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--eval-every", type=float, default=120.0)
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/seedpool_selfplay_bench"))
    args = parser.parse_args()
    lines = machine()
    rates = throughput(args) if args.repeats > 0 else {"one policy": [], "league": []}
    points = curve(args) if args.minutes > 0 else []
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "selfplay_connect_four.md").write_text(report(args, points, rates, lines))
    if points:
        plot(points, args.depth, RESULTS / "selfplay_connect_four.png")
    print(f"wrote {RESULTS / 'selfplay_connect_four.md'}")


if __name__ == "__main__":
    main()
