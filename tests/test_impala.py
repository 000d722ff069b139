"""IMPALA loss and learner update: masking, on-policy ratios, versions, NaN handling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seedpool.algos.impala import ImpalaConfig, ImpalaLearner, NonFiniteLossError, impala_loss, unrolls_to_tensors
from seedpool.inference import Unrolls
from seedpool.models import MLPActorCritic


def random_unrolls(model, T=5, B=4, seed=0, version=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T + 1, B, 3)).astype(np.float32)
    with torch.no_grad():
        actions, logp, _ = model.act(torch.from_numpy(obs[:T].reshape(T * B, 3)))
    valid = np.ones((T, B), bool)
    valid[2, 1] = False
    term = np.zeros((T, B), bool)
    term[1, 1] = True
    return Unrolls(
        obs=obs, actions=actions.view(T, B).numpy(), logp=logp.view(T, B).numpy(),
        rewards=rng.normal(size=(T, B)).astype(np.float32), terminated=term,
        truncated=np.zeros((T, B), bool), valid=valid, first=np.zeros((T, B), bool),
        versions=np.full((T, B), version, np.int64), slots=np.arange(B),
    )


def test_loss_is_finite_on_policy_and_ignores_invalid_steps():
    torch.manual_seed(0)
    model = MLPActorCritic(3, 2, continuous=False)
    u = random_unrolls(model)
    cfg = ImpalaConfig()
    loss, parts = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert torch.isfinite(loss)
    assert parts["losses/importance_ratio"].item() == pytest.approx(1.0, abs=1e-5)
    # What happens at the autoreset step (its action and reward) must not matter.
    u.rewards[2, 1] = 1e6
    u.actions[2, 1] = 1 - u.actions[2, 1]
    loss2, _ = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-6)
    # ...but a real step's reward does.
    u.rewards[3, 1] = 1e3
    loss3, _ = impala_loss(model, unrolls_to_tensors(u, torch.device("cpu")), cfg)
    assert abs(loss3.item() - loss.item()) > 1.0


def test_updates_raise_the_probability_of_rewarded_actions_and_count_versions():
    torch.manual_seed(1)
    model = MLPActorCritic(3, 2, continuous=False)
    learner = ImpalaLearner(model, ImpalaConfig(learning_rate=1e-2, anneal_lr=False, ent_coef=0.0))
    obs = torch.zeros(1, 3)

    def p_action1():
        with torch.no_grad():
            return torch.softmax(model(obs)[0], -1)[0, 1].item()

    before = p_action1()
    for i in range(30):
        u = random_unrolls(model, seed=i, version=max(0, learner.version - 2))
        u.obs[:] = 0.0
        u.rewards[:] = (u.actions == 1).astype(np.float32)  # a bandit: action 1 pays
        u.valid[:] = True
        u.terminated[:] = True
        metrics = learner.update(u)
    assert p_action1() > before + 0.3
    assert learner.version == 30
    assert learner.steps_trained == 30 * 5 * 4
    assert metrics["charts/policy_lag_mean"] == 2.0


def test_reward_scale_is_the_same_update_as_scaled_rewards():
    import copy

    torch.manual_seed(4)
    base = MLPActorCritic(3, 2, continuous=False)
    u = random_unrolls(base)
    scaled = copy.deepcopy(u)
    scaled.rewards = u.rewards * np.float32(0.1)
    results = []
    for unrolls, scale in ((u, 0.1), (scaled, 1.0), (u, 1.0)):
        model = copy.deepcopy(base)
        learner = ImpalaLearner(model, ImpalaConfig(reward_scale=scale, update_epochs=2))
        learner.update(unrolls)
        results.append(torch.nn.utils.parameters_to_vector(model.parameters()))
    torch.testing.assert_close(results[0], results[1])
    assert not torch.allclose(results[0], results[2])  # the scale does act


def test_nan_loss_raises_and_leaves_parameters_untouched():
    torch.manual_seed(2)
    model = MLPActorCritic(3, 2, continuous=False)
    learner = ImpalaLearner(model, ImpalaConfig())
    u = random_unrolls(model)
    u.rewards[0, 0] = np.nan
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(NonFiniteLossError, match="loss is nan"):
        learner.update(u)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert learner.version == 0


def test_checkpoint_state_round_trip():
    torch.manual_seed(3)
    a = ImpalaLearner(MLPActorCritic(3, 2, continuous=False), ImpalaConfig(optimizer="rmsprop"))
    a.update(random_unrolls(a.model))
    b = ImpalaLearner(MLPActorCritic(3, 2, continuous=False), ImpalaConfig(optimizer="rmsprop"))
    b.load_state_dict(a.state_dict())
    assert b.version == 1 and b.steps_trained == a.steps_trained
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])


# --- the whole SEED system through train_impala --------------------------------------------

import dataclasses  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402

import psutil  # noqa: E402

import seedpool.algos.impala as impala_mod  # noqa: E402
from seedpool.experiment import CHECKPOINT_FILE, load_checkpoint  # noqa: E402
from seedpool.experiment.metrics import series  # noqa: E402
from seedpool.trainers import impala as trainer  # noqa: E402


def small_cfg(tmp_path, **kw):
    cfg = trainer.impala_defaults("CartPole-v1")
    return dataclasses.replace(cfg, runs_dir=tmp_path, progress="off", tensorboard=False, **kw)


def seed_threads():
    return [t for t in threading.enumerate() if t.name in ("inference", "learner") or t.name.startswith("actor@")]


def last_value(run_dir, name):
    _, _, values = series(run_dir / "metrics.csv", name)
    assert len(values), f"no {name} in metrics.csv"
    return values[-1]


def test_train_logs_the_seed_metrics(tmp_path):
    result = trainer.train_impala(small_cfg(tmp_path, total_timesteps=6_000))
    assert result.step >= 6_000
    for name in ("time/share_env", "time/share_inference_wait", "time/share_inference_compute",
                 "time/share_learner_wait", "time/share_learn", "queues/unrolls", "queues/requests",
                 "charts/policy_lag_mean", "charts/worker_restarts"):
        last_value(result.run_dir, name)
    # One pool of 16 envs, recv batches of 8, max batch 8: every inference batch is full.
    assert last_value(result.run_dir, "inference/batch_fill") == 1.0
    assert last_value(result.run_dir, "charts/learner_version") > 0
    assert not seed_threads()
    state = load_checkpoint(result.run_dir / CHECKPOINT_FILE, "impala")
    assert state["learner"]["version"] > 0


def test_serial_twin_is_deterministic(tmp_path):
    params = []
    for k in range(2):
        cfg = small_cfg(tmp_path / str(k), total_timesteps=3_000, backend="serial")
        cfg.acting = dataclasses.replace(cfg.acting, serial=True)
        result = trainer.train_impala(cfg)
        params.append(load_checkpoint(result.run_dir / CHECKPOINT_FILE, "impala")["model"])
    assert params[0].keys() == params[1].keys()
    for name in params[0]:
        assert torch.equal(params[0][name], params[1][name]), name


def test_a_killed_env_worker_is_restarted_and_training_goes_on(tmp_path, monkeypatch):
    """A worker is killed once training is under way (at the first logged window, not at a
    clock time); the run must restart it and train 5,000 more steps after the kill."""
    import seedpool.trainers.common as common
    from seedpool.experiment.run import Run

    made = []
    real_make_pools = common.make_pools

    def make_pools_and_remember(*args, **kwargs):
        made.extend(real_make_pools(*args, **kwargs))
        return made

    end_update = Run.end_update
    killed_at = []

    def end_update_then_kill_then_stop(run, step, scalars):
        end_update(run, step, scalars)
        if not killed_at:
            os.kill(made[0].worker_pids[0], signal.SIGKILL)
            killed_at.append(step)
        elif scalars["charts/worker_restarts"] >= 1 and step >= killed_at[0] + 5_000:
            run.stop_requested = True

    monkeypatch.setattr(common, "make_pools", make_pools_and_remember)
    monkeypatch.setattr(Run, "end_update", end_update_then_kill_then_stop)
    cfg = small_cfg(tmp_path, total_timesteps=10_000_000, backend="process")
    cfg.acting = dataclasses.replace(cfg.acting, num_workers=2)
    result = trainer.train_impala(cfg)
    assert result.step >= killed_at[0] + 5_000
    assert last_value(result.run_dir, "charts/worker_restarts") == 1
    assert last_value(result.run_dir, "charts/dropped_steps") > 0
    assert not psutil.Process().children(recursive=True)


def test_a_nan_loss_stops_acting_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    real_loss = impala_mod.appo_loss  # the CartPole defaults' objective: 10 gradient steps per update
    calls = []

    def loss_that_turns_nan(model, batch, targets, cfg, clip_coef=None):
        calls.append(1)
        loss, parts = real_loss(model, batch, targets, cfg, clip_coef)
        # Turn NaN once a checkpoint exists (event, not clock): it must survive the failure.
        saved = any(tmp_path.glob(f"*/{CHECKPOINT_FILE}"))
        return (loss * float("nan") if saved and len(calls) > 20 else loss), parts

    monkeypatch.setattr(impala_mod, "appo_loss", loss_that_turns_nan)
    cfg = small_cfg(tmp_path, total_timesteps=10_000_000, checkpoint_every_s=0.0, backend="process")
    with pytest.raises(trainer.TrainingError, match="learner failed with NonFiniteLossError") as err:
        trainer.train_impala(cfg)
    assert "last good checkpoint" in str(err.value)
    assert not seed_threads()
    assert not psutil.Process().children(recursive=True)
    (run_dir,) = tmp_path.iterdir()
    state = load_checkpoint(run_dir / CHECKPOINT_FILE, "impala")
    assert state["learner"]["version"] > 0
    assert all(torch.isfinite(v).all() for v in state["model"].values())


def test_pool_source_reports_whole_atari_games_not_lives():
    """With episodic_life, a life lost ends an engine episode; the run's returns are games."""
    from seedpool.actors.actor_loop import EpisodeLog
    from seedpool.actors.pool_source import PoolSource

    class ScriptedPool:  # the async pool API PoolSource reads, replaying Atari-like infos
        is_async, num_envs, batch_size, worker_restarts = True, 2, 1, 0

        def __init__(self, rows):
            self.rows = iter(rows)

        def recv(self):
            env, raw, elapsed, life_lost, game_over = next(self.rows)
            info = {"env_id": np.array([env], np.int32), "reward": np.array([raw]),
                    "elapsed_step": np.array([elapsed]), "terminated": np.array([int(game_over)]),
                    "episode_return": np.array([99.0]), "episode_length": np.array([elapsed])}
            return (np.zeros((1, 3)), np.array([np.sign(raw)], np.float32),
                    np.array([life_lost or game_over]), np.array([False]), info)

    rows = [(0, 3.0, 1, False, False), (1, 5.0, 1, False, False),  # env 1 scores on the side
            (0, 2.0, 2, True, False),  # env 0 loses a life: not a game
            (0, 0.0, 0, False, False),  # the reset step after it counts for nothing
            (0, -1.0, 1, False, True),  # game over: 3 + 2 - 1 over 3 steps
            (1, 1.0, 2, False, True)]  # env 1's game: 5 + 1 over 2 steps
    source, log = PoolSource(ScriptedPool(rows)), EpisodeLog()
    for _ in rows:
        log.add(source.recv())
    assert [(e.ret, e.length) for e in log.drain()] == [(4.0, 3), (6.0, 2)]
    assert log.env_steps == len(rows)


