r"""The kernel machine with an unregularised intercept, f = Kα + b, solved exactly, and the KKT residuals and
duality gaps of any candidate (α, b) — the machinery of :mod:`ntkref.kkt`, whose docstring has the derivations.

P(α, b) = (λ/2)αᵀKα + Σᵢ l((Kα)ᵢ + b, yᵢ) (seed 000 eq. (7) with g(xᵢ) → g(xᵢ) + b); its Fenchel dual is that of
:mod:`ntkref.machines` with the constraint Σαᵢ = 0, whose multiplier is b.  Here: :func:`kkt_residual` and
:func:`duality_gap` (the dual point is the exact Euclidean projection onto {dom l*, Σαᵢ = 0},
:func:`_project_sum_zero`); the primal active-set method for the equality-constrained box QP (:func:`_eq_box_qp`,
face directions in the orthogonal complement of e_F by a Householder reflector, :func:`_face_direction`); the
squared loss's closed form and logistic damped Newton in (β, b); :class:`InterceptMachine` and
:func:`fit_with_intercept`, which :func:`ntkref.machines.solve` calls for ``fit_intercept=True``.

The fit's certificate is proven (:func:`_proven_certificate`, :func:`ntkref.machines._proof.proven_gap` with
``b``): for every dual point with Σα′ = 0, P(α, b) − D(α′) = Σ Fᵢ(fᵢ, sᵢ) + (λ/2)(α − α′)ᵀK(α − α′), f = Kα + b
(the term −λbΣα′ vanishes), computed from the compensated Kα and a real dual point within a proven distance of
the float t = clip(λyα) (``feasible_dual_point``).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor as _cho_factor, cho_solve as _cho_solve

from .._lib.backend import device_of, to_numpy
from .._lib.compat import single_threaded_blas
from .._lib.validation import InvalidParameterError, check_array, check_int, check_real
from . import _boxqp, _duality, _gram, _proof
from ._result import ConvergenceWarning, KernelMachine, predict


# --------------------------------------------------------------------------- shared set-up


def _setup(alpha, K, y, loss, lam, intercept, reduction, caller):
    if getattr(intercept, "shape", None) == (1,):  # e.g. scikit-learn's intercept_
        intercept = intercept[0]
    K, y, loss, lam, lam_sum, xp = _duality.prepare(K, y, loss, lam, reduction, caller, psd=False, allow_zero=False)
    alpha = check_array(alpha, "alpha", caller=caller, xp=xp, shape=(K.shape[0],), like=K)
    alpha = xp.astype(alpha, K.dtype) if alpha.dtype != K.dtype else alpha
    b = None if intercept is None else check_real(intercept, "intercept", caller=caller)
    return alpha, K, y, loss, lam, lam_sum, xp, b


def _dual_box(y, loss, lam_sum):
    """Host bounds lo ≤ αᵢ ≤ hi of dom l* (hinge/logistic: 0 ≤ yα ≤ 1/λ; squared hinge: yα ≥ 0;
    ε-insensitive: |α| ≤ 1/λ; squared: none)."""
    C = 1.0 / lam_sum
    pos = y > 0
    if loss.name in ("hinge", "logistic"):
        return np.where(pos, 0.0, -C), np.where(pos, C, 0.0)
    if loss.name == "squared_hinge":
        return np.where(pos, 0.0, -np.inf), np.where(pos, np.inf, 0.0)
    if loss.name == "epsilon_insensitive":
        return np.full(y.shape, -C), np.full(y.shape, C)
    return np.full(y.shape, -np.inf), np.full(y.shape, np.inf)


def _project_sum_zero(a, lo, hi):
    """argmin ‖z − a‖ over lo ≤ z ≤ hi, Σ z = 0 (host, float64; needs Σ lo ≤ 0 ≤ Σ hi), exactly.

    z = clip(a − t, lo, hi) with s(t) = Σ clip(aᵢ − t, loᵢ, hiᵢ) = 0; s is non-increasing and linear between
    the breakpoints aᵢ − loᵢ, aᵢ − hiᵢ: a bisection over the sorted breakpoints finds the piece, then the root.
    The rounding left in Σ z is taken off the coordinates strictly inside their box.
    """
    def s(t):
        return float(np.sum(np.clip(a - t, lo, hi)))

    bps = np.concatenate([a - lo, a - hi])
    bps = np.unique(bps[np.isfinite(bps)])
    if bps.size == 0:  # no bounds: subtract the mean
        t = float(np.mean(a))
    else:
        T = np.concatenate([[bps[0] - 1.0 - abs(bps[0])], bps, [bps[-1] + 1.0 + abs(bps[-1])]])
        i, j = 0, T.size - 1
        si, sj = s(T[i]), s(T[j])
        if si < 0 or sj > 0:  # the root lies beyond a sentinel: s is linear there, extrapolate
            k0, k1 = (0, 1) if si < 0 else (T.size - 2, T.size - 1)
            s0, s1 = s(T[k0]), s(T[k1])
            if s1 == s0:
                raise InvalidParameterError("internal: the dual feasible set {lo <= a <= hi, sum(a) = 0} is empty.")
            t = T[k0] - (s0 / (s1 - s0)) * (T[k1] - T[k0])  # (the ratio first: s·ΔT overflows at |a| ~ 1e180)
        else:
            while j - i > 1:  # invariant s(T[i]) >= 0 >= s(T[j])
                k = (i + j) // 2
                sk = s(T[k])
                if sk >= 0:
                    i, si = k, sk
                else:
                    j, sj = k, sk
            t = T[i] if si == sj else T[i] + (si / (si - sj)) * (T[j] - T[i])
    z = np.clip(a - t, lo, hi)
    inside = (z > lo) & (z < hi)
    if inside.any():
        z[inside] -= float(np.sum(z)) / int(inside.sum())
        z = np.clip(z, lo, hi)
    return z


def _primal(alpha, g, b, y, loss, lam_sum, xp):
    """P(α, b) in the sum convention, g = Kα."""
    return 0.5 * lam_sum * float(xp.sum(alpha * g)) + float(xp.sum(loss.value(g + b, y)))


def _intercept_dual(alpha, g, b, K, y, loss, lam_sum, xp):
    """max(D(α̃₁), D(α̃₂)) over the projections of α and −l′(g + b)/λ onto the dual feasible set (sum)."""
    dev = device_of(K)
    y_host = to_numpy(y)
    lo, hi = _dual_box(y_host, loss, lam_sum)
    best = -math.inf
    for cand in (alpha, -loss.derivative(g + b, y) / lam_sum):
        proj = xp.asarray(_project_sum_zero(np.asarray(to_numpy(cand), dtype=np.float64), lo, hi),
                          dtype=K.dtype, device=dev)
        best = max(best, _duality.dual_from_g(proj, K @ proj, y, loss, lam_sum, xp))
    return best


def _intercept_kkt(alpha, g, b, K, y, loss, lam_sum, xp):
    balance = abs(float(xp.sum(alpha)))
    if loss.name in _duality.QP_LOSSES:
        lo, hi, eps, shift = _duality.qp_bounds(y, loss, lam_sum, xp)
        G = g + shift * alpha - y + b
        tau = 1.0 / max(float(xp.max(xp.linalg.diagonal(K))) + shift, 1e-300)
        v = alpha - tau * G
        if eps:
            v = xp.sign(v) * xp.maximum(xp.abs(v) - tau * eps, 0.0)
        prox = xp.minimum(xp.maximum(v, lo), hi)
        return max(float(xp.max(xp.abs(alpha - prox))), balance)
    return max(float(xp.max(xp.abs(alpha + loss.derivative(g + b, y) / lam_sum))), balance)


# --------------------------------------------------------------------------- public diagnostics


def kkt_residual(alpha, K, y, loss, lam, *, intercept=None, reduction="sum"):
    r"""KKT residual of a candidate (α, b) (module docstring: natural residual of the dual, in units of α).

    Parameters
    ----------
    alpha : array, shape (n,)
        Coefficients of f = Kα + b (e.g. from :func:`from_sklearn_svc`).
    K : array, shape (n, n)
        Symmetric Gram matrix (not checked for PSD).
    y : array, shape (n,)
        Targets, ±1 for the classification losses.
    loss : str or losses.Loss
    lam : float
        λ > 0 in the ``reduction`` convention (SVM: λ = 1/C with ``reduction="sum"``).
    intercept : float or None
        b.  ``None``: the machine has no intercept (seed 000 eq. (7)); the residual is then
        :mod:`ntkref.machines`'.  A number (0.0 included) means the model *with* an intercept, at this b: the
        dual then has the constraint Σαᵢ = 0 and |Σαᵢ| enters the residual.
    reduction : {"sum", "mean"}
        Only sets λ_sum = n·λ for "mean"; the residual is in units of α, not divided by n.

    Returns
    -------
    float
        0 (to rounding) at the solution, > 0 at any other (α, b).
    """
    caller = "kkt.kkt_residual"
    alpha, K, y, loss, lam, lam_sum, xp, b = _setup(alpha, K, y, loss, lam, intercept, reduction, caller)
    alpha, K, y = _duality.as_float64(xp, alpha, K, y)  # float32 inputs evaluated in float64 (exact copies)
    g = K @ alpha
    if b is None:
        return _duality.kkt_residual(alpha, g, y, K, loss, lam_sum, xp)
    return _intercept_kkt(alpha, g, b, K, y, loss, lam_sum, xp)


def duality_gap(alpha, K, y, loss, lam, *, intercept=None, reduction="sum"):
    r"""Duality gap P(α, b) − D(α̃) ≥ P(α, b) − P* of a candidate (module docstring); parameters as
    :func:`kkt_residual`.  ``intercept=None`` is :func:`ntkref.machines.duality_gap` (no intercept; +inf for a
    non-smooth loss when α is outside the dual's box).  With an intercept the dual point is the better of the
    projections of α and of −l′(Kα + b)/λ onto {dom l*, Σαᵢ = 0}, so the gap is finite for every finite
    candidate.  ``reduction="mean"``: the sum-convention gap divided by n.
    """
    caller = "kkt.duality_gap"
    alpha, K, y, loss, lam, lam_sum, xp, b = _setup(alpha, K, y, loss, lam, intercept, reduction, caller)
    if b is None:
        return _duality.duality_gap(alpha, K, y, loss, lam, reduction=reduction)
    alpha, K, y = _duality.as_float64(xp, alpha, K, y)  # float32 inputs evaluated in float64 (exact copies)
    g = K @ alpha
    gap = _primal(alpha, g, b, y, loss, lam_sum, xp) - _intercept_dual(alpha, g, b, K, y, loss, lam_sum, xp)
    return gap / (K.shape[0] if reduction == "mean" else 1)


# --------------------------------------------------------------------------- the equality-constrained box QP


def _face_direction(Qff, grad, ef):
    """Minimiser direction of ½dᵀQ_FF d + gradᵀd on {e_Fᵀd = 0} (host, float64).

    A Householder reflector H (H e_F ∝ e₁) gives the orthonormal basis Z = H[:, 1:] of e_F⊥; the reduced system
    (ZᵀQZ) w = −Zᵀgrad is solved by Cholesky.  If that fails or is inaccurate (singular reduced Hessian), an
    eigendecomposition: a component of the reduced gradient in its null space gives a direction of linear
    descent (unbounded on the face: not a Newton step), else the pseudo-inverse solution.
    Returns (d, is_newton).
    """
    m = grad.shape[0]
    u = ef / math.sqrt(m)
    v = u.copy()
    v[0] += 1.0 if u[0] >= 0 else -1.0
    beta = 2.0 / float(v @ v)
    p = beta * (Qff @ v)
    w = p - (0.5 * beta * float(p @ v)) * v
    R = (Qff - np.outer(v, w) - np.outer(w, v))[1:, 1:]
    R = (R + R.T) / 2
    r = -(grad - beta * float(v @ grad) * v)[1:]

    def lift(s):
        full = np.concatenate([[0.0], s])
        return full - beta * float(v @ full) * v

    rmax = float(np.max(np.abs(r))) if r.size else 0.0
    if rmax == 0.0:
        return np.zeros(m), True
    eps = np.finfo(np.float64).eps
    try:
        s = _cho_solve(_cho_factor(R, lower=True, check_finite=False), r, check_finite=False)
        ok = bool(np.all(np.isfinite(s)))
        if ok:
            res = float(np.max(np.abs(R @ s - r)))
            scale = float(np.max(np.abs(R))) * float(np.max(np.abs(s))) + rmax
            ok = res <= 1e3 * m * eps * scale and float(r @ s) > 0
        if ok:
            return lift(s), True
    except np.linalg.LinAlgError:  # scipy raises numpy's LinAlgError for a matrix that is not PD
        pass
    lam_, V = np.linalg.eigh(R)
    keep = lam_ > m * eps * max(float(np.max(np.abs(lam_))), 1e-300)
    c = V.T @ r
    null = np.where(keep, 0.0, c)
    if float(np.linalg.norm(null)) > 1e-8 * float(np.linalg.norm(c)):
        return lift(V @ null), False
    return lift(V @ np.where(keep, c / np.where(keep, lam_, 1.0), 0.0)), True


def _gradient(Q, c, z):
    """Qz + c from the rows of the nonzero coordinates (Q symmetric: contiguous rows)."""
    nz = np.flatnonzero(z)
    return z[nz] @ Q[nz] + c


def _violations(vals, z, lo, hi, e, free, thr):
    """Multiplier ν of eᵀz = 0 and the bound multipliers of the wrong sign at a face minimiser.

    vᵢ = −eᵢGᵢ: ν = vᵢ on free coordinates, ν ≥ vᵢ where eᵢzᵢ may only increase, ν ≤ vᵢ where it may only
    decrease.  With no free coordinate ν is the midpoint of [max of the first, min of the second] if that
    interval is empty by more than thr (its extremes then violate by more than thr/2), else there is no
    violation.  Returns (ν, violation, up, down, bad).
    """
    up = np.where(e > 0, z < hi, z > lo)  # e_i z_i may increase: ν ≥ v_i
    down = np.where(e > 0, z > lo, z < hi)  # e_i z_i may decrease: ν ≤ v_i
    n = vals.shape[0]
    m = int(free.sum())
    nu_lo = float(np.max(vals[up])) if up.any() else -math.inf
    nu_hi = float(np.min(vals[down])) if down.any() else math.inf
    if m:
        nu = float(np.mean(vals[free]))
    elif nu_lo <= nu_hi + thr:
        return None, np.zeros(n), up, down, np.zeros(n, dtype=bool)
    else:
        nu = 0.5 * (nu_lo + nu_hi)
    viol = np.where(~free & up, vals - nu, 0.0)
    viol = np.maximum(viol, np.where(~free & down, nu - vals, 0.0))
    return nu, viol, up, down, viol > (thr if m else 0.5 * thr)


def _eq_box_qp(Q, c, e, lo, hi, max_iter):
    """Minimise q(z) = ½zᵀQz + cᵀz over lo ≤ z ≤ hi, eᵀz = 0 (Q PSD, e ∈ {±1}ⁿ, lo ≤ 0 ≤ hi), from z = 0.

    Host NumPy, float64.  Returns (z, nu, (nu_lo, nu_hi), iterations, exact_stop): ν is the multiplier of
    eᵀz = 0 (the intercept), [ν_lo, ν_hi] the interval of valid multipliers (a point when a coordinate is free).
    """
    n = Q.shape[0]
    eps = np.finfo(np.float64).eps
    z = np.zeros(n)
    G = c.copy()
    free = np.zeros(n, dtype=bool)
    L = float(np.max(np.sum(np.abs(Q), axis=1)))
    single, last_q, refine, checks = False, math.inf, 0, 0
    exact = False
    it = 0
    for it in range(1, max_iter + 1):
        F = np.flatnonzero(free)
        m = F.size
        if m >= 2:
            d, newton = _face_direction(Q[np.ix_(F, F)], G[F], e[F])
            if np.any(d != 0):
                zF, loF, hiF = z[F], lo[F], hi[F]
                with np.errstate(divide="ignore", invalid="ignore"):
                    room = np.where(d > 0, (hiF - zF) / d, np.where(d < 0, (loF - zF) / d, np.inf))
                room = np.maximum(room, 0.0)
                t = float(np.min(room))
                if newton:
                    t = min(t, 1.0)
                if not math.isfinite(t):  # a descent ray no bound blocks, Q singular or indefinite along it
                    QFF = Q[np.ix_(F, F)]
                    raise _boxqp.unbounded_direction(QFF, d, eps, float(np.max(np.diag(QFF))), np)
                new = zF + t * d
                hit = room <= t
                new = np.where(hit, np.where(d > 0, hiF, loF), new)
                if hit.any():
                    free[F[hit]] = False
                    keep = ~hit
                    if keep.any():  # keep eᵀz = 0 exact after snapping to the bounds
                        new[keep] -= e[F[keep]] * (float(e[F] @ (new - zF)) / int(keep.sum()))
                        new = np.clip(new, loF, hiF)
                delta = new - zF
                z[F] = new
                G += delta @ Q[F]  # Q symmetric: contiguous rows, not a column gather
                if hit.any() or not newton:
                    refine = 0
                    continue
                refine += 1
        # at a face minimiser (or fewer than two free coordinates): multiplier and violators, from the
        # running gradient; a stop is confirmed with the exact gradient (also recomputed every 32 checks)
        checks += 1
        fresh = checks % 32 == 0
        if fresh:
            G = _gradient(Q, c, z)
        F = np.flatnonzero(free)
        m = F.size
        thr = 1e3 * n * eps * (L * float(np.max(np.abs(z))) + float(np.max(np.abs(c))))
        for _ in range(2):
            vals = -e * G
            # free coordinates not stationary: the face solve was not accurate enough, another Newton step
            unsettled = m >= 2 and refine < 3 and float(np.max(np.abs(vals[F] - np.mean(vals[F])))) > thr
            if unsettled:
                break
            nu, viol, up, down, bad = _violations(vals, z, lo, hi, e, free, thr)
            if bad.any() or fresh:
                break
            G, fresh = _gradient(Q, c, z), True  # confirm "no violator" with the exact gradient
        if unsettled:
            continue
        refine = 0
        if not bad.any():
            exact = True
            break
        nbad = int(bad.sum())
        q = 0.5 * float(z @ (G + c))
        if q >= last_q:  # no decrease since the last release: release one coordinate at a time
            single = True
        last_q = q
        k = 1 if single else min(nbad, max(16, m))
        if m == 0:  # both sides, so that a feasible descent direction exists on the new face
            k = max(k, 2)
            sides = [bad & up, bad & down]
            release = np.zeros(n, dtype=bool)
            for side in sides:
                idx = np.flatnonzero(side)
                top = idx[np.argsort(-viol[idx], kind="stable")[: max(1, k // 2)]]
                release[top] = True
        else:
            idx = np.flatnonzero(bad)
            release = np.zeros(n, dtype=bool)
            release[idx[np.argsort(-viol[idx], kind="stable")[:k]]] = True
        free |= release
    G = _gradient(Q, c, z)
    vals = -e * G
    up = np.where(e > 0, z < hi, z > lo)
    down = np.where(e > 0, z > lo, z < hi)
    nu_lo = float(np.max(vals[up])) if up.any() else -math.inf
    nu_hi = float(np.min(vals[down])) if down.any() else math.inf
    F = np.flatnonzero(free)
    if F.size:
        nu = float(np.mean(vals[F]))
    elif math.isfinite(nu_lo) and math.isfinite(nu_hi):
        nu = 0.5 * (nu_lo + nu_hi)
    else:
        nu = nu_lo if math.isfinite(nu_lo) else (nu_hi if math.isfinite(nu_hi) else 0.0)
    return z, nu, (nu_lo, nu_hi), it, exact


# --------------------------------------------------------------------------- fits with an intercept


@dataclass
class InterceptMachine(KernelMachine):
    """An exact kernel machine with an intercept, f(x) = Σᵢ αᵢ K(x, xᵢ) + b.

    The fields of :class:`ntkref.machines.KernelMachine` (objectives, ``duality_gap`` and ``kkt_residual`` of
    the problem *with* an intercept, module docstring), except that ``train_output_`` is f = Kα + b on the
    training points, plus

    Attributes
    ----------
    intercept_ : float
        b (a Python float; α is on K's device).
    intercept_interval_ : (float, float)
        Every b in this interval is optimal together with α (a single point unless no coefficient is free:
        module docstring); ``intercept_`` is its midpoint, or its finite end.
    """

    intercept_: float = 0.0
    intercept_interval_: tuple = (0.0, 0.0)

    def predict(self, K_test_train):
        """f(x) = Σᵢ αᵢ K(x, xᵢ) + b for the rows of ``K_test_train`` (shape (m, n)) → shape (m,)."""
        return predict(self.alpha_, K_test_train) + self.intercept_


def _qp_data(K_h, y_h, loss, lam_sum):
    """(Q, c, e, lo, hi, to_alpha) of the dual QP min ½zᵀQz + cᵀz, lo ≤ z ≤ hi, eᵀz = 0 (host)."""
    n = y_h.shape[0]
    ones = np.ones(n)
    if loss.name == "epsilon_insensitive":  # α = α⁺ − α⁻, both in [0, C]
        C = 1.0 / lam_sum
        Q = np.block([[K_h, -K_h], [-K_h, K_h]])
        c = np.concatenate([loss.epsilon - y_h, loss.epsilon + y_h])
        return Q, c, np.concatenate([ones, -ones]), np.zeros(2 * n), np.full(2 * n, C), lambda z: z[:n] - z[n:]
    lo, hi = _dual_box(y_h, loss, lam_sum)
    Q = K_h + (lam_sum / 2) * np.eye(n) if loss.name == "squared_hinge" else K_h
    return Q, -y_h, ones, lo, hi, lambda z: z


def _squared_with_intercept(K, y, lam_sum, xp):
    """[[K + (λ/2)I, 1], [1ᵀ, 0]]·[α; b] = [y; 0] (stationarity in β and in b), on K's device."""
    n = K.shape[0]
    dev = device_of(K)
    ones = xp.ones((n, 1), dtype=K.dtype, device=dev)
    top = xp.concat([K + (lam_sum / 2) * xp.eye(n, dtype=K.dtype, device=dev), ones], axis=1)
    bottom = xp.concat([xp.matrix_transpose(ones), xp.zeros((1, 1), dtype=K.dtype, device=dev)], axis=1)
    rhs = xp.concat([y, xp.zeros((1,), dtype=K.dtype, device=dev)])
    sol = xp.linalg.solve(xp.concat([top, bottom], axis=0), rhs[:, None])[:, 0]
    return sol[:n], float(sol[n])


def _logistic_with_intercept(K, y, loss, lam_sum, tol, max_iter, xp):
    """Damped Newton in (β, b) for P(α, b), in α-coordinates (β = Σ αᵢ Φ(xᵢ)), on K's device.

    With r = λα + l′(f), D = diag l″(f), f = Kα + b, the Newton equations are (λI + DK)Δα + D1·Δb = −r and
    1ᵀD(KΔα + 1Δb) = −Σl′; subtracting 1ᵀ of the first from the second leaves 1ᵀΔα = −Σα, so the system solved is
    [[λI + DK, D1], [1ᵀ, 0]].  Armijo backtracking on P; two more full steps once the gap test passes (quadratic convergence takes the
    residual from ~√tol to rounding).
    """
    n = K.shape[0]
    dev = device_of(K)
    alpha = xp.zeros_like(y)
    b = 0.0
    eye = xp.eye(n, dtype=K.dtype, device=dev)
    ones = xp.ones((n, 1), dtype=K.dtype, device=dev)
    corner = xp.zeros((1, 1), dtype=K.dtype, device=dev)
    polished = 0
    for it in range(1, max_iter + 1):
        g = K @ alpha
        P = _primal(alpha, g, b, y, loss, lam_sum, xp)
        done = P - _intercept_dual(alpha, g, b, K, y, loss, lam_sum, xp) <= tol * max(1.0, P)
        if done and polished >= 2:
            return alpha, b, it - 1, True
        f = g + b
        l1 = loss.derivative(f, y)
        r = lam_sum * alpha + l1
        ex = xp.exp(-xp.abs(y * f))
        l2 = ex / (1 + ex) ** 2
        A = xp.concat([xp.concat([lam_sum * eye + l2[:, None] * K, l2[:, None]], axis=1),
                       xp.concat([xp.matrix_transpose(ones), corner], axis=1)], axis=0)
        rhs = xp.concat([-r, -xp.reshape(xp.sum(alpha), (1,))])
        step = xp.linalg.solve(A, rhs[:, None])[:, 0]
        da, db = step[:n], float(step[n])
        Kd = K @ da
        slope = float(xp.sum(r * Kd)) + float(xp.sum(l1)) * db  # ∇P · (Δβ, Δb)
        if done:
            # near the optimum P changes by O(residual²), below its rounding: accept the full step when it
            # lowers the stationarity residual instead
            polished += 1
            a_t, b_t = alpha + da, b + db
            r_t = lam_sum * a_t + loss.derivative(g + Kd + b_t, y)
            if float(xp.max(xp.abs(r_t))) + abs(float(xp.sum(r_t))) < float(xp.max(xp.abs(r))) + abs(float(xp.sum(l1))):
                alpha, b = a_t, b_t
            continue
        if not slope < 0:
            return alpha, b, it, False
        t = 1.0
        for _ in range(60):
            if _primal(alpha + t * da, g + t * Kd, b + t * db, y, loss, lam_sum, xp) <= P + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return alpha, b, it, False
        alpha, b = alpha + t * da, b + t * db
    g = K @ alpha
    P = _primal(alpha, g, b, y, loss, lam_sum, xp)
    return alpha, b, max_iter, P - _intercept_dual(alpha, g, b, K, y, loss, lam_sum, xp) <= tol * max(1.0, P)


def _proven_certificate(K, alpha, b, y, loss, lam_sum, tol, xp, psd_margin=math.inf):
    """The proven certificate of (α, b) (:func:`ntkref.machines._proof.proven_gap` with the intercept):
    (g, P, computed gap Σ Fᵢ, proven upper bound of P(α, b) − D(α′) ≥ P(α, b) − P*, ok).  The dual point is α's (t = clip(λyα))
    made exactly feasible for Σα′ = 0 (:func:`ntkref.machines._proof.feasible_dual_point`); if that does not
    certify α to tol, also that of α's projection onto {dom l*, Σ = 0} (:func:`_project_sum_zero`), and the
    smaller proven bound is kept.  ok: proven upper bound ≤ tol·max(1, proven lower bound of P).  ``psd_margin``:
    as :func:`ntkref.machines._proof.proven_gap` (the bounds account for λ_min(K) > −μ; inf assumes K ⪰ 0)."""
    c = _proof.proven_gap(K, alpha, y, loss, lam_sum, xp, b=b, psd_margin=psd_margin)  # g from the support rows

    def ok(c):
        return _proof.certified(c["gap_upper"], c["primal_low"], tol)

    if not ok(c):
        lo, hi = _dual_box(np.asarray(to_numpy(y), dtype=np.float64), loss, lam_sum)
        with np.errstate(all="ignore"):
            proj = _project_sum_zero(np.asarray(to_numpy(alpha), dtype=np.float64), lo, hi)
        if np.all(np.isfinite(proj)):
            proj = xp.asarray(proj, dtype=xp.float64, device=device_of(K))
            c2 = _proof.proven_gap(K, alpha, y, loss, lam_sum, xp, b=b, g=c["g"], delta=c["delta"],
                                   dual_alpha=proj, psd_margin=psd_margin)
            if c2["gap_upper"] < c["gap_upper"]:
                c = c2
    return c["g"], c["primal"], c["gap"], c["gap_upper"], bool(ok(c))


def fit_with_intercept(K, y, loss="hinge", lam=None, *, reduction="sum", tol=None, max_iter=None, check_psd=True):
    r"""Exact minimiser (α, b) of P(α, b) = (λ/2)αᵀKα + Σᵢ l((Kα)ᵢ + b, yᵢ): a kernel machine with an
    unregularised intercept (seed 000 eq. (7) with the bias of Def. 2.2; module docstring).

    Parameters
    ----------
    K, y, loss, reduction, check_psd
        As :func:`ntkref.machines.solve` (K symmetric PSD, y ±1 for the classification losses).
        ``loss`` defaults to ``"hinge"``: the SVM of scikit-learn's ``SVC`` with C = 1/λ (sum convention).
    lam : float
        λ > 0 (required).
    tol : float, optional
        The result is ``converged`` when the active-set method stopped on its face with no violation above
        rounding and the PROVEN bound of the gap is ≤ tol·max(1, P) (default 1e-10 in float64, 1e-4 in float32;
        :func:`_proven_certificate`: max(duality_gap, 0) + gap_rounding ≥ P(α, b) − P* in real arithmetic on the
        given floats for K ⪰ 0, assumptions as :mod:`ntkref.machines._proof`);
        for logistic it is Newton's stopping rule (then one more full step).
    max_iter : int, optional
        Iteration cap: active-set steps (default max(1000, 10n)), Newton steps (default 200).

    Returns
    -------
    InterceptMachine
        ``alpha_`` (on K's device, K's dtype), ``intercept_`` (b, float) and ``intercept_interval_``, the
        objectives, ``duality_gap`` and ``kkt_residual`` (of this problem, evaluated on the returned α and b),
        ``predict(K_test_train)`` = K_test_train·α + b.

    Notes
    -----
    hinge, squared hinge, ε-insensitive: the active-set method of the module docstring on the dual with the
    equality Σαᵢ = 0 (ε-insensitive: on (α⁺, α⁻), α = α⁺ − α⁻, with the 2n×2n matrix [[K, −K], [−K, K]]: 4× the
    memory of K), an explicit host step in float64 (K and y copied to the host once, α copied back to K's
    device), with one BLAS thread (its dense steps are small and sequential: with the default threads, on a
    loaded 2-core machine, it ran 20–35× slower); a squared hinge whose λ/2 is not above −λ_min(K) plus rounding
    (its dual unbounded below) is refused naming ``lam``, as in :func:`ntkref.machines.solve`.  squared: one
    (n+1)×(n+1) solve on K's device.
    logistic: damped Newton on K's device.  Cost: O(n²) per active-set step plus O(|F|³) per face solve
    (F = free coordinates); squared O(n³); logistic O(n³) per Newton step.
    Accuracy (float64), measured: relative duality gap ≤ 1e-15 and KKT residual ≤ 2e-14 on the MNIST 0/1 NTK
    (n = 1700, λ = 0.064 and 1.7; 0.1 s and 0.35 s on a shared 2-core machine, without the PSD check), equal to face
    enumeration (n ≤ 6) to 1e-11 and to libsvm on float32-exact Grams to 1e-11 (tests/test_kkt.py).  The floor is
    the rounding of Kα (~ n·eps·‖K‖∞·max|α| per entry): at C = 1/λ = 256 (random Grams, n ≤ 120) the gap was up
    to ~2e-12 relative, at C = 1e5 (all 2128 embedded digits with 5 % of the labels flipped: 918 free SVs) 3e-11
    (4.7 s; λ = 0.01: 3.9 s, gap 4e-14; λ ≥ 1: ≤ 1.6 s, gap ≤ 2e-16).
    float32: as :func:`ntkref.machines.solve`: every loss is solved in float64,
    α is rounded to float32, and the gap, KKT residual and ``converged`` are those of the float32 α, evaluated in
    float64 on an exact float64 copy of K (the warning of a solve that only the rounding keeps above tol says so).
    """
    caller = "kkt.fit_with_intercept"
    if lam is None:
        raise InvalidParameterError(f"The 'lam' parameter of {caller} is required (a real number > 0).")
    info = {}
    K, y, loss, lam, lam_sum, xp = _duality.prepare(K, y, loss, lam, reduction, caller, psd=check_psd,
                                                    allow_zero=False, info=info)
    mu = info.get("psd_margin", math.inf)  # what the PSD test proved: the certificate accounts for it
    n = K.shape[0]
    dev = device_of(K)
    tol = (1e-10 if K.dtype == xp.float64 else 1e-4) if tol is None else check_real(
        tol, "tol", caller=caller, low=0.0, closed="right")
    div = n if reduction == "mean" else 1
    if loss.name == "squared":
        try:  # in float64 on exact copies, as the other losses (a float32 solve was singular at small λ)
            alpha_w, b = _squared_with_intercept(*_duality.as_float64(xp, K, y), lam_sum, xp)
        except Exception as exc:  # an exactly singular system (LinAlgError of the namespace)
            raise InvalidParameterError(
                f"{caller}: the system [[K + (lam/2)·I, 1], [1ᵀ, 0]] is singular in float64 (lam = {lam!r}); use a "
                "larger lam.") from exc
        interval, its, exact = (b, b), 0, True
    elif loss.name in _duality.QP_LOSSES:
        max_iter = max(1000, 10 * n) if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
        K_h = np.asarray(to_numpy(K), dtype=np.float64)  # the explicit host step (module docstring)
        y_h = np.asarray(to_numpy(y), dtype=np.float64)
        Q, c, e, lo, hi, to_alpha = _qp_data(K_h, y_h, loss, lam_sum)
        try:
            with single_threaded_blas(np):  # small sequential steps: BLAS threads only add contention
                z, b, interval, its, exact = _eq_box_qp(Q, c, e, lo, hi, max_iter)
        except _boxqp.UnboundedDirection as exc:  # the squared hinge, lam/2 below -λ_min(K) + rounding
            delta = n * _gram.machine_eps(K.dtype, xp) * float(np.linalg.norm(K_h))
            raise _duality.unbounded_dual_error(caller, exc, lam, lam_sum, n, reduction, delta) from None
        alpha_w = xp.asarray(to_alpha(z), dtype=xp.float64, device=dev)
    else:  # logistic
        if bool(xp.all(y == y[0])):
            raise InvalidParameterError(
                f"The 'y' parameter of {caller} has a single class: logistic regression with an intercept has no "
                "minimiser then (P decreases to its infimum 0 as b -> +-inf). Use labels of both classes."
            )
        max_iter = 200 if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
        alpha_w, b, its, exact = _logistic_with_intercept(*_duality.as_float64(xp, K, y), loss, lam_sum, tol,
                                                          max_iter, xp)
        interval = (b, b)
    alpha = xp.astype(alpha_w, K.dtype)  # solved in float64: α rounded to K's dtype
    # the certificate of the α returned, in float64 whatever K's dtype (as machines.solve's)
    Kc, yc, ac = _duality.as_float64(xp, K, y, alpha)

    def certificate(a):
        g = Kc @ a
        return (g, _primal(a, g, b, yc, loss, lam_sum, xp), _intercept_dual(a, g, b, Kc, yc, loss, lam_sum, xp),
                _intercept_kkt(a, g, b, Kc, yc, loss, lam_sum, xp))

    g, primal, dual, kkt = certificate(ac)
    _duality.check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha)
    if not math.isfinite(b):
        raise InvalidParameterError(f"{caller}: the intercept is not finite (b = {b}); rescale the problem.")
    # the proven certificate of (α, b) (compensated Kα, the gap as a sum of Fenchel–Young terms at f = Kα + b)
    # duality_gap: the computed P − D of kkt.duality_gap (the projection duals) where it lies in [0, proven bound],
    # else the Fenchel–Young sum (P − D in floats carries the rounding of P, ~u·P, and can be < 0); either way
    # max(gap, 0) + gap_rounding ≥ the proven bound
    g, primal, center, upper, proven = _proven_certificate(Kc, ac, b, yc, loss, lam_sum, tol, xp, psd_margin=mu)
    gap = primal - dual if 0.0 <= primal - dual <= upper else min(max(center, 0.0), upper)
    gap_rounding = _proof.rounding_of(gap, upper)
    no_certificate = math.isinf(upper) and math.isfinite(primal) and math.isfinite(gap)
    if no_certificate:  # no exactly feasible dual point near α's (no room in dom l* to restore Σα′ = 0): no proof
        warnings.warn(
            f"{caller}: no proven certificate of the {loss.name} solution could be built (the dual point of α has no "
            "room in the conjugate's domain to satisfy Σα′ = 0 exactly); converged is False and gap_rounding is "
            "inf (no bound).", ConvergenceWarning, stacklevel=2)
    elif not math.isfinite(gap_rounding):  # finite or error (a NaN never reads as converged)
        raise _duality.overflow_error(caller, "proven bound of the duality gap", K, y, lam, xp)
    dual = primal - gap
    conv = bool(exact) and proven
    if not conv:
        rounding = ""
        if K.dtype != xp.float64:
            _, p_w, d_w, _ = certificate(alpha_w)
            if bool(exact) and p_w - d_w <= tol * max(1.0, p_w):
                rounding = (f" That is the gap of α rounded to K's dtype {K.dtype}: the float64 solution it was "
                            f"rounded from has gap {p_w - d_w:.3g}. Pass K in float64 for it, or a larger tol.")
        warnings.warn(
            f"{caller}: the {loss.name} solver stopped with duality gap {gap:.3g} (+ its proven rounding "
            f"bound {gap_rounding:.3g}; tol·max(1, P) = {tol * max(1.0, primal):.3g}) after {its} "
            f"iterations.{rounding}",
            ConvergenceWarning, stacklevel=2,
        )
    return InterceptMachine(
        alpha_=alpha, loss=loss, lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=gap / div,
        kkt_residual=kkt, n_iter=its, converged=conv, rkhs_norm_=math.sqrt(max(float(xp.sum(ac * g)), 0.0)),
        train_output_=xp.astype(g + b, K.dtype), intercept_=float(b),
        intercept_interval_=(float(interval[0]), float(interval[1])), gap_rounding=gap_rounding / div,
        psd_margin=mu,
    )

# These are public in ntkref.kkt, a floor above this module; machines.solve(fit_intercept=True) returns an
# InterceptMachine without importing kkt, so the public path is set here, where they are defined.
for _public in (InterceptMachine, fit_with_intercept, kkt_residual, duality_gap):
    _public.__module__ = "ntkref.kkt"
del _public
