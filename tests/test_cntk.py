"""Tests of the CNTK (seed 004, Arora et al.) and of the finite CNN without autograd.

Independent routes used here (never the implementation's own values):

- a naive NumPy transcription of the pixel-pair recursion with explicit loops
  over pixel pairs and patch offsets, and arccos-based ReLU moments;
- an independent transcription of Arora et al.'s CUDA algorithm (c_σ = 2,
  patch sums, no 1/C, trace/mean readouts, "fix" semantics) for the
  normalisation identities;
- an FC NTK recursion written here (and ntkref.kernels.fc where present) for
  the 1×1-filter reduction;
- central finite differences for the CNN Jacobian;
- Monte Carlo over random initialisations of wide CNNs for the kernel itself.
"""
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntkref._lib.validation import InvalidParameterError
from ntkref.kernels._cntk import cntk
from ntkref.nets._cnn import ConvNet
from ._device import assert_on_device as _assert_on_device, device1 as _device1

RNG_IMAGES = 20240601


def _images(n, c, h, w, seed=RNG_IMAGES):
    return np.random.default_rng(seed).standard_normal((n, c, h, w))


@pytest.fixture(params=["batched", "rows"])
def pair_path(request, monkeypatch, xp):
    """The two NumPy routes of a GAP pair: batches of pairs (small images) and, for large images, one pair
    at a time in cache-sized blocks of pixel rows, forced here on small images with one pixel row per block
    (so every block boundary, and a refinement spread over blocks and groups, is exercised)."""
    if request.param == "rows":
        if not xp.__name__.endswith("numpy"):
            pytest.skip("the row-block path is NumPy's (other namespaces take the standard-only route)")
        from ntkref.kernels import _cntk as mod

        monkeypatch.setattr(mod, "_ROWS_MIN_ENTRIES", 0)
        monkeypatch.setattr(mod, "_BLOCK_ENTRIES", 1)
        monkeypatch.setattr(mod, "_REFINE_CHUNK", 3)  # flagged entries refined in small groups, mid-layer too
    return request.param


def _gap_only(path, readout):
    if path == "rows" and readout != "gap":
        pytest.skip("the row-block path computes the GAP readout")


# ----------------------------------------------------------------------------
# independent oracles (NumPy, loops)
# ----------------------------------------------------------------------------
def _relu_moments_arccos(k, q1, q2):
    """E[relu u relu v], P[u>0,v>0] from the textbook arccos formula (Cho & Saul)."""
    s = np.sqrt(q1 * q2)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(s > 0, np.clip(k / np.where(s > 0, s, 1.0), -1.0, 1.0), 0.0)
    theta = np.arccos(cos)
    kk = s * (np.sin(theta) + (np.pi - theta) * cos) / (2 * np.pi)
    kdot = np.where(s > 0, (np.pi - theta) / (2 * np.pi), 0.0)
    return kk, kdot


def _patch_loop(k, q, scale):
    """scale · Σ_{a,b} k[i+a, j+b, i'+a, j'+b] with explicit loops (zero outside)."""
    h, w = k.shape[:2]
    r = q // 2
    out = np.zeros_like(k)
    for i in range(h):
        for j in range(w):
            for i2 in range(h):
                for j2 in range(w):
                    acc = 0.0
                    for a in range(-r, r + 1):
                        for b in range(-r, r + 1):
                            u, v, u2, v2 = i + a, j + b, i2 + a, j2 + b
                            if 0 <= u < h and 0 <= v < w and 0 <= u2 < h and 0 <= v2 < w:
                                acc += k[u, v, u2, v2]
                    out[i, j, i2, j2] = scale * acc
    return out


def _naive_cntk_pair(x, z, depth, q, ws, bs, readout, fix):
    """One pair, full (H, W, H, W) tensors, loops; neural-tangents conventions."""
    c, h, w = x.shape

    def cov0(a, b):
        return np.einsum("cij,ckl->ijkl", a, b) / c

    kxx, kzz, kxz = cov0(x, x), cov0(z, z), cov0(x, z)
    t = None
    for layer in range(depth):
        w2, b2 = ws[layer] ** 2, bs[layer] ** 2
        kxx = w2 * _patch_loop(kxx, q, 1.0 / q**2) + b2
        kzz = w2 * _patch_loop(kzz, q, 1.0 / q**2) + b2
        kxz = w2 * _patch_loop(kxz, q, 1.0 / q**2) + b2
        if layer == 0:
            t = np.zeros_like(kxz) if fix else kxz.copy()
        else:
            t = kxz + w2 * _patch_loop(t, q, 1.0 / q**2)
        vx = np.einsum("ijij->ij", kxx)[:, :, None, None]
        vz = np.einsum("ijij->ij", kzz)[None, None, :, :]
        kxz, kdot = _relu_moments_arccos(kxz, vx, vz)
        kxx, _ = _relu_moments_arccos(kxx, vx, np.einsum("ijij->ij", kxx)[None, None, :, :])
        kzz, _ = _relu_moments_arccos(kzz, np.einsum("ijij->ij", kzz)[:, :, None, None], vz)
        t = t * kdot
    if readout == "gap":
        red = np.mean
    else:
        def red(a):
            return np.mean(np.einsum("ijij->ij", a))
    nngp = ws[depth] ** 2 * red(kxz) + bs[depth] ** 2
    ntk = ws[depth] ** 2 * red(t) + (0.0 if fix else nngp)
    return nngp, ntk


def _arora_pair(x, z, depth_arora, gap, fix):
    """Arora et al.'s CNTK of one pair as their CUDA code computes it (seed 004).

    c_σ = 2, q = 3, S = xᵀz with no 1/C, conv3 = patch *sum*, ``trans`` with
    c_σ/q² = 2/9 (the 9π constant), depth_arora = #conv layers + 1; "fix":
    T starts at 0 and the last S is subtracted; GAP = mean, vanilla = trace.
    """
    c, h, w = x.shape

    def conv3(s):
        return _patch_loop(s, 3, 1.0)

    def self_diagonals(a):
        s = conv3(np.einsum("cij,ckl->ijkl", a, a))
        diags = []
        for _ in range(depth_arora - 1):
            d = np.sqrt(np.einsum("ijij->ij", s))
            diags.append(d)
            lft, rgt = d[:, :, None, None], d[None, None, :, :]
            cos = np.clip(s / (lft * rgt), -1, 1)
            s = (cos * (np.pi - np.arccos(cos)) + np.sqrt(1 - cos**2)) * lft * rgt / (9 * np.pi)
            s = conv3(s)
        return diags

    dx, dz = self_diagonals(x), self_diagonals(z)
    s = conv3(np.einsum("cij,ckl->ijkl", x, z))
    t = np.zeros_like(s) if fix else s.copy()

    def trans(s, t, layer):
        lft, rgt = dx[layer][:, :, None, None], dz[layer][None, None, :, :]
        cos = np.clip(s / (lft * rgt), -1, 1)
        bs = (cos * (np.pi - np.arccos(cos)) + np.sqrt(1 - cos**2)) * lft * rgt / (9 * np.pi)
        sdot = (np.pi - np.arccos(cos)) / (9 * np.pi)
        return bs, t * sdot + bs

    for layer in range(depth_arora - 2):
        s, t = trans(s, t, layer)
        s, t = conv3(s), conv3(t)
    s, t = trans(s, t, depth_arora - 2)
    if fix:
        t = t - s
    return float(np.mean(t)) if gap else float(np.trace(t.reshape(h * w, h * w)))


