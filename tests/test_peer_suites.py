"""Gymnasium's and SB3's own vector tests, unchanged, run against make_vec / make_sb3, and
EnvPool's own tests through `seedpool.install_as_envpool()`.

Each suite runs in a child pytest with a routing plugin (tests/peer/) that only renames the
library's classes to seedpool's and maps their arguments. A test fails here when a peer test
fails that is not in tests/peer/open_failures.txt: that file lists, with the cause, each
peer test seedpool does not pass yet (issue 24's open work). It is not a skip list: those
tests still run, and the summary says how many of them pass now, so the list only shrinks.
Tests of a library's internals are skipped by name in the plugins, with their reasons.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PEER = Path(__file__).resolve().parent / "peer"
sys.path.insert(0, str(PEER))

import run as peer_run  # noqa: E402 - tests/peer/run.py

pytestmark = pytest.mark.timeout(900)


def open_failures(suite: str) -> dict[str, str]:
    """test id -> cause, for the peer tests of `suite` seedpool does not pass yet."""
    out = {}
    for line in (PEER / "open_failures.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, cause = line.partition(" | ")
            which, _, test = name.partition(" ")
            if which == suite:
                out[test.strip()] = cause.strip()
    return out


# ("gymnasium", "auto"): make_vec's default backend, so the route is exactly a user's one changed line.
@pytest.mark.parametrize("suite,backend", [("gymnasium", "serial"), ("gymnasium", "process"), ("gymnasium", "auto"),
                                           ("sb3", None), ("envpool", None)])
def test_peer_suite_fails_nothing_beyond_the_open_list(suite, backend, tmp_path, capsys):
    if suite == "gymnasium" and peer_run.gymnasium_root() is None:
        pytest.skip("gymnasium's test tree is absent: ../shared/peer-suites/gymnasium (or "
                    "$SEEDPOOL_PEER_SUITES/gymnasium) beside the clone holds it")
    if suite == "envpool":
        if peer_run.envpool_root() is None:
            pytest.skip("EnvPool's test tree is absent: ../shared/peer-suites/envpool (or "
                        "$SEEDPOOL_PEER_SUITES/envpool) beside the clone holds it")
        for module in ("absl", "dm_env", "ale_py"):
            pytest.importorskip(module, reason=f"EnvPool's tests need {module}")
    if suite == "sb3":
        pytest.importorskip("stable_baselines3", reason="stable-baselines3 is not installed")
    junit = tmp_path / "junit.xml"
    peer_run.run_suite(suite, backend, junit, tmp_path / "builds.txt")
    got = peer_run.outcomes(junit)
    known = open_failures(suite)
    failed = {name for name, (state, _) in got.items() if state == "fail"}
    passed = sum(1 for state, _ in got.values() if state == "pass")
    new = sorted(failed - set(known))
    with capsys.disabled():
        print(f"\n{suite} ({backend or 'default backends'}): {passed} passed, {len(failed)} failed "
              f"({len(new)} not listed as open), {sum(1 for s, _ in got.values() if s == 'skip')} skipped; "
              f"{len(set(known) - failed)} listed as open now pass")
    assert passed > 0, "the peer suite ran no test"
    assert not new, "peer tests that fail and are not listed as open:\n" + "\n".join(
        f"{name}: {got[name][1]}" for name in new)
