"""V-trace against a naive loop written from the paper's definition, and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from seedpool.algos.vtrace import vtrace


def naive_vtrace(blp, tlp, rew, val, boot, disc, clip_rho, clip_pg_rho, clip_c, lam, mask):
    """Eq. (1) of the IMPALA paper as an explicit double sum, one unroll at a time (float64)."""
    T, B = val.shape
    vs = np.zeros((T, B))
    adv = np.zeros((T, B))
    ratio = np.exp(tlp - blp)
    rho = np.minimum(clip_rho, ratio)
    c = lam * np.minimum(clip_c, ratio)
    for b in range(B):
        nxt = np.append(val[1:, b], boot[b])
        for s in range(T):
            total = val[s, b]
            for t in range(s, T):
                weight = 1.0
                for i in range(s, t):  # gamma_i * c_i products, cut at masked steps
                    weight *= disc[i, b] * c[i, b] * mask[i, b]
                delta = mask[t, b] * rho[t, b] * (rew[t, b] + disc[t, b] * nxt[t] - val[t, b])
                total += weight * delta
            vs[s, b] = total
        next_vs = np.append(vs[1:, b], boot[b])
        pg_rho = np.minimum(clip_pg_rho, ratio[:, b])
        adv[:, b] = mask[:, b] * pg_rho * (rew[:, b] + disc[:, b] * next_vs - val[:, b])
    return vs, adv


def random_case(rng, T=7, B=5, masked=True):
    blp = np.log(rng.uniform(0.05, 1.0, (T, B)))
    tlp = np.log(rng.uniform(0.05, 1.0, (T, B)))
    rew = rng.normal(size=(T, B))
    val = rng.normal(size=(T, B))
    boot = rng.normal(size=B)
    disc = 0.95 * (rng.uniform(size=(T, B)) > 0.2)
    mask = (rng.uniform(size=(T, B)) > 0.15).astype(np.float64) if masked else np.ones((T, B))
    return blp, tlp, rew, val, boot, disc, mask


def as_t(*arrays):
    return [torch.as_tensor(a, dtype=torch.float64) for a in arrays]


@pytest.mark.parametrize("clips", [(1.0, 1.0, 1.0, 1.0), (2.0, 1.5, 0.8, 0.9), (1e9, 1e9, 1e9, 0.7)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_naive_loop(clips, seed):
    clip_rho, clip_pg_rho, clip_c, lam = clips
    blp, tlp, rew, val, boot, disc, mask = random_case(np.random.default_rng(seed))
    want_vs, want_adv = naive_vtrace(blp, tlp, rew, val, boot, disc, clip_rho, clip_pg_rho, clip_c, lam, mask)
    out = vtrace(*as_t(blp, tlp, rew, val, boot, disc), clip_rho=clip_rho, clip_pg_rho=clip_pg_rho,
                 clip_c=clip_c, lambda_=lam, mask=torch.as_tensor(mask))
    assert out.vs.dtype == torch.float64
    np.testing.assert_allclose(out.vs.numpy(), want_vs, atol=1e-6, rtol=0)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, atol=1e-6, rtol=0)


def test_no_clip_equals_huge_clip():
    blp, tlp, rew, val, boot, disc, _ = random_case(np.random.default_rng(3), masked=False)
    a = vtrace(*as_t(blp, tlp, rew, val, boot, disc), clip_rho=None, clip_pg_rho=None, clip_c=None)
    b = vtrace(*as_t(blp, tlp, rew, val, boot, disc), clip_rho=1e12, clip_pg_rho=1e12, clip_c=1e12)
    torch.testing.assert_close(a.vs, b.vs)
    # And clipping matters here: the ratios are far from 1.
    c = vtrace(*as_t(blp, tlp, rew, val, boot, disc))
    assert not torch.allclose(a.vs, c.vs)


def test_on_policy_reduces_to_n_step_returns():
    rng = np.random.default_rng(4)
    T, B = 6, 3
    logp = np.log(rng.uniform(0.1, 1.0, (T, B)))
    rew, val, boot = rng.normal(size=(T, B)), rng.normal(size=(T, B)), rng.normal(size=B)
    disc = np.full((T, B), 0.9)
    disc[2, 1] = 0.0  # an episode ends inside unroll 1
    out = vtrace(*as_t(logp, logp, rew, val, boot, disc))
    # n-step return from s: rewards to the end of the unroll, then the bootstrap value.
    want = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            ret, scale = 0.0, 1.0
            for t in range(s, T):
                ret += scale * rew[t, b]
                scale *= disc[t, b]
            want[s, b] = ret + scale * boot[b]
    np.testing.assert_allclose(out.vs.numpy(), want, atol=1e-10)
    # On-policy advantages are the one-step TD errors against the n-step targets.
    next_want = np.concatenate([want[1:], boot[None]], axis=0)
    np.testing.assert_allclose(out.pg_advantages.numpy(), rew + disc * next_want - val, atol=1e-10)


def test_hand_computed_off_policy():
    # gamma 0.9; step 0 has ratio 0.5 (kept), step 1 ratio 2 (clipped to 1).
    blp = np.log([[0.5], [0.25]])
    tlp = np.log([[0.25], [0.5]])
    out = vtrace(*as_t(blp, tlp, [[1.0], [2.0]], [[0.5], [1.0]], [3.0], [[0.9], [0.9]]))
    # delta_1 = 2 + 0.9*3 - 1 = 3.7; v_1 = 4.7
    # delta_0 = 0.5*(1 + 0.9*1 - 0.5) = 0.7; v_0 = 0.5 + 0.7 + 0.9*0.5*3.7 = 2.865
    np.testing.assert_allclose(out.vs.numpy().ravel(), [2.865, 4.7], atol=1e-12)
    # adv_0 = 0.5*(1 + 0.9*4.7 - 0.5) = 2.365; adv_1 = 3.7
    np.testing.assert_allclose(out.pg_advantages.numpy().ravel(), [2.365, 3.7], atol=1e-12)


def test_hand_computed_truncation_through_masked_step():
    # Step 0 is truncated (discount kept), step 1 is the autoreset step (masked), step 2 is real.
    logp = np.zeros((3, 1))
    out = vtrace(*as_t(logp, logp, [[1.0], [0.0], [1.0]], [[1.0], [5.0], [2.0]], [4.0],
                       [[0.9], [0.0], [0.9]]), mask=torch.tensor([[1.0], [0.0], [1.0]]))
    # v_2 = 1 + 0.9*4 = 4.6; v_1 = V(final obs) = 5; v_0 = 1 + 0.9*5 = 5.5
    np.testing.assert_allclose(out.vs.numpy().ravel(), [5.5, 5.0, 4.6], atol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy().ravel(), [4.5, 0.0, 2.6], atol=1e-12)


def test_no_gradient_and_bad_shapes():
    val = torch.zeros(4, 2, requires_grad=True)
    z = torch.zeros(4, 2)
    out = vtrace(z, z, z, val, torch.zeros(2), z)
    assert not out.vs.requires_grad
    with pytest.raises(ValueError, match="bootstrap_value must have shape"):
        vtrace(z, z, z, z, torch.zeros(4), z)
    with pytest.raises(ValueError, match="rewards must have shape"):
        vtrace(z, z, torch.zeros(4, 3), z, torch.zeros(2), z)


# --- Off-policy batches against the paper's recursive definition --------------------------

def recursive_vtrace(blp, tlp, rew, val, boot, disc, mask, clip_rho, clip_pg_rho, clip_c, lambda_):
    """V-trace by the paper's recursion (Remark 1), one unroll and one step at a time.

    v_s = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})), with v_T = V(x_T), where
    delta_s = rho_s (r_s + gamma_s V(x_{s+1}) - V(x_s)), rho_s = min(rho_bar, pi/mu) and
    c_s = lambda min(c_bar, pi/mu); the advantage is pg_rho_s (r_s + gamma_s v_{s+1} - V(x_s)).
    A clip of None is no clip. A masked step is no transition: v_s = V(x_s), advantage 0.
    """
    def clipped(ratio, bar):
        return ratio if bar is None else min(bar, ratio)

    T, B = len(val), len(val[0])
    vs = [[0.0] * B for _ in range(T)]
    adv = [[0.0] * B for _ in range(T)]
    for b in range(B):
        v_next, value_next = boot[b], boot[b]
        for s in reversed(range(T)):
            ratio = math.exp(tlp[s][b] - blp[s][b])
            if mask[s][b] == 0:
                vs[s][b] = val[s][b]
            else:
                delta = clipped(ratio, clip_rho) * (rew[s][b] + disc[s][b] * value_next - val[s][b])
                c = lambda_ * clipped(ratio, clip_c)
                vs[s][b] = val[s][b] + delta + disc[s][b] * c * (v_next - value_next)
            v_next, value_next = vs[s][b], val[s][b]
        for s in range(T):
            if mask[s][b] == 0:
                continue
            ratio = math.exp(tlp[s][b] - blp[s][b])
            v_after = vs[s + 1][b] if s + 1 < T else boot[b]
            adv[s][b] = clipped(ratio, clip_pg_rho) * (rew[s][b] + disc[s][b] * v_after - val[s][b])
    return np.array(vs), np.array(adv)


def off_policy_batch(seed: int, T: int = 9, B: int = 4) -> dict[str, np.ndarray]:
    """[T, B] unrolls whose target/behaviour ratios lie far on both sides of 1 (float64)."""
    rng = np.random.default_rng(seed)
    ratio = np.array([0.1, 0.3, 0.6, 1.7, 3.0, 6.0])[rng.integers(0, 6, (T, B))]
    behaviour_p = rng.uniform(0.02, 0.15, (T, B))  # target_p = ratio * behaviour_p stays below 1
    disc = np.full((T, B), 0.97)
    disc[rng.uniform(size=(T, B)) < 0.2] = 0.0  # episodes end inside the unrolls
    mask = np.ones((T, B))
    mask[rng.uniform(size=(T, B)) < 0.15] = 0.0  # autoreset steps: no transition
    batch = {"behaviour_logp": np.log(behaviour_p), "target_logp": np.log(ratio * behaviour_p),
             "rewards": rng.normal(size=(T, B)), "values": rng.normal(size=(T, B)),
             "bootstrap_value": rng.normal(size=B), "discounts": disc, "mask": mask}
    # The premises of the tests below: every clip bar is crossed from both sides,
    # and some episodes end and some steps are masked.
    assert ratio.max() > 2.0 and ratio.min() < 0.8 and (disc == 0).any() and (mask == 0).any()
    return batch


def run_vtrace(batch: dict[str, np.ndarray], **clips) -> tuple[np.ndarray, np.ndarray]:
    out = vtrace(**{k: torch.as_tensor(v, dtype=torch.float64) for k, v in batch.items()}, **clips)
    return out.vs.numpy(), out.pg_advantages.numpy()


def run_recursive(batch: dict[str, np.ndarray], clip_rho=1.0, clip_pg_rho=1.0, clip_c=1.0,
                  lambda_=1.0) -> tuple[np.ndarray, np.ndarray]:
    args = [batch[k].tolist() for k in ("behaviour_logp", "target_logp", "rewards", "values",
                                        "bootstrap_value", "discounts", "mask")]
    return recursive_vtrace(*args, clip_rho, clip_pg_rho, clip_c, lambda_)


OFF_POLICY_CLIPS = [
    {"clip_rho": 1.0, "clip_pg_rho": 1.0, "clip_c": 1.0, "lambda_": 1.0},  # the IMPALA defaults
    {"clip_rho": 2.0, "clip_pg_rho": 1.5, "clip_c": 0.8, "lambda_": 0.95},  # every bar distinct
    {"clip_rho": None, "clip_pg_rho": None, "clip_c": None, "lambda_": 1.0},  # no clipping
]


@pytest.mark.parametrize("clips", OFF_POLICY_CLIPS, ids=["defaults", "distinct-bars", "unclipped"])
@pytest.mark.parametrize("seed", [0, 1])
def test_off_policy_batch_matches_recursive_definition(clips, seed):
    batch = off_policy_batch(seed)
    vs, adv = run_vtrace(batch, **clips)
    want_vs, want_adv = run_recursive(batch, **clips)
    np.testing.assert_allclose(vs, want_vs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(adv, want_adv, atol=1e-10, rtol=0)
    masked = batch["mask"] == 0
    np.testing.assert_array_equal(vs[masked], batch["values"][masked])
    np.testing.assert_array_equal(adv[masked], 0.0)


def test_swapping_behaviour_and_target_logp_changes_the_result():
    batch = off_policy_batch(2)
    swapped = {**batch, "behaviour_logp": batch["target_logp"], "target_logp": batch["behaviour_logp"]}
    vs, adv = run_vtrace(batch, clip_rho=2.0, clip_pg_rho=1.5, clip_c=0.8)
    swapped_vs, swapped_adv = run_vtrace(swapped, clip_rho=2.0, clip_pg_rho=1.5, clip_c=0.8)
    assert np.abs(vs - swapped_vs).max() > 0.1 and np.abs(adv - swapped_adv).max() > 0.1
    # The ratio is target over behaviour: only the documented order matches the definition.
    want_vs, want_adv = run_recursive(batch, clip_rho=2.0, clip_pg_rho=1.5, clip_c=0.8)
    np.testing.assert_allclose(vs, want_vs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(adv, want_adv, atol=1e-10, rtol=0)


@pytest.mark.parametrize("clip, changed", [
    ("clip_rho", {"vs", "pg_advantages"}),
    ("clip_c", {"vs", "pg_advantages"}),  # c_s only weighs the carried corrections of vs
    ("clip_pg_rho", {"pg_advantages"}),
])
def test_disabling_each_clip_changes_the_result(clip, changed):
    batch = off_policy_batch(3)
    clipped = dict(zip(("vs", "pg_advantages"), run_vtrace(batch)))
    unclipped = dict(zip(("vs", "pg_advantages"), run_vtrace(batch, **{clip: None})))
    for name in ("vs", "pg_advantages"):
        differs = np.abs(clipped[name] - unclipped[name]).max() > 1e-3
        verdict = "changed" if differs else "left unchanged"
        assert differs == (name in changed), f"disabling {clip} {verdict} {name}"
    want_vs, want_adv = run_recursive(batch, **{clip: None})
    np.testing.assert_allclose(unclipped["vs"], want_vs, atol=1e-10, rtol=0)
    np.testing.assert_allclose(unclipped["pg_advantages"], want_adv, atol=1e-10, rtol=0)
