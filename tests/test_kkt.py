"""ntkref.kkt: KKT residuals and duality gaps with and without an intercept, and the exact SVM with an intercept.

Independent routes:
- brute force over the faces of the dual QP (every assignment lo / hi / free of n ≤ 6 coefficients, the face's
  equality-constrained stationarity system solved with numpy, the best feasible point kept);
- the primal in explicit features Φ (K = ΦΦᵀ), by SciPy (SLSQP with slacks for the hinge, BFGS for smooth losses,
  a linear least-squares solve for the squared loss);
- libsvm (scikit-learn's SVC / SVR) on Gram matrices whose entries are exact in float32, where its single-precision
  kernel cache loses nothing, at tol = 1e-12;
- closed forms at K = 0 (P* = 2·min(n₊, n₋) for the hinge, b* = (n₊ − n₋)/n for the squared hinge);
- weak duality and strong convexity: gap(α, b) ≥ P(α, b) − P* ≥ (λ/2)(α − α*)ᵀK(α − α*).
On the embedded MNIST 0/1 digits (seed-000 NTK, eq. (63)) scikit-learn's SVC at its default tol = 1e-3 is flagged
(KKT residual and gap > 100× the float32 limit), and at tol = 1e-8 it is within 2× of that limit, which is
measured as the residual/gap (against K) of the *exact* solution of the float32-rounded K.
"""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntkref import kkt, losses, machines
from ntkref.machines import _intercept
from ntkref._lib.validation import InvalidParameterError

from ._device import assert_on_device, device1


def _hinge_P(alpha, b, K, y, lam):
    return lam / 2 * alpha @ K @ alpha + np.sum(np.maximum(0.0, 1.0 - y * (K @ alpha + b)))


def _problem(n, d, seed, ridge=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] + 0.7 * rng.standard_normal(n) > 0.2, 1.0, -1.0)
    if abs(y.sum()) == n:
        y[0] = -y[0]
    return X, X @ X.T + 0.3 * (X @ X.T) ** 2 + ridge * np.eye(n), y


def _enumerate_hinge_dual(K, y, lam):
    """max λ(yᵀa − ½aᵀKa) over lo ≤ a ≤ hi, Σa = 0 by trying every face (lo / hi / free per coordinate)."""
    n = len(y)
    C = 1.0 / lam
    lo, hi = np.where(y > 0, 0.0, -C), np.where(y > 0, C, 0.0)
    best, arg = -np.inf, None
    for state in itertools.product(range(3), repeat=n):
        state = np.array(state)
        a = np.where(state == 0, lo, np.where(state == 1, hi, 0.0))
        F, X = np.flatnonzero(state == 2), np.flatnonzero(state != 2)
        m = len(F)
        A = np.zeros((m + 1, m + 1))
        A[:m, :m] = K[np.ix_(F, F)]
        A[:m, m] = 1.0
        A[m, :m] = 1.0
        rhs = np.concatenate([y[F] - K[np.ix_(F, X)] @ a[X], [-a[X].sum()]])
        sol, *_ = np.linalg.lstsq(A, rhs, rcond=None)
        if not np.allclose(A @ sol, rhs, atol=1e-10):
            continue
        a[F] = sol[:m]
        if np.any(a < lo - 1e-12) or np.any(a > hi + 1e-12) or abs(a.sum()) > 1e-10:
            continue
        D = lam * (y @ a - 0.5 * a @ K @ a)
        if D > best:
            best, arg = D, a
    return best, arg


# ----------------------------------------------------------------------------- exactness of fit_with_intercept


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 6), lam=st.sampled_from([0.05, 0.5, 2.0, 20.0]))
def test_hinge_intercept_equals_enumeration_of_faces(xp, asxp, tonp, seed, n, lam):
    """The SVM with an intercept equals the brute-force optimum of its dual (strong duality: P(α, b) = D*),
    and with K positive definite α is unique and equal."""
    _, K, y = _problem(n, 3, seed, ridge=0.05)
    km = kkt.fit_with_intercept(asxp(K), asxp(y), "hinge", lam)
    D_star, a_star = _enumerate_hinge_dual(K, y, lam)
    alpha, b = tonp(km.alpha_), km.intercept_
    assert km.converged
    assert _hinge_P(alpha, b, K, y, lam) == pytest.approx(D_star, rel=1e-11, abs=1e-12)
    assert km.primal_objective == pytest.approx(D_star, rel=1e-11, abs=1e-12)
    np.testing.assert_allclose(alpha, a_star, atol=1e-9 / lam)
    lo, hi = km.intercept_interval_
    assert lo - 1e-9 <= b <= hi + 1e-9
    # every b in the interval is optimal with α
    for bb in (lo, hi, 0.5 * (lo + hi)):
        if np.isfinite(bb):
            assert _hinge_P(alpha, bb, K, y, lam) == pytest.approx(D_star, rel=1e-11, abs=1e-12)


