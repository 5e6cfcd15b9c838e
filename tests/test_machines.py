"""Exact kernel machines (seed 000 eq. (7), Table 1) against independent routes.

Oracles (none shares code with ntkref.machines):
- the primal in an explicit feature space: with the linear kernel K = XXᵀ,
  β ∈ R^d is finite-dimensional and (λ/2)‖β‖² + Σ l(⟨β, xᵢ⟩, yᵢ) is minimised by
  SciPy (normal equations, Newton/trust methods for smooth losses, SLSQP on
  the slack-variable QP for hinge / ε-insensitive / hard margin); the kernel
  machine must give g = Kα = Xβ* and ‖β‖ = √(αᵀKα);
- the KKT conditions of each dual, checked directly;
- the objective at α is not above the objective at any perturbed α (hypothesis);
- numpy.linalg.solve for KRR; scikit-learn's SVC on a point-symmetric data set,
  where its bias is 0 by symmetry, so its problem coincides with ours.
Both K = XXᵀ of rank d < n (singular: α is not unique, g is) and d > n are used.
"""
import re
import warnings

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given
from hypothesis import strategies as st

from ntkref import losses, machines
from ntkref.machines import _gram, _solve
from ntkref._lib.validation import InvalidParameterError
from ._device import arrays_in as _arrays_in, device1 as _device1

ALL = ("hinge", "squared_hinge", "epsilon_insensitive", "squared", "logistic")
EPS = 0.2  # ε for the ε-insensitive loss below


def _loss(name):
    return losses.get(name, epsilon=EPS) if name == "epsilon_insensitive" else name


def _problem(name, n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    if name in ("hinge", "squared_hinge", "logistic"):
        y = np.where(X @ w + 0.7 * rng.standard_normal(n) >= 0, 1.0, -1.0)  # noisy: not separable
    else:
        y = X @ w + 0.3 * rng.standard_normal(n)
    return X, y


# ----------------------------------------------------------------------------- primal oracles


def _primal_oracle(name, X, y, lam):
    """β* of min (λ/2)‖β‖² + Σ l(⟨β, xᵢ⟩, yᵢ) over β ∈ R^d, by SciPy (no ntkref code)."""
    n, d = X.shape
    if name == "squared":  # ∇ = λβ − 2Xᵀ(y − Xβ) = 0
        return np.linalg.solve(lam / 2 * np.eye(d) + X.T @ X, X.T @ y)
    if name in ("logistic", "squared_hinge"):
        def f(b):
            m = y * (X @ b)
            if name == "logistic":
                return lam / 2 * b @ b + np.sum(np.logaddexp(0, -m))
            return lam / 2 * b @ b + np.sum(np.maximum(0, 1 - m) ** 2)

        def grad(b):
            m = y * (X @ b)
            lp = -y / (1 + np.exp(m)) if name == "logistic" else -2 * y * np.maximum(0, 1 - m)
            return lam * b + X.T @ lp

        def hess(b):
            m = y * (X @ b)
            w = np.exp(-np.logaddexp(0, m) - np.logaddexp(0, -m)) if name == "logistic" else 2.0 * (m < 1)
            return lam * np.eye(d) + X.T @ (w[:, None] * X)

        res = scipy.optimize.minimize(f, np.zeros(d), jac=grad, hess=hess, method="trust-exact",
                                      options={"gtol": 1e-13, "maxiter": 1000})
        # λ-strong convexity: ‖β − β*‖ ≤ ‖∇f(β)‖/λ, checked to be tiny
        assert np.linalg.norm(grad(res.x)) / lam < 1e-9
        return res.x
    # hinge / ε-insensitive: QP in (β, ξ) with linear constraints, by SLSQP
    if name == "hinge":
        # ξᵢ ≥ 1 − yᵢ⟨β, xᵢ⟩, ξ ≥ 0
        A = np.hstack([y[:, None] * X, np.eye(n)])
        cons = [{"type": "ineq", "fun": lambda v: A @ v - 1, "jac": lambda v: A}]
    else:
        # ξᵢ ≥ yᵢ − ⟨β, xᵢ⟩ − ε and ξᵢ ≥ ⟨β, xᵢ⟩ − yᵢ − ε, ξ ≥ 0
        A1 = np.hstack([X, np.eye(n)])
        A2 = np.hstack([-X, np.eye(n)])
        cons = [{"type": "ineq", "fun": lambda v: A1 @ v - y + EPS, "jac": lambda v: A1},
                {"type": "ineq", "fun": lambda v: A2 @ v + y + EPS, "jac": lambda v: A2}]

    def obj(v):
        return lam / 2 * v[:d] @ v[:d] + np.sum(v[d:])

    def obj_grad(v):
        return np.concatenate([lam * v[:d], np.ones(n)])

    v0 = np.concatenate([np.zeros(d), np.full(n, 1.0 + np.max(np.abs(y)))])  # feasible start
    res = scipy.optimize.minimize(obj, v0, jac=obj_grad, constraints=cons, bounds=[(None, None)] * d + [(0, None)] * n,
                                  method="SLSQP", options={"ftol": 1e-14, "maxiter": 2000})
    # status 8 ("positive directional derivative in line search") is SLSQP reaching its precision floor
    assert res.success or res.status == 8, res.message
    return res.x[:d]


def _loss_np(name, z, y):
    """Table 1 losses written out in NumPy (independent of ntkref.losses)."""
    m = y * z
    return {"hinge": lambda: np.maximum(0, 1 - m), "squared_hinge": lambda: np.maximum(0, 1 - m) ** 2,
            "epsilon_insensitive": lambda: np.maximum(0, np.abs(y - z) - EPS), "squared": lambda: (y - z) ** 2,
            "logistic": lambda: np.logaddexp(0, -m)}[name]()


# (n, d): d < n makes K = XXᵀ singular (rank d), d > n makes it nonsingular
SHAPES = [(40, 6), (24, 40)]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n, d", SHAPES)
@pytest.mark.parametrize("lam", [0.05, 3.0])
def test_fit_matches_feature_space_primal(name, n, d, lam, xp, asxp, tonp):
    X, y = _problem(name, n, d, seed=n + d)
    K = X @ X.T
    km = machines.solve(asxp(K), asxp(y), _loss(name), lam)
    assert km.converged
    alpha = tonp(km.alpha_)
    beta = _primal_oracle(name, X, y, lam)
    g_oracle = X @ beta
    scale = max(1.0, np.max(np.abs(g_oracle)))
    # SLSQP / trust-exact solve to ~1e-10 in the objective; predictions then agree to ~1e-6
    # (√(2Δ/λ)·max‖xᵢ‖ with Δ ~ 1e-12, λ ≥ 0.05, ‖x‖ ~ 6: 4e-5 worst case, observed far smaller).
    np.testing.assert_allclose(K @ alpha, g_oracle, rtol=0, atol=1e-6 * scale)
    assert km.rkhs_norm() == pytest.approx(np.linalg.norm(beta), rel=1e-6, abs=1e-9)
    # ntkref's point is at least as good as SciPy's (to rounding): P(α) ≤ P(β_scipy)
    P_ours = lam / 2 * alpha @ K @ alpha + np.sum(_loss_np(name, K @ alpha, y))
    P_scipy = lam / 2 * beta @ beta + np.sum(_loss_np(name, X @ beta, y))
    assert P_ours <= P_scipy + 1e-11 * max(1.0, P_scipy)
    # the reported gap is a true upper bound on the suboptimality and is tiny
    assert -1e-12 * max(1.0, km.primal_objective) <= km.duality_gap <= 1e-10 * max(1.0, km.primal_objective)


# ----------------------------------------------------------------------------- KKT conditions of the duals


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n, d", SHAPES)
def test_dual_kkt_conditions(name, n, d, xp, asxp, tonp):
    lam = 0.3
    X, y = _problem(name, n, d, seed=7 * n + d)
    K = X @ X.T
    alpha = tonp(machines.fit(asxp(K), asxp(y), _loss(name), lam))
    g = K @ alpha
    C = 1 / lam
    # exact to rounding: g carries error ~ n·eps·‖K‖·‖α‖ ≈ 1e-11 here
    tol = 1e-8
    if name == "hinge":  # 0 ≤ yα ≤ C; yα = 0 ⇒ yg ≥ 1; 0 < yα < C ⇒ yg = 1; yα = C ⇒ yg ≤ 1
        _hinge_kkt(K, y, alpha, lam, tol)
        a = y * alpha
        assert ((a > 0) & (a < C * (1 - 1e-12))).any() and (a == 0).any()  # both kinds of point are exercised
    elif name == "squared_hinge":  # stationarity α = −l′(g)/λ = 2y·max(0, 1 − yg)/λ
        np.testing.assert_allclose(alpha, 2 * y * np.maximum(0, 1 - y * g) / lam, atol=tol * C)
    elif name == "epsilon_insensitive":  # |α| ≤ C; α = 0 ⇒ |y − g| ≤ ε; 0 < |α| < C ⇒ y − g = ε·sign α
        r = y - g
        assert np.all(np.abs(alpha) <= C * (1 + 1e-15))
        assert np.all(np.abs(r[alpha == 0]) <= EPS + tol)
        mid = (alpha != 0) & (np.abs(alpha) < C * (1 - 1e-12))
        np.testing.assert_allclose(r[mid], EPS * np.sign(alpha[mid]), atol=tol)
        at_c = np.abs(alpha) >= C * (1 - 1e-12)
        assert np.all(r[at_c] * np.sign(alpha[at_c]) >= EPS - tol)
    elif name == "squared":  # α = 2(y − g)/λ
        np.testing.assert_allclose(alpha, 2 * (y - g) / lam, atol=tol * C)
    else:  # logistic: α = y·σ(−yg)/λ
        np.testing.assert_allclose(alpha, y / (1 + np.exp(y * g)) / lam, atol=1e-8 * C)


# ----------------------------------------------------------------------------- optimality by perturbation


_CACHE = {}


def _solved(name, asxp, tonp):
    key = name
    if key not in _CACHE:
        X, y = _problem(name, 30, 8, seed=3)
        K = X @ X.T
        _CACHE[key] = (K, y, tonp(machines.fit(asxp(K), asxp(y), _loss(name), 0.5)))
    return _CACHE[key]


@pytest.mark.parametrize("name", ALL)
@given(seed=st.integers(0, 2**32 - 1), log_t=st.floats(-8, 1))
def test_objective_not_lowered_by_perturbation(name, seed, log_t, xp, asxp, tonp):
    K, y, alpha = _solved(name, asxp, tonp)
    u = np.random.default_rng(seed).standard_normal(alpha.shape)
    u /= np.linalg.norm(u)
    P = machines.objective(asxp(alpha), asxp(K), asxp(y), _loss(name), 0.5)
    Pp = machines.objective(asxp(alpha + 10.0**log_t * u), asxp(K), asxp(y), _loss(name), 0.5)
    # rounding of P (a sum of ~30 terms of size ≤ ~10): 1e-12 relative
    assert Pp >= P - 1e-12 * max(1.0, abs(P))


# ----------------------------------------------------------------------------- conventions


@pytest.mark.parametrize("name", ALL)
def test_mean_reduction_is_sum_with_n_lambda(name, xp, asxp, tonp):
    n = 30
    X, y = _problem(name, n, 8, seed=11)
    K = X @ X.T
    a_mean = tonp(machines.fit(asxp(K), asxp(y), _loss(name), 0.01, reduction="mean"))
    a_sum = tonp(machines.fit(asxp(K), asxp(y), _loss(name), 0.01 * n))
    np.testing.assert_allclose(K @ a_mean, K @ a_sum, rtol=0, atol=1e-10)
    # and the objectives: mean = sum(nλ) / n
    P_mean = machines.objective(asxp(a_mean), asxp(K), asxp(y), _loss(name), 0.01, reduction="mean")
    P_sum = machines.objective(asxp(a_mean), asxp(K), asxp(y), _loss(name), 0.01 * n)
    assert P_mean == pytest.approx(P_sum / n, rel=1e-13)


@pytest.mark.parametrize("lam", [1e-6, 1e-2, 1.0, 1e3])
def test_krr_closed_form_against_numpy(lam, xp, asxp, tonp):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((25, 4))
    K = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=-1))  # Gaussian kernel: PD
    y = rng.standard_normal(25)
    alpha = tonp(machines.fit(asxp(K), asxp(y), "squared", lam))
    # the minimiser of Σ(y − g)² + (λ/2)αᵀKα (no ½ on the loss): (K + λ/2·I)α = y
    A = K + lam / 2 * np.eye(25)
    expected = np.linalg.solve(A, y)
    # two backward-stable solves differ by ≲ cond(A)·eps relative (times a modest constant)
    tol = 100 * np.linalg.cond(A) * np.finfo(float).eps
    np.testing.assert_allclose(alpha, expected, rtol=0, atol=tol * np.max(np.abs(expected)))


