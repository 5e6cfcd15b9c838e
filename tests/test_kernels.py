"""Infinite-width FC kernels against independent routes (mpmath, quadrature, identities, Monte Carlo)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import InvalidParameterError
from ntkref import kernels as K

from ._mp_reference import fc_pair
from ._device import assert_on_device as _assert_on_device, device1 as _device1

EPS64 = np.finfo(np.float64).eps


# ------------------------------------------------------------------ adversarial inputs


def _rotate(x, angle, rng):
    """A vector at exactly-ish `angle` from x (the reference uses the rounded result, so 'ish' is fine)."""
    v = rng.normal(size=x.shape)
    v -= (v @ x) / (x @ x) * x
    v /= np.linalg.norm(v)
    xh = x / np.linalg.norm(x)
    return np.cos(angle) * xh + np.sin(angle) * v


def adversarial_rows(d=6, seed=0):
    """Rows that break naive implementations: near-parallel down to 1e-9 rad, antiparallel,
    zero, duplicated, and scales from 1e-150 to 1e150."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=d)
    rows = [base]
    for a in (1e-9, 1e-7, 1e-5, 1e-3, 0.3):
        rows.append(_rotate(base, a, rng) * 1.7)
    for a in (1e-9, 1e-6, 1e-3):
        rows.append(-_rotate(base, a, rng) * 0.6)
    rows.append(np.zeros(d))
    rows.append(base.copy())  # duplicate
    rows.append(rng.normal(size=d) * 1e-150)
    rows.append(rng.normal(size=d) * 1e150)
    rows.append(base * 1e100)
    return np.array(rows)


CONFIGS = [
    dict(depth=0, W=1.0, b=0.0),
    dict(depth=1, W=1.0, b=0.0),
    dict(depth=2, W=math.sqrt(2.0), b=0.0),
    dict(depth=3, W=[1.0, 1.3, 0.7, 2.0], b=[0.1, 0.5, 0.0, 0.2]),
]


def _reference(x, y, cfg, activation="relu"):
    out = np.empty((len(x), len(y), 2))
    diag1 = np.empty((len(x), 2))
    diag2 = np.empty((len(y), 2))
    for i, a in enumerate(x):
        for j, c in enumerate(y):
            k, tk, q1, t1, q2, t2 = fc_pair(a, c, cfg["depth"], cfg["W"], cfg["b"], activation)
            out[i, j] = float(k), float(tk)
            diag1[i] = float(q1), float(t1)
            diag2[j] = float(q2), float(t2)
    return out, diag1, diag2


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"depth{c['depth']}")
def test_relu_against_mpmath_on_adversarial_rows(cfg, asxp, tonp):
    x = adversarial_rows()
    ref, diag, _ = _reference(x, x, cfg)
    got = K.fc(asxp(x), depth=cfg["depth"], W_std=cfg["W"], b_std=cfg["b"])
    for idx, name in enumerate(("nngp", "ntk")):
        val = tonp(getattr(got, name))
        scale = np.outer(np.sqrt(diag[:, idx]), np.sqrt(diag[:, idx]))  # no under/overflow at 1e±300
        err = np.abs(val - ref[:, :, idx])
        # every entry within 1e-13·√(K(x,x)K(x',x')) (zero rows: exact 0 expected)
        assert np.all(err <= 1e-13 * scale), (name, np.max(err / np.where(scale > 0, scale, 1)))
        rel_diag = np.abs(np.diag(val) - diag[:, idx]) / np.where(diag[:, idx] > 0, diag[:, idx], 1)
        assert np.all(rel_diag <= 1e-14), (name, rel_diag.max())
        assert np.all(np.isfinite(val))


def test_relu_rectangular_against_mpmath(asxp, tonp):
    x = adversarial_rows(seed=1)
    y = adversarial_rows(seed=1)[::-1][:7] * 0.5
    cfg = CONFIGS[3]
    ref, d1, d2 = _reference(x, y, cfg)
    got = K.fc(asxp(x), asxp(y), depth=cfg["depth"], W_std=cfg["W"], b_std=cfg["b"])
    for idx, name in enumerate(("nngp", "ntk")):
        scale = np.outer(np.sqrt(d1[:, idx]), np.sqrt(d2[:, idx]))
        assert np.all(np.abs(tonp(getattr(got, name)) - ref[:, :, idx]) <= 1e-13 * scale)


