"""Run machinery: checkpoints, config round trip, metrics, progress, plots, summary."""
import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from seedpool.experiment import (
    CheckpointError, RunConfig, config_from_dict, config_to_dict, load_checkpoint, rng_state,
    save_checkpoint, set_rng_state,
)
from seedpool.experiment.metrics import MetricsWriter, read_metrics, series
from seedpool.experiment.plot import plot_runs, smooth
from seedpool.experiment.progress import ProgressDisplay
from seedpool.experiment.run import Run, RunResult, new_run_dir
from seedpool.experiment.summary import summary_text


def test_checkpoint_round_trip_restores_model_optimizer_and_generators(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, "ppo", {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                  "rng": rng_state(), "counters": {"step": 7}})
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary left behind
    expected = (random.random(), np.random.rand(), torch.rand(2))
    state = load_checkpoint(path, "ppo")
    set_rng_state(state["rng"])
    got = (random.random(), np.random.rand(), torch.rand(2))
    assert got[:2] == expected[:2] and torch.equal(got[2], expected[2])
    model2 = torch.nn.Linear(3, 2)
    opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["optimizer"])
    assert torch.equal(model2.weight, model.weight)
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    assert state["counters"] == {"step": 7}


def test_corrupt_foreign_and_other_algorithm_checkpoints_are_refused(tmp_path):
    corrupt = tmp_path / "corrupt.pt"
    save_checkpoint(corrupt, "ppo", {"x": torch.zeros(1000)})
    corrupt.write_bytes(corrupt.read_bytes()[:500])  # truncated mid-file
    with pytest.raises(CheckpointError, match="truncated, corrupt"):
        load_checkpoint(corrupt)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {}}, foreign)
    with pytest.raises(CheckpointError, match="not a seedpool checkpoint"):
        load_checkpoint(foreign)
    theirs = tmp_path / "impala.pt"
    save_checkpoint(theirs, "impala", {})
    with pytest.raises(CheckpointError, match="seedpool train impala --resume"):
        load_checkpoint(theirs, "ppo")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_nested_config_survives_json():
    from seedpool.trainers.ppo import ppo_defaults

    cfg = ppo_defaults("CartPole-v1")
    cfg.resume = Path("runs/x")
    cfg.model.hidden_sizes = (32, 16)
    data = json.loads(json.dumps(config_to_dict(cfg)))
    again = config_from_dict(type(cfg), data)
    assert again == cfg
    with pytest.raises(ValueError, match="no option"):
        config_from_dict(RunConfig, {"nonsense": 1})


def test_metrics_append_and_resume_drops_rows_after_the_checkpoint(tmp_path):
    m = MetricsWriter(tmp_path, tensorboard=True)
    for step in (100, 200, 300):
        m.write(step, step / 100, {"charts/SPS": step, "losses/x": float("nan")})
    m.close()
    assert list(tmp_path.glob("tb/events.out.tfevents.*"))
    m = MetricsWriter(tmp_path, tensorboard=False, resume_step=200)
    m.write(300, 3.5, {"charts/SPS": 999})
    m.close()
    assert list(read_metrics(tmp_path / "metrics.csv")) == [
        (100, 1.0, "charts/SPS", 100.0), (200, 2.0, "charts/SPS", 200.0), (300, 3.5, "charts/SPS", 999.0)]


def test_tensorboard_reads_the_scalars_and_the_purge_of_a_resumed_run(tmp_path):
    event_file_loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    m = MetricsWriter(tmp_path, tensorboard=True)
    m.write(100, 1.0, {"charts/episodic_return": 12.5, "losses/loss": 0.25})
    m.write(2**40, 2.0, {"charts/episodic_return": -3.0})  # steps past 32 bits
    m.close()
    m = MetricsWriter(tmp_path, tensorboard=True, resume_step=100)
    m.write(200, 3.0, {"charts/episodic_return": 7.0})
    m.close()
    first, second = sorted(tmp_path.glob("tb/events.out.tfevents.*"))
    # The legacy loader yields the records as written (the current one rewrites scalars as tensors).
    events = list(event_file_loader.LegacyEventFileLoader(str(first)).Load())
    assert events[0].file_version == "brain.Event:2"
    scalars = [(e.step, v.tag, v.simple_value) for e in events[1:] for v in e.summary.value]
    assert scalars == [(100, "charts/episodic_return", 12.5), (100, "losses/loss", 0.25),
                       (2**40, "charts/episodic_return", -3.0)]
    resumed = list(event_file_loader.LegacyEventFileLoader(str(second)).Load())
    assert (resumed[1].step, resumed[1].session_log.status) == (101, resumed[1].session_log.START)
    assert [(e.step, e.summary.value[0].simple_value) for e in resumed[2:]] == [(200, 7.0)]


def test_updates_are_logged_every_metrics_every_env_steps_and_the_last_one_always(tmp_path):
    cfg = RunConfig(runs_dir=tmp_path, progress="off", tensorboard=False, metrics_every=100)
    with Run.open(cfg, "sac", cfg) as run:
        for step in range(1, 251):
            run.end_update(step, {"losses/x": float(step)})
    rows = [(step, value) for step, _, name, value in read_metrics(run.dir / "metrics.csv") if name == "losses/x"]
    assert rows == [(1, 1.0), (101, 101.0), (201, 201.0), (250, 250.0)]
    assert run.updates == 250


