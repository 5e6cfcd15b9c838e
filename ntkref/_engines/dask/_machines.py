r"""Kernel machines of seed 000 eq. (7) on a Dask Gram: every loss, with the certificates of :mod:`ntkref.machines`.

``machines.solve(K, ...)`` with a square Dask K comes here (through the ``solve`` seam of ``ntkref._lib.dispatch``).  K is used only
through its blocks — one graph per operation, computed on the active scheduler (a ``dask.distributed`` client if
one is active) — and the vectors (n floats, float64) live on the client:

- **Validation** (:func:`check_gram`): one graph over the blocks on and above the diagonal (block (i, j) with its
  mirror (j, i)) gives finiteness, max|K|, max|K − Kᵀ| and ‖K‖_F, the same tests as ``ntkref.machines._gram.check_gram``
  (symmetric to √eps·max|K|; a K within that is symmetrised lazily, (K + Kᵀ)/2).  ``check_psd``: True, "auto" or
  "lanczos" run the one-sided Lanczos test of ``ntkref.machines._gram.refuse_indefinite`` (40 products :func:`ntkref._engines.dask._graphs.symmetric_matvec`;
  a refusal is a proof of a negative eigenvalue below −n·eps·‖K‖_F, acceptance the probabilistic bound stated
  there); "cholesky" is refused (it needs the whole K in one process); False skips it.
- **squared**: kernel ridge regression by conjugate gradients (:func:`ntkref.krr.solve_cg`).
- **hinge, squared_hinge, epsilon_insensitive** (:func:`_working_set_qp`): the dual box QP of ``machines`` solved
  by the same chunking as ``ntkref.machines._boxqp.chunked_qp`` — the exact active-set method
  ``ntkref.machines._boxqp.active_set_qp`` on Q_WW = K_WW (+ (λ/2)I for the squared hinge) of a working set W,
  coordinates outside W held at 0, W grown by the worst violators of the optimality of αᵢ = 0 and shrunk to the
  support — with the columns K[:, W] gathered from
  the cluster (:func:`ntkref._engines.dask._graphs.columns`, only the columns not held already).  α is supported on W, so
  g = Kα = K[:, W]·α_W and the duality gap and the optimality test over all n need no other entry of K.  Stops on
  the relative duality gap of ``machines.solve`` (``_duality.primal_from_g``/``dual_from_g``).  Memory on the client:
  n·|W| float64 (the gathered columns; up to about three times that transiently while the held columns are
  updated, the old set, the new columns and their concatenation alive together: measured peak 70.7 MB at
  n = 1 500, |W| = 1 499 with the synchronous scheduler, where n·|W| is 18 MB and K itself, on the client there,
  18 MB) + |W|² (Q_WW; twice for the squared hinge's shifted copy) + the active-set
  solver's face matrices (|F|², F ⊂ W the free coordinates) and 8·|W| trial points; |W| ≤ n, and once
  |W| > 2(|S| + chunk) (S the support) W is shrunk to S plus at most |W| violators.  ``max_working_set`` and
  ``columns_gathered`` in the result report it.  With few support vectors |W| ≪ n (tests: 92 of 600 columns for
  12 support vectors); with many (e.g. 782 of 4 000 at a small C) W grows to nearly n and the client holds nearly
  the whole K in float64 — the working-set method bounds memory only through the support.
- **hard margin** (:func:`hard_margin_svm`): ``machines.hard_margin_svm``'s soft-margin path, each C by
  :func:`_working_set_qp` warm-started from the previous α, the gathered columns kept from one C to the next.
- **logistic** (:func:`_newton_cg`): the damped Newton method of ``machines._solve._logistic_newton`` (Armijo search on
  the primal, the same duality-gap test, one more "polishing" Newton step once it passes) with the Newton system
  (λI + DK)Δ = −r (r = λα + l′(Kα), ∇_α P = Kr, D = diag l″(Kα)) solved inexactly by conjugate gradients in the
  inner product ⟨u, v⟩_K = uᵀKv (:func:`_newton_step_cg`).  There λI + DK is self-adjoint positive: this is CG
  on the primal Newton system (λI + ΦDΦᵀ)Δβ = −∇_β P in β-space, one product K·v per CG step.  Every CG iterate
  is a descent direction (slope rᵀKΔ < 0); the forcing term is min(½, √(‖∇_β P‖/‖∇_β P₀‖)) (superlinear
  convergence), 1e-12 for the polishing step.  (Measured on an n = 400 NTK Gram: the same number of Newton steps
  as the dense solver, λ = 0.1: 7 vs 6, λ = 0.001: 10 vs 10, with 91 and 291 products; α equal to 4e-12 and
  2e-13 relative.  CG on the Euclidean λI + D^{1/2}KD^{1/2} instead measures the residual in the wrong norm and
  stalled at λ = 0.001.)

Certificates are proven as ``machines.solve``'s (``ntkref.machines._proof``): g = Kα compensated — from the
gathered columns K[:, W] for the QP losses and the hard margin, block by block (:func:`compensated_matvec`,
one more pass over K) for logistic, whose dual point is −l′(g)/λ with (λ/2)dᵀKd bounded through a second
compensated product — so ``gap_rounding`` is a proven bound and ``converged`` a theorem ASSUMING K ⪰ 0 (which
the Lanczos test does not prove: ``psd_margin`` is inf, and the certificate takes μ = 0).  The squared loss goes to :func:`ntkref.krr.solve_cg`,
whose CG certificate is NOT proven (its docstring).

Results: a :class:`DaskKernelMachine` (a ``machines.KernelMachine``) whose ``alpha_`` and ``train_output_`` are
Dask arrays chunked like K's rows (as :func:`ntkref.krr.solve_cg` returns them), computed in float64 whatever K's
dtype (the default ``tol`` is therefore 1e-10).  Finite or error: a non-finite K entry, bad labels, or a
solution whose objective overflows raise :class:`~ntkref._lib.validation.InvalidParameterError` naming the input.

Persist K (``client.persist``) or store it (:func:`ntkref.kernels.store_gram`) first: a lazy Gram is recomputed
at every product and every gather.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import array_api_compat

from ...dynamics import _discrete, _trajectory
from ... import machines as _m
from ...machines import _boxqp, _duality, _gram, _proof, _solve
from ..._lib.backend import is_array, to_numpy
from ..._lib.compat import single_threaded_blas
from ..._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ...krr import solve_cg
from . import _graphs

__all__ = ["DaskGram", "DaskKernelMachine", "solve", "hard_margin_svm", "subgradient_descent", "check_gram", "psd_test",
           "refuse_checked_gram", "refuse_gradient_flow"]

_CALLER = "machines.solve"


# -------------------------------------------------------------------- the Gram as a CG operator


class DaskGram:
    """A square Dask Gram: vectors are NumPy float64 on the client, products are graphs of block tasks."""

    def __init__(self, K):
        self.K = _graphs._check_square(K, "krr.solve_cg")
        self.xp = array_api_compat.array_namespace(__import__("numpy").zeros(0))
        self.n = K.shape[0]
        self.dtype = self.xp.float64

    def vector(self, v):
        import numpy as np

        return np.asarray(to_numpy(v.compute() if _graphs.is_dask(v) else v), dtype=np.float64)

    def matvec(self, v):
        return _graphs.symmetric_matvec(self.K, v)

    def diagonal(self):
        return _graphs.diagonal(self.K)

    def columns(self, idx):
        return _graphs.columns(self.K, idx)

    def result(self, v):
        return _graphs._da().from_array(v, chunks=(self.K.chunks[0],))

    def psd_test(self, check_psd, caller):
        """``krr.solve_cg``'s ``check_psd`` on this K (:func:`_check_psd_option`): the Lanczos test of
        :func:`psd_test` after the one validating pass of :func:`check_gram` (finite, symmetric; a K within the
        tolerance is then used symmetrised, as ``machines.solve`` uses it); "cholesky" is refused; False: nothing."""
        if _check_psd_option(check_psd, caller):
            self.K, _, fro = check_gram(self.K, caller)
            psd_test(self.K, fro, caller)


@dataclass
class DaskKernelMachine(_m.KernelMachine):
    """A :class:`~ntkref.machines.KernelMachine` solved on a Dask Gram (``alpha_``, ``train_output_``: Dask arrays).

    Extra attributes
    ----------------
    n_matvec : int
        Products K·v computed (the logistic Newton-CG; 0 for the working-set QPs).
    max_working_set : int
        Largest working set |W| (QP losses): the client held at most n·|W| gathered entries of K.
    columns_gathered : int
        Columns of K gathered from the cluster in all (a column dropped by shrinking and needed again counts twice).
    distinct_columns : int
        Distinct columns of K ever gathered (< n: K was never gathered whole).
    """

    n_matvec: int = 0
    max_working_set: int = 0
    columns_gathered: int = 0
    distinct_columns: int = 0


def _np():
    import numpy as np

    return np


def _xp():
    return array_api_compat.array_namespace(_np().zeros(0))


# ------------------------------------------------------------------------------------------ validation


def _block_stats(a, b, rows=1024):
    """(finite, max, −min, max|a − bᵀ|, Σa² + Σb²) of an upper block a = K_ij and its mirror b = K_ji (i < j), or
    of a diagonal block (b None: asymmetry against its own transpose); row strips, squares in float64."""
    np = _np()
    a = to_numpy(a)
    b = a if b is None else to_numpy(b)
    top, neg, asym, ss = -math.inf, -math.inf, 0.0, 0.0
    for r in range(0, a.shape[0], rows):
        p, q = a[r:r + rows], b[:, r:r + rows].T
        if p.size == 0:
            continue
        if not (np.isfinite(p).all() and np.isfinite(q).all()):
            return False, math.nan, math.nan, math.nan, math.nan
        p64 = p.astype(np.float64)
        ss += float(np.sum(p64 * p64))
        if b is not a:
            q64 = q.astype(np.float64)
            ss += float(np.sum(q64 * q64))
        top, neg = max(top, float(p.max()), float(q.max())), max(neg, -float(p.min()), -float(q.min()))
        asym = max(asym, float(np.max(np.abs(p64 - q.astype(np.float64)))))
    return True, top, neg, asym, ss


def _check_psd_option(check_psd, caller):
    """The Dask meaning of ``check_psd``: True / "auto" / "lanczos" → True (the Lanczos test), False → False;
    "cholesky" is refused (it needs the whole K in one process)."""
    if _gram.check_psd_option(check_psd, caller) is False:  # None, 0, "yes" ...: refused, never "no test"
        return False
    if check_psd == "cholesky":
        raise InvalidParameterError(
            f"The 'check_psd' parameter of {caller}: 'cholesky' needs the whole K in one process (O(n^3)); on a "
            f"Dask Gram use check_psd='lanczos' (the default True/'auto' selects it) or False."
        )
    return True


def check_gram(K, caller=_CALLER, sym_tol=None):
    """``ntkref.machines._gram.check_gram`` for a square Dask K, without the PSD test: returns (K, max|K|, ‖K‖_F).

    One graph over the blocks on and above the diagonal (each with its mirror); K symmetric within
    ``sym_tol``·max|K| (default √eps, as ``machines``; ``dynamics`` uses 100·eps) is replaced by the lazy (K + Kᵀ)/2.
    """
    import dask

    np = _np()
    K = _graphs._check_square(K, caller)
    n = K.shape[0]
    if n == 0:
        raise InvalidParameterError(f"The 'K' parameter of {caller} must have at least one row.")
    if np.dtype(K.dtype).kind not in "biuf":
        raise InvalidParameterError(f"The 'K' parameter of {caller} must hold real numbers; got dtype {K.dtype}.")
    blocks = K.to_delayed()
    nb = blocks.shape[0]
    stats = dask.compute(*[dask.delayed(_block_stats)(blocks[i, j], None if i == j else blocks[j, i])
                           for i in range(nb) for j in range(i, nb)])
    if not all(s[0] for s in stats):
        raise InvalidParameterError(f"The 'K' parameter of {caller} contains NaN or infinite values.")
    scale = max(max(s[1], s[2]) for s in stats)
    asym = max(s[3] for s in stats)
    fro = math.sqrt(sum(s[4] for s in stats))
    rel = math.sqrt(_eps(K)) if sym_tol is None else sym_tol * _eps(K)
    if asym > rel * scale:
        raise InvalidParameterError(
            f"The 'K' parameter of {caller} must be symmetric: max|K - K^T| = {asym:.3g} exceeds "
            f"{'sqrt(eps)' if sym_tol is None else f'{sym_tol:g}*eps'}*max|K| = {rel * scale:.3g}."
        )
    if asym > 0:
        K = (K + K.T) / 2
    return K, scale, fro


def _eps(K):
    np = _np()
    kind = np.dtype(K.dtype)
    return float(np.finfo(kind if kind.kind == "f" else np.float64).eps)


def psd_test(K, fro, caller=_CALLER):
    """``ntkref.machines._gram.refuse_indefinite(method="lanczos")`` on a Dask K: 40 products :func:`ntkref._engines.dask._graphs.symmetric_matvec`.

    Refuses K (an error naming it) only with a proof: a vector u with uᵀKu/uᵀu < −δ, δ = n·eps·‖K‖_F (eps of K's
    dtype; the products accumulate in float64, so |fl(uᵀKu) − uᵀKu| ≤ δ‖u‖²).  Acceptance is the probabilistic
    statement of ``ntkref.machines._gram.refuse_indefinite``.
    """
    n = K.shape[0]
    if not math.isfinite(fro):
        raise InvalidParameterError(
            f"The 'K' parameter of {caller} is too large: its Frobenius norm cannot be computed in float64 (the "
            "squares of its entries overflow); rescale it."
        )
    if fro == 0:  # K = 0 is PSD
        return
    delta = n * _eps(K) * fro
    _gram.lanczos_test(lambda v: _graphs.symmetric_matvec(K, v), _np().zeros(n), min(n, _gram.LANCZOS_STEPS), delta,
                       _xp(), "K", caller)


def _host_vector(v, name, n, caller):
    np = _np()
    if _graphs.is_dask(v):
        v = v.compute()
    v = check_array(to_numpy(v) if is_array(v) else v, name, caller=caller, ndim=1, xp=_xp())
    v = np.asarray(v, dtype=np.float64)
    if v.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have shape ({n},) to match K; got "
                                    f"{tuple(v.shape)}.")
    return v


def _finite_or_error(kmax, K_dtype, y, lam, primal, dual, kkt, alpha):
    """``machines._duality.check_finite_solution`` with K known by its largest entry (the one number its message uses)."""
    np = _np()
    values = [primal, dual, primal - dual, kkt]
    if not all(math.isfinite(v) for v in values) or not np.all(np.isfinite(alpha)):
        stand_in = np.asarray([kmax], dtype=np.dtype(K_dtype) if np.dtype(K_dtype).kind == "f" else np.float64)
        raise _duality.overflow_error(_CALLER, "objective, duality gap or solution", stand_in, y, lam, _xp())


# ------------------------------------------------------------------------------------- QP losses


class _Columns:
    """The columns K[:, W] of the current working set, gathered from the cluster only where not held already."""

    def __init__(self, K):
        np = _np()
        self.K, self.n = K, K.shape[0]
        self.idx = np.zeros(0, dtype=np.int64)
        self.C = np.zeros((self.n, 0))
        self.gathered, self.seen, self.max_width = 0, np.zeros(self.n, dtype=bool), 0

    def get(self, idx):
        """K[:, idx] (idx ascending); drops the columns outside idx."""
        np = _np()
        new = np.setdiff1d(idx, self.idx, assume_unique=True)
        keep = np.isin(self.idx, idx)
        C, held = self.C[:, keep], self.idx[keep]
        if new.size:
            C = np.concatenate([C, _graphs.columns(self.K, new)], axis=1)
            held = np.concatenate([held, new])
            self.gathered += new.size
            self.seen[new] = True
            order = np.argsort(held, kind="stable")
            C, held = C[:, order], held[order]
        if not np.all(np.isfinite(C)):
            raise InvalidParameterError(f"The 'K' parameter of {_CALLER} contains NaN or infinite values.")
        self.C, self.idx = C, held
        self.max_width = max(self.max_width, held.size)
        return C


def _working_set_qp(cols, y, lo, hi, eps, shift, gap_fn, tol, max_iter, diag_max, chunk, alpha0=None):
    """``ntkref.machines._boxqp.chunked_qp`` with K[:, W] gathered by ``cols`` (module docstring); the same decisions,
    the same warm start from a nonzero ``alpha0`` (W = its support).

    Returns (alpha, g, inner iterations, converged).
    """
    np = _np()
    xp = _xp()
    n = y.shape[0]
    tau = 1.0 / max(diag_max + shift, 1e-300)
    chunk = min(n, chunk or 128)
    if alpha0 is not None and np.any(alpha0 != 0):
        alpha, inW = alpha0, alpha0 != 0
    else:
        alpha = np.zeros(n)
        inW = np.arange(n) % max(n // chunk, 1) == 0 if chunk < n else np.ones(n, dtype=bool)
    total = 0
    g = np.zeros(n)
    tight = False
    for _ in range(n + 2):
        idx = np.nonzero(inW)[0]
        m = idx.size
        C = cols.get(idx)
        Qw = C[idx, :]
        if shift:
            Qw = Qw + shift * np.eye(m)
        a, its, _exact = _boxqp.active_set_qp(Qw, y[idx], lo[idx], hi[idx], eps, alpha[idx], max_iter, xp,
                                               tight=tight)
        total += its
        alpha = np.zeros(n)
        alpha[idx] = a
        g = C @ a  # = K α, α supported on W
        primal, dual = gap_fn(alpha, g)
        if not (math.isfinite(primal) and np.all(np.isfinite(g))):
            return alpha, g, total, False  # overflow: the caller's finiteness check names the input
        if primal - dual <= tol * max(1.0, primal):
            return alpha, g, total, True
        n_viol = 0
        if m < n:
            # optimality of αᵢ = 0 for i outside W: the prox step from 0 must stay at 0
            step = -tau * (g + shift * alpha - y)
            viol = np.abs(np.minimum(np.maximum(_boxqp.soft(step, tau * eps, xp) if eps else step, lo), hi))
            out = np.where(inW, 0.0, viol)
            n_viol = int(np.sum(out > 0))
        if n_viol == 0:
            if tight:
                return alpha, g, total, False
            tight = True  # the refinement of _boxqp.chunked_qp: W again with the tight threshold
            continue
        k = int(min(n_viol, max(chunk, m)))
        thr = np.sort(out)[n - k]
        n_sv = int(np.sum(alpha != 0))
        keep = (alpha != 0) if m > 2 * (n_sv + chunk) else inW
        inW = keep | ((out >= thr) & (out > 0))
    return alpha, g, total, False


def _qp_kkt(alpha, g, y, loss, lam_sum, diag_max):
    """``machines._duality.kkt_residual`` for the QP losses: ‖α − prox(α − τ∇q)‖∞, τ = 1/max Qᵢᵢ."""
    np = _np()
    xp = _xp()
    lo, hi, eps, shift = _duality.qp_bounds(y, loss, lam_sum, xp)
    tau = 1.0 / max(diag_max + shift, 1e-300)
    v = alpha - tau * (g + shift * alpha - y)
    prox = np.minimum(np.maximum(_boxqp.soft(v, tau * eps, xp) if eps else v, lo), hi)
    return float(np.max(np.abs(alpha - prox)))


# --------------------------------------------------------------------------------------- logistic


def _newton_step_cg(matvec, lam_sum, d, r, Kr, rtol, max_steps):
    """Δ ≈ −(λI + DK)⁻¹r by conjugate gradients in the inner product ⟨u, v⟩_K = uᵀKv (module docstring).

    λI + DK is self-adjoint and positive there, and ⟨·,·⟩_K is the β-space inner product (u ↦ Σ uᵢΦ(xᵢ)), so this
    is CG on the Newton system (λI + ΦDΦᵀ)Δβ = −∇_β P of the primal in β, and ‖res‖_K/‖r‖_K is that system's
    relative residual, the measure of the forcing term.  K·res and K·p follow by recurrence from K·r: one product
    K·(D·Kp) per step.  Returns (Δ, steps).
    """
    np = _np()
    x = np.zeros_like(r)
    res, Kres = -r, -Kr
    p, Kp = res.copy(), Kres.copy()
    gamma = float(res @ Kres)
    stop = rtol * rtol * gamma
    steps = 0
    while steps < max_steps and gamma > stop:
        DKp = d * Kp
        KAp = lam_sum * Kp + matvec(DKp)
        steps += 1
        pAp = float(p @ KAp)
        if not pAp > 0:
            break
        t = gamma / pAp
        x = x + t * p
        res = res - t * (lam_sum * p + DKp)
        Kres = Kres - t * KAp
        gamma_new = float(res @ Kres)
        p, Kp = res + (gamma_new / gamma) * p, Kres + (gamma_new / gamma) * Kp
        gamma = gamma_new
    return x, steps


def _newton_cg(matvec, y, loss, lam_sum, tol, max_iter, max_cg):
    """``machines._solve._logistic_newton`` with the Newton systems solved by CG (module docstring).

    Returns (alpha, g, Newton iterations, converged, l′(g), K·l′(g), products).
    """
    np = _np()
    xp = _xp()
    n = y.shape[0]
    alpha, g = np.zeros(n), np.zeros(n)
    polished = False
    grad0 = None
    products = 0
    it = 0
    for it in range(1, max_iter + 1):
        l1 = loss.derivative(g, y)
        Kl1 = matvec(l1)
        products += 1
        primal = _duality.primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _duality.dual_from_g(-l1 / lam_sum, -Kl1 / lam_sum, y, loss, lam_sum, xp)
        done = primal - dual <= tol * max(1.0, primal)
        if done and polished:
            return alpha, g, it - 1, True, l1, Kl1, products
        r = lam_sum * alpha + l1  # ∇_α P = K r
        Kr = lam_sum * g + Kl1
        e = np.exp(-np.abs(y * g))
        d = e / (1 + e) ** 2  # l″(g)
        grad = math.sqrt(max(float(r @ Kr), 0.0))  # ‖∇_β P‖
        grad0 = grad if grad0 is None else grad0
        # forcing term: √ of the relative gradient norm (superlinear), 1e-12 for the polishing step
        rtol = 1e-12 if done else min(0.5, math.sqrt(grad / grad0) if grad0 > 0 else 0.5)
        delta, steps = _newton_step_cg(matvec, lam_sum, d, r, Kr, rtol, max_cg)
        Kd = matvec(delta)
        products += steps + 1
        slope = float(np.sum(r * Kd))  # = ∇_β P · Δβ < 0 for every CG iterate (CG on an SPD system from 0)
        if done:
            polished = True
            if slope < 0:
                a_t, g_t = alpha + delta, g + Kd
                if _duality.primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= primal:
                    alpha, g = a_t, g_t
            continue
        if not slope < 0:
            break  # no descent left: rounding floor
        t = 1.0
        for _ in range(60):
            a_t, g_t = alpha + t * delta, g + t * Kd
            if _duality.primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= primal + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            break
        alpha, g = a_t, g_t
    l1 = loss.derivative(g, y)
    Kl1 = matvec(l1)
    products += 1
    primal = _duality.primal_from_g(alpha, g, y, loss, lam_sum, xp)
    dual = _duality.dual_from_g(-l1 / lam_sum, -Kl1 / lam_sum, y, loss, lam_sum, xp)
    return alpha, g, it, primal - dual <= tol * max(1.0, primal), l1, Kl1, products


# ------------------------------------------------------------------------------------------ the proven certificate


def _block_compensated(block, v):
    """(S, E, bound′) of one block's compensated product K_ij v_j on the host (``ntkref.machines._proof``)."""
    np = _np()
    b = np.asarray(to_numpy(block), dtype=np.float64)
    with single_threaded_blas(array_api_compat.numpy):
        return _proof.compensated_matvec(b.T, v, np, pair=True)