def _fc_ntk(u, v, depth, ws, bs):
    """NT-convention FC NNGP/NTK of two vectors (own recursion, arccos)."""
    d = u.shape[0]
    kuv = ws[0] ** 2 * (u @ v) / d + bs[0] ** 2
    kuu = ws[0] ** 2 * (u @ u) / d + bs[0] ** 2
    kvv = ws[0] ** 2 * (v @ v) / d + bs[0] ** 2
    t = kuv
    for layer in range(1, depth + 1):
        e, edot = _relu_moments_arccos(kuv, kuu, kvv)
        w2, b2 = ws[layer] ** 2, bs[layer] ** 2
        kuv = w2 * e + b2
        t = kuv + w2 * edot * t
        kuu, kvv = w2 * kuu / 2 + b2, w2 * kvv / 2 + b2
    return kuv, t


# ----------------------------------------------------------------------------
# CNTK: exact identities
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("q", [3, 5])
def test_cntk_matches_naive_loop_recursion(xp, asxp, tonp, readout, fix, q, pair_path):
    # non-square images (border-heavy: q = 5 on 4×3), biases, per-layer stds
    _gap_only(pair_path, readout)
    x = _images(3, 2, 4, 3)
    ws, bs = [1.2, 0.9, 1.1], [0.3, 0.0, 0.5]
    got = cntk(asxp(x), depth=2, readout=readout, filter_size=q, W_std=ws, b_std=bs, fix_first_last=fix)
    for i in range(3):
        for j in range(3):
            nngp, ntk = _naive_cntk_pair(x[i], x[j], 2, q, ws, bs, readout, fix)
            # float64, a few hundred operations per entry; the arccos oracle is
            # itself only good to ~1e-8 near θ = 0 (self pairs), hence 1e-7 there
            rtol = 1e-7 if i == j else 1e-11
            np.testing.assert_allclose(tonp(got.nngp)[i, j], nngp, rtol=rtol)
            np.testing.assert_allclose(tonp(got.ntk)[i, j], ntk, rtol=rtol)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("depth", [1, 3])
def test_arora_normalisation_identity(xp, asxp, tonp, readout, fix, depth):
    """Θ_Arora-GAP = C·ntk, Θ_Arora-V = C·P·ntk with W_std = (1, √2, …, √2);
    with W_std = 1 everywhere an extra factor 2^L (module docstring)."""
    x = _images(2, 3, 4, 4, seed=3)
    c, p = 3, 16
    factor = c * (p if readout == "flatten" else 1)
    w_arora = [1.0] + [math.sqrt(2.0)] * depth
    ours = tonp(cntk(asxp(x), depth=depth, readout=readout, W_std=w_arora, fix_first_last=fix).ntk)
    ours_w1 = tonp(cntk(asxp(x), depth=depth, readout=readout, W_std=1.0, fix_first_last=fix).ntk)
    for i in range(2):
        for j in range(2):
            arora = _arora_pair(x[i], x[j], depth + 1, readout == "gap", fix)
            rtol = 1e-7 if i == j else 1e-11  # Arora's clipped arccos near θ = 0
            np.testing.assert_allclose(factor * ours[i, j], arora, rtol=rtol)
            np.testing.assert_allclose(factor * 2.0**depth * ours_w1[i, j], arora, rtol=rtol)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_one_by_one_filters_reduce_to_fc(xp, asxp, tonp, readout, pair_path):
    """q = 1: every pixel is an FC net over the channels, so
    gap = mean over all pixel pairs (p, p′) of Θ_FC(x_p, x′_p′),
    flatten = mean over p of Θ_FC(x_p, x′_p)."""
    _gap_only(pair_path, readout)
    x = _images(3, 4, 3, 2, seed=5)
    ws, bs = [1.0, 1.3, 0.8], [0.2, 0.4, 0.1]
    got = cntk(asxp(x), depth=2, readout=readout, filter_size=1, W_std=ws, b_std=bs)
    pix = x.reshape(3, 4, 6)  # (n, C, P)
    for i in range(3):
        for j in range(3):
            pairs = [(p, p2) for p in range(6) for p2 in range(6)] if readout == "gap" else [(p, p) for p in range(6)]
            vals = np.array([_fc_ntk(pix[i][:, p], pix[j][:, p2], 2, ws, bs) for p, p2 in pairs])
            rtol = 1e-7 if i == j else 1e-12
            np.testing.assert_allclose(tonp(got.nngp)[i, j], vals[:, 0].mean(), rtol=rtol)
            np.testing.assert_allclose(tonp(got.ntk)[i, j], vals[:, 1].mean(), rtol=rtol)


def test_one_by_one_filters_match_library_fc(xp, asxp, tonp):
    """Same reduction against ntkref.kernels.fc (the FC implementation of the package)."""
    fc_mod = pytest.importorskip("ntkref.kernels._fc")
    x = _images(2, 3, 3, 3, seed=11)
    ws, bs = [1.0, 1.4, 0.7, 1.1], [0.0, 0.3, 0.2, 0.1]
    gap = tonp(cntk(asxp(x), depth=3, filter_size=1, W_std=ws, b_std=bs).ntk)
    flat = tonp(cntk(asxp(x), depth=3, filter_size=1, W_std=ws, b_std=bs, readout="flatten").ntk)
    pix = np.transpose(x.reshape(2, 3, 9), (0, 2, 1))  # (n, P, C)
    for i in range(2):
        for j in range(2):
            k = tonp(fc_mod.fc(asxp(pix[i]), asxp(pix[j]), depth=3, W_std=ws, b_std=bs).ntk)
            np.testing.assert_allclose(gap[i, j], k.mean(), rtol=1e-7)
            np.testing.assert_allclose(flat[i, j], np.trace(k) / 9, rtol=1e-7)