def test_hinge_intercept_equals_primal_qp_in_features():
    """Linear kernel, explicit features: SLSQP on the primal min (λ/2)‖w‖² + Σξ, ξᵢ ≥ 0, ξᵢ ≥ 1 − yᵢ(w·xᵢ + b)
    (no dual, no multiplier) reaches the same objective, decision values and intercept."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(2)
    n, d, lam = 20, 3, 0.4
    X = rng.standard_normal((n, d))
    y = np.where(X @ np.array([1.0, -0.5, 0.2]) + 0.4 * rng.standard_normal(n) > 0.3, 1.0, -1.0)
    km = kkt.fit_with_intercept(X @ X.T, y, "hinge", lam)

    def obj(p):
        return lam / 2 * p[:d] @ p[:d] + p[d + 1:].sum()

    def jac(p):
        return np.concatenate([lam * p[:d], [0.0], np.ones(n)])

    slack = np.hstack([np.zeros((n, d + 1)), np.eye(n)])  # ξ ≥ 0
    margin = np.hstack([y[:, None] * X, y[:, None], np.eye(n)])  # yᵢ(w·xᵢ + b) + ξᵢ − 1 ≥ 0
    cons = [{"type": "ineq", "fun": lambda p: slack @ p, "jac": lambda p: slack},
            {"type": "ineq", "fun": lambda p: margin @ p - 1, "jac": lambda p: margin}]
    p0 = np.concatenate([np.zeros(d + 1), np.ones(n)])
    res = minimize(obj, p0, jac=jac, constraints=cons, method="SLSQP", options={"ftol": 1e-12, "maxiter": 1000})
    assert res.success
    assert km.primal_objective == pytest.approx(res.fun, rel=1e-11)
    np.testing.assert_allclose(km.train_output_, X @ res.x[:d] + res.x[d], atol=1e-10)
    assert km.intercept_ == pytest.approx(res.x[d], abs=1e-10)


def _float32_exact_gram(n, seed):
    """Integer features: K = XXᵀ + (XXᵀ)²/8 is exact in float32, so libsvm's float32 kernel cache is exact."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-3, 4, size=(n, 5)).astype(np.float64)
    G = X @ X.T
    K = G + G * G / 8
    assert np.array_equal(K.astype(np.float32).astype(np.float64), K)
    return X, K


@pytest.mark.parametrize("lam", [0.05, 0.5, 10.0])
def test_hinge_intercept_equals_libsvm_on_a_float32_exact_gram(lam):
    svm = pytest.importorskip("sklearn.svm")
    X, K = _float32_exact_gram(60, 5)
    y = np.where(X[:, 0] + X[:, 1] + np.random.default_rng(1).standard_normal(60) > 0, 1.0, -1.0)
    km = kkt.fit_with_intercept(K, y, "hinge", lam)
    clf = svm.SVC(kernel="precomputed", C=1 / lam, tol=1e-12).fit(K, y)
    a, b = kkt.from_sklearn_svc(clf, 60)
    scale = np.max(np.abs(km.train_output_))
    np.testing.assert_allclose(K @ a + b, km.train_output_, atol=1e-11 * scale)
    assert b == pytest.approx(km.intercept_, abs=1e-11 * scale)
    assert km.duality_gap <= 1e-12 * km.primal_objective
    # libsvm stops at its tol: ntkref's point is at least as good (to rounding) and certifies libsvm's
    assert km.primal_objective <= _hinge_P(a, b, K, y, lam) * (1 + 1e-14)
    assert kkt.duality_gap(a, K, y, "hinge", lam, intercept=b) <= 1e-10 * km.primal_objective


def test_epsilon_insensitive_intercept_equals_libsvm_svr():
    svm = pytest.importorskip("sklearn.svm")
    X, K = _float32_exact_gram(50, 7)
    y = X[:, 0] - 0.5 * X[:, 2] + np.random.default_rng(3).standard_normal(50) + 4.0
    lam, eps = 0.2, 0.5
    km = kkt.fit_with_intercept(K, y, losses.get("epsilon_insensitive", epsilon=eps), lam)
    reg = svm.SVR(kernel="precomputed", C=1 / lam, epsilon=eps, tol=1e-12).fit(K, y)
    scale = np.max(np.abs(km.train_output_))
    np.testing.assert_allclose(reg.predict(K), km.train_output_, atol=1e-10 * scale)
    assert km.converged and km.duality_gap <= 1e-13 * max(1, km.primal_objective)


