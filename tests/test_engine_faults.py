"""Bad input and faults: clear errors before anything reaches a worker, env errors, dead and hung workers."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import seedpool
from envs_for_tests import BlockingEnv, BoxActionEnv, EchoEnv, FaultyEnv, ResetFailEnv
from seedpool.envs.errors import ClosedError, EnvPoolError, EnvStepError, StepTimeoutError, WorkerDiedError
from seedpool.envs.executor import ExecutorConfig
from seedpool.envs.pool import EnvPool
from seedpool.envs.spec import resolve

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(60)]

USER_ERRORS = (ValueError, TypeError, EnvPoolError)
DETECT_S = 3.0  # a dead worker must be reported within this many seconds
# How long a loop waits for an error to come (it ends when it does): far beyond the bounds the
# tests assert, so a slow detection fails on the measured time, not on a loop that gave up.
WAIT_S = 30.0  # under the module's 60 s per-test timeout


def echo_pool(backend: str, num_envs: int = 3, **kw) -> seedpool.EnvPool:
    """Envs whose reward echoes the action and whose obs[1] counts steps in the episode."""
    return seedpool.make(lambda: EchoEnv(n_actions=5, episode_len=1000), num_envs=num_envs,
                         backend=backend, seed=0, **kw)


# -- bad input, sync --------------------------------------------------------------------------

BAD_DISCRETE = {
    "wrong shape": (np.zeros((3, 2), np.int64), "shape"),
    "too few actions": (np.array([1, 2]), "3"),
    "too many actions": (np.array([1, 2, 3, 4]), "3"),
    "float dtype": (np.array([1.0, 2.0, 3.0]), "integer"),
    "NaN": (np.array([1.0, np.nan, 3.0]), "NaN"),
    "above range": (np.array([1, 5, 2]), "[0, 5)"),
    "negative": (np.array([1, -1, 2]), "[0, 5)"),
}


@pytest.mark.parametrize("backend", ["serial", "process"])
@pytest.mark.parametrize("case", sorted(BAD_DISCRETE))
def test_bad_discrete_actions_raise_and_the_next_step_uses_the_right_actions(backend, case):
    bad, words = BAD_DISCRETE[case]
    with echo_pool(backend) as pool:
        pool.reset()
        pool.step(np.array([0, 0, 0]))
        with pytest.raises(USER_ERRORS, match=_escape(words)):
            pool.step(bad)
        obs, rew, term, trunc, info = pool.step(np.array([2, 4, 1]))
        np.testing.assert_array_equal(rew, [2, 4, 1])
        # Exactly one step since the good one before: nothing of the bad call reached an env.
        np.testing.assert_array_equal(info["elapsed_step"], [2, 2, 2])
        np.testing.assert_array_equal(obs[:, 1], [2, 2, 2])


@pytest.mark.parametrize("backend", ["serial", "process"])
@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_non_finite_box_actions_raise_before_reaching_the_env(backend, bad_value):
    with seedpool.make(BoxActionEnv, num_envs=2, backend=backend) as pool:
        pool.reset()
        with pytest.raises(ValueError, match="NaN"):
            pool.step(np.array([[0.1, 0.2], [bad_value, 0.0]], np.float32))
        with pytest.raises(ValueError, match="shape"):
            pool.step(np.zeros((2, 3), np.float32))
        obs, rew, term, trunc, info = pool.step(np.array([[0.5, 0.0], [0.0, 0.5]], np.float32))
        np.testing.assert_allclose(rew, [0.5, 5.0])
        np.testing.assert_array_equal(info["elapsed_step"], [1, 1])


# -- bad input, async -------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["serial", "process"])
def test_async_misuse_raises_and_rewards_still_match_their_actions(backend):
    with echo_pool(backend, num_envs=4, batch_size=2, num_workers=2) as pool:
        with pytest.raises(EnvPoolError, match="in flight"):
            pool.recv()  # nothing sent yet
        pool.async_reset()
        first = pool.recv()[4]["env_id"]
        second = pool.recv()[4]["env_id"]
        assert sorted([*first, *second]) == [0, 1, 2, 3]
        with pytest.raises(EnvPoolError, match="in flight"):
            pool.recv()  # everything came back
        bad_sends = [
            (np.array([1, 1]), [0, 9], "unknown env_id"),
            (np.array([1, 1]), [-1, 0], "unknown env_id"),
            (np.array([1, 1]), [first[0], first[0]], "duplicate"),
            (np.array([1, 1, 1]), first, "shape"),
            (np.array([1, 7]), first, "[0, 5)"),
            (np.array([1.0, 2.0]), first, "integer"),
        ]
        for action, ids, words in bad_sends:
            with pytest.raises(USER_ERRORS, match=_escape(words)):
                pool.send(action, ids)
        sent = {}
        pool.send(np.array([1, 2]), first)
        sent.update({int(first[0]): 1, int(first[1]): 2})
        with pytest.raises(EnvPoolError, match="already in flight"):
            pool.send(np.array([4, 4]), first)
        with pytest.raises(EnvPoolError, match="already in flight"):
            pool.send(np.array([4, 4]), [second[0], first[1]])  # one of them is in flight
        pool.send(np.array([3, 4]), second)
        sent.update({int(second[0]): 3, int(second[1]): 4})
        got = {}
        for _ in range(2):
            _, rew, _, _, info = pool.recv()
            got.update(zip(info["env_id"].tolist(), rew.tolist()))
            np.testing.assert_array_equal(info["elapsed_step"], [1, 1])
        assert got == sent


def test_calls_after_close_raise_closed_error():
    pool = echo_pool("process", num_envs=2)
    pool.reset()
    pool.close()
    pool.close()  # twice is fine
    calls = [pool.reset, lambda: pool.step(np.array([0, 0])), pool.async_reset,
             lambda: pool.send(np.array([0]), [0]), pool.recv]
    for call in calls:
        with pytest.raises(ClosedError):
            call()


BAD_MAKE = {
    "num_envs=0": (dict(num_envs=0), ValueError, "num_envs"),
    "batch_size > num_envs": (dict(num_envs=2, batch_size=3), ValueError, "batch_size"),
    "batch_size=0": (dict(num_envs=2, batch_size=0), ValueError, "batch_size"),
    "unknown backend": (dict(backend="gpu"), ValueError, "backend"),
    "unknown autoreset": (dict(autoreset="sometimes"), ValueError, "autoreset"),
    "seed list of wrong length": (dict(num_envs=3, seed=[1, 2]), ValueError, "seed"),
}


@pytest.mark.parametrize("case", sorted(BAD_MAKE))
def test_bad_make_arguments_raise_clear_errors(case):
    kwargs, exc, words = BAD_MAKE[case]
    with pytest.raises(exc, match=words):
        seedpool.make("CartPole-v1", **kwargs)


def test_unknown_task_id_suggests_a_close_match():
    with pytest.raises(ValueError, match="CartPole-v1"):
        seedpool.make("CartPol-v1", num_envs=1)


def test_task_options_with_a_callable_are_refused():
    with pytest.raises(TypeError, match="episode_len"):
        seedpool.make(EchoEnv, num_envs=1, episode_len=3)


# -- an env that raises -----------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["serial", "thread", "process"])
def test_env_error_names_the_env_carries_its_traceback_and_the_pool_goes_on(backend, runner_pid):
    # Env 1 (seed 1) raises on step 3 of each episode.
    with seedpool.make(lambda: FaultyEnv("raise", 3, 1, runner_pid), num_envs=3, backend=backend,
                       seed=0) as pool:
        pool.reset()
        pool.step(np.array([1, 1, 1]))
        pool.step(np.array([1, 1, 1]))
        with pytest.raises(EnvStepError) as caught:
            pool.step(np.array([1, 1, 1]))
        err = caught.value
        assert err.env_id == 1
        assert "environment 1" in str(err)
        assert "Traceback (most recent call last)" in str(err)
        assert "deliberate failure of FaultyEnv at step 3" in str(err)
        assert "_misbehave" in str(err)  # the frame inside the env
        # The other envs carry on, and their rewards are still their own actions; the failed
        # env comes back reset, its broken episode reported truncated.
        obs, rew, term, trunc, info = pool.step(np.array([2, 3, 4]))
        np.testing.assert_array_equal(rew[[0, 2]], [2, 4])
        np.testing.assert_array_equal(info["env_id"], [0, 1, 2])
        np.testing.assert_array_equal(trunc, [False, True, False])
        np.testing.assert_array_equal(obs[1], [1, 0, -1])  # env 1's reset obs
        obs, rew, term, trunc, info = pool.step(np.array([2, 3, 4]))
        np.testing.assert_array_equal(rew[[0, 2]], [2, 4])


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_env_error_in_async_mode_leaves_the_other_envs_served(backend, runner_pid):
    # Env 1 raises on step 2 of each episode; after the error it comes back from a later
    # recv() reset and reported truncated, and the other envs are served throughout.
    with seedpool.make(lambda: FaultyEnv("raise", 2, 1, runner_pid), num_envs=4, batch_size=2,
                       backend=backend, num_workers=2, seed=0) as pool:
        pool.async_reset()
        errors, served, last_action, came_back_truncated = [], {i: 0 for i in range(4)}, {}, 0
        deadline = time.monotonic() + WAIT_S
        # Formatting a traceback in a fresh worker takes milliseconds, while a round here takes
        # microseconds: run until the failed env has come back twice (or the deadline).
        while time.monotonic() < deadline and (len(errors) < 2 or min(served.values()) < 3):
            time.sleep(0.001)
            try:
                obs, rew, term, trunc, info = pool.recv()
            except EnvStepError as err:
                errors.append(err.env_id)
                continue
            ids = info["env_id"].tolist()
            for k, i in enumerate(ids):
                served[i] += 1
                if info["elapsed_step"][k] > 0:
                    assert rew[k] == last_action[i], f"env {i} got the reward of another action"
                if i == 1 and errors and trunc[k]:
                    came_back_truncated += 1
                    assert obs[k][1] == 0, "the failed env comes back with its reset obs"
            actions = (np.arange(len(ids)) + len(errors)) % 5
            last_action.update(zip(ids, actions.tolist()))
            pool.send(actions, ids)
        assert len(errors) >= 2 and set(errors) == {1}
        assert came_back_truncated >= 1
        assert min(served.values()) >= 3, served


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_env_error_in_reset_names_the_env_and_a_later_reset_works(backend):
    with seedpool.make(lambda: ResetFailEnv(bad_seed=1), num_envs=3, backend=backend, seed=0) as pool:
        with pytest.raises(EnvStepError, match="deliberate reset failure") as caught:
            pool.reset()
        assert caught.value.env_id == 1 and "reset" in str(caught.value)
        assert_fresh_start_after_reset(pool)


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_a_reset_after_an_env_error_in_step_starts_clean_episodes(backend, runner_pid):
    with seedpool.make(lambda: FaultyEnv("raise", 2, 1, runner_pid), num_envs=3, backend=backend,
                       seed=0) as pool:
        pool.reset()
        pool.step(np.array([1, 1, 1]))
        with pytest.raises(EnvStepError):
            pool.step(np.array([1, 1, 1]))
        assert_fresh_start_after_reset(pool)


def assert_fresh_start_after_reset(pool: seedpool.EnvPool) -> None:
    """After reset(), every env's first step uses its action: no leftover reset swallows it."""
    obs, _ = pool.reset(seed=10)
    np.testing.assert_array_equal(obs[:, 0], [10, 11, 12])
    np.testing.assert_array_equal(obs[:, 1], [0, 0, 0])
    obs, rew, term, trunc, info = pool.step(np.array([1, 2, 3]))
    np.testing.assert_array_equal(rew, [1, 2, 3])
    np.testing.assert_array_equal(trunc, [False, False, False])
    np.testing.assert_array_equal(info["elapsed_step"], [1, 1, 1])


