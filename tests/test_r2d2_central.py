"""R2D2 acting on the central-inference system: the server keeps each env's recurrent state, and the
sequences written to replay carry the state the server's policy used at each sequence's start."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from seedpool.algos.r2d2 import R2D2Config, R2D2Learner, RecurrentEpsilonGreedyAct
from seedpool.models.recurrent_q import RecurrentQModelConfig, make_recurrent_q_network
from seedpool.replay.sequence_writer import SequenceWriter
from seedpool.runners import ActingConfig, make_pools
from seedpool.trainers.r2d2 import (
    R2D2TrainConfig, SequenceReplayLearner, make_central_system, make_sequence_replay,
)

ENV = "pomdp_envs:CartPoleNoVel-v0"


class RecordingAct:
    """The R2D2 act function, logging every row it was called with: slot, observation, state, first."""

    def __init__(self, act) -> None:
        self.act, self.log = act, []

    def __call__(self, model, obs, state, first, slots):
        out = self.act(model, obs, state, first, slots)
        for i in range(len(slots)):
            self.log.append((int(slots[i]), obs[i].clone(), torch.cat([state["h"][i], state["c"][i]]).clone(),
                             bool(first[i])))
        return out


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_central_sequences_store_the_state_the_server_used(monkeypatch):
    torch.manual_seed(0)
    cfg = R2D2TrainConfig(env=ENV, num_envs=4, backend="serial", seed=0, acting=ActingConfig(serial=True),
                          unrolls_per_batch=2,
                          r2d2=R2D2Config(sequence_length=10, overlap=5, burn_in=2, unroll_length=8,
                                          buffer_size=512, learning_starts=10**6, minibatch_size=4, epsilon=0.5))
    sources = [make_pools(ENV, 4, "serial", cfg.acting, 0)[0]]
    q_net = make_recurrent_q_network(sources[0].single_observation_space, sources[0].single_action_space,
                                     RecurrentQModelConfig(hidden_sizes=(8,), core_size=5, head_sizes=(8,)))
    replay = make_sequence_replay(sources[0].single_observation_space, sources[0].single_action_space, q_net,
                                  cfg.r2d2, 0)
    learner = SequenceReplayLearner(R2D2Learner(q_net, cfg.r2d2, 10**6), replay, SequenceWriter(replay, 5),
                                    cfg.r2d2, 10**6)
    unrolls = []
    insert = learner.insert
    monkeypatch.setattr(learner, "insert", lambda u: (unrolls.append(u), insert(u)))
    recording = RecordingAct(RecurrentEpsilonGreedyAct(np.full(4, 0.5, np.float32), 0))
    monkeypatch.setattr("seedpool.trainers.r2d2.RecurrentEpsilonGreedyAct", lambda *a, **k: recording)
    system = make_central_system(cfg, sources, learner, q_net, "cpu", "fp32")
    assert system.server.states.recurrent
    try:
        system.start()
        for _ in range(100):
            system.step_serial()
    finally:
        system.close()

    assert len(unrolls) >= 4 and len(replay) > 10
    by_obs, by_obs_any_env = {}, {}
    for slot, obs, state, first in recording.log:
        by_obs.setdefault((slot, obs.numpy().tobytes()), []).append((state, first))
        by_obs_any_env.setdefault(obs.numpy().tobytes(), []).append((state, first))
    resets = sum(first for _, _, _, first in recording.log)
    assert resets > 4, "no episode ended: the test would not cover state resets"
    # Every step's recorded state (aux) is the one the server's policy was given for that env at that
    # observation, and an unroll's start state (kept by the server) is its first step's.
    for u in unrolls:
        for j, slot in enumerate(u.slots):
            given = [by_obs[(int(slot), u.obs[t, j].tobytes())] for t in range(u.num_steps)]
            for t in range(u.num_steps):
                assert any(np.array_equal(u.aux[t, j], s.numpy()) for s, _ in given[t])
            start = np.concatenate([u.start_state["h"][j], u.start_state["c"][j]])
            np.testing.assert_array_equal(start, u.aux[0, j])
    # The state opening an episode is the initial (zero) state: the server reset it there.
    for _, _, state, first in recording.log:
        if first:
            assert not state.any()
    # Each stored sequence's start state is the one the server's policy used at that step.
    rows = replay._rows.storage.gather(replay._rows.storage.live_rows())
    matched = 0
    for i in range(len(replay)):
        hits = [s for s, f in by_obs_any_env.get(rows["obs"][i, 0].tobytes(), [])
                if f == bool(rows["first"][i, 0])]
        assert hits, f"sequence {i} starts at an observation the server never acted on"
        stored = np.concatenate([rows["state.h"][i], rows["state.c"][i]])
        assert any(np.array_equal(stored, s.numpy()) for s in hits)
        matched += 1
    assert matched == len(replay)
    # Sequences that start inside an episode carry a non-zero state (not just zeros everywhere).
    assert (~rows["first"][:, 0]).any() and np.abs(rows["state.h"][~rows["first"][:, 0]]).sum() > 0