def _features(K):
    w, V = np.linalg.eigh(K)
    return V * np.sqrt(np.clip(w, 0.0, None))


@pytest.mark.parametrize("name", ["squared", "logistic", "squared_hinge"])
def test_smooth_losses_with_intercept_equal_the_primal_in_features(xp, asxp, tonp, name):
    """The primal in explicit features Φ (K = ΦΦᵀ) over (w, b): lstsq for the squared loss, BFGS to gradient
    1e-12 for logistic and the squared hinge (C¹)."""
    from scipy.optimize import minimize

    X, K, y = _problem(25, 4, 11)
    if name == "squared":
        y = X[:, 1] + 0.3 * np.random.default_rng(0).standard_normal(25) + 2.0
    lam = 0.3
    loss = losses.get(name)
    km = kkt.fit_with_intercept(asxp(K), asxp(y), name, lam)
    Phi = _features(K)
    n = len(y)
    if name == "squared":  # min (λ/2)‖w‖² + ‖y − Φw − b‖²: stacked least squares
        A = np.vstack([np.hstack([Phi, np.ones((n, 1))]), np.hstack([np.sqrt(lam / 2) * np.eye(n), np.zeros((n, 1))])])
        p = np.linalg.lstsq(A, np.concatenate([y, np.zeros(n)]), rcond=None)[0]
        tol_f = 1e-10
    else:
        def P(p):
            return lam / 2 * p[:n] @ p[:n] + np.sum(np.asarray(loss.value(Phi @ p[:n] + p[n], y)))

        def grad(p):
            lp = np.asarray(loss.derivative(Phi @ p[:n] + p[n], y))
            return np.concatenate([lam * p[:n] + Phi.T @ lp, [lp.sum()]])

        p = minimize(P, np.zeros(n + 1), jac=grad, method="BFGS", options={"gtol": 1e-12, "maxiter": 10000}).x
        tol_f = 1e-6
    f_ref = Phi @ p[:n] + p[n]
    assert km.converged
    np.testing.assert_allclose(tonp(km.train_output_), f_ref, atol=tol_f * np.max(np.abs(f_ref)))
    assert km.intercept_ == pytest.approx(p[n], abs=tol_f * max(1, abs(p[n])))
    assert km.duality_gap <= 1e-12 * max(1.0, km.primal_objective)


@pytest.mark.parametrize("name", ["hinge", "squared_hinge", "squared", "logistic"])
def test_regularised_bias_limit(name):
    """Seed 000's footnote 1 (a constant feature √c in Φ, i.e. machines on K + c) regularises the bias by
    (λ/2)b²/c.  As c → ∞ the no-intercept machines' solution (their own solver) tends to the intercept solution,
    with an error that is first order in 1/c: err(c)·c converges (ratios err(c)/err(10c) → 10)."""
    _, K, y = _problem(40, 3, 12)
    km = kkt.fit_with_intercept(K, y, name, 0.5)
    errs = []
    for c in (1e2, 1e3, 1e4):
        f = machines.solve(K + c, y, name, 0.5).train_output_
        errs.append(np.max(np.abs(f - km.train_output_)))
    assert errs[-1] <= 1e-3 * np.max(np.abs(km.train_output_))
    for e1, e2 in zip(errs, errs[1:]):
        assert e1 / e2 == pytest.approx(10.0, rel=0.05)


def test_closed_forms_at_zero_kernel():
    """K = 0: P(α, b) = Σ l(b, yᵢ).  Hinge: P* = 2·min(n₊, n₋) at b = sign(n₊ − n₋); squared hinge:
    b* = (n₊ − n₋)/n."""
    y = np.array([1.0, 1.0, 1.0, -1.0, -1.0])
    K = np.zeros((5, 5))
    km = kkt.fit_with_intercept(K, y, "hinge", 0.7)
    assert km.primal_objective == pytest.approx(4.0, rel=1e-14) and km.intercept_ == pytest.approx(1.0, abs=1e-14)
    assert km.duality_gap <= 1e-14
    km = kkt.fit_with_intercept(K, y, "squared_hinge", 0.7)
    assert km.intercept_ == pytest.approx(0.2, abs=1e-14)
    assert km.primal_objective == pytest.approx(3 * 0.8**2 + 2 * 1.2**2, rel=1e-14)


def test_single_class():
    """One class: Σα = 0 with yα ≥ 0 forces α = 0; the hinge is 0 for every b ≥ 1 (interval [1, inf), b = 1);
    logistic regression has no minimiser (b → inf) and is refused."""
    km = kkt.fit_with_intercept(np.eye(4), np.ones(4), "hinge", 0.5)
    assert km.intercept_interval_ == (1.0, np.inf) and km.intercept_ == 1.0
    assert np.all(km.alpha_ == 0) and km.primal_objective == 0.0
    with pytest.raises(InvalidParameterError, match="single class"):
        kkt.fit_with_intercept(np.eye(4), np.ones(4), "logistic", 0.5)