def compensated_matvec(K, v):
    r"""g = Kv (NumPy float64, v on the client) with a proven bound, block by block: each block's Ogita–Rump–Oishi
    product as an unrounded pair Sᵢⱼ + Eᵢⱼ with its bound bᵢⱼ (:func:`ntkref.machines._proof.compensated_matvec`,
    ``pair=True``; one task per block), then per row chunk the J pairs combined: a pairwise tree of TwoSum over
    the Sᵢⱼ (error-free: Σⱼ Sᵢⱼ = S + Σ errors exactly), the Eᵢⱼ and the tree's errors summed in floats, and
    g = fl(S + E) rounded once.  Bound: u|g|/(1 − u) + Σⱼ bᵢⱼ + γ_{2J}·(Σⱼ|Eᵢⱼ| + L·u(1+u)^L·Σⱼ|Sᵢⱼ|) (a tree
    error is ≤ u·|its sum| ≤ u(1+u)^L·Σ|leaves|, L = ⌈log₂ J⌉ levels; the float sum of ≤ 2J terms is within
    γ_{2J} of exact), rounded up — as the dense product's, twice the working precision.  Reads every block of K
    once (K exactly symmetric after ``check_gram``).  Assumptions as the dense product's (IEEE-754 binary64,
    round to nearest)."""
    import dask

    np = _np()
    r_off, c_off = _graphs._offsets(K.chunks[0]), _graphs._offsets(K.chunks[1])
    blocks = K.to_delayed()
    J = len(c_off) - 1
    tasks = [dask.delayed(_block_compensated)(blocks[i][j], v[c_off[j]:c_off[j + 1]])
             for i in range(len(r_off) - 1) for j in range(J)]
    done = dask.compute(*tasks)
    L = max(1, math.ceil(math.log2(J))) if J > 1 else 0
    c_tree = L * _proof.U64 * (1.0 + _proof.U64) ** L * (1.0 + 8 * _proof.U64)
    g_out, b_out = [], []
    for i in range(len(r_off) - 1):
        parts = done[i * J:(i + 1) * J]
        Ss = np.stack([p[0] for p in parts])
        Es = np.stack([p[1] for p in parts])
        S, E_tree = _proof._tree_sum(Ss, np)
        E = np.sum(Es, axis=0) + E_tree
        g = S + E
        B = _proof.up(np.sum(np.stack([p[2] for p in parts]), axis=0), J + 1)
        sum_err = _proof.gamma(2 * J) * (np.sum(np.abs(Es), axis=0) + c_tree * np.sum(np.abs(Ss), axis=0))
        bound = (_proof.U64 / (1.0 - _proof.U64)) * np.abs(g) + B + _proof.up(sum_err, J + 2)
        g_out.append(g)
        b_out.append(_proof.up(bound, 3))
    return np.concatenate(g_out), np.concatenate(b_out)