def test_float32_accuracy(asxp, tonp, xp):
    x = adversarial_rows()[:-3].astype(np.float32)  # float32 cannot hold 1e±150
    cfg = CONFIGS[2]
    ref, diag, _ = _reference(x.astype(np.float64), x.astype(np.float64), cfg)
    got = K.fc(asxp(x), depth=cfg["depth"], W_std=cfg["W"], b_std=cfg["b"])
    assert got.ntk.dtype == xp.float32
    for idx, name in enumerate(("nngp", "ntk")):
        scale = np.outer(np.sqrt(diag[:, idx]), np.sqrt(diag[:, idx]))  # no under/overflow at 1e±300
        assert np.all(np.abs(tonp(getattr(got, name)).astype(np.float64) - ref[:, :, idx]) <= 1e-5 * scale)


def test_erf_against_mpmath(asxp, tonp):
    rng = np.random.default_rng(3)
    base = rng.normal(size=5)
    x = np.array([base, _rotate(base, 1e-8, rng), -_rotate(base, 1e-6, rng) * 2, np.zeros(5), rng.normal(size=5) * 3])
    cfg = dict(depth=2, W=[1.0, 1.5, 0.8], b=[0.0, 0.3, 0.1])
    ref, diag, _ = _reference(x, x, cfg, "erf")
    got = K.fc(asxp(x), depth=2, activation="erf", W_std=cfg["W"], b_std=cfg["b"])
    for idx, name in enumerate(("nngp", "ntk")):
        scale = np.outer(np.sqrt(diag[:, idx]), np.sqrt(diag[:, idx]))  # no under/overflow at 1e±300
        assert np.all(np.abs(tonp(getattr(got, name)) - ref[:, :, idx]) <= 1e-13 * scale)


# ------------------------------------------------------------------ quadrature route


def test_erf_closed_form_equals_quadrature(asxp, tonp):
    """Gauss–Hermite converges geometrically for the smooth erf: at 128 points it matches to ~1e-12."""
    rng = np.random.default_rng(4)
    x = asxp(rng.normal(size=(5, 4)))
    exact = K.fc(x, depth=2, activation="erf", b_std=0.3)
    quad = K.fc(x, depth=2, activation="erf", b_std=0.3, method="quadrature", quadrature_points=128)
    for name in ("nngp", "ntk"):
        e, q = tonp(getattr(exact, name)), tonp(getattr(quad, name))
        assert np.max(np.abs(e - q)) <= 1e-11 * np.max(np.abs(e))
    diag = K.fc_diagonal(x, depth=2, activation="erf", b_std=0.3)
    assert np.allclose(tonp(diag.ntk), np.diag(tonp(exact.ntk)), rtol=1e-14, atol=0)


def test_relu_quadrature_converges_to_closed_form(asxp, tonp):
    """ReLU's kink limits Gauss–Hermite to algebraic convergence; the NNGP error must halve per doubling."""
    rng = np.random.default_rng(5)
    x = asxp(rng.normal(size=(4, 3)))
    exact = tonp(K.fc(x, depth=1).nngp)
    errs = [np.max(np.abs(tonp(K.fc(x, depth=1, method="quadrature", quadrature_points=n).nngp) - exact)) for n in (32, 64, 128, 256)]
    slopes = np.diff(np.log2(errs))
    assert np.all(slopes < -0.8), (errs, slopes)


def test_tanh_quadrature_against_scipy_dblquad(asxp, tonp):
    """Gauss–Hermite for tanh (analytic, poles at ±iπ/2) converges geometrically; at 256 points it agrees
    with adaptive 2-D integration (scipy dblquad, error ~1e-13) to 1e-12."""
    from scipy import integrate

    x = np.array([[1.0, 2.0, -0.5], [0.3, -1.0, 2.0]])
    g = x @ x.T / 3
    chol = np.linalg.cholesky(g)

    def expect(f):
        def integrand(z2, z1):
            return f(chol[0, 0] * z1) * f(chol[1, 0] * z1 + chol[1, 1] * z2) * np.exp(-(z1 * z1 + z2 * z2) / 2) / (2 * np.pi)

        return integrate.dblquad(integrand, -12, 12, -12, 12, epsabs=1e-14, epsrel=1e-13)[0]

    nngp = expect(np.tanh)
    ntk = nngp + expect(lambda u: 1 - np.tanh(u) ** 2) * g[0, 1]
    k = K.fc(asxp(x), depth=1, activation="tanh", quadrature_points=256)
    assert abs(tonp(k.nngp)[0, 1] - nngp) < 1e-12
    assert abs(tonp(k.ntk)[0, 1] - ntk) < 1e-12
    diag = K.fc_diagonal(asxp(x), depth=1, activation="tanh", quadrature_points=256)
    assert np.allclose(tonp(diag.ntk), np.diag(tonp(k.ntk)), rtol=1e-13, atol=0)


# ------------------------------------------------------------------ identities of the seeds


