"""The value-based agents' plumbing: epsilon-greedy sampler, Ape-X's act function, ReplayLearner pacing."""
import gymnasium as gym
import numpy as np
import pytest
import torch

import seedpool
from seedpool.actors.epsilon_sampler import EpsilonGreedySampler
from seedpool.algos.apex import ApexConfig, EpsilonGreedyAct, epsilon_group_names, slot_epsilons
from seedpool.algos.dqn import DQNConfig, DQNLearner, epsilon_greedy
from seedpool.algos.replay_learner import ReplayLearner, ReplayUpdate
from seedpool.models import QModelConfig, make_q_network
from seedpool.replay import NStepWriter, UniformReplay
from seedpool.replay import make_replay


def _pool(num_envs=4):
    return seedpool.make("CartPole-v1", num_envs=num_envs, backend="serial", seed=3)


def _q_net(pool):
    return make_q_network(pool.single_observation_space, pool.single_action_space, QModelConfig(hidden_sizes=(16,)))


def test_sampler_unrolls_link_each_step_to_the_next_observation_and_mark_reset_steps():
    with _pool() as pool:
        sampler = EpsilonGreedySampler(pool, _q_net(pool), 50, lambda step: 1.0, epsilon_greedy, seed=0)
        u, episodes = sampler.collect()
        # Replaying the recorded actions on an identically seeded pool gives the same observations.
        with _pool() as twin:
            obs, _ = twin.reset()
            np.testing.assert_array_equal(u.obs[0], obs)
            for t in range(50):
                obs, rew, term, trunc, _ = twin.step(u.actions[t])
                np.testing.assert_array_equal(u.obs[t + 1], obs)
                np.testing.assert_array_equal(u.rewards[t], rew)
                np.testing.assert_array_equal(u.terminated[t], term)
                if t + 1 < 50:
                    np.testing.assert_array_equal(u.valid[t + 1], ~(term | trunc))
        assert episodes and sampler.env_steps == 200
        assert (~u.valid).sum() == len(episodes)  # one ignored reset step per finished episode


def test_apex_act_uses_each_slots_epsilon_and_records_q_values():
    q_net = torch.nn.Linear(3, 4)
    act = EpsilonGreedyAct(np.array([1.0, 0.0]), seed=0)
    obs = torch.randn(2000, 3)
    slots = torch.tensor([0, 1] * 1000)
    out = act(q_net, obs, None, torch.zeros(2000, dtype=torch.bool), slots)
    q = q_net(obs)
    greedy = q.argmax(1)
    assert (out.actions[slots == 1] == greedy[slots == 1]).all()  # epsilon 0: always greedy
    share_greedy = (out.actions[slots == 0] == greedy[slots == 0]).float().mean()
    assert 0.15 < share_greedy < 0.35  # epsilon 1: uniform over 4 actions
    torch.testing.assert_close(out.aux[:, 0], q.gather(1, out.actions[:, None]).squeeze(1))
    torch.testing.assert_close(out.aux[:, 1], q.max(1).values)


def test_apex_epsilons_and_their_groups():
    eps = slot_epsilons(8, ApexConfig())
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)
    names = epsilon_group_names(eps, 4)
    assert len(set(names)) == 4 and names[0] == names[1] != names[2]


def _replay_learner(pool, utd_ratio, learning_starts=64, minibatch_size=16, beta0=0.4):
    q_net = _q_net(pool)
    replay = UniformReplay(10_000, {"obs": ((4,), np.float32), "action": ((), np.int64),
                                    "reward": ((), np.float32), "discount": ((), np.float32),
                                    "next_obs": ((4,), np.float32)}, seed=0)
    learner = DQNLearner(q_net, DQNConfig(learning_starts=learning_starts, minibatch_size=minibatch_size), 10_000)
    return q_net, ReplayLearner(learner, replay, NStepWriter(replay, 3, 0.99), utd_ratio=utd_ratio,
                                minibatch_size=minibatch_size, learning_starts=learning_starts, total_steps=10_000,
                                beta0=beta0)


def test_replay_learner_learns_at_the_utd_ratio_once_the_replay_holds_learning_starts():
    with _pool() as pool:
        q_net, rl = _replay_learner(pool, utd_ratio=0.125)
        sampler = EpsilonGreedySampler(pool, q_net, 5, lambda step: 1.0, epsilon_greedy, seed=0)
        metrics = rl.update(sampler.collect()[0])  # 20 env steps: below learning_starts
        assert rl.gradient_steps == 0 and "charts/gradient_steps" not in metrics
        while len(rl.replay) < 64:
            rl.update(sampler.collect()[0])
        learning_from = rl.learning_env_steps
        for _ in range(30):
            metrics = rl.update(sampler.collect()[0])
        learned_steps = rl.learning_env_steps
        assert learned_steps == learning_from + 30 * 20
        assert rl.gradient_steps == int(learned_steps * 0.125)  # fractions of a step carry over
        assert rl.measured_ratio() == pytest.approx(0.125, rel=0.05)
        assert metrics["charts/utd_ratio"] == rl.measured_ratio()
        assert rl.version == rl.gradient_steps


