"""Frame dedup: every row read back equals, bit for bit, the row a plain replay stores for the same steps."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from seedpool.replay import NStepWriter, PrioritizedReplay, UniformReplay
from test_replay import flatten, unflatten

K, FRAME = 3, (5, 4)
FIELDS = {
    "obs": ((K, *FRAME), np.uint8),
    "action": ((), np.int64),
    "reward": ((), np.float32),
    "discount": ((), np.float32),
    "next_obs": ((K, *FRAME), np.uint8),
}


class Envs:
    """Streams of stacked random frames; episodes of random length ending terminated or truncated.

    The action of every step is a unique id, so a row (named by its first step's action) can
    be found in the reference replay.
    """

    def __init__(self, streams: int, seed: int, max_len: int = 12) -> None:
        self.rng = np.random.default_rng(seed)
        self.max_len = max_len
        self.stack = [self._first() for _ in range(streams)]
        self.left = [self._length() for _ in range(streams)]
        self.next_id = 0

    def _first(self) -> np.ndarray:
        # Half the episodes start with one frame repeated, as Atari's frame stack does.
        if self.rng.random() < 0.5:
            return np.repeat(self._frame()[None], K, axis=0)
        return self.rng.integers(0, 256, (K, *FRAME), dtype=np.uint8)

    def _frame(self) -> np.ndarray:
        return self.rng.integers(0, 256, FRAME, dtype=np.uint8)

    def _length(self) -> int:
        return int(self.rng.integers(1, self.max_len + 1))

    def step(self, streams: np.ndarray) -> dict:
        """One step of each of ``streams``: the kwargs of NStepWriter.add."""
        b = len(streams)
        out = {"obs": np.empty((b, K, *FRAME), np.uint8), "next_obs": np.empty((b, K, *FRAME), np.uint8),
               "action": np.arange(self.next_id, self.next_id + b), "reward": self.rng.normal(size=b),
               "terminated": np.zeros(b, bool), "truncated": np.zeros(b, bool), "streams": streams}
        self.next_id += b
        for i, s in enumerate(streams):
            out["obs"][i] = self.stack[s]
            out["next_obs"][i] = np.concatenate([self.stack[s][1:], self._frame()[None]])
            self.left[s] -= 1
            if self.left[s] == 0:
                out["terminated" if self.rng.random() < 0.5 else "truncated"][i] = True
                self.stack[s], self.left[s] = self._first(), self._length()
            else:
                self.stack[s] = out["next_obs"][i]
        return out


def reference(n_step: int, gamma: float) -> tuple[UniformReplay, NStepWriter]:
    """A plain replay big enough to keep every row, and its writer."""
    ref = UniformReplay(20_000, FIELDS, seed=0)
    return ref, NStepWriter(ref, n_step, gamma)


def assert_rows_exact(rb, ref, rows: np.ndarray) -> None:
    """Rows ``rows`` of the dedup replay equal the reference rows with the same first action."""
    got = rb.storage.gather(rows)
    by_action = {a: i for i, a in enumerate(ref.storage.arrays["action"][: len(ref)])}
    idx = np.array([by_action[a] for a in got["action"]])
    want = ref.storage.gather(idx)
    for name in FIELDS:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def drive(rb, envs, n_calls: int, streams: int, stall: int | None, n_step=3, gamma=0.9, check_every=7):
    """Feed both replays the same steps (random subsets of streams; ``stall`` sleeps for long)."""
    ref, ref_writer = reference(n_step, gamma)
    writer = NStepWriter(rb, n_step, gamma)
    rng = np.random.default_rng(1)
    for call in range(n_calls):
        active = np.flatnonzero(rng.random(streams) < 0.7)
        if stall is not None and (call // 150) % 2 == 0:
            active = active[active != stall]  # the stalled stream sleeps for 150 calls at a time
        if not len(active):
            continue
        step = envs.step(rng.permutation(active))
        assert writer.add(**step) == ref_writer.add(**step)
        if call % check_every == 0:
            check(rb, ref)
    assert writer.flush() == ref_writer.flush()
    check(rb, ref)
    return ref


def test_steps_of_a_stream_several_times_in_one_call_are_the_same_rows():
    """Frame dedup takes a whole unroll at once (streams repeated, in time order) like one step per call."""
    rb = PrioritizedReplay(48, FIELDS, seed=0, frame_dedup=True, frame_capacity=90, reuse_window=20)
    ref, ref_writer = reference(3, 0.9)
    writer = NStepWriter(rb, 3, 0.9)
    envs, rng = Envs(4, seed=5), np.random.default_rng(3)
    for call in range(60):
        steps = [envs.step(rng.permutation(4)) for _ in range(int(rng.integers(1, 6)))]
        for step in steps:
            ref_writer.add(**step)
        joined = {k: np.concatenate([s[k] for s in steps]) for k in steps[0]}
        writer.add(**joined)
        if call % 5 == 0:
            check(rb, ref)
    assert writer.flush() == ref_writer.flush()
    check(rb, ref)


def check(rb, ref) -> None:
    """Live rows are exact and are the newest rows; evicted rows have no mass; samples are exact."""
    live = rb.storage.live_rows()
    assert len(live) == len(rb) and (len(rb) == 0) == (len(ref) == 0)
    if not len(rb):
        return
    assert_rows_exact(rb, ref, live)
    # The live rows are the newest rows written, oldest first.
    newest = ref.storage.arrays["action"][len(ref) - len(rb) : len(ref)]
    np.testing.assert_array_equal(rb.storage.gather(live)["action"], newest)
    if isinstance(rb, PrioritizedReplay):
        dead = np.setdiff1d(np.arange(rb.storage.written), live)
        assert (rb.priorities(dead) == 0).all()
    s = rb.sample(16)
    assert_rows_exact(rb, ref, s["indices"])


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
def test_round_trip_exact_through_wraps_and_episode_ends(kind):
    rb = kind(48, FIELDS, seed=0, frame_dedup=True, frame_capacity=90, reuse_window=20)
    ref = drive(rb, Envs(5, seed=2), 400, 5, stall=None)
    assert rb.storage.g > 5 * rb.storage.frame_capacity  # the frame ring wrapped several times
    assert len(ref) > 5 * rb.capacity  # so did the row ring


def test_round_trip_exact_with_a_stalled_stream_and_n_step_1():
    rb = PrioritizedReplay(40, FIELDS, seed=0, frame_dedup=True, frame_capacity=80, reuse_window=16)
    envs = Envs(4, seed=3, max_len=40)
    drive(rb, envs, 700, 4, stall=2, n_step=1)


def test_round_trip_exact_with_long_rows():
    rb = PrioritizedReplay(64, FIELDS, seed=0, frame_dedup=True, frame_capacity=160, reuse_window=40)
    drive(rb, Envs(3, seed=4, max_len=20), 300, 3, stall=1, n_step=6, gamma=0.97)


def test_each_frame_is_stored_once_when_no_stream_stalls():
    rb = PrioritizedReplay(1000, FIELDS, seed=0, frame_dedup=True)
    writer = NStepWriter(rb, 3, 0.9)
    envs = Envs(4, seed=5)
    episodes = 4  # the first episode of each stream
    for _ in range(60):
        step = envs.step(np.arange(4))
        writer.add(**step)
        episodes += int((step["terminated"] | step["truncated"]).sum())
    writer.flush()
    steps = 60 * 4
    # K frames per episode's first observation, then one new frame per step.
    assert rb.storage.g == steps + K * (episodes - (writer.t[:4] == 0).sum())


def test_memory_is_under_a_third_of_plain_storage():
    atari = {**FIELDS, "obs": ((4, 84, 84), np.uint8), "next_obs": ((4, 84, 84), np.uint8)}
    rb = PrioritizedReplay(100_000, atari, frame_dedup=True)  # np.empty: nothing touched
    plain = 100_000 * (2 * 4 * 84 * 84 + 8 + 4 + 4)
    assert rb.storage.nbytes() / plain <= 0.35
    assert rb.storage.nbytes() / plain < 0.25


def test_frame_contract_violations_raise_and_change_nothing():
    rb = PrioritizedReplay(40, FIELDS, seed=0, frame_dedup=True)
    writer = NStepWriter(rb, 2, 0.9)
    envs = Envs(2, seed=6, max_len=50)
    for _ in range(5):
        writer.add(**envs.step(np.arange(2)))
    before = copy.deepcopy(rb.state_dict())
    good = envs.step(np.arange(2))
    bad = copy.deepcopy(good)
    bad["next_obs"][1, -2] += 1  # not shifted by one frame
    with pytest.raises(ValueError, match="shifting by one"):
        writer.add(**bad)
    bad = copy.deepcopy(good)
    bad["streams"] = np.array([1, 0])  # rows sent to the wrong streams
    with pytest.raises(ValueError, match="time order per stream"):
        writer.add(**bad)
    after = rb.state_dict()
    np.testing.assert_array_equal(before["storage"]["frames"], after["storage"]["frames"])
    assert before["storage"]["rows"]["head"] == after["storage"]["rows"]["head"]
    writer.add(**good)  # the writer's own state was untouched too: the good step still fits


def test_direct_add_is_refused():
    rb = PrioritizedReplay(10, FIELDS, frame_dedup=True)
    row = {name: np.zeros((1, *shape), dtype) for name, (shape, dtype) in FIELDS.items()}
    with pytest.raises(TypeError, match="NStepWriter"):
        rb.add(**row)
    with pytest.raises(ValueError, match="next_obs"):
        PrioritizedReplay(10, {"obs": ((K, *FRAME), np.uint8)}, frame_dedup=True)


def test_updates_of_evicted_rows_are_skipped():
    # Rows outlive the frame ring's reach (40 frames), not the row ring's (100 rows).
    rb = PrioritizedReplay(100, FIELDS, seed=0, frame_dedup=True, frame_capacity=50, reuse_window=10)
    writer = NStepWriter(rb, 2, 0.9)
    envs = Envs(3, seed=7)
    for _ in range(10):
        writer.add(**envs.step(np.arange(3)))
    s = rb.sample(20)
    for _ in range(20):
        writer.add(**envs.step(np.arange(3)))
    live = set(rb.storage.live_rows().tolist())
    gone = np.array([i for i in s["indices"] if i not in live])
    assert len(gone)  # the frame ring evicted some sampled rows
    rb.update_priorities(gone, np.full(len(gone), 5.0))
    assert (rb.priorities(gone) == 0).all()
    with pytest.raises(IndexError):
        rb.update_priorities([rb.storage.written], [1.0])


def test_state_dict_round_trip_then_the_same_writer_goes_on(tmp_path):
    def dedup(seed):
        return PrioritizedReplay(40, FIELDS, seed=seed, frame_dedup=True, frame_capacity=90, reuse_window=20)

    rb, envs = dedup(0), Envs(3, seed=8)
    ref, ref_writer = reference(3, 0.9)
    writer = NStepWriter(rb, 3, 0.9)

    def run(calls):
        for _ in range(calls):
            step = envs.step(np.arange(3))
            writer.add(**step)
            ref_writer.add(**step)

    run(40)
    state = copy.deepcopy(rb.state_dict())
    run(30)
    # Back to the checkpoint: the ring slots the writer remembers now hold other frames; its
    # pending rows must copy their frames again rather than trust those slots.
    rb.load_state_dict(state)
    run(30)
    writer.flush()
    ref_writer.flush()
    assert_rows_exact(rb, ref, rb.storage.live_rows())
    a, b = dedup(1), dedup(2)
    a.load_state_dict(state)
    np.savez(tmp_path / "replay.npz", **flatten(state))  # as a trainer saves it: no pickle
    with np.load(tmp_path / "replay.npz", allow_pickle=False) as data:
        b.load_state_dict(unflatten(data))
    assert_rows_exact(a, ref, a.storage.live_rows())
    sa, sb = a.sample(8), b.sample(8)
    for name in sa:
        np.testing.assert_array_equal(sa[name], sb[name])