@given(
    depth=st.integers(1, 3),
    q=st.sampled_from([1, 3, 5]),
    h=st.integers(1, 5),
    w=st.integers(1, 5),
    b_std=st.sampled_from([0.0, 0.4]),
    fix=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_vanilla_fast_path_equals_full_computation(xp, asxp, tonp, depth, q, h, w, b_std, fix, seed):
    """The diagonal (offset-0) recursion equals the full pixel-pair recursion read on its diagonal.

    Mathematically identical.  Both track the squared distance of the pixel
    pairs, so the ReLU angle is computed without the √ε loss near θ = 0; the
    paths differ only in summation order: tolerance 1e-12 relative to the
    diagonal's scale (depth ≤ 3, ≤ 25 summands per patch).
    """
    x = asxp(np.random.default_rng(seed).standard_normal((3, 2, h, w)))
    fast = cntk(x, depth=depth, readout="flatten", filter_size=q, b_std=b_std, fix_first_last=fix)
    full = cntk(x, depth=depth, readout="flatten", filter_size=q, b_std=b_std, fix_first_last=fix, method="full")
    for a, b in ((fast.nngp, full.nngp), (fast.ntk, full.ntk)):
        a, b = tonp(a), tonp(b)
        scale = np.sqrt(np.outer(np.abs(np.diag(b)), np.abs(np.diag(b)))) + 1e-300
        assert np.max(np.abs(a - b) / scale) < 1e-12


def _box_mean_loops(v, q):
    h, w = v.shape
    r = q // 2
    out = np.zeros_like(v)
    for i in range(h):
        for j in range(w):
            out[i, j] = sum(
                v[i + a, j + b] for a in range(-r, r + 1) for b in range(-r, r + 1) if 0 <= i + a < h and 0 <= j + b < w
            ) / q**2
    return out


@pytest.mark.parametrize("q", [1, 3, 5])
def test_vanilla_self_kernel_equals_exact_diagonal(xp, asxp, tonp, q):
    """Θ_flatten(x, x) in closed form: every self pixel pair has θ = 0, so
    K_ℓ = Σ_ℓ/2 and κ̇ = 1/2 exactly, and the recursion is a 2-D box filter
    of the variance map.  This is where atan2(√(q₁q₂ − k²), k) loses half the
    digits; ours must hold to ~1e-14 relative."""
    x = _images(3, 2, 5, 4, seed=21)
    ws, bs = [1.0, 1.5, 0.7, 1.2], [0.2, 0.0, 0.3, 0.1]
    got = cntk(asxp(x), depth=3, readout="flatten", filter_size=q, W_std=ws, b_std=bs)
    for i in range(3):
        u = np.sum(x[i] ** 2, axis=0) / 2
        t = np.zeros_like(u)
        for layer in range(3):
            v = ws[layer] ** 2 * _box_mean_loops(u, q) + bs[layer] ** 2
            t = v + ws[layer] ** 2 * _box_mean_loops(t, q)
            u, t = v / 2, t / 2
        nngp = ws[3] ** 2 * u.mean() + bs[3] ** 2
        ntk = nngp + ws[3] ** 2 * t.mean()
        np.testing.assert_allclose(tonp(got.nngp)[i, i], nngp, rtol=1e-14)
        np.testing.assert_allclose(tonp(got.ntk)[i, i], ntk, rtol=1e-14)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_gram_symmetric_psd_and_blocking_invariant(xp, asxp, tonp, readout, pair_path):
    _gap_only(pair_path, readout)
    x = _images(7, 2, 5, 4, seed=9)
    ref = cntk(asxp(x), depth=2, readout=readout, b_std=0.1)
    nngp, ntk = tonp(ref.nngp), tonp(ref.ntk)
    for k in (nngp, ntk):
        np.testing.assert_array_equal(k, k.T)  # only i ≤ j computed, mirrored
        lam = np.linalg.eigvalsh(k)
        assert lam[0] >= -1e-12 * lam[-1]
    # tiny memory budget: one pair per batch, many blocks; and x2 given
    tiny = cntk(asxp(x), depth=2, readout=readout, b_std=0.1, max_memory=1)
    both = cntk(asxp(x), asxp(x), depth=2, readout=readout, b_std=0.1)
    np.testing.assert_allclose(tonp(tiny.ntk), ntk, rtol=1e-13)
    np.testing.assert_allclose(tonp(both.ntk), ntk, rtol=1e-13)
    part = cntk(asxp(x[:3]), asxp(x[2:]), depth=2, readout=readout, b_std=0.1, max_memory=1)
    np.testing.assert_allclose(tonp(part.ntk), ntk[:3, 2:], rtol=1e-13)
    np.testing.assert_allclose(tonp(part.nngp), nngp[:3, 2:], rtol=1e-13)


@given(scale=st.floats(1e-3, 1e3), seed=st.integers(0, 2**16))
def test_positive_homogeneity_without_bias(xp, asxp, tonp, scale, seed):
    """ReLU nets without bias are 1-homogeneous in x: Θ(cx, x′) = c Θ(x, x′), Θ(cx, cx′) = c² Θ."""
    x = np.random.default_rng(seed).standard_normal((2, 2, 3, 3))
    base = tonp(cntk(asxp(x), depth=2).ntk)
    both = tonp(cntk(asxp(scale * x), depth=2).ntk)
    one = tonp(cntk(asxp(scale * x[:1]), asxp(x), depth=2).ntk)
    # scaling both images scales every tracked quantity (covariance, distance,
    # variance maps) alike: a few ulps per operation, ~50 operations deep
    np.testing.assert_allclose(both, scale**2 * base, rtol=1e-13)
    # (cx, x): the self pixel pairs become parallel pairs of unequal norms, where s − k cancels
    # (neural-tangents' angle is off by ~1e-8 there); ours recomputes e = s − k without cancellation,
    # so the identity holds to rounding
    np.testing.assert_allclose(one, scale * base[:1], rtol=1e-13)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_zero_pixels_and_zero_image(xp, asxp, tonp, readout, pair_path):
    """Zero-norm pixels are defined (no NaN) and a zero image has Θ(0, x) = 0 without bias."""
    _gap_only(pair_path, readout)
    x = _images(3, 2, 5, 5, seed=4)
    x[0] = 0.0
    x[1, :, :3, :3] = 0.0  # a zero patch: pre-activation identically 0 there in layer 1
    k = cntk(asxp(x), depth=2, readout=readout)
    ntk, nngp = tonp(k.ntk), tonp(k.nngp)
    assert np.all(np.isfinite(ntk)) and np.all(np.isfinite(nngp))
    np.testing.assert_array_equal(ntk[0], 0.0)
    np.testing.assert_array_equal(nngp[:, 0], 0.0)
    # the naive oracle agrees on the partially zero image
    _, tt = _naive_cntk_pair(x[1], x[2], 2, 3, [1.0] * 3, [0.0] * 3, readout, False)
    np.testing.assert_allclose(ntk[1, 2], tt, rtol=1e-11)


def test_float32_inputs_stay_float32(xp, asxp, tonp):
    x = _images(3, 2, 4, 4, seed=8)
    k32 = cntk(asxp(x.astype(np.float32)), depth=2)
    k64 = cntk(asxp(x), depth=2)
    assert k32.ntk.dtype == xp.float32
    np.testing.assert_allclose(tonp(k32.ntk), tonp(k64.ntk), rtol=1e-4)  # docstring: ≈1e-6 relative in float32


# ----------------------------------------------------------------------------
# accuracy against an independent 50-digit evaluation (mpmath)
# ----------------------------------------------------------------------------
def _mp_cntk_pair(x, z, depth, q, ws, bs, readout, fix):
    """nngp, ntk of one image pair by the recursion written out in mpmath at 50 digits.

    Independent of the implementation: dictionaries over pixel pairs, the textbook arccos form
    κ = s(sin θ + (π − θ) cos θ)/(2π), κ̇ = (π − θ)/(2π), θ = arccos(Σ/s) (at 50 digits the cancellation
    near θ = 0 or π leaves > 15 correct digits of the angle), and the variances from the self pixel pairs
    (E relu(u)² = var/2).
    """
    import mpmath as mp

    with mp.workdps(50):
        c, h, w = x.shape
        r = q // 2
        pix = [(i, j) for i in range(h) for j in range(w)]
        X = {(ch, i, j): mp.mpf(float(x[ch, i, j])) for ch in range(c) for i, j in pix}
        Z = {(ch, i, j): mp.mpf(float(z[ch, i, j])) for ch in range(c) for i, j in pix}
        ux = {p: mp.fsum(X[(ch,) + p] ** 2 for ch in range(c)) / c for p in pix}
        uz = {p: mp.fsum(Z[(ch,) + p] ** 2 for ch in range(c)) / c for p in pix}
        kpost = {(a, b): mp.fsum(X[(ch,) + a] * Z[(ch,) + b] for ch in range(c)) / c for a in pix for b in pix}
        tpost = None
        shifts = [(da, db) for da in range(-r, r + 1) for db in range(-r, r + 1)]

        def inside(p):
            return 0 <= p[0] < h and 0 <= p[1] < w

        def conv(t):
            out = {}
            for a in pix:
                for b in pix:
                    terms = []
                    for da, db in shifts:
                        a2, b2 = (a[0] + da, a[1] + db), (b[0] + da, b[1] + db)
                        if inside(a2) and inside(b2):
                            terms.append(t[(a2, b2)])
                    out[(a, b)] = mp.fsum(terms)
            return out

        for layer in range(depth):
            w2, b2 = mp.mpf(ws[layer]) ** 2, mp.mpf(bs[layer]) ** 2
            cq = w2 / (q * q)

            def var(u):
                return {a: cq * mp.fsum(u[(a[0] + da, a[1] + db)] for da, db in shifts
                                        if inside((a[0] + da, a[1] + db))) + b2 for a in pix}

            vx, vz = var(ux), var(uz)
            sigma = {key: cq * v + b2 for key, v in conv(kpost).items()}
            if layer == 0:
                theta_ntk = {key: (mp.mpf(0) if fix else v) for key, v in sigma.items()}
            else:
                ct = conv(tpost)
                theta_ntk = {key: sigma[key] + cq * ct[key] for key in sigma}
            kpost, tpost = {}, {}
            for (a, b), k in sigma.items():
                s_ = mp.sqrt(vx[a] * vz[b])
                if s_ == 0:
                    kpost[(a, b)], tpost[(a, b)] = mp.mpf(0), mp.mpf(0)
                    continue
                cos = max(mp.mpf(-1), min(mp.mpf(1), k / s_))
                t = mp.acos(cos)
                kpost[(a, b)] = s_ * (mp.sin(t) + (mp.pi - t) * cos) / (2 * mp.pi)
                tpost[(a, b)] = theta_ntk[(a, b)] * (mp.pi - t) / (2 * mp.pi)
            ux = {a: v / 2 for a, v in vx.items()}
            uz = {a: v / 2 for a, v in vz.items()}
        keys = [(a, b) for a in pix for b in pix] if readout == "gap" else [(a, a) for a in pix]
        w2, b2 = mp.mpf(ws[depth]) ** 2, mp.mpf(bs[depth]) ** 2
        nngp = w2 * mp.fsum(kpost[k] for k in keys) / len(keys) + b2
        tail = w2 * mp.fsum(tpost[k] for k in keys) / len(keys)
        return nngp, (tail if fix else nngp + tail)


def _max_scaled_error_to_mpmath(images, got, **kw):
    """max over entries and outputs of |got − exact| / √(exact(x,x)·exact(x′,x′))."""
    import mpmath as mp

    n = len(images)
    exact = {}
    for i in range(n):
        for j in range(i, n):
            exact[(i, j)] = exact[(j, i)] = _mp_cntk_pair(images[i], images[j], **kw)
    worst = 0.0
    for o, name in enumerate(("nngp", "ntk")):
        g = got[name]
        for i in range(n):
            for j in range(n):
                scale = mp.sqrt(exact[(i, i)][o] * exact[(j, j)][o])
                err = abs(mp.mpf(float(g[i, j])) - exact[(i, j)][o])
                worst = max(worst, float(err / scale) if scale > 0 else float(err))
    return worst


def _adversarial_images(name, h=3, w=3):
    x = np.random.default_rng(17).standard_normal((2, h, w))
    zero_patch = x.copy()
    zero_patch[:, :2, :2] = 0.0
    const = np.ones_like(x) * np.array([1.0, -2.0])[:, None, None]
    return {
        # x and −x: every pixel pair (p, p) antiparallel in layer 1 (the 1.9e-10..3.3e-9 errors)
        "antiparallel": ([x, -x, 2 * x], 0.0),
        # x, 3x, x/2: parallel pixel pairs of unequal norms at every depth
        "parallel-unequal": ([x, 3 * x, 0.5 * x], 0.0),
        # zero patches (pre-activations identically 0 without bias) and a zero image
        "zero-patch-image": ([zero_patch, np.zeros_like(x), x], 0.0),
        # constant images: every interior pixel pair parallel (and with each other's multiples)
        "constant": ([const, 3 * const, -const], 0.0),
        # the ends of the float64 range (no bias: computed on power-of-two rescaled images)
        "tiny-huge": ([1e-150 * x, 1e150 * x, -3e-150 * x], 0.0),
        # tiny images with a bias: every pixel pair nearly parallel (s ≈ b²), unequal norms
        "bias-near-parallel": ([1e-8 * x, 3e-8 * x, -1e-8 * x], 0.3),
        # antiparallel with a bias far below the pixel scale
        "antiparallel-small-bias": ([x, -x, 2 * x], 1e-7),
    }[name]


_ADVERSARIAL = ["antiparallel", "parallel-unequal", "zero-patch-image", "constant", "tiny-huge",
                "bias-near-parallel", "antiparallel-small-bias"]


@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("case", _ADVERSARIAL)
def test_cntk_within_1e13_of_mpmath_on_adversarial_images(xp, asxp, tonp, case, readout, pair_path):
    """The documented accuracy: every entry within 1e-13·√(K(x,x)K(x′,x′)) of the 50-digit recursion
    (neural-tangents' angle, and this module before the cancellation-free e and f, are off by 1e-10..1e-9
    on these images), on both NumPy routes of a GAP pair."""
    _gap_only(pair_path, readout)
    images, b = _adversarial_images(case)
    depth, q = (3, 3) if case in ("parallel-unequal", "bias-near-parallel") else (2, 3)
    x = np.stack(images)
    k = cntk(asxp(x), depth=depth, readout=readout, filter_size=q, b_std=b)
    got = {"nngp": tonp(k.nngp), "ntk": tonp(k.ntk)}
    err = _max_scaled_error_to_mpmath(images, got, depth=depth, q=q, ws=[1.0] * (depth + 1),
                                      bs=[b] * (depth + 1), readout=readout, fix=False)
    assert err <= 1e-13, err


@pytest.mark.slow
@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("case", _ADVERSARIAL)
@pytest.mark.parametrize("depth, q, fix", [(1, 3, False), (2, 1, False), (3, 3, True), (4, 3, False)])
def test_cntk_within_1e13_of_mpmath_sweep(xp, asxp, tonp, case, readout, depth, q, fix, pair_path):
    """The same bound on non-square 4×3 images, depths 1–4, 1×1 and 3×3 filters, per-layer W_std, the
    "fixed first and last layer" variant; cross Grams (x2 given) as well as symmetric ones; both NumPy
    routes of a GAP pair."""
    _gap_only(pair_path, readout)
    images, b = _adversarial_images(case, 4, 3)
    ws = [1.3, 0.8, 1.1, 0.9, 1.2][: depth + 1]
    bs = [b] * (depth + 1)
    x = np.stack(images)
    for k in (cntk(asxp(x), depth=depth, readout=readout, filter_size=q, W_std=ws, b_std=bs, fix_first_last=fix),
              cntk(asxp(x), asxp(x), depth=depth, readout=readout, filter_size=q, W_std=ws, b_std=bs,
                   fix_first_last=fix)):
        got = {"nngp": tonp(k.nngp), "ntk": tonp(k.ntk)}
        err = _max_scaled_error_to_mpmath(images, got, depth=depth, q=q, ws=ws, bs=bs, readout=readout, fix=fix)
        assert err <= 1e-13, err


def test_threads_do_not_change_the_result(xp, asxp, tonp, pair_path):
    """n_jobs only distributes whole pairs over threads: bitwise the same Gram."""
    x = _images(4, 2, 6, 5, seed=23)
    one = cntk(asxp(x), depth=2, n_jobs=1)
    two = cntk(asxp(x), depth=2, n_jobs=2)
    np.testing.assert_array_equal(tonp(one.ntk), tonp(two.ntk))
    np.testing.assert_array_equal(tonp(one.nngp), tonp(two.nngp))


def test_pairs_are_handed_to_threads_without_per_pair_bookkeeping(monkeypatch):
    """A Gram of 20 100 pairs (one per batch) on two threads keeps its bookkeeping in a few MB: the batches
    are generated as the workers take them (a list of batches and a future per batch took ~1.7 kB a pair,
    3.4 GB for a 2 000-image Gram, beyond the memory estimate).  The pair kernel is replaced by zeros here:
    this measures the scheduling alone."""
    import tracemalloc

    from ntkref.kernels import _cntk as mod

    monkeypatch.setattr(mod, "_batch_sums", lambda st, g, m, xp, fast, work: (np.zeros(m), np.zeros(m)))
    x = np.random.default_rng(0).standard_normal((200, 1, 3, 3))
    tracemalloc.start()
    try:
        k = cntk(x, depth=1, max_memory=1, n_jobs=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert k.ntk.shape == (200, 200)
    outputs = 2 * 200 * 200 * 8
    assert peak - outputs < 8 * 2**20, peak  # a list and futures: ~35 MB here


# ----------------------------------------------------------------------------
# finite CNN
# ----------------------------------------------------------------------------
def _ravel(params, tonp):
    return np.concatenate([tonp(a).ravel() for wb in params for a in wb if a is not None])


def _unravel(vec, params, asxp):
    out, i = [], 0
    for W, b in params:
        nw = math.prod(W.shape)
        Wn = asxp(vec[i : i + nw].reshape(tuple(W.shape)))
        i += nw
        bn = None
        if b is not None:
            nb = math.prod(b.shape)
            bn = asxp(vec[i : i + nb].reshape(tuple(b.shape)))
            i += nb
        out.append((Wn, bn))
    return out


@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("q", [1, 3])
def test_cnn_jacobian_matches_central_differences(xp, asxp, tonp, readout, q):
    net = ConvNet(2, [3, 4], 2, filter_size=q, readout=readout, W_std=[1.0, 1.3, 0.9], b_std=0.3, spatial_shape=(3, 2))
    params = net.init(0)
    x = asxp(_images(3, 2, 3, 2, seed=1))
    jac = tonp(net.jacobian(params, x, flat=True))
    assert jac.shape == (3, net.n_params)
    theta = _ravel(params, tonp)
    step = 1e-5
    fd = np.empty_like(jac)
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = step
        fd[:, k] = (tonp(net.apply(_unravel(theta + e, params, asxp), x)) - tonp(net.apply(_unravel(theta - e, params, asxp), x))) / (2 * step)
    # f is a piecewise polynomial of degree ≤ 3 in the parameters (depth 2):
    # truncation O(step²·f‴) ≈ 1e-10, rounding O(ε/step) ≈ 1e-11
    np.testing.assert_allclose(jac, fd, atol=1e-8)
    # structured Jacobian has params' shapes with a leading N axis
    per_layer = net.jacobian(params, x)
    for (dW, db), (W, b) in zip(per_layer, params):
        assert tuple(dW.shape) == (3,) + tuple(W.shape)
        assert (db is None) == (b is None)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_empirical_ntk_equals_jacobian_gram(xp, asxp, tonp, readout):
    net = ConvNet(2, 5, 2, readout=readout, b_std=0.2, spatial_shape=(4, 4))
    params = net.init(3)
    x1, x2 = asxp(_images(3, 2, 4, 4, seed=2)), asxp(_images(2, 2, 4, 4, seed=6))
    j1, j2 = tonp(net.jacobian(params, x1, flat=True)), tonp(net.jacobian(params, x2, flat=True))
    np.testing.assert_allclose(tonp(net.empirical_ntk(params, x1, x2)), j1 @ j2.T, rtol=1e-12, atol=1e-14)
    sym = tonp(net.empirical_ntk(params, x1))
    np.testing.assert_array_equal(sym, sym.T)
    np.testing.assert_allclose(sym, j1 @ j1.T, rtol=1e-12, atol=1e-14)
    layers = tonp(net.empirical_ntk(params, x1, x2, per_layer=True))
    assert layers.shape == (3, 3, 2)
    np.testing.assert_allclose(layers.sum(axis=0), j1 @ j2.T, rtol=1e-12, atol=1e-14)
    # backward pass: vjp(c) = Σᵢ cᵢ ∇f(xᵢ) = cᵀ J, laid out like params
    c = np.array([0.5, -1.0, 2.0])
    vjp = net.vjp(params, x1, asxp(c))
    np.testing.assert_allclose(_ravel(vjp, tonp), c @ j1, rtol=1e-12, atol=1e-14)


def _mc_relative_errors(readout, widths, seeds, x, xp, asxp, tonp, **kw):
    ref = tonp(cntk(asxp(x), depth=2, readout=readout, **kw).ntk)
    out = {}
    for width in widths:
        net = ConvNet(x.shape[1], width, 2, readout=readout, spatial_shape=x.shape[2:], **kw)
        errs, mats = [], []
        for s in range(seeds):
            emp = tonp(net.empirical_ntk(net.init(1000 * width + s), asxp(x)))
            mats.append(emp)
            errs.append(np.linalg.norm(emp - ref) / np.linalg.norm(ref))
        out[width] = (np.array(errs), np.mean(mats, axis=0))
    return ref, out


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_empirical_ntk_of_wide_cnns_converges_to_cntk(xp, asxp, tonp, readout):
    """Θ̂ − Θ = O(width^{-1/2}) (fluctuations; the bias is O(1/width)).

    Fixed seeds (deterministic).  Statistic: RMS over 12 initialisations of
    the relative Frobenius error, at widths 8, 32, 128.  Theory: slope −1/2
    in log–log; with 12 samples the RMS is known to ~±20 %, so the fitted
    slope over a 16× width range is −0.5 ± 0.15: band [−0.8, −0.3].
    The mean over the 12 seeds at width 128 must be within 4 standard errors
    of Θ (SE ≈ RMS/√12).
    """
    x = _images(4, 2, 5, 5, seed=7)
    widths = (8, 32, 128)
    ref, res = _mc_relative_errors(readout, widths, 12, x, xp, asxp, tonp, b_std=0.2)
    rms = np.array([np.sqrt(np.mean(res[w][0] ** 2)) for w in widths])
    slope = np.polyfit(np.log(widths), np.log(rms), 1)[0]
    assert -0.8 < slope < -0.3, (rms, slope)
    assert rms[-1] < 0.2, rms
    mean_err = np.linalg.norm(res[128][1] - ref) / np.linalg.norm(ref)
    assert mean_err < 4 * rms[-1] / np.sqrt(12), (mean_err, rms)


def test_fixed_first_last_layer_kernel_is_middle_layers_gradient(xp, asxp, tonp):
    """fix_first_last=True ⇔ only the middle conv layers' parameters in Θ̂ (per-layer Θ̂ of depth-3 CNNs)."""
    x = _images(3, 2, 5, 5, seed=12)
    ref = tonp(cntk(asxp(x), depth=3, readout="flatten", fix_first_last=True).ntk)
    width, seeds = 128, 12
    net = ConvNet(2, width, 3, readout="flatten", spatial_shape=(5, 5))
    errs, mats = [], []
    for s in range(seeds):
        layers = tonp(net.empirical_ntk(net.init(77 + s), asxp(x), per_layer=True))
        middle = layers[1:-1].sum(axis=0)
        mats.append(middle)
        errs.append(np.linalg.norm(middle - ref) / np.linalg.norm(ref))
    rms = np.sqrt(np.mean(np.square(errs)))
    mean_err = np.linalg.norm(np.mean(mats, axis=0) - ref) / np.linalg.norm(ref)
    assert rms < 0.25
    assert mean_err < 4 * rms / np.sqrt(seeds), (mean_err, rms)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_output_covariance_of_wide_cnns_is_nngp(xp, asxp, tonp, readout):
    """E[f(x) f(x′)] over initialisations → nngp (bias O(1/width)).

    200 initialisations at width 64; tolerance 4 sample standard errors per
    entry plus 3 % of the entry for the finite-width bias.
    """
    x = _images(3, 2, 4, 4, seed=13)
    ref = tonp(cntk(asxp(x), depth=2, readout=readout, b_std=0.3).nngp)
    net = ConvNet(2, 64, 2, readout=readout, b_std=0.3, spatial_shape=(4, 4))
    outs = np.array([tonp(net.apply(net.init(5000 + s), asxp(x))) for s in range(200)])
    prods = outs[:, :, None] * outs[:, None, :]
    mean, se = prods.mean(axis=0), prods.std(axis=0) / np.sqrt(200)
    assert np.all(np.abs(mean - ref) <= 4 * se + 0.03 * np.abs(ref)), (mean, ref, se)


@pytest.mark.slow
def test_gradient_descent_on_wide_cnns_approaches_kernel_regression(xp, asxp, tonp):
    """Seed 004 Thm 2 / eqs. (3), (4), (9), discrete time: a CNN trained by full-batch
    gradient descent on ½Σ(g − y)², with g = f(θ_t, ·) − f(θ_0, ·) (the f₀-subtraction
    instead of seed 004's small κ, so g₀ = 0 exactly), predicts on test images what
    kernel gradient descent with the CNTK predicts after the same steps,
    g_t(x) = Θ(x, X) Θ⁻¹ (I − (I − ηΘ)^t) y  (→ eq. (9) as t → ∞),
    up to a gap that shrinks with width (Θ̂₀ − Θ = O(m^{-1/2}), drift O(m^{-1/2})).

    Fixed seeds; 60 steps with η = 1/λ_max(Θ); RMS over 4 initialisations of the
    max test gap at widths 8, 32, 128; theory slope −1/2, band [−0.9, −0.2].
    """
    rng = np.random.default_rng(31)
    x_train, y = rng.standard_normal((4, 2, 4, 4)), rng.standard_normal(4)
    x_test = rng.standard_normal((2, 2, 4, 4))
    theta = tonp(cntk(asxp(np.concatenate([x_train, x_test])), depth=2).ntk)
    k_train, k_test = theta[:4, :4], theta[4:, :4]
    eta, steps = 1.0 / float(np.linalg.eigvalsh(k_train)[-1]), 60
    residual_factor = np.linalg.matrix_power(np.eye(4) - eta * k_train, steps)
    g_kernel = k_test @ np.linalg.solve(k_train, y - residual_factor @ y)
    widths, rms = (8, 32, 128), []
    xtr, xte = asxp(x_train), asxp(x_test)
    for width in widths:
        net = ConvNet(2, width, 2)
        gaps = []
        for seed in range(4):
            params = net.init(100 + seed)
            f0_train, f0_test = tonp(net.apply(params, xtr)), tonp(net.apply(params, xte))
            for _ in range(steps):
                r = asxp(tonp(net.apply(params, xtr)) - f0_train - y)
                grads = net.jacobian(params, xtr)
                params = [(W - eta * xp.tensordot(r, dW, axes=([0], [0])), b) for (W, b), (dW, _) in zip(params, grads)]
            gaps.append(np.max(np.abs(tonp(net.apply(params, xte)) - f0_test - g_kernel)))
        rms.append(np.sqrt(np.mean(np.square(gaps))))
    slope = np.polyfit(np.log(widths), np.log(rms), 1)[0]
    assert -0.9 < slope < -0.2, (rms, slope)
    assert rms[-1] < rms[0] / 2, rms


# ----------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------
def test_cntk_bad_input(xp, asxp):
    x = asxp(_images(2, 2, 4, 4))
    with pytest.raises(InvalidParameterError, match="x1"):
        cntk(asxp(np.ones((2, 16))), depth=1)
    with pytest.raises(InvalidParameterError, match="x2"):
        cntk(x, asxp(np.ones((2, 2, 4))), depth=1)
    with pytest.raises(InvalidParameterError, match="filter_size"):
        cntk(x, depth=1, filter_size=2)
    with pytest.raises(InvalidParameterError, match="filter_size"):
        cntk(x, depth=1, filter_size=0)
    with pytest.raises(InvalidParameterError, match="x2"):
        cntk(x, asxp(_images(2, 3, 4, 4)), depth=1)  # mismatched channels
    with pytest.raises(InvalidParameterError, match="x2"):
        cntk(x, asxp(_images(2, 2, 4, 5)), depth=1)  # mismatched spatial size
    with pytest.raises(InvalidParameterError, match="depth"):
        cntk(x, depth=0)
    with pytest.raises(InvalidParameterError, match="readout"):
        cntk(x, depth=1, readout="max")
    with pytest.raises(InvalidParameterError, match="W_std"):
        cntk(x, depth=1, W_std=-1.0)
    with pytest.raises(InvalidParameterError, match="W_std"):
        cntk(x, depth=2, W_std=[1.0, 1.0])
    with pytest.raises(InvalidParameterError, match="method"):
        cntk(x, depth=1, readout="gap", method="diagonal")
    with pytest.raises(InvalidParameterError, match="fix_first_last"):
        cntk(x, depth=1, fix_first_last="yes")
    bad = _images(2, 2, 4, 4)
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="x1"):
        cntk(asxp(bad), depth=1)


def test_convnet_bad_input(xp, asxp):
    with pytest.raises(InvalidParameterError, match="filter_size"):
        ConvNet(2, 4, 1, filter_size=4)
    with pytest.raises(InvalidParameterError, match="spatial_shape"):
        ConvNet(2, 4, 1, readout="flatten")
    with pytest.raises(InvalidParameterError, match="channels"):
        ConvNet(2, [4, 4], 3)
    net = ConvNet(2, 4, 1, readout="flatten", spatial_shape=(4, 4))
    params = net.init(0)
    with pytest.raises(InvalidParameterError, match="channels"):
        net.apply(params, asxp(_images(2, 3, 4, 4)))
    with pytest.raises(InvalidParameterError, match="spatial"):
        net.apply(params, asxp(_images(2, 2, 5, 4)))
    with pytest.raises(InvalidParameterError, match="dimension"):
        net.apply(params, asxp(np.ones((2, 32))))
    with pytest.raises(InvalidParameterError, match="layers"):
        net.apply(params[:1], asxp(_images(2, 2, 4, 4)))


# ------------------------------------------------------------------ device placement


def _net(readout):
    return ConvNet(2, 3, 2, readout=readout, b_std=0.3, spatial_shape=(4, 4))


_DEVICE_CALLS = {
    "cntk-gap": lambda x, y, p, c, s: cntk(x, depth=2, readout="gap", b_std=0.2),
    "cntk-flatten-x2": lambda x, y, p, c, s: cntk(x, y, depth=2, readout="flatten", fix_first_last=True),
    "cntk-flatten-full": lambda x, y, p, c, s: cntk(x, y, depth=1, readout="flatten", method="full", max_memory=1),
    "ConvNet.init": lambda x, y, p, c, s: _net("gap").init(0, xp=s, device=x.device),
    "ConvNet.apply": lambda x, y, p, c, s: _net("gap").apply(p, x),
    "ConvNet.jacobian": lambda x, y, p, c, s: _net("gap").jacobian(p, x),
    "ConvNet.jacobian-flat": lambda x, y, p, c, s: _net("gap").jacobian(p, x, flat=True),
    "ConvNet.vjp": lambda x, y, p, c, s: _net("gap").vjp(p, x, c),
    "ConvNet.empirical_ntk": lambda x, y, p, c, s: _net("gap").empirical_ntk(p, x, y),
    "ConvNet.empirical_ntk-per-layer": lambda x, y, p, c, s: _net("gap").empirical_ntk(p, x, per_layer=True),
}


@pytest.mark.parametrize("name", list(_DEVICE_CALLS))
def test_public_functions_return_arrays_on_the_input_device(name):
    """Inputs (and parameters) on array_api_strict's device1 (the CPU stand-in for a GPU) give results on device1."""
    strict, dev = _device1()
    x = strict.asarray(_images(3, 2, 4, 4, seed=1), device=dev)
    y = strict.asarray(_images(2, 2, 4, 4, seed=2), device=dev)
    params = _net("gap").init(5, xp=strict, device=dev)
    c = strict.asarray(np.array([0.5, -1.0, 2.0]), device=dev)
    _assert_on_device(_DEVICE_CALLS[name](x, y, params, c, strict), strict, dev)


def test_convnet_init_uses_the_default_device(monkeypatch):
    """Without xp/device, init creates parameters in NTKREF_BACKEND's namespace on NTKREF_DEVICE."""
    strict, dev = _device1()
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    _assert_on_device(_net("flatten").init(0), strict, dev)
    with pytest.raises(InvalidParameterError, match="dtype"):
        _net("gap").init(0, dtype=strict.int32)


# ------------------------------------------------------------------ flat patch sums


@pytest.mark.parametrize("q", [1, 3, 5])
@pytest.mark.parametrize("full", [True, False])
def test_flat_patch_sum_equals_the_zero_padded_definition(xp, asxp, tonp, q, full):
    """The patch sum on the flat padded layout (contiguous slice additions; the NumPy in-place route and the
    standard-only route) equals Σ_δ a[i+a, j+b, i′+a, j′+b] over the offsets inside the image, written as
    loops on the unpadded (H, W, H, W) tensor (or its diagonal): 1e-15 relative (same terms, other order)."""
    from ntkref.kernels._cntk import _Geometry, _patch_sum

    h, w, m = 4, 3, 2
    g = _Geometry(h, w, q, full)
    r = q // 2
    rng = np.random.default_rng(q)
    a = rng.standard_normal((m, h, w, h, w)) if full else rng.standard_normal((m, h, w))
    ref = np.zeros_like(a)
    for da in range(-r, r + 1):
        for db in range(-r, r + 1):
            for i in range(h):
                for j in range(w):
                    if not (0 <= i + da < h and 0 <= j + db < w):
                        continue
                    if not full:
                        ref[:, i, j] += a[:, i + da, j + db]
                        continue
                    for i2 in range(h):
                        for j2 in range(w):
                            if 0 <= i2 + da < h and 0 <= j2 + db < w:
                                ref[:, i, j, i2, j2] += a[:, i + da, j + db, i2 + da, j2 + db]
    # the same tensor on the padded grid, flattened (zeros in the padding)
    padded = np.zeros((m, g.hp, g.wp, g.hp, g.wp) if full else (m, g.hp, g.wp))
    inner = (slice(None),) + (slice(r, r + h), slice(r, r + w)) * (2 if full else 1)
    padded[inner] = a
    flat = padded.reshape(-1)
    routes = [tonp(_patch_sum(asxp(flat), g, xp, False))]
    if xp.__name__.endswith("numpy"):
        out, tmp = np.empty_like(flat), np.empty_like(flat)
        routes.append(_patch_sum(flat, g, xp, True, tmp, out))
    for got in routes:
        got = got.reshape(padded.shape)[inner]
        np.testing.assert_allclose(got, ref, rtol=1e-15, atol=1e-14)


@pytest.mark.parametrize("q", [1, 3, 5])
@pytest.mark.parametrize("block_entries", [1, 10**9])
def test_block_patch_sum_equals_the_zero_padded_definition(q, block_entries):
    """The row-block patch sum (row shifts into a halo-widened scratch, then column shifts, reading the
    source through its zero margins) equals the loop definition Σ_δ a[i+a, j+b, i′+a, j′+b] over the
    offsets inside the image on every interior entry of every block; blocks of one pixel row or of a
    whole image row; 1e-15 relative (same terms, other order).  NumPy only (the path is NumPy's)."""
    from ntkref.kernels._cntk import _Geometry, _RowBlocks, _block_patch_sum

    h, w = 4, 3
    g = _Geometry(h, w, q, True)
    r = q // 2
    a = np.random.default_rng(q).standard_normal((h, w, h, w))
    ref = np.zeros_like(a)
    for i, j, i2, j2 in np.ndindex(h, w, h, w):
        for da in range(-r, r + 1):
            for db in range(-r, r + 1):
                u, v, u2, v2 = i + da, j + db, i2 + da, j2 + db
                if 0 <= u < h and 0 <= v < w and 0 <= u2 < h and 0 <= v2 < w:
                    ref[i, j, i2, j2] += a[u, v, u2, v2]
    padded = np.zeros((g.hp, g.wp, g.hp, g.wp))
    inner = (slice(r, r + h), slice(r, r + w)) * 2
    padded[inner] = a
    rb = _RowBlocks(g, block_entries)
    src = np.concatenate([np.zeros(rb.margin), padded.reshape(-1), np.zeros(rb.margin)])
    got = np.full(g.n, np.nan)
    tmp = np.empty(rb.longest + 2 * r * g.s1)
    covered = 0
    for b0, b1 in rb.blocks:
        lo, hi = b0 * g.pt, b1 * g.pt
        _block_patch_sum(src, lo, hi - lo, g, rb.margin, tmp, got[lo:hi])
        covered += b1 - b0
    assert covered == h * w  # the blocks tile the interior pixels
    got = got.reshape(padded.shape)[inner]
    np.testing.assert_allclose(got, ref, rtol=1e-15, atol=1e-14)


def test_row_blocks_on_larger_images_keep_the_kernel_identities(monkeypatch):
    """The row-block path on 12×12 images with near-parallel and antiparallel pixel pairs spread over many
    blocks: transposition symmetry Θ(x, x′) = Θ(x′, x) (computed from the rows of the other image, so a
    different order of every sum), homogeneity Θ(3x, x′) = 3Θ(x, x′) (where s − k cancels on the parallel
    pixel pairs of (x, 3x)) and agreement with the batched route (validated against mpmath above), all to
    1e-13 of √(K(x,x)K(x′,x′))."""
    from ntkref.kernels import _cntk as mod

    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 12, 12))
    const = np.ones_like(x) * np.array([1.0, -2.0])[:, None, None]
    zero_patch = x.copy()
    zero_patch[:, 3:7, 2:9] = 0.0
    imgs = np.stack([x, -x, 3 * x, const, zero_patch, rng.standard_normal((2, 12, 12))])
    kw = dict(depth=3, b_std=[0.0, 0.1, 0.0, 0.2])
    batched = cntk(imgs, **kw)
    monkeypatch.setattr(mod, "_ROWS_MIN_ENTRIES", 0)
    monkeypatch.setattr(mod, "_BLOCK_ENTRIES", 3 * 14 * 14)  # three pixel rows per block
    rows = cntk(imgs, **kw)
    swapped = cntk(imgs[3:], imgs[:3], **kw)
    for name in ("nngp", "ntk"):
        ref = getattr(batched, name)
        scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
        got = getattr(rows, name)
        assert np.max(np.abs(got - ref) / scale) <= 1e-13
        assert np.max(np.abs(getattr(swapped, name).T - got[:3, 3:]) / scale[:3, 3:]) <= 1e-13
    nb = cntk(imgs, **{**kw, "b_std": 0.0})  # homogeneity needs no biases
    base = nb.ntk
    scale = np.sqrt(np.outer(np.diag(base), np.diag(base)))
    # rows 2 = 3·x and 0 = x: Θ(3x, ·) = 3Θ(x, ·)
    assert np.max(np.abs(base[2] - 3 * base[0]) / scale[0]) <= 1e-13 * 3


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_cntk_runs_on_jax(readout):
    """JAX arrays are immutable: cntk takes the standard-only shift sums there and agrees with NumPy (float32 on
    JAX's default configuration: ≈1e-6 relative, so 1e-4 of the largest entry)."""
    jnp = pytest.importorskip("jax.numpy")
    from ntkref import to_numpy

    x = _images(2, 2, 3, 3, seed=4)
    ref = cntk(x, depth=1, readout=readout, b_std=0.2)
    got = cntk(jnp.asarray(x.astype(np.float32)), depth=1, readout=readout, b_std=0.2)
    for g, r in ((got.nngp, ref.nngp), (got.ntk, ref.ntk)):
        assert "jax" in type(g).__module__
        np.testing.assert_allclose(to_numpy(g), r, rtol=0, atol=1e-4 * np.max(np.abs(r)))


