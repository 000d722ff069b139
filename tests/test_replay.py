"""Sum tree against brute force; PrioritizedReplay / UniformReplay semantics and their bad-input contract."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from seedpool.replay import PrioritizedReplay, SumTree, UniformReplay
from seedpool.replay.streaming import MIN_BYTES, stream_copy

FIELDS = {"obs": ((2, 3), np.uint8), "action": ((), np.int64), "reward": ((), np.float32), "done": ((), np.bool_)}


def batch(b: int, start: int = 0) -> dict:
    """B rows whose action is their global row number (so rows can be recognised later)."""
    ids = np.arange(start, start + b)
    return {
        "obs": (ids[:, None, None] + np.arange(6).reshape(2, 3)).astype(np.uint8),
        "action": ids,
        "reward": ids.astype(np.float32) / 2,
        "done": ids % 3 == 0,
    }


def brute_find(leaves: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """First leaf whose running sum exceeds the target."""
    return np.searchsorted(np.cumsum(leaves), targets, side="right")


def snapshot(rb) -> dict:
    """Everything a replay holds, deep-copied (arrays, counters, priorities, generator state)."""
    return copy.deepcopy(rb.state_dict())


def assert_same_state(a: dict, b: dict) -> None:
    """Two snapshots are identical, arrays bit for bit."""
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], dict):
            assert_same_state(a[k], b[k])
        elif isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            assert a[k].dtype == b[k].dtype
        else:
            assert a[k] == b[k], k


# ---------------------------------------------------------------- sum tree


@pytest.mark.parametrize("capacity", [1, 7, 8, 9, 64, 65, 1000, 4099])
def test_sum_tree_prefix_search_matches_brute_force(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    # Integer leaves make every sum exact, so boundaries can be tested exactly too.
    leaves = rng.integers(0, 4, capacity).astype(np.float64)
    leaves[rng.integers(0, capacity)] = 1.0  # at least one positive leaf
    tree.set(np.arange(capacity), leaves)
    assert tree.total == leaves.sum()
    bounds = np.cumsum(leaves)[:-1]
    targets = np.concatenate([rng.random(500) * leaves.sum(), bounds[bounds < leaves.sum()], [0.0]])
    got = tree.find(targets)
    np.testing.assert_array_equal(got, brute_find(leaves, targets))
    assert (leaves[got] > 0).all()


def test_sum_tree_never_returns_an_empty_leaf_past_the_total():
    tree = SumTree(20)
    leaves = np.zeros(20)
    leaves[[3, 11]] = [0.5, 0.25]
    tree.set(np.arange(20), leaves)
    # Rounding can push a target to (or past) the total: the last non-empty leaf, not leaf 19.
    got = tree.find(np.array([0.75, 0.75 + 1e-12, 10.0, 0.5]))
    np.testing.assert_array_equal(got, [11, 11, 11, 11])


def test_sum_tree_has_no_drift_after_many_updates():
    rng = np.random.default_rng(0)
    n = 3000
    tree = SumTree(n)
    for _ in range(400):
        idx = rng.integers(0, n, 256)
        tree.set(idx, rng.random(256) * 10 ** rng.uniform(-6, 3))
    leaves = np.array(tree.leaves)
    fresh = SumTree(n)
    fresh.load_leaves(leaves)
    np.testing.assert_array_equal(tree.tree, fresh.tree)  # internal nodes are exact sums, bit for bit
    assert tree.total == pytest.approx(math.fsum(leaves), rel=1e-12)


def test_sum_tree_duplicate_indices_last_value_wins():
    tree = SumTree(10)
    tree.set(np.array([2, 5, 2]), np.array([1.0, 2.0, 7.0]))
    assert tree.leaves[2] == 7.0 and tree.total == 9.0


@pytest.mark.parametrize("offset", [0, 1, 7, 31])
@pytest.mark.parametrize("extra", [0, 1, 33, 4097])
def test_stream_copy_is_exact_at_any_alignment_and_length(offset, extra):
    rng = np.random.default_rng(offset * 10_000 + extra)
    n = MIN_BYTES + extra  # large enough for the streaming path
    src = rng.integers(0, 256, n + offset, dtype=np.uint8)[offset:]
    big = np.zeros(n + 200, np.uint8)
    stream_copy(big[offset + 50 : offset + 50 + n], src)
    np.testing.assert_array_equal(big[offset + 50 : offset + 50 + n], src)
    assert not big[: offset + 50].any() and not big[offset + 50 + n :].any()  # nothing outside


def test_stream_copy_small_and_typed_arrays():
    src = np.arange(12.0).reshape(3, 4)
    dst = np.zeros((3, 4))
    stream_copy(dst, src)
    np.testing.assert_array_equal(dst, src)
    with pytest.raises(ValueError):
        stream_copy(np.zeros(3), np.zeros(4))


# ---------------------------------------------------------------- prioritized sampling


def filled(capacity=40, n=40, alpha=0.6, seed=0) -> PrioritizedReplay:
    """A prioritized replay with ``n`` rows and distinct priorities 0..n-1."""
    rb = PrioritizedReplay(capacity, FIELDS, alpha=alpha, seed=seed)
    rows = rb.add(**batch(n))
    rb.update_priorities(rows, np.arange(n, dtype=np.float64))
    return rb


def test_stratified_counts_are_within_two_of_expected():
    # Each of the n segments of the total mass gives exactly one draw, so a row owning a
    # fraction P of the mass is drawn n*P times up to less than 2, whatever the seed.
    rb = filled()
    p = (np.arange(40) + rb._sampler.eps) ** 0.6
    p /= p.sum()
    for n in (40, 333, 2048):
        counts = np.bincount(rb.sample(n)["indices"], minlength=40)
        assert np.all(np.abs(counts - n * p) < 2), (n, counts - n * p)


def test_sampling_frequencies_pass_chi_square():
    rb = filled(alpha=0.8, seed=3)
    p = (np.arange(40) + 1e-6) ** 0.8
    p /= p.sum()
    counts = np.zeros(40)
    for _ in range(400):
        counts += np.bincount(rb.sample(32)["indices"], minlength=40)
    expected = counts.sum() * p
    keep = expected > 5
    stat = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stat < 72.0  # chi-square 0.999 quantile for 38 degrees of freedom is ~70.7
    assert counts[0] == 0 or counts[0] < 3  # priority 0 (+eps) is practically never drawn


def test_importance_weights_follow_the_formula():
    rb = filled(alpha=0.7)
    beta = 0.4
    s = rb.sample(64, beta=beta)
    leaves = rb.priorities(np.arange(40))
    prob = leaves[s["indices"]] / leaves.sum()
    want = (len(rb) * prob) ** -beta
    want /= want.max()  # normalised by the max over the sampled batch
    assert s["weights"].dtype == np.float32 and s["indices"].dtype == np.int64
    np.testing.assert_allclose(s["weights"], want, rtol=1e-6)
    assert s["weights"].max() == 1.0


def test_samples_return_the_stored_rows():
    rb = filled()
    s = rb.sample(100)
    want = batch(40)
    for name in FIELDS:
        np.testing.assert_array_equal(s[name], want[name][s["indices"]])
        assert s[name].shape == (100, *np.shape(want[name])[1:])


def test_new_rows_enter_at_the_max_priority_so_far():
    rb = PrioritizedReplay(10, FIELDS, alpha=0.5, eps=1e-6, seed=0)
    rows = rb.add(**batch(3))
    np.testing.assert_allclose(rb.priorities(rows), 1.0)  # initially 1.0
    rb.update_priorities(rows[:1], [8.0])
    rb.update_priorities(rows[1:], [0.5, 0.1])  # a lower update does not lower the max
    new = rb.add(**batch(2, 3))
    np.testing.assert_allclose(rb.priorities(new), (8.0 + 1e-6) ** 0.5)
    assert rb.max_priority == pytest.approx(8.0 + 1e-6)
    given = rb.add(priorities=[20.0, 0.0], **batch(2, 5))  # explicit initial priorities
    np.testing.assert_allclose(rb.priorities(given), [(20.0 + 1e-6) ** 0.5, 1e-6**0.5])
    assert rb.max_priority == pytest.approx(20.0 + 1e-6)


def test_oldest_rows_are_overwritten_when_full():
    rb = PrioritizedReplay(5, FIELDS, seed=0)
    np.testing.assert_array_equal(rb.add(**batch(3)), [0, 1, 2])
    rb.update_priorities([0, 1, 2], [5.0, 5.0, 5.0])
    np.testing.assert_array_equal(rb.add(**batch(4, 3)), [3, 4, 0, 1])
    assert len(rb) == 5 and rb.capacity == 5
    stored = rb.storage.gather(np.arange(5))["action"]
    np.testing.assert_array_equal(stored, [5, 6, 2, 3, 4])  # rows 0 and 1 now hold the newest data
    seen = set()
    for _ in range(50):
        seen |= set(rb.sample(8)["action"].tolist())
    assert seen == {2, 3, 4, 5, 6}


def test_alpha_zero_is_uniform_and_weights_are_one():
    rb = filled(alpha=0.0)
    s = rb.sample(400)
    np.testing.assert_array_equal(np.bincount(s["indices"], minlength=40), 10)
    np.testing.assert_array_equal(s["weights"], 1.0)


def test_same_seed_same_samples():
    a, b = filled(seed=5), filled(seed=5)
    for _ in range(3):
        np.testing.assert_array_equal(a.sample(16)["indices"], b.sample(16)["indices"])


# ---------------------------------------------------------------- bad input


BAD_ADDS = [
    ("missing field", lambda d: d.pop("done"), ValueError),
    ("unknown field", lambda d: d.update(extra=np.zeros(4)), ValueError),
    ("mis-shaped obs", lambda d: d.update(obs=np.zeros((4, 3, 2), np.uint8)), ValueError),
    ("scalar for a vector field", lambda d: d.update(reward=1.0), ValueError),
    ("ragged batch", lambda d: d.update(reward=np.zeros(3, np.float32)), ValueError),
    ("float obs into uint8", lambda d: d.update(obs=np.zeros((4, 2, 3), np.float32)), TypeError),
    ("int too large for uint8", lambda d: d.update(obs=np.full((4, 2, 3), 300)), ValueError),
    ("float action into int64", lambda d: d.update(action=np.zeros(4)), TypeError),
    ("negative priority", lambda d: d.update(priorities=[1.0, -1.0, 1.0, 1.0]), ValueError),
    ("nan priority", lambda d: d.update(priorities=[1.0, np.nan, 1.0, 1.0]), ValueError),
    ("inf priority", lambda d: d.update(priorities=[1.0, np.inf, 1.0, 1.0]), ValueError),
    ("wrong-length priorities", lambda d: d.update(priorities=[1.0, 1.0]), ValueError),
]

BAD_UPDATES = [
    ("negative", [0, 1], [1.0, -0.5], ValueError),
    ("nan", [0, 1], [np.nan, 1.0], ValueError),
    ("inf", [0, 1], [1.0, np.inf], ValueError),
    ("wrong length", [0, 1, 2], [1.0, 1.0], ValueError),
    ("2-D", [[0, 1]], [[1.0, 1.0]], ValueError),
    ("index >= len", [0, 6], [1.0, 1.0], IndexError),
    ("index never written", [0, 9], [1.0, 1.0], IndexError),
    ("negative index", [-1, 0], [1.0, 1.0], IndexError),
    ("float index", [0.0, 1.0], [1.0, 1.0], IndexError),
]


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
@pytest.mark.parametrize("name,mutate,error", BAD_ADDS, ids=[c[0] for c in BAD_ADDS])
def test_bad_add_raises_and_changes_nothing(kind, name, mutate, error):
    rb = kind(10, FIELDS, seed=0)
    rb.add(**batch(6))
    before = snapshot(rb)
    bad = batch(4, 6)
    mutate(bad)
    with pytest.raises(error) as info:
        rb.add(**bad)
    assert "expected" in str(info.value) or "got" in str(info.value) or "cannot cast" in str(info.value)
    assert_same_state(before, snapshot(rb))
    assert len(rb) == 6


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
@pytest.mark.parametrize("name,idx,prio,error", BAD_UPDATES, ids=[c[0] for c in BAD_UPDATES])
def test_bad_update_raises_and_changes_nothing(kind, name, idx, prio, error):
    rb = kind(10, FIELDS, seed=0)
    rb.add(**batch(6))  # rows 0..5 written, 6..9 never
    before = snapshot(rb)
    with pytest.raises(error):
        rb.update_priorities(np.array(idx), np.array(prio))
    assert_same_state(before, snapshot(rb))


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
def test_bad_sample_raises_and_changes_nothing(kind):
    rb = kind(10, FIELDS, seed=0)
    with pytest.raises(ValueError, match="empty"):
        rb.sample(4)
    rb.add(**batch(3))
    before = snapshot(rb)
    for n in (0, -2, 1.5):
        with pytest.raises(ValueError, match="positive"):
            rb.sample(n)
    with pytest.raises(ValueError, match="beta"):
        rb.sample(2, beta=float("nan"))
    assert_same_state(before, snapshot(rb))


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="reserved"):
        PrioritizedReplay(4, {"weights": ((), np.float32)})
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedReplay(0, FIELDS)
    with pytest.raises(ValueError, match="shape, dtype"):
        UniformReplay(4, {"obs": "uint8"})
    with pytest.raises(ValueError, match="frame_dedup"):
        UniformReplay(4, FIELDS, frame_capacity=10)


def test_update_of_an_overwritten_row_sets_the_new_data_priority():
    # Standard PER behaviour: an index sampled before its row was overwritten still names a
    # stored row, so the update goes through (to the new data) rather than raising.
    rb = PrioritizedReplay(4, FIELDS, alpha=1.0, eps=0.0, seed=0)
    rb.add(**batch(4))
    idx = rb.sample(2)["indices"]
    rb.add(**batch(4, 4))
    rb.update_priorities(idx, [3.0, 3.0])
    np.testing.assert_allclose(rb.priorities(idx), 3.0)


# ---------------------------------------------------------------- uniform


def test_uniform_draws_live_rows_evenly_with_unit_weights():
    rb = UniformReplay(30, FIELDS, seed=1)
    rb.add(**batch(20))
    counts = np.zeros(30)
    for _ in range(200):
        s = rb.sample(50)
        np.testing.assert_array_equal(s["weights"], 1.0)
        np.testing.assert_array_equal(s["action"], s["indices"])  # row i holds action i
        counts += np.bincount(s["indices"], minlength=30)
    assert counts[20:].sum() == 0
    expected = counts.sum() / 20
    stat = ((counts[:20] - expected) ** 2 / expected).sum()
    assert stat < 45.0  # chi-square 0.999 quantile, 19 degrees of freedom: ~43.8
    before = snapshot(rb)
    rb.update_priorities([0, 5], [2.0, 0.0])  # valid: accepted and ignored
    assert_same_state(before, snapshot(rb))


# ---------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
def test_state_dict_round_trip_resumes_sampling_exactly(kind):
    rb = kind(16, FIELDS, seed=7)
    rb.add(**batch(12))
    rb.add(**batch(8, 12))  # wrapped
    rb.update_priorities(np.arange(16), np.linspace(0, 3, 16))
    state = copy.deepcopy(rb.state_dict())
    other = kind(16, FIELDS, seed=123)
    other.load_state_dict(state)
    assert len(other) == len(rb)
    for _ in range(3):
        a, b = rb.sample(8), other.sample(8)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    rb.add(**batch(3, 20))
    other.add(**batch(3, 20))
    assert_same_state(snapshot(rb), snapshot(other))


def flatten(state: dict, prefix: str = "") -> dict:
    """Nested dict -> {"a/b": array}, as a trainer writing an .npz would."""
    out = {}
    for k, v in state.items():
        out.update(flatten(v, f"{prefix}{k}/") if isinstance(v, dict) else {prefix + k: np.asarray(v)})
    return out


def unflatten(flat) -> dict:
    """The inverse of flatten (0-d arrays back to scalars)."""
    out: dict = {}
    for key in flat:
        *parents, leaf = key.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = flat[key][()] if flat[key].ndim == 0 else flat[key]
    return out


@pytest.mark.parametrize("kind", [PrioritizedReplay, UniformReplay])
def test_state_dict_survives_an_npz_without_pickle(kind, tmp_path):
    rb = kind(16, FIELDS, seed=7)
    rb.add(**batch(10))
    rb.update_priorities(np.arange(10), np.linspace(0, 3, 10))
    np.savez(tmp_path / "replay.npz", **flatten(rb.state_dict()))
    with np.load(tmp_path / "replay.npz", allow_pickle=False) as data:
        state = unflatten(data)
    other = kind(16, FIELDS, seed=1)
    other.load_state_dict(state)
    a, b = rb.sample(8), other.sample(8)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_state_dict_of_a_different_replay_is_refused():
    state = PrioritizedReplay(16, FIELDS).state_dict()
    with pytest.raises(ValueError, match="does not match"):
        PrioritizedReplay(32, FIELDS).load_state_dict(state)
    with pytest.raises(ValueError, match="does not match"):
        UniformReplay(16, FIELDS).load_state_dict(state)
    with pytest.raises(ValueError, match="does not match"):
        PrioritizedReplay(16, FIELDS, alpha=0.5).load_state_dict(state)