def test_policy_lag_is_exact_on_the_serial_twin():
    """Two halves of 8 envs alternate; each half's 8 unrolls of 8 steps make one batch.

    Half A's first batch trains at version 0 on version-0 steps (lag 0); B's, one round
    later, at version 1 (lag 1). From then on A's unroll starts with the step it took at
    version v (before its own batch was learned) and continues at v + 2, and it is learned
    at v + 2: lags 2, 0, ..., 0 (mean 2/8). B's starts at v + 1, continues at v + 2, and is
    learned at v + 3: lags 2, 1, ..., 1 (mean 9/8).
    """
    from seedpool.algos.impala import policy_act
    from seedpool.runners import ActingConfig, CentralSystem, make_pools

    torch.manual_seed(0)
    acting = ActingConfig(serial=True)
    pools = make_pools("CartPole-v1", 16, "serial", acting, seed=0)
    learner = ImpalaLearner(MLPActorCritic(4, 2, continuous=False),
                            ImpalaConfig(unroll_length=8, unrolls_per_batch=8))
    lags = []
    update = learner.update

    def update_and_record(unrolls):
        metrics = update(unrolls)
        lags.append((metrics["charts/policy_lag_mean"], metrics["charts/policy_lag_max"]))
        return metrics

    learner.update = update_and_record
    system = CentralSystem(pools, learner, policy_act, acting, unrolls_per_batch=8, unroll_length=8, device="cpu")
    try:
        system.start()
        while len(lags) < 6:
            system.step_serial()
    finally:
        system.close()
    assert lags == [(0.0, 0.0), (1.0, 1.0), (0.25, 2.0), (1.125, 2.0), (0.25, 2.0), (1.125, 2.0)]


