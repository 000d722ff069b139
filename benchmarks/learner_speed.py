"""Learner speed: the time of one `update` of each learner on fixed synthetic data, optionally
side by side with the seedpool of another checkout (to show that no learner lost speed).

    nice -n 5 .venv/bin/python benchmarks/learner_speed.py [--ref DIR] [--quick] [--rounds 5]

Each checkout runs in its own worker process (``PYTHONPATH=<checkout>``, this same script
with ``--worker``), so the two never share an import. Both workers build every case the
same way: the same seeds, the same synthetic batch, the same hyperparameters, only through
the public classes (`PPOLearner`, `ImpalaLearner`, `DQNLearner`, `make_policy`,
`make_q_network`, `seedpool.records.Rollout` / `Unrolls`). Constructors are called by
inspecting their signatures (a dataclass-typed parameter gets its config, built from the
defaults with this script's values for the fields it has; the model, ``total_steps`` and
``device`` by name), so small constructor differences between the checkouts do not stop the
run; a hyperparameter a checkout's config lacks is listed in the notes.

Method: per case, each worker builds the learner and warms it up (2 updates, 1 for the Pong
on-policy cases); then ``--rounds`` rounds,
each timing a block of updates in one worker, then the other (A, B, then B, A, ...), so load
from elsewhere hits both alike. A figure is the median time per update over all blocks of
the run, with the range of the block medians beside it; the ratio is new/ref (below 1:
faster). Torch runs with ``--threads`` CPU threads (1, as the trainers' default).
``--precision fp32|bf16|auto`` goes to every learner whose constructor takes a ``precision``
(``auto`` resolved for its model, as the trainers do for these cases); a checkout whose learners take
none (before `--precision` existed) learns in fp32, the only arithmetic it had: so
``--ref <32f471f checkout> --precision auto`` is this machine's default update against that day's.

A worker process's speed can depend on the state its memory allocator settles in: with glibc's
default thresholds, 32f471f's float32 PPO update on Pong took ~950 ms in some processes and
~1,250 in others on the same machine (`seedpool.kernels.allocator`). Each worker reports
its allocator (a checkout with ``keep_freed_memory`` sets it as its trainers do), and
``--processes N`` repeats the whole measurement with N fresh pairs of workers, one after
another; the table then lists each process's median too. ``--ref-allocator keep`` hands the
ref worker the same thresholds through glibc's environment variables, for the gain of the code
alone against a ref from before ``keep_freed_memory``.

Writes ``benchmarks/results/learner_speed.md`` (or ``--out``) with the machine and versions.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "learner_speed.md"
CLOCK = time.perf_counter  # the worker's timer (--clock)
TOTAL_STEPS = 10**12  # annealed rates stay at their start value during the benchmark


@dataclass(frozen=True)
class Case:
    """One learner on one workload."""

    name: str
    learner: str  # class name in seedpool.algos
    obs: str  # "vector" (CartPole: 4 floats, 2 actions) or "atari" (4x84x84 uint8, 6 actions)
    shape: tuple[int, int]  # (T, B) of a rollout / (T, n) of unrolls / (batch, 0) for DQN
    hyper: dict[str, Any]  # learner config values (the rest: the config class defaults)
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig / QModelConfig values
    block: int = 1  # updates per timed block (halved by --quick)
    warmup: int = 2  # untimed updates first (1 with --quick)
    quick_shape: tuple[int, int] | None = None  # smaller data for --quick (noted in the table)


# The trainers' presets for these workloads, written out so both checkouts get the same ones.
CASES = [
    Case("ppo_cartpole", "PPOLearner", "vector", (32, 8),
         dict(num_steps=32, num_minibatches=1, update_epochs=20, learning_rate=1e-3, gamma=0.98,
              gae_lambda=0.8, ent_coef=0.0, clip_coef=0.2), block=5),
    Case("ppo_pong", "PPOLearner", "atari", (128, 8),
         dict(num_steps=128, num_minibatches=4, update_epochs=4, learning_rate=2.5e-4, clip_coef=0.1,
              clip_vloss=True, ent_coef=0.01, vf_coef=0.25), warmup=1, quick_shape=(16, 8)),
    Case("appo_cartpole", "ImpalaLearner", "vector", (8, 32),
         dict(unroll_length=8, unrolls_per_batch=32, learning_rate=1e-3, gamma=0.98, ent_coef=0.01,
              max_grad_norm=0.5, clip_coef=0.2, update_epochs=10, norm_adv=True), block=5),
    Case("impala_cartpole", "ImpalaLearner", "vector", (20, 32),
         dict(unroll_length=20, unrolls_per_batch=32), block=20),
    Case("appo_pong", "ImpalaLearner", "atari", (32, 32),
         dict(unroll_length=32, unrolls_per_batch=32, learning_rate=2.5e-4, ent_coef=0.01, max_grad_norm=0.5,
              norm_adv=True, clip_coef=0.1, update_epochs=4, num_minibatches=4), warmup=1, quick_shape=(4, 32)),
    Case("impala_pong", "ImpalaLearner", "atari", (20, 32),
         dict(unroll_length=20, unrolls_per_batch=32), quick_shape=(5, 32)),
    Case("dqn_cartpole", "DQNLearner", "vector", (64, 0),
         dict(learning_rate=2.3e-3, anneal_lr=True, double_q=True, target_network_frequency=128),
         model=dict(hidden_sizes=(256, 256)), block=50),
    Case("dqn_pong", "DQNLearner", "atari", (32, 0),
         dict(learning_rate=1e-4, double_q=True, target_network_frequency=1000, prioritized=True), block=10),
]


# ----------------------------------------------------------------------------- worker side
def _spaces(kind: str):
    import gymnasium as gym
    import numpy as np

    if kind == "vector":
        return gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(2)
    return gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6)


def _hints(fn: Any) -> dict[str, Any]:
    """Resolved annotations of ``fn``; names that do not resolve are left out."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # a hint naming something only imported under TYPE_CHECKING
        scope = sys.modules[fn.__module__].__dict__
        out = {}
        for name, ann in getattr(fn, "__annotations__", {}).items():
            try:
                out[name] = eval(ann, scope) if isinstance(ann, str) else ann  # noqa: S307 (own code's hints)
            except Exception:
                pass
        return out