def test_kernel_regression_lambda_zero_interpolates(xp, asxp, tonp):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((15, 3))
    K = np.exp(-np.sum((X[:, None] - X[None]) ** 2, axis=-1))
    y = rng.standard_normal(15)
    km = machines.solve(asxp(K), asxp(y), "squared", 0.0)
    np.testing.assert_allclose(K @ tonp(km.alpha_), y, atol=1e-9)
    np.testing.assert_allclose(tonp(km.alpha_), np.linalg.solve(K, y), rtol=1e-6)


# ----------------------------------------------------------------------------- hard margin


def _separable(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    keep = np.abs(X @ w) > 0.3 * np.linalg.norm(w)  # a positive margin
    X = X[keep]
    return X, np.sign(X @ w)


def test_hard_margin_matches_primal_qp(xp, asxp, tonp):
    X, y = _separable(40, 5, seed=1)
    K = X @ X.T
    km = machines.hard_margin_svm(asxp(K), asxp(y))
    d = X.shape[1]
    A = y[:, None] * X
    res = scipy.optimize.minimize(lambda b: 0.5 * b @ b, np.zeros(d), jac=lambda b: b, method="SLSQP",
                                  constraints=[{"type": "ineq", "fun": lambda b: A @ b - 1, "jac": lambda b: A}],
                                  options={"ftol": 1e-15, "maxiter": 1000})
    assert res.success
    np.testing.assert_allclose(K @ tonp(km.alpha_), X @ res.x, atol=1e-7)
    assert km.rkhs_norm() == pytest.approx(np.linalg.norm(res.x), rel=1e-7)
    assert km.kkt_residual <= 1e-9  # all yᵢgᵢ ≥ 1


def test_hard_margin_is_the_small_lambda_limit_of_soft_margin(xp, asxp, tonp):
    X, y = _separable(40, 5, seed=2)
    K = X @ X.T
    hard = tonp(machines.hard_margin_svm(asxp(K), asxp(y)).alpha_)
    a_max = np.max(y * hard)
    # for C = 1/λ ≥ max yα_hard the soft-margin solution *is* the hard-margin one
    soft = tonp(machines.fit(asxp(K), asxp(y), "hinge", 0.5 / a_max))
    np.testing.assert_allclose(K @ soft, K @ hard, atol=1e-9)
    # for larger λ the box binds and the solutions differ
    soft_big = tonp(machines.fit(asxp(K), asxp(y), "hinge", 4.0 / a_max))
    assert np.max(np.abs(K @ soft_big - K @ hard)) > 1e-3


def test_hard_margin_rejects_non_separable_data(xp, asxp):
    # XOR is not linearly separable: the linear kernel's RKHS cannot separate it
    X = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    with pytest.raises(InvalidParameterError, match="not separable"):
        machines.hard_margin_svm(asxp(X @ X.T), asxp(y))


# ----------------------------------------------------------------------------- scikit-learn


def test_svm_matches_sklearn_where_its_bias_vanishes(xp, asxp, tonp):
    """sklearn's SVC fits a bias b (dual constraint Σαᵢ = 0).  On a point-symmetric data set
    {(x, y)} ∪ {(−x, −y)} with an odd kernel (linear) the unbiased solution is symmetric,
    α(−x) = −α(x), so Σα = 0 holds: it is feasible and optimal for sklearn's problem too,
    and sklearn's b is 0.  The decision values must then coincide."""
    svm = pytest.importorskip("sklearn.svm")
    rng = np.random.default_rng(9)
    X0 = rng.standard_normal((30, 4))
    y0 = np.where(X0 @ rng.standard_normal(4) + 0.5 * rng.standard_normal(30) > 0, 1.0, -1.0)
    X = np.vstack([X0, -X0])
    y = np.concatenate([y0, -y0])
    K = X @ X.T
    lam = 0.2
    clf = svm.SVC(kernel="precomputed", C=1 / lam, tol=1e-12).fit(K, y)
    alpha = tonp(machines.fit(asxp(K), asxp(y), "hinge", lam))
    assert abs(clf.intercept_[0]) < 1e-7
    # libsvm caches kernel entries as single-precision floats (`typedef float Qfloat` in svm.cpp), so
    # even at tol = 1e-12 its solution is only float32-accurate: ~eps32·‖K‖·Σ|α| ≈ 1e-5 here
    g_sk = clf.decision_function(K)
    np.testing.assert_allclose(K @ alpha, g_sk, atol=1e-4 * np.max(np.abs(g_sk)))
    # and ntkref's point is at least as good for the (unbiased) objective, up to float64 rounding
    a_sk = np.zeros(len(y))
    a_sk[clf.support_] = clf.dual_coef_[0]

    def P(a):
        return lam / 2 * a @ K @ a + np.sum(np.maximum(0, 1 - y * (K @ a)))

    assert P(alpha) <= P(a_sk) + 1e-12 * P(a_sk)


# ----------------------------------------------------------------------------- result object and certificate


def test_result_object_predict_and_certified_error(xp, asxp, tonp):
    X, y = _problem("logistic", 40, 6, seed=4)
    Xt = np.random.default_rng(1).standard_normal((7, 6))
    K, Kt = X @ X.T, Xt @ X.T
    exact = machines.solve(asxp(K), asxp(y), "logistic", 0.1)
    np.testing.assert_allclose(tonp(exact.predict(asxp(Kt))), Kt @ tonp(exact.alpha_), rtol=1e-14)
    np.testing.assert_allclose(tonp(machines.predict(exact.alpha_, asxp(Kt))), Kt @ tonp(exact.alpha_), rtol=1e-14)
    assert exact.rkhs_norm() == pytest.approx(machines.rkhs_norm(exact.alpha_, asxp(K)), rel=1e-14)
    # a deliberately loose solve: its gap must certify |g − g*| ≤ √K(x,x)·√(2·gap/λ) (strong convexity)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", machines.ConvergenceWarning)  # stopping early is the point here
        rough = machines.solve(asxp(K), asxp(y), "logistic", 0.1, tol=1e-2, max_iter=2)
    bound = rough.beta_error_bound
    assert bound > 0
    diff = np.abs(Kt @ (tonp(rough.alpha_) - tonp(exact.alpha_)))
    assert np.all(diff <= np.sqrt(np.sum(Xt**2, axis=1)) * bound * (1 + 1e-9) + 1e-12)


def test_duality_gap_function_is_nonnegative_and_zero_at_optimum(xp, asxp, tonp):
    X, y = _problem("hinge", 30, 8, seed=12)
    K = X @ X.T
    alpha = machines.fit(asxp(K), asxp(y), "hinge", 0.3)
    gap = machines.duality_gap(alpha, asxp(K), asxp(y), "hinge", 0.3)
    assert abs(gap) < 1e-10
    # weak duality on arbitrary feasible points: D(α′) ≤ P(α)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a2 = y * rng.uniform(0, 1 / 0.3, size=30)
        assert machines.dual_objective(asxp(a2), asxp(K), asxp(y), "hinge", 0.3) <= machines.objective(
            alpha, asxp(K), asxp(y), "hinge", 0.3) + 1e-12


def test_float32_inputs_give_float32_results(xp, asxp, tonp):
    X, y = _problem("hinge", 20, 30, seed=13)
    K = X @ X.T
    a64 = tonp(machines.fit(asxp(K), asxp(y), "hinge", 0.5))
    a32 = machines.fit(asxp(K.astype(np.float32)), asxp(y.astype(np.float32)), "hinge", 0.5)
    assert a32.dtype == xp.float32
    # float32: g to ~1e-4 relative (eps32·cond(K_FF), cond ≲ 1e2 here)
    np.testing.assert_allclose(K @ tonp(a32), K @ a64, atol=1e-4 * np.max(np.abs(K @ a64)))


def _float32_exact_problem(name, n, d, seed):
    """Integer features in [−2, 2]: K = XXᵀ is exact in float32, so the float32 K given to the solver is
    the linear kernel of X and SciPy's feature-space primal is an independent oracle for it."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
    _, y = _problem(name, n, d, seed)
    y = y.astype(np.float32).astype(np.float64)  # targets exact in float32 too
    K = X @ X.T
    assert np.array_equal(K.astype(np.float32).astype(np.float64), K)
    return X, y, K


@pytest.mark.parametrize("name", ["hinge", "squared_hinge", "epsilon_insensitive", "logistic"])
@pytest.mark.parametrize("lam", [0.1, 2.0])
def test_float32_solves_are_certified_against_the_feature_space_primal(name, lam, xp, asxp, tonp):
    """A float32 K is solved in float64 arithmetic and α rounded to float32; the certificate is that of the
    float32 α returned.  Checked against SciPy's primal in β-space (no ntkref code): P(β(α)) − P* ≤ gap
    (weak duality), ‖β(α) − β*‖ ≤ √(2·gap/λ) (strong convexity), gap ≤ 1e-4·max(1, P) (the float32 tol).
    The working-set solver used to run in float32, where its KKT test (violations below
    1e3·m·eps32·L·max|α|) took every coordinate for optimal: converged=False, gaps of 10–300 here."""
    X, y, K = _float32_exact_problem(name, 100, 4, seed=4)
    km = machines.solve(asxp(K.astype(np.float32)), asxp(y.astype(np.float32)), _loss(name), lam)
    assert km.converged
    assert km.alpha_.dtype == xp.float32 and km.train_output_.dtype == xp.float32
    alpha = tonp(km.alpha_).astype(np.float64)
    beta = X.T @ alpha
    P = lam / 2 * beta @ beta + np.sum(_loss_np(name, X @ beta, y))
    assert km.primal_objective == pytest.approx(P, rel=1e-12)  # the objective of the α returned
    assert 0 <= km.duality_gap <= 1e-4 * max(1.0, P)
    # ‖β‖ of the α returned, as the solve reports it and as rkhs_norm evaluates float32 inputs (in float64)
    assert km.rkhs_norm_ == pytest.approx(np.linalg.norm(beta), rel=1e-12)
    assert machines.rkhs_norm(km.alpha_, asxp(K.astype(np.float32))) == pytest.approx(np.linalg.norm(beta), rel=1e-12)
    beta_star = _primal_oracle(name, X, y, lam)
    P_star = lam / 2 * beta_star @ beta_star + np.sum(_loss_np(name, X @ beta_star, y))
    assert P - P_star <= km.duality_gap + 1e-9 * P
    assert np.linalg.norm(beta - beta_star) <= np.sqrt(2 * km.duality_gap / lam) + 1e-5
    if name in ("hinge", "epsilon_insensitive"):  # rounded into the dual box: λ·yᵢ·αᵢ ∈ [0, 1] (|λαᵢ| ≤ 1)
        t = lam * (y * alpha if name == "hinge" else np.abs(alpha))
        assert np.all((t >= (0 if name == "hinge" else -1)) & (t <= 1))
    # the public gap function evaluates float32 inputs in float64: the same number for the QP losses (dual
    # point α); for logistic it takes the better of two dual points, one of them the solver's
    gap = machines.duality_gap(km.alpha_, asxp(K.astype(np.float32)), asxp(y.astype(np.float32)), _loss(name), lam)
    if name == "logistic":
        assert 0 <= gap <= km.duality_gap + 1e-9 * P  # (P and D are sums of ~n terms of size ~P)
    else:
        assert gap == pytest.approx(km.duality_gap, rel=1e-9, abs=1e-12 * P)


def _refinement_case():
    """A rank-20 linear kernel, n = 500, ε-insensitive (ε = 0.1) at λ = 0.001 (|α| up to 1/λ = 1e3): the working-set
    solves' drift-safe threshold, 1e3·m·eps·L·max|α| ≈ 2e-4, left violations of ~1e-6 (converged=False at relative
    gap 8e-7); the second pass with the per-coordinate threshold reaches tol."""
    rng = np.random.default_rng([5, 500, 20])
    X = rng.standard_normal((500, 20))
    return X @ X.T, np.sign(X[:, 0] + 0.3 * rng.standard_normal(500)), 1e-3


def test_tight_refinement_reaches_tol_where_the_coarse_threshold_stopped(asxp, tonp):
    """:func:`_refinement_case`.  The gap is recomputed here from its definition: P = (λ/2)αᵀKα
    + Σ max(0, |Kα − y| − ε), D = λyᵀα − ελ‖α‖₁ − (λ/2)αᵀKα with |λαᵢ| ≤ 1; and the estimate of its rounding
    (gap_rounding) is below tol too."""
    K, y, lam = _refinement_case()
    km = machines.solve(asxp(K), asxp(y), losses.get("epsilon_insensitive", epsilon=0.1), lam)
    assert km.converged
    a = tonp(km.alpha_)
    g = K @ a
    assert np.max(np.abs(lam * a)) <= 1
    P = lam / 2 * a @ g + np.sum(np.maximum(0, np.abs(g - y) - 0.1))
    D = lam * y @ a - 0.1 * lam * np.sum(np.abs(a)) - lam / 2 * a @ g
    assert 0 <= P - D <= 1e-10 * P + 1e-12 * np.sum(np.abs(g) + 1)  # (the rounding of the two sums)
    assert P - D + km.gap_rounding <= 1e-10 * P


def test_gap_rounding_refuses_to_certify_what_float64_cannot(tonp):
    """|α| up to 1/λ = 1e12 on a rank-2 integer Gram: g = Kα is rounded by ~1e-4 and the computed P and D, which
    share it, cancel to a gap of 1e-15 — the solve said converged=True while its exact primal (rational Kα,
    50-digit losses) exceeds an LP's upper bound on P* by 2.6e-4.  Now gap + gap_rounding bounds that excess and
    converged is False, with a warning naming the rounding of Kα.  (Since the gap is proven — compensated Kα,
    ntkref.machines._proof — the reported gap itself is that excess, and the warning says the plain float64 gap hid
    it.)"""
    from fractions import Fraction as F

    X = np.array([[-3, 0], [0, 0], [0, 2], [0, -1], [-1, 2], [1, 0], [3, -2], [0, 3], [2, 1], [-3, 0], [-1, 3],
                  [0, 1]], float)
    y = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, -1], float)
    K, n, lam = X @ X.T, 12, 1e-12
    with pytest.warns(machines.ConvergenceWarning, match="rounding of\n?.*Kα"):
        km = machines.solve(K, y, "hinge", lam)
    assert not km.converged
    a = [F(float(v)) for v in tonp(km.alpha_)]
    g = [sum(F(float(K[i, j])) * a[j] for j in range(n)) for i in range(n)]
    P_exact = float(F(lam) / 2 * sum(ai * gi for ai, gi in zip(a, g))
                    + sum(max(F(0), 1 - F(float(yi)) * gi) for yi, gi in zip(y, g)))
    lp = scipy.optimize.linprog(np.r_[0.0, 0.0, np.ones(n)], A_ub=np.c_[-(y[:, None] * X), -np.eye(n)],
                                b_ub=-np.ones(n), bounds=[(None, None)] * 2 + [(0, None)] * n, method="highs")
    w = lp.x[:2]
    P_upper = lam / 2 * w @ w + np.sum(np.maximum(0, 1 - y * (X @ w)))  # ≥ P*
    plain = machines.duality_gap(km.alpha_, K, y, "hinge", lam)  # P − D from plain float64 Kα
    assert P_exact - P_upper > 1e3 * max(plain, 1e-16)  # the plain float64 gap alone is no certificate
    assert P_exact - P_upper <= km.duality_gap + km.gap_rounding


@pytest.mark.parametrize("lam", [1e-8, 1e-4, 1e-2])
def test_float32_squared_loss_is_solved_in_float64(lam, asxp, tonp):
    """The closed form of the squared loss on a float32 integer Gram of rank 3 (n = 25): it ran in float32, where
    K + (λ/2)I is singular at λ = 1e-8 (a raw LinAlgError) and at λ = 1e-4 gave converged=True with P(α) 1.6e-3
    above the optimum.  Now: solved in float64, α rounded to float32, and the certificate (recomputed here in
    float64, P − D with D(α) = −Σ(−λαᵢyᵢ + λ²αᵢ²/4) − (λ/2)αᵀKα) is that of the α returned; converged only if it
    meets tol."""
    rng = np.random.default_rng(2)
    X = rng.integers(-3, 4, size=(25, 3)).astype(np.float64)
    K = X @ X.T
    y = rng.integers(-5, 6, size=25).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", machines.ConvergenceWarning)
        km = machines.solve(asxp(K.astype(np.float32)), asxp(y.astype(np.float32)), "squared", lam)
    assert km.alpha_.dtype == np.float32 or "float32" in str(km.alpha_.dtype)
    a = tonp(km.alpha_).astype(np.float64)
    g = K @ a
    P = lam / 2 * a @ g + np.sum((y - g) ** 2)
    s = lam * a
    D = -np.sum(-s * y + s * s / 4) - lam / 2 * a @ g
    assert km.primal_objective == pytest.approx(P, rel=1e-12)
    assert km.duality_gap == pytest.approx(P - D, rel=1e-6, abs=1e-12 * P)
    assert km.converged == (P - D + km.gap_rounding <= 1e-4 * max(1.0, P))
    ref = machines.solve(K, y, "squared", lam)  # the float64 optimum of the same numbers
    assert P - ref.primal_objective <= km.duality_gap + km.gap_rounding + 1e-9 * P


def test_float32_rounding_limit_is_reported_not_hidden(asxp, tonp):
    """α rounded to float32 (|α| ~ 1/λ = 1e3 on a singular K, so g = Kα cancels ~5 digits): the certificate is
    that of the float32 α, recomputed here in float64.  With the earlier dual point −l′(Kα)/λ its gap was > 1e-4·P
    and the solve said converged=False; the proven certificate (dual point λyα, ntkref.machines._proof) is tight:
    it bounds the true excess over the float64 optimum (2.2563e-6) by 2.2564e-6, well within tol·P, so the float32
    α is certified — a theorem for the float32 numbers given."""
    rng = np.random.default_rng([1, 500, 20])
    X = rng.standard_normal((500, 20))
    y = np.sign(X[:, 0] + 0.3 * rng.standard_normal(500))
    K32 = (X @ X.T).astype(np.float32)
    lam = 0.001
    km = machines.solve(asxp(K32), asxp(y.astype(np.float32)), "logistic", lam)
    K, a = K32.astype(np.float64), tonp(km.alpha_).astype(np.float64)
    g = K @ a
    P = lam / 2 * a @ g + np.sum(np.logaddexp(0, -y * g))
    assert km.primal_objective == pytest.approx(P, rel=1e-12)
    km64 = machines.solve(asxp(K), asxp(y), "logistic", lam, check_psd=False)
    assert km64.converged and km64.duality_gap <= 1e-10 * km64.primal_objective
    excess = P - km64.primal_objective  # ≤ P(α) − P* (P* ≤ P(α64))
    assert 1e-8 * P < excess <= km.duality_gap + km.gap_rounding + 1e-12 * P  # the bound holds, and is tight:
    assert km.duality_gap + km.gap_rounding <= 1.01 * excess + 1e-10 * P
    assert km.converged == (km.duality_gap + km.gap_rounding <= 1e-4 * P)


# ----------------------------------------------------------------------------- bad input


def _spd(n=4):
    X = np.random.default_rng(0).standard_normal((n, n + 2))
    return X @ X.T


@pytest.mark.parametrize(
    "K, y, loss, lam, kwargs, match",
    [
        (np.ones((3, 4)), np.ones(3), "squared", 1.0, {}, "square"),
        (np.array([[1.0, 0.5], [0.0, 1.0]]), np.ones(2), "squared", 1.0, {}, "symmetric"),
        (np.array([[1.0, 2.0], [2.0, 1.0]]), np.ones(2), "squared", 1.0, {}, "positive semidefinite"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), np.ones(2), "squared", 1.0, {}, "NaN"),
        (_spd(), np.ones(3), "squared", 1.0, {}, "shape \\(4,\\)"),
        (_spd(), np.ones((4, 1)), "squared", 1.0, {}, "'y'"),
        (_spd(), np.array([1.0, -1.0, 0.0, 1.0]), "hinge", 1.0, {}, "-1 and \\+1"),
        (_spd(), np.array([1.0, -1.0, 2.0, 1.0]), "logistic", 1.0, {}, "-1 and \\+1"),
        (_spd(), np.ones(4), "hinge", 0.0, {}, "hard_margin_svm"),
        (_spd(), np.ones(4), "logistic", 0.0, {}, "'lam'"),
        (_spd(), np.ones(4), "hinge", -1.0, {}, "'lam'"),
        (_spd(), np.ones(4), "squared", -1.0, {}, "'lam'"),
        (_spd(), np.ones(4), "squared", float("nan"), {}, "'lam'"),
        (_spd(), np.ones(4), "squared", 1.0, {"reduction": "average"}, "'reduction'"),
        (_spd(), np.ones(4), "svm", 1.0, {}, "'loss'"),
        (_spd(), np.ones(4), 3, 1.0, {}, "'loss'"),
        (_spd(), np.ones(4), "hinge", 1.0, {"tol": 0.0}, "'tol'"),
        (_spd(), np.ones(4), "hinge", 1.0, {"max_iter": 0}, "'max_iter'"),
    ],
)
def test_bad_input_is_a_clear_error(K, y, loss, lam, kwargs, match, xp, asxp):
    with pytest.raises(InvalidParameterError, match=match):
        machines.fit(asxp(K), asxp(y), loss, lam, **kwargs)


def test_singular_kernel_with_lambda_zero_is_an_error(xp, asxp):
    X = np.random.default_rng(0).standard_normal((6, 2))
    with pytest.raises(InvalidParameterError, match="nonsingular"):
        machines.fit(asxp(X @ X.T), asxp(np.ones(6)), "squared", 0.0)


def test_predict_and_rkhs_norm_shape_errors(xp, asxp):
    with pytest.raises(InvalidParameterError, match="columns"):
        machines.predict(asxp(np.ones(3)), asxp(np.ones((2, 4))))
    with pytest.raises(InvalidParameterError, match="shape"):
        machines.rkhs_norm(asxp(np.ones(3)), asxp(_spd()))


# ----------------------------------------------------------------------------- adversarial small problems


@pytest.mark.parametrize("name", ("hinge", "squared_hinge", "epsilon_insensitive"))
@given(n=st.integers(1, 14), d=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), log_lam=st.floats(-3, 2),
       n_dup=st.integers(0, 3))
def test_active_set_solver_on_degenerate_problems(name, n, d, seed, log_lam, n_dup, xp, asxp, tonp):
    """Singular K (d < n), duplicated points (with either label), tiny n: the QP solver must still
    return a point with a certified duality gap (P − D ≤ 1e-10·max(1, P)), and that point must be
    optimal by an independent test: no coordinate direction ±eᵢ lowers the primal objective."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if n_dup and n > 1:
        X = np.vstack([X, X[rng.integers(0, n, size=n_dup)]])
    m = X.shape[0]
    y = rng.choice([-1.0, 1.0], size=m) if name != "epsilon_insensitive" else rng.standard_normal(m)
    K = X @ X.T
    lam = 10.0**log_lam
    km = machines.solve(asxp(K), asxp(y), _loss(name), lam)
    assert km.converged
    assert km.duality_gap <= 1e-10 * max(1.0, km.primal_objective)
    alpha = tonp(km.alpha_)

    def P(a):
        return lam / 2 * a @ K @ a + np.sum(_loss_np(name, K @ a, y))

    P0 = P(alpha)
    for i in range(m):
        for step in (1e-4, -1e-4):
            e = np.zeros(m)
            e[i] = step
            assert P(alpha + e) >= P0 - 1e-11 * max(1.0, P0)


