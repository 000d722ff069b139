"""backend="auto" in a training loop: given cores, the caller's compute threads and the
probed step cost, which layout it picks, and that the choice is visible and overridable."""

from __future__ import annotations

import importlib
import logging
import sys
import types

import gymnasium as gym
import pytest

import seedpool

make_mod = importlib.import_module("seedpool.envs.make")
choose = make_mod.choose_layout

HALF_CHEETAH = 150e-6  # seconds per step, about what MuJoCo's HalfCheetah costs
CART_POLE = 3e-6


def layout(cost, n, cores, threads, batch=None, isolate=False):
    got = choose(cost, n, n if batch is None else batch, None, cores, threads, isolate)
    return got.backend, got.num_workers, got.local_envs


@pytest.mark.parametrize("cost, n, cores, threads, expected", [
    # cheap envs: the hand-offs cost more than the work, loop or not
    (CART_POLE, 8, 2, 1, ("serial", 0, 8)),
    (CART_POLE, 8, 2, 2, ("serial", 0, 8)),
    # a script with no torch threads: costly envs are spread over a worker and this process
    (HALF_CHEETAH, 2, 2, 1, ("process", 1, 1)),
    (HALF_CHEETAH, 8, 2, 1, ("process", 1, 4)),
    # the same envs under a torch loop holding both cores: stepped here
    (HALF_CHEETAH, 2, 2, 2, ("serial", 0, 2)),
    (HALF_CHEETAH, 4, 2, 2, ("serial", 0, 4)),
    (HALF_CHEETAH, 8, 2, 2, ("serial", 0, 8)),
    # ...unless a batch's work outlasts the threads' spin by more than the hand-offs
    (HALF_CHEETAH, 64, 2, 2, ("process", 1, 32)),
    # a big machine whose cores torch leaves partly free: workers pay again
    (HALF_CHEETAH, 8, 16, 4, ("process", 15, 0)),
    # ...and one whose cores torch holds all: 8 envs stay here, 64 are spread
    (HALF_CHEETAH, 8, 16, 16, ("serial", 0, 8)),
    (HALF_CHEETAH, 64, 16, 16, ("process", 15, 4)),
    # a single core or a single env: nothing to spread
    (HALF_CHEETAH, 8, 1, 1, ("serial", 0, 8)),
    (HALF_CHEETAH, 1, 2, 1, ("serial", 0, 1)),
])
def test_sync_layout_from_cores_threads_and_cost(cost, n, cores, threads, expected):
    assert layout(cost, n, cores, threads) == expected


def test_async_mode_and_restart_policy_ignore_the_loop_rule():
    """Async mode overlaps the caller's work with the envs' (that is its point), and
    on_worker_death='restart' asks for envs in workers: neither moves envs into this process."""
    assert layout(HALF_CHEETAH, 8, 2, 2, batch=4) == ("process", 1, 4)  # 0.6 ms a batch: shared
    assert layout(HALF_CHEETAH, 32, 2, 2, batch=16) == ("process", None, 0)  # 2.4 ms: workers only
    assert layout(HALF_CHEETAH, 8, 2, 2, isolate=True) == ("process", None, 0)
    # a GIL-holding family (Atari) that was not probed keeps going to workers
    assert layout(None, 8, 2, 1) == ("process", 1, 4)


def test_loop_rule_switches_once_as_work_grows():
    """More work per batch never turns processes back into serial."""
    for cores, threads in [(2, 2), (4, 4), (16, 16), (16, 8)]:
        pays = [make_mod.loop_parallel_pays(k * 1e-4, cores, cores, threads) for k in range(1, 2000)]
        first = pays.index(True)
        assert all(pays[first:]), (cores, threads)
        assert not any(pays[:first])


def test_reason_names_the_threads_and_the_work():
    got = choose(HALF_CHEETAH, 4, 4, None, 2, 2, False)
    assert "0.6 ms" in got.reason and "2 torch threads" in got.reason and "2 cores" in got.reason


def test_caller_threads_reads_torch_only_when_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert make_mod.caller_threads() == 1
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 6))
    assert make_mod.caller_threads() == 6


def test_choice_is_in_repr_and_logged_and_any_backend_can_be_forced(monkeypatch, caplog):
    monkeypatch.setattr(make_mod, "usable_cores", lambda: 2)
    monkeypatch.setattr(make_mod, "probe_step_cost", lambda spec: HALF_CHEETAH)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 2))
    with caplog.at_level(logging.INFO, logger="seedpool.envs"):
        envs = seedpool.make_vec(lambda: gym.make("CartPole-v1"), num_envs=4)
    try:
        assert envs.pool.backend == "serial"
        assert "auto: a batch is 0.6 ms of env work" in repr(envs)
    finally:
        envs.close()
    assert [r for r in caplog.records if "backend='serial'" in r.getMessage() and "torch threads" in r.getMessage()]
    with seedpool.make(lambda: gym.make("CartPole-v1"), num_envs=4, backend="process", num_workers=2) as pool:
        assert pool.backend == "process" and "auto:" not in repr(pool)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 1))
    with seedpool.make(lambda: gym.make("CartPole-v1"), num_envs=4) as pool:
        assert pool.backend == "process+main"


def test_workers_do_not_spin_on_cores_the_callers_threads_hold(monkeypatch):
    monkeypatch.setattr(make_mod, "usable_cores", lambda: 2)
    monkeypatch.setattr(make_mod, "probe_step_cost", lambda spec: HALF_CHEETAH)
    spec = make_mod.resolve(lambda: gym.make("CartPole-v1"))
    try:  # 64 envs: workers pay even in the loop, and one shares the pool's core
        monkeypatch.setattr(make_mod, "caller_threads", lambda: 1)
        alone = make_mod.plan(spec, 64, 64, None, "auto", None, False)
        monkeypatch.setattr(make_mod, "caller_threads", lambda: 2)
        loop = make_mod.plan(spec, 64, 64, None, "auto", None, False)
    finally:
        spec.probe.close()
    assert (alone.kind, alone.local_envs) == (loop.kind, loop.local_envs) == ("process", 32)
    assert alone.worker_spin_s > 0 and loop.worker_spin_s == 0 and loop.main_spin_s == 0


_PROBE_UNDER_LOAD = r"""
import os, sys, time
import gymnasium as gym
import numpy as np
from seedpool.bench.envs import burn_cpu
from seedpool.envs.runner import probe_step_cost
from seedpool.envs.spec import resolve

class Burn(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (1,))
    action_space = gym.spaces.Discrete(2)
    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}
    def step(self, action):
        burn_cpu(400e-6)
        return np.zeros(1, np.float32), 0.0, False, False, {}

core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})
rival = os.fork()
if rival == 0:  # a job of someone else's on the same core
    while True:
        pass
try:
    time.sleep(0.05)
    spec = resolve(Burn)
    print(min(probe_step_cost(spec) for _ in range(3)))
finally:
    os.kill(rival, 9)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the run-queue wait is read from Linux's schedstat")
def test_probe_counts_the_envs_work_not_the_time_another_job_holds_the_core():
    """A rival process on the probe's core doubles a step's wall time; the probe reads the env's
    own cost (here 400 us of CPU a step), so auto does not lay out a loaded machine's envs
    as if they were twice as costly."""
    import os
    import subprocess

    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("this kernel reports no schedstat: the probe counts wall time")
    out = subprocess.run([sys.executable, "-c", _PROBE_UNDER_LOAD], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    cost = float(out.stdout.split()[-1])
    assert 350e-6 < cost < 600e-6, f"probe read {cost * 1e6:.0f} us for a 400 us step beside a rival job"