def build_config(cls: type, values: dict[str, Any], used: set[str]) -> Any:
    """``cls()`` with ``values`` for the fields it has (nested config dataclasses too); marks them used."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
            used.add(f.name)
        elif dataclasses.is_dataclass(hints.get(f.name)):
            kwargs[f.name] = build_config(hints[f.name], values, used)
    return cls(**kwargs)


def build_learner(cls: type, model: Any, values: dict[str, Any]) -> tuple[Any, list[str]]:
    """``cls(...)`` from its signature; returns the learner and the values no config took."""
    import torch

    used: set[str] = set()
    hints = _hints(cls.__init__)
    kwargs: dict[str, Any] = {}
    for name, p in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        hint = hints.get(name)
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if isinstance(hint, type) and issubclass(hint, torch.nn.Module) or name in ("model", "policy", "network"):
            kwargs[name] = model
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[name] = build_config(hint, values, used)
        elif name in ("total_steps", "total_timesteps"):
            kwargs[name] = TOTAL_STEPS
        elif name == "device":
            kwargs[name] = "cpu"
        elif name == "precision":
            kwargs[name] = _precision(model)
        elif p.default is p.empty:
            raise TypeError(f"{cls.__name__}.__init__ needs {name!r} ({p.annotation}); "
                            "the benchmark knows model, config, total_steps and device")
    return cls(**kwargs), sorted(set(values) - used)


PRECISION = "fp32"
"""The worker's ``--precision`` (for learners that take one)."""