def test_replay_learner_state_round_trip_keeps_the_pace():
    with _pool() as pool:
        q_net, rl = _replay_learner(pool, utd_ratio=1.5 / 16)
        sampler = EpsilonGreedySampler(pool, q_net, 7, lambda step: 1.0, epsilon_greedy, seed=0)
        for _ in range(20):
            rl.update(sampler.collect()[0])
        state = rl.state_dict()
        _, other = _replay_learner(pool, utd_ratio=1.5 / 16)
        other.load_state_dict(state)
        assert (other.env_steps, other.gradient_steps, other.version) == (rl.env_steps, rl.gradient_steps, rl.version)
        for a, b in zip(other.model.parameters(), rl.model.parameters()):
            torch.testing.assert_close(a, b)


class _FixedPriorityLearner:
    """A `MinibatchLearner` that is not DQN: learns nothing, gives every row the same priority (or None)."""

    def __init__(self, priority):
        self.model, self.version, self.priority, self.batches = torch.nn.Linear(4, 2), 0, priority, []

    def update(self, batch, env_steps=0):
        self.version += 1
        self.batches.append(batch)
        rows = len(batch["indices"])
        return ReplayUpdate({"losses/none": 0.0}, None if self.priority is None else np.full(rows, self.priority))

    def state_dict(self):
        return {"version": self.version}

    def load_state_dict(self, state):
        self.version = state["version"]


@pytest.mark.parametrize("priority", [5.0, None])
def test_replay_learner_drives_any_minibatch_learner_anneals_beta_and_sets_its_priorities(priority):
    with _pool() as pool:
        replay = make_replay(pool.single_observation_space, pool.single_action_space, 1000, prioritized=True, seed=0)
        betas = []
        sample = replay.sample
        replay.sample = lambda n, beta: (betas.append(beta), sample(n, beta=beta))[1]
        learner = _FixedPriorityLearner(priority)
        rl = ReplayLearner(learner, replay, NStepWriter(replay, 1, 0.99), utd_ratio=1 / 8, minibatch_size=8,
                           learning_starts=8, total_steps=400, beta0=0.2)
        sampler = EpsilonGreedySampler(pool, _q_net(pool), 5, lambda step: 1.0, epsilon_greedy, seed=0)
        while rl.env_steps < 400:
            rl.update(sampler.collect()[0])
        assert learner.version == rl.gradient_steps > 30 and all(len(b["indices"]) == 8 for b in learner.batches)
        # beta0 at the start, linear in the env steps inserted, 1 at the end of the run.
        assert betas[0] < 0.3 and betas == sorted(betas) and rl.beta() == pytest.approx(1.0)
        assert rl.beta() == pytest.approx(0.2 + 0.8 * rl.progress)
        stored = replay.priorities(learner.batches[-1]["indices"])
        expected = 1.0 if priority is None else (priority + 1e-6) ** 0.6  # None leaves new rows' max priority
        np.testing.assert_allclose(stored, expected, rtol=1e-6)


def test_make_replay_stores_stacked_frames_once():
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert make_replay(frames, gym.spaces.Discrete(6), 1000, prioritized=True, seed=0).frame_dedup
    assert not make_replay(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), 1000).frame_dedup


def test_apex_runs_end_to_end_logs_returns_by_epsilon_group_and_resumes(tmp_path):
    import dataclasses

    from seedpool.experiment.checkpoint import load_checkpoint
    from seedpool.experiment.evaluate import load_run_policy
    from seedpool.experiment.metrics import read_metrics
    from seedpool.experiment.run import CHECKPOINT_FILE
    from seedpool.trainers.apex import apex_defaults, train_apex

    cfg = apex_defaults("CartPole-v1")
    cfg = dataclasses.replace(cfg, runs_dir=tmp_path, progress="off", tensorboard=False, total_timesteps=4000,
                              num_envs=8, backend="serial", save_replay=True)
    cfg.dqn = dataclasses.replace(cfg.dqn, learning_starts=500, buffer_size=5000, policy_average=100)
    result = train_apex(cfg)
    assert result.step >= 4000
    names = {name for _, _, name, _ in read_metrics(result.run_dir / "metrics.csv")}
    assert {n for n in names if n.startswith("charts/episodic_return/eps_")}
    assert {"charts/utd_ratio", "charts/gradient_steps", "charts/learner_version"} <= names
    assert (result.run_dir / "replay.npz").exists()
    resumed = train_apex(dataclasses.replace(cfg, resume=result.run_dir, total_timesteps=6000))
    assert resumed.run_dir == result.run_dir and resumed.step >= 6000
    # The run's policy is the average of the online weights: evaluation loads it, not the model.
    state = load_checkpoint(result.run_dir / CHECKPOINT_FILE)
    average = state["learner"]["policy_average"]
    assert any(not torch.equal(average[k], state["model"][k]) for k in average)
    with _pool() as pool:
        policy = load_run_policy(result.run_dir, (pool.single_observation_space, pool.single_action_space))
    for name, weights in policy.q_net.state_dict().items():
        assert torch.equal(weights, average[name]), name
