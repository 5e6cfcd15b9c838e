"""Exact active-set solver of box-constrained convex QPs, the duals of the kernel machines of seed 000 eq. (7).

min_a ½aᵀQa − bᵀa + ε‖a‖₁ over lo ≤ a ≤ hi (Q PSD): :func:`active_set_qp` on one working set,
:func:`chunked_qp` over all n coordinates by working sets with shrinking, stopping on the caller's duality gap.
Everything runs in Q's namespace on Q's device; the decisions are batched host reads
(:func:`ntkref.machines._gram.read`).  :mod:`ntkref.machines._duality` builds the QPs (bounds, gaps) and the
certificates, :mod:`ntkref.machines._solve` calls :func:`chunked_qp`.  A descent ray that no bound blocks, along
which Q is not positive definite to working precision (possible only for the squared hinge, whose box is unbounded,
when λ/2 is not above −λ_min(K) plus rounding), raises :class:`UnboundedDirection` with dᵀQd/dᵀd ≥ λ_min(Q); the
callers re-raise it naming ``lam`` (``ntkref.machines._duality.unbounded_dual_error``).

:func:`active_set_qp` and :func:`soft` (the ε-soft-thresholding of the prox step) are also used by the Dask engine
(ntkref/_engines/dask/_machines.py), which runs the same chunking on gathered columns.
"""
from __future__ import annotations

import math

import array_api_compat

from .._lib import compat as _compat
from .._lib.backend import device_of
from .._lib.validation import InvalidParameterError
from . import _gram


class UnboundedDirection(InvalidParameterError):
    """The box QP is unbounded below, to working precision, along a feasible ray a + t·d (t → ∞, no bound in its
    way) on which Q is not positive definite: ``rayleigh`` = dᵀQd/dᵀd ≥ λ_min(Q) (computed), ``m`` the free
    coordinates d lives on.  The kernel machines' QPs meet it only for the squared hinge (its box is unbounded)
    when λ/2 is not above −λ_min(K) plus the rounding of Q's eigenvalues; their callers re-raise it as an error
    naming ``lam`` (:func:`ntkref.machines._duality.unbounded_dual_error`)."""

    def __init__(self, rayleigh, m, dtype_eps, qmax):
        self.rayleigh, self.m, self.dtype_eps, self.qmax = rayleigh, m, dtype_eps, qmax
        super().__init__(
            f"The dual box QP is unbounded below along a feasible direction d on which its matrix Q is not "
            f"positive definite to working precision (dᵀQd/dᵀd = {rayleigh:.3g} on {m} free coordinates, "
            f"max Q_ii = {qmax:.3g}).")


def unbounded_direction(Qff, d, dtype_eps, qmax, xp):
    """The :class:`UnboundedDirection` of a face direction d of Q_FF along which no bound blocks the step."""
    num, den = _gram.read(xp, xp.sum(d * (Qff @ d)), xp.sum(d * d))
    return UnboundedDirection(num / den if den > 0 else 0.0, Qff.shape[0], dtype_eps, qmax)

# --------------------------------------------------------------------------- array helpers


def _scatter(mask, values, xp):
    """Vector v with v[mask] = values (in order) and 0 elsewhere, without index assignment."""
    if values.shape[0] == 0:
        return xp.zeros(mask.shape, dtype=values.dtype, device=device_of(values))
    pos = xp.cumulative_sum(xp.astype(mask, xp.int64)) - 1
    pos = xp.clip(pos, 0, values.shape[0] - 1)
    return xp.where(mask, xp.take(values, pos), xp.zeros_like(xp.take(values, pos)))


def _scatter_idx(idx, values, n, xp):
    """Vector v of length n with v[idx] = values and 0 elsewhere (``idx`` ascending, as ``nonzero`` returns).

    NumPy, CuPy and PyTorch assign in place; other namespaces go through the standard
    (``searchsorted`` of each position in ``idx``), O(n log |idx|).
    """
    dev = device_of(values)
    out = xp.zeros((n,), dtype=values.dtype, device=dev)
    k = idx.shape[0]
    if k == 0:
        return out
    if array_api_compat.is_numpy_namespace(xp) or array_api_compat.is_cupy_namespace(xp) or \
            array_api_compat.is_torch_namespace(xp):
        out[idx] = values
        return out
    pos = xp.arange(n, device=dev)
    j = xp.clip(xp.searchsorted(idx, xp.astype(pos, idx.dtype)), 0, k - 1)
    return xp.where(xp.take(idx, j) == xp.astype(pos, idx.dtype), xp.take(values, j), out)


