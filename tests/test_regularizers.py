"""The NTK function-norm regulariser and its KRR equivalence (seed 003, Chapter 2) against independent routes.

Oracles (none shares code with ntkref.regularizers):
- numpy.linalg.solve / eigvalsh / slogdet, written out in each test, for the RKHS/KRR algebra (1.12)–(1.18),
  (2.1), (2.2), (2.5);
- scipy.integrate.solve_ivp (rtol 1e-11) of the *parameter-space* gradient flow of a random-feature model,
  and scipy.linalg.expm, for the closed-form flows (1.29), (2.31)–(2.33);
- the explicit Jacobian (``net.jacobian``) and central finite differences for Algorithm 1's stop-gradient;
- enumeration of all subsets and exact Schur-complement inequalities for Approximation 1;
- Monte Carlo (within 5 standard errors) and scipy.stats.multivariate_normal for Prop. 2.2.3, and a Monte Carlo
  empirical Rademacher complexity of the RKHS ball for (1.20)/(2.7);
- central differences of the FS-MAP objective for τ ↔ ζ (tau_from_zeta), and train_regularized's own recorded
  objective for the sub-batch τ (also the τ the seed003 validation reports);
- Weyl's inequality (Lemma 2.6.2) on random symmetric / Hermitian matrices (documentation only: numpy).
Seed errors shown failing here: (2.33)'s exponent, the signs of (2.10)/(2.11), the operator-trace reading of
(2.7).  Inputs are built with NumPy (seeded) and moved to the namespace under test.
"""
import itertools
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st

from ntkref import kernels
from ntkref import regularizers as R
from ntkref._lib.validation import InvalidParameterError
from ntkref.nets import Antisymmetric, FullyConnected, Linearized, flatten_params
from ._device import arrays_in as _arrays_in, device1 as _device1

EPS = np.finfo(np.float64).eps


