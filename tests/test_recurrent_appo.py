"""Recurrent IMPALA/APPO on the central-inference system: the server's per-env state, the
state it records at every unroll's start, its resets, and learning through time from it."""
from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from seedpool.algos.impala import ImpalaConfig, ImpalaLearner, unrolls_to_tensors
from seedpool.algos.impala_recurrent import evaluate_recurrent, recurrent_policy_act
from seedpool.inference import ActOutput, InferenceServer, Request, StateSlots, concat_unrolls
from seedpool.models import ModelConfig, make_policy

OBS = gym.spaces.Box(-1, 1, (2,), np.float32)


def _policy(core="lstm", **inputs):
    torch.manual_seed(0)
    return make_policy(OBS, gym.spaces.Discrete(3), ModelConfig(core=core, core_size=8, hidden_sizes=(8,), **inputs))


def _request(slots, obs, term=None, restarted=None, rewards=None):
    n = len(slots)
    z = np.zeros(n, dtype=bool)
    return Request(slots=np.asarray(slots, np.int64), obs=np.asarray(obs, np.float32),
                   rewards=np.ones(n, np.float32) if rewards is None else np.asarray(rewards, np.float32), terminated=z if term is None else np.asarray(term),
                   truncated=z.copy(), restarted=z.copy() if restarted is None else np.asarray(restarted))


def _server(policy, act, T, num_slots=3):
    unrolls = []
    initial = {k: v[0] for k, v in policy.initial_state(1).items()}
    server = InferenceServer(policy, act, num_slots=num_slots, obs_shape=(2,), obs_dtype=np.float32,
                             unroll_length=T, max_batch=num_slots, max_wait_s=0.0, on_unrolls=unrolls.append,
                             initial_state=initial, prev_inputs=policy.prev_action or policy.prev_reward)
    return server, unrolls


def _drive(server, steps, ends, rng):
    """Serve ``steps`` rounds; envs 0 and 2 every round, env 1 every other round (slots advance unevenly).
    ``ends[(slot, i)]``: that slot's i-th observation is a final one."""
    seen = {0: 0, 1: 0, 2: 0}
    for t in range(steps):
        slots = [0, 1, 2] if t % 2 == 0 else [0, 2]
        term = [ends.get((s, seen[s]), False) for s in slots]
        for s in slots:
            seen[s] += 1
        reply = server.submit(_request(slots, rng.uniform(-1, 1, (len(slots), 2)), term,
                                       rewards=rng.uniform(-1, 1, len(slots))))
        server.run_once(idle_timeout=1.0)
        reply.wait(0)


@pytest.mark.parametrize("inputs", [{}, {"prev_action": True, "prev_reward": True}])
def test_server_records_at_each_unroll_start_the_state_the_policy_used_there(inputs):
    policy = _policy(**inputs)
    used: dict[int, list] = {0: [], 1: [], 2: []}  # per slot: the state (and inputs) the policy was given, in order

    def recording_act(model, obs, state, first, slots, **prev):
        for row, s in enumerate(slots.tolist()):
            used[s].append({k: v[row].clone() for k, v in (state | prev).items()})
        return recurrent_policy_act(model, obs, state, first, slots, **prev)

    T = 4
    server, unrolls = _server(policy, recording_act, T)
    # Episodes end inside unrolls and at their edges: the final obs 5 of slot 0 makes obs 6 open an episode.
    _drive(server, 30, {(0, 5): True, (2, 3): True, (2, 12): True, (1, 6): True}, np.random.default_rng(0))
    u = concat_unrolls(unrolls)
    assert sorted(np.bincount(u.slots).tolist()) == [3, 7, 7]
    emitted = {0: 0, 1: 0, 2: 0}
    for j, s in enumerate(u.slots.tolist()):
        # Unroll n of a slot opens at its n*T-th observation (the previous unroll's bootstrap).
        at = used[s][emitted[s] * T]
        emitted[s] += 1
        for k in u.start_state:
            np.testing.assert_array_equal(u.start_state[k][j], at[k].numpy())
        if inputs:  # and the previous action and reward it was given there
            assert u.start_inputs["prev_action"][j] == at["prev_action"] and u.start_inputs["prev_reward"][j] == at["prev_reward"]
    carried = ~u.first[0]
    assert carried.any() and np.abs(u.start_state["h"][carried]).min(axis=1).max() > 0  # real, carried states
    assert (u.start_state["h"][u.first[0]] == 0).all()  # an unroll that opens an episode starts from zero
    assert u.first[1:].any()  # an episode starts inside an unroll
    # The learner, re-running each unroll from its start state with the same masks, gets back the log-probs
    # the policy acted with (resets inside the unroll included).
    batch = unrolls_to_tensors(u, torch.device("cpu"), recurrent=True)
    with torch.no_grad():
        logp, _, values = evaluate_recurrent(policy, batch, bootstrap=True)
    assert values.shape == (T + 1, len(u))
    valid = torch.from_numpy(u.valid)
    torch.testing.assert_close(logp[valid], torch.from_numpy(u.logp)[valid])
    if inputs:  # the inputs matter: without them the re-run gives other log-probs
        assert (u.start_inputs["prev_reward"] != 0).any()
        del batch["prev_rewards"], batch["prev_actions"]
        with pytest.raises(ValueError, match="previous action"), torch.no_grad():
            evaluate_recurrent(policy, batch, bootstrap=True)


