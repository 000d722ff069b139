"""DQN and Ape-X resume: the replay comes back exactly as `--save-replay` wrote it (size, every
stored row, priorities, generator state), and the learner's counters go on from where they stopped."""
import shutil
from pathlib import Path

import numpy as np
import pytest

from seedpool.cli import main
from seedpool.replay import REPLAY_FILE
from training_spy import spy_training

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_v1"

TINY = ["--env", "CartPole-v1", "--seed", "4", "--progress", "off", "--no-tensorboard", "--backend", "serial",
        "--model.hidden-sizes", "32", "32", "--dqn.buffer-size", "4096", "--dqn.prioritized"]
DQN_PACE = ["--dqn.train-frequency", "128", "--dqn.utd-ratio", "0.125"]  # 16 gradient steps a round


def _spy(monkeypatch, seen: list) -> None:
    """Record the replay and learner version when the run starts (after any restore) and when it
    ends (after the last checkpoint)."""
    def start(t):
        seen.append({"start": t.learner.replay.state_dict(), "start_version": t.learner.version})

    def end(t):
        seen[-1].update(end=t.learner.replay.state_dict(), end_version=t.learner.version, run_dir=t.run.dir,
                        end_step=t.run.step)

    spy_training(monkeypatch, start, end)


def _flat(state: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in state.items():
        out.update(_flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _assert_replay_is_the_file(state: dict, path) -> None:
    """``state`` (a replay's state_dict) holds, item by item, what the replay file holds."""
    with np.load(path, allow_pickle=False) as f:
        saved = {k: f[k] for k in f.files}
    mine = _flat(state)
    assert sorted(mine) == sorted(saved)
    for key, value in mine.items():
        np.testing.assert_array_equal(np.asarray(value), saved[key], err_msg=key)
    size = int(saved["storage/size"])
    assert size > 0 and state["storage"]["size"] == size
    if "leaves" not in state["sampler"]:  # a uniform replay: no priorities
        return
    assert size > 0 and state["storage"]["size"] == size
    assert (state["storage"]["head"], state["storage"]["written"]) == (int(saved["storage/head"]),
                                                                     int(saved["storage/written"]))
    for name, arr in state["storage"]["arrays"].items():
        np.testing.assert_array_equal(arr, saved[f"storage/arrays/{name}"], err_msg=name)
    np.testing.assert_array_equal(state["sampler"]["leaves"], saved["sampler/leaves"])
    assert (state["sampler"]["leaves"] > 0).sum() == size  # every live row, and only those, has mass
    assert state["sampler"]["max_priority"] == float(saved["sampler/max_priority"])
    assert state["sampler"]["rng"] == str(saved["sampler/rng"])


def test_dqn_save_replay_and_resume_restore_the_replay_exactly(tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    args = TINY + DQN_PACE + ["--runs-dir", str(tmp_path), "--dqn.learning-starts", "256", "--save-replay"]
    assert main(["train", "dqn", *args, "--total-timesteps", "1024"]) == 0
    first = seen[0]
    _check_resume(first, seen, tmp_path, ["train", "dqn", "--resume", str(first["run_dir"])])


def test_apex_resume_restores_the_replay_exactly(tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    args = TINY + ["--runs-dir", str(tmp_path), "--dqn.learning-starts", "256", "--save-replay", "--num-envs", "8",
                   "--apex.utd-ratio", "0.015625", "--acting.serial",  # 4 samples of 256 rows per env step
                   # Ape-X checks its budget once a second and may run thousands of steps past it on a
                   # fast machine: a replay that never fills lets the resumed run's growth show.
                   "--dqn.buffer-size", "65536"]
    assert main(["train", "apex", *args, "--total-timesteps", "1024"]) == 0
    first = seen[0]
    _check_resume(first, seen, tmp_path, ["train", "apex", "--resume", str(first["run_dir"])])


def _check_resume(first: dict, seen: list, tmp_path, resume_argv: list[str]) -> None:
    """The first run's replay file is its replay at the end; the resumed run starts from exactly that."""
    path = first["run_dir"] / REPLAY_FILE
    _assert_replay_is_the_file(first["end"], path)
    written = shutil.copy(path, tmp_path / "first_replay.npz")  # the resumed run overwrites replay.npz
    assert first["end_version"] > 0

    # A run may end past its budget (Ape-X checks it once a second): give the resumed one 512 more.
    assert main([*resume_argv, "--total-timesteps", str(first["end_step"] + 512)]) == 0
    resumed = seen[1]
    assert resumed["run_dir"] == first["run_dir"]
    _assert_replay_is_the_file(resumed["start"], written)
    assert resumed["start_version"] == first["end_version"] < resumed["end_version"]
    _assert_replay_is_the_file(resumed["end"], path)  # and saves its own at its end
    assert resumed["end"]["storage"]["size"] > first["end"]["storage"]["size"]


def test_a_resume_without_a_saved_replay_starts_from_an_empty_one(tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    args = TINY + DQN_PACE + ["--runs-dir", str(tmp_path), "--dqn.learning-starts", "256"]
    assert main(["train", "dqn", *args, "--total-timesteps", "512"]) == 0
    assert not (seen[0]["run_dir"] / REPLAY_FILE).exists() and seen[0]["end"]["storage"]["size"] > 0
    assert main(["train", "dqn", "--resume", str(seen[0]["run_dir"]), "--total-timesteps", "768"]) == 0
    assert seen[1]["start"]["storage"]["size"] == 0 and seen[1]["start_version"] == seen[0]["end_version"]


@pytest.mark.parametrize("algo", ["dqn", "apex"])
def test_a_run_folder_of_checkpoint_format_1_resumes_with_its_saved_replay(algo, tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, seen)
    run = shutil.copytree(FIXTURES / algo, tmp_path / algo)
    written = shutil.copy(run / REPLAY_FILE, tmp_path / "v1_replay.npz")
    ended_at = int((run / "metrics.csv").read_text().splitlines()[-1].split(",")[0])  # past its 2048 budget
    assert main(["train", algo, "--resume", str(run), "--total-timesteps", str(ended_at + 1024)]) == 0
    _assert_replay_is_the_file(seen[0]["start"], written)
    assert seen[0]["end_version"] > seen[0]["start_version"] > 0
