"""`seedpool train r2d2`: the acting records the state it used; a run checkpoints, resumes with its
sequence replay, evaluates greedily with its memory carried."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import seedpool
from seedpool.algos.r2d2 import RecurrentEpsilonGreedyAct
from seedpool.actors.recurrent_q_sampler import RecurrentQSampler
from seedpool.cli import main, parse_command
from seedpool.experiment import load_checkpoint
from training_spy import spy_training
from seedpool.experiment.evaluate import evaluate_run
from seedpool.models.recurrent_q import RecurrentQModelConfig, make_recurrent_q_network
from seedpool.replay import REPLAY_FILE
from seedpool.replay.sequence_writer import SequenceWriter
from seedpool.trainers.r2d2 import make_sequence_replay, r2d2_defaults

ENV = "pomdp_envs:CartPoleNoVel-v0"
TINY = ["--env", ENV, "--seed", "3", "--progress", "off", "--no-tensorboard", "--backend", "serial",
        "--num-envs", "4", "--model.hidden-sizes", "16", "--model.core-size", "16", "--model.head-sizes", "16",
        "--r2d2.sequence-length", "12", "--r2d2.overlap", "6", "--r2d2.burn-in", "4", "--r2d2.minibatch-size", "8",
        "--r2d2.learning-starts", "8", "--r2d2.buffer-size", "512", "--r2d2.unroll-length", "8",
        "--r2d2.utd-ratio", "0.015625"]  # one learned step (of 8 x 8 a gradient step) per env step


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_sampler_stores_the_state_the_policy_used():
    torch.manual_seed(0)
    with seedpool.make(ENV, num_envs=3, backend="serial", seed=0) as pool:
        net = make_recurrent_q_network(pool.single_observation_space, pool.single_action_space,
                                       RecurrentQModelConfig(hidden_sizes=(8,), core_size=5, head_sizes=(8,)))
        sampler = RecurrentQSampler(pool, net, 40, RecurrentEpsilonGreedyAct(np.full(3, 0.5), 0))
        u1, _ = sampler.collect()
        u2, _ = sampler.collect()
    aux = np.concatenate([u1.aux, u2.aux])
    first = np.concatenate([u1.first, u2.first])
    valid = np.concatenate([u1.valid, u2.valid])
    obs = np.concatenate([u1.obs[:-1], u2.obs])
    assert first[0].all() and aux.shape == (80, 3, 10)
    # first follows next_step autoreset: the observation after an invalid (final) one opens an episode.
    np.testing.assert_array_equal(first[1:], ~valid[:-1])
    assert first[1:].any(), "no episode ended: the test would not cover resets"
    # Replaying the network from the first recorded state gives every later recorded state.
    state = {"h": torch.as_tensor(aux[0, :, :5]), "c": torch.as_tensor(aux[0, :, 5:])}
    with torch.no_grad():
        for t in range(79):
            _, state = net.step(torch.as_tensor(obs[t]), state, torch.as_tensor(first[t]))
            np.testing.assert_allclose(torch.cat([state["h"], state["c"]], 1).numpy(), aux[t + 1], rtol=1e-5,
                                       atol=1e-6)
    # The writer stores, at each sequence's start, the state recorded for that step.
    cfg = r2d2_defaults(ENV)
    cfg.r2d2.sequence_length, cfg.r2d2.overlap = 10, 5
    rb = make_sequence_replay(pool.single_observation_space, pool.single_action_space, net, cfg.r2d2, 0)
    writer = SequenceWriter(rb, 5)
    writer.add(u1)
    writer.add(u2)
    rows = rb._rows.storage.gather(rb._rows.storage.live_rows())
    assert len(rb) > 5
    for i in range(len(rb)):
        t, b = np.argwhere((obs == rows["obs"][i, 0]).all(axis=-1))[0]  # where that observation was acted on
        np.testing.assert_array_equal(rows["state.h"][i], aux[t, b, :5])
        assert rows["first"][i, 0] == first[t, b]


@pytest.mark.parametrize("acting", ["central", "lockstep"])
def test_train_resume_and_eval(tmp_path, monkeypatch, acting):
    seen = []
    def start(t):
        if acting == "central":
            assert t.loop.system.server.states.recurrent
        else:
            assert hasattr(t.loop, "sampler")
        seen.append({"start_version": t.learner.version, "start_size": len(t.learner.replay)})

    def end(t):
        seen[-1].update(run_dir=t.run.dir, end_version=t.learner.version, end_size=len(t.learner.replay))

    spy_training(monkeypatch, start, end)
    mode = ["--lockstep"] if acting == "lockstep" else ["--no-lockstep", "--acting.serial"]
    args = TINY + mode + ["--runs-dir", str(tmp_path), "--save-replay"]
    assert main(["train", "r2d2", *args, "--total-timesteps", "1200"]) == 0
    first = seen[0]
    assert first["end_version"] > 0 and first["end_size"] > 0
    run_dir = first["run_dir"]
    assert (run_dir / REPLAY_FILE).exists() and (run_dir / "curves.png").exists()
    # 1800 more env steps: the central layout's learner thread paces itself against the acting,
    # and under load 800 more steps once ended before its next update (2026-11-25).
    assert main(["train", "r2d2", "--resume", str(run_dir), "--total-timesteps", "3000", "--progress", "off"]) == 0
    second = seen[1]
    # The replay and the learner go on from where they stopped.
    assert second["start_size"] == first["end_size"] and second["start_version"] == first["end_version"]
    assert second["end_version"] > first["end_version"]
    assert load_checkpoint(run_dir / "checkpoint.pt", "r2d2")["counters"]["step"] >= 3000
    res = evaluate_run(run_dir, episodes=3, backend="serial")
    assert len(res.returns) == 3 and all(r > 0 for r in res.returns)


def test_cli_parses_r2d2_options():
    cfg = parse_command(["train", "r2d2", "--env", ENV, "--model.core", "gru", "--r2d2.burn-in", "20"])
    assert cfg.model.core == "gru" and cfg.r2d2.burn_in == 20
    assert parse_command(["train", "r2d2", "--env", "Breakout-v5"]).r2d2.sequence_length == 80


def test_sequence_replay_learner_holds_the_utd_ratio_in_minibatches_of_sequences():
    from test_sequence_replay import episodes_unrolls

    from seedpool.algos.r2d2 import R2D2Config
    from seedpool.algos.replay_learner import ReplayUpdate
    from seedpool.replay.sequence import SequenceReplay
    from seedpool.trainers.r2d2 import SequenceReplayLearner

    class Counting:
        """A learner that only counts the minibatches of sequences it is given."""

        model, version = torch.nn.Linear(1, 1), 0

        def update(self, batch, env_steps=0):
            assert batch["obs"].shape[:2] == (4, 9)
            self.version += 1
            return ReplayUpdate({}, np.ones(len(batch["indices"])))

    cfg = R2D2Config(sequence_length=8, overlap=4, burn_in=2, minibatch_size=4, learning_starts=4, utd_ratio=0.5)
    rb = SequenceReplay(256, ((2,), np.float32), ((), np.int64), {"h": 3, "c": 3}, length=8, seed=0)
    learner = SequenceReplayLearner(Counting(), rb, SequenceWriter(rb, 4), cfg, total_steps=10_000)
    for u in episodes_unrolls([[40, 40]] * 4, T=8):
        learner.update(u)
    # One gradient step per 2 env steps: 4 sequences of 6 learned steps after burn-in, 12 learned steps per env step.
    assert learner.gradient_steps > 0
    assert learner.measured_ratio() == pytest.approx(0.5, rel=0.05)
    assert learner.gradient_steps * 4 * 6 / learner.learning_env_steps == pytest.approx(12.0, rel=0.05)


def test_a_central_run_resumes_with_lockstep_acting(tmp_path):
    args = TINY + ["--no-lockstep", "--acting.serial", "--runs-dir", str(tmp_path)]
    assert main(["train", "r2d2", *args, "--total-timesteps", "600"]) == 0
    run_dir = next(tmp_path.iterdir())
    assert load_checkpoint(run_dir / "checkpoint.pt", "r2d2")["acting"] is None
    assert main(["train", "r2d2", "--resume", str(run_dir), "--lockstep", "--total-timesteps", "1000",
                 "--progress", "off"]) == 0
    ckpt = load_checkpoint(run_dir / "checkpoint.pt", "r2d2")
    assert ckpt["counters"]["step"] >= 1000 and ckpt["acting"]["env_steps"] >= 1000