def test_mean_reduction_is_the_sum_problem_with_n_lambda():
    _, K, y = _problem(30, 3, 4)
    n, lam = 30, 0.6
    s = kkt.fit_with_intercept(K, y, "hinge", lam)
    m = kkt.fit_with_intercept(K, y, "hinge", lam / n, reduction="mean")
    np.testing.assert_allclose(m.alpha_, s.alpha_, atol=1e-12 / lam)
    assert m.intercept_ == pytest.approx(s.intercept_, abs=1e-12)
    assert m.primal_objective == pytest.approx(s.primal_objective / n, rel=1e-13)
    a = s.alpha_ * 0.9
    gs = kkt.duality_gap(a, K, y, "hinge", lam, intercept=0.1)
    gm = kkt.duality_gap(a, K, y, "hinge", lam / n, intercept=0.1, reduction="mean")
    assert gm == pytest.approx(gs / n, rel=1e-12)
    assert kkt.kkt_residual(a, K, y, "hinge", lam / n, intercept=0.1, reduction="mean") == \
        kkt.kkt_residual(a, K, y, "hinge", lam, intercept=0.1)


@pytest.mark.parametrize("name", ["hinge", "logistic"])
def test_float32_inputs(name):
    """Solved in float64, α rounded to float32; the certificate is that of the float32 α and b, evaluated in
    float64 (written out here: P = (λ/2)αᵀKα + Σ l(Kα + b)), and kkt.duality_gap reproduces it."""
    _, K, y = _problem(30, 3, 8, ridge=1.0)
    K32, y32, lam = K.astype(np.float32), y.astype(np.float32), 0.3
    km = kkt.fit_with_intercept(K32, y32, name, lam)
    ref = kkt.fit_with_intercept(K32.astype(np.float64), y, name, lam)
    assert km.alpha_.dtype == np.float32 and km.train_output_.dtype == np.float32 and km.converged
    np.testing.assert_allclose(km.alpha_, ref.alpha_, atol=1e-6 / lam)
    a, K64 = km.alpha_.astype(np.float64), K32.astype(np.float64)
    z = K64 @ a + km.intercept_
    loss = np.maximum(0, 1 - y * z) if name == "hinge" else np.logaddexp(0, -y * z)
    P = lam / 2 * a @ K64 @ a + np.sum(loss)
    assert km.primal_objective == pytest.approx(P, rel=1e-13)
    assert 0 <= km.duality_gap <= 1e-5 * km.primal_objective
    gap = kkt.duality_gap(km.alpha_, K32, y32, name, lam, intercept=km.intercept_)
    # the fit reports kkt.duality_gap's P − D, or its proven bound (another dual point) where that is smaller
    assert gap == pytest.approx(km.duality_gap, rel=1e-6, abs=1e-13 * P) or (
        km.duality_gap + km.gap_rounding <= gap and km.gap_rounding <= 1e-6 * km.duality_gap)


# ----------------------------------------------------------------------------- residual and gap of candidates


LOSS_CASES = ["hinge", "squared_hinge", "logistic", "squared", "epsilon_insensitive"]


def _targets(name, X, y):
    return X[:, 1] + 1.5 if name in ("squared", "epsilon_insensitive") else y


@pytest.mark.parametrize("name", LOSS_CASES)
@given(seed=st.integers(0, 2**32 - 1), log_size=st.floats(-4, 0), b_shift=st.floats(-1, 1))
def test_gap_certifies_and_vanishes_only_at_the_solution(xp, asxp, tonp, name, seed, log_size, b_shift):
    """At (α*, b*): gap and residual are 0 to rounding.  At α = α* + δ (any b): the gap is an upper bound of
    P − P* (weak duality), which is ≥ (λ/2)δᵀKδ (λ-strong convexity in β), and the residual is > 0."""
    X, K, y = _problem(12, 3, 21, ridge=0.1)
    y = _targets(name, X, y)
    lam = 0.4
    loss = losses.get(name, epsilon=0.3) if name == "epsilon_insensitive" else name
    Kx, yx = asxp(K), asxp(y)
    km = kkt.fit_with_intercept(Kx, yx, loss, lam)
    a_star, b_star = tonp(km.alpha_), km.intercept_
    P_star = km.primal_objective
    scale = max(1.0, P_star)
    assert kkt.duality_gap(km.alpha_, Kx, yx, loss, lam, intercept=b_star) <= 1e-12 * scale
    assert kkt.kkt_residual(km.alpha_, Kx, yx, loss, lam, intercept=b_star) <= 1e-11 / lam
    rng = np.random.default_rng(seed)
    delta = rng.standard_normal(12) * 10**log_size / lam
    a, b = a_star + delta, b_star + b_shift
    L = losses.get(name, epsilon=0.3) if name == "epsilon_insensitive" else losses.get(name)
    P = lam / 2 * a @ K @ a + np.sum(tonp(L.value(asxp(K @ a + b), yx)))
    gap = kkt.duality_gap(asxp(a), Kx, yx, loss, lam, intercept=b)
    assert np.isfinite(gap)
    assert gap >= (P - P_star) - 1e-12 * scale
    assert P - P_star >= lam / 2 * delta @ K @ delta * (1 - 1e-9) - 1e-12 * scale
    assert kkt.kkt_residual(asxp(a), Kx, yx, loss, lam, intercept=b) > 0