def spd(n, seed, low=1e-2, high=1.0, rank=None):
    """K = AAᵀ + λI with λ ∈ [low, high]: cond(K) ≤ (‖A‖² + λ)/λ, controlled."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, rank or n))
    lam = rng.uniform(low, high)
    K = A @ A.T + lam * np.eye(n)
    return (K + K.T) / 2


def f64(tonp, x):
    return np.asarray(tonp(x), dtype=np.float64)


# ======================================================================================
# 1. RKHS norms and KRR (seed 003 (1.12)–(1.18), (2.1), (2.2), (2.5))
# ======================================================================================
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), k=st.integers(1, 3), zeta=st.floats(1e-4, 1.0))
def test_krr_primal_equals_dual_norm_and_first_order_condition(seed, n, k, zeta, asxp, tonp):
    K = spd(n, seed)
    rng = np.random.default_rng(seed + 1)
    Y = rng.standard_normal((n, k))
    cond = np.linalg.cond(K)
    alpha = f64(tonp, R.krr_fit(asxp(K), asxp(Y), zeta))
    # independent solve of (1.15)
    ref = np.linalg.solve(K + zeta * n * np.eye(n), Y)
    assert np.allclose(alpha, ref, rtol=0, atol=100 * EPS * cond * np.abs(ref).max() + 1e-300)
    # (2.1) = (2.2): αᵀKα = f(X)ᵀK⁻¹f(X) with f(X) = Kα
    dual = float(tonp(R.rkhs_norm_sq_dual(asxp(alpha), asxp(K))))
    primal = float(tonp(R.rkhs_norm_sq(asxp(K @ alpha), asxp(K))))
    assert abs(primal - dual) <= 100 * EPS * cond * dual
    # FOC (1.14): (2/N)K(Kα − Y) + 2ζKα = 0, relative to the size of its terms
    foc = (2 / n) * K @ (K @ alpha - Y) + 2 * zeta * K @ alpha
    scale = (2 / n) * np.linalg.norm(K, 2) * (np.linalg.norm(K, 2) * np.abs(alpha).max() + np.abs(Y).max())
    assert np.abs(foc).max() <= 100 * EPS * cond * scale


def test_krr_reductions_and_float32(asxp, tonp, xp):
    """mean: α = (K + ζN I)⁻¹Y (1.15); sum: α = (K + ζI)⁻¹Y; float32 in → float32 out, rel. error ≲ cond·eps32."""
    n, zeta = 7, 0.1
    K = spd(n, 31, low=0.5)
    Y = np.random.default_rng(32).standard_normal(n)
    a_mean = f64(tonp, R.krr_fit(asxp(K), asxp(Y), zeta))
    a_sum = f64(tonp, R.krr_fit(asxp(K), asxp(Y), zeta, reduction="sum"))
    assert np.allclose(a_mean, np.linalg.solve(K + zeta * n * np.eye(n), Y), atol=1e-12)
    assert np.allclose(a_sum, np.linalg.solve(K + zeta * np.eye(n), Y), atol=1e-12)
    ref = Y @ np.linalg.solve(K, Y)
    got32 = R.rkhs_norm_sq(asxp(Y.astype(np.float32)), asxp(K.astype(np.float32)))
    assert got32.dtype == xp.float32
    cond = np.linalg.cond(K)
    assert abs(float(tonp(got32)) - ref) <= 20 * cond * np.finfo(np.float32).eps * ref


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), zeta=st.floats(1e-4, 1.0))
def test_krr_minimises_1_13_against_random_perturbations(seed, n, zeta, asxp, tonp):
    K = spd(n, seed)
    rng = np.random.default_rng(seed + 2)
    Y = rng.standard_normal(n)
    alpha = f64(tonp, R.krr_fit(asxp(K), asxp(Y), zeta))

    def J(a):  # (1.13) written out
        return np.sum((K @ a - Y) ** 2) / n + zeta * a @ K @ a

    H = K @ K / n + zeta * K  # the objective is exactly quadratic: J(α + δ) − J(α) = δᵀHδ at the minimiser
    for _ in range(5):
        d = rng.standard_normal(n) * rng.choice([1e-3, 1e-1, 1.0])
        gain = J(alpha + d) - J(alpha)
        assert gain >= -1e-12 * max(1.0, J(alpha))
        assert abs(gain - d @ H @ d) <= 1e-9 * np.linalg.cond(K) * max(1.0, J(alpha))
    # krr_objective (as a function of f(X)) is minimised at the fitted values too
    f_star = K @ alpha
    base = float(tonp(R.krr_objective(asxp(f_star), asxp(Y), asxp(K), zeta)))
    assert abs(base - J(alpha)) <= 1e-9 * np.linalg.cond(K) * max(1.0, base)
    for _ in range(3):
        d = 1e-2 * rng.standard_normal(n)
        assert float(tonp(R.krr_objective(asxp(f_star + d), asxp(Y), asxp(K), zeta))) >= base - 1e-12 * max(1, base)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), d=st.integers(1, 8), zeta=st.floats(1e-4, 1.0))
def test_push_through_identity_1_18(seed, n, d, zeta, asxp, tonp):
    """Linear kernel, row convention: x_tᵀXᵀ(XXᵀ + ζNI)⁻¹Y = x_tᵀ(XᵀX + ζNI)⁻¹XᵀY (the primal ridge)."""
    rng = np.random.default_rng(seed)
    X, Xt, Y = rng.standard_normal((n, d)), rng.standard_normal((3, d)), rng.standard_normal(n)
    alpha = R.krr_fit(asxp(X @ X.T), asxp(Y), zeta)
    dual = f64(tonp, R.krr_predict(asxp(Xt @ X.T), alpha))
    primal = Xt @ np.linalg.solve(X.T @ X + zeta * n * np.eye(d), X.T @ Y)
    cond = (np.linalg.norm(X, 2) ** 2 + zeta * n) / (zeta * n)
    assert np.allclose(dual, primal, rtol=0, atol=100 * EPS * cond * (1 + np.abs(primal).max()))


def test_ridgeless_limit_error_is_linear_in_zeta(asxp, tonp):
    """f_ζ(x) − f_0(x) = −ζN·K(x,X)K⁻²Y + O(ζ²): the error over ζ = 1e-4 … 1e-8 divided by ζ is that constant."""
    n = 8
    K = spd(n, 3, low=0.5, high=1.0)
    rng = np.random.default_rng(4)
    Kt, Y = rng.standard_normal((3, n)), rng.standard_normal(n)
    f0 = Kt @ np.linalg.solve(K, Y)
    slope = -n * Kt @ np.linalg.solve(K, np.linalg.solve(K, Y))
    ridgeless = f64(tonp, R.krr_predict(asxp(Kt), R.krr_fit(asxp(K), asxp(Y), 0.0)))
    assert np.allclose(ridgeless, f0, atol=1e-12)
    assert np.allclose(f64(tonp, R.krr_fit(asxp(K), asxp(Y), 0.0)) @ K, Y, atol=1e-12)  # interpolation
    for zeta in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        fz = f64(tonp, R.krr_predict(asxp(Kt), R.krr_fit(asxp(K), asxp(Y), zeta)))
        ratio = (fz - f0) / zeta
        # O(ζ) remainder relative to the slope: ζ·N·‖K⁻¹‖ ≤ 1e-4·8·2; rounding: eps·cond/ζ ≤ 1e-7 at ζ = 1e-8
        assert np.allclose(ratio, slope, rtol=2e-3, atol=2e-3 * np.abs(slope).max())


def test_reproducing_property_cauchy_schwarz_and_norm_bound(asxp, tonp):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((10, 3))
    Z = rng.standard_normal((6, 3))
    K_all = np.asarray(tonp(kernels.arora_ntk(asxp(np.vstack([X, Z])), depth=2)))
    K, K_zx = K_all[:10, :10], K_all[10:, :10]
    Y = rng.standard_normal(10)
    for zeta in (1e-3, 1e-1, 1.0):
        alpha = f64(tonp, R.krr_fit(asxp(K), asxp(Y), zeta))
        norm2 = float(tonp(R.rkhs_norm_sq_dual(asxp(alpha), asxp(K))))
        # reproducing property: f = Σ αᵢK(xᵢ, ·) is its own minimum-norm interpolant on X ∪ Z, so the primal
        # norm computed from the values on the larger set equals the dual norm
        f_all = K_all[:, :10] @ alpha
        primal_big = float(tonp(R.rkhs_norm_sq(asxp(f_all), asxp(K_all))))
        assert abs(primal_big - norm2) <= 1e-7 * norm2  # cond(K_all) ~ 1e4 here
        # Cauchy–Schwarz: |f(z)| = |⟨f, K_z⟩| ≤ ‖f‖·√K(z, z)
        fz = K_zx @ alpha
        assert np.all(np.abs(fz) <= math.sqrt(norm2) * np.sqrt(np.diag(K_all)[10:]) * (1 + 1e-12))
        # ‖f_ntr‖² ≤ ‖Y‖²/(4ζN)
        assert norm2 <= R.krr_norm_bound(asxp(Y), zeta) * (1 + 1e-12)
    # the bound is attained when K has the eigenvalue ζN along Y: K = ζN·I
    zeta, n = 0.3, 10
    alpha = R.krr_fit(asxp(zeta * n * np.eye(n)), asxp(Y), zeta)
    attained = float(tonp(R.rkhs_norm_sq_dual(alpha, asxp(zeta * n * np.eye(n)))))
    assert abs(attained - R.krr_norm_bound(asxp(Y), zeta)) <= 1e-12 * attained


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 9))
def test_primal_norm_is_the_min_norm_interpolant_and_scales(seed, n, asxp, tonp):
    """For f = Σ over a larger set, f(X)ᵀK⁻¹f(X) ≤ ‖f‖²_H; ‖cf‖² = c²‖f‖²; ‖f‖²_{cK} = ‖f‖²_K/c; permutation invariance."""
    m = n + 3
    K_all = spd(m, seed)
    beta = np.random.default_rng(seed + 7).standard_normal(m)
    f = K_all @ beta
    full = beta @ K_all @ beta
    part = float(tonp(R.rkhs_norm_sq(asxp(f[:n]), asxp(K_all[:n, :n]))))
    assert part <= full * (1 + 1e-9)
    c = 2.5
    assert abs(float(tonp(R.rkhs_norm_sq(asxp(c * f[:n]), asxp(K_all[:n, :n])))) - c * c * part) <= 1e-9 * c * c * part
    assert abs(float(tonp(R.rkhs_norm_sq(asxp(f[:n]), asxp(c * K_all[:n, :n])))) - part / c) <= 1e-9 * part
    p = np.random.default_rng(seed).permutation(n)
    Kp = K_all[:n, :n][np.ix_(p, p)]
    assert abs(float(tonp(R.rkhs_norm_sq(asxp(f[:n][p]), asxp(Kp)))) - part) <= 1e-9 * part


# ======================================================================================
# 2. Closed-form flows (seed 003 (1.29), (2.31)–(2.33))
# ======================================================================================
def _random_feature_problem(n=6, m=3, P=24, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((3, P))
    b = rng.uniform(0, 2 * np.pi, P)
    X, Xt = rng.standard_normal((n, 3)), rng.standard_normal((m, 3))
    phi = lambda A: np.sqrt(2.0 / P) * np.cos(A @ W + b) * 2.0  # noqa: E731
    return phi(X), phi(Xt), np.sin(X[:, 0]) + 0.5 * X[:, 1]


def _ode_parameter_flow(Phi, Phit, Y, zeta, eta, times, theta0):
    """Parameter-space gradient flow of (1/N)‖Φθ − Y‖² + ζ(Φθ)ᵀΘ⁻¹(Φθ), Θ = ΦΦᵀ (constant), by solve_ivp."""
    n = Phi.shape[0]
    Theta_inv = np.linalg.inv(Phi @ Phi.T)

    def rhs(_, th):
        f = Phi @ th
        return -eta * Phi.T @ ((2 / n) * (f - Y) + 2 * zeta * Theta_inv @ f)

    sol = scipy.integrate.solve_ivp(rhs, (0, max(times)), theta0, t_eval=times, rtol=1e-11, atol=1e-13,
                                    method="DOP853")
    return (Phi @ sol.y).T, (Phit @ sol.y).T


@pytest.mark.parametrize("zeta", [0.0, 0.05, 0.4])
def test_regularized_flow_matches_ode_integration(zeta, asxp, tonp):
    """Corrected (2.33) = the ODE (train and test points, f₀ ≠ 0) to 1e-8; the printed (2.33) misses for ζ > 0."""
    Phi, Phit, Y = _random_feature_problem()
    K, Kt = Phi @ Phi.T, Phit @ Phi.T
    eta, times = 0.7, np.array([0.0, 0.5, 3.0, 10.0])
    theta0 = 0.3 * np.random.default_rng(9).standard_normal(Phi.shape[1])
    ode_tr, ode_te = _ode_parameter_flow(Phi, Phit, Y, zeta, eta, times, theta0)
    fl = R.regularized_flow(asxp(K), asxp(Y), zeta, asxp(times), lr=eta, f0=asxp(Phi @ theta0),
                            K_test=asxp(Kt), f0_test=asxp(Phit @ theta0))
    scale = np.abs(ode_tr).max()
    assert np.allclose(f64(tonp, fl.train), ode_tr, rtol=0, atol=1e-8 * scale)
    assert np.allclose(f64(tonp, fl.test), ode_te, rtol=0, atol=1e-8 * scale)
    # from f₀ = 0: corrected vs printed
    ode_tr0, ode_te0 = _ode_parameter_flow(Phi, Phit, Y, zeta, eta, times, np.zeros(Phi.shape[1]))
    good = R.regularized_flow(asxp(K), asxp(Y), zeta, asxp(times), lr=eta, K_test=asxp(Kt))
    bad = R.regularized_flow(asxp(K), asxp(Y), zeta, asxp(times), lr=eta, K_test=asxp(Kt), printed=True)
    assert np.allclose(f64(tonp, good.train), ode_tr0, atol=1e-8 * scale)
    assert np.allclose(f64(tonp, good.test), ode_te0, atol=1e-8 * scale)
    err_printed = max(np.abs(f64(tonp, bad.train) - ode_tr0).max(), np.abs(f64(tonp, bad.test) - ode_te0).max())
    if zeta == 0:
        assert err_printed <= 1e-8 * scale  # the two coincide without regularisation
    else:
        assert err_printed > 1e-3 * scale  # seed error: wrong exponent in (2.33)


def test_printed_2_33_fails_on_the_inventory_case(asxp, tonp):
    """Inventory [32]: N = 6, η = 0.7, ζ = 0.05, t = 3; function-space ODE (2.32) by solve_ivp, f₀ = 0."""
    K = spd(6, 11, low=0.1, high=0.5)
    Y = np.random.default_rng(12).standard_normal(6)
    n, eta, zeta, t = 6, 0.7, 0.05, 3.0
    B = (2 * eta / n) * (K + zeta * n * np.eye(n))
    sol = scipy.integrate.solve_ivp(lambda _, f: -B @ f + (2 * eta / n) * K @ Y, (0, t), np.zeros(n),
                                    rtol=1e-12, atol=1e-14, method="DOP853")
    ref = sol.y[:, -1]
    good = f64(tonp, R.regularized_flow(asxp(K), asxp(Y), zeta, t, lr=eta).train)[0]
    bad = f64(tonp, R.regularized_flow(asxp(K), asxp(Y), zeta, t, lr=eta, printed=True).train)[0]
    assert np.abs(good - ref).max() <= 1e-9 * np.abs(ref).max()
    assert np.abs(bad - ref).max() >= 1e-2 * np.abs(ref).max()
    # both have the KRR limit (2.5)
    krr = K @ np.linalg.solve(K + zeta * n * np.eye(n), Y)
    for printed in (False, True):
        lim = f64(tonp, R.regularized_flow(asxp(K), asxp(Y), zeta, 1e6, lr=eta, printed=printed).train)[0]
        assert np.allclose(lim, krr, atol=1e-10 * np.abs(krr).max())


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), eta=st.floats(0.1, 2.0), t=st.floats(0.0, 10.0),
       zeta=st.floats(0.0, 0.5))
def test_regularized_flow_matches_expm(seed, n, eta, t, zeta, asxp, tonp):
    K = spd(n, seed, low=0.05)
    rng = np.random.default_rng(seed + 3)
    Y, f0, Kt, f0t = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal((2, n)), rng.standard_normal(2)
    B = (2 * eta / n) * (K + zeta * n * np.eye(n))
    E = scipy.linalg.expm(-B * t)
    f_inf = np.linalg.solve(K + zeta * n * np.eye(n), K @ Y)
    ref = E @ f0 + f_inf - E @ f_inf
    ref_t = f0t + Kt @ np.linalg.solve(K, (np.eye(n) - E) @ (f_inf - f0))
    fl = R.regularized_flow(asxp(K), asxp(Y), zeta, t, lr=eta, f0=asxp(f0), K_test=asxp(Kt), f0_test=asxp(f0t))
    cond = np.linalg.cond(K)
    scale = 1 + np.abs(Y).max() + np.abs(f0).max()
    assert np.allclose(f64(tonp, fl.train)[0], ref, rtol=0, atol=1e-12 * cond * scale)
    assert np.allclose(f64(tonp, fl.test)[0], ref_t, rtol=0, atol=1e-11 * cond * scale * (1 + np.abs(Kt).max()))


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 7), zeta=st.floats(0.0, 0.5), eps=st.floats(1e-3, 1.0))
def test_flow_gap_bound_holds_on_random_perturbations(seed, n, zeta, eps, asxp, tonp):
    """sup_t ‖f_Θ(t) − f_K(t)‖ ≤ ‖Θ − K‖‖Y‖/(λ_min(K) + ζN) (corrected (2.36)), on a dense time grid."""
    K = spd(n, seed, low=0.05)
    rng = np.random.default_rng(seed + 5)
    E = rng.standard_normal((n, n))
    Th = K + eps * (E + E.T) / np.linalg.norm(E + E.T, 2)
    Th = Th + max(0.0, -np.linalg.eigvalsh(Th)[0]) * np.eye(n)  # keep Θ PSD (an NTK)
    Y = rng.standard_normal(n)
    times = np.concatenate([[0.0], np.geomspace(1e-3, 1e4, 400)])
    gap = np.abs(f64(tonp, R.regularized_flow(asxp(Th), asxp(Y), zeta, asxp(times)).train)
                 - f64(tonp, R.regularized_flow(asxp(K), asxp(Y), zeta, asxp(times)).train))
    sup = np.linalg.norm(gap, axis=1).max()
    assert sup <= R.flow_gap_bound(asxp(K), asxp(Th), asxp(Y), zeta) * (1 + 1e-9) + 1e-12


def test_printed_2_36_constant_fails(asxp, tonp):
    """Θ − K along K's small eigenvalue: the gap reaches ≈ 1/4, the printed ‖B‖-constant allows 0.002."""
    K = np.diag([0.01, 5.0, 5.0])
    Th = K + np.diag([0.01, 0.0, 0.0])
    Y = np.array([1.0, 0.0, 0.0])
    times = np.geomspace(1e-2, 1e5, 2000)
    gap = f64(tonp, R.regularized_flow(asxp(Th), asxp(Y), 0.0, asxp(times)).train) - \
        f64(tonp, R.regularized_flow(asxp(K), asxp(Y), 0.0, asxp(times)).train)
    sup = np.linalg.norm(gap, axis=1).max()
    assert abs(sup - 0.25) < 1e-3  # max of e^{−a} − e^{−2a}
    assert sup <= R.flow_gap_bound(asxp(K), asxp(Th), asxp(Y), 0.0)  # 1.0
    assert sup > 100 * R.flow_gap_bound(asxp(K), asxp(Th), asxp(Y), 0.0, printed=True)  # 0.002


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_linearized_mse_flow_is_1_29_with_the_stated_reduction(reduction, asxp, tonp):
    """(1.29) holds for Σ½(f − y)²; for (1.3)'s mean the exponent is −ηΘt/N (checked by integrating each loss)."""
    n = 7
    K = spd(n, 21, rank=4, low=1e-3, high=1e-2)
    rng = np.random.default_rng(22)
    Y, f0, Kt, f0t = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal((2, n)), rng.standard_normal(2)
    eta, t = 0.9, 2.0
    w = 1.0 if reduction == "sum" else 1.0 / n  # d/df of Σ½(f−y)² resp. (1/N)Σ½(f−y)² is w·(f − y)
    sol = scipy.integrate.solve_ivp(lambda _, f: -eta * K @ (w * (f - Y)), (0, t), f0, rtol=1e-12, atol=1e-14,
                                    method="DOP853")
    fl = R.linearized_mse_flow(asxp(K), asxp(Y), t, lr=eta, f0=asxp(f0), K_test=asxp(Kt), f0_test=asxp(f0t),
                               reduction=reduction)
    assert np.allclose(f64(tonp, fl.train)[0], sol.y[:, -1], atol=1e-9)
    printed = f0t - Kt @ np.linalg.solve(K, (np.eye(n) - scipy.linalg.expm(-eta * w * K * t)) @ (f0 - Y))
    assert np.allclose(f64(tonp, fl.test)[0], printed, atol=1e-8)


