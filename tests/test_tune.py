"""seedpool tune: the range syntax, the checks made before anything starts, the results files,
and population-based training of PPO on CartPole end to end through the command line: an
exploit and an explore happen, the best member ends at or above the same members trained
without PBT for the same env steps, Ctrl-C stops every member with a checkpoint, --resume
continues them, and no process is left behind."""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from conftest import new_shm_leaks, shm_entries, wait_gone
from seedpool import cli
from seedpool.errors import ConfigError
from seedpool.experiment.checkpoint import load_checkpoint
from seedpool.runs import build_run
from seedpool.trainers.ppo import ppo_defaults
from seedpool.tune import driver, results
from seedpool.tune.options import ExperimentSpec, split_argv
from seedpool.tune.space import parse_ranges

CARTPOLE = ["--env", "CartPole-v1", "--no-tensorboard", "--progress", "off"]
# Four members whose first learning rates (drawn with seed 1) run from one that cannot learn
# CartPole in the budget to one that reaches 500: what PBT's exploit exists for.
PBT = ["ppo", "--pbt", "--env", "CartPole-v1", "--no-tensorboard", "--seed", "1", "--perturbation-interval", "5000",
       "--tune.space", "learning_rate=loguniform(1e-5,1e-2)", "ent_coef=choice(0,0.01)"]
NAMES = ["ppo.learning_rate", "ppo.ent_coef"]


def _ray_started() -> bool:
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


# -- the range syntax ------------------------------------------------------------------------------
def test_ranges_resolve_options_and_sample_only_values_they_take():
    pytest.importorskip("ray.tune")
    import numpy as np

    cfg = ppo_defaults("CartPole-v1")
    texts = ["learning_rate=loguniform(1e-4,1e-2)", "ppo.ent-coef=choice(0, 0.01)", "num_envs=choice(4,8)",
             "model.activation=choice(tanh,relu)", "model.hidden_sizes=choice([64,64],[32])",
             "ppo.update_epochs=qrandint(2,10,2)", "ppo.num_steps=randint(16,18)"]
    ranges = parse_ranges(texts, cfg, live_only=False)
    assert [r.path for r in ranges] == ["ppo.learning_rate", "ppo.ent_coef", "num_envs", "model.activation",
                                        "model.hidden_sizes", "ppo.update_epochs", "ppo.num_steps"]
    rng = np.random.default_rng(0)
    draws = {r.path: [r.domain().sample(random_state=rng) for _ in range(200)] for r in ranges}
    assert all(1e-4 <= v <= 1e-2 for v in draws["ppo.learning_rate"])
    assert set(draws["ppo.ent_coef"]) == {0, 0.01} and set(draws["model.activation"]) == {"tanh", "relu"}
    assert set(draws["ppo.update_epochs"]) <= {2, 4, 6, 8, 10} and set(draws["ppo.num_steps"]) == {16, 17}
    assert {tuple(v) for v in draws["model.hidden_sizes"]} == {(64, 64), (32,)}


@pytest.mark.parametrize("text, message", [
    ("learning_rate=loguniform(0,1e-2)", "lower bound above 0"),
    ("learning_rate=uniform(2e-3,1e-3)", "must be below the upper bound"),
    ("num_envs=randint(3,3)", "must be below the upper bound"),
    ("num_envs=randint(3,4.5)", "takes whole numbers"),
    ("num_envs=uniform(4,16)", "takes whole numbers"),
    ("learning_rate=quniform(0,1,0)", "step q must be above 0"),
    ("learning_rate=uniform(0)", "takes 2 numbers"),
    ("learning_rate=uniform(0,inf)", "finite numbers"),
    ("ent_coef=choice()", "at least one value"),
    ("model.activation=choice(tanh,gelu)", "takes one of ['tanh', 'relu']"),
    ("ppo.anneal_lr=uniform(0,1)", "is not a number"),
    ("ppo.anneal_lr=choice(True,1)", "takes True or False"),
    ("lr=uniform(0.1,0.2)", "no option 'lr'"),
    ("learning_rat=uniform(0.1,0.2)", "did you mean learning_rate"),
    ("learning_rate=normal(0,1)", "unknown function 'normal'"),
    ("learning_rate:0.1", "cannot read the range"),
])
def test_a_range_that_cannot_be_sampled_is_refused(text, message):
    with pytest.raises(ConfigError) as err:
        parse_ranges([text], ppo_defaults("CartPole-v1"), live_only=False)
    assert message in str(err.value), str(err.value)


def test_pbt_tunes_only_what_a_running_run_may_change():
    cfg = ppo_defaults("CartPole-v1")
    with pytest.raises(ConfigError) as err:
        parse_ranges(["ppo.num_steps=choice(16,32)"], cfg, live_only=True)
    assert "ppo.num_steps cannot change" in str(err.value) and "ppo.learning_rate" in str(err.value)
    (r,) = parse_ranges(["ppo.num_steps=choice(16,32)"], cfg, live_only=False)  # a search may
    assert r.path == "ppo.num_steps"