def test_projection_onto_the_dual_feasible_set():
    """z = argmin ‖z − a‖ over lo ≤ z ≤ hi, Σz = 0 (random boxes, one-sided and absent bounds included): z is
    feasible and satisfies the projection's optimality conditions — one scalar t with aᵢ − zᵢ = t where zᵢ is
    inside its box, ≤ t where zᵢ = loᵢ, ≥ t where zᵢ = hiᵢ — and (a − z)·(w − z) ≤ 0 for feasible w."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        lo = -rng.exponential(size=n) * rng.integers(0, 2, size=n)
        hi = rng.exponential(size=n) * rng.integers(0, 2, size=n)
        lo[rng.random(n) < 0.2] = -np.inf
        hi[rng.random(n) < 0.2] = np.inf
        a = 3 * rng.standard_normal(n)
        z = _intercept._project_sum_zero(a, lo, hi)
        tol = 1e-13 * (1 + np.abs(a).sum())
        assert np.all(z >= lo) and np.all(z <= hi) and abs(z.sum()) <= tol
        r = a - z
        inside = (z > lo) & (z < hi)
        at_lo, at_hi = (z == lo) & (lo < hi), (z == hi) & (lo < hi)  # lo = hi = 0: no condition
        if inside.any():
            t = r[inside].mean()
            assert np.all(np.abs(r[inside] - t) <= tol)
            assert np.all(r[at_lo] <= t + tol) and np.all(r[at_hi] >= t - tol)
        else:  # every coordinate at a bound: some t separates the two groups
            assert np.max(r[at_lo], initial=-np.inf) <= np.min(r[at_hi], initial=np.inf) + tol
        for _ in range(10):  # feasible w: 0 plus a pair (s, −s)
            w = np.zeros(n)
            i, j = rng.integers(0, n, size=2)
            if i != j:
                w[i] = min(hi[i], -lo[j], 2.0) * rng.random()
                w[j] = -w[i]
            assert r @ (w - z) <= tol * (1 + np.abs(z).sum())


def test_without_intercept_the_functions_are_machines():
    """intercept=None is the machine of eq. (7) without b: the values are machines.duality_gap and the
    residual of machines.solve.  On point-symmetric data with an odd (linear) kernel the intercept problem's
    solution has b* = 0 and α* = machines' solution, so with intercept=0.0 gap and residual vanish too."""
    rng = np.random.default_rng(9)
    X0 = rng.standard_normal((15, 4))
    y0 = np.where(X0 @ rng.standard_normal(4) + 0.5 * rng.standard_normal(15) > 0, 1.0, -1.0)
    X, y = np.vstack([X0, -X0]), np.concatenate([y0, -y0])
    K, lam = X @ X.T, 0.2
    sol = machines.solve(K, y, "hinge", lam)
    a = sol.alpha_
    assert kkt.duality_gap(a, K, y, "hinge", lam) == machines.duality_gap(a, K, y, "hinge", lam)
    assert kkt.kkt_residual(a, K, y, "hinge", lam) == sol.kkt_residual
    a2 = a + 0.01 * rng.standard_normal(30)
    assert kkt.duality_gap(a2, K, y, "logistic", lam) == machines.duality_gap(a2, K, y, "logistic", lam)
    km = kkt.fit_with_intercept(K, y, "hinge", lam)
    assert abs(km.intercept_) <= 1e-12
    np.testing.assert_allclose(km.train_output_, K @ a, atol=1e-11)  # K has rank 4: α itself is not unique
    assert kkt.duality_gap(a, K, y, "hinge", lam, intercept=0.0) <= 1e-12 * sol.primal_objective
    assert kkt.kkt_residual(a, K, y, "hinge", lam, intercept=0.0) <= 1e-12 / lam
    # a feasible α of the intercept dual evaluated at b = 0: the intercept gap is at most the plain one
    # (the same P; a dual bound at least as large) and ≥ 0
    a3 = np.clip(a2, np.where(y > 0, 0, -1 / lam), np.where(y > 0, 1 / lam, 0))
    a3 = _intercept._project_sum_zero(a3, np.where(y > 0, 0, -1 / lam), np.where(y > 0, 1 / lam, 0))
    g_int = kkt.duality_gap(a3, K, y, "hinge", lam, intercept=0.0)
    assert 0 <= g_int <= machines.duality_gap(a3, K, y, "hinge", lam) + 1e-12