def _proven(alpha, g, delta, diag, y, loss, lam_sum, tol, K=None):
    """machines._solve._certificate on the client: (g, P, gap, gap_rounding, ok) from a compensated g.  With K
    (logistic): the dual point −l′(g)/λ (t = clip(−y·l′(g))) and the term (λ/2)dᵀKd through one more compensated
    product (d = α − α′ need not be small: a Newton-CG iterate on a singular K keeps null(K) components)."""
    np = _np()
    dual_alpha, quad = None, None
    if K is not None:
        dual_alpha = -loss.derivative(g, y) / lam_sum
        quad = compensated_matvec(K, _proof.dual_difference(alpha, y, loss, lam_sum, np, dual_alpha))
    c = _proof.proven_gap(None, alpha, y, loss, lam_sum, np, g=g, delta=delta, diag=diag, dual_alpha=dual_alpha,
                          quad_product=quad)
    if K is not None:  # the quadratic term is part of this gap (not O(u²) here)
        c["gap"] += 0.5 * lam_sum * float(np.sum(_proof.dual_difference(alpha, y, loss, lam_sum, np, dual_alpha)
                                                * quad[0]))
    gap, upper = c["gap"], c["gap_upper"]
    ok = _proof.certified(upper, c["primal_low"], tol)  # (psd_margin inf: the Lanczos test proves nothing)
    rounding = _proof.rounding_of(gap, upper)  # NaN stays NaN (the callers refuse a non-finite rounding)
    return c["g"], c["primal"], gap, rounding, bool(ok)


