"""Libraries' own EnvPool integrations run on seedpool after `seedpool.install_as_envpool()`:
Tianshou's Collector, rl-games' envpool vecenv, skrl's gymnasium wrapper and TorchRL's
MultiThreadedEnv (where it runs on envpool itself), each compared with envpool 1.2.5 on Pong
(the same observations, rewards and done flags), and each on a task EnvPool does not have.
TorchRL's GymWrapper takes `make_vec`. The libraries are the `integrations` extra.

Each run is a child process (tests/envpool_library_runs.py): the shim and the real envpool
cannot share one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import seedpool

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(300)]
HERE = Path(__file__).resolve().parent
LIBS = {"tianshou": "tianshou", "rlgames": "rl_games", "skrl": "skrl", "torchrl_mt": "torchrl"}
PONG_STEPS = 100
OTHER = "Taxi-v4"  # gymnasium's Taxi: envpool 1.2.5 has only Taxi-v3


def _run(lib: str, backend: str, tasks: str, out: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": f"{HERE.parent}:{HERE}", "PATH": "/usr/bin:/bin", "HOME": str(out.parent)}
    return subprocess.run([sys.executable, str(HERE / "envpool_library_runs.py"), lib, backend, tasks,
                           str(PONG_STEPS), str(out)], capture_output=True, text=True, timeout=280, env=env)


@pytest.mark.parametrize("lib", LIBS)
def test_library_envpool_path_matches_envpool_on_pong_and_runs_other_tasks(lib, tmp_path):
    pytest.importorskip(LIBS[lib], reason=f"{LIBS[lib]} is not installed (the integrations extra)")
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    pytest.importorskip("ale_py", reason="Atari needs ale-py")
    assert OTHER not in envpool.list_all_envs()
    theirs = _run(lib, "envpool", "Pong-v5", tmp_path / "envpool")
    if theirs.returncode != 0:
        # TorchRL 0.14.1's MultiThreadedEnv imports the old `gym` package and fails on envpool too.
        last = theirs.stderr.strip().splitlines()[-1] if theirs.stderr.strip() else "no message"
        ours = _run(lib, "seedpool", "Pong-v5", tmp_path / "seedpool")
        assert ours.returncode != 0 and ours.stderr.strip().splitlines()[-1] == last, ours.stderr
        pytest.skip(f"{lib} fails on envpool 1.2.5 itself, and the same way on seedpool: {last}")
    ours = _run(lib, "seedpool", f"Pong-v5,{OTHER}", tmp_path / "seedpool")
    assert ours.returncode == 0, ours.stderr
    a, b = np.load(tmp_path / "envpool-Pong-v5.npz"), np.load(tmp_path / "seedpool-Pong-v5.npz")
    for key in ("obs", "rew", "done", "terminated", "truncated"):
        if key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{lib}: {key}")
    assert len(b["obs"]) >= PONG_STEPS
    other = np.load(tmp_path / f"seedpool-{OTHER}.npz")
    assert len(other["obs"]) >= PONG_STEPS and np.isfinite(other["rew"]).all()


def test_torchrl_gymwrapper_takes_make_vec_matches_envpool_and_runs_other_tasks():
    pytest.importorskip("torchrl", reason="torchrl is not installed (the integrations extra)")
    envpool = pytest.importorskip("envpool", reason="envpool not installed")
    pytest.importorskip("ale_py", reason="Atari needs ale-py")
    import torch
    from torchrl.envs import GymWrapper

    torch.manual_seed(0)
    # TorchRL refuses next_step autoreset; "disabled" is the mode it prefers (it resets itself).
    env = GymWrapper(seedpool.make_vec("Pong-v5", num_envs=4, seed=3, backend="serial", autoreset="disabled"))
    try:
        out = env.rollout(PONG_STEPS, break_when_any_done=False)
    finally:
        env.close()
    actions = out["action"].numpy()
    actions = actions.argmax(-1) if actions.ndim == 3 else actions  # one-hot or indices
    theirs = envpool.make_gymnasium("Pong-v5", num_envs=4, seed=3)
    try:
        first, _ = theirs.reset()
        np.testing.assert_array_equal(out["observation"][:, 0].numpy(), first)
        for t in range(PONG_STEPS):
            obs, rew, term, trunc, _ = theirs.step(actions[:, t].astype(np.int32))
            np.testing.assert_array_equal(out["next", "observation"][:, t].numpy(), obs)
            np.testing.assert_array_equal(out["next", "reward"][:, t, 0].numpy(), rew)
    finally:
        theirs.close()
    # The same path on a task EnvPool does not have (TorchRL one-hot encodes Taxi's Discrete observation).
    env = GymWrapper(seedpool.make_vec(OTHER, num_envs=2, seed=1, backend="serial", autoreset="disabled"))
    try:
        out = env.rollout(PONG_STEPS, break_when_any_done=False)
    finally:
        env.close()
    assert out["observation"].shape == (2, PONG_STEPS, 500)
    assert set(np.unique(out["next", "reward"].numpy())) <= {-1.0, -10.0, 20.0}