def test_seed000_eq63_equals_fc(asxp, tonp):
    x = adversarial_rows()
    a = tonp(K.two_layer_relu_ntk(asxp(x)))
    b = tonp(K.fc(asxp(x), depth=1, W_std=1.0).ntk)
    scale = np.outer(np.sqrt(np.diag(b)), np.sqrt(np.diag(b)))
    assert np.all(np.abs(a - b) <= 4 * EPS64 * scale)
    # and against the formula with h(u) as printed, in mpmath-free float64 on benign rows
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(5, 9)), rng.normal(size=(3, 9))
    u = (x @ y.T) / np.outer(np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1))
    h = 2 * u * (np.pi - np.arccos(u)) + np.sqrt(1 - u**2)
    printed = np.outer(np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)) * h / (2 * np.pi * 9)
    assert np.allclose(tonp(K.two_layer_relu_ntk(asxp(x), asxp(y))), printed, rtol=1e-13, atol=0)


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 5])
def test_arora_scaling_identities(depth, asxp, tonp):
    """Seed 004 vs docs/conventions.md, 'FC kernels': Θ_Arora = d·Θ_NT(W = 1, √2, …) and Θ_NT(W = 1) = Θ_Arora/(d·2^L)."""
    rng = np.random.default_rng(depth)
    d = 7
    x, y = asxp(rng.normal(size=(5, d))), asxp(rng.normal(size=(4, d)))
    ar = tonp(K.arora_ntk(x, y, depth=depth))
    he = tonp(K.fc(x, y, depth=depth, W_std=[1.0] + [math.sqrt(2.0)] * depth).ntk)
    ones = tonp(K.fc(x, y, depth=depth, W_std=1.0).ntk)
    assert np.allclose(ar, d * he, rtol=1e-13, atol=0)
    assert np.allclose(ones, ar / (d * 2**depth), rtol=1e-13, atol=0)


def test_seed002_kernel_identity_and_monte_carlo(asxp, tonp):
    """K = (r_w²/2)K₁ + (r_u²/2)(K₁+K₂) equals d·[r_w²(Θ − Σ) + r_u²Σ] of fc(depth 1, W = 1), and is the
    per-neuron expected tangent kernel of f = Σ w_j[u_jᵀx]₊ (Monte Carlo, 4σ band)."""
    rng = np.random.default_rng(8)
    d = 5
    x = rng.normal(size=(4, d))
    r_w, r_u = 0.7, 1.3
    Kw = tonp(K.wei_kernel(asxp(x), r_w=r_w, r_u=r_u))
    k = K.fc(asxp(x), depth=1)
    ntk, nngp = tonp(k.ntk), tonp(k.nngp)
    assert np.allclose(Kw, d * (r_w**2 * (ntk - nngp) + r_u**2 * nngp), rtol=1e-13, atol=1e-15)
    m = 400_000
    u = rng.normal(size=(m, d)) * r_u
    w = rng.normal(size=m) * r_w
    pre = x @ u.T
    grad_w = np.maximum(pre, 0)  # ∂f/∂w_j
    grad_u_scale = w * (pre > 0)  # ∂f/∂u_j = w_j 𝟙(u_jᵀx>0) x
    samples = grad_w[:, None, :] * grad_w[None, :, :] + (x @ x.T)[:, :, None] * grad_u_scale[:, None, :] * grad_u_scale[None, :, :]
    mc = samples.mean(axis=2)
    se = samples.std(axis=2) / np.sqrt(m)
    assert np.all(np.abs(mc - Kw) <= 4 * se + 1e-12)


def test_chen_preset(asxp, tonp):
    rng = np.random.default_rng(9)
    x = asxp(rng.normal(size=(4, 6)))
    assert np.array_equal(tonp(K.chen_ntk(x, depth=1)), tonp(K.fc(x, depth=1, W_std=1.0, get="ntk").ntk))


# ------------------------------------------------------------------ structural properties