def test_flow_with_singular_kernel_and_zero_ridge(asxp, tonp):
    """ζ = 0 with a rank-deficient K: the (1 − e^{−ηλt})/λ factors → ηt, no division by zero."""
    X = np.random.default_rng(1).standard_normal((6, 2))
    K = X @ X.T  # rank 2
    Y, f0 = np.ones(6), np.linspace(-1, 1, 6)
    fl = R.regularized_flow(asxp(K), asxp(Y), 0.0, [0.0, 1.0, 5.0], lr=0.5, f0=asxp(f0), K_test=asxp(K[:2]),
                            f0_test=asxp(f0[:2]))
    # test points equal to training points must reproduce the training values
    assert np.allclose(f64(tonp, fl.test), f64(tonp, fl.train)[:, :2], atol=1e-12)
    # df/dt = −(2η/N)K(f − Y): f_t = Y + e^{−(2η/N)Kt}(f₀ − Y); the part of f₀ − Y in null(K) never moves
    ref = np.stack([Y + scipy.linalg.expm(-(2 * 0.5 / 6) * K * t) @ (f0 - Y) for t in (0.0, 1.0, 5.0)])
    assert np.allclose(f64(tonp, fl.train), ref, atol=1e-12)


# ======================================================================================
# 3. Finite-width exact equivalence (Thm 2.2.1's analogue) and Algorithm 1's stop-gradient
# ======================================================================================
def test_random_feature_gd_equals_krr_at_train_and_test_points(asxp, tonp):
    Phi, Phit, Y = _random_feature_problem(n=8, m=5, P=40, seed=2)
    n, zeta = 8, 0.05
    K = Phi @ Phi.T
    lam = np.linalg.eigvalsh(K)
    lr = n / (lam[-1] + lam[0] + 2 * zeta * n)  # optimal step: each step multiplies f − f_∞ by at most `rate`
    rate = np.abs(1 - lr * (2 / n) * (lam + zeta * n)).max()
    steps = int(math.ceil(math.log(1e-12) / math.log(rate)))
    assert steps < 5000
    _, f_tr, f_te = R.regularized_gd_linear(asxp(Phi), asxp(Y), zeta, lr=lr, steps=steps, features_test=asxp(Phit))
    krr_tr = K @ np.linalg.solve(K + zeta * n * np.eye(n), Y)
    krr_te = (Phit @ Phi.T) @ np.linalg.solve(K + zeta * n * np.eye(n), Y)
    assert np.allclose(f64(tonp, f_tr), krr_tr, atol=1e-8)
    assert np.allclose(f64(tonp, f_te), krr_te, atol=1e-8)


def test_linearized_antisymmetric_net_trained_on_regularised_objective_is_krr(asxp, tonp, xp):
    """A Linearized Antisymmetric ReLU net (f₀ ≡ 0, constant Θ̂₀) trained by train_regularized = KRR with Θ̂₀."""
    rng = np.random.default_rng(3)
    X, Xt = rng.standard_normal((6, 3)), rng.standard_normal((4, 3))
    Y = np.sin(X[:, 0])
    base = Antisymmetric(FullyConnected(3, 32, depth=1))
    p0 = base.init(0, xp=xp)
    lin = Linearized(base, p0)
    Th = f64(tonp, base.empirical_ntk(p0, asxp(X)))
    Th_t = f64(tonp, base.empirical_ntk(p0, asxp(Xt), asxp(X)))
    n, zeta = 6, 0.5
    lam = np.linalg.eigvalsh(Th)
    lr = n / (lam[-1] + lam[0] + 2 * zeta * n)
    rate = np.abs(1 - lr * (2 / n) * (lam + zeta * n)).max()  # contraction of f − f_∞ per step (function space)
    steps = int(math.ceil(math.log(1e-11) / math.log(rate)))
    assert steps < 1000
    tr = R.train_regularized(lin, lin.init(), asxp(X), asxp(Y), zeta=zeta, lr=lr, steps=steps, x_test=asxp(Xt))
    krr = np.linalg.solve(Th + zeta * n * np.eye(n), Y)
    assert np.allclose(f64(tonp, tr.f_train)[-1], Th @ krr, atol=1e-8)
    assert np.allclose(f64(tonp, tr.f_test)[-1], Th_t @ krr, atol=1e-8)
    # with a fixed kernel 𝒦 in the regulariser ((2.15)/(2.16)), the stationary training values are 𝒦(𝒦+ζNI)⁻¹Y
    # whatever the (invertible) tangent kernel: check with 𝒦 = the analytic NTK.  Iteration matrix in function
    # space: I − lr·Θ̂(2/N)(I + ζN𝒦⁻¹), whose spectrum is real positive (similar to a product of PD matrices)
    Kan = f64(tonp, kernels.fc(asxp(X), depth=1).ntk)
    ev = np.linalg.eigvals(Th @ ((2 / n) * (np.eye(n) + zeta * n * np.linalg.inv(Kan)))).real
    lr2 = 1.8 / ev.max()
    rho = np.abs(1 - lr2 * ev).max()
    steps2 = int(math.ceil(math.log(1e-11) / math.log(rho)))
    assert steps2 < 1000
    tr2 = R.train_regularized(lin, lin.init(), asxp(X), asxp(Y), zeta=zeta, lr=lr2, steps=steps2,
                              kernel=asxp(Kan))
    assert np.allclose(f64(tonp, tr2.f_train)[-1], Kan @ np.linalg.solve(Kan + zeta * n * np.eye(n), Y), atol=1e-8)


def test_train_regularized_step_is_the_hand_gradient(asxp, tonp, xp):
    """One full-batch step equals θ − lr·Jᵀ((2/N)(f − Y) + 2ζΘ̂⁻¹f) with the explicit Jacobian J."""
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((5, 3)), rng.standard_normal(5)
    net = FullyConnected(3, 10, depth=2)
    p = net.init(1, xp=xp)
    J = f64(tonp, net.jacobian(p, asxp(X)))
    f = f64(tonp, net.apply(p, asxp(X)))
    Th = J @ J.T
    zeta, lr = 0.2, 0.05
    g = J.T @ ((2 / 5) * (f - Y) + 2 * zeta * np.linalg.solve(Th, f))
    tr = R.train_regularized(net, p, asxp(X), asxp(Y), zeta=zeta, lr=lr, steps=1)
    theta1 = f64(tonp, flatten_params(tr.params))
    assert np.allclose(theta1, f64(tonp, flatten_params(p)) - lr * g, atol=1e-10)
    # the recorded objective is MSE + ζ f ᵀΘ̂⁻¹f at the start
    assert abs(float(tonp(tr.objective[0])) - (np.mean((f - Y) ** 2) + zeta * f @ np.linalg.solve(Th, f))) < 1e-9
    # sub-batch of the full size = full batch
    tr_b = R.train_regularized(net, p, asxp(X), asxp(Y), zeta=zeta, lr=lr, steps=1, subset_size=5, seed=0)
    assert np.allclose(f64(tonp, flatten_params(tr_b.params)), theta1, atol=1e-12)
    # Approximation 1 in the step: 𝓘 = the seeded uniform draw (documented: sorted default_rng(seed).choice),
    # penalty (N/b)f_𝓘ᵀΘ̂_𝓘𝓘⁻¹f_𝓘, gradient through J_𝓘 only
    I = np.sort(np.random.default_rng(7).choice(5, size=3, replace=False))
    g_sub = J.T @ ((2 / 5) * (f - Y)) + zeta * (5 / 3) * 2 * J[I].T @ np.linalg.solve(Th[np.ix_(I, I)], f[I])
    tr_s = R.train_regularized(net, p, asxp(X), asxp(Y), zeta=zeta, lr=lr, steps=1, subset_size=3, seed=7)
    assert np.allclose(f64(tonp, flatten_params(tr_s.params)), f64(tonp, flatten_params(p)) - lr * g_sub, atol=1e-10)


