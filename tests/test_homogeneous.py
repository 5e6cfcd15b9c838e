"""Seed 002's bias-free homogeneous ReLU nets (ntkref.nets._homogeneous).

Independent routes: explicit loops over units (eq. (2.2)), central finite differences (f is affine in every single
weight between ReLU kinks, so coordinate-wise central differences are exact up to rounding), Euler's identity for
homogeneous functions, AM–GM equality cases, and hand-built constructions (width-4 net on 𝒟).
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntkref import InvalidParameterError
from ntkref.nets._homogeneous import (
    HomogeneousNet,
    balanced_two_layer,
    rebalance,
    two_layer_measure,
    width4_net,
    zero_pad,
)
from ._device import assert_on_device as _assert_on_device, device1 as _device1

seeds = st.integers(0, 2**32 - 1)


def _net_and_data(seed, q, n_outputs=1, n=5, d=3, m=4, scale=1.0):
    rng = np.random.default_rng(seed)
    net = HomogeneousNet(d, m, depth=q, n_outputs=n_outputs)
    return net, rng, rng.standard_normal((n, d))


def sample_D(n, d, rng):
    """Private 𝒟 sampler (seed 002 eq. (2.1)) for these tests; the library's lives in ntkref.distributions."""
    atom = rng.integers(0, 4, size=n)  # (y, x1, x2) ∈ {(+1,+1,0), (+1,−1,0), (−1,0,+1), (−1,0,−1)}
    x = np.empty((n, d))
    x[:, 0] = np.where(atom == 0, 1.0, np.where(atom == 1, -1.0, 0.0))
    x[:, 1] = np.where(atom == 2, 1.0, np.where(atom == 3, -1.0, 0.0))
    x[:, 2:] = rng.choice([-1.0, 1.0], size=(n, d - 2))
    y = np.where(atom < 2, 1.0, -1.0)
    return x, y


# ----------------------------------------------------------------------------------------------- forward
@given(seed=seeds, m=st.integers(1, 6), d=st.integers(1, 5))
def test_two_layer_matches_eq_2_2_loop(xp, asxp, tonp, seed, m, d):
    # f(x) = Σ_j w_j [u_jᵀx]₊ computed unit by unit in NumPy
    net = HomogeneousNet(d, m)
    params = net.init(seed, xp=xp)
    x = np.random.default_rng(seed + 1).standard_normal((7, d))
    U, w = tonp(params[0]).T, tonp(params[1])[:, 0]
    expect = np.array([sum(w[j] * max(U[j] @ xi, 0.0) for j in range(m)) for xi in x])
    np.testing.assert_allclose(tonp(net.apply(params, asxp(x))), expect, rtol=1e-13, atol=1e-13)


@given(seed=seeds, q=st.integers(1, 4), n_outputs=st.sampled_from([1, 3]),
       c=st.floats(0.05, 20.0))
def test_q_positive_homogeneity(xp, asxp, tonp, seed, q, n_outputs, c):
    # f(x; cΘ) = c^q f(x; Θ), c > 0 (§4.1); products of q factors → relative error ~ q·ulp
    net, rng, x = _net_and_data(seed, q, n_outputs)
    params = net.init(rng, xp=xp)
    assert net.homogeneity == q
    f1 = tonp(net.apply([c * W for W in params], asxp(x)))
    f0 = tonp(net.apply(params, asxp(x)))
    scale = np.max(np.abs(f0)) * c**q + 1e-300
    np.testing.assert_allclose(f1, c**q * f0, rtol=0, atol=1e-13 * scale)
    # negative c is NOT a symmetry for q ≥ 2 with ReLU (positive homogeneity only)


def test_negative_scaling_is_not_a_symmetry(xp, asxp, tonp):
    net, rng, x = _net_and_data(0, 2)
    params = net.init(rng, xp=xp)
    f0, fm = tonp(net.apply(params, asxp(x))), tonp(net.apply([-W for W in params], asxp(x)))
    assert np.max(np.abs(fm - f0)) > 1e-3