def test_relu_diagonal_closed_form(asxp, tonp):
    """W = 1, no bias: Σ⁽ʰ⁾(x,x) = ‖x‖²/(d 2ʰ) and Θ⁽ᴸ⁾(x,x) = (L+1)‖x‖²/(d 2ᴸ); with He scaling (W = √2
    after the input layer) the NNGP diagonal of unit inputs stays 1/d at every depth."""
    rng = np.random.default_rng(10)
    x = rng.normal(size=(6, 8))
    x[0] = 0.0
    sq = np.sum(x**2, axis=1)
    for L in range(0, 5):
        full = K.fc(asxp(x), depth=L)
        diag = K.fc_diagonal(asxp(x), depth=L)
        expect_nngp, expect_ntk = sq / (8 * 2**L), (L + 1) * sq / (8 * 2**L)
        for got_n, got_t in ((np.diag(tonp(full.nngp)), np.diag(tonp(full.ntk))), (tonp(diag.nngp), tonp(diag.ntk))):
            assert np.allclose(got_n, expect_nngp, rtol=1e-14, atol=0)  # the diagonal requirement of issue 2
            assert np.allclose(got_t, expect_ntk, rtol=1e-14, atol=0)
        unit = x[1:] / np.linalg.norm(x[1:], axis=1, keepdims=True)
        he = tonp(K.fc_diagonal(asxp(unit), depth=L, W_std=[1.0] + [math.sqrt(2)] * L).nngp)
        assert np.allclose(he, 1 / 8, rtol=1e-14, atol=0)


def test_zero_rows_have_zero_kernel_without_bias(asxp, tonp):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(3, 4))
    x[1] = 0
    for act in ("relu", "erf", "tanh"):
        k = K.fc(asxp(x), depth=2, activation=act)
        ntk = tonp(k.ntk)
        assert np.all(ntk[1] == 0) and np.all(ntk[:, 1] == 0)
        assert np.all(np.isfinite(ntk))
    kb = tonp(K.fc(asxp(x), depth=2, b_std=0.5).ntk)  # with bias: finite, positive diagonal
    assert np.all(np.isfinite(kb)) and kb[1, 1] > 0


def test_exact_symmetry_psd_and_transpose(asxp, tonp):
    rng = np.random.default_rng(12)
    x = rng.normal(size=(37, 5))
    x[5] = x[3]
    k = K.fc(asxp(x), depth=3, b_std=0.2, block_size=8)
    for name in ("nngp", "ntk"):
        a = tonp(getattr(k, name))
        assert np.array_equal(a, a.T)
        w = np.linalg.eigvalsh(a)
        assert w.min() >= -37 * EPS64 * np.abs(w).max()
    y = rng.normal(size=(11, 5))
    kxy = tonp(K.fc(asxp(x), asxp(y), depth=3, b_std=0.2).ntk)
    kyx = tonp(K.fc(asxp(y), asxp(x), depth=3, b_std=0.2).ntk)
    assert np.allclose(kxy, kyx.T, rtol=1e-14, atol=0)