def test_stop_gradient_identity_and_finite_differences(asxp, tonp, xp):
    """J_𝓘∇_θR = 2τf(X_𝓘) (P ≥ b); ∇R = FD of τ fᵀΘ₀⁻¹f with Θ frozen, ≠ FD of the full R (Θ re-evaluated)."""
    rng = np.random.default_rng(6)
    Xs = rng.standard_normal((5, 3))
    net = FullyConnected(3, 8, depth=2)
    p = net.init(2, xp=xp)
    tau = 0.7
    val, grads = R.ntk_regularizer(net, p, asxp(Xs), tau=tau)
    g = f64(tonp, flatten_params(grads))
    J = f64(tonp, net.jacobian(p, asxp(Xs)))
    f = f64(tonp, net.apply(p, asxp(Xs)))
    assert J.shape[1] >= 5
    assert np.allclose(J @ g, 2 * tau * f, rtol=1e-8, atol=1e-10 * np.abs(f).max())
    Th0 = J @ J.T
    assert abs(float(tonp(val)) - tau * f @ np.linalg.solve(Th0, f)) <= 1e-9 * abs(float(tonp(val)))
    from ntkref.nets import unflatten_params

    theta = f64(tonp, flatten_params(p))
    h = 1e-6
    frozen, full = np.zeros_like(theta), np.zeros_like(theta)
    for i in rng.choice(theta.size, 12, replace=False):
        vals_frozen, vals_full = [], []
        for s in (1, -1):
            th = theta.copy()
            th[i] += s * h
            pp = unflatten_params(asxp(th), p)
            fi = f64(tonp, net.apply(pp, asxp(Xs)))
            vals_frozen.append(tau * fi @ np.linalg.solve(Th0, fi))
            vals_full.append(float(tonp(R.ntk_regularizer(net, pp, asxp(Xs), tau=tau)[0])))
        frozen[i] = (vals_frozen[0] - vals_frozen[1]) / (2 * h)
        full[i] = (vals_full[0] - vals_full[1]) / (2 * h)
    idx = frozen != 0
    assert np.allclose(g[idx], frozen[idx], rtol=1e-5, atol=1e-6 * np.abs(g).max())
    # the "true" derivative of R(θ) with Θ = Θ(θ) is different: documented, not what Algorithm 1 uses
    assert np.abs(full[idx] - g[idx]).max() > 1e-3 * np.abs(g[idx]).max()


# ======================================================================================
# 4. Approximation 1: the sub-batch estimator
# ======================================================================================
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 10), data=st.data())
def test_sub_batch_schur_monotonicity(seed, n, data, asxp, tonp):
    K = spd(n, seed, low=1e-2)
    f = np.random.default_rng(seed + 1).standard_normal(n)
    order = np.random.default_rng(seed + 2).permutation(n)
    b1 = data.draw(st.integers(1, n))
    b2 = data.draw(st.integers(b1, n))
    small, big = order[:b1], order[:b2]  # nested
    t_small = float(tonp(R.sub_batch_term(asxp(f), asxp(K), small)))
    t_big = float(tonp(R.sub_batch_term(asxp(f), asxp(K), big)))
    full = float(tonp(R.rkhs_norm_sq(asxp(f), asxp(K))))
    tol = 1e-10 * np.linalg.cond(K) * full
    # independent value of the small term
    ref = f[small] @ np.linalg.solve(K[np.ix_(small, small)], f[small])
    assert abs(t_small - ref) <= tol
    assert t_small <= t_big + tol <= full + 2 * tol
    # the unscaled all-subsets mean is below the full norm (every term is)
    if math.comb(n, b1) <= 300:
        mean_unscaled = float(tonp(R.sub_batch_rkhs_norm(asxp(f), asxp(K), b1, n_draws="all", scaled=False)))
        assert mean_unscaled <= full + tol


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), data=st.data())
def test_sub_batch_estimator_unbiased_for_diagonal_kernel(seed, n, data, asxp, tonp):
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.1, 3.0, n)
    f = rng.standard_normal(n)
    b = data.draw(st.integers(1, n))
    est = float(tonp(R.sub_batch_rkhs_norm(asxp(f), asxp(np.diag(d)), b, n_draws="all")))
    full = float(np.sum(f * f / d))
    assert abs(est - full) <= 1e-12 * full * n


def test_sub_batch_biased_for_a_general_kernel_and_additive_for_blocks(asxp, tonp):
    rng = np.random.default_rng(7)
    n = 6
    K = spd(n, 7, low=0.05, high=0.1)
    f = rng.standard_normal(n)
    est = float(tonp(R.sub_batch_rkhs_norm(asxp(f), asxp(K), 3, n_draws="all")))
    combos = list(itertools.combinations(range(n), 3))
    ref = n / 3 * np.mean([f[list(c)] @ np.linalg.solve(K[np.ix_(c, c)], f[list(c)]) for c in combos])
    full = f @ np.linalg.solve(K, f)
    assert abs(est - ref) <= 1e-10 * ref
    assert abs(est - full) > 0.05 * full  # biased (the dissertation: "only a block inversion")
    # block-diagonal K, sub-batches = the blocks: the terms add up to the full norm
    blocks = [spd(2, 1), spd(3, 2), spd(1, 3)]
    Kb = scipy.linalg.block_diag(*blocks)
    fb = rng.standard_normal(6)
    parts = [np.arange(0, 2), np.arange(2, 5), np.arange(5, 6)]
    total = sum(float(tonp(R.sub_batch_term(asxp(fb), asxp(Kb), p))) for p in parts)
    fullb = float(tonp(R.rkhs_norm_sq(asxp(fb), asxp(Kb))))
    assert abs(total - fullb) <= 1e-12 * fullb * 10
    # random draws: reproducible by seed, and their mean tends to the all-subsets mean (20 subsets, 4000 draws)
    a = float(tonp(R.sub_batch_rkhs_norm(asxp(f), asxp(K), 3, n_draws=4000, seed=3)))
    assert a == float(tonp(R.sub_batch_rkhs_norm(asxp(f), asxp(K), 3, n_draws=4000, seed=3)))
    terms = n / 3 * np.array([f[list(c)] @ np.linalg.solve(K[np.ix_(c, c)], f[list(c)]) for c in combos])
    assert abs(a - est) <= 5 * terms.std() / math.sqrt(4000)


def test_sub_batch_works_where_the_full_kernel_is_singular(asxp, tonp, xp):
    """N > P: Θ̂(X, X) is singular (clear error), the sub-batch blocks with b ≤ P are fine."""
    net = FullyConnected(2, 3, depth=1)  # P = 2·3 + 3 = 9 < N = 12
    p = net.init(0, xp=xp)
    X = np.random.default_rng(0).standard_normal((12, 2))
    Th = net.empirical_ntk(p, asxp(X))
    f = net.apply(p, asxp(X))
    with pytest.raises(InvalidParameterError, match="singular|positive semidefinite"):
        R.rkhs_norm_sq(f, Th)
    assert float(tonp(R.rkhs_norm_sq(f, Th, jitter=1e-3))) > 0
    val = float(tonp(R.sub_batch_term(f, Th, [0, 3, 5])))
    Xs = f64(tonp, Th)[np.ix_([0, 3, 5], [0, 3, 5])]
    fs = f64(tonp, f)[[0, 3, 5]]
    assert abs(val - fs @ np.linalg.solve(Xs, fs)) <= 1e-8 * val


# ======================================================================================
# 5. FS-MAP: Prop. 2.2.3, the log-det, Kolmogorov consistency, the signs of (2.10)/(2.11)
# ======================================================================================
def test_linearized_prior_by_monte_carlo(asxp, tonp, xp):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((4, 3))
    net = FullyConnected(3, 5, depth=1)
    mu = net.init(4, xp=xp)
    sigma = 0.3
    J = f64(tonp, net.jacobian(mu, asxp(X)))
    f_mu = f64(tonp, net.apply(mu, asxp(X)))
    mean, cov = R.linearized_prior(asxp(f_mu), asxp(J), sigma)
    mean, cov = f64(tonp, mean), f64(tonp, cov)
    n_mc = 20_000
    theta = sigma * rng.standard_normal((n_mc, J.shape[1]))  # θ − μ
    F = f_mu[None, :] + theta @ J.T  # f̃(X; θ) = f(X; μ) + J_μ(θ − μ)
    emp_mean, emp_cov = F.mean(0), np.cov(F.T)
    se_mean = np.sqrt(np.diag(cov) / n_mc)
    assert np.all(np.abs(emp_mean - mean) <= 5 * se_mean)
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n_mc)
    assert np.all(np.abs(emp_cov - cov) <= 5 * se_cov)
    assert np.allclose(mean, f_mu) and np.allclose(cov, sigma**2 * J @ J.T, rtol=1e-13, atol=1e-15)


def test_logpdf_logdet_and_regulariser_relation(asxp, tonp):
    rng = np.random.default_rng(9)
    n, sigma = 5, 0.7
    Th = spd(n, 9, low=0.1)
    f, m = rng.standard_normal(n), rng.standard_normal(n)
    C = sigma**2 * Th
    lp = float(tonp(R.gaussian_logpdf(asxp(f), asxp(m), asxp(C))))
    assert abs(lp - scipy.stats.multivariate_normal(m, C).logpdf(f)) <= 1e-10 * abs(lp)
    # the dissertation's log p̃ = c fᵀΘ⁻¹f drops the θ-dependent −½ log det(2πσ²Θ)
    full = float(tonp(R.fs_map_log_prior(asxp(f), asxp(Th), sigma)))
    assert abs(full - scipy.stats.multivariate_normal(np.zeros(n), C).logpdf(f)) <= 1e-10 * abs(full)
    quad_only = float(tonp(R.fs_map_log_prior(asxp(f), asxp(Th), sigma, include_logdet=False)))
    reg = f @ np.linalg.solve(Th, f)
    assert abs(quad_only - (-reg / (2 * sigma**2))) <= 1e-12 * reg / sigma**2
    logdet = np.linalg.slogdet(2 * np.pi * C)[1]
    assert abs(reg - (-2 * sigma**2 * (full + 0.5 * logdet))) <= 1e-10 * reg
    # with Θ fixed (Prop. 2.2.3 literally: J at μ) the dropped term −½ log det(2πσ²Θ) does not depend on f
    f2 = rng.standard_normal(n)
    dropped2 = float(tonp(R.fs_map_log_prior(asxp(f2), asxp(Th), sigma))) - float(
        tonp(R.fs_map_log_prior(asxp(f2), asxp(Th), sigma, include_logdet=False)))
    assert abs(dropped2 - (full - quad_only)) <= 1e-10 * abs(logdet)


