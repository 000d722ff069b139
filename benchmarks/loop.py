"""The engine inside a training loop: seedpool vs gymnasium SyncVectorEnv vs EnvPool.

    .venv/bin/python benchmarks/loop.py                  # every case, 21 rounds (~12 min on 2 cores)
    .venv/bin/python benchmarks/loop.py --cases hc2,pong8 --repeats 3 --rollout-scale 0.25
    .venv/bin/python benchmarks/loop.py --quick          # smoke run, table not written

The loop is a user's, not the engine's: a policy forward on every batch of observations, the
step, and every `rollout` steps a torch update of the policy that uses all of torch's
threads (CleanRL's PPO shape: 10 epochs of minibatches of 64 transitions for the MLP cases,
CleanRL's Atari shape, shortened, for Pong). The envs of the MuJoCo/classic cases carry
CleanRL's continuous-control wrappers, built by the same thunks for every engine; EnvPool
runs its own envs (no such wrappers; its MuJoCo tasks are the -v4 versions), so its column
is a reference, not a like-for-like. Every engine of a case is built side by side and warmed
up; then each round times one iteration (rollout + update) of every engine, in an order
rotated every round, so that load which comes and goes hits them alike. The table reports
medians and min-max over rounds, and the median of per-round ratios to the baseline.

The off-policy cases (`*_offpolicy`) have SAC/TD3's shape instead (benchmarks/loop_offpolicy.py):
every vector step is followed by one gradient step of a 256-256 actor and critic on 256
replay rows, so the learner runs between every two steps and the async pattern can hide the
whole env step behind it.

Engines: `gym_sync` (gymnasium.vector.SyncVectorEnv), `auto` (seedpool.make_vec, no backend
argument: the one-line replacement), `serial` (backend="serial"), `process` (backend="process"),
`overlap` (seedpool's async pattern: `send` the actions before the update and `recv` after it,
so the envs step while the learner computes; envs in worker processes), `overlap_1w` (the same,
one worker process), `overlap_thread` (the same, envs in worker threads), `envpool` (envpool.make,
where it has the task). `name@T`: that engine's loop with torch on T threads (built under T
too, so that `auto` sees them); without it, torch's default (one thread per core).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import seedpool
from seedpool.bench.report import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules, also when imported
from loop_offpolicy import OffPolicyLoop  # noqa: E402
from loop_report import header, table, threads_of  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "loop.md"


@dataclass(frozen=True)
class LoopCase:
    """One row group of the table: a task, its env count and the learner's shape."""

    name: str
    env_id: str
    num_envs: int
    envpool_id: str | None  # EnvPool's name for the task, None where it has none
    rollout: int  # steps per env between updates (off-policy: vector steps per timed iteration)
    atari: bool = False
    offpolicy: bool = False  # one gradient step per vector step (SAC/TD3's shape)


CASES = {
    "hc2": LoopCase("HalfCheetah-v5 x 2", "HalfCheetah-v5", 2, "HalfCheetah-v4", 256),
    "hopper4": LoopCase("Hopper-v5 x 4", "Hopper-v5", 4, "Hopper-v4", 128),
    "hc8": LoopCase("HalfCheetah-v5 x 8", "HalfCheetah-v5", 8, "HalfCheetah-v4", 64),
    "pendulum4": LoopCase("Pendulum-v1 x 4", "Pendulum-v1", 4, "Pendulum-v1", 128),
    "pong8": LoopCase("Pong-v5 x 8 (Nature CNN)", "Pong-v5", 8, "Pong-v5", 32, atari=True),
    "hc4_offpolicy": LoopCase("HalfCheetah-v5 x 4, off-policy (1 gradient step per step)", "HalfCheetah-v5", 4,
                              None, 100, offpolicy=True),
    "hc16_offpolicy": LoopCase("HalfCheetah-v5 x 16, off-policy (1 gradient step per step)", "HalfCheetah-v5", 16,
                               None, 50, offpolicy=True),
}


def cleanrl_thunk(env_id: str, gamma: float = 0.99) -> Callable[[], gym.Env]:
    """CleanRL ppo_continuous_action.py's make_env (gymnasium 1.x spelling)."""

    def thunk() -> gym.Env:
        env = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda r: float(np.clip(r, -10, 10)))
        return env

    return thunk


