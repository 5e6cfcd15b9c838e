"""Proven certificates of the kernel machine with an intercept, f = Kα + b (issue 25, item 4; ``fit_intercept=True``,
:func:`ntkref.kkt.fit_with_intercept`): ``duality_gap + gap_rounding`` bounds the exact P(α, b) − P*.

Independent routes: Python ``fractions`` for P(α, b) and for D at the documented dual point (α's t = clip(λyα) made
exactly feasible for Σα′ = 0 by the shift of ``ntkref.machines._proof.feasible_dual_point``, built here in exact
rationals and checked feasible), mpmath at 80 digits for the logistic logarithms, and for the squared loss the exact
optimum P* (the rational solution of [[K + (λ/2)I, 1], [1ᵀ, 0]]·[α; b] = [y; 0]).
"""
from __future__ import annotations

import warnings
from fractions import Fraction as F

import numpy as np
import pytest

from ntkref import kkt, losses, machines
from ntkref.machines import _proof

U = 2.0 ** -53
_X2 = np.array([[-3, 0], [0, 0], [0, 2], [0, -1], [-1, 2], [1, 0], [3, -2], [0, 3], [2, 1], [-3, 0], [-1, 3],
                [0, 1]], float)
_Y2 = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, -1], float)
_DOM = {"hinge": (0, 1), "logistic": (0, 1), "squared_hinge": (0, None), "epsilon_insensitive": (-1, 1),
        "squared": (None, None)}


def _loss(name):
    return losses.get(name, epsilon=0.5) if name == "epsilon_insensitive" else losses.get(name)


def _feasible_point(t, y, loss):
    """The documented real dual point τ′ = t − e·ρ·ω/Σω (exact rationals), ρ = Σ eᵢtᵢ exact, ω = min(room, 1) with
    room the float lower bound fl(min(t − lo, hi − t))·(1 − 2u) (the definition in feasible_dual_point)."""
    e = [F(v) for v in y] if loss.name in ("hinge", "squared_hinge", "logistic") else [F(1)] * len(t)
    tf = [F(float(v)) for v in t]
    rho = sum(ei * ti for ei, ti in zip(e, tf))
    if rho == 0:
        return tf
    lo, hi = _DOM[loss.name]
    with np.errstate(over="ignore"):
        r_lo = t - lo if lo is not None else np.full_like(t, np.inf)
        r_hi = hi - t if hi is not None else np.full_like(t, np.inf)
        omega = np.minimum(np.minimum(r_lo, r_hi) * (1 - 2 * U), 1.0)
    om = [F(float(v)) for v in omega]
    W = sum(om)
    tau = [ti - ei * rho * oi / W for ti, ei, oi in zip(tf, e, om)]
    assert sum(ei * ti for ei, ti in zip(e, tau)) == 0  # exactly feasible
    assert all((lo is None or ti >= lo) and (hi is None or ti <= hi) for ti in tau)  # in dom l*
    return tau


def _exact_gap(K, y, alpha, b, loss, lam):
    """(P(α, b), P(α, b) − D(α′)) in exact rationals (mpmath for the logistic logarithms), α′ = e·τ′/λ."""
    import mpmath

    n = len(y)
    Kf = [[F(float(v)) for v in row] for row in K]
    a = [F(float(v)) for v in alpha]
    yf = [F(float(v)) for v in y]
    lamf, bf = F(lam), F(float(b))
    g = [sum(Kf[i][j] * a[j] for j in range(n)) for i in range(n)]
    fv = [gi + bf for gi in g]
    reg = lamf / 2 * sum(a[i] * g[i] for i in range(n))
    t = _proof.dual_point(np.asarray(alpha, float), np.asarray(y, float), loss, lam, np)
    tau = _feasible_point(t, np.asarray(y, float), loss)
    cls = loss.name in ("hinge", "squared_hinge", "logistic")
    ad = [(yf[i] if cls else 1) * tau[i] / lamf for i in range(n)]
    assert sum(ad) == 0
    quad = lamf / 2 * sum(ad[i] * sum(Kf[i][j] * ad[j] for j in range(n)) for i in range(n))
    name = loss.name
    if name == "logistic":
        mpmath.mp.dps = 80
        mp = lambda q: mpmath.mpf(q.numerator) / q.denominator  # noqa: E731
        P = mp(reg) + sum(mpmath.log1p(mpmath.exp(-mp(yf[i] * fv[i]))) for i in range(n))
        D = -mp(quad) - sum((mp(ti) * mpmath.log(mp(ti)) if ti > 0 else 0)
                            + ((1 - mp(ti)) * mpmath.log(1 - mp(ti)) if ti < 1 else 0) for ti in tau)
        return P, P - D
    if name == "hinge":
        P = reg + sum(max(F(0), 1 - yf[i] * fv[i]) for i in range(n))
        D = sum(tau) - quad
    elif name == "squared_hinge":
        P = reg + sum(max(F(0), 1 - yf[i] * fv[i]) ** 2 for i in range(n))
        D = sum(ti - ti * ti / 4 for ti in tau) - quad
    elif name == "squared":
        P = reg + sum((yf[i] - fv[i]) ** 2 for i in range(n))
        D = sum(w * yf[i] - w * w / 4 for i, w in enumerate(tau)) - quad
    else:
        eps = F(loss.epsilon)
        P = reg + sum(max(F(0), abs(yf[i] - fv[i]) - eps) for i in range(n))
        D = sum(w * yf[i] - eps * abs(w) for i, w in enumerate(tau)) - quad
    return P, P - D