def test_perturbed_values_are_clamped_into_their_range():
    cfg = ppo_defaults("CartPole-v1")
    lr, epochs, steps = parse_ranges(["learning_rate=loguniform(1e-4,1e-2)", "update_epochs=qrandint(2,10,2)",
                                      "gae_lambda=quniform(0.8,1.0,0.05)"], cfg, live_only=True)
    assert lr.clamp(0.012) == 1e-2 and lr.clamp(5e-5) == 1e-4 and lr.clamp(3e-3) == 3e-3
    assert epochs.clamp(7.3) == 8 and epochs.clamp(11.9) == 10 and isinstance(epochs.clamp(7.3), int)
    assert steps.clamp(0.93) == pytest.approx(0.95) and steps.clamp(1.2) == 1.0


def test_tune_options_are_told_apart_from_the_trainers():
    mine, theirs = split_argv(["--env", "CartPole-v1", "--pbt", "--tune.space", "a=uniform(0,1)", "b=choice(1,2)",
                               "--total-timesteps", "1000", "--population=3", "--ppo.learning-rate", "0.1",
                               "--ray-address", "auto", "--tune.space-file", "f.txt"])
    assert mine == ["--pbt", "--tune.space", "a=uniform(0,1)", "b=choice(1,2)", "--population=3",
                    "--ray-address", "auto", "--tune.space-file", "f.txt"]
    assert theirs == ["--env", "CartPole-v1", "--total-timesteps", "1000", "--ppo.learning-rate", "0.1"]


def test_without_ranges_each_learning_rate_is_tuned_a_decade_either_side_of_its_default():
    cfg = ppo_defaults("CartPole-v1")
    (r,) = parse_ranges([], cfg, live_only=True)
    lr = cfg.ppo.learning_rate
    assert r.path == "ppo.learning_rate" and r.function == "loguniform"
    assert r.bounds == pytest.approx((lr / 10, lr * 10), rel=1e-2)


# -- bad input: one error line, before Ray or any folder --------------------------------------------
@pytest.mark.parametrize("extra, message", [
    (["--pbt", "--tune.space", "learning_rate=loguniform(0,1)"], "lower bound above 0"),
    (["--pbt", "--tune.space", "ppo.num_steps=choice(16,32)"], "cannot change in a running run"),
    (["--pbt", "--tune.space", "learning_rate=uniform(1e-4,1e-3)", "--metric", "losses/no_such_loss"],
     "no ppo member reports it; the names its runs report:"),
    (["--tune.space", "learning_rate=uniform(1e-4,1e-3)"], "--pbt (population-based training) or --search"),
    (["--pbt", "--tune.space", "learning_rate=uniform(1e-4,1e-3)", "--perturbation-interval", "4096"],
     "PBT would never exploit or explore"),
    (["--pbt", "--population", "1", "--tune.space", "learning_rate=uniform(1e-4,1e-3)"], "at least 2 members"),
    (["--search", "--tune.space-file", "no/such/file"], "no such file"),
])
def test_bad_input_is_one_error_before_anything_starts(tmp_path, capsys, extra, message):
    argv = ["tune", "ppo", *CARTPOLE, "--runs-dir", str(tmp_path), "--total-timesteps", "4096", *extra]
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and err.count("seedpool: error") == 1, err
    assert not any(tmp_path.iterdir()) and not _ray_started()


def test_an_unknown_option_is_refused_by_the_trainers_parser(tmp_path, capsys):
    argv = ["tune", "ppo", "--pbt", *CARTPOLE, "--ppo.no-such-option", "1", "--runs-dir", str(tmp_path),
            "--tune.space", "learning_rate=uniform(1e-4,1e-3)"]
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "--ppo.no-such-option" in capsys.readouterr().err
    assert not any(tmp_path.iterdir()) and not _ray_started()


def test_a_metric_the_trainer_logs_is_accepted_after_a_probe_run(tmp_path):
    spec, address, resume = driver.parse(["ppo", "--pbt", *CARTPOLE, "--runs-dir", str(tmp_path / "runs"),
                                          "--tune.space", "learning_rate=uniform(1e-4,1e-3)",
                                          "--metric", "losses/value_loss", "--mode", "min"])
    assert (spec.metric, spec.mode, address, resume) == ("losses/value_loss", "min", None, False)
    assert spec.perturbation_interval == 10_000 and len(spec.initial) == 4  # a tenth of CartPole's 100k
    assert not (tmp_path / "runs").exists()  # the probe's folder was temporary; the experiment's is not made yet