# -- the learner ------------------------------------------------------------------------------
def mlp_policy(obs_dim: int, act_dim: int) -> nn.Module:
    """CleanRL's 64x64 tanh actor."""
    return nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, act_dim))


def nature_cnn(actions: int) -> nn.Module:
    """CleanRL's Atari network (the policy head only)."""
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(),
        nn.Linear(512, actions))


@dataclass
class Learner:
    """A policy, its optimizer, and the update a PPO iteration would run on a rollout."""

    net: nn.Module
    atari: bool
    opt: torch.optim.Optimizer = field(init=False)

    def __post_init__(self) -> None:
        self.opt = torch.optim.Adam(self.net.parameters(), lr=3e-4)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The batch's actions (the forward a rollout runs on every step)."""
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32)
            out = self.net(x / 255.0 if self.atari else x)
        if self.atari:
            return out.argmax(1).numpy()
        return torch.tanh(out).numpy().astype(np.float32)

    def update(self, obs: list[np.ndarray]) -> None:
        """Gradient steps over the rollout: CleanRL's epochs x minibatches (shortened for Atari)."""
        data = torch.as_tensor(np.concatenate(obs), dtype=torch.float32)
        if self.atari:
            data = data / 255.0
        epochs, mb = (1, 128) if self.atari else (10, 64)
        for _ in range(epochs):
            for idx in torch.randperm(len(data)).split(mb):
                loss = self.net(data[idx]).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


# -- the engines --------------------------------------------------------------------------------
# The async pattern's layouts: where the envs live while this process learns.
OVERLAP = {"overlap": {"backend": "process"}, "overlap_1w": {"backend": "process", "num_workers": 1},
           "overlap_thread": {"backend": "thread"}}


def build(engine: str, case: LoopCase) -> Any:
    """The vector env `engine` (its name without `@T`) gives for `case` (None where it has no such task)."""
    n = case.num_envs
    if engine == "envpool":
        if case.envpool_id is None:
            return None
        import envpool

        return envpool.make(case.envpool_id, env_type="gymnasium", num_envs=n, seed=0)
    if case.atari:
        if engine == "gym_sync":
            return None  # CleanRL's Atari loop is written for EnvPool: compare with that
        kwargs = {} if engine == "auto" else OVERLAP.get(engine, {"backend": engine})
        return seedpool.make(case.env_id, num_envs=n, seed=0, **kwargs)
    thunks = [cleanrl_thunk(case.env_id) for _ in range(n)]
    if engine == "gym_sync":
        return gym.vector.SyncVectorEnv(thunks)
    if engine in OVERLAP:  # the envs must live in workers to step while this process learns
        return seedpool.make(thunks, seed=0, **OVERLAP[engine])
    kwargs = {} if engine == "auto" else {"backend": engine}
    return seedpool.make_vec(thunks, **kwargs)


class Loop:
    """One engine's training loop, advanced an iteration (a rollout and an update) at a time."""

    def __init__(self, envs: Any, engine: str, case: LoopCase):
        self.envs, self.case, self.overlap = envs, case, engine in OVERLAP
        # EnvPool's envs name the single env's spaces without the "single_" (as seedpool's pools also do)
        space = getattr(envs, "single_action_space", envs.action_space)
        obs_space = getattr(envs, "single_observation_space", envs.observation_space)
        if case.atari:
            net = nature_cnn(int(space.n))
        else:
            net = mlp_policy(int(np.prod(obs_space.shape)), int(np.prod(space.shape)))
        self.learner = Learner(net, case.atari)
        self.obs = (envs.reset(seed=0) if engine != "envpool" else envs.reset())[0]

    def iteration(self) -> dict[str, float]:
        """Run one rollout and update; steps/s and the share of each phase in the wall time."""
        envs, learner, case = self.envs, self.learner, self.case
        phases = {"act": 0.0, "env": 0.0, "learn": 0.0}
        start = time.perf_counter()
        rollout = []
        for t in range(case.rollout):
            t0 = time.perf_counter()
            action = learner.act(self.obs)
            t1 = time.perf_counter()
            phases["act"] += t1 - t0
            rollout.append(self.obs)
            if self.overlap and t == case.rollout - 1:
                envs.send(action)  # the last step of the rollout runs during the update
                break
            self.obs = envs.step(action)[0]
            phases["env"] += time.perf_counter() - t1
        t3 = time.perf_counter()
        learner.update(rollout)
        t4 = time.perf_counter()
        phases["learn"] += t4 - t3
        if self.overlap:
            self.obs = envs.recv()[0]
            phases["env"] += time.perf_counter() - t4
        elapsed = time.perf_counter() - start
        out = {"sps": case.rollout * case.num_envs / elapsed}
        out.update({f"{k}%": 100 * v / elapsed for k, v in phases.items()})
        return out