def test_psd_threshold(xp, asxp):
    """λ_min(K) = −1e-8·‖K‖ (far below −n·eps·‖K‖_F ≈ −1e-13·‖K‖) is refused; a singular PSD K
    (λ_min = 0 up to the rounding of forming it) is accepted."""
    rng = np.random.default_rng(3)
    V, _ = np.linalg.qr(rng.standard_normal((20, 20)))
    w = np.linspace(1.0, 2.0, 20)
    w[0] = -1e-8
    K = (V * w) @ V.T
    K = (K + K.T) / 2
    with pytest.raises(InvalidParameterError, match="positive semidefinite"):
        machines.fit(asxp(K), asxp(np.ones(20)), "squared", 1.0)
    w[0] = 0.0
    K0 = (V * w) @ V.T
    machines.fit(asxp((K0 + K0.T) / 2), asxp(np.ones(20)), "squared", 1.0)


# ------------------------------------------------------------------ device placement


def _device_cases():
    X, y = _problem("hinge", 8, 3, 5)
    Xr, yr = _problem("squared", 8, 3, 6)
    K, Kr = X @ X.T, Xr @ Xr.T
    a = np.linspace(-0.3, 0.4, 8)
    return {
        "fit": lambda on: machines.fit(on(K), on(y), "hinge", 0.5),
        "solve-hinge": lambda on: machines.solve(on(K), on(y), "hinge", 0.5),
        "solve-squared_hinge": lambda on: machines.solve(on(K), on(y), "squared_hinge", 0.5),
        "solve-epsilon_insensitive": lambda on: machines.solve(on(Kr), on(yr), _loss("epsilon_insensitive"), 0.5),
        "solve-logistic": lambda on: machines.solve(on(K), on(y), "logistic", 0.5),
        "solve-squared": lambda on: machines.solve(on(Kr), on(yr), "squared", 0.5, reduction="mean"),
        "hard_margin_svm": lambda on: machines.hard_margin_svm(on(K + 4 * np.eye(8)), on(y)),
        "predict": lambda on: machines.predict(on(a), on(K[:3])),
        "KernelMachine.predict": lambda on: machines.solve(on(K), on(y), "hinge", 0.5).predict(on(K[:3])),
        "rkhs_norm": lambda on: machines.rkhs_norm(on(a), on(K)),
        "objective": lambda on: machines.objective(on(a), on(K), on(y), "hinge", 0.5),
        "dual_objective": lambda on: machines.dual_objective(on(a * y), on(K), on(y), "hinge", 5.0),
        "duality_gap": lambda on: machines.duality_gap(on(a), on(K), on(y), "logistic", 0.5),
    }