# -- the results files -----------------------------------------------------------------------------
def _report(member, steps, metric, a, copied_from=None, copied_at=None):
    return {"member": member, "env_steps": steps, "metric": metric, "hyperparameters": {"a": a},
            "copied_from": copied_from, "copied_at": copied_at, "run_dir": f"runs/m{member}"}


def test_best_json_follows_the_best_members_weights_through_the_members_it_copied(tmp_path):
    reports = [_report(0, 100, 10.0, 1.0), _report(1, 100, 50.0, 2.0), _report(2, 100, 30.0, 3.0),
               _report(0, 200, 60.0, 2.4, copied_from=1, copied_at=100), _report(1, 200, 55.0, 2.0),
               _report(2, 200, 20.0, 2.0, copied_from=0, copied_at=200), _report(0, 300, 80.0, 2.4),
               _report(2, 300, 90.0, 2.0)]
    for r in reports:
        results.append_report(tmp_path, ["a"], r)
    assert results.load_reports(tmp_path) == reports
    with open(tmp_path / results.RESULTS) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["member", "env_steps", "metric", "a"] and rows[4] == ["0", "200", "60.0", "2.4"]
    best = results.write_best(tmp_path, reports, "max")
    assert json.loads((tmp_path / results.BEST).read_text()) == best
    assert (best["member"], best["metric"], best["run_dir"]) == (2, 90.0, "runs/m2")
    # member 2's weights: member 1's to 100 steps, member 0's from there to 200, its own since
    assert [(h["member"], h["from_env_steps"], h["to_env_steps"], h["hyperparameters"]["a"]) for h in best["history"]] \
        == [(1, 0, 100, 2.0), (0, 100, 200, 2.4), (2, 200, 300, 2.0)]
    assert results.best_member(reports, "min")["member"] == 1
    assert "best: member 2" in results.table(reports, ["a"], "episode_return", "max")


def test_load_weights_takes_a_checkpoint_files_model_and_optimizer(tmp_path):
    """PBT's exploit: Training.load_weights of another member's checkpoint file."""
    options = [*CARTPOLE, "--total-timesteps", "4096", "--runs-dir", str(tmp_path)]
    a, b = build_run("ppo", [*options, "--seed", "1"]), build_run("ppo", [*options, "--seed", "2"])
    try:
        a.advance(1024)
        path = a.save()
        b.load_weights(path)
        for (name, x), y in zip(a.learner.model.state_dict().items(), b.learner.model.state_dict().values()):
            assert torch.equal(x, y), name
        moments = [s["exp_avg"] for s in b.learner.optimizer.state_dict()["state"].values()]
        assert moments and all(m.abs().sum() > 0 for m in moments)  # a's Adam state came with the weights
        assert b.step == 0  # counters stay the member's own
    finally:
        a.close(failed=True)
        b.close(failed=True)