def test_state_resets_at_episode_starts_and_is_dropped_when_an_env_restarts():
    def counting_act(model, obs, state, first, slots):
        h = state["h"] + 1  # steps since the state was last reset
        return ActOutput(actions=h[:, 0].long(), logp=torch.zeros(len(obs)), state={"h": h})

    server = InferenceServer(torch.nn.Linear(1, 1), counting_act, num_slots=2, obs_shape=(2,), obs_dtype=np.float32,
                             unroll_length=3, max_batch=2, max_wait_s=0.0, on_unrolls=lambda u: None,
                             initial_state={"h": torch.zeros(1)})
    seen = []
    for t in range(8):
        term = [t == 2, False]  # slot 0's obs 2 is final: obs 3 opens an episode
        # Slot 1's worker died: obs 5 is a fresh env's, reported as cut (the engine resets it once more).
        restarted = [False, t == 5]
        reply = server.submit(_request([0, 1], np.zeros((2, 2)), term, restarted))
        server.run_once(idle_timeout=1.0)
        seen.append(reply.wait(0).tolist())
    assert [s[0] for s in seen] == [1, 2, 3, 1, 2, 3, 4, 5]
    assert [s[1] for s in seen] == [1, 2, 3, 4, 5, 1, 1, 2]
    # The store's interface: the state entering each slot's next observation, and a reset.
    np.testing.assert_array_equal(server.states.states_for(np.array([0, 1]))["h"][:, 0].numpy(), [5, 2])
    server.states.reset(np.array([0]))
    np.testing.assert_array_equal(server.states.states_for(np.array([0, 1]))["h"][:, 0].numpy(), [0, 2])


def test_state_slots_are_a_no_op_for_feed_forward_policies_and_check_slots():
    ff = StateSlots(4, None)
    assert not ff.recurrent and ff.gather(torch.arange(2), torch.zeros(2, dtype=torch.bool)) is None
    assert ff.states_for(np.arange(2)) is None and ff.starts_for(np.arange(2)) is None
    ff.reset(np.arange(2))
    slots = StateSlots(4, {"h": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"slots must lie in \[0, 4\)"):
        slots.states_for(np.array([4]))


def test_recurrent_appo_update_learns_from_minibatches_of_whole_unrolls():
    policy = _policy("gru")
    server, unrolls = _server(policy, recurrent_policy_act, 4)
    _drive(server, 40, {(0, 5): True, (2, 9): True}, np.random.default_rng(1))
    u = concat_unrolls(unrolls)
    cfg = ImpalaConfig(unroll_length=4, unrolls_per_batch=len(u), clip_coef=0.2, update_epochs=2, num_minibatches=2)
    learner = ImpalaLearner(policy, cfg)
    before = policy.core.rnn.weight_hh_l0.detach().clone()
    metrics = learner.update(u)
    assert np.isfinite(metrics["losses/policy_loss"]) and learner.version == 1
    assert not torch.equal(before, policy.core.rnn.weight_hh_l0)
    # Without the start state a recurrent learner cannot know what its policy remembered: it says so.
    with pytest.raises(ValueError, match="start state"):
        learner.update(dataclasses.replace(u, start_state=None))


def _tiny_cfg(tmp_path, total, **model):
    from seedpool.trainers.impala import impala_defaults

    cfg = impala_defaults("CartPole-v1")
    return dataclasses.replace(cfg, env="pomdp_envs:CartPoleNoVel-v0", total_timesteps=total, num_envs=4,
                               backend="serial", runs_dir=tmp_path, progress="off", tensorboard=False,
                               acting=dataclasses.replace(cfg.acting, serial=True),
                               impala=dataclasses.replace(cfg.impala, unrolls_per_batch=4, update_epochs=2),
                               model=ModelConfig(core="lstm", core_size=8, hidden_sizes=(), **model))


def test_recurrent_impala_trains_checkpoints_and_resumes(tmp_path):
    from seedpool.experiment import CHECKPOINT_FILE, load_checkpoint
    from seedpool.trainers.impala import train_impala

    first = train_impala(_tiny_cfg(tmp_path, 600))
    before = load_checkpoint(first.run_dir / CHECKPOINT_FILE, "impala")
    assert any(k.startswith("core.rnn") for k in before["model"]) and before["learner"]["version"] > 0
    target = before["counters"]["step"] + 600
    resumed = train_impala(dataclasses.replace(_tiny_cfg(tmp_path, target), resume=first.run_dir))
    after = load_checkpoint(resumed.run_dir / CHECKPOINT_FILE, "impala")
    assert resumed.run_dir == first.run_dir and after["learner"]["version"] > before["learner"]["version"]
    assert not torch.equal(after["model"]["core.rnn.weight_hh_l0"], before["model"]["core.rnn.weight_hh_l0"])
    from seedpool.cli import main

    assert main(["eval", str(resumed.run_dir), "--episodes", "1"]) == 0  # eval rebuilds the recurrent policy
    # A core that also reads the previous action and reward trains on the same system.
    with_inputs = train_impala(_tiny_cfg(tmp_path / "inputs", 600, prev_action=True, prev_reward=True))
    assert load_checkpoint(with_inputs.run_dir / CHECKPOINT_FILE, "impala")["learner"]["version"] > 0
