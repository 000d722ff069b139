"""The end-of-run summary names what limited a threaded run from its per-thread time shares."""
from pathlib import Path

import pytest

from seedpool.experiment import Run, RunConfig
from seedpool.experiment.run import RunResult
from seedpool.experiment.summary import THREAD_SHARES, bottleneck, summary_text


def _shares(env=0.0, inference_wait=0.0, compute=0.0, idle=0.0, blocked=0.0,
            learner_wait=0.0, learn=0.0) -> dict[str, float]:
    return dict(zip(THREAD_SHARES, (env, inference_wait, compute, idle, blocked, learner_wait, learn)))


# What each kind of run looks like from its threads (each thread's shares sum to about 1).
LEARNER_BOUND = _shares(env=0.05, inference_wait=0.95, compute=0.06, idle=0.02, blocked=0.90,
                        learner_wait=0.02, learn=0.98)
ENV_BOUND = _shares(env=0.95, inference_wait=0.04, compute=0.10, idle=0.88, blocked=0.0,
                    learner_wait=0.80, learn=0.20)
INFERENCE_BOUND = _shares(env=0.25, inference_wait=0.75, compute=0.93, idle=0.05, blocked=0.01,
                          learner_wait=0.70, learn=0.30)


def test_learner_bound_shares_name_learning_as_the_limit():
    text = bottleneck(LEARNER_BOUND)
    assert "learning limited this run" in text
    assert "learner was busy 98%" in text and "blocked on the full unroll queue 90%" in text
    assert "envs limited" not in text and "inference limited" not in text


def test_env_bound_shares_name_envs_as_the_limit():
    text = bottleneck(ENV_BOUND)
    assert "envs limited this run" in text
    assert "stepping envs 95%" in text and "inference idle 88%" in text and "unrolls 80%" in text


def test_inference_bound_shares_name_inference_as_the_limit():
    text = bottleneck(INFERENCE_BOUND)
    assert "inference limited this run" in text
    assert "computing 93%" in text and "waited for actions 75%" in text and "unrolls 70%" in text


def test_no_saturated_thread_names_no_limit():
    text = bottleneck(_shares(env=0.3, inference_wait=0.3, compute=0.2, idle=0.5,
                              learner_wait=0.6, learn=0.4))
    assert "no single part limited this run" in text
    assert not any(f"{part} limited" in text for part in ("learning", "envs", "inference"))


def _result(time_shares: dict[str, float], thread_shares: dict[str, float]) -> RunResult:
    return RunResult(Path("runs/x"), 1_000_000, 20.5, 3_000.0, 333.3, time_shares, False,
                     thread_shares=thread_shares)


def test_threaded_summary_says_what_limited_the_run_not_one_actors_phases():
    # The Pong run that prompted this: actors waited on inference 95%, which was blocked by
    # the learner; the phase breakdown alone blamed inference.
    text = summary_text(_result({"env": 0.05, "inference": 0.95}, LEARNER_BOUND), "Pong-v5", "impala")
    assert "1,000,000 env steps" in text and "final return 20.5" in text
    assert "learning limited this run" in text and text.endswith(".")
    assert "policy inference 95%" not in text


def test_sequential_summary_keeps_the_phase_breakdown():
    text = summary_text(_result({"env": 0.3, "learn": 0.6, "other": 0.1}, {}), "CartPole-v1", "ppo")
    assert "Time went to learning 60%, env stepping 30%" in text and "limited" not in text


def test_run_result_carries_the_mean_of_time_share_metrics(tmp_path):
    cfg = RunConfig(runs_dir=tmp_path, progress="off", tensorboard=False)
    with Run.open(cfg, "impala", cfg) as run:
        run.end_update(100, {"time/share_learn": 0.9, "time/share_env": 0.1, "losses/loss": 5.0})
        run.end_update(200, {"time/share_learn": 0.7, "time/share_env": 0.3, "losses/loss": 1.0})
        result = run.result()
    assert result.thread_shares == pytest.approx({"time/share_learn": 0.8, "time/share_env": 0.2})


def test_run_without_share_metrics_has_no_thread_shares(tmp_path):
    cfg = RunConfig(runs_dir=tmp_path, progress="off", tensorboard=False)
    with Run.open(cfg, "ppo", cfg) as run:
        run.end_update(100, {"losses/loss": 5.0})
        assert run.result().thread_shares == {}