# -- PBT end to end through the command line (Ray started by the command) ---------------------------
class Command:
    """`seedpool tune ...` in a subprocess, its output in a file, its descendants watched."""

    def __init__(self, tmp_path: Path, argv: list[str], name: str) -> None:
        self.out = tmp_path / f"{name}.txt"
        self.shm = shm_entries()
        with open(self.out, "w") as f:
            self.proc = subprocess.Popen([sys.executable, "-m", "seedpool.cli", "tune", *argv],
                                         stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.seen: set[int] = set()

    def wait(self, timeout: float, interrupt_when=None) -> int:
        deadline, interrupted = time.monotonic() + timeout, False
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                self.seen |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
            except psutil.NoSuchProcess:
                pass
            if interrupt_when is not None and not interrupted and interrupt_when():
                self.proc.send_signal(signal.SIGINT)
                interrupted = True
            time.sleep(0.5)
        if self.proc.poll() is None:
            self.proc.kill()
            pytest.fail(f"seedpool tune did not end in {timeout} s:\n{self.output()[-4000:]}")
        return self.proc.returncode

    def output(self) -> str:
        return self.out.read_text()

    def assert_nothing_left(self) -> None:
        assert self.seen, "no descendant was seen: Ray did not start?"
        left = wait_gone(self.seen, timeout=60)
        assert not left, f"left running: {[psutil.Process(p).cmdline()[:3] for p in left if psutil.pid_exists(p)]}"
        assert not new_shm_leaks(self.shm), "new /dev/shm entries left behind"


def _experiment(tmp_path: Path) -> Path:
    (folder,) = tmp_path.glob("tune__CartPole-v1__ppo__pbt__*")
    return folder


def _finals(reports: list[dict]) -> dict[int, dict]:
    return results.final_reports(reports)


def _pairs(reports: list[dict], member: int) -> list[tuple[dict, dict]]:
    """Consecutive reports of one member."""
    mine = sorted((r for r in reports if r["member"] == member), key=lambda r: r["env_steps"])
    return list(zip(mine, mine[1:]))


@pytest.mark.xdist_group("ray")  # each starts a local Ray, as tests/test_ray.py's do: one at a time
@pytest.mark.timeout(1200)
def test_pbt_on_cartpole_exploits_and_ends_at_or_above_the_same_members_without_it(tmp_path):
    pytest.importorskip("ray.tune")
    pytest.importorskip("optuna")
    total = 40_000
    command = Command(tmp_path, [*PBT, "--total-timesteps", str(total), "--runs-dir", str(tmp_path)], "pbt")
    assert command.wait(timeout=1000) == 0, command.output()[-4000:]
    command.assert_nothing_left()
    folder = _experiment(tmp_path)
    with open(folder / results.RESULTS) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["member", "env_steps", "metric", *NAMES]
    reports = results.load_reports(folder)
    finals = _finals(reports)
    assert sorted(finals) == [0, 1, 2, 3] and all(r["env_steps"] >= total for r in finals.values())
    exploits = [r for r in reports if r["copied_from"] is not None]
    assert exploits, "no member took another's weights"
    explored = [m for m in finals for a, b in _pairs(reports, m) if a["hyperparameters"] != b["hyperparameters"]]
    assert explored, "no member's hyperparameters changed between its reports"
    assert all(r["builds"] == 1 for r in reports), "a member's run was rebuilt during the session"
    best = json.loads((folder / results.BEST).read_text())
    assert set(best) == {"member", "run_dir", "metric", "history"}
    assert best["metric"] == max(r["metric"] for r in finals.values()) and Path(best["run_dir"]).is_dir()
    assert (folder / results.PLOT).stat().st_size > 0 and "its hyperparameters over training" in command.output()

    # The same four members without PBT: each from its first hyperparameters, for the same env steps.
    spec = ExperimentSpec.load(folder)
    alone = []
    for k, values in enumerate(spec.initial):
        first = min((r for r in reports if r["member"] == k), key=lambda r: r["env_steps"])
        if first["copied_from"] is None:
            assert first["hyperparameters"] == values
        cfg = dataclasses.replace(spec.member_config(k, values), runs_dir=tmp_path / "alone" / str(k))
        run = build_run("ppo", cfg)
        try:
            run.advance()
            alone.append(run.recent_return)
        finally:
            run.close(failed=True)
    print(f"PBT members end at {[round(r['metric'], 1) for r in finals.values()]}, "
          f"the same members without PBT at {[round(a, 1) for a in alone]}")
    assert all(math.isfinite(a) for a in alone)
    assert best["metric"] >= max(alone)


@pytest.mark.xdist_group("ray")
@pytest.mark.timeout(1200)
def test_ctrl_c_stops_every_member_with_a_checkpoint_and_resume_continues(tmp_path):
    pytest.importorskip("ray.tune")
    pytest.importorskip("optuna")
    total = 30_000

    def every_member_reported() -> bool:
        found = list(tmp_path.glob(f"tune__*/{results.REPORTS}"))
        return bool(found) and len({r["member"] for r in results.load_reports(found[0].parent)}) == 4

    command = Command(tmp_path, [*PBT, "--total-timesteps", str(total), "--runs-dir", str(tmp_path)], "first")
    assert command.wait(timeout=1000, interrupt_when=every_member_reported) == driver.EXIT_INTERRUPTED, \
        command.output()[-4000:]
    command.assert_nothing_left()
    folder = _experiment(tmp_path)
    assert f"continue with: seedpool tune --resume {folder}" in command.output()
    before = results.load_reports(folder)
    last = {m: r for m, r in _finals(before).items() if r["env_steps"] < total}
    assert last and any(r["stopping"] for r in last.values()), "no member stopped on the Ctrl-C"
    for m, r in last.items():
        # Each unfinished member's checkpoint holds exactly what it last reported: a running member
        # stopped at its next update and reported there; one restarting after an exploit had
        # trained nothing since its last report (Ray Tune keeps the better member's checkpoint for it).
        saved = load_checkpoint(Path(r["run_dir"]) / "checkpoint.pt", "ppo")
        assert saved["counters"]["step"] == r["env_steps"], (m, saved["counters"]["step"], r)

    again = Command(tmp_path, ["--resume", str(folder)], "resumed")
    assert again.wait(timeout=1000) == 0, again.output()[-4000:]
    again.assert_nothing_left()
    after = results.load_reports(folder)[len(before):]
    assert all(r["env_steps"] >= total for r in _finals(before + after).values())
    for m, stop in last.items():
        mine = [r for r in after if r["member"] == m]
        assert mine and mine[0]["env_steps"] > stop["env_steps"], f"member {m} did not go on from its checkpoint"
        assert mine[0]["env_steps"] <= stop["env_steps"] + 5000 + 256
        assert all(r["builds"] == 1 for r in mine)  # loaded once from its folder, then never rebuilt