def soft(v, thr, xp):
    return xp.sign(v) * xp.maximum(xp.abs(v) - thr, 0.0)


def solve_vec(A, b, xp):
    x = _compat.lu_solve_small(A, b, xp)  # NumPy: LAPACK gesv directly (the wrappers cost more than the solve)
    return x if x is not None else xp.linalg.solve(A, b[:, None])[:, 0]


# --------------------------------------------------------------------------- box-QP solver



def _qp_obj(a, Qa, b, eps, xp):
    """q(a) = ½aᵀQa − bᵀa + ε‖a‖₁ given Qa, as a 0-d device array (columns: one value per column)."""
    val = xp.sum(a * (0.5 * Qa - b), axis=0)
    return val + eps * xp.sum(xp.abs(a), axis=0) if eps else val


def _face_direction(Qff, r, xp, qmax=None):
    """Direction d on the current face: Q_FF d = r, or, if Q_FF is singular and r has a
    component in its null space, that component (a direction of linear descent).

    Returns (d, is_newton): is_newton says the full step d reaches the face minimiser.
    One host read when the LU solve is accepted (its residual, scale and rᵀd together).  ``qmax``: max|Q_FF|
    when the caller knows it cheaply (for a PSD Q the largest diagonal entry of Q_FF: O(|F|), not O(|F|²)).
    """
    m = Qff.shape[0]
    try:  # exact solve first (LU, backward stable)
        d = solve_vec(Qff, r, xp)
        res, qmax, dmax, rmax, rd = _gram.read(xp, xp.max(xp.abs(Qff @ d - r)),
                                               xp.max(xp.abs(Qff)) if qmax is None else qmax,
                                               xp.max(xp.abs(d)), xp.max(xp.abs(r)), xp.sum(r * d))
        # NaN (CuPy's singular solve) fails every comparison below
        if res <= 1e3 * m * _gram.machine_eps(Qff.dtype, xp) * (qmax * dmax + rmax) and rd > 0:
            return d, True
    except Exception:  # numpy/array_api_strict LinAlgError for an exactly singular Q_FF
        pass
    w, V = _compat.eigh(Qff, xp)
    c = xp.matrix_transpose(V) @ r
    wmax, = _gram.read(xp, xp.max(xp.abs(w)))
    keep = w > m * _gram.machine_eps(Qff.dtype, xp) * wmax
    null = xp.where(keep, 0.0, c)
    nn, nc = _gram.read(xp, xp.linalg.vector_norm(null), xp.linalg.vector_norm(c))
    if nn > 1e-8 * nc:
        return V @ null, False  # Q_FF·d = 0 and rᵀd = ‖P_null r‖² > 0: q decreases linearly
    return V @ xp.where(keep, c / xp.where(keep, w, 1.0), 0.0), True


_LINE_STEPS = 8  # projected search along the arc P(a + t·d), t = 1, 1/2, …, 1/128, in one batch


