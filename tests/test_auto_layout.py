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
