"""The Python-package families against gymnasium's vector envs, 8 envs each; writes
`benchmarks/results/package_families.md` (issue 48: ">= 1.5x gymnasium's AsyncVectorEnv").

    .venv/bin/python benchmarks/package_families.py                      # 1 s warm-up, 5 x 2 s windows
    .venv/bin/python benchmarks/package_families.py --families Box2D --seconds 0.2 --repeats 1 --out /tmp/t.md

One id per family whose envs are a Python package's: dm_control (CheetahRun-v1 with
`native=False`, dm_control's Python envs), Box2D (LunarLander-v3), Gymnasium-Robotics
(FetchReach-v4), highway-env (highway-fast-v0) and MiniGrid (MiniGrid-DoorKey-8x8-v0 with
`native=False`, the minigrid package's envs). Per family, four cases are alive at once and
timed in interleaved windows (seedpool.bench's harness): gymnasium's AsyncVectorEnv (shared
memory) and SyncVectorEnv over `gymnasium.make` of the package's own id with seedpool's time
limit, and `seedpool.make(id, num_envs=8)` with backend "auto" and "process". dm_control
registers no gymnasium id, and the minigrid package's ids observe a `MissionSpace` (a string)
that AsyncVectorEnv cannot put in shared memory, so for these two gymnasium's vector envs
hold the family's own env, the one seedpool's workers step (the same task, EnvPool's
observation layout of arrays, the same time limit).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym

from seedpool.bench.cases import Target, gym_case, seedpool_case
from seedpool.bench.harness import Case, Group, Timing, reap_leftovers, run_group
from seedpool.bench.report import machine_info, render, write_markdown

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "package_families.md"
N = 8
GOAL = 1.5
# family -> (seedpool's id, gymnasium's id or None, seedpool.make's options, the module that
# registers gymnasium's id, gymnasium.make's options: seedpool's time limit where the
# package registers none).
FAMILIES: dict[str, tuple[str, str | None, dict[str, Any], str | None, dict[str, Any]]] = {
    "dm_control": ("CheetahRun-v1", None, {"native": False}, None, {}),
    "Box2D": ("LunarLander-v3", "LunarLander-v3", {}, None, {}),
    "Gymnasium-Robotics": ("FetchReach-v4", "FetchReach-v4", {}, "gymnasium_robotics", {}),
    "highway-env": ("highway-fast-v0", "highway-fast-v0", {}, "highway_env", {"max_episode_steps": 30}),
    "MiniGrid": ("MiniGrid-DoorKey-8x8-v0", None, {"native": False}, None, {}),
}
VERSIONS = ("dm-control", "mujoco", "Box2D", "gymnasium-robotics", "highway-env", "minigrid")


def gym_env(family: str) -> gym.Env:
    """One env of `family` as a gymnasium user builds it (in each vector env's worker)."""
    task, gym_id, _, module, options = FAMILIES[family]
    if gym_id is None:  # the family's own env, as seedpool's workers build it
        from seedpool.envs import registry

        return registry.family_factory(registry.find(task))(task)
    if module is not None:
        importlib.import_module(module)  # registers the package's ids
    if module == "gymnasium_robotics":  # its resets fail on mujoco 3's enums without the family's fix
        from seedpool.envs.families.robotics import joints

        joints.fix_joint_types()
    return gym.make(gym_id, **options)


def _recording(case: Case, layouts: dict[str, str]) -> Case:
    """`case`, noting the backend and workers its pool runs (what "auto" chose, and why)."""

    def setup() -> Any:
        stepper = case.setup()
        pool = stepper.engine
        why = f" ({pool.layout_reason})" if pool.layout_reason else ""
        layouts[case.name] = f"{pool.backend}, {pool.num_workers} workers{why}"
        return stepper

    return dataclasses.replace(case, setup=setup)


def group(family: str, layouts: dict[str, dict[str, str]]) -> Group:
    """gymnasium's two vector envs and seedpool's two backends on `family`'s id."""
    task, gym_id, options, _, _ = FAMILIES[family]
    make_env = functools.partial(gym_env, family)
    seen = layouts.setdefault(family, {})
    cases = [gym_case(make_env, N, asynchronous=True), gym_case(make_env, N, asynchronous=False)]
    cases += [_recording(seedpool_case(task, N, backend, False, **options), seen) for backend in ("auto", "process")]
    shown = gym_id or "the family's env"
    return Group(_key(family), f"{family}: {task} (gymnasium: {shown}), N={N}", cases,
                 baselines=("gym_async", "gym_sync"))


def _key(family: str) -> str:
    return f"{family.lower()}-{N}"


def targets(families: list[str]) -> list[Target]:
    return [Target(_key(f), f"seedpool_{b}", "gym_async", GOAL, "issue 48") for f in families for b in ("auto", "process")]


def goal_lines(families: list[str], measured: list[tuple[Group, list[Any]]]) -> list[str]:
    """One line per family: each seedpool backend's ratio to AsyncVectorEnv, and whether it meets the goal."""
    lines = []
    for family, (_, results) in zip(families, measured):
        med = {r.name: r.median for r in results}
        base = med.get("gym_async")
        parts = []
        for backend in ("auto", "process"):
            own = med.get(f"seedpool_{backend}")
            if not own or not base:
                parts.append(f"{backend}: not measured")
                continue
            ratio = own / base
            parts.append(f"{backend} {ratio:.2f}x ({'met' if ratio >= GOAL else '**not met**'})")
        lines.append(f"- **{family}** ({FAMILIES[family][0]}): " + "; ".join(parts))
    return lines


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main(argv: list[str]) -> int:
    """Run each family's group and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {list(FAMILIES)}")
    parser.add_argument("--seconds", type=float, default=2.0, help="one timed window")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--note", default="", help="a line for the notes (what else ran on the machine)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; known: {list(FAMILIES)}")
    os.environ.setdefault("MUJOCO_GL", "egl")  # dm_control without a display
    timing = Timing(args.warmup, args.seconds, args.repeats)
    layouts: dict[str, dict[str, str]] = {}
    load_before = os.getloadavg()
    measured = [(g, run_group(g, timing)) for g in (group(f, layouts) for f in families)]
    leaked = reap_leftovers()
    load_after = os.getloadavg()
    info = machine_info()
    info[" / ".join(VERSIONS)] = " / ".join(_version(v) for v in VERSIONS)
    info["load average (1 / 5 min) before / after"] = (f"{load_before[0]:.2f}, {load_before[1]:.2f} / "
                                                        f"{load_after[0]:.2f}, {load_after[1]:.2f}")
    notes = [
        f"**Method here:** {N} envs per engine, all sync (`step` on the whole batch). `gym_async`: "
        "`gymnasium.vector.AsyncVectorEnv(..., shared_memory=True)`, `gym_sync`: `SyncVectorEnv`, both over "
        "`gymnasium.make` of the package's id (its wrappers and env checker as gymnasium adds them; for "
        "dm_control and MiniGrid the family's own env, see the title of their tables); "
        f"`seedpool_auto` / `seedpool_process`: `seedpool.make(id, num_envs={N}, backend=...)`. Every engine "
        "cycles the same pre-drawn rows of seeded random actions (seedpool.bench.steppers.random_actions), so "
        "no engine pays for sampling. Ratios are to `gym_async` (the goal's baseline) and `gym_sync`.",
        "Time limits: LunarLander-v3 1000 and FetchReach-v4 50 (gymnasium's registered limits, which seedpool "
        "keeps); highway-fast-v0 30 (EnvPool's, passed to gymnasium.make; highway-env's own duration ends "
        "the episode there too); MiniGrid-DoorKey-8x8 640 (the env's own max_steps on both); CheetahRun-v1 1000.",
        "gymnasium-robotics 1.4.2 cannot reset its Fetch envs on mujoco 3's joint enums; gymnasium's vector "
        "envs get the robotics family's fix of its joint helpers (seedpool/envs/families/robotics/joints.py), "
        "as seedpool's workers do.",
    ]
    for family, seen in layouts.items():
        notes += [f"{family}, `{name}` ran as: {how}" for name, how in seen.items()]
    if args.note:
        notes.append(f"note: {args.note}")
    if leaked:
        notes.append(f"leaked worker processes, killed: {leaked}")
    text = render(info, timing, measured, targets(families), notes)
    text = text.replace("# seedpool engine benchmark", "# Python-package families vs gymnasium's vector envs", 1)
    goal = [f"## Goal: seedpool >= {GOAL:g}x gymnasium's AsyncVectorEnv (issue 48)", ""] + goal_lines(families, measured)
    text = text.replace("## Targets", "\n".join(goal) + "\n\n## Targets", 1)
    write_markdown(args.out, text.rstrip("\n").splitlines())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