# ----------------------------------------------------------------------------------------------- gradients
def _coordinate_fd(net, params_np, x, out_index, xp, asxp, tonp, h=1e-6):
    grads = []
    for ell, W in enumerate(params_np):
        g = np.zeros_like(W)
        for idx in np.ndindex(*W.shape):
            plus = [P.copy() for P in params_np]
            minus = [P.copy() for P in params_np]
            plus[ell][idx] += h
            minus[ell][idx] -= h
            fp = tonp(net.apply([asxp(P) for P in plus], asxp(x)))
            fm = tonp(net.apply([asxp(P) for P in minus], asxp(x)))
            if net.n_outputs > 1:
                fp, fm = fp[:, out_index], fm[:, out_index]
            g[idx] = np.sum(fp - fm) / (2 * h)
        grads.append(g)
    return grads


@given(seed=seeds, q=st.integers(1, 4), n_outputs=st.sampled_from([1, 2]))
def test_vjp_matches_central_differences(xp, asxp, tonp, seed, q, n_outputs):
    # f is affine in each single weight between kinks (a weight appears once per path): central differences are
    # exact up to rounding, error ≈ ulp·|f|/h ≈ 1e-16·10/1e-6 = 1e-9. Random Gaussian data: no ReLU ties a.s.; a kink
    # within h of a pre-activation (probability ~1e-6 per unit) would fail loudly, not silently.
    net, rng, x = _net_and_data(seed, q, n_outputs, n=3, d=2, m=3)
    params_np = [rng.standard_normal(s) for s in net.shapes]
    params = [asxp(P) for P in params_np]
    out_index = n_outputs - 1
    if n_outputs == 1:
        cot = np.ones(3)
    else:
        cot = np.zeros((3, n_outputs))
        cot[:, out_index] = 1.0
    got = [tonp(g) for g in net.vjp(params, asxp(x), asxp(cot))]
    expect = _coordinate_fd(net, params_np, x, out_index, xp, asxp, tonp)
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-7 * (1 + np.max(np.abs(e))))


@given(seed=seeds, q=st.integers(1, 4))
def test_jacobian_rows_and_euler_identity(xp, asxp, tonp, seed, q):
    # Euler's identity for q-homogeneous f: ⟨Θ, ∇_Θ f(x; Θ)⟩ = q f(x; Θ) — an independent check of every row
    net, rng, x = _net_and_data(seed, q, n=6, d=3, m=5)
    params = net.init(rng, xp=xp)
    J = tonp(net.jacobian(params, asxp(x)))
    assert J.shape == (6, net.n_params)
    theta = tonp(net.flatten(params))
    f = tonp(net.apply(params, asxp(x)))
    np.testing.assert_allclose(J @ theta, q * f, rtol=0, atol=1e-12 * (1 + np.max(np.abs(f))))
    # vjp with cotangent c is Jᵀc
    c = rng.standard_normal(6)
    vj = tonp(net.flatten(net.vjp(params, asxp(x), asxp(c))))
    np.testing.assert_allclose(vj, J.T @ c, rtol=0, atol=1e-12 * (1 + np.max(np.abs(J.T @ c))))
    # flatten / unflatten round trip
    back = net.unflatten(net.flatten(params))
    for a, b in zip(back, params):
        np.testing.assert_array_equal(tonp(a), tonp(b))


def test_relu_derivative_at_zero_is_one(xp, asxp, tonp):
    # the paper's convention ∇_u f = w 𝟙(uᵀx ≥ 0) x: on a class −1 point of 𝒟 (x₁ = 0) the width-4 net's units ±e₁
    # have pre-activation exactly 0 and still receive gradient w·x
    net, params = width4_net(4, xp=xp)
    x = np.array([[0.0, 1.0, -1.0, 1.0]])
    gW1 = tonp(net.vjp(params, asxp(x), asxp(np.ones(1)))[0])
    np.testing.assert_array_equal(gW1[:, 0], x[0])  # unit +e₁, w = +1
    np.testing.assert_array_equal(gW1[:, 1], x[0])  # unit −e₁, w = +1
    np.testing.assert_array_equal(gW1[:, 3], np.zeros(4))  # unit −e₂: pre-activation −1 < 0