def _exact_krr_optimum(K, y, lam):
    """P* of the squared loss with intercept: the rational solution of the stationarity system (Gauss–Jordan)."""
    n = len(y)
    A = [[F(float(K[i][j])) + (F(lam) / 2 if i == j else 0) for j in range(n)] + [F(1), F(float(y[i]))]
         for i in range(n)]
    A.append([F(1)] * n + [F(0), F(0)])
    m = n + 1
    for c in range(m):
        p = next(r for r in range(c, m) if A[r][c] != 0)
        A[c], A[p] = A[p], A[c]
        piv = A[c][c]
        A[c] = [v / piv for v in A[c]]
        for r in range(m):
            if r != c and A[r][c] != 0:
                fac = A[r][c]
                A[r] = [vr - fac * vc for vr, vc in zip(A[r], A[c])]
    sol = [A[r][m] for r in range(m)]
    a, b = sol[:n], sol[n]
    Kf = [[F(float(v)) for v in row] for row in K]
    g = [sum(Kf[i][j] * a[j] for j in range(n)) for i in range(n)]
    return F(lam) / 2 * sum(a[i] * g[i] for i in range(n)) + sum((F(float(y[i])) - g[i] - b) ** 2 for i in range(n))


def _grid():
    cases = [("hinge", lam, np.float64) for lam in [1e-12, 1e-10, 1e-8, 1e-6, 1e-5]]
    for lam in [1e-12, 1e-8, 1e-5]:
        cases += [("squared_hinge", lam, np.float64), ("epsilon_insensitive", lam, np.float64),
                  ("squared", lam, np.float64)]
    cases += [("logistic", lam, np.float64) for lam in [1e-6, 1e-2]]
    for lam in [1e-8, 1e-3, 1e-1]:  # float32: solved in float64, α rounded to float32
        cases += [("hinge", lam, np.float32), ("squared", lam, np.float32), ("logistic", lam, np.float32)]
    return cases


@pytest.mark.parametrize("name,lam,dtype", _grid())
def test_intercept_converged_is_a_theorem_on_the_rank2_integer_gram(name, lam, dtype):
    """Exact P(α, b) − D(α′) ≥ P(α, b) − P* (α′ the documented feasible dual point, Σα′ = 0 exactly) is ≤
    duality_gap + gap_rounding, and converged=True only when it is ≤ tol·max(1, P); squared: also the exact
    P(α, b) − P*."""
    loss = _loss(name)
    target = _X2[:, 0] + 0.5 * _X2[:, 1] if name in ("squared", "epsilon_insensitive") else _Y2
    K, y = (_X2 @ _X2.T).astype(dtype), target.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", machines.ConvergenceWarning)
        km = kkt.fit_with_intercept(K, y, loss, lam)
    alpha = np.asarray(km.alpha_, dtype=np.float64)
    K64, y64 = K.astype(np.float64), y.astype(np.float64)
    P, exact_gap = _exact_gap(K64, y64, alpha, km.intercept_, loss, lam)
    bound = max(km.duality_gap, 0.0) + km.gap_rounding  # (duality_gap ≥ 0 here)
    assert km.duality_gap >= 0 and km.gap_rounding >= 0
    assert exact_gap >= 0  # weak duality (K ⪰ 0)
    assert exact_gap <= (F(bound) if isinstance(exact_gap, F) else bound)
    # and tight: the bound is the exact gap plus rounding (the earlier estimate, e.g. 5.6e-6 for an exact 3.5e-8 at
    # hinge λ = 1e-8, refused solutions whose exact gap met tol)
    assert bound <= 2 * float(exact_gap) + 1e-12 * max(1.0, float(P))
    tol = 1e-10 if dtype == np.float64 else 1e-4
    if km.converged:
        assert exact_gap <= tol * max(1, P)
    if name == "squared":
        excess = P - _exact_krr_optimum(K64, y64, lam)
        assert 0 <= excess <= F(bound)
    assert float(P) == pytest.approx(km.primal_objective, rel=1e-9, abs=1e-9)