# ------------------------------------------------- finite or an error at the ends of the range


@pytest.mark.parametrize("value, dtype", [(1e300, "float64"), (-1e200, "float64"), (1e20, "float32")])
@pytest.mark.parametrize("which", ["x1", "x2"])
def test_pixels_beyond_the_representable_range_are_refused(value, dtype, which, asxp, xp):
    big = np.full((2, 2, 3, 3), 0.5)
    big[1, 0, 1, 1] = value
    small = asxp(np.ones((2, 2, 3, 3)), dtype=getattr(xp, dtype))
    big = asxp(big, dtype=getattr(xp, dtype))
    x1, x2 = (big, None) if which == "x1" else (small, big)
    with pytest.raises(InvalidParameterError, match=f"'{which}' parameter of cntk .*representable range"):
        cntk(x1, x2, depth=2)


@pytest.mark.parametrize("readout", ["gap", "flatten"])
@pytest.mark.parametrize("c", [1e150, 1e100, 1e-150])
def test_relu_cntk_is_homogeneous_up_to_the_limit(readout, c, asxp, tonp):
    # without biases the kernel is homogeneous of degree 2: K(cx, cx') = c²K(x, x'); at c = 1e100 the
    # angle's √(below·above) used to overflow (NaN), so the whole range up to the documented limit is checked
    x = np.random.default_rng(5).normal(size=(3, 2, 4, 4))
    ref = cntk(asxp(x), depth=2, readout=readout)
    got = cntk(asxp(c * x), depth=2, readout=readout)
    for key in ("nngp", "ntk"):
        r, g = tonp(getattr(ref, key)), tonp(getattr(got, key))
        s = np.sqrt(np.diag(r))
        assert np.all(np.abs(g / (c * c) - r) <= 1e-13 * np.outer(s, s)), key