# ----------------------------------------------------------------------------------------------- norms, init
def test_norm_and_init(xp, asxp, tonp):
    net = HomogeneousNet(3, [4, 5], depth=3, n_outputs=2)
    p1, p2 = net.init(7, xp=xp, scale=0.5), net.init(7, xp=xp, scale=0.5)
    for a, b in zip(p1, p2):
        np.testing.assert_array_equal(tonp(a), tonp(b))
    assert [tuple(W.shape) for W in p1] == [(3, 4), (4, 5), (5, 2)]
    flat = np.concatenate([tonp(W).ravel() for W in p1])
    nrm = net.norm(p1)
    assert nrm.shape == ()
    assert abs(float(nrm) - np.linalg.norm(flat)) <= 1e-14 * np.linalg.norm(flat)
    np.testing.assert_allclose(tonp(net.layer_norms(p1)), [np.linalg.norm(tonp(W)) for W in p1], rtol=1e-14)
    # the draw is N(0, scale²): a large draw has sample std within 5 standard errors of 0.5
    big = HomogeneousNet(200, 100, depth=2).init(0, xp=xp, scale=0.5)
    s = np.std(tonp(big[0]))
    assert abs(s - 0.5) < 5 * 0.5 / math.sqrt(2 * 200 * 100)
    p32 = net.init(7, xp=xp, dtype=xp.float32)
    assert p32[0].dtype == xp.float32
    assert net.apply(p32, asxp(np.ones((2, 3)), dtype=xp.float32)).dtype == xp.float32


# ----------------------------------------------------------------------------------------------- Prop. D.1, Lemma D.3
@given(seed=seeds, q=st.integers(2, 4), log_scales=st.lists(st.floats(-3, 3), min_size=4, max_size=4))
def test_rebalance_prop_D1(xp, asxp, tonp, seed, q, log_scales):
    # equal layer norms, each ≤ 1/√q (AM–GM), same function as Θ/‖Θ‖_F; unbalanced layers (scales e^{±3}) on purpose
    net, rng, x = _net_and_data(seed, q, n=6, d=3, m=4)
    params = [math.exp(s) * W for s, W in zip(log_scales, net.init(rng, xp=xp))]
    tilde = rebalance(params)
    norms = tonp(net.layer_norms(tilde))
    np.testing.assert_allclose(norms, np.full(q, norms[0]), rtol=1e-12)
    assert norms[0] ** 2 <= 1 / q * (1 + 1e-12)
    total = float(net.norm(params))
    normalized = [W / total for W in params]
    f_tilde, f_norm = tonp(net.apply(tilde, asxp(x))), tonp(net.apply(normalized, asxp(x)))
    np.testing.assert_allclose(f_tilde, f_norm, rtol=0, atol=1e-12 * (1 + np.max(np.abs(f_norm))))
    # Lemma D.3: on 𝓕_q, |f(x)| ≤ Π‖W̃_j‖_F ‖x‖ ≤ q^{−q/2}‖x‖
    assert np.all(np.abs(f_tilde) <= q ** (-q / 2) * np.linalg.norm(x, axis=1) * (1 + 1e-12))