def test_blocking_does_not_change_values(asxp, tonp):
    rng = np.random.default_rng(13)
    x = rng.normal(size=(23, 4))
    big = tonp(K.fc(asxp(x), depth=2, block_size=1000).ntk)
    scale = np.outer(np.sqrt(np.diag(big)), np.sqrt(np.diag(big)))
    for bs in (1, 5, 7):
        small = tonp(K.fc(asxp(x), depth=2, block_size=bs).ntk)
        # blocks only change the BLAS summation order of x·x': differences stay at rounding level
        assert np.all(np.abs(small - big) <= 16 * EPS64 * scale)
        assert np.array_equal(small, small.T)


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 6),
    d=st.integers(1, 5),
    depth=st.integers(0, 3),
    log_c=st.floats(-30, 30),
)
def test_positive_homogeneity(seed, n, d, depth, log_c, asxp, tonp):
    """Without bias, ReLU kernels are 2-homogeneous in the pair: K(cx, x') = c·K(x, x') for c > 0
    (exactly for powers of two, to rounding otherwise)."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, d)), rng.normal(size=(3, d))
    base = tonp(K.fc(asxp(x), asxp(y), depth=depth).ntk)
    c2 = 2.0 ** round(log_c)
    assert np.array_equal(tonp(K.fc(asxp(c2 * x), asxp(y), depth=depth).ntk), c2 * base)
    c = math.exp(log_c)
    scaled = tonp(K.fc(asxp(c * x), asxp(y), depth=depth).ntk)
    scale = np.sqrt(np.outer(np.sum(x**2, 1), np.sum(y**2, 1))) / d
    assert np.all(np.abs(scaled - c * base) <= 64 * EPS64 * c * scale)


def test_numpy_and_strict_inputs_agree():
    """The same inputs as NumPy and as array_api_strict arrays give the same kernel (≤ 1e-14 relative)."""
    xps = pytest.importorskip("array_api_strict")
    import array_api_compat.numpy as xnp

    from ntkref import to_numpy

    x = adversarial_rows()
    a = to_numpy(K.fc(xnp.asarray(x), depth=3, b_std=0.1).ntk)
    b = to_numpy(K.fc(xps.asarray(x), depth=3, b_std=0.1).ntk)
    scale = np.outer(np.sqrt(np.diag(a)), np.sqrt(np.diag(a)))
    assert np.all(np.abs(a - b) <= 1e-14 * scale)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(depth=-1), "depth"),
        (dict(depth=1.5), "depth"),
        (dict(W_std=-1.0), "W_std"),
        (dict(b_std=float("nan")), "b_std"),
        (dict(W_std=[1.0, 2.0, 3.0]), "W_std"),
        (dict(activation="softplus"), "activation"),
        (dict(get="cov"), "get"),
        (dict(method="mc"), "method"),
        (dict(quadrature_points=1000), "quadrature_points"),
        (dict(block_size=0), "block_size"),
    ],
)
def test_bad_parameters(kwargs, match, asxp):
    x = asxp(np.ones((2, 3)))
    with pytest.raises(InvalidParameterError, match=match):
        K.fc(x, **kwargs)


def test_bad_arrays(asxp):
    with pytest.raises(InvalidParameterError, match="x1"):
        K.fc(asxp(np.ones(3)))
    with pytest.raises(InvalidParameterError, match="features"):
        K.fc(asxp(np.ones((2, 3))), asxp(np.ones((2, 4))))
    bad = np.ones((2, 3))
    bad[0, 1] = np.nan
    with pytest.raises(InvalidParameterError, match="NaN"):
        K.fc(asxp(bad))
    bad[0, 1] = np.inf
    with pytest.raises(InvalidParameterError, match="x2"):
        K.fc(asxp(np.ones((2, 3))), asxp(bad))
    with pytest.raises(InvalidParameterError, match="x1"):
        K.two_layer_relu_ntk(asxp(np.ones((2, 3, 1))))


# ------------------------------------------------------------------ device placement


_DEVICE_CALLS = {
    "fc-relu": lambda x, y: K.fc(x, depth=2),
    "fc-relu-x2": lambda x, y: K.fc(x, y, depth=2, get="ntk"),
    "fc-relu-bias": lambda x, y: K.fc(x, y, depth=2, W_std=1.3, b_std=0.4),
    "fc-erf-bias": lambda x, y: K.fc(x, y, depth=2, activation="erf", b_std=0.2),
    "fc-tanh-quadrature": lambda x, y: K.fc(x, y, depth=1, activation="tanh", b_std=0.1, quadrature_points=256),
    "fc-relu-forced-quadrature": lambda x, y: K.fc(x, depth=1, method="quadrature", quadrature_points=8),
    "fc_diagonal-relu": lambda x, y: K.fc_diagonal(x, depth=2, b_std=0.3),
    "fc_diagonal-erf": lambda x, y: K.fc_diagonal(x, depth=2, activation="erf", b_std=0.3),
    "fc_diagonal-tanh": lambda x, y: K.fc_diagonal(x, depth=1, activation="tanh", quadrature_points=256),
    "two_layer_relu_ntk": lambda x, y: K.two_layer_relu_ntk(x, y),
    "relu_h": lambda x, y: K.relu_h(x[:, 0] / 10),
    "wei_k1_k2": lambda x, y: K.wei_k1_k2(x),
    "wei_kernel": lambda x, y: K.wei_kernel(x, y, r_w=0.5, r_u=2.0),
    "arora_ntk": lambda x, y: K.arora_ntk(x, depth=2),
    "chen_ntk": lambda x, y: K.chen_ntk(x, y, depth=2),
}


@pytest.mark.parametrize("name", list(_DEVICE_CALLS))
def test_public_functions_return_arrays_on_the_input_device(name):
    """Inputs on array_api_strict's device1 (the CPU stand-in for a GPU) give results on device1."""
    strict, dev = _device1()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3))
    x[1] = 2.0 * x[0]  # parallel rows: the near-parallel refinement runs too
    x[2] = -x[0]
    y = rng.normal(size=(4, 3))
    xs = strict.asarray(x, device=dev)
    ys = strict.asarray(y, device=dev)
    _assert_on_device(_DEVICE_CALLS[name](xs, ys), strict, dev)


# ------------------------------------------------- finite or an error at the ends of the range


def _huge_pair(value):
    return np.array([[value, 0.0], [1.0, 1.0]])