def test_predict_and_result_object():
    X, K, y = _problem(40, 3, 12)
    Xt = np.random.default_rng(1).standard_normal((7, 3))
    Kt = Xt @ X.T + 0.3 * (Xt @ X.T) ** 2
    km = kkt.fit_with_intercept(K, y, lam=0.5)  # loss defaults to the hinge
    assert isinstance(km, machines.KernelMachine) and km.loss.name == "hinge"
    np.testing.assert_allclose(km.predict(Kt), Kt @ km.alpha_ + km.intercept_, rtol=1e-14)
    np.testing.assert_allclose(km.train_output_, K @ km.alpha_ + km.intercept_, rtol=1e-13)
    assert km.rkhs_norm() == pytest.approx(np.sqrt(km.alpha_ @ K @ km.alpha_), rel=1e-13)
    assert abs(km.alpha_.sum()) <= 1e-13 / 0.5


# ----------------------------------------------------------------------------- scikit-learn


def test_from_sklearn_svc_maps_labels_coefficients_and_intercept():
    svm = pytest.importorskip("sklearn.svm")
    X, K = _float32_exact_gram(40, 13)
    y = np.where(X[:, 0] - X[:, 3] + np.random.default_rng(2).standard_normal(40) > 0, 1.0, -1.0)
    names = np.where(y > 0, "seven", "one")  # classes_ = ['one', 'seven']: 'seven' is +1
    clf = svm.SVC(kernel="precomputed", C=2.0, tol=1e-12).fit(K, names)
    a, b = kkt.from_sklearn_svc(clf, 40)
    np.testing.assert_allclose(K @ a + b, clf.decision_function(K), rtol=1e-12, atol=1e-12)
    yy = np.where(names == clf.classes_[1], 1.0, -1.0)
    assert np.all(yy * a >= 0) and np.all(yy * a <= 2.0 + 1e-12)  # 0 ≤ yα ≤ C
    assert kkt.duality_gap(a, K, yy, "hinge", 1 / 2.0, intercept=b) <= 1e-10 * _hinge_P(a, b, K, yy, 0.5)
    assert kkt.kkt_residual(a, K, yy, "hinge", 0.5, intercept=clf.intercept_) == \
        kkt.kkt_residual(a, K, yy, "hinge", 0.5, intercept=b)  # the (1,)-array intercept_ is accepted
    with pytest.raises(InvalidParameterError, match="'n'"):
        kkt.from_sklearn_svc(clf, 3)
    with pytest.raises(InvalidParameterError, match="class weights"):
        kkt.from_sklearn_svc(svm.SVC(kernel="precomputed", class_weight={"one": 2.0}).fit(K, names), 40)
    three = np.array(["a", "b", "c"] * 13 + ["a"])
    with pytest.raises(InvalidParameterError, match="binary"):
        kkt.from_sklearn_svc(svm.SVC(kernel="precomputed").fit(K, three), 40)
    with pytest.raises(InvalidParameterError, match="fitted"):
        kkt.from_sklearn_svc(svm.SVC(), 40)


def _mnist_gram(n):
    from ntkref import kernels
    from ntkref.data import load_digits01

    images, labels = load_digits01()
    x = images[:n].astype(np.float64) / 255.0
    return np.asarray(kernels.two_layer_relu_ntk(x)), np.where(labels[:n] == 1, 1.0, -1.0)


def _audit_svc(K, y, lam):
    """ntkref's exact solve, the float32 limit, and SVC at tol 1e-3 and 1e-8 (residual, relative gap)."""
    svm = pytest.importorskip("sklearn.svm")
    exact = kkt.fit_with_intercept(K, y, "hinge", lam, check_psd=False)
    P = exact.primal_objective

    def measure(a, b):
        return kkt.kkt_residual(a, K, y, "hinge", lam, intercept=b), kkt.duality_gap(a, K, y, "hinge", lam, intercept=b) / P

    # libsvm caches Q_ij = y_i y_j K_ij as float32: the best it can reach is the exact solution for fl32(K)
    K32 = K.astype(np.float32).astype(np.float64)
    e32 = kkt.fit_with_intercept(K32, y, "hinge", lam, check_psd=False)
    out = {"exact": measure(exact.alpha_, exact.intercept_), "limit": measure(e32.alpha_, e32.intercept_),
           "exact32": e32}
    for tol in (1e-3, 1e-8, 1e-12):
        clf = svm.SVC(kernel="precomputed", C=1 / lam, tol=tol).fit(K, y)
        out[tol] = measure(*kkt.from_sklearn_svc(clf, len(y)))
        out[("f", tol)] = clf.decision_function(K)
    return exact, out