# ------------------------------------------------------------------------------------------ public


def solve(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, chunk=None, **cg):
    """``machines.solve`` on a square Dask Gram K (module docstring), seed 000 eq. (7) for every loss.

    ``chunk`` (QP losses): the working set's increment (default min(n, 128), as ``machines``); ``**cg``
    (squared loss only): :func:`ntkref.krr.solve_cg`'s ``preconditioner``, ``rank``, ``seed``.  ``tol``: the
    relative duality gap (default 1e-10; the squared loss: CG's relative residual, default 1e-8).
    """
    np = _np()
    loss = _duality.get_loss(loss, _CALLER)
    check_option(reduction, "reduction", _duality.REDUCTIONS, caller=_CALLER)
    if loss.name != "squared" and cg:
        raise InvalidParameterError(f"{_CALLER} on a Dask Gram: {sorted(cg)} apply to the squared loss only.")
    if loss.name == "squared" and chunk is not None:
        raise InvalidParameterError(f"The 'chunk' parameter of {_CALLER} applies to the QP losses only.")
    psd = _check_psd_option(check_psd, _CALLER)
    K, kmax, fro = check_gram(K, _CALLER)
    n = K.shape[0]
    y = _host_vector(y, "y", n, _CALLER)
    y = np.asarray(loss.check_targets(y, "y", caller=_CALLER), dtype=np.float64)
    lam = _duality.check_lam(lam, loss, _CALLER, allow_zero=False)
    if psd:  # last: the only check costlier than one pass over K
        psd_test(K, fro, _CALLER)
    if loss.name == "squared":
        # K was validated and (check_psd) tested above: solve_cg does not test it again
        return solve_cg(K, y, lam, reduction=reduction, tol=tol, max_iter=max_iter, check_psd=False, **cg)
    lam_sum = lam * n if reduction == "mean" else lam
    tol = 1e-10 if tol is None else check_real(tol, "tol", caller=_CALLER, low=0.0, closed="right")
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", caller=_CALLER, low=1)
    if chunk is not None:
        chunk = check_int(chunk, "chunk", caller=_CALLER, low=1)
    xp = _xp()
    extra = {}
    if loss.name in _duality.QP_LOSSES:
        max_iter = max(1000, 10 * n) if max_iter is None else max_iter
        lo, hi, eps, shift = _duality.qp_bounds(y, loss, lam_sum, xp)
        diag_max = float(np.max(_graphs.diagonal(K)))

        def gap_fn(a, g):
            return (_duality.primal_from_g(a, g, y, loss, lam_sum, xp), _duality.dual_from_g(a, g, y, loss, lam_sum, xp))

        cols = _Columns(K)
        try:
            alpha, g, its, conv = _working_set_qp(cols, y, lo, hi, eps, shift, gap_fn, tol, max_iter, diag_max, chunk)
        except _boxqp.UnboundedDirection as exc:  # the squared hinge, lam/2 below -λ_min(K) + rounding (as machines)
            raise _duality.unbounded_dual_error(_CALLER, exc, lam, lam_sum, n, reduction, n * _eps(K) * fro) from None
        # α is supported on the last working set's columns: g = K[:, W]·α_W, compensated (proven bound)
        g, delta = _proof.compensated_matvec(np.ascontiguousarray(cols.C.T, dtype=np.float64), alpha[cols.idx], np)
        kkt = _qp_kkt(alpha, g, y, loss, lam_sum, diag_max)
        extra = dict(max_working_set=cols.max_width, columns_gathered=cols.gathered,
                     distinct_columns=int(np.sum(cols.seen)))
    else:  # logistic
        max_iter = 200 if max_iter is None else max_iter
        alpha, g, its, conv, l1, Kl1, products = _newton_cg(lambda v: _graphs.symmetric_matvec(K, v), y, loss,
                                                            lam_sum, tol, max_iter, min(2 * n, 1000))
        a_dual, g_dual = -l1 / lam_sum, -Kl1 / lam_sum
        primal = _duality.primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _duality.dual_from_g(a_dual, g_dual, y, loss, lam_sum, xp)
        if conv:  # the representer form α = −l′(g)/λ, as machines.solve returns it, if it is certified too
            # (Newton-CG in the K inner product controls λα + l′ only in the K-norm: on a singular K the
            # representer form can be far from the certified iterate; then the iterate is returned)
            primal_rep = _duality.primal_from_g(a_dual, g_dual, y, loss, lam_sum, xp)
            if primal_rep - dual <= tol * max(1.0, primal_rep):
                alpha, g, primal = a_dual, g_dual, primal_rep
        # g afresh (Newton's g was updated step by step), compensated block by block with a proven bound
        g, delta = compensated_matvec(K, alpha)
        products += 1
        kkt = float(np.max(np.abs(alpha + loss.derivative(g, y) / lam_sum)))
        extra = dict(n_matvec=products)
    # the proven certificate (machines.solve's: the gap as a sum of Fenchel–Young terms at the compensated g)
    g, primal, gap, gap_rounding, proven = _proven(alpha, g, delta, _graphs.diagonal(K), y, loss, lam_sum, tol,
                                                   K if loss.name == "logistic" else None)
    dual = primal - gap
    _finite_or_error(kmax, K.dtype, y, lam, primal, dual, kkt, alpha)
    if not math.isfinite(gap_rounding):
        stand_in = np.asarray([kmax], dtype=np.float64)
        raise _duality.overflow_error(_CALLER, "proven bound of the duality gap", stand_in, y, lam, xp)
    conv = conv and proven
    if not conv:
        warnings.warn(
            f"{_CALLER}: the {loss.name} solver on the Dask Gram stopped with duality gap {gap:.3g} (+ its "
            f"proven rounding bound {gap_rounding:.3g}) > tol·max(1, P) = {tol * max(1.0, primal):.3g} after {its} "
            f"iterations.",
            _m.ConvergenceWarning,
            stacklevel=3,
        )
    div = n if reduction == "mean" else 1
    da = _graphs._da()
    return DaskKernelMachine(
        alpha_=da.from_array(alpha, chunks=(K.chunks[0],)), loss=loss, lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=gap / div,
        kkt_residual=kkt, n_iter=its, converged=bool(conv), rkhs_norm_=math.sqrt(max(float(alpha @ g), 0.0)),
        train_output_=da.from_array(g, chunks=(K.chunks[0],)), gap_rounding=gap_rounding / div, **extra,
    )


