"""Learning regression: IMPALA with seedpool's CartPole defaults must keep reaching 475."""

import dataclasses

import numpy as np
import pytest

from seedpool.experiment.metrics import series
from seedpool.experiment.plot import smooth
from seedpool.trainers.impala import impala_defaults, train_impala

pytestmark = pytest.mark.slow


def _cfg(tmp_path, **kw):
    cfg = impala_defaults("CartPole-v1")
    return dataclasses.replace(cfg, runs_dir=tmp_path, progress="off", tensorboard=False, seed=1, **kw)


def _best_mean20(run_dir):
    _, _, values = series(run_dir / "metrics.csv", "charts/episodic_return")
    return float(np.max(smooth(np.asarray(values))))  # best mean of 20 consecutive episodes


def test_cartpole_reaches_475_with_the_serial_twin(tmp_path):
    # The same server, buffers, queue and learner in one thread: deterministic for a seed,
    # so this threshold cannot flake (about 100k steps, 15-25 s here).
    cfg = _cfg(tmp_path, total_timesteps=250_000, backend="serial", stop_at_return=475.0)
    cfg.acting = dataclasses.replace(cfg.acting, serial=True)
    result = train_impala(cfg)
    assert result.final_return >= 475, f"mean of the last 20 episodes {result.final_return:.1f}"
    assert result.step < 250_000


def test_cartpole_learns_with_concurrent_acting_and_learning(tmp_path):
    # The threaded system is not deterministic (thread timing sets the policy lag, ~2-3
    # versions here). Alone, 16 of 16 seeds reached 475 within 250k steps, but inside the full
    # suite this seed once peaked at 434, so the exact threshold is asserted for the serial
    # twin above, and here clear learning (random play scores ~22; the lowest peak seen in
    # 25 threaded runs was 348, within 120k steps).
    result = train_impala(_cfg(tmp_path, total_timesteps=250_000, stop_at_return=475.0))
    best = _best_mean20(result.run_dir)
    assert best >= 300, f"best mean of 20 episodes {best:.1f}"