@pytest.mark.parametrize(
    "call, rows, dtype",
    [
        (lambda x: K.fc(x, b_std=1.0), _huge_pair(1e300), "float64"),  # was NaN
        (lambda x: K.fc(x), _huge_pair(1e300), "float64"),  # was inf on the diagonal
        (lambda x: K.fc(x, activation="erf"), _huge_pair(1e300), "float64"),  # was NaN
        (lambda x: K.fc(x, activation="tanh"), _huge_pair(-1e300), "float64"),  # was NaN
        (lambda x: K.fc(x, activation="tanh"), _huge_pair(1e20), "float32"),  # was NaN
        (lambda x: K.fc(x, depth=3, b_std=0.5, W_std=2.0), _huge_pair(1e155), "float64"),
        (lambda x: K.fc_diagonal(x, b_std=1.0), _huge_pair(1e300), "float64"),
        (lambda x: K.arora_ntk(x), _huge_pair(1e300), "float64"),  # was inf
        (lambda x: K.two_layer_relu_ntk(x), _huge_pair(1e300), "float64"),
        (lambda x: K.wei_kernel(x), _huge_pair(1e300), "float64"),
    ],
)
def test_rows_beyond_the_representable_range_are_refused(call, rows, dtype, asxp, xp):
    x = asxp(rows, dtype=getattr(xp, dtype))
    with pytest.raises(InvalidParameterError, match=r"'x1?' parameter .*representable range") as info:
        call(x)
    assert isinstance(info.value, ValueError)


def test_cross_kernel_names_x2(asxp):
    with pytest.raises(InvalidParameterError, match="'x2' parameter of fc .*at most"):
        K.fc(asxp(np.ones((2, 2))), asxp(_huge_pair(1e300)))


@pytest.mark.parametrize("name", ["W_std", "b_std"])
@pytest.mark.parametrize("value", [1e200, [1.0, 1e160]])
def test_standard_deviations_beyond_the_range_are_refused(name, value, asxp):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of fc must be .*range"):
        K.fc(asxp(np.ones((2, 2))), **{name: value})


def test_overflow_of_the_output_is_an_error_not_inf(asxp):
    # every input is in range, but W_std = 1e100 at each of 4 layers multiplies the kernel by 1e800
    with pytest.raises(InvalidParameterError, match="fc: the kernel .*representable range"):
        K.fc(asxp(np.ones((2, 2))), depth=3, W_std=1e100)
    with pytest.raises(InvalidParameterError, match="fc_diagonal: the kernel .*representable range"):
        K.fc_diagonal(asxp(np.ones((2, 2))), depth=3, W_std=1e100)


@pytest.mark.parametrize("activation", ["relu", "erf"])
@pytest.mark.parametrize("b_std", [0.0, 1.0, 1e10])
@pytest.mark.parametrize("scale", [3e153, 1e150, 1e-300])
def test_ends_of_the_range_against_mpmath(activation, b_std, scale, asxp, tonp, monkeypatch):
    # up to the documented limit the kernels are finite and as accurate as at scale 1 (mpmath at 800 digits:
    # the erf reference cancels (1 + 2q)² − 4k² at q ~ 1e306)
    from . import _mp_reference

    monkeypatch.setattr(_mp_reference, "DPS", 800)
    x = np.array([[scale, 0.0], [1.0, 1.0], [0.3 * scale, -0.7 * scale]])
    k = K.fc(asxp(x), depth=2, b_std=b_std, activation=activation)
    got = {"nngp": tonp(k.nngp), "ntk": tonp(k.ntk)}
    tiny = np.finfo(np.float64).smallest_subnormal
    for i in range(3):
        for j in range(3):
            ref = fc_pair(x[i], x[j], 2, 1.0, b_std, activation)
            for key, r, r_ii, r_jj in (("nngp", ref[0], ref[2], ref[4]), ("ntk", ref[1], ref[3], ref[5])):
                bound = 1e-13 * float((r_ii * r_jj) ** 0.5) + 2 * tiny  # values below 1e-323 round to 0
                assert abs(got[key][i, j] - float(r)) <= bound, (key, i, j, got[key][i, j], float(r))


_XLA_FTZ = pytest.mark.xfail(
    condition=__import__("os").environ.get("NTKREF_BACKEND", "") == "jax", strict=True,
    reason="XLA on the CPU flushes subnormal intermediates to zero (flush-to-zero), so rows of norm ~1e-300 "
    "lose their scale on JAX; documented in the README's backend table",
)


@pytest.mark.parametrize("activation, gain", [pytest.param("tanh", 1.0, marks=_XLA_FTZ), ("erf", 4 / math.pi)])
def test_tiny_rows_keep_their_scale(activation, gain, asxp, tonp):
    # σ(u) = σ'(0)·u + O(u³): at scale c = 1e-150 the kernel is c²·gain^depth·x·x'/d to rounding
    x = np.random.default_rng(0).normal(size=(4, 3))
    c = 1e-150
    k = K.fc(asxp(c * x), depth=2, activation=activation)
    diag = K.fc_diagonal(asxp(c * x), depth=2, activation=activation)
    linear = c * c * gain**2 * (x @ x.T) / 3
    root = np.sqrt(np.diag(linear))
    assert np.all(np.abs(tonp(k.nngp) - linear) <= 1e-13 * np.outer(root, root))
    assert np.allclose(tonp(diag.nngp), np.diag(linear), rtol=1e-13, atol=0)
    assert np.allclose(np.diag(tonp(k.ntk)), tonp(diag.ntk), rtol=1e-13, atol=0)
    assert np.all(tonp(diag.ntk) > 0)


