"""Backends: identical sync trajectories everywhere, async batching and completion order, clean shutdown."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import psutil
import pytest

import seedpool
from conftest import GONE_S, TESTS_DIR, child_pids, new_shm_leaks, shm_entries, wait_gone
from envs_for_tests import CostlyCartPole, EchoEnv, GatedEnv

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

SYNC_CONFIGS = {
    "serial": dict(backend="serial"),
    "thread": dict(backend="thread", num_workers=2),
    "process-2": dict(backend="process", num_workers=2),
    "process-3": dict(backend="process", num_workers=3),
    "auto": dict(backend="auto"),  # whatever this machine measures
}


def rollout(task, config: dict, autoreset: str, steps: int = 300, n: int = 6) -> list:
    """Every array a sync pool returns over `steps` random steps (fixed seeds and actions)."""
    actions = np.random.default_rng(0).integers(0, 2, (steps, n))
    out = []
    with seedpool.make(task, num_envs=n, seed=11, autoreset=autoreset, **config) as pool:
        obs, info = pool.reset()
        out.append((obs, info))
        for a in actions:
            out.append(pool.step(a))
    return out


def assert_same(a, b, where: str) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, tuple):
        for k, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{k}]")
    else:
        np.testing.assert_array_equal(a, b, err_msg=where)
        assert np.asarray(a).dtype == np.asarray(b).dtype, where


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_sync_backends_give_identical_trajectories(autoreset):
    ref = rollout("CartPole-v1", SYNC_CONFIGS["serial"], autoreset)
    ends = sum(int((r[2] | r[3]).sum()) for r in ref[1:])
    assert ends >= 10, "the rollout must cross episode ends"
    for name, config in SYNC_CONFIGS.items():
        if name != "serial":
            got = rollout("CartPole-v1", config, autoreset)
            for t, (x, y) in enumerate(zip(ref, got)):
                assert_same(x, y, f"{name} step {t}")


def test_process_with_main_process_share_matches_serial(force_layout):
    force_layout("process", 1, 2)  # what auto picks for costly envs in sync mode on two cores
    with seedpool.make(CostlyCartPole, num_envs=4) as pool:
        assert "backend='process+main'" in repr(pool)
    ref = rollout(CostlyCartPole, {"backend": "serial"}, "next_step", steps=150, n=4)
    got = rollout(CostlyCartPole, {"backend": "auto"}, "next_step", steps=150, n=4)
    assert sum(int((r[2] | r[3]).sum()) for r in ref[1:]) >= 4  # CostlyCartPole truncates at 60
    for t, (x, y) in enumerate(zip(ref, got)):
        assert_same(x, y, f"process+main step {t}")


@pytest.mark.parametrize("cores", [2, 16])
def test_auto_steps_a_share_in_the_main_process_in_sync_mode_only(monkeypatch, cores):
    """Atari (GIL-holding steps): sync mode shares the envs with the main process, which would
    only wait otherwise; async mode keeps it free for the policy."""
    import importlib

    from seedpool.envs.spec import resolve

    make_mod = importlib.import_module("seedpool.envs.make")

    monkeypatch.setattr(make_mod, "usable_cores", lambda: cores)
    monkeypatch.setattr(make_mod, "caller_threads", lambda: 1)  # a script without torch threads
    spec = resolve("Pong-v5")
    try:
        sync = make_mod.plan(spec, 32, 32, None, "auto", None, False)
        asyn = make_mod.plan(spec, 32, 16, None, "auto", None, False)
    finally:
        if spec.probe is not None:
            spec.probe.close()
    assert (sync.kind, sync.num_workers, sync.local_envs) == ("process", cores - 1, 32 // cores)
    assert (asyn.kind, asyn.num_workers, asyn.local_envs) == ("process", min(cores, 32), 0)
    assert sync.worker_spin_s > 0 and asyn.worker_spin_s == 0
    spec = resolve("Pong-v5")
    try:  # with the restart policy every env runs in a worker, where a crash can be survived
        guarded = make_mod.plan(spec, 32, 32, None, "auto", None, True)
    finally:
        if spec.probe is not None:
            spec.probe.close()
    assert (guarded.num_workers, guarded.local_envs) == (cores, 0)

# -- async ------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["serial", "thread", "process"])
def test_async_batches_serve_every_env_with_its_own_actions(backend):
    n, batch, episode_len = 6, 2, 7
    with seedpool.make(lambda: EchoEnv(episode_len=episode_len), num_envs=n, batch_size=batch,
                       backend=backend, num_workers=2, seed=0) as pool:
        pool.async_reset()
        served, elapsed, last_action = np.zeros(n, int), {}, {}
        # Until every env has been served 10 times: how many rounds that takes depends on how
        # the OS schedules the workers, so the cap is only there to end a starving run.
        for r in range(200_000):
            if served.min() >= 10:
                break
            obs, rew, term, trunc, info = pool.recv()
            ids = info["env_id"]
            assert ids.shape == (batch,) and len(set(ids.tolist())) == batch
            assert obs.shape == (batch, 3) and rew.shape == (batch,)
            for k, i in enumerate(ids.tolist()):
                served[i] += 1
                t = int(info["elapsed_step"][k])
                assert obs[k][0] == i, "row k must hold env i's own observation"
                if i in elapsed:  # each env's episode advances one step per service
                    assert t == (0 if elapsed[i] == episode_len else elapsed[i] + 1)
                    if t:
                        assert rew[k] == last_action[i]
                elapsed[i] = t
            actions = (ids + r) % 5
            last_action.update(zip(ids.tolist(), actions.tolist()))
            pool.send(actions, ids)
        assert served.min() >= 10, f"an env was starved: {served.tolist()}"


@pytest.mark.parametrize("backend", ["thread", "process"])
def test_async_recv_returns_the_fastest_envs_first(backend):
    # Envs 0 and 1 (seeds 0, 1) live on worker 0 and cannot finish a step until the gate
    # opens; envs 2 and 3 on worker 1 are free. Two batches of the free envs must come back
    # while the gated ones are still inside their step.
    ctx = multiprocessing.get_context("fork")  # shared with forked workers
    gate, passed = ctx.Event(), ctx.Value("i", 0)
    with seedpool.make(lambda: GatedEnv(gate, passed, gated_below=2), num_envs=4, batch_size=2,
                       backend=backend, num_workers=2, seed=0) as pool:
        pool.async_reset()
        pool.recv()
        pool.recv()
        try:
            pool.send(np.array([1, 1]), [0, 1])
            pool.send(np.array([1, 1]), [2, 3])
            assert sorted(pool.recv()[4]["env_id"].tolist()) == [2, 3]
            pool.send(np.array([1, 1]), [2, 3])
            assert sorted(pool.recv()[4]["env_id"].tolist()) == [2, 3]
            assert passed.value == 0, "a recv waited for the gated envs"
        finally:
            gate.set()
        assert sorted(pool.recv()[4]["env_id"].tolist()) == [0, 1]
        assert passed.value == 2


def test_worker_processes_are_refused_on_a_weakly_ordered_cpu(monkeypatch):
    # The shared-memory rings publish entries, then a head counter, with plain stores: in
    # order on x86-64 only. Elsewhere worker processes are refused and auto steps in-process.
    import importlib
    import platform

    make_module = importlib.import_module("seedpool.envs.make")
    monkeypatch.setattr(make_module, "probe_step_cost", lambda spec: 1e-3)  # auto would pick processes
    monkeypatch.setattr(make_module, "usable_cores", lambda: 4)
    monkeypatch.setattr(make_module, "caller_threads", lambda: 1)  # a script without torch threads
    with seedpool.make(lambda: EchoEnv(), num_envs=4) as pool:
        assert pool.backend.startswith("process")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    with pytest.raises(ValueError, match="x86-64"):
        seedpool.make(lambda: EchoEnv(), num_envs=4, backend="process")
    with seedpool.make(lambda: EchoEnv(), num_envs=4) as pool:
        assert pool.backend == "serial"
    with seedpool.make(lambda: EchoEnv(), num_envs=4, backend="thread", num_workers=2) as pool:
        pool.reset()  # threads stay correct under the GIL, whose hand-offs are fences
        np.testing.assert_array_equal(pool.step(np.array([1, 2, 3, 4]))[1], [1, 2, 3, 4])


# -- clean shutdown ---------------------------------------------------------------------------

def test_close_leaves_no_child_process_at_once_and_twice_is_fine():
    before = child_pids()
    pool = seedpool.make(lambda: EchoEnv(), num_envs=4, backend="process", num_workers=2)
    assert child_pids() - before == set(pool.worker_pids) and len(pool.worker_pids) == 2
    pool.reset()
    pool.step(np.ones(4, np.int64))
    pool.close()
    assert child_pids() - before == set()
    pool.close()


def test_a_pool_garbage_collected_without_close_leaves_nothing():
    before = child_pids()
    pool = seedpool.make(lambda: EchoEnv(), num_envs=2, backend="process", num_workers=2)
    pool.reset()
    pids = set(pool.worker_pids)
    assert pids <= child_pids() - before
    del pool
    gc.collect()
    assert not wait_gone(pids, timeout=GONE_S)


SCRIPT = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time, numpy as np, seedpool
    from envs_for_tests import EchoEnv

    faulthandler.enable()  # SIGABRT from a test that gave up on us dumps every thread's stack
    # Ctrl-C as in a terminal: a test run started as a background job (`cmd &` in a script)
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    class StuckEnv(EchoEnv):
        def step(self, action):  # says so, then sleeps for an hour: no polling of the parent
            os.write(1, b"in step\\n")  # one write: the two workers' lines cannot interleave
            time.sleep(3600)

    make_env = StuckEnv if sys.argv[1] == "stuck" else lambda: EchoEnv(episode_len=50)
    pool = seedpool.make(make_env, num_envs=4, backend="process", num_workers=2)
    pool.reset()
    print(" ".join(map(str, pool.worker_pids)), flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    if sys.argv[1] == "raise":
        raise RuntimeError("script failed with the pool open")
    pool.step(np.ones(4, np.int64))  # in "stuck" mode, this never returns
    print("stepping", flush=True)
    while True:
        pool.step(np.ones(4, np.int64))
    """
)