def _precision(model: Any) -> str:
    if PRECISION != "auto":
        return PRECISION
    from seedpool.models.precision import resolve_precision

    # Without the rows an MLP counts as small: what the trainers choose for these cases too
    # (every MLP case here has minibatches under `WIDE` rows or layers under `WIDE` units).
    return resolve_precision("auto", "cpu", model)


def _model(case: Case, obs_space: Any, action_space: Any) -> Any:
    import seedpool.models as models

    if case.learner == "DQNLearner":
        return models.make_q_network(obs_space, action_space, build_config(models.QModelConfig, case.model, set()))
    return models.make_policy(obs_space, action_space, build_config(models.ModelConfig, case.model, set()))


def _obs(rng: Any, space: Any, shape: tuple[int, ...]) -> Any:
    import numpy as np

    if space.dtype == np.uint8:
        return rng.integers(0, 256, (*shape, *space.shape), dtype=np.uint8)
    return rng.normal(size=(*shape, *space.shape)).astype(np.float32)


def _steps(rng: Any, T: int, n: int, num_actions: int) -> dict[str, Any]:
    """The per-step fields shared by rollouts and unrolls: about one episode end in 100 steps."""
    import numpy as np

    return {
        "actions": rng.integers(0, num_actions, (T, n)).astype(np.int64),
        "logp": np.full((T, n), -np.log(num_actions), np.float32) + rng.normal(0, 0.05, (T, n)).astype(np.float32),
        "rewards": rng.normal(size=(T, n)).astype(np.float32),
        "terminated": rng.random((T, n)) < 0.01,
        "truncated": np.zeros((T, n), bool),
        "valid": np.ones((T, n), bool),
    }


def make_rollout(rng: Any, T: int, B: int, obs_space: Any, action_space: Any) -> Any:
    """A `Rollout` [T, B] filled with synthetic steps."""
    import numpy as np
    import torch

    from seedpool.records import Rollout

    rollout = Rollout.allocate(T, B, obs_space, action_space, "cpu")
    steps = _steps(rng, T, B, int(action_space.n))
    values = {"obs": _obs(rng, obs_space, (T, B)), "logprobs": steps.pop("logp"),
              "values": rng.normal(size=(T + 1, B)).astype(np.float32), **steps}
    for f in dataclasses.fields(rollout):
        field = getattr(rollout, f.name)
        if field is not None:  # a feed-forward policy's rollout leaves the recurrent fields None
            field.copy_(torch.as_tensor(values[f.name]))
    return rollout