@_XLA_FTZ
def test_rows_of_norm_1e_300_against_unit_rows(asxp, tonp):
    # K(cx, x') ~ c = 1e-300 is representable; the per-row scale √E[σ(u)²] used to underflow (u² ~ 1e-600),
    # giving 0 in the closed erf form and in the quadrature alike; the closed form is checked against mpmath
    # in test_ends_of_the_range_against_mpmath, here the quadrature route must agree with it
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 3)), rng.normal(size=(2, 3))
    c = 1e-300
    closed = K.fc(asxp(c * x), asxp(y), depth=2, activation="erf")
    quad = K.fc(asxp(c * x), asxp(y), depth=2, activation="erf", method="quadrature")
    unit = K.fc(asxp(x), asxp(y), depth=2, activation="erf")
    for key in ("nngp", "ntk"):
        a, b = tonp(getattr(closed, key)), tonp(getattr(quad, key))
        assert np.all(np.abs(a) > 1e-3 * c), key
        assert np.all(np.abs(a - b) <= 1e-12 * c), key
        assert np.all(np.abs(a) <= 10 * c * np.max(np.abs(tonp(getattr(unit, key))))), key


# ------------------------------------------------------------------ memory guard


def _limit_memory(monkeypatch, available):
    from ntkref._lib import memory

    monkeypatch.setattr(memory, "available_memory", lambda xp, like: available)


def test_fc_refuses_outputs_beyond_the_available_memory(monkeypatch, asxp, xp):
    # 200 000 rows: two 200 000² float64 outputs are 596 GiB (twice that on JAX, which assembles the blocks by
    # concatenation); refused before anything of that size is allocated
    import array_api_compat

    twice = 2 if array_api_compat.is_jax_namespace(xp) else 1

    def gib(n_out, itemsize):
        return f"{twice * n_out * 200_000**2 * itemsize / 2**30:.3g}".replace("+", r"\+")

    _limit_memory(monkeypatch, 64 * 2**30)
    x = asxp(np.ones((200_000, 1)))
    with pytest.raises(InvalidParameterError, match=rf"'x1'/'x2' parameters .* of fc would need about {gib(2, 8)} GiB") as info:
        K.fc(x)
    for way_out in ("float32", "block_size", "x1[i:j]", "--out"):
        assert way_out in str(info.value)
    with pytest.raises(InvalidParameterError, match=f"about {gib(1, 8)} GiB"):  # one output, or float32, halves it
        K.fc(x, get="ntk")
    with pytest.raises(InvalidParameterError, match=f"about {gib(1, 4)} GiB"):
        K.fc(x, get="ntk", dtype="float32")


@pytest.mark.parametrize("block_size, fits", [(64, True), (512, False)])
def test_fc_memory_guard_counts_the_working_set(monkeypatch, asxp, tonp, block_size, fits):
    # 300 × 300 outputs are 1.4 MB; 12·512² float64 working floats per block are 25 MB, 12·64² are 0.4 MB
    # (the blocked array-API path: CuPy's fused kernel has no such working set and sizes its own blocks)
    _limit_memory(monkeypatch, 4 * 2**20)
    x = np.random.default_rng(0).normal(size=(300, 3))
    kw = dict(block_size=block_size, n_jobs=1, engine="array_api")
    if fits:
        got = tonp(K.fc(asxp(x), **kw).ntk)
        _limit_memory(monkeypatch, None)  # unknown: no guard
        assert np.array_equal(got, tonp(K.fc(asxp(x), **kw).ntk))
    else:
        with pytest.raises(InvalidParameterError, match="of fc would need about"):
            K.fc(asxp(x), **kw)


def test_available_memory_is_positive_or_unknown(xp, asxp):
    from ntkref._lib import memory

    available = memory.available_memory(xp, asxp(np.ones(1)))
    assert available is None or available > 0


def test_host_memory_reading_never_refuses_small_arrays(monkeypatch):
    # MemAvailable can read ~0 for a moment on a busy machine: the host reading is floored at 256 MiB, so
    # the guard refuses Gram matrices of gigabytes, never a small kernel (seen: 1.6 KB refused under load).
    import builtins
    import io

    from ntkref._lib import memory

    real_open = builtins.open

    def fake_open(path, *a, **k):
        if str(path) == "/proc/meminfo":
            return io.StringIO("MemTotal:       24000000 kB\nMemAvailable:          0 kB\n")
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert memory.available_memory(np, np.ones(1)) == 256 * 2**20
    K.fc(np.ones((3, 2)), depth=1)  # 72 bytes of output: computed, not refused