def hard_margin_svm(K, y, *, tol=None, max_iter=None, C_max=None, check_psd=True, chunk=None):
    """``machines.hard_margin_svm`` on a square Dask Gram: the same soft-margin path (C = 1/λ growing tenfold,
    warm-started, until no coefficient sits at C), each soft-margin SVM by :func:`_working_set_qp`; the columns
    gathered for one C are kept for the next.  Same certificate (gap ≤ tol·max(1, P), margin violation ≤ √tol),
    the same error for data not separable with margin ≥ 1/√C_max; ``tol`` defaults to 1e-10 (float64 on the client).
    """
    np = _np()
    caller = "machines.hard_margin_svm"
    loss = _duality.get_loss("hinge", caller)
    psd = _check_psd_option(check_psd, caller)
    K, kmax, fro = check_gram(K, caller)
    n = K.shape[0]
    y = loss.check_targets(_host_vector(y, "y", n, caller), "y", caller=caller)  # a NumPy float64 vector
    if psd:
        psd_test(K, fro, caller)
    tol = 1e-10 if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    max_iter = max(1000, 10 * n) if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
    if chunk is not None:
        chunk = check_int(chunk, "chunk", caller=caller, low=1)
    diag = _graphs.diagonal(K)  # NumPy float64 on the client
    scale = float(np.mean(diag))
    if scale <= 0:
        raise InvalidParameterError(f"The 'K' parameter of {caller} is zero on the diagonal: no point can be separated.")
    C_max = 1e12 / scale if C_max is None else check_real(C_max, "C_max", caller=caller, low=0.0, closed="right")
    xp = _xp()
    cols = _Columns(K)

    def solve_c(lo, hi, gap_fn, alpha0):
        alpha, g, its, _ = _working_set_qp(cols, y, lo, hi, 0.0, 0.0, gap_fn, tol, max_iter, float(np.max(diag)),
                                           chunk, alpha0=alpha0)
        return alpha, g, its

    alpha, g, _, _, its_total = _solve.soft_margin_path(solve_c, y, scale, C_max, caller, xp)
    # the proven certificate (machines.hard_margin_svm's): g = K[:, W]·α_W compensated, the gap bounded
    g, delta = _proof.compensated_matvec(np.ascontiguousarray(cols.C.T, dtype=np.float64), alpha[cols.idx], np)
    g, gap, upper = _proof.hard_margin_gap(None, alpha, y, np, g=g, delta=delta)
    norm2 = float(alpha @ g)
    primal, dual = 0.5 * norm2, float(y @ alpha) - 0.5 * norm2
    infeas = 1.0 - float(np.min(y * g))
    infeas = infeas if not infeas < 0.0 else 0.0  # (max(0.0, nan) would hide a NaN)
    _finite_or_error(kmax, K.dtype, y, 0.0, primal, dual, infeas, alpha)
    gap_rounding = _proof.rounding_of(gap, upper)
    if not math.isfinite(gap_rounding):
        stand_in = np.asarray([kmax], dtype=np.float64)
        raise _duality.overflow_error(caller, "proven bound of the duality gap", stand_in, y, 0.0, xp)
    conv = max(gap, 0.0) + gap_rounding <= tol * max(1.0, primal) and infeas <= math.sqrt(tol)
    if not conv:
        warnings.warn(f"{caller} on the Dask Gram: gap {gap:.3g} (+ its proven rounding bound "
                      f"{gap_rounding:.3g}), margin violation {infeas:.3g}.", _m.ConvergenceWarning, stacklevel=3)
    da = _graphs._da()
    return DaskKernelMachine(
        alpha_=da.from_array(alpha, chunks=(K.chunks[0],)), loss=loss, lam=0.0, lam_sum=0.0, reduction="sum",
        primal_objective=primal, dual_objective=dual, duality_gap=gap, kkt_residual=infeas,
        n_iter=its_total, converged=bool(conv), rkhs_norm_=math.sqrt(max(norm2, 0.0)), gap_rounding=gap_rounding,
        train_output_=da.from_array(g, chunks=(K.chunks[0],)), max_working_set=cols.max_width,
        columns_gathered=cols.gathered, distinct_columns=int(np.sum(cols.seen)),
    )