def test_intercept_hinge_at_tiny_lambda_is_refused_truthfully():
    """λ = 1e-12 (|α| ~ 1e12): the plain float64 gap is rounding noise; the proven bound is the exact excess of
    the dual point (within its bound), and converged is False unless that excess is ≤ tol·P."""
    K = _X2 @ _X2.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", machines.ConvergenceWarning)
        km = kkt.fit_with_intercept(K, _Y2, "hinge", 1e-12)
    P, exact_gap = _exact_gap(K, _Y2, np.asarray(km.alpha_), km.intercept_, losses.get("hinge"), 1e-12)
    assert exact_gap <= F(max(km.duality_gap, 0.0) + km.gap_rounding)
    assert km.converged == (max(km.duality_gap, 0.0) + km.gap_rounding <= 1e-10 * max(1.0, km.primal_objective)) or (
        not km.converged)
    if km.converged:
        assert exact_gap <= F(1e-10) * max(1, P)


def test_intercept_krr_gap_is_evaluated_without_cancellation():
    """Squared loss with an intercept: P(α, b) − D(α′) = Σ(y − f − λα/2)² + O(u²) terms; its proven bound is
    ~u²-size although P is O(1) (P − D in floats would carry ~u·P), and the exact P(α, b) − P* is within it."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 8)
    y = rng.standard_normal(40) + 3.0
    km = machines.solve(K, y, "squared", 0.1, fit_intercept=True)
    assert km.converged and abs(km.intercept_) > 1
    assert max(km.duality_gap, 0.0) + km.gap_rounding <= 1e-24 * km.primal_objective
    P, exact_gap = _exact_gap(K, y, np.asarray(km.alpha_), km.intercept_, losses.get("squared"), 0.1)
    assert 0 <= exact_gap <= F(max(km.duality_gap, 0.0) + km.gap_rounding)
    assert 0 <= P - _exact_krr_optimum(K, y, 0.1) <= F(max(km.duality_gap, 0.0) + km.gap_rounding)


def test_feasible_dual_point_is_exactly_feasible_and_refuses_without_room():
    """feasible_dual_point: dt = None when Σ eᵢtᵢ = 0 exactly (t at the bounds, balanced); the shift of a
    t with Σ ≠ 0 stays in dom l* and restores Σ = 0 exactly (_feasible_point checks in rationals); no interior
    coordinate and Σ ≠ 0: not feasible (ok False), never a certificate."""
    hinge = losses.get("hinge")
    y = np.array([1.0, -1.0, 1.0, -1.0])
    assert _proof.feasible_dual_point(np.array([1.0, 1.0, 0.0, 0.0]), y, hinge, np) == (None, True)
    t = np.array([0.3, 0.1 + 0.2, 0.7, 0.7])  # Σ y t = 0.3 − fl(0.1 + 0.2) ≠ 0
    dt, ok = _proof.feasible_dual_point(t, y, hinge, np)
    assert ok and dt is not None and np.all(dt <= 1e-15)
    tau = _feasible_point(t, y, hinge)
    assert all(abs(ti - F(float(v))) <= F(float(d)) for ti, v, d in zip(tau, t, dt))
    assert _proof.feasible_dual_point(np.array([1.0, 0.0, 0.0, 0.0]), y, hinge, np)[1] is False


def test_feasible_dual_point_snaps_a_rounding_off_the_bounds():
    """A hinge solution with every point at a bound whose float t is a rounding off it (t = 1 − 2⁻⁵³, 7e-17)
    has no room for the shift from t itself; snapped to the bounds, Σ yᵢtᵢ = 0 exactly, and the returned dt covers
    the distance: some point of [t − dt, t + dt] ∩ [0, 1] (the snapped one) is exactly feasible."""
    hinge = losses.get("hinge")
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])
    t = np.array([1.0 - 2.0 ** -53, 1.0, 0.0, 0.0, 0.0])
    assert _proof._shift_to_sum_zero(t, y, hinge, np)[1] is False  # the old route finds no room
    dt, ok = _proof.feasible_dual_point(t, y, hinge, np)
    assert ok
    snapped = [F(1), F(1), F(0), F(0), F(0)]  # Σ y t_s = 1 − 1 = 0
    assert sum(F(float(e)) * v for e, v in zip(y, snapped)) == 0
    assert all(abs(v - F(float(ti))) <= F(float(d)) for v, ti, d in zip(snapped, t, dt))
    assert _proof.feasible_dual_point(np.array([0.5, 0.0, 0.0, 0.0, 0.0]), y, hinge, np)[1] is False


def test_intercept_hinge_with_bound_support_vectors_is_certified():
    """Regression (a hypothesis-drawn problem): every point at a bound, t a rounding off 1; the fit used to raise
    'the proven bound of the duality gap is not finite'.  Now the certificate is built from the snapped point and
    checked here in exact rationals: P(α, b) − D(τ′) ≤ duality_gap + gap_rounding ≤ tol·max(1, P)."""
    hexes = ['0x1.35b53p+1', '0x1.359d44p+1', '0x1.35b51ep+1', '0x1.359d44p+1', '0x1.35b51ep+1', '0x0.0p+0',
             '0x1.33db76p-3', '0x1.359d44p+1', '0x1.35b53p+1', '0x1.359d44p+1', '0x1.35b51ep+1', '0x1.359d44p+1',
             '0x0.0p+0', '0x1.32c65p-3', '0x1.35b51ep+1', '0x1.359d44p+1', '0x1.35b53p+1', '0x1.359d44p+1',
             '0x1.35b51ep+1', '0x0.0p+0', '0x1.33db76p-3', '0x1.359d44p+1', '0x1.35b51ep+1', '0x1.359d44p+1',
             '0x1.35b53p+1', '0x1.359d44p+1', '0x0.0p+0', '0x1.32c65p-3', '0x1.35b51ep+1', '0x1.359d44p+1',
             '0x1.35b51ep+1', '0x1.359d44p+1', '0x1.35b53p+1', '0x0.0p+0', '0x1.33db76p-3', '0x0.0p+0', '0x0.0p+0',
             '0x0.0p+0', '0x0.0p+0', '0x0.0p+0', '0x1.0efe7ap-19', '0x0.0p+0', '0x1.33db76p-3', '0x1.32c65p-3',
             '0x1.33db76p-3', '0x1.32c65p-3', '0x1.33db76p-3', '0x0.0p+0', '0x1.60cf4cp-4']
    K = np.array([float.fromhex(h) for h in hexes]).reshape(7, 7)
    y = np.array([1.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0])
    lam = 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning: it is certified
        res = machines.solve(K, y, "hinge", lam, fit_intercept=True)
    assert res.converged
    alpha, b = [F(float(a)) for a in res.alpha_], F(float(res.intercept_))
    Kf = [[F(float(v)) for v in row] for row in K]
    yf = [F(float(v)) for v in y]
    g = [sum(Kf[i][j] * alpha[j] for j in range(7)) for i in range(7)]
    P = F(lam) / 2 * sum(alpha[i] * g[i] for i in range(7)) + sum(max(F(0), 1 - yf[i] * (g[i] + b)) for i in range(7))
    # the dual of any τ ∈ [0, 1]ⁿ with Σ yᵢτᵢ = 0 is D(τ) = Σ τᵢ − (1/(2λ)) Σᵢⱼ τᵢτⱼyᵢyⱼKᵢⱼ ≤ P*
    tau = [min(F(1), max(F(0), F(lam) * yf[i] * alpha[i])) for i in range(7)]
    tau = [F(round(v)) if abs(v - round(v)) <= F(2) ** -30 else v for v in tau]
    assert sum(yf[i] * tau[i] for i in range(7)) == 0
    D = sum(tau) - sum(tau[i] * tau[j] * yf[i] * yf[j] * Kf[i][j] for i in range(7) for j in range(7)) / (2 * F(lam))
    bound = F(max(res.duality_gap, 0.0)) + F(res.gap_rounding)
    assert P - D <= bound <= F(1e-10) * max(F(1), P)


# ------------------------------------------------------------------ krr.solve_cg exposes the PSD proof


def test_solve_cg_reports_the_psd_margin_of_its_test():
    """krr.solve_cg runs the PSD test of machines.solve and now reports what it proved: 0.0 for a K ≻ 0 (Rump), a
    true margin μ (λ_min(K) > −μ, eigvalsh) for a singular Gram, inf without a proof (check_psd=False)."""
    from ntkref import krr

    rng = np.random.default_rng(2)
    A = rng.standard_normal((30, 30))
    y = rng.standard_normal(30)
    assert krr.solve_cg(A @ A.T + np.eye(30), y, 0.1).psd_margin == 0.0
    K = _X2 @ _X2.T  # rank 2
    m = krr.solve_cg(K, _Y2, 0.1)
    assert 0 < m.psd_margin < np.inf and np.linalg.eigvalsh(K)[0] > -m.psd_margin
    assert m.psd_margin == machines.checked_gram(K).psd_margin
    assert krr.solve_cg(K, _Y2, 0.1, check_psd=False).psd_margin == np.inf