def active_set_qp(Q, b, lo, hi, eps, a, max_iter, xp, tight=False):
    """Minimise q(a) = ½aᵀQa − bᵀa + ε‖a‖₁ over lo ≤ a ≤ hi (Q PSD), from feasible ``a``.

    A primal active-set method.  Coordinates are *fixed* at a breakpoint
    (lo, hi, or 0 when ε > 0) or *free* inside a piece where q is quadratic
    ([lo, hi] if ε = 0; [0, hi] or [lo, 0] by the sign s if ε > 0).  Each
    iteration moves the free coordinates towards the face minimiser
    (Q_FF d = −(∇q)_F, or a null-space descent direction of a singular Q_FF):
    the projected full step is taken if it lowers q (the eight trial points
    P(a + t·d), t = 1, …, 1/128, are evaluated as one matrix product, so several
    bounds may become active at once, as in gradient-projection methods),
    otherwise the longest feasible step (ratio test), fixing the blocking
    coordinate.  At a face minimiser the fixed coordinates whose one-sided slope
    is negative (KKT violators) are released, the worst ``max(16, |F|)`` at a
    time.  q decreases monotonically; with no violator left, a satisfies the KKT
    conditions up to rounding (the face equations are solved exactly).

    A slope counts as a violation above a rounding threshold: 1e3·m·eps·(L·max|a| + max|b| + ε)
    (L = max row sum of |Q|), safe against the drift of the incrementally updated Qa; with ``tight``, the
    per-coordinate 16·√m·eps·((|Q||a|)ᵢ + |bᵢ| + ε) on a freshly computed Qa, orders of magnitude smaller
    when |a| is large on few coordinates (the caller's refinement, :func:`chunked_qp`).

    Everything runs in Q's namespace on Q's device; the decisions are a few batched host reads
    per iteration (:func:`ntkref.machines._gram.read`).  Returns (a, iterations, exact_stop).
    """
    m = Q.shape[0]
    dtype_eps = _gram.machine_eps(Q.dtype, xp)
    dev = device_of(Q)
    zero = xp.zeros_like(b)
    if eps:
        free = (a != 0) & (a != lo) & (a != hi)
        s = xp.where(free, xp.sign(a), zero)
    else:
        free = (a != lo) & (a != hi)
        s = zero
    Qa = Q @ a
    L, bmax = _gram.read(xp, xp.max(xp.sum(xp.abs(Q), axis=1)), xp.max(xp.abs(b)))
    qdiag = xp.linalg.diagonal(Q)  # for PSD Q, max|Q_FF| = max over F of Q_ii (|Q_ij| ≤ √(Q_ii Q_jj))
    steps = xp.asarray([0.5**j for j in range(_LINE_STEPS)], dtype=Q.dtype, device=dev)
    big = xp.asarray(math.inf, dtype=Q.dtype, device=dev)
    singular_seen = False
    for it in range(1, max_iter + 1):
        plo = xp.where(s > 0, 0.0, lo) if eps else lo  # bounds of each free coordinate's piece
        phi = xp.where(s < 0, 0.0, hi) if eps else hi
        idx = xp.nonzero(free)[0]
        at_min = idx.shape[0] == 0
        if not at_min:
            G = Qa - b + eps * s if eps else Qa - b  # gradient of q on the current pieces
            Qff = _compat.submatrix(Q, idx, xp)
            d_f, is_newton = _face_direction(Qff, -xp.take(G, idx), xp, xp.max(xp.take(qdiag, idx)))
            singular_seen = singular_seen or not is_newton
            d = _scatter_idx(idx, d_f, m, xp)
            target = a + d
            proj = xp.minimum(xp.maximum(target, plo), phi)
            moved, clipped = _gram.read(xp, xp.any(d != 0), xp.any(proj != target))
            if not moved:
                at_min = True
            elif is_newton and not clipped:
                a, Qa = target, Qa + Q @ d  # the face minimiser
                at_min = True
            else:
                q0 = _qp_obj(a, Qa, b, eps, xp)
                accepted = False
                if is_newton:
                    P = xp.minimum(xp.maximum(a[:, None] + d[:, None] * steps[None, :], plo[:, None]), phi[:, None])
                    QP = Q @ P
                    lower = xp.astype(_qp_obj(P, QP, b[:, None], eps, xp) < q0, xp.int32)
                    # the first accepted step (argmax returns the first maximum), if any: one host read
                    j, accepted = _gram.read(xp, xp.argmax(lower), xp.max(lower))
                    j = int(j)
                if accepted:
                    proj, target = P[:, j], a + steps[j] * d
                    hit = free & (proj != target)
                    a, Qa = proj, QP[:, j]
                else:  # ratio test: longest step along d inside the pieces
                    room = xp.where(d > 0, phi - a, xp.where(d < 0, plo - a, big))
                    ratio = xp.where(d != 0, room / xp.where(d != 0, d, 1.0), big)
                    t, = _gram.read(xp, xp.min(ratio))
                    if is_newton:
                        t = min(t, 1.0)
                    if not math.isfinite(t):  # a descent ray no bound blocks, Q_FF singular or indefinite along it
                        qmax, = _gram.read(xp, xp.max(xp.take(qdiag, idx)))
                        raise unbounded_direction(Qff, d_f, dtype_eps, qmax, xp)
                    a = xp.minimum(xp.maximum(a + t * d, plo), phi)
                    hit = free & (ratio <= t)
                    a = xp.where(hit, xp.where(d > 0, phi, plo), a)
                    Qa = Q @ a
                # coordinates that reached a bound of their piece become fixed
                free = free & ~hit
                s = xp.where(free, s, 0.0)
                continue
        # face minimiser: release fixed coordinates with a negative one-sided slope
        if tight:
            Qa = Q @ a  # no drift from the updates
        G0 = Qa - b
        if eps:  # one-sided derivatives of ε|a| (a = 0: +ε either way)
            sa = xp.sign(a)
            up = G0 + eps * xp.where(a != 0, sa, 1.0)  # slope of q when increasing a_i
            down = -G0 - eps * xp.where(a != 0, sa, -1.0)  # slope when decreasing a_i
        else:
            up, down = G0, -G0
        up = xp.where(free | (a >= hi), 0.0, up)
        down = xp.where(free | (a <= lo), 0.0, down)
        if tight:  # (|Q||a|)ᵢ from the support's columns only
            sv = xp.nonzero(a != 0)[0]
            absQa = xp.abs(xp.take(Q, sv, axis=1)) @ xp.abs(xp.take(a, sv))
            thr = 16 * math.sqrt(m) * dtype_eps * (absQa + xp.abs(b) + eps)
        else:
            thr = 1e3 * m * dtype_eps * (L * xp.max(xp.abs(a)) + bmax + eps)
        viol = xp.where(free, 0.0, xp.maximum(-up, -down))
        n_viol, = _gram.read(xp, xp.sum(xp.astype(viol > thr, xp.int64)))
        if n_viol == 0:
            return a, it, True
        # release many at once while the face systems are nonsingular (few SVs: few rounds);
        # one at a time once Q_FF was singular (low-rank K), as the classical active-set method
        k = 1 if singular_seen else min(int(n_viol), max(16, int(idx.shape[0]), m // 8))
        cut = xp.sort(viol)[m - k]
        release = (viol >= cut) & (viol > thr)
        free = free | release
        if eps:  # a released coordinate stays in the piece it sits at (0 only: the descent side)
            new_sign = xp.where(-up >= -down, xp.ones_like(up), -xp.ones_like(up))
            s = xp.where(release, xp.where(a > 0, 1.0, xp.where(a < 0, -1.0, new_sign)), s)
    return a, max_iter, False


def support_matvec(K, alpha, xp, absolute=False):
    """g = Kα from the rows of the support S of α only (|S|·n entries read; K is symmetric), in α's dtype;
    ``absolute``: |K||α| instead (the scale of the rounding of Kα).

    The rows of a K held in a lower precision than α are converted (exactly) before the product.
    """
    n = K.shape[0]
    sv = xp.nonzero(alpha != 0)[0]
    if sv.shape[0] == n:
        rows, a = K, alpha
    else:
        rows, a = xp.take(K, sv, axis=0), xp.take(alpha, sv)
    if rows.dtype != alpha.dtype:
        rows = xp.astype(rows, alpha.dtype)
    return xp.abs(a) @ xp.abs(rows) if absolute else a @ rows


def chunked_qp(K, y, lo, hi, eps, shift, gap_fn, tol, max_iter, xp, alpha0=None, chunk=None):
    """Box QP over all n coordinates: exact active-set solves on a working set W (chunking with shrinking).

    Coordinates outside W are held at 0 (always feasible).  Each round solves the QP on W
    exactly (:func:`active_set_qp`, warm-started from the previous α and its free set), computes
    g = Kα from the rows of the support only (|S|·n, not n²), evaluates the duality gap of the full
    problem, and tests the optimality of αᵢ = 0 outside W with one prox step (KKT).  The next W is
    W, plus the worst violators outside W (at least ``chunk``, at most |W| of them); once |W| exceeds
    twice |S| + ``chunk`` (S the support), the zeros of W are dropped first (shrinking).  Each round that
    adds a violator lowers the objective strictly (a violator is a descent direction), so no working set repeats and the loop ends; the gap
    certifies the result.  If W's solve passes its (coarse, drift-safe) rounding threshold with no violator
    outside W but the gap is still above tol, the solves continue with the tight per-coordinate threshold of
    :func:`active_set_qp` (measured: a rank-20 linear kernel, n = 500, ε-insensitive, λ = 0.001 stopped at
    relative gap 8e-7 with the coarse one, and reaches 1e-12 after 2 more iterations with the tight one).
    All matrix work is in K's namespace on K's device; the host reads O(1) scalars and the working-set size
    per round.  Returns (alpha, g, total inner iterations, converged).

    Precision: the arithmetic runs in the dtype of ``y`` (and of ``lo``, ``hi``, ``alpha0``).  A caller with a
    float32 K passes them in float64: the working-set matrices and the support rows are converted exactly, and
    the method solves the QP of the float32 K in float64.  (In float32 itself the face solves of an
    ill-conditioned Q_FF lose every digit and the KKT test cannot tell a violator from rounding: the solver
    stopped far from the minimiser.)
    """
    n = K.shape[0]
    dev = device_of(K)
    zero = xp.zeros_like(y)
    tau = 1.0 / max(_gram.read(xp, xp.max(xp.linalg.diagonal(K)))[0] + shift, 1e-300)
    chunk = chunk or min(n, 64)  # measured at n = 1 700: 12% faster than 128; no difference at n = 6 000
    if alpha0 is None or not _gram.read(xp, xp.any(alpha0 != 0))[0]:
        alpha = zero
        inW = xp.arange(n, device=dev) % max(n // chunk, 1) == 0 if chunk < n else xp.ones(n, dtype=xp.bool, device=dev)
    else:
        alpha = alpha0
        inW = alpha != 0
    total = 0
    tight = False
    for _ in range(n + 2):
        idx = xp.nonzero(inW)[0]
        m = idx.shape[0]
        Qw = _compat.submatrix(K, idx, xp) if m < n else K
        if Qw.dtype != y.dtype:  # a float32 K: the arithmetic in y's precision (float64), see support_matvec
            Qw = xp.astype(Qw, y.dtype)
        if shift:
            Qw = Qw + shift * _gram.eye(m, Qw, xp)
        a, its, _exact = active_set_qp(Qw, xp.take(y, idx), xp.take(lo, idx), xp.take(hi, idx), eps,
                                       xp.take(alpha, idx), max_iter, xp, tight=tight)
        total += its
        alpha = _scatter_idx(idx, a, n, xp)
        g = support_matvec(K, alpha, xp)
        primal, dual = gap_fn(alpha, g)
        if primal - dual <= tol * max(1.0, primal):
            return alpha, g, total, True
        n_viol = 0
        if m < n:
            # optimality of αᵢ = 0 for i outside W: the prox step from 0 must stay at 0
            step = -tau * (g + shift * alpha - y)
            viol = xp.abs(xp.minimum(xp.maximum(soft(step, tau * eps, xp) if eps else step, lo), hi))
            out = xp.where(inW, 0.0, viol)
            n_viol, = _gram.read(xp, xp.sum(xp.astype(out > 0, xp.int64)))
        if n_viol == 0:
            if tight:
                return alpha, g, total, False
            # W's solve passed its rounding threshold but the gap is above tol: violations below that
            # threshold remain (|α| ~ 1/λ makes it coarse).  Refine on the same W with the tight one.
            tight = True
            continue
        k = int(min(n_viol, max(chunk, m)))
        thr = xp.sort(out)[n - k]
        # shrinking: once W is large against the support, its zeros (optimal at 0) leave it
        n_sv, = _gram.read(xp, xp.sum(xp.astype(alpha != 0, xp.int64)))
        keep = (alpha != 0) if m > 2 * (n_sv + chunk) else inW
        inW = keep | ((out >= thr) & (out > 0))
    return alpha, g, total, False