# -------------------------------------------------------------------------------------------- dynamics


def subgradient_descent(K, y, loss, lam, lr, steps, *, batch_size=None, seed=None, K_test=None, g0=None,
                        g0_test=None, alpha0=None, decay="all", reduction="sum", record_every=1,
                        record_subgradients=False, check_psd=True):
    r"""``dynamics.subgradient_descent`` (seed 000 eqs. (5), (12), (16), (37)) on a square Dask Gram K.

    The recursion α_{k+1} = (1 − ηλ)α_k − η c l′(g_k), g_k = (1 − ηλ)^k g₀ + Kα_k (and its minibatch variants,
    the same random batches for the same ``seed``) with one block product :func:`ntkref._engines.dask._graphs.symmetric_matvec`
    per step, α and the outputs float64 on the client; the records' training outputs are one more product (an
    (n, records) matrix), the test outputs ``K_test``·αᵀ (a Dask or NumPy ``K_test``, (m, n)).  The returned
    :class:`~ntkref.dynamics.Trajectory` holds NumPy float64 arrays.  K is validated in one pass over its blocks
    (finite; symmetric within 100·eps·max|K| as ``dynamics`` asks, then symmetrised); ``check_psd`` runs the
    Lanczos test of :func:`psd_test` (``dynamics``' eigendecomposition needs the whole K).
    """
    np = _np()
    xp = _xp()
    caller = "subgradient_descent"
    loss = _duality.get_loss(loss, caller)
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, high=None if lam == 0 else 1.0 / lam, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    record_every = check_int(record_every, "record_every", caller=caller, low=1)
    check_option(decay, "decay", ("all", "batch"), caller=caller)
    psd = _gram.check_psd_option(check_psd, caller, (True, False))  # documented as a bool: nothing else
    K, _, fro = check_gram(K, caller, sym_tol=100.0)
    n = K.shape[0]

    def host(v):
        v = v.compute() if _graphs.is_dask(v) else v
        return to_numpy(v) if is_array(v) else v

    y = _trajectory.check_targets(loss, host(y), n, caller, xp, np.float64)
    g0 = _trajectory.check_vector(host(g0), "g0", n, caller, xp, np.float64)
    alpha0 = _trajectory.check_vector(host(alpha0), "alpha0", n, caller, xp, np.float64)
    if _graphs.is_dask(K_test):  # the checks of dynamics._trajectory.check_test, without reading K_test
        if K_test.ndim != 2 or K_test.shape[1] != n:
            raise InvalidParameterError(f"The 'K_test' parameter of {caller} must have shape (m, {n}); got "
                                        f"{tuple(K_test.shape)}.")
        if g0 is not None and g0_test is None:
            raise InvalidParameterError(f"{caller}: 'g0' is given, so 'g0_test' (the initial outputs on the test "
                                        "points) is needed too.")
        g0_test = _trajectory.check_vector(host(g0_test), "g0_test", K_test.shape[0], caller, xp, np.float64)
    else:
        K_test, g0_test = _trajectory.check_test(host(K_test), g0, host(g0_test), n, caller, xp, np.float64)
    c, cb, batch_size, rng = _discrete.sgd_schedule(g0, decay, reduction, n, steps, record_every, K_test,
                                                    record_subgradients, batch_size, seed, caller, y,
                                                    "record fewer steps (a larger record_every)")
    if psd:  # last: the costliest check
        psd_test(K, fro, caller)
    d = 1.0 - lr * lam
    g0_ = np.zeros(n) if g0 is None else g0
    alpha = np.zeros(n) if alpha0 is None else alpha0
    w = 1.0
    rec_k, rec_a, rec_w, subs, masks = [], [], [], [], []
    for k in range(steps + 1):
        if k % record_every == 0 or k == steps:
            rec_k.append(k)
            rec_a.append(alpha)
            rec_w.append(w)
        if k == steps:
            break
        g = w * g0_ + (_graphs.symmetric_matvec(K, alpha) if np.any(alpha) else np.zeros(n))
        lp = _trajectory.lprime(loss, g, y, xp)
        if batch_size is None:
            s = cb * lp
            alpha = d * alpha - lr * s
        else:
            mask = np.zeros(n)
            mask[rng.choice(n, size=batch_size, replace=False)] = 1.0
            s = cb * lp * mask
            alpha = d * alpha - lr * s if decay == "all" else (1 - lr * lam * mask) * alpha - lr * s
            if record_subgradients:
                masks.append(mask > 0)
        if record_subgradients:
            subs.append(s)
        w = w * d if (batch_size is None or decay == "all") else w
    alpha_arr, warr = np.stack(rec_a), np.asarray(rec_w)
    g_train = warr[:, None] * g0_[None, :] + _graphs.symmetric_matvec(K, alpha_arr.T).T
    g_test = None
    if K_test is not None:
        if _graphs.is_dask(K_test):
            # the product's chunks may live on a device (CuPy-backed K_test): copied to the client explicitly
            prod = K_test @ _graphs._da().from_array(alpha_arr.T, chunks=(K_test.chunks[1], -1))
            g_test = np.asarray(to_numpy(prod.compute()), dtype=np.float64).T
        else:
            g_test = alpha_arr @ K_test.T
        if g0_test is not None:
            g_test = g_test + warr[:, None] * g0_test[None, :]
    _discrete.check_diverged(caller, loss, lr, lam, c if batch_size is None else cb, xp,
                             alpha_arr, g_train, g_test, *(subs[-1:] if record_subgradients else []))
    return _trajectory.Trajectory(
        times=np.asarray([lr * k for k in rec_k]), g_train=g_train, g_test=g_test, alpha=alpha_arr, g0_weight=warr,
        method="subgradient" if batch_size is None else "sgd", steps=np.asarray(rec_k),
        subgradients=(np.stack(subs) if subs else np.zeros((0, n))) if record_subgradients else None,
        batch_masks=(np.stack(masks) if masks else None) if (record_subgradients and decay == "batch" and batch_size)
        else None,
    )


# ----------------------------------------------------------------- what the Dask engine refuses, and why


def refuse_checked_gram(K, check_psd=None):
    """``machines.checked_gram`` on a Dask K: refused (the Dask solvers validate block by block)."""
    raise InvalidParameterError(
        "The 'K' parameter of machines.checked_gram is a Dask array: the Dask solvers do not take a checked Gram "
        "(they validate block by block); pass the Dask Gram to machines.solve directly."
    )


def refuse_gradient_flow(K, K_test=None):
    """``dynamics.gradient_flow`` on a Dask Gram: refused, naming the ways out."""
    raise InvalidParameterError(
        "gradient_flow on a Dask Gram is not supported: its solvers (an eigendecomposition, event-by-event "
        "linear complementarity steps, Dormand-Prince) need K in one process. Ways out: "
        "dynamics.subgradient_descent, which runs on a Dask K (one block mat-vec per step), or K.compute() "
        "when K fits in memory."
    )
