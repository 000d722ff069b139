"""V-trace against a naive loop written from the paper's definition, and hand-computed cases."""

from __future__ import annotations

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
