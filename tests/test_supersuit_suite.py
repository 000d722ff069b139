"""SuperSuit's own vector tests (`test/test_vector/`, files unchanged) against
`seedpool.compat.supersuit`, compared with SuperSuit itself on the same machine.

The suite runs twice in child pytests: once as it is (SuperSuit 3.x, the reference), once
with tests/peer/seedpool_supersuit_routing.py, which only renames `supersuit` to the face.
Every test SuperSuit passes here must pass on the face, except those the plugin skips by
name (with their reason). Tests that fail on SuperSuit itself (here: PettingZoo has retired
knights_archers_zombies_v10, and moviepy is not installed) are reported, not required.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PEER = Path(__file__).resolve().parent / "peer"
REPO = PEER.parent.parent
sys.path.insert(0, str(PEER))

import run as peer_run  # noqa: E402 - tests/peer/run.py

pytestmark = pytest.mark.timeout(900)


def supersuit_root() -> Path | None:
    """SuperSuit's test tree (the folder holding `test/test_vector`), or None where it is absent."""
    base = os.environ.get("SEEDPOOL_PEER_SUITES")
    root = Path(base) / "supersuit" if base else REPO.parent / "shared" / "peer-suites" / "supersuit"
    return root if (root / "test" / "test_vector").is_dir() else None


def run_vector_suite(root: Path, routed: bool, out: Path) -> dict[str, tuple[str, str]]:
    """Run SuperSuit's `test/test_vector` in a child pytest (through the face when `routed`);
    test id -> (pass | fail | skip, first line of the failure)."""
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(out), SEEDPOOL_PEER_BUILDS=str(out / "builds.txt"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(PEER), os.environ.get("PYTHONPATH", "")]))
    plugin = ["-p", "seedpool_supersuit_routing"] if routed else []
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings", *plugin,
           "-o", "timeout=300", "--rootdir", str(root), "-c", os.devnull, f"--junitxml={junit}", "test/test_vector"]
    subprocess.run(cmd, cwd=root, env=env, timeout=800, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return peer_run.outcomes(junit)


def counts(got: dict[str, tuple[str, str]]) -> str:
    return ", ".join(f"{sum(1 for s, _ in got.values() if s == state)} {word}"
                     for state, word in (("pass", "passed"), ("fail", "failed"), ("skip", "skipped")))


def test_supersuit_vector_suite_passes_on_the_face_where_it_passes_on_supersuit(tmp_path, capsys):
    root = supersuit_root()
    if root is None:
        pytest.skip("SuperSuit's test tree is absent: ../shared/peer-suites/supersuit (or "
                    "$SEEDPOOL_PEER_SUITES/supersuit) beside the clone holds it")
    for module in ("supersuit", "mpe2", "pettingzoo", "stable_baselines3"):
        pytest.importorskip(module, reason=f"SuperSuit's vector tests need {module} (extras multiagent, sb3)")
    from seedpool_supersuit_routing import SKIPS  # tests/peer, on the path above

    reference = run_vector_suite(root, routed=False, out=tmp_path / "supersuit")
    face = run_vector_suite(root, routed=True, out=tmp_path / "face")
    builds = (tmp_path / "face" / "builds.txt")
    built = set(builds.read_text().split()) if builds.exists() else set()
    passed_there = {name for name, (state, _) in reference.items() if state == "pass"}
    by_design = {name for name in passed_there if name.rsplit("::", 1)[-1].split("[")[0] in SKIPS}
    missing = sorted(name for name in passed_there - by_design if face.get(name, ("absent", ""))[0] != "pass")
    with capsys.disabled():
        print(f"\nSuperSuit's test_vector on supersuit itself: {counts(reference)}; on seedpool's face: {counts(face)} "
              f"({len(built)} tests built a vector env through the face)")
        for name, (state, msg) in sorted(face.items()):
            if state == "fail":
                print(f"  face FAILED {name}: {msg} (on SuperSuit: {reference.get(name, ('absent', ''))[0]})")
    assert passed_there, "SuperSuit itself passed none of its vector tests: the reference run did not run"
    assert built, "no test built a vector env through the face: the routing did not take"
    assert not missing, "tests SuperSuit passes that fail on the face:\n" + "\n".join(
        f"{name}: {face.get(name, ('absent', ''))[1]}" for name in missing)