def _check_audit(K, exact, out, lam):
    (r_ex, g_ex), (r_lim, g_lim) = out["exact"], out["limit"]
    assert exact.converged and g_ex <= 1e-12 and r_ex <= 1e-12 / lam
    assert r_lim > 1e3 * r_ex and g_lim > 1e3 * max(g_ex, 1e-16)  # the float32 limit is far above rounding
    r3, g3 = out[1e-3]
    assert r3 > 100 * r_lim and g3 > 100 * g_lim  # flagged: tol = 1e-3 is far from exact
    r8, g8 = out[1e-8]
    assert r8 <= 2 * r_lim and g8 <= 2 * g_lim  # passes within the float32 limit
    # why: SVC at a tight tol is the exact solution of fl32(K) (decision values with the float64 K)
    e32 = out["exact32"]
    f32 = K @ e32.alpha_ + e32.intercept_
    f_ex = exact.train_output_
    assert np.max(np.abs(out[("f", 1e-8)] - f32)) < 0.2 * np.max(np.abs(f32 - f_ex))
    assert np.max(np.abs(out[("f", 1e-12)] - f32)) <= 1e-10 * np.max(np.abs(f_ex))


def test_sklearn_svc_flagged_at_default_tol_on_mnist_subset():
    K, y = _mnist_gram(400)
    exact, out = _audit_svc(K, y, 0.064)
    _check_audit(K, exact, out, 0.064)


@pytest.mark.slow
@pytest.mark.parametrize("lam", [0.064, 1.7])
def test_sklearn_svc_flagged_at_default_tol_on_mnist01(lam):
    """n = 1700 (the embedded training split), seed-000 NTK eq. (63); λ = 0.064 (Table 3's SVM) and 1.7
    (= 0.001 in the mean convention, Figure 1's λ), sum convention, C = 1/λ."""
    K, y = _mnist_gram(1700)
    exact, out = _audit_svc(K, y, lam)
    _check_audit(K, exact, out, lam)


# ----------------------------------------------------------------------------- validation and devices


def test_invalid_inputs_are_named():
    _, K, y = _problem(6, 2, 0)
    a = np.zeros(6)
    with pytest.raises(InvalidParameterError, match="'lam'"):
        kkt.fit_with_intercept(K, y, "hinge")
    with pytest.raises(InvalidParameterError, match="'lam'"):
        kkt.fit_with_intercept(K, y, "hinge", 0.0)
    with pytest.raises(InvalidParameterError, match="'intercept'"):
        kkt.duality_gap(a, K, y, "hinge", 1.0, intercept=float("nan"))
    with pytest.raises(InvalidParameterError, match="'alpha'"):
        kkt.kkt_residual(np.full(6, np.nan), K, y, "hinge", 1.0, intercept=0.0)
    with pytest.raises(InvalidParameterError, match="'alpha'"):
        kkt.kkt_residual(np.zeros(5), K, y, "hinge", 1.0)
    with pytest.raises(InvalidParameterError, match="'y'"):
        kkt.fit_with_intercept(K, y * 2, "hinge", 1.0)
    with pytest.raises(InvalidParameterError, match="'K'"):
        kkt.fit_with_intercept(K - 10 * np.eye(6), y, "hinge", 1.0)  # not PSD


def test_huge_and_tiny_scales_stay_exact():
    _, K, y = _problem(30, 3, 3)
    for s in (1e-150, 1e150):
        km = kkt.fit_with_intercept(K * s, y, "hinge", 0.3, check_psd=False)
        assert km.converged and np.isfinite(km.intercept_)
        assert km.duality_gap <= 1e-12 * max(1.0, km.primal_objective)


