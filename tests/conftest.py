"""Shared fixtures: a leak check for engine tests (child processes, /dev/shm entries)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # envs_for_tests is imported by tests and by child scripts
    sys.path.insert(0, str(TESTS_DIR))

SHM = Path("/dev/shm")

# tests/peer holds the peers' own suites (SB3's vendored tests, the routing plugins): they run
# only through tests/test_peer_suites.py, in child pytests routed to seedpool, never in this
# session (which would run SB3's tests against SB3 itself).
collect_ignore = [] if os.environ.get("SEEDPOOL_PEER_SUITE") else ["peer"]
# How long a test waits for processes to exit or shared memory to be unlinked after a close, a
# kill or a Ctrl-C: each wait ends as soon as they are gone, so the bound only costs time when
# something is left behind, and a loaded machine (2 cores, shared) is not taken for a leak.
GONE_S = 30.0


def child_pids() -> set[int]:
    """Live descendants of this process (zombies excluded)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def shm_entries() -> set[str]:
    """Names in /dev/shm (empty where it does not exist)."""
    try:
        return set(os.listdir(SHM))
    except FileNotFoundError:
        return set()


def _held_by_others(name: str, mine: set[int]) -> bool:
    """True if a process outside this test's tree maps or opens /dev/shm/name.

    Other people's programs share this machine's /dev/shm; their entries are not our leaks.
    """
    target = str(SHM / name)
    for p in psutil.process_iter(["pid"]):
        if p.pid in mine:
            continue
        try:
            if any(m.path == target for m in p.memory_maps(grouped=True)):
                return True
            if any(f.path == target for f in p.open_files()):
                return True
        except (psutil.Error, OSError):
            continue
    return False


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait up to `timeout` s for `pids` to exit; return the ones still alive."""
    deadline = time.monotonic() + timeout
    alive = {p for p in pids if psutil.pid_exists(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {p for p in alive if _running(p)}
    return {p for p in alive if _running(p)}


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def new_shm_leaks(before: set[str], timeout: float = GONE_S) -> set[str]:
    """/dev/shm entries that appeared since `before` and are not someone else's.

    Polls until none is left or `timeout` passes: entries of a pool closed by another process
    (a killed script's workers) may take a moment to go. Entries that other programs hold are
    set aside once, after a short first look, so they cost no waiting.
    """
    deadline, first_look = time.monotonic() + timeout, time.monotonic() + 1.0
    new = shm_entries() - before
    others_checked = False
    while new:
        if not others_checked and time.monotonic() >= first_look:
            mine = {os.getpid()} | child_pids()
            new = {n for n in new if not _held_by_others(n, mine)}
            others_checked = True
            continue
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
        new &= shm_entries()  # transient entries of other programs come and go
    if new and not others_checked:
        mine = {os.getpid()} | child_pids()
        new = {n for n in new if not _held_by_others(n, mine)}
    return new


@pytest.fixture
def no_leaks():
    """Assert that the test leaves no child process and no new /dev/shm entry behind."""
    children, shm = child_pids(), shm_entries()
    yield
    left = wait_gone(child_pids() - children, timeout=GONE_S)
    assert not left, f"child processes left behind: {[_cmdline(p) for p in left]}"
    leaked = new_shm_leaks(shm)
    assert not leaked, f"new /dev/shm entries left behind: {sorted(leaked)}"


@pytest.fixture
def runner_pid() -> int:
    """The test runner's pid (FaultyEnv('kill') refuses to kill it)."""
    return os.getpid()


@pytest.fixture
def force_layout(monkeypatch):
    """A function that makes backend="auto" pick the given layout instead of measuring:
    force_layout("process", 1, 2) gives one worker process and two envs stepped by the pool's
    own process (the "process+main" layout auto picks for costly envs in sync mode)."""
    import importlib

    make_module = importlib.import_module("seedpool.envs.make")

    def force(backend: str, num_workers: int, local_envs: int) -> None:
        layout = make_module.Layout(backend, num_workers, local_envs)
        monkeypatch.setattr(make_module, "auto_layout", lambda *args, **kwargs: layout)

    return force


# pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): the learning tests (marked slow) are
# most of the suite's time and each keeps about one core busy, so they run in two fixed groups,
# one per worker, balanced by their measured times; every other test goes wherever a worker is
# free. The Ray tests share one group: each starts a local Ray cluster, and two at once on one
# machine would compete for its ports and memory.
SLOW_TIMEOUT_S = 1200
LEARNING_SEED_VARIABLE = "SEEDPOOL_LEARNING_SEED"


@pytest.fixture
def learning_seed() -> int:
    """The seed a learning test trains with: 1 in CI; benchmarks/learning_seeds.py runs the same
    tests with others (a threshold one seed misses is a bug in the defaults)."""
    return int(os.environ.get(LEARNING_SEED_VARIABLE, "1"))



_LEARNING_GROUPS = {
    "test_learning_dqn.py": "learning-a",  # DQN + Ape-X: ~8 min of the ~17 on a quiet machine
    # The teams' and self-play's tests balance the two groups: the other learning tests (recurrent
    # PPO and APPO, R2D2, SAC/TD3, IMPALA) hold the rest.
    "test_learning_multiagent.py": "learning-a",
    "test_learning_selfplay.py": "learning-a",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        if name == "test_ray.py":
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group(_LEARNING_GROUPS.get(name, "learning-b")))
            if item.get_closest_marker("timeout") is None:
                # A learning test runs a fixed env-step budget, so its time follows the CPU: on
                # a 2-core Zen 3 without AVX-512 (2026-11-28) the recurrent APPO test took over
                # the 300-s default that a Zen 5 finished in 160-170 s. The bound stays a hang guard.
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