def test_progress_prints_log_lines_when_not_on_a_terminal():
    out = io.StringIO()
    p = ProgressDisplay(1000, mode="auto", log_every_s=0.0, stream=out)
    p.update(250, sps=1234.0, recent_return=float("nan"))
    p.update(500, sps=1000.0, recent_return=42.25)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("step 250/1,000 (25%) | 1,234 SPS | return -")
    assert "return 42.2" in lines[1] and "0:00 left" in lines[1]


def test_progress_draws_a_live_bar_when_asked():
    out = io.StringIO()
    p = ProgressDisplay(1000, mode="rich", stream=out)
    p.update(500, sps=1000.0, recent_return=42.0)
    p.print("[seedpool] hello")
    p.close()
    text = out.getvalue()
    assert "500/1000" in text and "1,000 SPS" in text and "hello" in text


def _fake_run(root: Path, seed: int, scale: float) -> Path:
    run = new_run_dir(root, "ALE/Pong-v5", "ppo", seed)
    assert "/" not in run.name and run.name.startswith("ALE-Pong-v5__ppo__")
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"algo": "ppo", "config": {"env": "Pong-v5"}}))
    m = MetricsWriter(run, tensorboard=False)
    for i in range(1, 60):
        m.write(i * 100, i * 0.5, {"charts/episodic_return": scale * i})
    m.close()
    return run


def test_plot_shades_several_seeds_into_one_png(tmp_path, monkeypatch):
    import matplotlib.image
    import matplotlib.pyplot as plt

    closed = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (closed.append(fig), close(fig)))
    runs = [_fake_run(tmp_path, s, scale) for s, scale in ((1, 1.0), (2, 2.0))]
    out = plot_runs(runs, tmp_path / "curves.png")
    image = matplotlib.image.imread(out)
    assert image.shape[:2] == (400, 1100) and image.std() > 0.01  # 11 x 4 in at 100 dpi, not blank
    # What is drawn: per axis (env steps, wall seconds) one line for the group, the mean of the
    # two seeds' 20-episode means, shaded between the lower and the higher seed.
    (fig,) = closed
    ax_steps, ax_time = fig.axes
    assert (ax_steps.get_xlabel(), ax_time.get_xlabel()) == ("env steps", "wall-clock seconds")
    assert [t.get_text() for t in ax_steps.get_legend().get_texts()] == ["Pong-v5 ppo (2 runs)"]
    low = smooth(np.arange(1.0, 60.0))  # seed 1 returns 1..59, seed 2 twice that
    for ax, x in ((ax_steps, np.arange(1, 60) * 100.0), (ax_time, np.arange(1, 60) * 0.5)):
        (line,) = ax.get_lines()
        grid = line.get_xdata()
        assert grid[0] == x[0] and grid[-1] == x[-1]
        np.testing.assert_allclose(line.get_ydata(), 1.5 * np.interp(grid, x, low))
        (band,) = ax.collections
        ys = np.concatenate([path.vertices[:, 1] for path in band.get_paths()])
        np.testing.assert_allclose([ys.min(), ys.max()], [low[0], 2 * low[-1]])
    steps, _, values = series(runs[1] / "metrics.csv", "charts/episodic_return")
    assert len(steps) == 59 and values[-1] == 118.0
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0]), window=2), [1.0, 2.0, 4.0])


def test_summary_names_return_speed_and_time_shares():
    result = RunResult(Path("runs/x"), 100_000, 498.5, 12_345.0, 8.1,
                       {"env": 0.3, "inference": 0.2, "learn": 0.45, "other": 0.05}, False)
    text = summary_text(result, "CartPole-v1", "ppo")
    assert "100,000 env steps" in text and "12,345 steps/s" in text and "final return 498.5" in text
    assert "learning 45%" in text and "env stepping 30%" in text


def test_progress_line_past_the_budget_shows_no_negative_time_left():
    """A rollout can end past --total-timesteps; the last log line then says 0:00 left."""
    import io

    from seedpool.experiment.progress import ProgressDisplay

    out = io.StringIO()
    display = ProgressDisplay(1000, mode="log", log_every_s=0.0, stream=out)
    display.update(1024, sps=100.0, recent_return=1.5, force=True)
    line = out.getvalue().strip()
    assert line.endswith("| 0:00 left"), line
    assert "1,024/1,000" in line


def test_ctrl_c_while_the_curves_are_drawn_skips_the_plot_and_still_reports(tmp_path, monkeypatch, capsys):
    """The checkpoint is written before finish_run: a Ctrl-C there costs the plot, not the report."""
    import seedpool.experiment.plot as plot
    from seedpool.experiment import finish_run

    cfg = RunConfig(env="CartPole-v1", runs_dir=tmp_path, progress="off", tensorboard=False)
    with Run.open(cfg, "ppo", cfg) as run:
        run.record_episodes([type("Ep", (), {"step": 100, "ret": 20.0, "length": 20})()])

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(plot, "plot_runs", interrupted)
    result = finish_run(run, "CartPole-v1", "ppo")
    out = capsys.readouterr().out
    assert result.plot is None and not result.interrupted
    assert f"seedpool plot {run.dir}" in out and "run folder" in out and "CartPole-v1" in out