def test_dropped_logdet_varies_with_the_parameters_of_the_empirical_ntk(asxp, tonp, xp):
    """(2.48)/Algorithm 1 evaluate Θ̂(θ) at the current θ: then the term the dissertation drops, −½ log det(2πσ²Θ̂(θ)),
    changes with θ (so dropping it changes the objective), by ½(slogdet Θ̂(θ₁) − slogdet Θ̂(θ₂)) computed here from
    numpy's slogdet of the explicit Jacobian product JJᵀ."""
    rng = np.random.default_rng(17)
    X = rng.standard_normal((4, 3))
    f = rng.standard_normal(4)
    sigma = 0.6
    net = FullyConnected(3, 8, depth=1)
    dropped, ref = [], []
    for seed in (1, 2):
        p = net.init(seed, xp=xp)
        Th = f64(tonp, net.empirical_ntk(p, asxp(X)))
        Th = (Th + Th.T) / 2
        full = float(tonp(R.fs_map_log_prior(asxp(f), asxp(Th), sigma)))
        quad = float(tonp(R.fs_map_log_prior(asxp(f), asxp(Th), sigma, include_logdet=False)))
        dropped.append(full - quad)
        J = f64(tonp, net.jacobian(p, asxp(X)))
        ref.append(-0.5 * np.linalg.slogdet(2 * np.pi * sigma**2 * (J @ J.T))[1])
    assert abs((dropped[0] - dropped[1]) - (ref[0] - ref[1])) <= 1e-9 * (abs(ref[0]) + abs(ref[1]))
    assert abs(dropped[0] - dropped[1]) > 0.05  # a real change of the objective between the two parameter points


def test_kolmogorov_consistency_of_the_priors(asxp, tonp, xp, xdev):
    """(2.53): the marginal on 𝓙 ⊂ 𝓘 of the prior built on X_𝓘 is the prior built on X_𝓙 (empirical NTK and 𝒦)."""
    rng = np.random.default_rng(10)
    X = rng.standard_normal((7, 3))
    sub = [5, 1, 3]
    net = FullyConnected(3, 6, depth=2)
    mu = net.init(5, xp=xp)
    m_all, C_all = R.linearized_prior(net.apply(mu, asxp(X)), net.jacobian(mu, asxp(X)), 0.5)
    m_sub, C_sub = R.linearized_prior(net.apply(mu, asxp(X[sub])), net.jacobian(mu, asxp(X[sub])), 0.5)
    mm, Cm = R.gaussian_marginal(m_all, C_all, sub)
    assert np.allclose(f64(tonp, mm), f64(tonp, m_sub), rtol=1e-13, atol=1e-14)
    assert np.allclose(f64(tonp, Cm), f64(tonp, C_sub), rtol=1e-12, atol=1e-14)
    K_all = kernels.arora_ntk(asxp(X), depth=2)
    K_sub = kernels.arora_ntk(asxp(X[sub]), depth=2)
    z = xp.zeros(7, dtype=xp.float64, device=xdev)
    _, Km = R.gaussian_marginal(z, K_all, sub)
    assert np.allclose(f64(tonp, Km), f64(tonp, K_sub), rtol=1e-12)
    # and the marginal density is the one scipy gives for the sub-vector
    fs = rng.standard_normal(3)
    lp = float(tonp(R.gaussian_logpdf(asxp(fs), mm, Cm)))
    ref = scipy.stats.multivariate_normal(f64(tonp, m_all)[sub], f64(tonp, C_all)[np.ix_(sub, sub)]).logpdf(fs)
    assert abs(lp - ref) <= 1e-9 * abs(ref)


def _fd_grad(fun, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def test_signs_of_2_10_and_2_11(asxp, tonp):
    """Corrected −Σlog p + τR is minimised at Θ(Θ + 2τs²I)⁻¹Y (= KRR with ζN = 2τs²); the printed +Σlog p is not."""
    n, tau, s = 6, 0.3, 0.8
    Th = spd(n, 13, low=0.2, high=0.5)
    rng = np.random.default_rng(14)
    Y = rng.standard_normal(n)
    zeta = 2 * tau * s * s / n
    f_map = f64(tonp, R.krr_fit(asxp(Th), asxp(Y), zeta)) @ Th
    assert np.allclose(f_map, Th @ np.linalg.solve(Th + 2 * tau * s * s * np.eye(n), Y))

    def obj(f, printed):
        return float(tonp(R.fs_map_objective(asxp(f), asxp(Y), asxp(f), asxp(Th), tau, noise_std=s, printed=printed)))

    g_ok = _fd_grad(lambda f: obj(f, False), f_map)
    assert np.abs(g_ok).max() <= 1e-6
    for _ in range(5):
        d = 0.1 * rng.standard_normal(n)
        assert obj(f_map + d, False) > obj(f_map, False)
    g_bad = _fd_grad(lambda f: obj(f, True), f_map)
    assert np.abs(g_bad).max() > 0.1 * np.abs(Y).max() / s**2  # not stationary at the MAP
    # the printed objective is unbounded below along the top eigenvector when τ < λ_max/(2s²)
    lam, V = np.linalg.eigh(Th)
    assert tau < lam[-1] / (2 * s * s)
    assert obj(1e3 * V[:, -1], True) < obj(np.zeros(n), True) - 1e4
    # its stationary point is the "negative ridge" Θ(Θ − 2τs²I)⁻¹Y
    f_bad = Th @ np.linalg.solve(Th - 2 * tau * s * s * np.eye(n), Y)
    assert np.abs(_fd_grad(lambda f: obj(f, True), f_bad)).max() <= 1e-5 * max(1, np.abs(f_bad).max())
    # (2.11): continual learning, penalty on Δf = f_new − f_old with the frozen Θ_{s−1}; the corrected
    # minimiser is f_old + Θ(Θ + 2τs²I)⁻¹(Y − f_old) (KRR on the residual); the printed sign moves away from it
    f_old = rng.standard_normal(n)
    assert float(tonp(R.continual_learning_penalty(asxp(f_old), asxp(f_old), asxp(Th)))) == 0.0
    d = rng.standard_normal(n)
    assert abs(float(tonp(R.continual_learning_penalty(asxp(f_old + d), asxp(f_old), asxp(Th))))
               - d @ np.linalg.solve(Th, d)) <= 1e-10 * (d @ np.linalg.solve(Th, d))

    def cl(f, printed):
        return float(tonp(R.fs_map_objective(asxp(f), asxp(Y), asxp(f - f_old), asxp(Th), tau, noise_std=s,
                                             printed=printed)))

    f_cl = f_old + Th @ np.linalg.solve(Th + 2 * tau * s * s * np.eye(n), Y - f_old)
    assert np.abs(_fd_grad(lambda f: cl(f, False), f_cl)).max() <= 1e-6
    assert np.abs(_fd_grad(lambda f: cl(f, True), f_cl)).max() > 0.1


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), zeta=st.floats(1e-3, 1.0), s=st.floats(0.3, 2.0))
def test_tau_from_zeta_makes_fs_map_stationary_at_the_krr_fit(seed, n, zeta, s, asxp, tonp):
    """With τ = tau_from_zeta(ζ, N, noise_std=s), the FS-MAP objective −Σlog p + τ fᵀK⁻¹f is stationary (central
    differences, exact for a quadratic up to rounding) at the KRR fitted values K(K + ζNI)⁻¹Y of (2.4)/(2.5),
    solved here by numpy; a τ off by any factor leaves a gradient τ'·2K⁻¹f* of the size asserted below."""
    K = spd(n, seed, low=0.2)
    Y = np.random.default_rng(seed + 1).standard_normal(n)
    f_star = K @ np.linalg.solve(K + zeta * n * np.eye(n), Y)
    tau = R.tau_from_zeta(zeta, n, noise_std=s)

    def obj(f, t):
        return float(tonp(R.fs_map_objective(asxp(f), asxp(Y), asxp(f), asxp(K), t, noise_std=s)))

    h = 1e-4  # quadratic objective: no truncation error; rounding ≈ eps·|obj|/h
    scale = (np.abs(Y).max() + np.abs(f_star).max()) / s**2 + 1.0
    obj_size = abs(obj(f_star, tau)) + 1.0
    tol = 1e-9 * scale + 1e3 * EPS * obj_size / h
    assert np.abs(_fd_grad(lambda f: obj(f, tau), f_star, h=h)).max() <= tol
    # the stationarity is specific to this τ: with 2τ the gradient is τ·2K⁻¹f* ≠ 0
    reg_grad = 2 * tau * np.linalg.solve(K, f_star)
    if np.abs(reg_grad).max() > 100 * tol:
        g_wrong = _fd_grad(lambda f: obj(f, 2 * tau), f_star, h=h)
        assert np.abs(g_wrong - reg_grad).max() <= tol + 1e-6 * np.abs(reg_grad).max()


def _sub_batch_objective_identity(K, X, Y, zeta, b, s, seed, asxp, tonp, xp):
    """τ that makes N/(2s²)·(train_regularized's objective) = Σ(f−y)²/(2s²) + τ·(unscaled sub-batch term)."""
    n = len(Y)
    net = FullyConnected(X.shape[1], 16, depth=1)
    tr = R.train_regularized(net, net.init(0, xp=xp), asxp(X), asxp(Y), zeta=zeta, lr=0.1, steps=0, kernel=asxp(K),
                             subset_size=b, seed=seed)
    f, obj = f64(tonp, tr.f_train)[0], float(f64(tonp, tr.objective)[0])
    idx = np.sort(np.random.default_rng(seed).choice(n, size=b, replace=False))  # the documented draw
    term = f[idx] @ np.linalg.solve(K[np.ix_(idx, idx)], f[idx])  # Algorithm 1 line 7, unscaled
    return (n / (2 * s * s) * obj - np.sum((f - Y) ** 2) / (2 * s * s)) / term, f, idx


def test_tau_from_zeta_with_a_sub_batch_matches_train_regularized(asxp, tonp, xp):
    """Approximation 1's N/b factor goes into τ: τ = ζN²/(2s²b) reproduces train_regularized(subset_size=b)'s
    (1/N)Σ(f−y)² + ζ(N/b)f_𝓘ᵀK_𝓘𝓘⁻¹f_𝓘 (× N/(2s²)), read off its recorded objective; and fs_map_objective with the
    sub-batch penalty (f_p of length b ≠ N) is that objective plus ½N log(2πs²)."""
    n, b, zeta, s = 12, 4, 0.05, 0.7
    rng = np.random.default_rng(40)
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal(n)
    K = spd(n, 41, low=0.3)
    tau_true, f, idx = _sub_batch_objective_identity(K, X, Y, zeta, b, s, 7, asxp, tonp, xp)
    tau = R.tau_from_zeta(zeta, n, noise_std=s, subset_size=b)
    assert abs(tau - tau_true) <= 1e-10 * tau_true
    assert abs(R.tau_from_zeta(zeta, n, noise_std=s) - tau_true) > 0.5 * tau_true  # the full-batch τ is N/b too small
    fs = float(tonp(R.fs_map_objective(asxp(f), asxp(Y), asxp(f[idx]), asxp(K[np.ix_(idx, idx)]), tau, noise_std=s)))
    direct = np.sum((f - Y) ** 2) / (2 * s * s) + 0.5 * n * math.log(2 * math.pi * s * s) + tau_true * (
        f[idx] @ np.linalg.solve(K[np.ix_(idx, idx)], f[idx]))
    assert abs(fs - direct) <= 1e-10 * abs(direct)