@pytest.mark.parametrize("name", ["hinge", "squared", "logistic"])
def test_results_on_device1_equal_numpy(name):
    strict, dev = device1()
    X, K, y = _problem(15, 3, 6)
    if name == "squared":
        y = X[:, 0] + 1.0

    def on(v):
        return strict.asarray(v, device=dev)

    ref = kkt.fit_with_intercept(K, y, name, 0.3)
    km = kkt.fit_with_intercept(on(K), on(y), name, 0.3)
    assert_on_device(km, strict, dev)
    from ntkref._lib.backend import to_numpy

    np.testing.assert_allclose(to_numpy(km.alpha_), ref.alpha_, rtol=1e-12, atol=1e-13)
    assert km.intercept_ == pytest.approx(ref.intercept_, abs=1e-12)
    assert_on_device(km.predict(on(K[:4])), strict, dev)
    for fn in (kkt.kkt_residual, kkt.duality_gap):
        for b in (None, 0.3):
            assert fn(km.alpha_, on(K), on(y), name, 0.3, intercept=b) == pytest.approx(
                fn(ref.alpha_, K, y, name, 0.3, intercept=b), rel=1e-10, abs=1e-13)
    if name == "hinge":
        svm = pytest.importorskip("sklearn.svm")
        a, b = kkt.from_sklearn_svc(svm.SVC(kernel="precomputed").fit(K, y), 15, like=on(K))
        assert_on_device(a, strict, dev)


def test_warns_when_the_iteration_cap_stops_it():
    _, K, y = _problem(40, 3, 1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        km = kkt.fit_with_intercept(K, y, "hinge", 0.1, max_iter=2)
    assert not km.converged
    assert any(issubclass(w.category, machines.ConvergenceWarning) for w in rec)


@pytest.mark.parametrize("name", ["hinge", "squared_hinge", "epsilon_insensitive"])
def test_intercept_fit_is_scale_covariant_at_tiny_scales(name):
    """(sK, sλ) has the solution (α/s, b) with the same f = Kα + b and the same P (P(α/s; sK, sλ) = P(α; K, λ)).
    At s = 2⁻⁶⁰⁰ the projection onto {box, Σαᵢ = 0} multiplied two O(1/λ) numbers and overflowed: the dual was
    −inf-like (gap = P, converged=False) and the squared hinge was refused as 'too large'."""
    rng = np.random.default_rng(5)
    X = rng.integers(-3, 4, size=(20, 3)).astype(float)
    K = X @ X.T
    y = np.where(rng.standard_normal(20) > 0, 1.0, -1.0)
    target = X[:, 0] + 0.5 if name == "epsilon_insensitive" else y
    base = kkt.fit_with_intercept(K, target, name, 1.0)
    s = 2.0 ** -600
    m = kkt.fit_with_intercept(K * s, target, name, s)
    assert base.converged and m.converged
    assert m.primal_objective == pytest.approx(base.primal_objective, rel=1e-12)
    assert 0 < m.gap_rounding <= 1e-10 * m.primal_objective  # the rounding estimate is scale-free too
    assert m.gap_rounding == pytest.approx(base.gap_rounding, rel=1e-6)
    f, f0 = (K * s) @ m.alpha_ + m.intercept_, K @ base.alpha_ + base.intercept_
    np.testing.assert_allclose(f, f0, rtol=0, atol=1e-12 * np.abs(f0).max())


def test_squared_hinge_with_lam_below_a_rounding_level_negative_eigenvalue_is_refused(asxp):
    """Issue 26 item 9, with an intercept: the equality-constrained QP raised "internal error: unbounded direction
    in the intercept QP" (RuntimeError).  K = P(XXᵀ)P − 4·eps·‖K‖₂·vvᵀ (v = y/√n ⟂ 1 up to the labels' balance,
    P = I − vvᵀ): its one negative eigenvalue is rounding level (the PSD test accepts it) and below −λ/2.  Now an
    error naming 'lam' with an upper bound on λ_min(K) that numpy's eigvalsh confirms."""
    import re

    rng = np.random.default_rng(1)
    n = 60
    y = np.sign(rng.standard_normal(n))
    v = y / np.sqrt(n)
    P = np.eye(n) - np.outer(v, v)
    X = P @ rng.standard_normal((n, 10))
    K = P @ (X @ X.T) @ P
    K = K - 4 * np.finfo(float).eps * np.linalg.norm(K, 2) * np.outer(v, v)
    K = (K + K.T) / 2
    lmin = np.linalg.eigvalsh(K)[0]
    assert -n * np.finfo(float).eps * np.linalg.norm(K) < lmin < -1e-15 / 2
    machines.checked_gram(asxp(K))  # accepted by the PSD test
    for lam in (1e-14, 1e-15):
        with pytest.raises(InvalidParameterError, match="'lam' parameter of kkt.fit_with_intercept is too small for "
                                                        "the squared_hinge loss") as info:
            kkt.fit_with_intercept(asxp(K), asxp(y), "squared_hinge", lam)
        msg = str(info.value)
        bound = float(re.search(r"lambda_min\(K\) <= (\S+)\)", msg).group(1))
        assert lmin <= bound * (1 - 1e-2) + 1e-3 * abs(lmin) and bound < 0
        assert "internal error" not in msg and "nan" not in msg.lower()
