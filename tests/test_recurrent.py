"""Recurrent policies: state resets at episode starts, step-by-step equals whole-sequence, the
sampler's stored start state, recurrent PPO's update and its exact resume."""
import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import seedpool
from seedpool.actors.sampler import SyncSampler
from seedpool.models import ModelConfig, is_recurrent, make_policy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(4)


def _policy(core="lstm", action_space=DISCRETE, **kw):
    torch.manual_seed(0)
    return make_policy(OBS, action_space, ModelConfig(core=core, core_size=16, hidden_sizes=(8,), **kw))


@pytest.mark.parametrize("core", ["lstm", "gru"])
@pytest.mark.parametrize("inputs", [{}, {"prev_action": True, "prev_reward": True, "critic_core": True}])
def test_step_by_step_equals_whole_sequence_with_resets_inside(core, inputs):
    policy = _policy(core, **inputs)
    T, B = 9, 3
    g = torch.Generator().manual_seed(1)
    obs = torch.rand(T, B, 3, generator=g)
    first = torch.zeros(T, B, dtype=torch.bool)
    first[0, 0] = first[4, 1] = first[7, 2] = first[8, 0] = True
    prev_a = torch.randint(0, 4, (T, B), generator=g)
    prev_r = torch.rand(T, B, generator=g)
    state = {k: torch.rand(v.shape, generator=g) for k, v in policy.initial_state(B).items()}
    pa, pr = (prev_a, prev_r) if inputs.get("prev_action") else (None, None)
    with torch.no_grad():
        params, values, final = policy.sequence(obs, state, first, pa, pr)
        s = state
        for t in range(T):
            p_t, v_t, s = policy.step(obs[t], s, first[t], None if pa is None else pa[t], None if pr is None else pr[t])
            torch.testing.assert_close(p_t, params[t])
            torch.testing.assert_close(v_t, values[t])
    for k in final:
        torch.testing.assert_close(final[k], s[k])


@pytest.mark.parametrize("core", ["lstm", "gru"])
@pytest.mark.parametrize("reset_rate", [0.0, 0.15, 1.0])
def test_one_fused_call_over_the_pieces_of_a_sequence_equals_the_cell_stepped_through_time(core, reset_rate):
    # The core cuts each column where an episode starts and runs the pieces as the columns of one
    # padded call (`RecurrentCore.sequence`); stepping one time step at a time is the reference:
    # outputs, final state and the gradients of both, to inputs, start state and weights.
    from seedpool.models.recurrent import RecurrentCore

    torch.manual_seed(3)
    rnn = RecurrentCore(core, 5, 8)
    T, B = 11, 4
    g = torch.Generator().manual_seed(4)
    first = torch.rand(T, B, generator=g) < reset_rate
    first[6, 2] = True  # at least one reset inside
    x0 = torch.randn(T, B, 5, generator=g)
    s0 = {k: torch.randn(B, 8, generator=g) for k in rnn.state_names}

    def run(whole):
        rnn.zero_grad()
        x = x0.clone().requires_grad_()
        s = {k: v.clone().requires_grad_() for k, v in s0.items()}
        if whole:
            out, end = rnn.sequence(x, s, first)
        else:
            outs, end = [], s
            for t in range(T):
                o, end = rnn.step(x[t], end, first[t])
                outs.append(o)
            out = torch.stack(outs)
        (out.pow(2).sum() + sum((v * (i + 1)).sum() for i, v in enumerate(end.values()))).backward()
        return out, end, [x.grad, *(v.grad for v in s.values()), *(p.grad for p in rnn.parameters())]

    out, end, grads = run(True)
    ref_out, ref_end, ref_grads = run(False)
    torch.testing.assert_close(out, ref_out)
    for k in ref_end:
        torch.testing.assert_close(end[k], ref_end[k])
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b)
    # Without the final state (what the learners' re-scoring asks for): the same outputs, no state.
    with torch.no_grad():
        bare, none = rnn.sequence(x0, s0, first, final_state=False)
    assert none is None
    torch.testing.assert_close(bare, ref_out.detach())


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_state_resets_where_an_episode_starts_inside_a_sequence(core):
    policy = _policy(core)
    B = 2
    obs = torch.rand(6, B, 3, generator=torch.Generator().manual_seed(2))
    first = torch.zeros(6, B, dtype=torch.bool)
    first[3, 0] = True  # env 0 starts a new episode at step 3
    carried = {k: torch.full_like(v, 0.7) for k, v in policy.initial_state(B).items()}
    with torch.no_grad():
        _, values, _ = policy.sequence(obs, carried, first)
        # After the reset, env 0 computes exactly what a fresh zero state computes from step 3 on.
        opens = torch.tensor([[True], [False], [False]])
        _, fresh, _ = policy.sequence(obs[3:, :1], policy.initial_state(1), opens)
        torch.testing.assert_close(values[3:, 0], fresh[:, 0])
        # Without the reset the carried state changes the outputs (the test above could fail).
        _, kept, _ = policy.sequence(obs[3:, :1], {k: v[:1] for k, v in carried.items()},
                                     torch.zeros(3, 1, dtype=torch.bool))
    assert not torch.allclose(kept[:, 0], fresh[:, 0])
    # first also zeroes the previous action and reward inputs.
    p2 = _policy(core, prev_action=True, prev_reward=True)
    with torch.no_grad():
        a, _, _ = p2.sequence(obs[:1], p2.initial_state(B), torch.ones(1, B, dtype=torch.bool),
                              torch.tensor([[1, 3]]), torch.tensor([[5.0, -2.0]]))
        b, _, _ = p2.sequence(obs[:1], p2.initial_state(B), torch.ones(1, B, dtype=torch.bool),
                              torch.tensor([[0, 0]]), torch.tensor([[0.0, 0.0]]))
    torch.testing.assert_close(a, b)