def make_unrolls(rng: Any, T: int, n: int, obs_space: Any, action_space: Any) -> Any:
    """`Unrolls` of n unrolls of T steps with synthetic data (fields filled by name)."""
    import numpy as np

    from seedpool.records import Unrolls

    values = {"obs": _obs(rng, obs_space, (T + 1, n)), **_steps(rng, T, n, int(action_space.n)),
              "first": np.zeros((T, n), bool), "versions": np.zeros((T, n), np.int64),
              "slots": np.arange(n, dtype=np.int64)}
    needed = [f.name for f in dataclasses.fields(Unrolls)
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = set(needed) - set(values)
    if missing:
        raise TypeError(f"Unrolls has fields the benchmark does not fill: {sorted(missing)}")
    return Unrolls(**{k: values[k] for k in needed})


def make_minibatch(rng: Any, batch: int, obs_space: Any, action_space: Any, gamma: float = 0.99) -> dict[str, Any]:
    """A replay minibatch as `DQNLearner.update` takes it (3-step discounts, IS weights)."""
    import numpy as np

    done = rng.random(batch) < 0.01
    return {"obs": _obs(rng, obs_space, (batch,)), "next_obs": _obs(rng, obs_space, (batch,)),
            "action": rng.integers(0, int(action_space.n), batch).astype(np.int64),
            "reward": rng.normal(size=batch).astype(np.float32),
            "discount": np.where(done, 0.0, gamma**3).astype(np.float32),
            "weights": rng.uniform(0.2, 1.0, batch).astype(np.float32),
            "indices": np.arange(batch, dtype=np.int64)}


def setup_case(case: Case, quick: bool) -> tuple[Any, Any, list[str]]:
    """(learner, its batch, values no config took), seeded alike in every checkout."""
    import numpy as np
    import torch

    import seedpool.algos as algos

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    obs_space, action_space = _spaces(case.obs)
    cls = getattr(algos, case.learner, None) or _find_class(case.learner)
    learner, unused = build_learner(cls, _model(case, obs_space, action_space), case.hyper)
    T, n = case.quick_shape if quick and case.quick_shape else case.shape
    if case.learner == "PPOLearner":
        batch = make_rollout(rng, T, n, obs_space, action_space)
    elif case.learner == "ImpalaLearner":
        batch = make_unrolls(rng, T, n, obs_space, action_space)
    else:
        batch = make_minibatch(rng, T, obs_space, action_space)
    return learner, batch, unused


def _find_class(name: str) -> type:
    import importlib

    for module in ("ppo", "impala", "dqn"):
        found = getattr(importlib.import_module(f"seedpool.algos.{module}"), name, None)
        if found is not None:
            return found
    raise ImportError(f"no learner class {name!r} in seedpool.algos")


def worker(threads: int, clock: str, precision: str) -> None:
    """Answer the driver's JSON lines on stdin (setup, time, versions), one reply line each."""
    global PRECISION
    PRECISION = precision
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the package prints goes to stderr, not into the replies
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    try:  # what the trainers' `setup_torch` does, in checkouts that have it
        try:
            from seedpool.kernels.allocator import keep_freed_memory
        except ImportError:  # a checkout from before seedpool.kernels
            from seedpool.experiment.allocator import keep_freed_memory

        allocator = "glibc thresholds set (keep_freed_memory)" if keep_freed_memory() else "the C library's default"
    except ImportError:
        allocator = "glibc's default (no keep_freed_memory in this checkout)"
        if os.environ.get("MALLOC_MMAP_THRESHOLD_"):
            allocator = "glibc thresholds from the environment (--ref-allocator keep)"
    global CLOCK
    CLOCK = time.process_time if clock == "cpu" else time.perf_counter
    built: dict[str, tuple[Any, Any]] = {}
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["cmd"] == "versions":
                import seedpool

                reply = {"torch": torch.__version__, "numpy": np.__version__, "seedpool": seedpool.__file__,
                         "allocator": allocator}
            elif msg["cmd"] == "setup":
                case = next(c for c in CASES if c.name == msg["case"])
                learner, batch, unused = setup_case(case, msg["quick"])
                for _ in range(msg["warmup"]):
                    learner.update(batch)
                built[case.name] = (learner, batch)
                reply = {"unused": unused}
            else:  # time a block
                learner, batch = built[msg["case"]]
                times = []
                for _ in range(msg["n"]):
                    t0 = CLOCK()
                    learner.update(batch)
                    times.append(CLOCK() - t0)
                reply = {"times": times}
        except Exception as err:  # reported in the table; the other cases go on
            reply = {"error": f"{type(err).__name__}: {err}"}
        replies.write(json.dumps(reply) + "\n")


# ----------------------------------------------------------------------------- driver side
class Worker:
    """This script with ``--worker`` under ``PYTHONPATH=checkout``."""

    def __init__(self, checkout: Path, threads: int, clock: str, precision: str,
                 extra_env: dict[str, str] | None = None) -> None:
        self.checkout = checkout
        env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": str(threads), **(extra_env or {})}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", "--threads", str(threads),
                                      "--clock", clock, "--precision", precision],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=checkout)

    def ask(self, **msg: Any) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker for {self.checkout} exited (code {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def measure(case: Case, workers: dict[str, Worker], rounds: int, quick: bool) -> dict[str, dict]:
    """Per checkout: per-update times of every block, block medians, or the error that stopped it."""
    out: dict[str, dict] = {}
    for label, w in workers.items():
        reply = w.ask(cmd="setup", case=case.name, quick=quick, warmup=1 if quick else case.warmup)
        out[label] = {"error": reply["error"]} if "error" in reply else {"times": [], "blocks": [],
                                                                         "unused": reply["unused"]}
    order = list(workers)
    for r in range(rounds):
        for label in order if r % 2 == 0 else order[::-1]:
            if "error" in out[label]:
                continue
            reply = workers[label].ask(cmd="time", case=case.name, n=_block(case, quick))
            if "error" in reply:
                out[label] = {"error": reply["error"]}
                continue
            out[label]["times"] += reply["times"]
            out[label]["blocks"].append(statistics.median(reply["times"]))
    return out


def merge(into: dict[str, dict], got: dict[str, dict]) -> None:
    """Add one set of worker processes' results for a case to those of the sets before."""
    for label, r in got.items():
        before = into.setdefault(label, {"times": [], "blocks": [], "processes": [], "unused": r.get("unused", [])})
        if "error" in before or "error" in r:
            into[label] = {"error": before.get("error") or r["error"]}
            continue
        before["times"] += r["times"]
        before["blocks"] += r["blocks"]
        before["processes"].append(statistics.median(r["times"]))


def _block(case: Case, quick: bool) -> int:
    return max(1, case.block // 2) if quick else case.block


def _commit(checkout: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _workload(case: Case, quick: bool) -> str:
    T, n = case.quick_shape if quick and case.quick_shape else case.shape
    obs = "4x84x84 uint8, Nature CNN" if case.obs == "atari" else "4 floats, MLP " + "-".join(
        map(str, case.model.get("hidden_sizes", (64, 64))))
    if case.learner == "DQNLearner":
        return f"minibatch {T} ({obs})"
    epochs = f", {case.hyper.get('update_epochs', 1)} ep x {case.hyper.get('num_minibatches', 1)} mb"
    return f"{'T' if case.learner == 'PPOLearner' else 'unroll'} {T} x {n} ({obs}){epochs}"


def _cell(result: dict) -> str:
    if "error" in result:
        return "error (notes)"
    blocks, processes = result["blocks"], result.get("processes", [])
    each = "; processes " + ", ".join(f"{1e3 * t:,.1f}" for t in processes) if len(processes) > 1 else ""
    return f"{1e3 * statistics.median(result['times']):,.1f} ({1e3 * min(blocks):,.1f}-{1e3 * max(blocks):,.1f}{each})"


def render(results: dict[str, dict[str, dict]], labels: dict[str, Path], info: dict[str, str],
           args: argparse.Namespace) -> str:
    """The markdown report: machine, versions, method, the table and its notes."""
    both = "ref" in labels
    head = ["case", "learner", "workload", "new ms/update"] + (["ref ms/update", "new/ref"] if both else [])
    lines = ["# Learner speed: one update on fixed synthetic data", "",
             f"`{' '.join(['benchmarks/learner_speed.py', *sys.argv[1:]])}`", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "Median time of one `update` over all timed blocks (range of the block medians in "
              "brackets, then with --processes the median of each worker process); blocks alternate between the "
              "checkouts' workers round by round. Ratios below 1: "
              "the new checkout is faster. On a shared 2-vCPU machine differences under ~10% are noise.", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    notes = []
    for case in CASES:
        if case.name not in results:
            continue
        res = results[case.name]
        row = [case.name, case.learner, _workload(case, args.quick), _cell(res["new"])]
        if both:
            ok = "error" not in res["new"] and "error" not in res["ref"]
            ratio = statistics.median(res["new"]["times"]) / statistics.median(res["ref"]["times"]) if ok else None
            row += [_cell(res["ref"]), f"{ratio:.2f}x" if ratio else ""]
        lines.append("| " + " | ".join(row) + " |")
        for label, r in res.items():
            if "error" in r:
                notes.append(f"- {case.name}, {label}: {r['error']}")
            elif r["unused"]:
                notes.append(f"- {case.name}, {label}: its config has no {', '.join(r['unused'])} (left at its default)")
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Parse options, run the workers, write the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ref", type=Path, help="another checkout whose seedpool to measure side by side")
    p.add_argument("--quick", action="store_true",
                   help="a ~1-minute check: 3 rounds, half blocks, one warm-up update, smaller Atari on-policy batches")
    p.add_argument("--rounds", type=int, help="timed blocks per case and checkout (default 5, quick 3)")
    p.add_argument("--cases", default="", help="comma-separated case names to run (default: all)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads in each worker")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: elapsed time; cpu: the worker's CPU time, less sensitive to other load "
                        "on a shared machine (with --threads 1 the two agree on a quiet one)")
    p.add_argument("--precision", choices=("fp32", "bf16", "auto"), default="fp32",
                   help="for the learners that take one (a checkout without the option learns in fp32)")
    p.add_argument("--processes", type=int, default=1,
                   help="measure with this many fresh worker processes per checkout, one set after another "
                        "(a process's speed can depend on how its allocator settled, see the docstring)")
    p.add_argument("--ref-allocator", choices=("as-shipped", "keep"), default="as-shipped",
                   help="keep: the ref worker gets this checkout's glibc thresholds through the environment "
                        "(for the code's gain alone, when the ref predates keep_freed_memory)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.threads, args.clock, args.precision)
    rounds = args.rounds or (3 if args.quick else 5)
    wanted = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    if not wanted:
        raise SystemExit(f"no case named in --cases {args.cases!r}; cases: {', '.join(c.name for c in CASES)}")
    labels = {"new": ROOT} | ({"ref": args.ref.resolve()} if args.ref else {})
    if args.ref and not (args.ref / "seedpool" / "__init__.py").exists():
        raise SystemExit(f"--ref {args.ref}: expected a checkout with seedpool/__init__.py in it")
    from seedpool.bench.report import cpu_model  # this checkout's (a worker may import another's seedpool)
    from seedpool.kernels.allocator import environment as allocator_environment

    info = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} {platform.release()}",
            "python": platform.python_version(), "torch threads per worker": str(args.threads),
            "precision": f"--precision {args.precision} (learners that take none: fp32)",
            "clock": "CPU time of the worker process" if args.clock == "cpu" else "wall-clock",
            "load average before": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    results: dict[str, dict[str, dict]] = {}
    for process in range(args.processes):  # a fresh pair of workers each time: see --processes
        workers = {label: Worker(path, args.threads, args.clock, args.precision,
                                 allocator_environment() if label == "ref" and args.ref_allocator == "keep" else None)
                   for label, path in labels.items()}
        try:
            for label, w in workers.items():
                v = w.ask(cmd="versions")
                if not Path(v["seedpool"]).resolve().is_relative_to(labels[label]):
                    raise SystemExit(f"the {label} worker imported seedpool from {v['seedpool']}, not from {labels[label]}")
                info[f"{label}: {labels[label]}"] = f"commit {_commit(labels[label])}; torch {v['torch']}, " \
                    f"numpy {v['numpy']}; allocator: {v.get('allocator', '?')}"
            for case in wanted:
                merge(results.setdefault(case.name, {}), measure(case, workers, rounds, args.quick))
                print(f"process set {process + 1}, {case.name}: "
                      + ", ".join(f"{k} {_cell(r)}" for k, r in results[case.name].items()), flush=True)
        finally:
            for w in workers.values():
                w.close()
    info["load average after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    info["worker processes per checkout, one after another"] = str(args.processes)
    info["rounds x updates per block (after warm-up updates)"] = f"{rounds} x (" + ", ".join(
        f"{c.name} {_block(c, args.quick)} ({1 if args.quick else c.warmup})" for c in wanted) + ")"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, labels, info, args))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