def test_activation_refuses_non_callables():
    """Activation(fn, derivative) is called inside the quadrature: a non-callable is refused when it is made,
    naming the field (it used to be accepted and fail later, deep inside fc)."""
    with pytest.raises(InvalidParameterError, match="'fn'"):
        K.Activation("bogus", lambda z: z)
    with pytest.raises(InvalidParameterError, match="'derivative'"):
        K.Activation(lambda z: z, "bogus")


def test_fc_diagonal_names_its_parameter_x(asxp, tonp):
    """fc_diagonal's array is 'x' (not fc's 'x1'); its diagonal equals fc's at ordinary inputs."""
    x = np.random.default_rng(5).normal(size=(4, 3))
    with pytest.raises(InvalidParameterError, match="'x' parameter of fc_diagonal"):
        K.fc_diagonal(asxp(np.where(np.eye(4, 3) > 0, np.nan, x)))
    with pytest.raises(InvalidParameterError, match="'x' parameter of fc_diagonal"):
        K.fc_diagonal(asxp(x[None]))
    d = K.fc_diagonal(asxp(x), depth=2, b_std=0.1)
    full = K.fc(asxp(x), depth=2, b_std=0.1)
    np.testing.assert_allclose(tonp(d.ntk), np.diag(tonp(full.ntk)), rtol=1e-13, atol=0)


def test_mixed_float32_float64_inputs_promote_in_either_order(asxp, tonp):
    # issue 14: float32 x1 with float64 x2 gave float32, the reverse order float64; both are float64 now, equal
    # to the float64 computation on the float32 values (no silent rounding of the float64 input)
    rng = np.random.default_rng(9)
    a32 = rng.standard_normal((3, 4)).astype(np.float32)
    b64 = rng.standard_normal((2, 4))
    ref = tonp(K.fc(asxp(a32.astype(np.float64)), asxp(b64), depth=2).ntk)
    one = tonp(K.fc(asxp(a32), asxp(b64), depth=2).ntk)
    two = tonp(K.fc(asxp(b64), asxp(a32), depth=2).ntk)
    assert one.dtype == two.dtype == np.float64
    np.testing.assert_array_equal(one, ref)
    np.testing.assert_array_equal(two, ref.T)


def test_quadrature_refuses_inputs_it_cannot_resolve(asxp, tonp):
    """For an activation without a closed form the Gauss–Hermite rule is the answer; its error is estimated by the
    2n-point rule on the diagonal.  Where the estimate is below 1e-8 the kernel is accurate (erf forced through the
    same route via a custom Activation, against erf's closed form); where it is not, the input is refused, naming
    quadrature_points: tanh at W·‖x‖/√d ≈ 7 came out 36 % low (4.6373 by adaptive quadrature) with no warning."""
    erf = K.Activation(_erf, lambda u: (2 / math.sqrt(math.pi)) * np.exp(-u * u), name="erf-by-quadrature")
    x = np.array([[1.0, 0.0], [0.8, 0.6]]) * math.sqrt(2)  # rows of first-layer scale 1
    for scale in (0.5, 1.0, 1.5):
        got = K.fc(x * scale, depth=2, activation=erf).ntk
        ref = K.fc(x * scale, depth=2, activation="erf").ntk
        assert np.max(np.abs(got - ref)) <= 1e-8 * np.max(np.abs(ref))
    for scale in (2.5, 7.07):
        with pytest.raises(InvalidParameterError, match="quadrature_points"):
            K.fc(asxp(x * scale), depth=1, activation="tanh")
        with pytest.raises(InvalidParameterError, match="quadrature_points"):
            K.fc_diagonal(asxp(x * scale), depth=1, activation="tanh")


def _erf(u):
    from scipy.special import erf

    return erf(u)


@pytest.mark.parametrize("error_bound", [False, True])
def test_an_overflowing_kernel_is_the_named_error_not_a_warning_first(error_bound):
    """float32 rows and a large W_std whose kernel overflows: the InvalidParameterError of check_finite_kernel,
    with no NumPy RuntimeWarning before it (which ``-W error`` turned into the exception raised instead)."""
    import warnings

    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    x[1] *= 1e6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidParameterError, match="outside the representable range of float32"):
            K.fc(x, depth=4, W_std=562.9953801390777, error_bound=error_bound)