def test_validation_labels_sub_batch_runs_with_algorithm_1_tau(asxp, tonp, xp):
    """validation.seed003_regularizer reports, for each run, the τ of Algorithm 1 that its training objective
    corresponds to (review finding: sub-batch rows were labelled with the full-batch ζN/2, N/b times too small)."""
    from validation import seed003_regularizer as V
    from validation.common import Log

    cfg = dict(n_train=12, n_test=6, width=8, steps=1, seeds=(0,), zetas=(0.0, 1e-2), subset=4, subset_zetas=(1e-2,),
               label_noise=0.0, noise_seed=0)
    out = V._mnist(cfg, Log(quiet=True))
    rows = {(r["zeta"], r["subset"]): r for r in out["rows"]}
    n = out["n_train"]
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal(n)
    K = spd(n, 4, low=0.3)
    for (zeta, subset), row in rows.items():
        if zeta == 0:
            assert row["tau"] == 0.0
            continue
        tau_true, _, _ = _sub_batch_objective_identity(K, X, Y, zeta, subset or n, 1.0, 5, asxp, tonp, xp)
        assert abs(row["tau"] - tau_true) <= 1e-9 * tau_true, (zeta, subset, row["tau"], tau_true)


# ======================================================================================
# 6. Weyl (Lemma 2.6.2) and the generalisation bounds (Thm 1.2.1, Thm 2.2.2)
# ======================================================================================
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), hermitian=st.booleans(), scale=st.floats(1e-3, 10.0))
def test_weyl_inequality(seed, n, hermitian, scale):
    """Documentation only: Lemma 2.6.2 (Weyl) and Courant–Fischer (2.27), the facts behind flow_gap_bound, checked
    on numpy's eigvalsh.  It exercises no ntkref code and cannot fail because of ntkref (flow_gap_bound itself is
    tested against ODE solutions above)."""
    rng = np.random.default_rng(seed)

    def herm():
        A = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if hermitian else 0)
        return (A + A.conj().T) / 2

    A, B = herm(), scale * herm()
    la, lab = np.linalg.eigvalsh(A)[::-1], np.linalg.eigvalsh(A + B)[::-1]
    normB = np.linalg.norm(B, 2)
    assert np.all(np.abs(lab - la) <= normB * (1 + 1e-12) + 1e-12 * (1 + np.abs(la).max()))
    # Courant–Fischer (2.27) with V spanned by the top-i eigenvectors: the inf over V is λ_i
    w, V = np.linalg.eigh(A)
    i = rng.integers(1, n + 1)
    Vi = V[:, ::-1][:, :i]
    assert abs(np.linalg.eigvalsh(Vi.conj().T @ A @ Vi)[0] - la[i - 1]) <= 1e-10 * (1 + np.abs(la).max())


def test_generalisation_bounds_with_the_sample_trace(asxp, tonp):
    """(1.20)/(2.7) with Tr K(X, X): for unit inputs and Arora's NTK, K(x, x) = L + 1 = r², Tr = N r²,
    so √(Tr/(N r²)) = 1; the dissertation's O(1) operator trace C_K would give √(C_K/(N r²)) ≈ 1/√N."""
    rng = np.random.default_rng(15)
    X = rng.standard_normal((50, 4))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    L = 2
    K = kernels.arora_ntk(asxp(X), depth=L)
    r = math.sqrt(L + 1)
    assert np.allclose(np.diag(f64(tonp, K)), L + 1, rtol=1e-12)
    n, delta, Lam = 50, 0.05, 1.3
    got = R.kernel_generalization_bound(n, delta, r=r, Lam=Lam, gram_trace=K)
    lead = 8 * r * r * Lam * Lam / math.sqrt(n)
    assert got == pytest.approx(lead * (1 + 0.75 * math.sqrt(math.log(2 / delta) / 2)), rel=1e-12)
    assert R.kernel_generalization_bound(n, delta, r=r, Lam=Lam) == pytest.approx(
        lead * (1 + 0.5 * math.sqrt(math.log(1 / delta) / 2)))
    b = R.ntk_regularized_generalization_bound(n, delta, Lam=Lam, C1=r, gram_trace=float(3 * n), eps=0.01,
                                               C0=2.0, kappa=0.1, c=0.5)
    assert b == pytest.approx(4 * (0.2 + 0.5) * 0.01 + got, rel=1e-12)
    # monotone: decreasing in N and δ, increasing in Λ and r
    vals = [R.kernel_generalization_bound(m, delta, r=r, Lam=Lam, gram_trace=m * r * r) for m in (10, 100, 1000)]
    assert vals[0] > vals[1] > vals[2]
    assert R.kernel_generalization_bound(n, 0.01, r=r, Lam=Lam) > R.kernel_generalization_bound(n, 0.1, r=r, Lam=Lam)
    with pytest.raises(InvalidParameterError, match="gram_trace"):
        R.kernel_generalization_bound(n, delta, r=1.0, Lam=Lam, gram_trace=K)  # K(x, x) = 3 > r² = 1
    # the Gram matrix must be the N×N sample matrix: a 5×5 block passed with N = 50 is refused, not traced
    with pytest.raises(InvalidParameterError, match="gram_trace"):
        R.kernel_generalization_bound(n, delta, r=r, Lam=Lam, gram_trace=K[:5, :5])
    with pytest.raises(InvalidParameterError, match="gram_trace"):
        R.ntk_regularized_generalization_bound(n, delta, Lam=Lam, C1=r, gram_trace=K[:5, :5])


def test_rademacher_complexity_by_monte_carlo_scales_as_the_sample_trace(asxp, tonp):
    """(1.20)/(2.7): the Tr K term is 8rΛ·Λ√(Tr K)/N, 8rΛ times Mohri's bound on the empirical Rademacher
    complexity R̂ = (Λ/N)E_ε sup_{‖f‖_H≤Λ} Σεᵢf(xᵢ) = (Λ/N)E√(εᵀKε) of the RKHS ball.  Monte Carlo (numpy, 4000
    sign vectors) for N = 50, 200, 800 unit points and Arora's depth-2 NTK (K(x, x) = 3 = r²):
    Λ√TrK/(N√2) ≤ R̂ ≤ Λ√TrK/N (Khintchine–Kahane, Jensen), log-log slope −½; ntkref's term/(8rΛ) dominates R̂
    within √2 at every N.  The operator-trace reading (C_K = O(1), here E K(x, x) = r²) gives slope −1 and falls
    below R̂ — the √N error of (2.7) as the dissertation uses it."""
    Lam, delta, depth = 1.5, 0.05, 2
    r = math.sqrt(depth + 1)
    rng = np.random.default_rng(16)
    sizes, rad, ours, operator = (50, 200, 800), [], [], []
    for n in sizes:
        X = rng.standard_normal((n, 5))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        K = f64(tonp, kernels.arora_ntk(asxp(X), depth=depth))
        eps_ = rng.choice([-1.0, 1.0], size=(4000, n))
        q = np.sqrt(np.einsum("ij,ij->i", eps_ @ K, eps_))  # √(εᵀKε) per draw
        mc, se = Lam * q.mean() / n, Lam * q.std() / (n * math.sqrt(len(q)))
        tr = np.trace(K)
        assert Lam * math.sqrt(tr) / (n * math.sqrt(2)) - 5 * se <= mc <= Lam * math.sqrt(tr) / n + 5 * se
        base = R.kernel_generalization_bound(n, delta, r=r, Lam=Lam, gram_trace=0.0)
        term = R.kernel_generalization_bound(n, delta, r=r, Lam=Lam, gram_trace=asxp(K)) - base
        term_op = R.kernel_generalization_bound(n, delta, r=r, Lam=Lam, gram_trace=r * r) - base
        assert mc - 5 * se <= term / (8 * r * Lam) <= math.sqrt(2) * (mc + 5 * se)
        rad.append(mc)
        ours.append(term)
        operator.append(term_op)
    slope = lambda v: np.polyfit(np.log(sizes), np.log(v), 1)[0]  # noqa: E731
    assert abs(slope(rad) + 0.5) <= 0.05
    assert abs(slope(ours) - slope(rad)) <= 0.05
    assert abs(slope(operator) + 1.0) <= 1e-9
    assert operator[-1] / (8 * r * Lam) < 0.2 * rad[-1]  # the operator-trace term misses R̂ by ~√N/… at N = 800


# ======================================================================================
# 7. Bad inputs
# ======================================================================================
def test_krr_objective_with_zero_ridge_needs_no_inverse(asxp, tonp):
    """ζ = 0: J(f) = (1/N)‖f − Y‖², defined for a singular K (no K⁻¹); ζ > 0 with a singular K is refused under
    krr_objective's own name."""
    X = np.random.default_rng(18).standard_normal((5, 2))
    K = X @ X.T  # rank 2
    f, Y = np.linspace(-1, 1, 5), np.ones(5)
    got = float(tonp(R.krr_objective(asxp(f), asxp(Y), asxp(K), 0.0)))
    assert abs(got - np.mean((f - Y) ** 2)) <= 1e-15 * np.mean((f - Y) ** 2)
    got_sum = float(tonp(R.krr_objective(asxp(f), asxp(Y), asxp(K), 0.0, reduction="sum")))
    assert abs(got_sum - np.sum((f - Y) ** 2)) <= 1e-15 * np.sum((f - Y) ** 2)
    with pytest.raises(InvalidParameterError, match="krr_objective") as info:
        R.krr_objective(asxp(f), asxp(Y), asxp(K), 0.1)
    assert "singular" in str(info.value) and "rkhs_norm_sq" not in str(info.value)
    # with an explicit jitter the penalty is the one of K + jitter·I
    Kj = K + 0.5 * np.eye(5)
    got_j = float(tonp(R.krr_objective(asxp(f), asxp(Y), asxp(K), 0.1, jitter=0.5)))
    ref_j = np.mean((f - Y) ** 2) + 0.1 * f @ np.linalg.solve(Kj, f)
    assert abs(got_j - ref_j) <= 1e-12 * ref_j


