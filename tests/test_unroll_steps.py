"""UnrollSteps: unrolls cut by the inference server's buffers -> each env's transitions, in order."""
import numpy as np
import pytest

from seedpool.algos.unroll_steps import UnrollSteps
from seedpool.inference.unrolls import TrajectoryBuffers
from seedpool.records import concat_unrolls


def simulate(num_slots=3, T=4, rounds=40, seed=0, aux=True):
    """Drive TrajectoryBuffers like the server does, with envs that end episodes at random.

    Returns the emitted unrolls and the true transitions per slot (next_step autoreset:
    the step after an end is a reset whose action is ignored)."""
    rng = np.random.default_rng(seed)
    bufs = TrajectoryBuffers(num_slots, T, (1,), np.float32, aux_size=2 if aux else 0)
    counter = 0
    last = {}  # slot -> (obs, action, q) of its pending step
    truth = {s: [] for s in range(num_slots)}
    unrolls = []
    reward = np.zeros(num_slots, np.float32)
    term = np.zeros(num_slots, bool)
    trunc = np.zeros(num_slots, bool)
    for _ in range(rounds):
        slots = np.arange(num_slots)
        obs = np.zeros((num_slots, 1), np.float32)
        for s in slots:
            counter += 1
            obs[s, 0] = counter
        done, first = bufs.observe(slots, obs, reward, term, trunc, np.zeros(num_slots, bool))
        if done is not None:
            unrolls.append(done)
        for s in slots:
            if s in last:
                o, a, q = last.pop(s)
                truth[s].append((o, a, float(reward[s]), bool(term[s]), bool(trunc[s]), obs[s, 0], q, obs[s, 0] * 100))
        actions = rng.integers(0, 5, num_slots)
        q = obs[:, 0] * 10
        bufs.record_action(slots, actions, np.zeros(num_slots, np.float32), 0,
                           np.stack([q, obs[:, 0] * 100], 1) if aux else None)
        ended = term | trunc
        for s in slots:
            if not ended[s]:  # a final observation's action is ignored: no transition
                last[s] = (obs[s, 0], int(actions[s]), float(q[s]))
        reward = rng.normal(size=num_slots).astype(np.float32)
        u = rng.random(num_slots)
        term = (u < 0.15) & ~ended
        trunc = (u > 0.9) & ~ended
    return unrolls, truth


@pytest.mark.parametrize("aux", [True, False])
def test_every_valid_step_comes_out_once_in_order(aux):
    unrolls, truth = simulate(aux=aux)
    steps = UnrollSteps()
    got = {s: [] for s in truth}
    # Two unrolls of one slot in one batch must still come out in time order.
    batches = [concat_unrolls(unrolls[i:i + 3]) for i in range(0, len(unrolls), 3)]
    for batch in batches:
        for step in steps(batch):
            for i, s in enumerate(step["streams"]):
                row = (step["obs"][i, 0], int(step["action"][i]), float(step["reward"][i]),
                       bool(step["terminated"][i]), bool(step["truncated"][i]), step["next_obs"][i, 0])
                if aux:
                    row += (float(step["q_value"][i]), float(step["next_value"][i]))
                got[int(s)].append(row)
    for s, rows in got.items():
        assert len(rows) > 10
        want = [t if aux else t[:6] for t in truth[s][:len(rows)]]
        assert rows == want
        # Everything the unrolls covered came out, except (with aux) each env's held last step.
        assert len(truth[s]) - len(rows) <= 4 + 1
    if aux:
        assert steps.pending() == len(truth)


def test_a_restarted_env_cuts_the_held_step_as_truncated():
    bufs = TrajectoryBuffers(1, 2, (1,), np.float32, aux_size=2)
    steps = UnrollSteps()
    z, f = np.zeros(1, np.float32), np.zeros(1, bool)
    out = []
    for k in range(3):
        done, _ = bufs.observe(np.array([0]), np.full((1, 1), k, np.float32), z, f, f, f)
        out += [done] if done is not None else []
        bufs.record_action(np.array([0]), np.array([1]), z, 0, np.array([[k * 10.0, k * 100.0]], np.float32))
    assert len(out) == 1 and not list(steps(out[0]))[-1]["truncated"].any()  # last step held back
    assert steps.pending() == 1
    # The worker dies: the env restarts; its next unroll opens with a restarted row.
    for k in range(3, 6):
        restarted = np.array([k == 3])
        done, _ = bufs.observe(np.array([0]), np.full((1, 1), k, np.float32), z, f, f, restarted)
        out += [done] if done is not None else []
        bufs.record_action(np.array([0]), np.array([1]), z, 0, np.array([[k * 10.0, k * 100.0]], np.float32))
    released = next(iter(steps(out[1])))
    assert released["obs"][0, 0] == 1 and released["truncated"][0] and not released["terminated"][0]
