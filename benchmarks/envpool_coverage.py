"""Which of EnvPool's ids seedpool makes and steps, family by family, beside EnvPool itself.

    nice python benchmarks/envpool_coverage.py [--out benchmarks/results/envpool_coverage.md]
                                               [--only FAMILY ...] [--timeout 180]

For every id of `envpool.list_all_envs()`: `seedpool.make(id, num_envs=2, backend="serial")`,
reset and five random steps; then the same with `envpool.make_gymnasium(id, num_envs=2)`.
Each side runs in worker processes that take the ids one after another; a worker that
crashes (some packages segfault) or passes the timeout on one id is replaced, that id
counted as failed with the reason. Writes a table by EnvPool family (its registration's
module): ids, whether the family's package is installed here, how many ids each side made
and stepped, and the failures' reasons; with date, hardware and versions.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STEPS = 5

# EnvPool family (its import path's last part) -> (module its package installs, distribution,
# why it is not installed here where it is not).
PACKAGES = {
    "atari": ("ale_py", "ale-py", ""),
    "classic_control": ("gymnasium", "gymnasium", ""),
    "toy_text": ("gymnasium", "gymnasium", ""),
    "box2d": ("Box2D", "box2d", ""),
    "mujoco.gym": ("mujoco", "mujoco", ""),
    "mujoco.dmc": ("dm_control", "dm-control", ""),
    "mujoco.robotics": ("gymnasium_robotics", "gymnasium-robotics", ""),
    "minigrid": ("minigrid", "minigrid", ""),
    "highway": ("highway_env", "highway-env", ""),
    "vizdoom": ("vizdoom", "vizdoom", ""),
    "mujoco.metaworld": ("metaworld", "metaworld",
                         "metaworld 3.1.1 pins mujoco 3.3.0 (seedpool: 3.17); on 3.17 its reset fails (eq_data shape)"),
    "mujoco.myosuite": ("myosuite", "myosuite", "myosuite 3.0.0 requires gymnasium<1.3 (seedpool: 1.4)"),
    "procgen": ("procgen", "procgen",
                "no wheel for this Python: procgen-gym needs Python >= 3.13, procgen's forks pin numpy < 2"),
    "mujoco.playground": ("mujoco_playground", "playground", "not tried: seedpool has no family for it (JAX)"),
    "jumanji": ("jumanji", "jumanji", "not tried: seedpool has no family for it (JAX)"),
    "pgx": ("pgx", "pgx", "not tried: seedpool has no family for it (JAX)"),
    "gfootball": ("gfootball", "gfootball", "not tried: seedpool has no family for it"),
}


# Why the ids seedpool.make still fails on fail, by id prefix (what the table's failure column
# shows is the error; this is its cause, found by reading it).
CAUSES = {
    "MiniGrid-WFC-": "the minigrid package's WFC configs read pattern images (minigrid/envs/wfc/patterns/*.png) "
                     "that its 3.2.0 wheel and sdist (and the 3.0.0 and 2.5.0 wheels) do not contain: they are "
                     "only in its source repository, so its WFC envs raise FileNotFoundError at their first reset; "
                     "EnvPool's C++ port carries its own patterns",
    "Cig-v1": "a multi-player ViZDoom scenario: its game waits for players a host sets up (refused with that reason)",
    "MultiDuel-v1": "a multi-player ViZDoom scenario (as Cig-v1)",
    "VizdoomCustom-v1": "needs cfg_path=... (a scenario file), in EnvPool too; the run passes none",
}


def run_one(side: str, task_id: str) -> dict:
    """make, reset and STEPS random steps of `task_id` on `side` (in this process)."""
    import gymnasium as gym
    import numpy as np

    if side == "seedpool":
        import seedpool

        pool = seedpool.make(task_id, num_envs=2, backend="serial")
        space = pool.action_space
    elif side == "face":  # EnvPool's API on seedpool: `import envpool` after the one line
        import seedpool

        seedpool.install_as_envpool(quiet=True)
        import envpool

        pool = envpool.make_gymnasium(task_id, num_envs=2, backend="serial")
        space = pool.action_space
    else:
        import envpool

        pool = envpool.make_gymnasium(task_id, num_envs=2)
        space = pool.action_space
    try:
        batch = gym.vector.utils.batch_space(space, 2)
        batch.seed(0)
        pool.reset()
        for _ in range(STEPS):
            pool.step(batch.sample())
    finally:
        pool.close()
    return {"id": task_id, "ok": True}


def worker(side: str) -> None:
    """Read ids from stdin, one a line; print one JSON result a line."""
    import warnings

    warnings.filterwarnings("ignore")
    # Results go to a copy of stdout; what packages print (Python or C) goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        task_id = line.strip()
        print(json.dumps({"start": task_id}), file=out, flush=True)
        try:
            result = run_one(side, task_id)
        except BaseException as err:  # noqa: BLE001 - every failure is a result here
            result = {"id": task_id, "ok": False, "why": f"{type(err).__name__}: {str(err).splitlines()[0][:90]}"
                      if str(err) else type(err).__name__}
        print(json.dumps(result), file=out, flush=True)


def run_side(side: str, ids: list[str], timeout: float) -> dict[str, dict]:
    """Results of every id on `side`, through workers replaced where one crashes or hangs."""
    results: dict[str, dict] = {}
    todo = list(ids)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    while todo:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", side], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                cwd=os.environ.get("TMPDIR", "/tmp"), start_new_session=True)
        proc.stdin.write("\n".join(todo) + "\n")
        proc.stdin.close()
        current = None
        for line in _lines(proc, timeout):
            msg = json.loads(line)
            if "start" in msg:
                current = msg["start"]
                continue
            results[msg["id"]] = msg
            todo.remove(msg["id"])
            current = None
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _end_group(proc.pid)
        if current is not None:  # the worker died or hung on this id
            why = "timeout" if proc.returncode in (-9, None) else f"worker crashed (exit {proc.returncode})"
            results[current] = {"id": current, "ok": False, "why": why}
            todo.remove(current)
        elif todo:
            for task_id in todo:
                results[task_id] = {"id": task_id, "ok": False, "why": "worker ended early"}
            todo = []
    return results


def _end_group(pgid: int) -> None:
    """Kill what a worker left in its session: envpool's ViZDoom pools start Doom engine
    processes that outlive a worker that crashed, and ignore SIGTERM."""
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def _remove_doom_segments(before: set[str]) -> None:
    """Remove the ViZDoom shared-memory segments this run's Doom engines left (those made
    since `before`), unless a process still has one open."""
    import shutil

    fuser = shutil.which("fuser")
    for name in sorted(_shm() - before):
        path = os.path.join("/dev/shm", name)
        if not name.startswith("ViZDoom"):
            continue
        if fuser and subprocess.run([fuser, "-s", path], stderr=subprocess.DEVNULL).returncode == 0:
            continue  # still open
        try:
            os.remove(path)
        except OSError:
            pass


def _lines(proc: subprocess.Popen, timeout: float):
    """The worker's output lines, stopping when one takes longer than `timeout` to come."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while True:
        if not sel.select(timeout):
            return
        line = proc.stdout.readline()
        if not line:
            return
        yield line