@pytest.mark.parametrize("case", sorted(_device_cases()))
def test_public_functions_return_arrays_on_the_inputs_device(case):
    """Inputs on array_api_strict's device1 (a stand-in for a GPU, which refuses implicit NumPy
    conversion): every array returned is a strict array on device1 (the active-set solvers' host
    step copies its results back)."""
    import array_api_compat

    strict, dev = _device1()
    result = _device_cases()[case](lambda v: strict.asarray(v, device=dev))
    arrays = list(_arrays_in(result))
    if isinstance(result, float):  # scalar summaries (norms, objectives, gaps) are documented Python floats
        pass  # (the dual objective is −inf outside the dual's domain: a value, not an error)
    else:
        assert arrays, type(result)
    for arr in arrays:
        assert array_api_compat.array_namespace(arr) is strict, type(arr)
        assert array_api_compat.device(arr) == dev, array_api_compat.device(arr)


@pytest.mark.parametrize("name", ("hinge", "squared_hinge", "epsilon_insensitive"))
def test_host_step_is_the_numpy_solve(name):
    """The active-set solvers run on the host for non-NumPy namespaces: the result on device1 equals
    the NumPy solve bit for bit (same validated K and y, same host code)."""
    strict, dev = _device1()
    X, y = _problem(name, 12, 4, 8)
    K = X @ X.T
    ref = machines.solve(K, y, _loss(name), 0.3)
    got = machines.solve(strict.asarray(K, device=dev), strict.asarray(y, device=dev), _loss(name), 0.3)
    from ntkref._lib.backend import to_numpy

    np.testing.assert_array_equal(to_numpy(got.alpha_), ref.alpha_)
    np.testing.assert_array_equal(to_numpy(got.train_output_), ref.train_output_)
    assert (got.primal_objective, got.dual_objective, got.n_iter, got.rkhs_norm_) == (
        ref.primal_objective, ref.dual_objective, ref.n_iter, ref.rkhs_norm_)


