"""Run a peer library's own vector tests against seedpool and summarise the outcome.

    python tests/peer/run.py gymnasium [--backend serial|thread|process] [--junit PATH]
    python tests/peer/run.py sb3 [--backend ...]
    python tests/peer/run.py envpool [--backend ...] [--full]   # EnvPool's tests via install_as_envpool()

Gymnasium's tests are read from `../shared/peer-suites/gymnasium` (beside the clone, as CI
has it) or `$SEEDPOOL_PEER_SUITES/gymnasium`, EnvPool's likewise from `.../envpool`; SB3's are vendored in tests/peer/sb3. Prints
passed/failed/skipped, the tests that built a routed env, and each failure's first line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def gymnasium_root() -> Path | None:
    """Gymnasium's test tree (the folder holding `tests/vector`), or None where it is absent."""
    base = os.environ.get("SEEDPOOL_PEER_SUITES")
    root = Path(base) / "gymnasium" if base else REPO.parent / "shared" / "peer-suites" / "gymnasium"
    # Resolved: pytest names a test by its file's real path relative to the root, so a root
    # reached through a symbolic link would name (and route) every test wrongly.
    return root.resolve() if (root / "tests" / "vector").is_dir() else None


def envpool_root() -> Path | None:
    """EnvPool's test tree (the folder holding `tests/make_test.py`), or None where it is absent."""
    base = os.environ.get("SEEDPOOL_PEER_SUITES")
    root = Path(base) / "envpool" if base else REPO.parent / "shared" / "peer-suites" / "envpool"
    return root.resolve() if (root / "tests" / "make_test.py").is_file() else None  # as gymnasium_root


# EnvPool's test files for the families seedpool builds (Atari itself, the rest through gymnasium or their packages).
ENVPOOL_FILES = ["make_test.py", "atari/api_test.py", "classic_control/classic_control_test.py",
                 "toy_text/toy_text_test.py", "mujoco/gym/mujoco_gym_deterministic_test.py",
                 "box2d/box2d_deterministic_test.py", "box2d/box2d_align_test.py", "box2d/box2d_correctness_test.py",
                 "mujoco/dmc", "mujoco/robotics", "highway", "vizdoom/vizdoom_test.py"]


def run_suite(suite: str, backend: str | None, junit: Path, builds: Path, timeout: float = 600,
              full: bool = False) -> int:
    """Run the suite in a child pytest; junit XML and the routed-build list land at the paths given."""
    # The child's temporary files (SB3's default logger folders among them) go beside the junit
    # file, which the caller cleans up, not into the machine's /tmp.
    scratch = junit.parent / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", SEEDPOOL_PEER_SUITE="1", TMPDIR=str(scratch),
               SB3_LOGDIR=str(scratch / "sb3-logs"),
               SEEDPOOL_PEER_BUILDS=str(builds),
               # dm_control picks its GL backend when a test module imports it, before any
               # pool is made: EGL renders without a display (quadruped's terrain needs one).
               MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]))
    if backend:
        env["SEEDPOOL_PEER_BACKEND"] = backend
    if full:  # EnvPool's long determinism sweeps too (seedpool_envpool_routing.LONG)
        env["SEEDPOOL_PEER_FULL"] = "1"
    if suite == "gymnasium":
        root = gymnasium_root()
        if root is None:
            raise FileNotFoundError("gymnasium's test tree is absent (../shared/peer-suites/gymnasium)")
        cwd, plugin, target = root, "seedpool_gymnasium_routing", "tests/vector"
    elif suite == "envpool":
        root = envpool_root()
        if root is None:
            raise FileNotFoundError("EnvPool's test tree is absent (../shared/peer-suites/envpool)")
        cwd, plugin, target = root / "tests", "seedpool_envpool_routing", ENVPOOL_FILES
    else:
        cwd, plugin, target = HERE / "sb3", "seedpool_sb3_routing", "."
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings",
           "-p", plugin, "-o", "timeout=60", "--rootdir", str(cwd), "-c", os.devnull,
           # A peer file that imports its library's own package modules fails alone (named in
           # open_failures.txt), not the whole run.
           "--continue-on-collection-errors",
           f"--junitxml={junit}", *([target] if isinstance(target, str) else target)]
    return subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (pass | fail | skip, first line of the failure message)."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        state, msg = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                state, msg = "fail", (child.get("message") or "").splitlines()[0][:200] if child.get("message") else ""
            elif child.tag == "skipped" and state == "pass":
                state = "skip"
        out[name] = (state, msg)
    return out


def main() -> None:
    """Command line: run one suite, print the summary."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", choices=["gymnasium", "sb3", "envpool"])
    ap.add_argument("--backend", default=None)
    ap.add_argument("--junit", type=Path, default=None)
    ap.add_argument("--full", action="store_true", help="envpool: run the long determinism sweeps too")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="seedpool-peer-"))
    junit = args.junit or tmp / "junit.xml"
    builds = tmp / "builds.txt"
    run_suite(args.suite, args.backend, junit, builds, timeout=3600 if args.full else 600, full=args.full)
    got = outcomes(junit)
    built = set(builds.read_text().split("\n")) - {""} if builds.exists() else set()
    counts = {s: sum(1 for v, _ in got.values() if v == s) for s in ("pass", "fail", "skip")}
    print(f"{args.suite} (backend {args.backend or 'default'}): {counts}; "
          f"{len(built)} tests built a routed env")
    for name, (state, msg) in sorted(got.items()):
        if state == "fail":
            print(f"FAILED {name}: {msg}")


if __name__ == "__main__":
    main()