ENGINES = ("gym_sync", "auto", "overlap", "envpool", "gym_sync@1", "auto@1", "overlap@1", "envpool@1")
OFFPOLICY_ENGINES = ("gym_sync", "auto", "overlap", "gym_sync@1", "auto@1", "overlap@1", "overlap_1w@1",
                     "overlap_thread@1")


class torch_threads:
    """Run a block with torch on `n` intra-op threads (None: leave them), then restore them."""

    def __init__(self, n: int | None):
        self.n, self.before = n, torch.get_num_threads()

    def __enter__(self) -> None:
        if self.n is not None:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.before)


def make_loop(engine: str, case: LoopCase, log: Callable[[str], None]) -> Any:
    """The loop of `engine` (`name` or `name@T`) for `case`, built under its torch threads and
    warmed up; None where the engine has no such task or a dependency is missing."""
    name = engine.split("@")[0]
    with torch_threads(threads_of(engine)):
        try:
            envs = build(name, case)
        except (ImportError, gym.error.DependencyNotInstalled) as err:  # envpool, mujoco: optional
            log(f"  {case.name} {engine}: skipped, {err}")
            return None
        if envs is None:
            return None
        loop = OffPolicyLoop(envs, name in OVERLAP, case.rollout) if case.offpolicy else Loop(envs, name, case)
        loop.iteration()  # warm-up
    return loop


# -- why: torch's threads after a forward ----------------------------------------------------
def spin_after_forward_ms(learner: Learner, obs: np.ndarray, repeats: int = 7) -> float:
    """Median CPU time (ms) this process burns during a 50 ms sleep right after one policy
    forward: what torch's idle intra-op threads spend spinning on other cores."""
    burnt = []
    for _ in range(repeats):
        learner.act(obs)
        c0 = time.process_time()
        time.sleep(0.05)
        burnt.append(1e3 * (time.process_time() - c0))
    return statistics.median(burnt)


def latencies_us(lp: "Loop", settle_s: float, steps: int) -> tuple[list[float], list[float]]:
    """Wall times (us) of the policy forward and of the sync step after it, the step taken
    `settle_s` after the forward (0: at once, as a loop does; 20 ms: once torch's threads
    stopped spinning)."""
    fwd, step = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        action = lp.learner.act(lp.obs)
        fwd.append(1e6 * (time.perf_counter() - t0))
        if settle_s:
            time.sleep(settle_s)
        t1 = time.perf_counter()
        lp.obs = lp.envs.step(action)[0]
        step.append(1e6 * (time.perf_counter() - t1))
    return fwd, step


WHY_ENGINES = {"gym_sync": None, "auto": {}, "serial": {"backend": "serial"},
               "process, 1 worker": {"backend": "process", "num_workers": 1}}


def why_table(case: LoopCase, log: Callable[[str], None], blocks: int = 5) -> list[str]:
    """The measurement behind auto's loop rule, on `case`: torch's spin after a forward, and per
    layout the latency of a forward right after a step and of a step right after the forward
    (and 20 ms after it), in blocks alternating over engines built side by side."""
    loops: dict[str, Loop] = {}
    try:
        for name, kwargs in WHY_ENGINES.items():
            thunks = [cleanrl_thunk(case.env_id) for _ in range(case.num_envs)]
            envs = gym.vector.SyncVectorEnv(thunks) if kwargs is None else seedpool.make_vec(thunks, **kwargs)
            loops[name] = Loop(envs, name, case)
        spin = spin_after_forward_ms(loops["gym_sync"].learner, loops["gym_sync"].obs)
        got = {name: ([], [], []) for name in loops}
        for k in range(blocks):  # alternating, so load changes hit every engine and both columns
            for name, lp in loops.items():
                fwd, now = latencies_us(lp, 0.0, 100)
                _, later = latencies_us(lp, 0.02, 10)
                got[name][0].extend(fwd)
                got[name][1].extend(now)
                got[name][2].extend(later)
        layouts = {name: describe(lp.envs) for name, lp in loops.items()}
    finally:
        for lp in loops.values():
            lp.envs.close()
    lines = [f"## Why: {case.name}, latencies in the loop (medians over {blocks} alternating blocks)", "",
             "| engine | forward after a step (us) | step right after the forward (us) | step 20 ms after "
             "the forward (us) | layout |", "| --- | ---: | ---: | ---: | --- |"]
    for name, (fwd, now, later) in got.items():
        med = [statistics.median(x) for x in (fwd, now, later)]
        log(f"  why {case.name} {name}: " + ", ".join(f"{m:.0f}" for m in med))
        lines.append(f"| {name} | {med[0]:,.0f} | {med[1]:,.0f} | {med[2]:,.0f} | {layouts[name]} |")
    lines += ["", f"CPU time torch's {torch.get_num_threads()} intra-op threads burn in the 50 ms after one "
              f"forward of the 64x64 policy on {case.num_envs} observations (median of 7): **{spin:.1f} ms**.", ""]
    return lines