def test_bad_inputs_raise(asxp, xp):
    K = asxp(spd(4, 0))
    f = asxp(np.ones(4))
    with pytest.raises(InvalidParameterError, match="NaN"):
        R.rkhs_norm_sq(asxp(np.array([1.0, np.nan, 0.0, 0.0])), K)
    with pytest.raises(InvalidParameterError, match="square"):
        R.rkhs_norm_sq(f, asxp(np.ones((4, 3))))
    with pytest.raises(InvalidParameterError, match="symmetric"):
        R.rkhs_norm_sq(f, asxp(spd(4, 0) + np.triu(np.ones((4, 4)), 1)))
    with pytest.raises(InvalidParameterError, match="positive semidefinite"):
        R.rkhs_norm_sq(f, asxp(-spd(4, 0)))
    with pytest.raises(InvalidParameterError, match="singular"):
        R.rkhs_norm_sq(f, asxp(np.ones((4, 4))))
    assert float(R.rkhs_norm_sq(f, asxp(np.ones((4, 4))), jitter=1.0)) > 0  # explicit jitter: fine
    with pytest.raises(InvalidParameterError, match="jitter"):
        R.rkhs_norm_sq(f, K, jitter=-1.0)
    with pytest.raises(InvalidParameterError, match="rows"):
        R.rkhs_norm_sq(asxp(np.ones(3)), K)
    with pytest.raises(InvalidParameterError, match="zeta"):
        R.krr_fit(K, f, -0.1)
    with pytest.raises(InvalidParameterError, match="reduction"):
        R.krr_fit(K, f, 0.1, reduction="avg")
    with pytest.raises(InvalidParameterError, match="subset_size"):
        R.sub_batch_rkhs_norm(f, K, 5)
    with pytest.raises(InvalidParameterError, match="indices"):
        R.sub_batch_term(f, K, [0, 0])
    with pytest.raises(InvalidParameterError, match="times"):
        R.regularized_flow(K, f, 0.1, [-1.0])
    with pytest.raises(InvalidParameterError, match="printed"):
        R.regularized_flow(K, f, 0.1, 1.0, f0=f, printed=True)
    with pytest.raises(InvalidParameterError, match="zeta"):
        R.krr_norm_bound(f, 0.0)
    with pytest.raises(InvalidParameterError, match="tau"):
        R.ntk_regularizer(FullyConnected(2, 4), FullyConnected(2, 4).init(0, xp=xp), asxp(np.ones((2, 2))), tau=-1)
    with pytest.raises(InvalidParameterError, match="delta"):
        R.kernel_generalization_bound(10, 1.5, r=1.0, Lam=1.0)


# ======================================================================================
# 7b. Finite or error at extreme scales (issue 14): exact scaling identities, refusals naming the parameter
# ======================================================================================
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the refused cases overflow on purpose
def test_quadratic_forms_at_extreme_scales_are_exact_or_refused(asxp, tonp):
    """The quadratic forms are computed from f/max|f| (an exact rescaling), so a representable result is
    returned even when f² overflows: with c = 1e300, (cf)ᵀ(cK)⁻¹(cf) = c·fᵀK⁻¹f (≈ 1e300, was inf), the same for
    sub-batch terms and the continual-learning penalty; log N(cf; cm, cC) = −½c·q − ½(log det 2πC + n log c);
    ‖cY‖²/(4·cζN) = c·‖Y‖²/(4ζN).  Oracle: numpy.linalg.solve/slogdet on the unscaled problem.  Results that are
    not representable (f = 1e300 against an O(1) kernel: ~1e600) are a FloatingPointError naming the argument."""
    rng = np.random.default_rng(41)
    n, c = 5, 1e300
    K, f, g, m = spd(n, 41), rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    q = f @ np.linalg.solve(K, f)
    got = float(tonp(R.rkhs_norm_sq(asxp(c * f), asxp(c * K))))
    assert math.isfinite(got) and abs(got / c - q) <= 1e-12 * q
    idx = [3, 0, 4]
    q_sub = f[idx] @ np.linalg.solve(K[np.ix_(idx, idx)], f[idx])
    got_sub = float(tonp(R.sub_batch_term(asxp(c * f), asxp(c * K), idx)))
    assert abs(got_sub / c - q_sub) <= 1e-12 * q_sub
    d = f - g
    q_d = d @ np.linalg.solve(K, d)
    got_d = float(tonp(R.continual_learning_penalty(asxp(c * f), asxp(c * g), asxp(c * K))))
    assert abs(got_d / c - q_d) <= 1e-12 * q_d
    r = f - m
    q_r = r @ np.linalg.solve(K, r)
    logdet = np.linalg.slogdet(2 * np.pi * K)[1]
    ref = -0.5 * c * q_r - 0.5 * (logdet + n * math.log(c))
    got_lp = float(tonp(R.gaussian_logpdf(asxp(c * f), asxp(c * m), asxp(c * K))))
    assert abs(got_lp - ref) <= 1e-12 * abs(ref)
    Y, zeta = rng.standard_normal(n), 0.1
    ref_b = float(Y @ Y) / (4 * zeta * n)
    assert abs(R.krr_norm_bound(asxp(c * Y), c * zeta) / c - ref_b) <= 1e-12 * ref_b
    # not representable: refused, naming the argument
    for call, name in (
        (lambda: R.rkhs_norm_sq(asxp(c * f), asxp(K)), "f_values"),
        (lambda: R.rkhs_norm_sq_dual(asxp(c * f), asxp(K)), "alpha"),
        (lambda: R.krr_objective(asxp(c * f), asxp(g), asxp(K), 0.1), "f_values"),
        (lambda: R.krr_objective(asxp(f), asxp(c * g), asxp(K), 0.0), "Y"),
        (lambda: R.gaussian_logpdf(asxp(f), asxp(c * m), asxp(K)), "mean"),
        (lambda: R.fs_map_log_prior(asxp(c * f), asxp(K), 0.5), "f"),
        (lambda: R.fs_map_objective(asxp(f), asxp(c * g), asxp(f[:2]), asxp(K[:2, :2]), 0.3), "y"),
        (lambda: R.fs_map_objective(asxp(f), asxp(g), asxp(c * f[:2]), asxp(K[:2, :2]), 0.3), "f_penalty"),
        (lambda: R.sub_batch_rkhs_norm(asxp(c * f), asxp(K), 2, n_draws=3, seed=0), "f_values"),
        (lambda: R.linearized_prior(asxp(f), asxp(c * np.ones((n, 3))), 0.5), "jac_mu"),
        (lambda: R.krr_norm_bound(asxp(c * Y), 0.1), "Y"),
    ):
        with pytest.raises(FloatingPointError, match=f"'{name}'"):
            call()


def test_flow_gap_bound_is_linear_in_y_up_to_extreme_scales(asxp, tonp):
    """flow_gap_bound is ‖Θ − K‖‖Y‖/(λ_min(K) + ζN), linear in Y: at Y·1e300 it is exactly 1e300 times the bound
    (‖Y‖ through Y/max|Y|; ΣY² overflowed to inf before).  ζ = 0 (the unregularised flows) is valid with K
    positive definite and equals the closed form with numpy's eigvalsh/norm."""
    rng = np.random.default_rng(43)
    n = 6
    K = spd(n, 43)
    E = rng.standard_normal((n, n))
    Th = K + 0.01 * (E + E.T)
    Y = rng.standard_normal(n)
    for zeta in (0.0, 0.1):
        ref = np.abs(np.linalg.eigvalsh(Th - K)).max() * np.linalg.norm(Y) / (np.linalg.eigvalsh(K).min() + zeta * n)
        got = R.flow_gap_bound(asxp(K), asxp(Th), asxp(Y), zeta)
        assert abs(got - ref) <= 1e-10 * ref
        big = R.flow_gap_bound(asxp(K), asxp(Th), asxp(1e300 * Y), zeta)
        assert math.isfinite(big) and abs(big / 1e300 - got) <= 1e-13 * got


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_network_regulariser_errors_name_the_users_arguments(asxp, xp):
    """ntk_regularizer / train_regularized / regularized_gd_linear: a singular empirical NTK, an overflowing
    squared error or tangent kernel, an empty sub-batch and a wrong C1 are refused under the user's names."""
    net = FullyConnected(3, 6, depth=1, b_std=0.3)
    params = net.init(0, xp=xp)
    rng = np.random.default_rng(44)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(4)
    # points 1e-300 apart from 0: every row has the same features (the bias), Θ(x, x) has rank 1
    with pytest.raises(InvalidParameterError, match="x_sub.*singular"):
        R.ntk_regularizer(net, params, asxp(1e-300 * x[:2]))
    with pytest.raises(InvalidParameterError, match="x_sub"):
        R.ntk_regularizer(net, params, asxp(x[:0, :]))
    with pytest.raises(InvalidParameterError, match="x_sub"):
        R.ntk_regularizer(net, params, asxp(x[None, :2, :]))
    with pytest.raises(InvalidParameterError, match=r"Θ\(x, x\).*singular"):
        R.train_regularized(net, params, asxp(1e-300 * x), asxp(y), zeta=0.1, lr=0.1, steps=1)
    with pytest.raises(FloatingPointError, match="'y'"):
        R.train_regularized(net, params, asxp(x), asxp(1e300 * y), zeta=0.1, lr=0.1, steps=1)
    with pytest.raises(FloatingPointError, match="diverged.*'lr'"):
        R.train_regularized(net, params, asxp(x), asxp(y), zeta=0.0, lr=1e150, steps=5)
    Phi = rng.standard_normal((4, 6))
    lr_max = 4 / (np.linalg.eigvalsh(Phi @ Phi.T).max() + 0.1 * 4)  # N/(λ_max(Θ) + ζN)
    R.regularized_gd_linear(asxp(Phi), asxp(y), 0.1, lr=0.99 * lr_max, steps=3000)  # converges: finite
    with pytest.raises(FloatingPointError, match="diverged.*'lr'"):
        R.regularized_gd_linear(asxp(Phi), asxp(y), 0.1, lr=1.5 * lr_max, steps=3000)
    with pytest.raises(FloatingPointError, match="'features'"):
        R.regularized_gd_linear(asxp(1e300 * rng.standard_normal((4, 6))), asxp(y), 0.1, lr=0.01, steps=1)
    with pytest.raises(InvalidParameterError, match="'C1'"):
        R.ntk_regularized_generalization_bound(4, 0.1, Lam=1.0, C1=-1.0, gram_trace=4.0)