def test_rebalance_printed_exponent_is_wrong(xp, asxp, tonp):
    # [erratum] the seed prints (Π‖W_k‖)^{1/k}; read with any exponent 1/p, p ≠ q, the product of the layer scalings
    # is (Π‖W_k‖)^{q/p}/(Π‖W_k‖ ‖Θ‖^q) ≠ 1/‖Θ‖^q, so f(·; Θ̃) ≠ f(·; Θ/‖Θ‖_F) (and the layer norms are not ≤ 1/√q)
    q = 3
    net, rng, x = _net_and_data(3, q, n=4, d=3, m=4)
    params = [2.0 * W for W in net.init(rng, xp=xp)]
    norms = [float(v) for v in tonp(net.layer_norms(params))]
    total = float(net.norm(params))
    target = tonp(net.apply([W / total for W in params], asxp(x)))
    for p in (1, 2, 4):
        scal = [float(np.prod(norms) ** (1 / p) / (nj * total)) for nj in norms]  # Python floats: no NumPy scalar * xp array
        wrong = tonp(net.apply([s * W for s, W in zip(scal, params)], asxp(x)))
        assert np.max(np.abs(wrong - target)) > 1e-3 * np.max(np.abs(target))
    right = tonp(net.apply(rebalance(params), asxp(x)))
    np.testing.assert_allclose(right, target, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("q", [2, 3, 4])
def test_lemma_D3_bound_is_attained(xp, asxp, tonp, q):
    # |f| ≤ q^{−q/2}‖x‖ on 𝓕_q is tight: rank-one layers W_j = e eᵀ/√q aligned with x = e (all entries ≥ 0)
    d = m = 3
    e = np.ones(d) / math.sqrt(d)
    net = HomogeneousNet(d, m, depth=q)
    params = [asxp(np.outer(e, e) / math.sqrt(q))] * (q - 1) + [asxp(e[:, None] / math.sqrt(q))]
    f = float(net.apply(params, asxp(e[None, :]))[0])
    assert abs(f - q ** (-q / 2)) <= 1e-14


# ----------------------------------------------------------------------------------------------- Prop. B.10, Thm 4.3
@given(seed=seeds, k=st.integers(1, 8), d=st.integers(2, 4))
def test_balanced_conversion_prop_B10(xp, asxp, tonp, seed, k, d):
    # f(x; Θ) = Σ_k μ_k[ū_kᵀx]₊ and ‖Θ‖_F² = 2‖μ‖₁ exactly; the inverse map recovers (ū, μ)
    rng = np.random.default_rng(seed)
    dirs = rng.standard_normal((k, d))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    mu = rng.standard_normal(k) * rng.integers(0, 2, size=k)  # some zeros
    if not np.any(mu):
        mu[0] = 0.3
    x = rng.standard_normal((5, d))
    net, params = balanced_two_layer(asxp(dirs), asxp(mu))
    expect = np.maximum(x @ dirs.T, 0.0) @ mu
    np.testing.assert_allclose(tonp(net.apply(params, asxp(x))), expect, rtol=0, atol=1e-13 * (1 + np.abs(expect).max()))
    assert abs(float(net.norm(params)) ** 2 - 2 * np.abs(mu).sum()) <= 1e-13 * (1 + np.abs(mu).sum())
    # support only, then padded to width k + 3 (Thm 4.3): same function, same norm
    net2, params2 = balanced_two_layer(asxp(dirs), asxp(mu), drop_zeros=True, width=k + 3)
    assert net2.widths == (k + 3,)
    np.testing.assert_allclose(tonp(net2.apply(params2, asxp(x))), expect, rtol=0, atol=1e-13 * (1 + np.abs(expect).max()))
    assert abs(float(net2.norm(params2)) ** 2 - 2 * np.abs(mu).sum()) <= 1e-13 * (1 + np.abs(mu).sum())
    back_dirs, back_mu = two_layer_measure(params)
    nz = mu != 0
    np.testing.assert_allclose(tonp(back_mu), mu, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(tonp(back_dirs)[nz], dirs[nz], rtol=0, atol=1e-13)


@given(seed=seeds)
def test_measure_of_any_net_amgm(xp, asxp, tonp, seed):
    # for any two-layer net: same function as its measure, and ‖Θ‖_F² ≥ 2‖μ‖₁ (equality only when balanced)
    net, rng, x = _net_and_data(seed, 2, n=5, d=3, m=6)
    params = net.init(rng, xp=xp)
    dirs, mu = (tonp(a) for a in two_layer_measure(params))
    np.testing.assert_allclose(tonp(net.apply(params, asxp(x))), np.maximum(x @ dirs.T, 0) @ mu, rtol=0, atol=1e-12)
    assert float(net.norm(params)) ** 2 >= 2 * np.abs(mu).sum() * (1 - 1e-14)
    # and the balanced rebuild reaches equality with the same function
    net_b, params_b = balanced_two_layer(asxp(dirs), asxp(mu))
    assert abs(float(net_b.norm(params_b)) ** 2 - 2 * np.abs(mu).sum()) <= 1e-12 * (1 + np.abs(mu).sum())
    np.testing.assert_allclose(tonp(net_b.apply(params_b, asxp(x))), tonp(net.apply(params, asxp(x))), atol=1e-12)


@given(seed=seeds, q=st.integers(2, 4), extra=st.integers(0, 3))
def test_zero_padding_thm_4_3(xp, asxp, tonp, seed, q, extra):
    net, rng, x = _net_and_data(seed, q, n=4, d=3, m=3)
    params = net.init(rng, xp=xp)
    widths = [3 + extra + i for i in range(q - 1)]
    padded = zero_pad(params, widths)
    big = HomogeneousNet(3, widths, depth=q)
    # zero units add exact zeros, but BLAS may sum in another order for other shapes: a few ulps
    f0 = tonp(net.apply(params, asxp(x)))
    np.testing.assert_allclose(tonp(big.apply(padded, asxp(x))), f0, rtol=0, atol=1e-14 * (1 + np.abs(f0).max()))
    assert abs(float(big.norm(padded)) - float(net.norm(params))) <= 1e-14 * float(net.norm(params))


# ----------------------------------------------------------------------------------------------- width-4 net on 𝒟
@pytest.mark.parametrize("d", [3, 10, 40])
def test_width4_net_margin_one_on_D(xp, asxp, tonp, d):
    # §2 / proof of Thm 2.1: y f(x) = 1 on every point of 𝒟 (exactly: integer arithmetic), ‖Θ‖_F² = 8
    x, y = sample_D(500, d, np.random.default_rng(d))
    net, params = width4_net(d, xp=xp)
    yf = y * tonp(net.apply(params, asxp(x)))
    np.testing.assert_array_equal(yf, np.ones(500))
    assert abs(float(net.norm(params)) ** 2 - 8.0) <= 1e-14


# ----------------------------------------------------------------------------------------------- bad input
def test_invalid_inputs(xp, asxp):
    with pytest.raises(InvalidParameterError, match="width"):
        HomogeneousNet(3, [4, 5], depth=2)
    with pytest.raises(InvalidParameterError, match="depth"):
        HomogeneousNet(3, 4, depth=0)
    net = HomogeneousNet(3, 4)
    params = net.init(0, xp=xp)
    with pytest.raises(InvalidParameterError, match="'x'"):
        net.apply(params, asxp(np.ones((2, 4))))
    with pytest.raises(InvalidParameterError, match="'x'"):
        net.apply(params, asxp(np.array([[1.0, np.nan, 0.0]])))
    with pytest.raises(InvalidParameterError, match="params"):
        net.apply(params[:1], asxp(np.ones((2, 3))))
    with pytest.raises(InvalidParameterError, match=r"params\[1\]"):
        net.apply([params[0], asxp(np.ones((3, 1)))], asxp(np.ones((2, 3))))
    with pytest.raises(InvalidParameterError, match="cotangent"):
        net.vjp(params, asxp(np.ones((2, 3))), asxp(np.ones(3)))
    with pytest.raises(InvalidParameterError, match="n_outputs"):
        HomogeneousNet(3, 4, n_outputs=2).jacobian(HomogeneousNet(3, 4, n_outputs=2).init(0, xp=xp),
                                                  asxp(np.ones((1, 3))))
    with pytest.raises(InvalidParameterError, match="nonzero"):
        rebalance([params[0], 0 * params[1]])
    with pytest.raises(InvalidParameterError, match="width"):
        zero_pad(params, [2])
    with pytest.raises(InvalidParameterError, match="mu"):
        balanced_two_layer(asxp(np.eye(3)), asxp(np.ones(2)))


# ------------------------------------------------------------------ device placement


_HNET = HomogeneousNet(3, 4, depth=2)
_HNET3 = HomogeneousNet(3, [4, 2], depth=3, n_outputs=2)
_DEVICE_CALLS = {
    "HomogeneousNet.init": lambda p, x, c, s, d: _HNET.init(0, scale=0.5, xp=s, device=d),
    "HomogeneousNet.apply": lambda p, x, c, s, d: _HNET.apply(p, x),
    "HomogeneousNet.apply-multi-output": lambda p, x, c, s, d: _HNET3.apply(_HNET3.init(1, xp=s, device=d), x),
    "HomogeneousNet.vjp": lambda p, x, c, s, d: _HNET.vjp(p, x, c),
    "HomogeneousNet.jacobian": lambda p, x, c, s, d: _HNET.jacobian(p, x),
    "HomogeneousNet.norm": lambda p, x, c, s, d: _HNET.norm(p),
    "HomogeneousNet.layer_norms": lambda p, x, c, s, d: _HNET.layer_norms(p),
    "HomogeneousNet.flatten": lambda p, x, c, s, d: _HNET.flatten(p),
    "HomogeneousNet.unflatten": lambda p, x, c, s, d: _HNET.unflatten(_HNET.flatten(p)),
    "balanced_two_layer": lambda p, x, c, s, d: balanced_two_layer(x, c, width=5, drop_zeros=True),
    "two_layer_measure": lambda p, x, c, s, d: two_layer_measure(p),
    "zero_pad": lambda p, x, c, s, d: zero_pad(p, 6),
    "rebalance": lambda p, x, c, s, d: rebalance(p),
    "width4_net": lambda p, x, c, s, d: width4_net(3, xp=s, device=d),
}


@pytest.mark.parametrize("name", list(_DEVICE_CALLS))
def test_public_functions_return_arrays_on_the_input_device(name):
    """Inputs and parameters on array_api_strict's device1 (the CPU stand-in for a GPU) give results on device1."""
    strict, dev = _device1()
    rng = np.random.default_rng(0)
    x = strict.asarray(rng.standard_normal((3, 3)), device=dev)
    c = strict.asarray(np.array([0.5, 0.0, -2.0]), device=dev)
    params = _HNET.init(1, xp=strict, device=dev)
    _assert_on_device(_DEVICE_CALLS[name](params, x, c, strict, dev), strict, dev)


def test_init_and_width4_use_the_default_device(monkeypatch):
    """Without xp/device, arrays are created in NTKREF_BACKEND's namespace on NTKREF_DEVICE; a list input to
    apply goes to the parameters' device."""
    strict, dev = _device1()
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    params = _HNET.init(0)
    _assert_on_device(params, strict, dev)
    _assert_on_device(width4_net(4)[1], strict, dev)
    _assert_on_device(_HNET.apply(params, [[1.0, 2.0, -1.0]]), strict, dev)
    with pytest.raises(InvalidParameterError, match="dtype"):
        _HNET.init(0, dtype=strict.int64)
    with pytest.raises(InvalidParameterError, match="dtype"):
        width4_net(4, dtype=strict.int64)


# --------------------------------------------------------------------------- extreme scales (issue 14)
def test_norms_measure_and_rebalance_at_1e300(asxp, tonp):
    """‖s·W‖ = s‖W‖ (used to be inf: ΣW² overflowed); the measure μ_j = w_j‖u_j‖ of (s·W_1, W_2) is s·μ with the
    same directions; rebalance (Prop. D.1) of (s·W_1, W_2) matches its closed form (no NaN from ‖W_1‖² = inf)."""
    net = HomogeneousNet(3, 4, depth=2)
    P = net.init(0, xp=np)
    s = 1e300
    big = [s * P[0], P[1]]
    assert float(net.norm([asxp(W) for W in P])) == pytest.approx(math.sqrt(sum(np.sum(W**2) for W in P)), rel=1e-14)
    ln = tonp(net.layer_norms([asxp(W) for W in big]))
    assert ln[0] == pytest.approx(s * np.linalg.norm(P[0]), rel=1e-14)
    assert float(net.norm([asxp(W) for W in big])) == pytest.approx(s * np.linalg.norm(P[0]), rel=1e-14)
    d_ref, mu_ref = (tonp(v) for v in two_layer_measure([asxp(W) for W in P]))
    d_big, mu_big = (tonp(v) for v in two_layer_measure([asxp(W) for W in big]))
    np.testing.assert_allclose(d_big, d_ref, rtol=1e-14)
    np.testing.assert_allclose(mu_big, s * mu_ref, rtol=1e-14)
    # rebalance closed form: W̃_j = W_j/‖W_j‖ · (‖W_1‖‖W_2‖)^{1/2}/‖Θ‖; with ‖W_1‖ ≫ ‖W_2‖, ‖Θ‖ = ‖W_1‖ (to
    # rounding), so W̃_j = W_j/‖W_j‖ · (‖W_2‖/‖W_1‖)^{1/2}
    out = [tonp(v) for v in rebalance([asxp(W) for W in big])]
    a1, a2 = np.linalg.norm(P[0]), np.linalg.norm(P[1])
    factor = math.sqrt(a2 / a1) / math.sqrt(s)
    np.testing.assert_allclose(out[0], P[0] / a1 * factor, rtol=1e-13)
    np.testing.assert_allclose(out[1], P[1] / a2 * factor, rtol=1e-13)