def describe(envs: Any) -> str:
    """What layout a seedpool engine chose (its repr), blank for the others."""
    pool = getattr(envs, "pool", envs)
    return repr(pool) if type(pool).__module__.startswith("seedpool") else ""


def measure(case: LoopCase, engines: list[str], rounds: int, log: Callable[[str], None]):
    """Every engine built side by side and warmed up, then `rounds` rounds of one iteration each,
    in an order rotated every round: load that comes and goes hits every engine alike. Per
    engine the list of rounds and the layout seen."""
    loops: dict[str, Any] = {}
    try:
        for engine in engines:
            loop = make_loop(engine, case, log)
            if loop is not None:
                loops[engine] = loop
        names = list(loops)
        runs: dict[str, list[dict[str, float]]] = {e: [] for e in names}
        for r in range(rounds):
            for engine in names[r % len(names):] + names[: r % len(names)]:
                with torch_threads(threads_of(engine)):
                    runs[engine].append(loops[engine].iteration())
            log(f"  {case.name} round {r}: " + ", ".join(f"{e} {runs[e][-1]['sps']:.0f}" for e in names))
        return runs, {e: describe(lp.envs) for e, lp in loops.items()}
    finally:
        for lp in loops.values():
            lp.envs.close()


def main(argv: list[str] | None = None) -> int:
    """Run the cases and the why tables; print the report and write it to --out."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {sorted(CASES)}")
    p.add_argument("--engines", default=",".join(ENGINES), help="engines of the PPO and Atari cases")
    p.add_argument("--offpolicy-engines", default=",".join(OFFPOLICY_ENGINES), help="engines of the off-policy cases")
    p.add_argument("--repeats", type=int, default=21, help="rounds: timed iterations per engine")
    p.add_argument("--rollout-scale", type=float, default=1.0,
                   help="scale every case's rollout (and so its update) length, for a shorter run")
    p.add_argument("--quick", action="store_true", help="1 repeat, 1 iteration, no table written")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--note", default="", help="a line for the table's notes (e.g. what else ran)")
    p.add_argument("--why", default="hc2", help="MLP cases of the latency measurement, comma-separated ('' to skip)")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="torch's intra-op threads for the learner (0: torch's default, one per core); "
                        "1 leaves a core to envs that step in workers while the learner computes")
    args = p.parse_args(argv)
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    if args.quick:
        args.repeats = 1
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    info = machine_info()
    load_before = os.getloadavg()
    sections: list[str] = []
    summary: dict[str, tuple[str, dict]] = {}
    for key in filter(None, args.cases.split(",")):
        case = CASES[key]
        case = dataclasses.replace(case, rollout=max(2, round(case.rollout * args.rollout_scale)))
        engines = (args.offpolicy_engines if case.offpolicy else args.engines).split(",")
        runs, layouts = measure(case, engines, args.repeats, log)
        base = "envpool" if case.atari else "gym_sync"
        sections += table(case.name, base, runs, layouts)
        summary[case.name] = (base, runs)
    for key in filter(None, args.why.split(",")):
        sections += why_table(CASES[key], log)
    head = header(args, info, (load_before[0], os.getloadavg()[0]), summary)
    text = "\n".join(head + [""] + sections)
    print(text)
    if not args.quick:
        Path(args.out).write_text(text)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