def start_script(tmp_path, mode: str) -> tuple[subprocess.Popen, set[int]]:
    """Run SCRIPT in a fresh interpreter (its own session); return it and its worker pids."""
    path = tmp_path / "pool_script.py"
    path.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])}
    proc = subprocess.Popen([sys.executable, str(path), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    line = proc.stdout.readline()
    assert line.strip(), f"the script printed no worker pids; stderr:\n{proc.stderr.read()}"
    pids = {int(p) for p in line.split()}
    assert len(pids) == 2
    return proc, pids


def wait_until_stepping(proc: subprocess.Popen, mode: str) -> None:
    """Read the script's output until it is stepping ("step") or both workers sit inside
    env.step ("stuck"), as the script prints it."""
    text, count = ("in step", 2) if mode == "stuck" else ("stepping", 1)
    while count:
        line = proc.stdout.readline()
        assert line, f"the script ended before printing {text!r}; stderr:\n{proc.stderr.read()}"
        count -= line.strip() == text


@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_a_script_that_exits_without_close_leaves_no_process(tmp_path, mode):
    shm = shm_entries()
    proc, pids = start_script(tmp_path, mode)
    _, err = proc.communicate(timeout=GONE_S)
    assert proc.returncode == (0 if mode == "exit" else 1), err
    left = wait_gone(pids, timeout=GONE_S)
    kill_leftovers(left, tmp_path)
    assert not left, "workers outlived their script"
    assert not new_shm_leaks(shm)


def test_ctrl_c_while_stepping_exits_and_leaves_no_process(tmp_path):
    shm = shm_entries()
    proc, pids = start_script(tmp_path, "step")
    try:
        wait_until_stepping(proc, "step")
    except BaseException:
        proc.kill()  # its workers follow it (PR_SET_PDEATHSIG)
        raise
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    try:
        _, err = proc.communicate(timeout=GONE_S)
    except subprocess.TimeoutExpired:
        states = _states(pids | {proc.pid})
        os.kill(proc.pid, signal.SIGABRT)  # faulthandler prints where each thread is
        try:
            _, err = proc.communicate(timeout=GONE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        kill_leftovers(wait_gone(pids, timeout=GONE_S), tmp_path)
        pytest.fail(f"the script did not exit on Ctrl-C within {GONE_S:.0f} s; states {states}; its stderr:\n{err}")
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, f"exit code {proc.returncode}; stderr:\n{err}"
    left = wait_gone(pids, timeout=GONE_S)
    states = _states(left)
    kill_leftovers(left, tmp_path)
    assert not left, f"workers outlived their script: {states}; its stderr:\n{err}"
    assert not new_shm_leaks(shm)


@pytest.mark.parametrize("mode", ["step", "stuck"])
def test_a_parent_killed_with_sigkill_leaves_no_orphan_workers(tmp_path, mode):
    # "stuck": the workers sit inside env.step, so only PR_SET_PDEATHSIG can end them in time.
    shm = shm_entries()
    proc, pids = start_script(tmp_path, mode)
    try:
        wait_until_stepping(proc, mode)
    finally:
        proc.kill()
    proc.communicate(timeout=GONE_S)
    left = wait_gone(pids, timeout=GONE_S)
    kill_leftovers(left, tmp_path)
    assert not left, "orphaned workers survived their parent"
    assert not new_shm_leaks(shm)


def _states(pids: set[int]) -> dict[int, str]:
    """Process state of each pid, for failure messages."""
    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).status()
        except psutil.Error as exc:
            out[pid] = type(exc).__name__
    return out


def kill_leftovers(pids: set[int], tmp_path) -> None:
    """SIGKILL workers of our script that survived (so a failing test leaves nothing running)."""
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if any(str(tmp_path) in part for part in p.cmdline()):
                p.kill()
        except psutil.Error:
            pass