# ------------------------------------------------------------------ finite or error (issue 14)


def _small_gram():
    rng = np.random.default_rng(14)
    x = rng.normal(size=(5, 3))
    return x @ x.T + 0.1 * np.eye(5), np.array([1.0, -1.0, 1.0, -1.0, 1.0])


@pytest.mark.parametrize("loss", ["squared", "epsilon_insensitive"])
@pytest.mark.parametrize("y_scale, lam, named", [(1e300, 0.1, "'y'"), (1e300, 1e300, "'lam'"),
                                                 (1e200, 1e200, "'y'")])
def test_solve_refuses_an_overflowing_objective(asxp, loss, y_scale, lam, named):
    """machines.solve(K, 1e300·y, 'squared', 0.1) used to return a NaN duality gap with converged=True.
    Finite or error: the objective/gap overflow is an InvalidParameterError naming the input at fault;
    never a non-finite gap reported as converged."""
    K, y = _small_gram()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            m = machines.solve(asxp(K), asxp(y_scale * y), loss, lam)
        except InvalidParameterError as exc:
            assert named in str(exc) and "not finite" in str(exc)
            return
    # a solver that stays finite is fine, as long as its certificate is finite
    assert np.isfinite(m.duality_gap) and np.isfinite(m.primal_objective)


def test_solve_overflow_of_the_squared_loss_is_an_error(asxp):
    K, y = _small_gram()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(InvalidParameterError, match="'y'.*too large"):
            machines.solve(asxp(K), asxp(1e300 * np.ones(5)), "squared", 0.1)


@pytest.mark.parametrize("scale", [1e300, 1e200])
@pytest.mark.parametrize("fn", ["solve", "hard_margin_svm"])
def test_a_gram_matrix_that_overflows_is_named_not_called_indefinite(asxp, scale, fn):
    """‖K‖_F overflowing made the PSD check report 'not positive semidefinite' for the PSD matrix 1e300·K."""
    K, y = _small_gram()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(InvalidParameterError, match="'K'.*too large") as info:
            if fn == "solve":
                machines.solve(asxp(scale * K), asxp(y), "hinge", 0.1)
            else:
                machines.hard_margin_svm(asxp(scale * K), asxp(y))
    assert "semidefinite" not in str(info.value)


def test_unchecked_overflowing_gram_never_reports_converged(asxp):
    """With check_psd=False the overflow surfaces in the objective: an error, not converged=True with NaN."""
    K, y = _small_gram()
    for loss in ("squared", "hinge", "squared_hinge", "logistic", "epsilon_insensitive"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m = machines.solve(asxp(1e300 * K), asxp(y), loss, 0.1, check_psd=False)
            except InvalidParameterError as exc:
                assert "'K'" in str(exc), (loss, exc)
                continue
        assert np.isfinite(m.duality_gap) and np.isfinite(m.primal_objective), loss


# ------------------------------------------------------------------ PSD tests (issue 17): Cholesky certificate, Lanczos test


def _with_spectrum(w, seed):
    """V diag(w) Vᵀ, V a Haar-random orthogonal matrix: a symmetric matrix with eigenvalues w (to rounding)."""
    n = len(w)
    V, R = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    V = V * np.sign(np.diag(R))
    K = (V * w) @ V.T
    return (K + K.T) / 2


def _psd_refused(K, method, asxp):
    try:
        machines.solve(asxp(K), asxp(np.ones(K.shape[0])), "squared", 1.0, check_psd=method)
    except InvalidParameterError as exc:
        assert "positive semidefinite" in str(exc)
        return True
    return False


def _kw_miss_bound(n, k, mu, delta, lam_max):
    """Kuczyński–Woźniakowski (1992) Thm 4.2(a) for λ_max(K)·I − K: the probability that k Lanczos
    steps from a uniform start leave the smallest Ritz value above −δ when λ_min(K) = −μ."""
    if mu <= delta:
        return 1.0
    return min(1.0, 1.648 * np.sqrt(n) * np.exp(-(2 * k - 1) * np.sqrt((mu - delta) / (lam_max + mu))))


@pytest.mark.parametrize("method", ["cholesky", "lanczos"])
@pytest.mark.parametrize("case", ["barely_psd", "rank_deficient", "huge", "tiny", "zero_eigs_cluster"])
def test_psd_tests_accept_psd_matrices(case, method, xp, asxp):
    """No false refusals: PSD matrices (by construction; eigvalsh confirms λ_min ≥ −δ) are accepted by
    both tests, including the hard cases for a Cholesky shift (singular, scaled by 1e±100)."""
    n = 300
    rng = np.random.default_rng(1)
    if case == "barely_psd":
        w = np.linspace(0.0, 2.0, n)
        K = _with_spectrum(w, 2)
    elif case == "rank_deficient":
        X = rng.standard_normal((n, 7))
        K = X @ X.T
    elif case == "huge":
        X = rng.standard_normal((n, 20))
        K = 1e100 * (X @ X.T)
    elif case == "tiny":
        X = rng.standard_normal((n, 20))
        K = 1e-100 * (X @ X.T)
    else:  # many exact zeros and a wide positive spread
        w = np.concatenate([np.zeros(n - 10), np.logspace(-3, 3, 10)])
        K = _with_spectrum(w, 3)
    delta = n * np.finfo(float).eps * np.linalg.norm(K)
    assert np.linalg.eigvalsh(K)[0] >= -delta  # the premise, by an independent route
    assert not _psd_refused(K, method, asxp)


@pytest.mark.parametrize("method", ["cholesky", "lanczos"])
@pytest.mark.parametrize("rel", [1e-2, 1e-5, 1e-9])
def test_psd_tests_refuse_an_isolated_negative_eigenvalue(rel, method, xp, asxp):
    """λ_min = −rel·‖K‖₂ with the rest of the spectrum in [1, 2]: at least 10δ, δ = n·eps·‖K‖_F ≈ 1e-12·‖K‖₂,
    so both tests must refuse (Lanczos: the negative eigenvalue is isolated, and the K–W bound for this
    spectrum is tiny for rel = 1e-2; a Krylov space meets an isolated extreme eigenvalue in a few steps)."""
    n = 300
    w = np.linspace(1.0, 2.0, n)
    w[0] = -rel * 2.0
    K = _with_spectrum(w, 4)
    assert np.linalg.eigvalsh(K)[0] < -10 * n * np.finfo(float).eps * np.linalg.norm(K)
    assert _psd_refused(K, method, asxp)


def test_cholesky_psd_threshold_is_n_eps_frobenius(xp, asxp):
    """The certificate's tolerance δ = n·eps·‖K‖_F, on both sides: λ_min = −δ/100 is accepted,
    λ_min = −100δ refused (eigvalsh confirms both spectra)."""
    n = 200
    w = np.linspace(0.0, 1.0, n)
    K0 = _with_spectrum(w, 5)
    delta = n * np.finfo(float).eps * np.linalg.norm(K0)
    for factor, refused in ((0.01, False), (100.0, True)):
        w2 = w.copy()
        w2[0] = -factor * delta
        K = _with_spectrum(w2, 5)
        lmin = np.linalg.eigvalsh(K)[0]
        assert (lmin < -delta) == refused
        assert _psd_refused(K, "cholesky", asxp) == refused


@pytest.mark.parametrize("seed", range(6))
def test_lanczos_refusal_is_a_proof_and_meets_its_bound(seed, xp, asxp):
    """Adversarial spectra for Lanczos: a negative cluster near 0 under a wide positive spread
    (λ ∈ [−μ, 0) ∪ [0, 1]).  (a) every refusal is right: eigvalsh finds λ_min < 0; (b) whenever the
    documented Kuczyński–Woźniakowski bound puts the miss probability below 1e-6, it refuses."""
    rng = np.random.default_rng(seed)
    n = 400
    mu = 10.0 ** rng.uniform(-6, 0)
    w = np.concatenate([-mu * rng.uniform(0, 1, 5), rng.uniform(0, 1, n - 5)])
    w[0] = -mu
    K = _with_spectrum(w, 10 + seed)
    lmin, lmax = np.linalg.eigvalsh(K)[[0, -1]]
    delta = n * np.finfo(float).eps * np.linalg.norm(K)
    refused = _psd_refused(K, "lanczos", asxp)
    if refused:
        assert lmin < 0
    if _kw_miss_bound(n, _gram.LANCZOS_STEPS, -lmin, delta, lmax) < 1e-6:
        assert refused


@pytest.mark.parametrize("value", ["eigh", "yes", 2.5])
def test_check_psd_option_is_validated(value, xp, asxp):
    with pytest.raises(InvalidParameterError, match="check_psd"):
        machines.fit(asxp(_spd()), asxp(np.ones(4)), "hinge", 1.0, check_psd=value)


def test_auto_psd_uses_lanczos_above_the_cholesky_size(monkeypatch, xp, asxp):
    """check_psd=True is 'auto': with the Cholesky limit lowered below n, an indefinite K is still
    refused (by the Lanczos test, whose message names it)."""
    monkeypatch.setattr(_gram, "_CHOLESKY_MAX_N", 10)
    w = np.linspace(1.0, 2.0, 60)
    w[0] = -0.5
    with pytest.raises(InvalidParameterError, match="Lanczos"):
        machines.fit(asxp(_with_spectrum(w, 6)), asxp(np.ones(60)), "squared", 1.0)


# ------------------------------------------------------------------ working sets, shrinking, the device path


def _rbf_classes(n, seed, sep=2.5):
    rng = np.random.default_rng(seed)
    y = np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)
    X = rng.standard_normal((n, 3)) + sep * y[:, None] * np.array([1.0, 0.0, 0.0])
    sq = np.sum(X**2, axis=1)
    K = np.exp(-0.5 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))
    return (K + K.T) / 2, y