def test_a_resumed_run_loads_the_learner_and_goes_on(tmp_path):
    cfg = small_cfg(tmp_path, total_timesteps=3_000, backend="serial")
    cfg.acting = dataclasses.replace(cfg.acting, serial=True)
    first = trainer.train_impala(cfg)
    before = load_checkpoint(first.run_dir / CHECKPOINT_FILE, "impala")
    target = before["counters"]["step"] + 3_000  # a window of the serial twin may overshoot a budget
    resumed = trainer.train_impala(dataclasses.replace(cfg, total_timesteps=target, resume=first.run_dir))
    after = load_checkpoint(resumed.run_dir / CHECKPOINT_FILE, "impala")
    assert resumed.run_dir == first.run_dir and resumed.step >= target
    assert after["counters"]["step"] >= target and after["counters"]["updates"] > before["counters"]["updates"]
    # The learner continued: its version, steps and Adam's step count went on from the checkpoint.
    assert after["learner"]["version"] > before["learner"]["version"] > 0
    assert after["learner"]["steps_trained"] > before["learner"]["steps_trained"]
    adam = [float(c["optimizer"]["state"][0]["step"]) for c in (before, after)]
    steps_per_update = cfg.impala.update_epochs * cfg.impala.num_minibatches
    assert adam[1] - adam[0] == (after["learner"]["version"] - before["learner"]["version"]) * steps_per_update