# -- a worker that dies -----------------------------------------------------------------------

def test_a_sigkilled_worker_is_reported_within_bounded_time():
    with echo_pool("process", num_envs=4, num_workers=2, step_timeout=30.0) as pool:
        pool.reset()
        os.kill(pool.worker_pids[0], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(WorkerDiedError, match="worker 0"):
            pool.step(np.array([1, 1, 1, 1]))
        assert time.monotonic() - start < DETECT_S


def test_a_worker_dying_mid_step_in_async_mode_is_reported(runner_pid):
    with seedpool.make(lambda: FaultyEnv("kill", 2, 0, runner_pid), num_envs=4, batch_size=2,
                       backend="process", num_workers=2, seed=0, step_timeout=30.0) as pool:
        # Env 0 kills worker 0 (envs 0, 1) on its second step; envs 2 and 3 on worker 1 can
        # make up every batch, so only a liveness check notices that half the pool is gone.
        pool.async_reset()
        start = time.monotonic()
        with pytest.raises(WorkerDiedError):
            while time.monotonic() - start < WAIT_S:
                info = pool.recv()[4]
                pool.send(np.array([1, 1]), info["env_id"])
                time.sleep(0.001)
        assert time.monotonic() - start < DETECT_S


def test_restart_policy_replaces_a_killed_worker_and_truncates_its_envs():
    with echo_pool("process", num_envs=4, num_workers=2, on_worker_death="restart") as pool:
        pool.reset()
        pool.step(np.array([1, 1, 1, 1]))
        old = pool.worker_pids
        os.kill(old[0], signal.SIGKILL)
        start = time.monotonic()
        obs, rew, term, trunc, info = pool.step(np.array([1, 2, 3, 4]))
        assert time.monotonic() - start < DETECT_S
        assert pool.worker_restarts == 1
        assert pool.worker_pids[0] != old[0] and pool.worker_pids[1] == old[1]
        # Worker 0 owned envs 0 and 1: their episodes end truncated, the others go on.
        np.testing.assert_array_equal(trunc, [True, True, False, False])
        np.testing.assert_array_equal(info["restarted"], [True, True, False, False])
        np.testing.assert_array_equal(rew[2:], [3, 4])
        for _ in range(3):
            obs, rew, term, trunc, info = pool.step(np.array([1, 2, 3, 4]))
            assert not info["restarted"].any() and not trunc.any()
        np.testing.assert_array_equal(rew, [1, 2, 3, 4])


def test_restart_policy_recovers_an_env_killed_mid_step(runner_pid):
    with seedpool.make(lambda: FaultyEnv("kill", 2, 3, runner_pid), num_envs=4, backend="process",
                       num_workers=2, seed=0, on_worker_death="restart") as pool:
        pool.reset()
        pool.step(np.array([1, 1, 1, 1]))
        restarted = np.zeros(4, int)
        for _ in range(3):  # env 3 kills worker 1 (envs 2, 3) on the first of these steps
            obs, rew, term, trunc, info = pool.step(np.array([1, 2, 3, 4]))
            np.testing.assert_array_equal(trunc, info["restarted"])
            restarted += info["restarted"]
            np.testing.assert_array_equal(rew[:2], [1, 2])
        assert pool.worker_restarts == 1
        # Env 3 was lost mid-step; env 2 had finished its step and lives on in a new worker,
        # so its episode is reported truncated on this step or the next: once each.
        np.testing.assert_array_equal(restarted, [0, 0, 1, 1])


# -- a worker that hangs ----------------------------------------------------------------------

def test_a_hanging_env_raises_step_timeout_in_bounded_time(runner_pid):
    timeout = 1.0
    with seedpool.make(lambda: FaultyEnv("hang", 2, 0, runner_pid), num_envs=2, backend="process",
                       num_workers=2, seed=0, step_timeout=timeout) as pool:
        pool.reset()
        pool.step(np.array([1, 1]))
        start = time.monotonic()
        with pytest.raises(StepTimeoutError, match="step_timeout") as caught:
            pool.step(np.array([1, 1]))
        assert timeout <= time.monotonic() - start < timeout + 2.0
        assert "envs [0]" in str(caught.value), "the error should name the stuck env"


def test_a_hung_worker_in_async_mode_is_reported_while_other_envs_still_finish(runner_pid):
    # Env 0 hangs on its second step and blocks worker 0 (envs 0, 1); envs 2 and 3 keep
    # making up batches. Losing half the pool without a word would be a silent hang.
    timeout = 1.0
    with seedpool.make(lambda: FaultyEnv("hang", 2, 0, runner_pid), num_envs=4, batch_size=2,
                       backend="process", num_workers=2, seed=0, step_timeout=timeout) as pool:
        pool.async_reset()
        start = time.monotonic()
        with pytest.raises(StepTimeoutError):
            while time.monotonic() - start < WAIT_S:
                info = pool.recv()[4]
                pool.send(np.array([1, 1]), info["env_id"])
                time.sleep(0.001)
        assert time.monotonic() - start < timeout + 2.0


def _escape(words: str) -> str:
    import re

    return re.escape(words)


def test_restart_policy_replaces_a_hung_worker_after_step_timeout(runner_pid):
    timeout = 1.0
    with seedpool.make(lambda: FaultyEnv("hang", 2, 0, runner_pid), num_envs=4, backend="process",
                       num_workers=2, seed=0, step_timeout=timeout, on_worker_death="restart") as pool:
        pool.reset()
        pool.step(np.array([1, 1, 1, 1]))
        start = time.monotonic()
        obs, rew, term, trunc, info = pool.step(np.array([1, 2, 3, 4]))  # env 0 hangs worker 0
        assert timeout <= time.monotonic() - start < timeout + 2.0
        assert pool.worker_restarts == 1
        np.testing.assert_array_equal(info["restarted"], [True, True, False, False])
        np.testing.assert_array_equal(trunc, [True, True, False, False])
        np.testing.assert_array_equal(rew[2:], [3, 4])


# -- restart policy and thread workers --------------------------------------------------------

@pytest.mark.parametrize("how", ["backend='thread'", "auto choosing threads"])
def test_restart_policy_refuses_thread_workers_which_cannot_be_replaced(how, force_layout):
    # A thread cannot be killed, so a hung one could never be replaced: with this combination
    # a step whose env hangs used to block forever instead of raising after step_timeout.
    if how == "auto choosing threads":
        force_layout("thread", 2, 0)
    backend = "thread" if how == "backend='thread'" else "auto"
    gate = threading.Event()
    with pytest.raises(ValueError, match="backend='process'"):
        seedpool.make(lambda: BlockingEnv(gate, 5, 0), num_envs=2, backend=backend, step_timeout=3.0,
                      on_worker_death="restart")


def test_a_hung_thread_worker_under_the_restart_policy_still_times_out():
    # Below make(), which refuses this combination: an executor told to restart thread workers
    # must still raise after step_timeout rather than wait for a kill that cannot happen.
    timeout, gate = 1.0, threading.Event()
    cfg = ExecutorConfig("thread", num_workers=2, local_envs=0, worker_spin_s=0.0, main_spin_s=0.0,
                         step_timeout=timeout, restart_workers=True)
    pool = EnvPool(resolve(lambda: BlockingEnv(gate, 2, 0)), 2, 2, [0, 1], "next_step", cfg)
    outcome: list[BaseException] = []

    def second_step() -> None:
        try:
            pool.step(np.array([1, 1]))  # env 0 blocks on its second step
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    try:
        pool.reset()
        pool.step(np.array([1, 1]))
        caller = threading.Thread(target=second_step, daemon=True)
        start = time.monotonic()
        caller.start()
        caller.join(WAIT_S)
        blocked = caller.is_alive()
        gate.set()  # release the env either way, so the worker thread ends
        caller.join(WAIT_S)
        assert not blocked, f"pool.step still blocked {WAIT_S:.0f} s after step_timeout ({timeout} s)"
        assert len(outcome) == 1 and isinstance(outcome[0], StepTimeoutError), outcome
        assert "envs [0]" in str(outcome[0]) and "backend='process'" in str(outcome[0])
        assert timeout <= time.monotonic() - start
    finally:
        gate.set()
        pool.close()