def _hinge_kkt(K, y, alpha, lam, tol):
    """The hinge dual's KKT conditions written out (independent of machines' residual)."""
    C = 1 / lam
    g = K @ alpha
    a = y * alpha
    assert np.all(a >= 0) and np.all(a <= C * (1 + 1e-15))
    assert np.all(y[a == 0] * g[a == 0] >= 1 - tol)
    mid = (a > 0) & (a < C * (1 - 1e-12))
    np.testing.assert_allclose(y[mid] * g[mid], 1, atol=tol)
    assert np.all(y[a >= C * (1 - 1e-12)] * g[a >= C * (1 - 1e-12)] <= 1 + tol)


@pytest.mark.parametrize("lam", [0.1, 1e-3])
def test_working_set_solve_is_exact_on_a_larger_problem(lam, xp, asxp, tonp):
    """n = 1000 with few support vectors: several working-set rounds, shrinking of the zeros; the answer is
    the exact optimum (KKT written out, duality gap ≤ 1e-12 relative, as exact as the full-problem solve)."""
    K, y = _rbf_classes(1000, 7)
    km = machines.solve(asxp(K), asxp(y), "hinge", lam)
    assert km.converged and km.duality_gap <= 1e-12 * max(1.0, km.primal_objective)
    _hinge_kkt(K, y, tonp(km.alpha_), lam, 1e-9)