def test_recurrent_policy_builds_for_every_torso_and_refuses_stateless_calls():
    lstm = _policy("lstm")
    assert is_recurrent(lstm) and not is_recurrent(_policy("none"))
    with pytest.raises(TypeError, match="needs its state"):
        lstm.act(torch.zeros(2, 3))
    cnn = make_policy(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), DISCRETE, ModelConfig(core="gru", core_size=32))
    a, logp, v, state = cnn.act_step(torch.zeros(2, 4, 84, 84, dtype=torch.uint8), cnn.initial_state(2),
                                     torch.ones(2, dtype=torch.bool))
    assert a.shape == (2,) and v.shape == (2,) and state["h"].shape == (2, 32)
    gauss = _policy("lstm", gym.spaces.Box(-1, 1, (2,)), prev_action=True)
    a, logp, v, state = gauss.act_step(torch.zeros(5, 3), gauss.initial_state(5), torch.ones(5, dtype=torch.bool),
                                       torch.zeros(5, 2))
    assert a.shape == (5, 2) and set(state) == {"h", "c"}
    with pytest.raises(ValueError, match="previous action"):
        gauss.act_step(torch.zeros(5, 3), gauss.initial_state(5), torch.ones(5, dtype=torch.bool))


class _Recorder:
    """Wraps a recurrent policy's act_step to keep the state and `first` it was given at each call."""

    def __init__(self, policy):
        self.calls = []
        self._act_step = policy.act_step

        def act_step(obs, state, first, *args, **kw):
            self.calls.append(({k: v.clone() for k, v in state.items()}, first.clone()))
            return self._act_step(obs, state, first, *args, **kw)

        policy.act_step = act_step


def test_sampler_stores_the_state_the_policy_used_at_each_rollout_start():
    from pomdp_envs import CartPoleNoVelocity

    policy = make_policy(gym.spaces.Box(-5, 5, (2,), np.float32), gym.spaces.Discrete(2),
                         ModelConfig(core="lstm", core_size=8, prev_action=True, prev_reward=True))
    recorder = _Recorder(policy)
    T = 16
    with seedpool.make(CartPoleNoVelocity, num_envs=3, backend="serial", seed=3) as pool:
        sampler = SyncSampler(pool, policy, num_steps=T)
        rollouts = []
        for _ in range(4):
            rollout, _ = sampler.collect()
            rollouts.append({k: getattr(rollout, k).clone() for k in ("first", "valid", "prev_actions", "prev_rewards",
                                                                      "actions", "rewards")}
                            | {"start": {k: v.clone() for k, v in rollout.start_state.items()}})
    for i, r in enumerate(rollouts):
        used_state, used_first = recorder.calls[i * T]
        for k in used_state:
            torch.testing.assert_close(r["start"][k], used_state[k], rtol=0, atol=0)
        assert torch.equal(r["first"][0], used_first)
        if i > 0:  # a rollout's start state is the state its envs carried out of the previous one
            assert r["start"]["h"].abs().sum() > 0
        # The policy was told of an episode start exactly after each final (invalid) observation.
        prev_valid = torch.cat([torch.ones(1, 3, dtype=torch.bool) if i == 0 else rollouts[i - 1]["valid"][-1:],
                                r["valid"][:-1]])
        expected_first = ~prev_valid
        if i == 0:
            expected_first[0] = True
        assert torch.equal(r["first"], expected_first)
        for t in range(T):
            assert torch.equal(recorder.calls[i * T + t][1], r["first"][t])
        # Previous action and reward: those of the step before (in the same env).
        assert torch.equal(r["prev_actions"][1:], r["actions"][:-1])
        assert torch.equal(r["prev_rewards"][1:], r["rewards"][:-1])
    assert sum(int((~r["valid"]).sum()) for r in rollouts) > 0  # episodes ended inside the rollouts


def test_double_buffered_sampler_refuses_a_recurrent_policy():
    from seedpool.actors.sampler import make_sampler

    with seedpool.make("CartPole-v1", num_envs=4, batch_size=2, backend="serial") as pool:
        policy = make_policy(pool.single_observation_space, pool.single_action_space, ModelConfig(core="gru"))
        with pytest.raises(ValueError, match="--sampler sync"):
            make_sampler("double", pool, policy, 8)


