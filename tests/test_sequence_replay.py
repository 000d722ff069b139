"""Sequence replay (R2D2): how streams are cut, the state stored, priorities, frame dedup, bad input."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from seedpool.records import Unrolls
from seedpool.replay.sequence import SequenceReplay, sequence_priority
from seedpool.replay.sequence_writer import SequenceWriter

L, OVERLAP = 8, 4
STATE = {"h": 3, "c": 3}


def make_replay(capacity=64, obs=((2,), np.float32), **kw) -> SequenceReplay:
    return SequenceReplay(capacity, obs, ((), np.int64), STATE, length=L, seed=0, **kw)


def episodes_unrolls(lengths_per_env: list[list[int]], T: int, truncate_last: bool = False):
    """Unrolls of several envs whose episodes have the given lengths, in chunks of T steps.

    obs encode (env, episode, time) as [env * 1000 + episode, t]; the entering state of a step
    encodes the same, so every stored value can be traced back. The engine's next_step
    autoreset is reproduced: after an episode's last step comes one invalid (reset) step.
    """
    per_env = []
    for env, lengths in enumerate(lengths_per_env):
        rows = []  # (obs, action, reward, term, trunc, valid, first, next_obs)
        for ep, n in enumerate(lengths):
            for t in range(n):
                last = t == n - 1
                rows.append(dict(obs=[env * 1000 + ep, t], action=(env + ep + t) % 2, reward=float(t),
                                 term=last and not (truncate_last and ep == len(lengths) - 1), trunc=last and truncate_last
                                 and ep == len(lengths) - 1, valid=True, first=t == 0))
            rows.append(dict(obs=[env * 1000 + ep, n], action=0, reward=0.0, term=False, trunc=False, valid=False,
                             first=False))  # the final observation; its step is the reset
        per_env.append(rows)
    steps = max(len(r) for r in per_env)
    steps = -(-steps // T) * T
    out = []
    for start in range(0, steps, T):
        B = len(per_env)
        obs = np.full((T + 1, B, 2), -1, np.float32)
        u = dict(actions=np.zeros((T, B), np.int64), rewards=np.zeros((T, B), np.float32),
                 terminated=np.zeros((T, B), bool), truncated=np.zeros((T, B), bool), valid=np.zeros((T, B), bool),
                 first=np.zeros((T, B), bool), aux=np.zeros((T, B, 6), np.float32))
        for b, rows in enumerate(per_env):
            for t in range(T + 1):
                i = start + t
                if i >= len(rows):
                    continue
                r = rows[i]
                obs[t, b] = r["obs"]
                if t == T:
                    continue
                u["actions"][t, b], u["rewards"][t, b] = r["action"], r["reward"]
                u["terminated"][t, b], u["truncated"][t, b], u["valid"][t, b] = r["term"], r["trunc"], r["valid"]
                u["first"][t, b] = r["first"]
                u["aux"][t, b] = np.repeat(r["obs"], 3)
        out.append(Unrolls(obs=obs, logp=np.zeros((T, B), np.float32), versions=np.zeros((T, B), np.int64),
                           slots=np.arange(B), **u))
    return out


def all_rows(rb: SequenceReplay) -> dict:
    """Every live sequence, oldest first."""
    storage = rb._rows.storage
    rows = storage.live_rows()
    out = storage.gather(rows)
    return {k: v for k, v in out.items()}


def test_writer_cuts_overlapping_sequences_padded_at_episode_end():
    rb = make_replay()
    w = SequenceWriter(rb, OVERLAP)
    # One env: episodes of 3, 8, 14 and 16 steps.
    for u in episodes_unrolls([[3, 8, 14, 16]], T=5):
        w.add(u)
    rows = all_rows(rb)
    # Expected (episode, start, valid steps): starts every 4 steps; at an episode's end only
    # the open sequence that covers its last steps is written.
    want = [(0, 0, 3), (1, 0, 8), (2, 0, 8), (2, 4, 8), (2, 8, 6), (3, 0, 8), (3, 4, 8), (3, 8, 8)]
    assert len(rb) == len(want)
    for i, (ep, start, n) in enumerate(want):
        mask = rows["mask"][i]
        assert mask.tolist() == [True] * n + [False] * (L - n)
        # obs[0..n] are the episode's observations start..start+n (obs[n]: final or bootstrap), padding 0 after.
        np.testing.assert_array_equal(rows["obs"][i, : n + 1, 0], ep)
        np.testing.assert_array_equal(rows["obs"][i, : n + 1, 1], np.arange(start, start + n + 1))
        assert not rows["obs"][i, n + 1:].any()
        np.testing.assert_array_equal(rows["reward"][i, :n], np.arange(start, start + n))
        assert rows["first"][i].tolist() == [start == 0] + [False] * L
        # The stored state is the one entering obs[0].
        np.testing.assert_array_equal(rows["state.h"][i], [ep, ep, ep])
        np.testing.assert_array_equal(rows["state.c"][i], [start] * 3)
        ep_len = [3, 8, 14, 16][ep]
        assert rows["terminated"][i].tolist() == [start + t == ep_len - 1 for t in range(n)] + [False] * (L - n)


def test_truncated_episode_keeps_its_final_observation_as_bootstrap():
    rb = make_replay()
    w = SequenceWriter(rb, OVERLAP)
    for u in episodes_unrolls([[5]], T=4, truncate_last=True):
        w.add(u)
    rows = all_rows(rb)
    assert len(rb) == 1
    assert not rows["terminated"][0].any()
    assert rows["mask"][0].sum() == 5
    np.testing.assert_array_equal(rows["obs"][0, 5], [0, 5])  # the final observation


def test_sequences_never_mix_envs():
    rb = make_replay(capacity=256)
    w = SequenceWriter(rb, OVERLAP)
    rng = np.random.default_rng(3)
    lengths = [list(rng.integers(1, 30, 6)) for _ in range(5)]
    for u in episodes_unrolls(lengths, T=7):
        w.add(u)
    rows = all_rows(rb)
    for i in range(len(rb)):
        n = rows["mask"][i].sum()
        ids = rows["obs"][i, : n + 1, 0]
        assert (ids == ids[0]).all(), "a sequence holds steps of two envs or episodes"
        np.testing.assert_array_equal(np.diff(rows["obs"][i, : n + 1, 1]), 1)
        np.testing.assert_array_equal(rows["state.h"][i], [ids[0]] * 3)
    # Every step of every episode is in some sequence.
    covered = {(int(a), int(t)) for i in range(len(rb)) for a, t in rows["obs"][i, : rows["mask"][i].sum()]}
    assert covered == {(env * 1000 + ep, t) for env, ls in enumerate(lengths) for ep, n in enumerate(ls)
                       for t in range(n)}


def test_restarted_env_cuts_its_open_episode():
    rb = make_replay()
    w = SequenceWriter(rb, OVERLAP)
    u = episodes_unrolls([[12]], T=12)[0]
    u.first[6, 0] = True  # the env restarted here (worker died): steps 0..5 are one piece
    w.add(u)
    rows = all_rows(rb)
    assert rows["mask"][0].sum() == 6 and not rows["terminated"][0].any()
    np.testing.assert_array_equal(rows["obs"][0, 6], [0, 6])  # bootstrap from the last observation seen
    # What follows is a new piece that starts from a reset state.
    assert len(rb) == 2 and rows["first"][1, 0] and rows["mask"][1].sum() == 6
    np.testing.assert_array_equal(rows["obs"][1, :7, 1], np.arange(6, 13))


def test_writer_needs_the_entering_state():
    w = SequenceWriter(make_replay(), OVERLAP)
    u = episodes_unrolls([[3]], T=4)[0]
    u.aux = None
    with pytest.raises(ValueError, match="recurrent state entering each step"):
        w.add(u)
    with pytest.raises(ValueError, match="overlap"):
        SequenceWriter(make_replay(), L)


def test_sequence_priority_matches_naive():
    rng = np.random.default_rng(0)
    td = rng.standard_normal((5, 7))
    mask = rng.random((5, 7)) < 0.6
    mask[0] = False
    got = sequence_priority(np.abs(td), mask, 0.9)
    for i in range(5):
        vals = np.abs(td[i][mask[i]])
        want = 0.0 if vals.size == 0 else 0.9 * vals.max() + 0.1 * vals.mean()
        assert got[i] == pytest.approx(want)


def test_priorities_steer_sampling():
    rb = make_replay()
    w = SequenceWriter(rb, OVERLAP)
    for u in episodes_unrolls([[8] * 4], T=8):
        w.add(u)
    assert len(rb) == 4
    rb.update_priorities(np.arange(4), [0.0, 0.0, 10.0, 0.0])
    batch = rb.sample(64)
    assert (batch["indices"] == 2).mean() > 0.9
    assert batch["state"]["h"].shape == (64, 3) and batch["obs"].shape == (64, L + 1, 2)
    with pytest.raises(ValueError, match="finite"):
        rb.update_priorities([0], [np.nan])


def _stack_obs(n: int, seed: int, K: int = 3) -> np.ndarray:
    """``[n, L + 1, K, 4, 4]`` uint8 frame stacks that shift by one frame per step."""
    frames = np.random.default_rng(seed).integers(0, 255, (n, L + K, 4, 4), dtype=np.uint8)
    return np.stack([frames[:, t:t + K] for t in range(L + 1)], axis=1)


def _seq_fields(n: int, obs: np.ndarray, valid: int = L) -> dict:
    mask = np.zeros((n, L), bool)
    mask[:, :valid] = True
    return dict(obs=obs, action=np.zeros((n, L), np.int64), reward=np.ones((n, L), np.float32),
                terminated=np.zeros((n, L), bool), mask=mask, first=np.zeros((n, L + 1), bool),
                state={"h": np.ones((n, 3), np.float32), "c": np.zeros((n, 3), np.float32)})


def test_frame_dedup_gives_back_the_same_sequences():
    field = ((3, 4, 4), np.uint8)
    plain, dedup = make_replay(obs=field), make_replay(obs=field, frame_dedup=True)
    obs = _stack_obs(10, 0)
    for rb in (plain, dedup):
        rb.add(**_seq_fields(10, obs))
    a, b = plain.sample(16), dedup.sample(16)
    np.testing.assert_array_equal(a["indices"], b["indices"])
    np.testing.assert_array_equal(a["obs"], b["obs"])
    assert b["obs"].shape == (16, L + 1, 3, 4, 4)
    # Each row keeps its L + K distinct frames instead of (L + 1) K.
    frames, stacks = dedup._rows.storage.arrays["frames"], plain._rows.storage.arrays["obs"]
    assert frames.nbytes * (L + 1) * 3 == stacks.nbytes * (L + 3)


def test_frame_dedup_refuses_stacks_that_do_not_shift():
    rb = make_replay(obs=((3, 4, 4), np.uint8), frame_dedup=True)
    obs = _stack_obs(2, 1)
    obs[1, 5, 0] += 1  # obs[5] no longer shares its first frame with obs[4]
    with pytest.raises(ValueError, match=r"sequence 1: obs\[5\] is not obs\[4\] shifted"):
        rb.add(**_seq_fields(2, obs))
    assert len(rb) == 0
    # Padding after the valid steps is not checked (it is never read).
    rb.add(**_seq_fields(2, obs, valid=3))
    assert len(rb) == 2


@pytest.mark.parametrize("bad, match", [
    (dict(obs=np.zeros((2, L, 2), np.float32)), "field 'obs': expected shape"),
    (dict(mask=np.array([[True, False, True] + [False] * (L - 3)] * 2)), "all valid steps first"),
    (dict(mask=np.zeros((2, L), bool)), "at least one valid step"),
    (dict(mask=np.ones((2, L), np.int64)), "field 'mask': expected bool"),
    (dict(state={"h": np.zeros((2, 4), np.float32), "c": np.zeros((2, 3), np.float32)}), "state.h"),
    (dict(state={"h": np.zeros((2, 3), np.float32)}), "missing"),
    (dict(reward=np.zeros((3, L), np.float32)), "ragged batch"),
    (dict(priorities=[1.0, np.inf]), "finite"),
])
def test_bad_input_is_refused_before_anything_is_written(bad, match):
    rb = make_replay()
    rb.add(**_seq_fields(1, np.zeros((1, L + 1, 2), np.float32)))
    before = copy.deepcopy(rb.state_dict())
    fields = {**_seq_fields(2, np.zeros((2, L + 1, 2), np.float32)), **bad}
    with pytest.raises((ValueError, TypeError), match=match):
        rb.add(**fields)
    after = rb.state_dict()
    assert len(rb) == 1
    np.testing.assert_array_equal(before["rows"]["sampler"]["leaves"], after["rows"]["sampler"]["leaves"])


def test_state_dict_round_trip_and_mismatch():
    rb = make_replay()
    rb.add(**_seq_fields(3, np.random.default_rng(0).standard_normal((3, L + 1, 2)).astype(np.float32)))
    rb.update_priorities([0, 1, 2], [1.0, 2.0, 3.0])
    other = make_replay()
    other.load_state_dict(copy.deepcopy(rb.state_dict()))
    a, b = rb.sample(8), other.sample(8)
    for k in ("obs", "indices", "weights"):
        np.testing.assert_array_equal(a[k], b[k])
    with pytest.raises(ValueError, match="does not match"):
        SequenceReplay(64, ((2,), np.float32), ((), np.int64), STATE, length=L + 1).load_state_dict(rb.state_dict())