@pytest.mark.parametrize("name", ("hinge", "squared_hinge", "epsilon_insensitive"))
def test_device_path_equals_the_host_solve(name, monkeypatch, xp, asxp, tonp):
    """With the host-step size limit at 0 the active-set solver runs in the inputs' namespace and on
    their device (a GPU at n > 4096): same optimum as the NumPy solve (objective to 1e-12, g to 1e-9),
    arrays on the inputs' device."""
    X, y = _problem(name, 300, 6, 21)
    if name == "hinge":
        K, y = _rbf_classes(300, 8, sep=1.0)
    else:
        K = X @ X.T
    ref = machines.solve(K, y, _loss(name), 0.3)
    monkeypatch.setattr(_solve, "_HOST_MAX_N", 0)
    got = machines.solve(asxp(K), asxp(y), _loss(name), 0.3)
    assert got.converged
    assert got.primal_objective == pytest.approx(ref.primal_objective, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(tonp(got.train_output_), ref.train_output_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(K @ tonp(got.alpha_), ref.train_output_, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ("hinge", "epsilon_insensitive", "logistic", "hard_margin"))
def test_float32_device_path_equals_the_host_solve(name, monkeypatch, xp, asxp, tonp):
    """float32 on the device path (host step disabled): the working-set matrices are converted to float64 on
    the inputs' device and α is rounded back there; same float32 α as the NumPy solve, arrays in float32."""
    K, y = _rbf_classes(200, 8, sep=3.0 if name == "hard_margin" else 1.0)
    K32, y32 = K.astype(np.float32), y.astype(np.float32)
    if name == "hard_margin":
        run = lambda K_, y_: machines.hard_margin_svm(K_, y_)  # noqa: E731
    else:
        run = lambda K_, y_: machines.solve(K_, y_, _loss(name), 0.3)  # noqa: E731
    ref = run(K32, y32)
    monkeypatch.setattr(_solve, "_HOST_MAX_N", 0)
    got = run(asxp(K32), asxp(y32))
    assert ref.converged and got.converged
    assert got.alpha_.dtype == xp.float32 and got.train_output_.dtype == xp.float32
    assert got.primal_objective == pytest.approx(ref.primal_objective, rel=1e-12)
    np.testing.assert_allclose(tonp(got.alpha_), ref.alpha_, rtol=1e-5, atol=1e-6 * np.max(np.abs(ref.alpha_)))


@pytest.mark.parametrize("case", ["solve-hinge", "solve-epsilon_insensitive", "hard_margin_svm"])
def test_device_path_keeps_arrays_on_device1(case, monkeypatch):
    """The on-device path (host step disabled) on array_api_strict's device1: every returned array there."""
    monkeypatch.setattr(_solve, "_HOST_MAX_N", 0)
    strict, dev = _device1()
    result = _device_cases()[case](lambda v: strict.asarray(v, device=dev))
    import array_api_compat

    arrays = list(_arrays_in(result))
    assert arrays
    for arr in arrays:
        assert array_api_compat.array_namespace(arr) is strict
        assert array_api_compat.device(arr) == dev


# ---------------------------------------------------------------- fit_intercept=True (the libsvm model)
def _intercept_problem(n=40, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = np.where(X[:, 0] + 0.5 > 0, 1.0, -1.0)  # unbalanced: the intercept is far from 0
    from ntkref import kernels

    return kernels.fc(X, depth=1).ntk, y


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge", "squared"])
def test_fit_intercept_is_the_exact_machine_with_a_bias(loss, asxp, tonp):
    # The machine f = Kα + b: stationarity in b gives Σαᵢ = 0, and no other b does better — the primal
    # P(α, b) = (λ/2)αᵀKα + Σ l(Kα + b) is checked at b ± h against the returned b by direct evaluation.
    K, y = _intercept_problem()
    m = machines.solve(asxp(K), asxp(y), loss, 0.1, fit_intercept=True)
    alpha, b = tonp(m.alpha_), float(m.intercept_)
    assert abs(alpha.sum()) <= 1e-10 * np.abs(alpha).sum()
    lossf = losses.get(loss)

    def primal(bb):
        g = K @ alpha + bb
        return 0.05 * alpha @ K @ alpha + float(np.sum(tonp(lossf.value(asxp(g), asxp(y)))))

    p0 = primal(b)
    for h in (1e-3, 1e-1):
        assert primal(b + h) >= p0 - 1e-10 and primal(b - h) >= p0 - 1e-10
    assert m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)
    a2, b2 = machines.fit(asxp(K), asxp(y), loss, 0.1, fit_intercept=True)
    np.testing.assert_array_equal(tonp(a2), alpha)
    assert float(b2) == b


def test_fit_intercept_hinge_equals_libsvm_at_tight_tolerance():
    # Independent route: scikit-learn's SVC (libsvm) at tol 1e-12 on a Gram exactly representable in float32
    # (libsvm caches K in float32), C = 1/λ: same intercept and decision values to ~1e-9.
    from sklearn.svm import SVC

    K, y = _intercept_problem(60, seed=7)
    K = K.astype(np.float32).astype(np.float64)
    svc = SVC(kernel="precomputed", C=10.0, tol=1e-12).fit(K, y)
    a, b = machines.fit(K, y, "hinge", 0.1, fit_intercept=True)
    assert abs(b - svc.intercept_[0]) <= 1e-8
    np.testing.assert_allclose(K @ a + b, svc.decision_function(K), atol=1e-8)


def test_fit_intercept_must_be_a_bool():
    K, y = _intercept_problem(6)
    with pytest.raises(InvalidParameterError, match="'fit_intercept'"):
        machines.solve(K, y, "hinge", 0.1, fit_intercept="yes")


@pytest.mark.parametrize("c", [1e300, 1e-300, 3.0])
def test_rkhs_norm_is_exact_at_extreme_scales(asxp, c):
    """‖β‖ for β = Σ αᵢ Φ(xᵢ) with the linear kernel K = XXᵀ is ‖Xᵀα‖ (the explicit feature space), and it is
    homogeneous: ‖c·β‖ = |c|·‖β‖ and K → cK scales it by √c.  At c = 1e300, αᵀKα overflows (it used to return
    inf) and at 1e-300 it underflows to 0; the result must be the exact finite value either way."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5, 3))
    alpha = rng.standard_normal(5)
    ref = float(np.linalg.norm(X.T @ alpha))  # an independent route at ordinary scale
    got_alpha = machines.rkhs_norm(asxp(c * alpha), asxp(X @ X.T))
    got_K = machines.rkhs_norm(asxp(alpha), asxp(c * (X @ X.T)))
    assert got_alpha == pytest.approx(c * ref, rel=1e-13)
    assert got_K == pytest.approx(np.sqrt(c) * ref, rel=1e-13)
    assert machines.rkhs_norm(asxp(np.zeros(5)), asxp(X @ X.T)) == 0.0


@pytest.mark.parametrize("name, scaled", [("alpha", "alpha"), ("K", "K"), ("y", "y")])
def test_objective_overflow_is_an_error_naming_the_input(asxp, name, scaled):
    """P(α) = (λ/2)αᵀKα + Σ(y − Kα)² at 1e300·(input) is ~1e600: not a float.  Finite or error: an
    InvalidParameterError naming the input at fault (it used to return inf or NaN silently).  At the ordinary
    scale the value is the closed form."""
    K, y = _small_gram()
    alpha = np.array([0.3, -0.2, 0.1, 0.05, 0.4])
    P = machines.objective(asxp(alpha), asxp(K), asxp(y), "squared", 0.1)
    assert P == pytest.approx(0.05 * alpha @ K @ alpha + np.sum((y - K @ alpha) ** 2), rel=1e-13)
    args = {"alpha": alpha, "K": K, "y": y}
    args[scaled] = 1e300 * args[scaled]
    with pytest.raises(InvalidParameterError, match=rf"not finite.*'{name}'.*too large"):
        machines.objective(asxp(args["alpha"]), asxp(args["K"]), asxp(args["y"]), "squared", 0.1)


def test_dual_objective_overflow_is_an_error_and_infeasibility_is_minus_inf(asxp):
    """The squared loss's dual D(α) = Σ(λαy − λ²α²/4) − (λ/2)αᵀKα is defined for every α: at 1e300·α it
    overflows (an error naming alpha).  The hinge dual is −inf outside its box 0 ≤ yα ≤ 1/λ (a value)."""
    K, y = _small_gram()
    alpha = 0.5 * y
    lam = 0.1
    D = machines.dual_objective(asxp(alpha), asxp(K), asxp(y), "squared", lam)
    s = lam * alpha
    assert D == pytest.approx(np.sum(s * y - s * s / 4) - 0.5 * lam * alpha @ K @ alpha, rel=1e-13)
    with pytest.raises(InvalidParameterError, match="not finite.*'alpha'"):
        machines.dual_objective(asxp(1e300 * alpha), asxp(K), asxp(y), "squared", lam)
    assert machines.dual_objective(asxp(1e300 * alpha), asxp(K), asxp(y), "hinge", lam) == -np.inf


@pytest.mark.parametrize("max_iter", [0, -1, 1.5, float("nan")])
def test_max_iter_is_checked_for_the_closed_form_loss_too(asxp, max_iter):
    K, y = _small_gram()
    with pytest.raises(InvalidParameterError, match="max_iter"):
        machines.fit(asxp(K), asxp(y), "squared", 0.1, max_iter=max_iter)


def test_machine_predicts_only_where_it_was_fitted():
    """A machine fitted on device1 refuses a K_test_train on another device or of another array library,
    naming K_test_train (no implicit copies); on device1 it predicts there."""
    strict, dev = _device1()
    K, y = _small_gram()
    m = machines.solve(strict.asarray(K, device=dev), strict.asarray(y, device=dev), "squared", 0.1)
    import array_api_compat

    got = m.predict(strict.asarray(K[:2], device=dev))
    assert array_api_compat.device(got) == dev
    for other in (strict.asarray(K[:2]), K[:2]):
        with pytest.raises(InvalidParameterError, match="K_test_train"):
            m.predict(other)


# ------------------------------------------------------------------ checked Grams (checks once, many fits)


@pytest.mark.parametrize("name", ALL)
def test_checked_gram_fits_equal_plain_fits_without_rechecking(name, monkeypatch, xp, asxp, tonp):
    """A fit on checked_gram(K) is the fit on K (bit for bit: the same validated array reaches the solver),
    and it runs no check again: with the PSD tests and the symmetry test made to fail, it still fits."""
    X, y = _problem(name, 30, 5, 11)
    K = X @ X.T + 0.1 * np.eye(30)
    K = (K + K.T) / 2
    G = machines.checked_gram(asxp(K))
    assert G.psd_test == "cholesky" and G.shape == (30, 30)
    plain = machines.solve(asxp(K), asxp(y), _loss(name), 0.3)

    def boom(*a, **k):
        raise AssertionError("a check ran again")

    monkeypatch.setattr(_gram, "refuse_indefinite", boom)
    monkeypatch.setattr(_gram._compat, "exactly_symmetric_and_finite", boom)
    checked = machines.solve(G, asxp(y), _loss(name), 0.3)
    np.testing.assert_array_equal(tonp(checked.alpha_), tonp(plain.alpha_))
    assert checked.duality_gap == plain.duality_gap and checked.converged


def test_checked_gram_runs_only_a_stronger_psd_test(monkeypatch, xp, asxp):
    """psd_test orders None < lanczos < cholesky: a fit asking for a stronger test than the Gram passed runs
    it (and an indefinite K checked without a PSD test is refused then); a weaker or equal one does not."""
    w = np.linspace(1.0, 2.0, 40)
    w[0] = -0.5
    K_bad = _with_spectrum(w, 7)
    G = machines.checked_gram(asxp(K_bad), check_psd=False)
    assert G.psd_test is None
    with pytest.raises(InvalidParameterError, match="positive semidefinite"):
        machines.fit(G, asxp(np.ones(40)), "squared", 1.0)  # default check_psd: the Cholesky certificate
    machines.fit(G, asxp(np.ones(40)), "squared", 1.0, check_psd=False)  # nothing asked, nothing run
    calls = []
    real = _gram.refuse_indefinite
    monkeypatch.setattr(_gram, "refuse_indefinite", lambda K, c, name="K", method="cholesky": (calls.append(method),
                                                                                                 real(K, c, name, method))[1])
    G2 = machines.checked_gram(asxp(_spd()), check_psd="lanczos")
    machines.fit(G2, asxp(np.ones(4)), "hinge", 1.0, check_psd="lanczos")
    assert calls == ["lanczos"]  # the checked_gram call only
    machines.fit(G2, asxp(np.ones(4)), "hinge", 1.0)
    assert calls == ["lanczos", "cholesky"]


def test_checked_gram_holds_its_own_copy(xp, asxp, tonp):
    """Changing the caller's array after the checks changes neither the checked Gram nor its fits."""
    K = _spd()
    K_user = asxp(K.copy())
    G = machines.checked_gram(K_user)
    before = tonp(machines.fit(G, asxp(np.array([1.0, -1.0, 1.0, -1.0])), "hinge", 0.5))
    if hasattr(K_user, "__setitem__"):
        try:
            K_user[0, 1] = -1e3
        except Exception:  # libraries without in-place assignment: nothing to change
            pass
    np.testing.assert_array_equal(tonp(G.K), K)
    after = tonp(machines.fit(G, asxp(np.array([1.0, -1.0, 1.0, -1.0])), "hinge", 0.5))
    np.testing.assert_array_equal(after, before)


def test_checked_gram_refuses_what_solve_refuses(xp, asxp):
    bad = _spd()
    bad[0, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="'K' parameter of machines.checked_gram contains NaN"):
        machines.checked_gram(asxp(bad))
    asym = _spd()
    asym[0, 1] += 1.0
    with pytest.raises(InvalidParameterError, match="must be symmetric"):
        machines.checked_gram(asxp(asym))
    w = np.linspace(1.0, 2.0, 20)
    w[0] = -0.5
    with pytest.raises(InvalidParameterError, match="positive semidefinite"):
        machines.checked_gram(asxp(_with_spectrum(w, 8)))
    with pytest.raises(InvalidParameterError, match="check_psd"):
        machines.checked_gram(asxp(_spd()), check_psd="eigh")


@pytest.mark.parametrize("n", [3, 255, 256, 300, 700])
def test_exact_symmetry_fast_path_never_answers_true_wrongly(n):
    """The NumPy fast path (tiles of 256 compared into one buffer, K·1 for finiteness) is a sufficient test:
    True exactly for finite K = Kᵀ; one changed entry anywhere (diagonal tiles, the last partial tile,
    across a tile edge), a symmetric pair of ±inf, a NaN, or finite entries whose row sums overflow give
    False.  Checked against the definition (np.array_equal(K, K.T) and np.isfinite)."""
    import array_api_compat.numpy as anp

    from ntkref._lib import compat as _compat

    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    K = A + A.T
    assert _compat.exactly_symmetric_and_finite(K, anp)
    spots = {(0, n - 1), (n - 1, 0), (n // 2, n // 3), (n - 1, n - 2)}
    if n > 256:
        spots |= {(255, 256), (256, 255), (10, 260)}
    for i, j in spots:
        for bad in (np.nextafter(K[i, j], np.inf), np.inf, np.nan):
            K2 = K.copy()
            K2[i, j] = bad
            truth = np.array_equal(K2, K2.T) and bool(np.all(np.isfinite(K2)))
            assert truth == (i == j and np.isfinite(bad))  # only a finite diagonal change keeps both
            assert _compat.exactly_symmetric_and_finite(K2, anp) == truth
    K3 = K.copy()
    K3[1, 2] = K3[2, 1] = np.inf
    assert np.array_equal(K3, K3.T) and not _compat.exactly_symmetric_and_finite(K3, anp)
    big = np.full((n, n), 1e308)
    assert np.array_equal(big, big.T) and np.all(np.isfinite(big))
    assert not _compat.exactly_symmetric_and_finite(big, anp)  # row sums overflow: "not shown"
    assert _gram.check_gram(big, "test", psd=False) is not None  # the full check accepts it (finite)


def test_checked_gram_cannot_be_forged_and_is_named_where_not_taken(xp, asxp):
    """A CheckedGram exists only as checked_gram's result (a hand-made one would skip the checks it vouches
    for); it compares by identity and hashes; functions that take only arrays name it instead of failing on it."""
    from ntkref import dynamics

    with pytest.raises(TypeError, match="checked_gram"):
        machines.CheckedGram(asxp(_spd()), "cholesky")
    G, H = machines.checked_gram(asxp(_spd())), machines.checked_gram(asxp(_spd()))
    assert G == G and G != H and len({G, H}) == 2
    with pytest.raises(InvalidParameterError, match="CheckedGram.*G.K"):
        dynamics.gradient_flow(G, asxp(np.array([1.0, -1.0, 1.0, -1.0])), "hinge", 0.1, np.array([0.0, 1.0]))


def test_overflowing_gram_in_any_memory_order_is_a_named_error(xp, asxp):
    """‖K‖_F overflows for entries ~1e200: the PSD check names K (no RuntimeWarning first), C or Fortran order."""
    for K in (np.full((3, 3), 1e200), np.asfortranarray(np.full((3, 3), 1e200))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(InvalidParameterError, match="'K' parameter of machines.solve is too large"):
                machines.solve(asxp(K), asxp(np.ones(3)), "squared", 1.0)


def test_an_input_on_another_device_is_named_not_moved():
    """A NumPy (host) array next to device1 arrays is refused naming it, by every function that validates it
    against the others (it used to be converted to the default device and fail later with a raw ValueError,
    or be solved on the host silently)."""
    from ntkref import kkt

    strict, dev = _device1()
    K, y = _small_gram()
    Kd, yd = strict.asarray(K, device=dev), strict.asarray(y, device=dev)
    alpha = machines.fit(K, y, "hinge", 0.5)
    for call, name in ((lambda: machines.solve(Kd, y, "hinge", 0.5), "y"),
                       (lambda: machines.objective(alpha, Kd, yd, "hinge", 0.5), "alpha"),
                       (lambda: kkt.kkt_residual(alpha, Kd, yd, "hinge", 0.5), "alpha")):
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter .* on device .*move them"):
            call()


# --------------------------------------------------- issue 26: check_psd takes only its documented values
_BAD_CHECK_PSD = (None, "yes", 1.5, 1, 0, "Cholesky", np.True_)


def _check_psd_calls(asxp):
    """One valid call per public function with a ``check_psd`` parameter: name -> (call(check_psd), documented)."""
    from ntkref import dynamics, kkt, krr

    K, y = _small_gram()
    Kx, yx = asxp(K), asxp(y)
    methods = (True, False, "auto", "cholesky", "lanczos")
    return {
        "machines.solve": (lambda v: machines.solve(Kx, yx, "hinge", 0.5, check_psd=v), methods),
        "machines.fit": (lambda v: machines.fit(Kx, yx, "logistic", 0.5, check_psd=v), methods),
        "machines.hard_margin_svm": (lambda v: machines.hard_margin_svm(Kx, yx, check_psd=v), methods),
        "machines.checked_gram": (lambda v: machines.checked_gram(Kx, check_psd=v), methods),
        "machines.rkhs_norm": (lambda v: machines.rkhs_norm(yx, Kx, check_psd=v), methods),
        "kkt.fit_with_intercept": (lambda v: kkt.fit_with_intercept(Kx, yx, "hinge", 0.5, check_psd=v), methods),
        "krr.solve_cg": (lambda v: krr.solve_cg(Kx, yx, 0.5, check_psd=v), methods),
        "krr.fit_cg": (lambda v: krr.fit_cg(Kx, yx, 0.5, check_psd=v), methods),
        "dynamics.subgradient_descent": (
            lambda v: dynamics.subgradient_descent(Kx, yx, "hinge", 0.1, 0.1, 3, check_psd=v), (True, False)),
    }


def _public_functions_with_check_psd():
    import importlib
    import inspect
    import pkgutil

    import ntkref

    found = set()
    for info in pkgutil.iter_modules(ntkref.__path__):
        if info.name.startswith("_") or info.name in ("cli", "pytest_plugin"):
            continue
        mod = importlib.import_module(f"ntkref.{info.name}")
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name, None)
            if callable(obj) and not inspect.isclass(obj):
                try:
                    params = inspect.signature(obj).parameters
                except (TypeError, ValueError):
                    continue
                if "check_psd" in params:
                    found.add(f"{info.name}.{name}")
    return found


def test_every_check_psd_refuses_undocumented_values(asxp):
    """Issue 26 item 5: ``check_psd=None`` silently turned the PSD test off (machines.solve, kkt.fit_with_intercept,
    machines.checked_gram: converged=True on indefinite Grams); 1 and 0 passed as True/False through ``in``.  Every
    public function with a ``check_psd`` parameter (found by signature, so a new one must be added here) accepts
    its documented values and refuses anything else with the one template naming ``check_psd``."""
    calls = _check_psd_calls(asxp)
    assert _public_functions_with_check_psd() == set(calls) - {"krr.fit_cg"}  # fit_cg forwards **kwargs
    for name, (call, documented) in calls.items():
        for value in documented:
            call(value)  # accepted (the Gram is PSD)
        bad = _BAD_CHECK_PSD + (("auto", "cholesky", "lanczos") if documented == (True, False) else ())
        for value in bad:
            with pytest.raises(InvalidParameterError,
                               match=r"The 'check_psd' parameter of .* must be one of True, False.*Got "):
                call(value)


def _indefinite_gram(n=20, seed=0, shift=3.0):
    """K = XXᵀ − shift·qqᵀ (rank 3 minus one direction): λ_min(K) ≈ −shift·(1 − ...) < 0, far beyond rounding."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    q = np.linalg.qr(rng.standard_normal((n, n)))[0][:, 0]
    K = X @ X.T - shift * np.outer(q, q)
    return (K + K.T) / 2, np.sign(X[:, 0] + 0.1)


@pytest.mark.parametrize("loss", ALL)
def test_indefinite_gram_with_check_psd_none_is_refused_not_certified(asxp, loss):
    """Issue 26 item 5's reproductions: on an indefinite Gram (λ_min ≈ −2, numpy), check_psd=None gave
    converged=True (and, for logistic, negative gaps) from machines.solve and kkt.fit_with_intercept, and a
    CheckedGram with no PSD test from machines.checked_gram; each now refuses None naming check_psd, and the
    default refuses the Gram naming K."""
    from ntkref import kkt

    K, y = _indefinite_gram()
    assert np.linalg.eigvalsh(K)[0] < -1.0  # the independent route: K is indefinite
    y = y if loss != "squared" else y * 0.5
    Kx, yx = asxp(K), asxp(y)
    for call in (lambda **kw: machines.solve(Kx, yx, _loss(loss), 0.1, **kw),
                 lambda **kw: kkt.fit_with_intercept(Kx, yx, _loss(loss), 0.1, **kw)):
        with pytest.raises(InvalidParameterError, match="'check_psd'.*Got None"):
            call(check_psd=None)
        with pytest.raises(InvalidParameterError, match="'K'.*positive semidefinite"):
            call()
    with pytest.raises(InvalidParameterError, match="'check_psd'.*Got None"):
        machines.checked_gram(Kx, check_psd=None)


# ------------------------------- issue 26 item 9: the squared hinge with lam/2 below a rounding-level λ_min(K)
def _rounding_level_indefinite(n=60, c=4.0, seed=1):
    """K = P(XXᵀ)P − c·eps·‖K‖₂·vvᵀ, v = y/√n, P = I − vvᵀ: a PSD rank-10 Gram whose one negative eigenvalue
    −c·eps·‖K‖₂ (rounding level: within the PSD test's tolerance n·eps·‖K‖_F) has the eigenvector y/√n, along
    which the squared hinge's dual box {yᵢαᵢ ≥ 0} is unbounded."""
    rng = np.random.default_rng(seed)
    y = np.sign(rng.standard_normal(n))
    v = y / np.sqrt(n)
    P = np.eye(n) - np.outer(v, v)
    X = P @ rng.standard_normal((n, 10))
    K = P @ (X @ X.T) @ P
    K = K - c * np.finfo(float).eps * np.linalg.norm(K, 2) * np.outer(v, v)
    return (K + K.T) / 2, y


@pytest.mark.parametrize("lam", [1e-13, 1e-15])
@pytest.mark.parametrize("check_psd", [True, "lanczos"])
def test_squared_hinge_with_lam_below_a_rounding_level_negative_eigenvalue_is_refused(asxp, lam, check_psd):
    """Issue 26 item 9: the QP raised "internal error: unbounded direction" (RuntimeError).  Now an error naming
    'lam', with an upper bound on λ_min(K) that numpy's eigvalsh confirms and a λ for which the solve runs."""
    K, y = _rounding_level_indefinite()
    eps = np.finfo(float).eps
    lmin = np.linalg.eigvalsh(K)[0]
    delta = K.shape[0] * eps * np.linalg.norm(K)
    assert -delta < lmin < -lam / 2  # rounding level, below −λ/2
    machines.checked_gram(asxp(K))  # the PSD test accepts it (within its tolerance)
    with pytest.raises(InvalidParameterError, match="'lam' parameter of machines.solve is too small for the "
                                                    "squared_hinge loss") as info:
        machines.solve(asxp(K), asxp(y), "squared_hinge", lam, check_psd=check_psd)
    msg = str(info.value)
    assert "internal error" not in msg and "nan" not in msg.lower()
    bound = float(re.search(r"lambda_min\(K\) <= (\S+)\)", msg).group(1))
    assert lmin <= bound * (1 - 1e-2) + 1e-3 * abs(lmin) and bound < 0  # a true bound (3 digits), and negative
    need = float(re.search(r"Use lam >= (\S+) ", msg).group(1))
    assert need > 2 * abs(lmin)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # |α| ~ 1/λ: the certificate may miss tol, it must not refuse
        m = machines.solve(asxp(K), asxp(y), "squared_hinge", need, check_psd=check_psd)
    assert np.isfinite(m.duality_gap) and m.duality_gap >= -1e-6 * max(1.0, m.primal_objective)