def test_recurrent_ppo_update_learns_through_time_from_the_stored_state():
    from seedpool.algos.ppo import PPOConfig, PPOLearner
    from seedpool.algos.ppo_recurrent import make_sequence_batch, recurrent_loss

    cfg = PPOConfig(num_steps=32, num_minibatches=2, update_epochs=2)
    with seedpool.make("pomdp_envs:CartPoleNoVel-v0", num_envs=4, backend="serial", seed=0) as pool:
        policy = make_policy(pool.single_observation_space, pool.single_action_space,
                             ModelConfig(core="lstm", core_size=16))
        sampler = SyncSampler(pool, policy, num_steps=32)
        learner = PPOLearner(policy, cfg, 10_000)
        sampler.collect()
        rollout, _ = sampler.collect()  # its envs carry state in from the first rollout
    batch = make_sequence_batch(rollout, cfg.gamma, cfg.gae_lambda)
    # Re-run from the stored start state, the policy gives back exactly the log-probs it acted with.
    with torch.no_grad():
        logprob, _, value = policy.evaluate_sequence(batch.obs, batch.actions, batch.start_state, batch.first,
                                                     batch.prev_actions, batch.prev_rewards)
    torch.testing.assert_close(logprob, batch.logprobs)
    torch.testing.assert_close(value, batch.values)
    # The stored start state matters: from a zero state the first step's values differ where the
    # envs carry state in (first[0] unset).
    carried = ~batch.first[0]
    assert carried.any()
    zero = {k: torch.zeros_like(v) for k, v in batch.start_state.items()}
    with torch.no_grad():
        _, _, value_from_zero = policy.evaluate_sequence(batch.obs, batch.actions, zero, batch.first,
                                                         batch.prev_actions, batch.prev_rewards)
    assert (value_from_zero[0, carried] - value[0, carried]).abs().min() > 1e-6
    assert torch.isfinite(recurrent_loss(policy, batch, cfg, 0.2)[0])
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    metrics = learner.update(rollout)
    assert np.isfinite(metrics["losses/policy_loss"]) and metrics["losses/epochs"] == 2
    assert not torch.equal(before["core.rnn.weight_hh_l0"], policy.state_dict()["core.rnn.weight_hh_l0"])
    with pytest.raises(ValueError, match="num-minibatches must be at most"):
        PPOLearner(policy, PPOConfig(num_minibatches=8), 10_000).update(rollout)


def _tiny_recurrent_config(tmp_path: Path, total: int):
    from seedpool.trainers.ppo import ppo_defaults

    cfg = ppo_defaults("CartPole-v1")
    return dataclasses.replace(cfg, env="pomdp_envs:CartPoleNoVel-v0", total_timesteps=total, num_envs=4,
                               backend="serial", runs_dir=tmp_path, progress="off", tensorboard=False,
                               model=ModelConfig(core="lstm", core_size=16, prev_action=True, prev_reward=True),
                               ppo=dataclasses.replace(cfg.ppo, num_steps=64, update_epochs=2, num_minibatches=2))


def test_recurrent_ppo_resumes_to_exactly_the_parameters_of_an_uninterrupted_run(tmp_path, monkeypatch):
    from seedpool.experiment.run import Run
    from seedpool.trainers.ppo import train_ppo

    # 256 steps per update, 5 updates; the second run stops after 2 and is resumed. Episodes and
    # the policy's memory of them span the cut: the envs are replayed and the state restored.
    full = train_ppo(_tiny_recurrent_config(tmp_path / "a", 1280))
    end_update = Run.end_update

    def stop_at_512(run, step, scalars):
        end_update(run, step, scalars)
        run.stop_requested = run.stop_requested or step >= 512

    monkeypatch.setattr(Run, "end_update", stop_at_512)
    first = train_ppo(_tiny_recurrent_config(tmp_path / "b", 1280))
    monkeypatch.undo()
    assert first.step == 512 and first.interrupted
    memory = torch.load(first.run_dir / "checkpoint.pt", weights_only=True)["acting"]["memory"]
    assert memory["state"]["h"].abs().sum() > 0  # a live state was saved, not a fresh one
    resumed = train_ppo(dataclasses.replace(_tiny_recurrent_config(tmp_path / "b", 1280), resume=first.run_dir))
    assert resumed.step == full.step == 1280
    a = torch.load(full.run_dir / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(resumed.run_dir / "checkpoint.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and any("core.rnn" in k for k in a)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_cli_trains_a_recurrent_policy_on_a_users_env_and_evaluates_it(tmp_path, capsys):
    from seedpool.cli import main

    args = ["train", "ppo", "--env", "pomdp_envs:CartPoleNoVel-v0", "--model.core", "gru", "--model.core-size", "8",
            "--num-envs", "2", "--ppo.num-steps", "16", "--ppo.update-epochs", "1", "--ppo.num-minibatches", "1", "--backend", "serial",
            "--total-timesteps", "64", "--no-tensorboard", "--progress", "off", "--runs-dir", str(tmp_path / "runs")]
    assert main([*args, "--ppo.num-minibatches", "4"]) == 2
    assert "num-minibatches must be at most --num-envs (2)" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert main(args) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert '"core": "gru"' in (run_dir / "config.json").read_text()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert "return" in capsys.readouterr().out