# ======================================================================================
# 8. Statistical (slow): Theorem 2.2.1 by trend on real ReLU nets
# ======================================================================================
@pytest.mark.slow
def test_wide_regularised_nets_approach_ntk_krr(asxp, tonp, xp):
    """Antisymmetric (f₀ ≡ 0) one-hidden-layer ReLU nets trained on (2.4) with the empirical Θ (Algorithm 1,
    stop-gradient): the max test-point gap to 𝒦(x, X)(𝒦 + ζNI)⁻¹Y shrinks with width, ~m^{-1/2}.
    Fixed seeds 0–2; measured mean gaps 0.123 (m = 64) and 0.0166 (m = 4096), ratio 7.4 (d = 4, N = 16)."""
    rng = np.random.default_rng(0)
    X, Xt = rng.standard_normal((16, 4)), rng.standard_normal((8, 4))
    X *= 2 / np.linalg.norm(X, axis=1, keepdims=True)
    Xt *= 2 / np.linalg.norm(Xt, axis=1, keepdims=True)
    Y = np.sin(1.5 * X[:, 0])
    zeta, n = 0.05, 16
    K = f64(tonp, kernels.fc(asxp(X), depth=1).ntk)
    Kt = f64(tonp, kernels.fc(asxp(Xt), asxp(X), depth=1).ntk)
    f_ntr = Kt @ np.linalg.solve(K + zeta * n * np.eye(n), Y)
    lam = np.linalg.eigvalsh(K)
    lr = 0.8 * n / (lam[-1] + lam[0] + 2 * zeta * n)
    gaps = {}
    for m in (64, 4096):
        net = Antisymmetric(FullyConnected(4, m, depth=1))
        g = []
        for s in range(3):
            tr = R.train_regularized(net, net.init(s, xp=xp), asxp(X), asxp(Y), zeta=zeta, lr=lr, steps=200,
                                     x_test=asxp(Xt))
            g.append(np.abs(f64(tonp, tr.f_test)[-1] - f_ntr).max())
        gaps[m] = np.mean(g)
    # m^{-1/2} predicts a factor 8 between m = 64 and 4096; require at least 3
    assert gaps[4096] < gaps[64] / 3
    assert gaps[4096] < 0.05


# ====================================================================================== device placement
def _regularizer_calls(strict, dev):
    rng = np.random.default_rng(2)
    on = lambda a: strict.asarray(np.asarray(a, dtype=np.float64), device=dev)  # noqa: E731
    n = 4
    K, Kt = on(spd(n, 3, low=0.3)), on(rng.normal(size=(2, n)))
    f, Y = on(rng.normal(size=n)), on(rng.normal(size=n))
    net = FullyConnected(3, 6, depth=1, b_std=0.3)
    params = net.init(0, xp=strict, device=dev)
    x, xt = on(rng.normal(size=(n, 3))), on(rng.normal(size=(2, 3)))
    Phi = on(rng.normal(size=(n, 6)))
    times = on([0.0, 0.5, 2.0])
    return {
        "rkhs_norm_sq": lambda: R.rkhs_norm_sq(f, K, jitter=1e-3),
        "rkhs_norm_sq_dual": lambda: R.rkhs_norm_sq_dual(f, K),
        "krr_fit": lambda: R.krr_fit(K, Y, 0.1, jitter=1e-3),
        "krr_predict": lambda: R.krr_predict(Kt, Y),
        "krr_objective": lambda: R.krr_objective(f, Y, K, 0.1),
        "krr_norm_bound": lambda: R.krr_norm_bound(Y, 0.1),
        "sub_batch_term": lambda: R.sub_batch_term(f, K, [2, 0]),
        "sub_batch_rkhs_norm": lambda: [R.sub_batch_rkhs_norm(f, K, 2, n_draws=3, seed=0),
                                        R.sub_batch_rkhs_norm(f, K, 2, n_draws="all", scaled=False)],
        "ntk_regularizer": lambda: [R.ntk_regularizer(net, params, x[:2, :], tau=0.5),
                                    R.ntk_regularizer(net, params, x[:2, :], kernel=K[:2, :2], jitter=1e-3)],
        "train_regularized": lambda: [R.train_regularized(net, params, x, Y, zeta=0.1, lr=0.1, steps=2, x_test=xt,
                                                          record_every=1, subset_size=2, seed=0),
                                      R.train_regularized(net, params, x, Y, zeta=0.0, lr=0.1, steps=1, kernel=K)],
        "regularized_gd_linear": lambda: R.regularized_gd_linear(Phi, Y, 0.1, lr=0.01, steps=2, features_test=Phi),
        "regularized_flow": lambda: [R.regularized_flow(K, Y, 0.1, times, f0=f, K_test=Kt, f0_test=on([0.1, 0.2])),
                                     R.regularized_flow(K, Y, 0.1, times, K_test=Kt, printed=True),
                                     R.regularized_flow(K, Y, 0.0, times, f0=f, K_test=Kt)],
        "flow_gap_bound": lambda: R.flow_gap_bound(K, K + 0.01 * K, Y, 0.1),
        "linearized_mse_flow": lambda: R.linearized_mse_flow(K, Y, times, K_test=Kt, reduction="mean"),
        "linearized_prior": lambda: R.linearized_prior(f, Phi, 0.5),
        "gaussian_logpdf": lambda: R.gaussian_logpdf(f, Y, K),
        "fs_map_log_prior": lambda: [R.fs_map_log_prior(f, K, 0.5), R.fs_map_log_prior(f, K, 0.5, include_logdet=False)],
        "gaussian_marginal": lambda: R.gaussian_marginal(f, K, [3, 1]),
        "continual_learning_penalty": lambda: R.continual_learning_penalty(f, Y, K),
        "fs_map_objective": lambda: R.fs_map_objective(f, Y, f[:2], K[:2, :2], 0.3),
        "kernel_generalization_bound": lambda: R.kernel_generalization_bound(n, 0.1, r=4.0, Lam=1.0, gram_trace=K),
        "ntk_regularized_generalization_bound": lambda: R.ntk_regularized_generalization_bound(
            n, 0.1, Lam=1.0, C1=4.0, gram_trace=K),
    }


# public names that take no arrays (scalars in, Python floats out) or are only returned (dataclasses)
_REG_NO_ARRAYS = {"tau_from_zeta", "Flow", "RegularizedTrajectory"}
# take arrays, return Python floats
_REG_FLOATS = {"krr_norm_bound", "flow_gap_bound", "kernel_generalization_bound", "ntk_regularized_generalization_bound"}
_REG_CALLS = sorted(set(R.__all__) - _REG_NO_ARRAYS)


def test_device_table_covers_the_public_api():
    strict, dev = _device1()
    assert set(_regularizer_calls(strict, dev)) == set(_REG_CALLS)


@pytest.mark.parametrize("name", _REG_CALLS)
def test_public_functions_keep_the_inputs_device(name):
    """Inputs on array_api_strict's device1 (which refuses implicit NumPy conversion, like a GPU): every array
    returned is an array_api_strict array on device1 (runs in every backend mode, NumPy included)."""
    import array_api_compat

    strict, dev = _device1()
    out = _regularizer_calls(strict, dev)[name]()
    arrays = list(_arrays_in(out))
    if name in _REG_FLOATS:
        assert isinstance(out, float) and not arrays
    else:
        assert arrays
    for a in arrays:
        assert array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(a)), type(a)
        assert array_api_compat.device(a) == dev


def test_zero_ridge_flow_on_duplicate_points_stays_in_the_range_of_K(asxp, tonp):
    """Θ₀ singular because two training points coincide (rows 0 and 1 of K equal), with different targets:
    f(x₀) = f(x₁) at every t ≤ 1e300, and as t → ∞ the flow tends to f₀ + P(Y − f₀) with P the projection onto
    range(K) = {v : v₀ = v₁} (the pair gets the mean of its residuals), and on test points to
    f₀(x) + K(x, X)K⁺(Y − f₀) = f₀(x) + K(x, X₁₉)K₁₉⁻¹ r̄ (19 distinct points, residual averaged over the pair).
    The rounding-level eigenvalue (4.5e-16) was fitted: at t = 1e16 the pair had outputs 0.189 and 0.311, and the
    test outputs were 0.12 off the min-norm interpolant."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 4))
    X[1] = X[0]
    nr = np.linalg.norm(X, axis=1)
    cos = np.clip(X @ X.T / np.outer(nr, nr), -1, 1)
    th = np.arccos(cos)
    G = np.outer(nr, nr) * (2 * cos * (np.pi - th) + np.sin(th)) / np.pi  # ReLU NTK (one hidden layer), data only
    G = (G + G.T) / 2
    K, Kt = G[:20, :20], G[20:, :20]
    assert np.array_equal(K[0], K[1])
    K19, Kt19 = K[1:, 1:], Kt[:, 1:]
    w19 = np.linalg.eigvalsh(K19)
    assert w19[0] > 1e-6 * w19[-1]
    Y = rng.standard_normal(20)
    Y[1] = -Y[0] + 0.5
    T = [0.0, 1.0, 1e10, 1e16, 1e300]

    def limits(f0, f0t):
        r = Y - f0
        rbar = r[1:].copy()
        rbar[0] = (r[0] + r[1]) / 2
        return f0 + np.concatenate([[rbar[0]], rbar]), f0t + Kt19 @ np.linalg.solve(K19, rbar), r

    fl = R.linearized_mse_flow(asxp(K), asxp(Y), T, K_test=asxp(Kt))
    tr, te = f64(tonp, fl.train), f64(tonp, fl.test)
    assert np.all(np.isfinite(tr)) and np.all(np.isfinite(te))
    assert np.abs(tr[:, 0] - tr[:, 1]).max() <= 1e-12
    lim, lim_t, r = limits(np.zeros(20), np.zeros(5))
    assert abs(lim[0] - 0.25) < 1e-15
    for k in (-2, -1):  # t = 1e16 is converged for the 19 distinct points
        np.testing.assert_allclose(tr[k], lim, rtol=0, atol=1e-10)
        np.testing.assert_allclose(te[k], lim_t, rtol=0, atol=1e-9)
    np.testing.assert_allclose(te[-1], Kt @ np.linalg.lstsq(K, Y, rcond=1e-10)[0], rtol=0, atol=1e-9)  # pinv route
    # an initial function outside the range (f₀(x₀) ≠ f₀(x₁)): only its component in range(K) is trained away
    f0, f0t = 0.3 * rng.standard_normal(20), 0.3 * rng.standard_normal(5)
    fl = R.regularized_flow(asxp(K), asxp(Y), 0.0, T, lr=0.7, f0=asxp(f0), K_test=asxp(Kt), f0_test=asxp(f0t))
    tr, te = f64(tonp, fl.train), f64(tonp, fl.test)
    assert np.abs((tr[:, 0] - tr[:, 1]) - (f0[0] - f0[1])).max() <= 1e-12
    lim, lim_t, _ = limits(f0, f0t)
    np.testing.assert_allclose(tr[-1], lim, rtol=0, atol=1e-10)
    np.testing.assert_allclose(te[-1], lim_t, rtol=0, atol=1e-9)