def family_of(task_id: str, registry) -> str:
    return registry.specs[task_id][0].removeprefix("envpool.")


def installed(family: str) -> bool:
    module = PACKAGES.get(family, (family,))[0]
    return importlib.util.find_spec(module) is not None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _reasons(results: dict[str, dict], ids: list[str]) -> str:
    why = collections.Counter(results[i].get("why", "?") for i in ids if not results[i]["ok"])
    return "; ".join(f"{n}x {w}" for w, n in why.most_common(2)).replace("|", "/")


def _causes(seed: dict) -> list[str]:
    """One line per id seedpool.make still fails on whose cause CAUSES names."""
    lines = []
    for prefix, cause in CAUSES.items():
        failed = sorted(i for i, r in seed.items() if i.startswith(prefix) and not r["ok"])
        if failed:
            lines.append(f"- {', '.join(failed) if len(failed) < 3 else f'{len(failed)} ids {prefix}*'}: {cause}.")
    return lines


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def write(out: Path, by_family: dict[str, list[str]], seed: dict, face: dict, env: dict, seconds: float,
          loads: tuple[str, str] = ("unknown", "unknown")) -> None:
    """The markdown table and the totals; `loads`: the load averages at the start and the end."""
    rows, tot = [], collections.Counter()
    for family, ids in sorted(by_family.items(), key=lambda kv: -len(kv[1])):
        here = installed(family)
        s_ok = sum(seed[i]["ok"] for i in ids)
        f_ok = s_ok + sum(face[i]["ok"] for i in ids if i in face)
        e_ok = sum(env[i]["ok"] for i in ids)
        note = "" if here else PACKAGES.get(family, ("", "", ""))[2]
        rows.append(f"| {family} | {len(ids)} | {'yes' if here else 'no'} | {s_ok} | {f_ok} | {e_ok} | "
                    f"{_reasons(seed, ids) or '-'} | {_reasons(env, ids) or '-'} | {note} |")
        tot["ids"] += len(ids)
        tot["seed"] += s_ok
        tot["env"] += e_ok
        if here:
            tot["here"] += len(ids)
            tot["here_seed"] += s_ok
            tot["here_face"] += f_ok
            tot["here_env"] += e_ok
    dists = ["seedpool", "envpool", "gymnasium", "numpy", "mujoco", "dm-control", "box2d", "gymnasium-robotics",
             "highway-env", "vizdoom", "minigrid", "ale-py"]
    share = 100 * tot["here_seed"] / max(tot["here"], 1)
    text = [
        "# EnvPool's ids on seedpool: coverage by family",
        "",
        f"Written by `benchmarks/envpool_coverage.py` on {datetime.date.today()} ({seconds / 60:.0f} min, "
        "run with `nice`).",
        f"Machine: {_cpu()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}; "
        f"load average (1 / 5 / 15 min) {loads[0]} at the start, {loads[1]} at the end (a shared machine: "
        "load only matters here through the per-id timeout).",
        "Versions: " + ", ".join(f"{d} {_version(d)}" for d in dists) + ".",
        "",
        f"Each id of `envpool.list_all_envs()`: `seedpool.make(id, num_envs=2, backend=\"serial\")`, reset and "
        f"{STEPS} random steps (one seeded batch sample each); for the ids that fails on, the same through the "
        "EnvPool face (`seedpool.install_as_envpool()`, then `envpool.make_gymnasium(id, num_envs=2)`; both read "
        "one table of EnvPool's own ids and aliases, seedpool/envs/envpool_ids/); and with the real "
        "`envpool.make_gymnasium(id, num_envs=2)`. "
        "A family is EnvPool's registration module; *package here* says whether the family's Python package "
        "imports in this environment (for the ones that do not, why).",
        "",
        f"**Families whose package is installed here: seedpool makes and steps {tot['here_seed']} of "
        f"{tot['here']} ids ({share:.1f}%), the EnvPool face {tot['here_face']}; envpool {tot['here_env']}.** "
        "All families: seedpool "
        f"{tot['seed']} of {tot['ids']}, envpool {tot['env']}.",
        "",
        "| family | ids | package here | seedpool.make makes+steps | with the face too | envpool makes+steps "
        "| seedpool.make failures | envpool failures | why the package is not here |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- | --- | --- |",
        *rows,
        "",
        *(["Causes of the failures left among the installed families:", "", *_causes(seed), ""]
          if _causes(seed) else []),
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text))


def main() -> None:
    """Command line: run both sides over EnvPool's ids and write the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=["seedpool", "face", "envpool"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "envpool_coverage.md")
    ap.add_argument("--only", nargs="*", help="EnvPool families to run (e.g. mujoco.dmc box2d)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds one id may take")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    from envpool.registration import registry

    ids = list(registry.specs)
    by_family: dict[str, list[str]] = collections.defaultdict(list)
    for task_id in ids:
        by_family[family_of(task_id, registry)].append(task_id)
    if args.only:
        by_family = {f: v for f, v in by_family.items() if f in args.only}
    chosen = [i for v in by_family.values() for i in v]
    start, load_start, segments = time.time(), _load(), _shm()
    seed = run_side("seedpool", chosen, args.timeout)
    # The EnvPool face (install_as_envpool) for the ids seedpool.make did not make: it adds
    # EnvPool's options and spaces where gymnasium's id of the same name differs (tasks.py).
    face = run_side("face", [i for i in chosen if not seed[i]["ok"]], args.timeout)
    env = run_side("envpool", chosen, args.timeout)
    _remove_doom_segments(segments)
    write(args.out, by_family, seed, face, env, time.time() - start, (load_start, _load()))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