def test_overflow_of_the_cntk_output_is_an_error(asxp):
    with pytest.raises(InvalidParameterError, match="cntk: the kernel .*representable range"):
        cntk(asxp(np.ones((2, 1, 3, 3))), depth=3, W_std=1e100)


def test_cntk_refuses_outputs_beyond_the_available_memory(monkeypatch, asxp, tonp):
    from ntkref._lib import memory

    monkeypatch.setattr(memory, "available_memory", lambda xp, like: 64 * 2**30)
    with pytest.raises(InvalidParameterError, match=r"'x1'/'x2' parameters .* of cntk would need about") as info:
        cntk(asxp(np.ones((100_000, 1, 2, 2))), depth=1)
    assert "float32" in str(info.value) and "--out" in str(info.value)
    # at least the two float64 outputs, 2 × 10¹⁰ × 8 bytes = 149 GiB
    assert float(re.search(r"need about ([0-9.]+) GiB", str(info.value)).group(1)) >= 149
    x = np.random.default_rng(0).normal(size=(4, 2, 12, 12))
    ref = tonp(cntk(asxp(x), depth=1).ntk)
    monkeypatch.setattr(memory, "available_memory", lambda xp, like: 8 * 2**20)
    with pytest.raises(InvalidParameterError, match="of cntk would need about"):
        cntk(asxp(x), depth=1)  # a batch of all 16 pixel-pair tensors (~30 MiB) does not fit in 8 MiB
    got = tonp(cntk(asxp(x), depth=1, max_memory=2**16).ntk)  # one pair a batch fits
    s = np.sqrt(np.diag(ref))
    assert np.all(np.abs(got - ref) <= 1e-13 * np.outer(s, s))
