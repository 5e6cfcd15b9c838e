r"""Kernel ridge regression by preconditioned conjugate gradients (only Gram mat-vecs).

The squared loss of seed 000 eq. (7), L(β) = (λ/2)‖β‖² + Σᵢ (g(xᵢ) − yᵢ)² (no ½, the convention of
:mod:`ntkref.machines`), has the closed form α* = (K + μI)⁻¹y with μ = λ/2 (λ in the sum convention;
``reduction="mean"``: λ_sum = n·λ).  :func:`solve_cg` reaches it by conjugate gradients on
A = K + μI, which needs K only through products K·v — a Gram that lives on a cluster, or on disk, never has
to be in one process (:mod:`ntkref._engines.dask._graphs`: one task per block of the upper triangle per product).

Stopping rule and certificates.  CG stops when the *recomputed* residual r = y − (K + μI)α (one more
product, not the recurrence, which drifts) satisfies ‖r‖₂ ≤ tol·‖y‖₂.  Then, exactly (K ⪰ 0):

- ‖α − α*‖₂ = ‖(K + μI)⁻¹r‖₂ ≤ ‖r‖₂/μ (``alpha_error_bound``);
- the duality gap of (7) is P(α) − D(α) = ‖g − y + μα‖₂² = ‖r‖₂² (g = Kα; D the Fenchel dual of
  :func:`ntkref.machines.dual_objective`), so ‖β − β*‖_H ≤ √(2‖r‖²/λ) (``beta_error_bound``, as for
  every :class:`~ntkref.machines.KernelMachine`); also ‖β − β*‖_H² = (α−α*)ᵀK(α−α*) ≤ ‖r‖²/(4μ).

The attainable residual is about eps·‖K + μI‖·‖α‖/‖y‖ ≤ eps·(λ_max(K) + μ)/μ (eps of the vectors' dtype:
float64 on Dask, K's dtype otherwise); a ``tol`` below it is not reached (ConvergenceWarning).

K ⪰ 0 is tested, not assumed.  Every certificate above, and the minimiser itself, needs K ⪰ 0: for an eigenvalue
−ν of K with 0 < ν < μ, K + μI is still positive definite (CG converges, and its "gap" ‖r‖² is tiny), but along
that eigenvector v the objective (7) is P(α + tv) = P(α) + t²ν(ν − μ) + O(t) → −∞ — the point CG returns is a
saddle, not a minimiser.  So ``check_psd`` runs the PSD test of :func:`ntkref.machines.solve`, with the same
values and default (``ntkref.machines._gram``): True = "auto" is the Cholesky certificate of K + δI,
δ = n·eps·‖K‖_F, for n ≤ 4096 and the one-sided Lanczos test (40 products) above; "cholesky", "lanczos" choose;
False skips it (the certificates then assume K ⪰ 0); any other value is refused.  A Dask K gets the Lanczos test
(``ntkref._engines.dask._machines.psd_test``, after one validating pass over its blocks; "cholesky" is refused
there).  During CG, a direction p with pᵀ(K + μI)p < −2.1·(n + 2)·eps·(tr K + μ)·‖p‖², below the rounding
error that bound allows for any PSD K, proves K indefinite and is refused (this catches what ``check_psd=False``
or an accepting Lanczos test let through).

Breakdown in floating point.  A pᵀ(K + μI)p that rounds to ≤ 0 within that bound, or a product, step or
rᵀMr that is not finite, is a breakdown of CG in the working precision, typically in float32 when
eps·(λ_max(K) + μ)/μ approaches 1 or ``tol`` lies below the attainable residual: CG stops there, the iterate
is certified by its recomputed residual like any other (``converged`` iff that residual ≤ ``tol``), and an
unconverged result comes with a ConvergenceWarning naming the cause and the remedy (float64, a larger λ or
``tol``) — it is not reported as an indefinite K.

Any scale of y.  α* is linear in y, so CG runs on y/2^e, max|y|/2^e ∈ [1/2, 1) (exact), and α, Kα, the bounds
(×2^e) and the objectives and gap (×4^e) are scaled back: no norm or dot product under- or overflows (‖y‖² of a
y ~ 1e-170 used to underflow to 0 and return α = 0 as converged).  An α that falls among the subnormal numbers
is certified by its own recomputed residual and refused (naming ``y``) if that exceeds ``tol``; an α, Kα or
objective beyond the largest float is refused.

Preconditioners (M ≈ (K + μI)⁻¹, symmetric positive definite):

- ``"nystrom"`` (default): randomized Nyström (Frangella, Tropp & Udell 2023, "Randomized Nyström
  preconditioning", SIAM J. Matrix Anal. Appl. 44(2), Alg. 2.1 with a column sketch): ``rank`` columns
  C = K[:, S] chosen uniformly at random, W = C[S, :] = VDVᵀ, B = C·V_k·D_k^{-1/2} over the eigenvalues
  above m·eps·max D (so K̂ = BBᵀ = CW⁺Cᵀ), B = UΣ (thin SVD), Λ = Σ²;
  M = (Λ_min + μ)·U(Λ + μI)⁻¹Uᵀ + (I − UUᵀ).  One pass over K for the columns, then O(n·rank) per step.
- ``"jacobi"``: M = diag(K + μI)⁻¹.
- ``None``: plain CG.

Where it runs.  Array-API K (NumPy, CuPy, torch, ...): every vector is an array of K's namespace on K's
device, with two host reads (dot products) per iteration.  Dask K: the vectors are NumPy float64 on the
client (n floats), each product is one graph over the blocks on and above the diagonal
(:func:`ntkref._engines.dask._graphs.symmetric_matvec`: K is taken as symmetric, its lower blocks are not read), and
``alpha_``/``train_output_`` are returned as Dask arrays chunked like K's rows.  Persist K
(``client.persist``) or store it (:func:`ntkref.kernels.store_gram`) first: a lazy Gram is recomputed at
every product.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass


from ._lib import dispatch
from ._lib.backend import device_of, namespace, to_numpy
from ._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from .machines import ConvergenceWarning, KernelMachine
from .machines._gram import (CheckedGram, check_gram, check_psd_option, psd_method, read, refuse_indefinite,
                              upgrade_psd)
from . import losses as _losses

__all__ = ["KRRMachine", "solve_cg", "fit_cg", "PRECONDITIONERS"]

PRECONDITIONERS = ("nystrom", "jacobi", None)


@dataclass
class KRRMachine(KernelMachine):
    """A :class:`~ntkref.machines.KernelMachine` for the squared loss, with the CG certificate.

    Extra attributes
    ----------------
    residual : float
        ‖y − (K + μI)α‖₂/‖y‖₂, recomputed with one more product after the last step (0 if y = 0).
    tol : float
        The relative residual asked for; ``converged`` is ``residual ≤ tol``.
    alpha_error_bound : float
        ‖r‖₂/μ ≥ ‖α − α*‖₂.
    preconditioner : str or None
    rank : int
        The Nyström rank kept (0 for the others).
    psd_margin : float
        As :attr:`KernelMachine.psd_margin`: 0.0 = K ≻ 0 proven by Rump's test (the Cholesky certificate of
        ``check_psd=True``/"cholesky", dense n ≤ 4096 for "auto"), μ > 0 = λ_min(K) > −μ proven, inf = no proof
        (the Lanczos test, ``check_psd=False``, a Dask K).

    The CG certificate (``residual``, ``duality_gap`` = the computed ‖r‖²-form of P − D, ``alpha_error_bound``) is
    computed in floating point and is NOT a proven bound: ``gap_rounding`` is 0.0 here, not a bound of the gap's
    rounding.  For a proven certificate of a KRR solution use :func:`ntkref.machines.solve` (``loss="squared"``).
    """

    residual: float = math.nan
    tol: float = math.nan
    alpha_error_bound: float = math.nan
    preconditioner: object = None
    rank: int = 0


# ----------------------------------------------------------------------------------- the operator


class _ArrayGram:
    """K of an array-API namespace: vectors of K's namespace, dtype and device."""

    def __init__(self, K):
        self.K = K
        self.xp = namespace(K)
        self.n = K.shape[0]
        self.dtype = K.dtype

    def vector(self, v):
        return v

    def matvec(self, v):
        return self.K @ v

    def diagonal(self):
        return self.xp.linalg.diagonal(self.K)

    def columns(self, idx):
        return self.xp.take(self.K, self.xp.asarray(idx, device=device_of(self.K)), axis=1)

    def result(self, v):
        return v


# ------------------------------------------------------------------------------- preconditioners


def _nystrom(op, mu, rank, seed, xp):
    """(apply, kept rank) of the randomized Nyström preconditioner (module docstring)."""
    import numpy as np

    from ._lib.compat import eigh

    n = op.n
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    idx = np.sort(rng.choice(n, size=rank, replace=False))
    C = op.columns(idx)
    W = xp.take(C, xp.asarray(idx, device=device_of(C)), axis=0)
    W = (W + xp.matrix_transpose(W)) / 2
    d, V = eigh(W, xp)
    d_host = to_numpy(d)
    eps = float(xp.finfo(C.dtype).eps)
    top = float(np.max(d_host)) if d_host.size else 0.0
    keep = np.nonzero(d_host > rank * eps * top)[0] if top > 0 else np.zeros(0, dtype=np.int64)
    if keep.size == 0:  # K vanishes on the sample: nothing to precondition
        return (lambda r: r), 0
    sel = xp.asarray(keep, device=device_of(C))
    B = (C @ xp.take(V, sel, axis=1)) / xp.sqrt(xp.take(d, sel))
    U, s, _ = xp.linalg.svd(B, full_matrices=False)
    lam_hat = s * s
    lam_min = float(xp.min(lam_hat))
    coeff = (lam_min + mu) / (lam_hat + mu) - 1.0  # in (−1, 0]: M = I + U diag(coeff) Uᵀ ≻ 0

    def apply(r):
        return r + U @ (coeff * (xp.matrix_transpose(U) @ r))

    return apply, int(keep.size)


def _jacobi(op, mu, xp):
    dg = op.diagonal() + mu
    if not bool(xp.all(dg > 0)):
        raise InvalidParameterError("The 'K' parameter of krr.solve_cg must have a non-negative diagonal (a Gram "
                                    "matrix); diag(K) + lam/2 has a non-positive entry.")
    return lambda r: r / dg


# ------------------------------------------------------------------------------------------- solver


def _dot(a, b, xp):
    return float(xp.sum(a * b))


def _ldexp(v, k, xp):
    """v·2^k elementwise, by factors 2^j that are normal numbers of v's dtype (|j| ≤ 1022 for float64, 126 for
    float32; the remainder first, so that a shrinking v is rounded at most once more than necessary): exact
    unless the result is subnormal (rounded) or beyond the largest float (inf)."""
    if k == 0:
        return v
    step = math.frexp(float(xp.finfo(v.dtype).max))[1] - 2
    sign = 1 if k > 0 else -1
    first = sign * (abs(k) % step)
    for j in ([first] if first else []) + [sign * step] * (abs(k) // step):
        v = v * math.ldexp(1.0, j)
    return v


def _ldexp_scalar(v, k):
    """v·2^k for a Python float, rounded once; ±inf beyond the largest float64."""
    try:
        return math.ldexp(v, k)
    except OverflowError:
        return math.copysign(math.inf, v)


def solve_cg(K, y, lam, *, reduction="sum", tol=None, max_iter=None, preconditioner="nystrom", rank=None,
             seed=0, check_psd=True):
    r"""Kernel ridge regression α = (K + (λ/2)I)⁻¹y by preconditioned conjugate gradients.

    The minimiser of seed 000 eq. (7) with the squared loss, as :func:`ntkref.machines.solve` with
    ``loss="squared"`` computes by one dense solve; here K is used only through products K·v.

    Parameters
    ----------
    K : array (n, n) or Dask array
        Symmetric PSD Gram.  Array-API K is validated like ``machines.solve`` does (square, finite,
        symmetric to √eps, then symmetrised, and the PSD test of ``check_psd``).  Dask K: see the module
        docstring (the PSD test after one validating pass over its blocks).
    y : array (n,)
        Targets.
    lam : float > 0
        λ (``reduction`` convention).
    reduction : {"sum", "mean"}
    tol : float in (0, 1), optional
        Relative residual ‖y − (K + μI)α‖₂/‖y‖₂ to reach.  Default 1e-8 (float64 vectors: Dask, or
        float64 K), 1e-4 (float32 K).
    max_iter : int, optional
        CG steps at most (default 1000).
    preconditioner : {"nystrom", "jacobi", None}
    rank : int, optional
        Nyström columns (default min(n, 200)).
    seed : int or numpy.random.Generator
        For the Nyström columns.
    check_psd : bool or {"auto", "cholesky", "lanczos"}
        Verify K ⪰ 0 (to −n·eps·‖K‖_F), as :func:`ntkref.machines.solve`: "cholesky" certifies it (O(n³/3));
        "lanczos" refuses K only with a proof of a negative eigenvalue, in 40 products; True (default) = "auto":
        Cholesky for n ≤ 4096, Lanczos above (a Dask K: always Lanczos, "cholesky" is refused); False skips it
        (the certificates then rest on K ⪰ 0 unchecked).  Any other value (None included) is refused.

    Returns
    -------
    KRRMachine
        ``alpha_``, ``train_output_`` = Kα, the residual and its bounds, the duality gap (= ‖r‖², in the
        ``reduction`` convention), ``n_iter`` (CG steps), ``converged`` (residual ≤ tol).

    Raises
    ------
    InvalidParameterError
        A parameter out of range; a non-finite y, or a product K·v with a non-finite entry (K non-finite or
        overflowing: "K"); a K that fails the PSD test, or a search direction p with pᵀ(K + μI)p below its
        rounding error (a proof that K is indefinite: "K"); a y so large that α, Kα or the objectives
        overflow, or so small that the subnormal α misses ``tol`` ("y").

    Warns
    -----
    ConvergenceWarning
        ``converged=False``: ``max_iter`` reached, or CG broke down in floating point (module docstring).
    """
    caller = "krr.solve_cg"
    dask_operator = dispatch.gram_operator.lookup(K)  # a Dask K: blocked products (ntkref/_engines/dask)
    check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    check_option(preconditioner, "preconditioner", PRECONDITIONERS, caller=caller)
    check_psd_option(check_psd, caller)  # None, "yes", 1.5 ...: refused, never read as "no test"
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    checked = K if isinstance(K, CheckedGram) else None
    if dask_operator is not None:
        op = dask_operator(K)
        y_vec = check_array(op.vector(y), "y", caller=caller, ndim=1, xp=op.xp)
    else:
        K = check_gram(K, caller, psd=False)
        op = _ArrayGram(K)
        y_vec = check_array(y, "y", caller=caller, ndim=1, xp=op.xp, like=K)
        y_vec = op.xp.astype(y_vec, K.dtype) if y_vec.dtype != K.dtype else y_vec
    xp, n = op.xp, op.n
    if y_vec.shape[0] != n:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},) to match K; got "
                                    f"{tuple(y_vec.shape)}.")
    lam_sum = lam * n if reduction == "mean" else lam
    mu = lam_sum / 2
    default_tol = 1e-8 if op.dtype == xp.float64 else 1e-4
    tol = default_tol if tol is None else check_real(tol, "tol", caller=caller, low=0.0, high=1.0, closed="neither")
    max_iter = 1000 if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
    rank = min(n, 200) if rank is None else check_int(rank, "rank", caller=caller, low=1, high=n)
    # K ⪰ 0, as machines.solve tests it (module docstring): last, the only check costlier than one pass over K
    psd_margin = math.inf  # what the PSD test proved (KernelMachine.psd_margin): inf = no proof
    if dask_operator is not None:
        op.psd_test(check_psd, caller)  # the engine's Lanczos test ("cholesky" refused there)
    else:
        method = psd_method(check_psd, n, caller)
        if checked is not None:  # checked once: only a stronger PSD test than the one it passed runs
            psd_margin = upgrade_psd(checked, method, caller, "K") if method else checked.psd_margin
        elif method:
            psd_margin = refuse_indefinite(K, caller, method=method)

    kept = 0
    if preconditioner == "nystrom":
        precond, kept = _nystrom(op, mu, rank, seed, xp)
    elif preconditioner == "jacobi":
        precond = _jacobi(op, mu, xp)
    else:
        def precond(r):
            return r

    def A(v):
        Av = op.matvec(v)
        if not bool(xp.all(xp.isfinite(Av))):
            raise InvalidParameterError(
                f"The 'K' parameter of {caller} gives a non-finite product K·v (K has a non-finite entry, or its "
                f"products overflow {'float64' if op.dtype == xp.float64 else 'float32'}); rescale K or y."
            )
        return Av + mu * v, Av

    # α* is linear in y: solve for y/2^e (exact), e such that max|y|/2^e ∈ [1/2, 1), then α = 2^e·α', so that no
    # dot product (‖y‖², ‖r‖², ...) under- or overflows whatever the scale of y.  (For e > 0, entries that become
    # subnormal are rounded, by < 2^-1074 (float64; 2^-149 float32) of the scaled ‖y‖ ≥ 1/2: far below any tol.)
    y_max = float(xp.max(xp.abs(y_vec))) if n else 0.0
    e_y = math.frexp(y_max)[1] if y_max > 0 else 0
    y_vec = _ldexp(y_vec, -e_y, xp)
    norm_y = math.sqrt(_dot(y_vec, y_vec, xp))  # of the scaled y: in [1/2, √n]
    alpha = xp.zeros_like(y_vec)
    g = xp.zeros_like(y_vec)
    r = y_vec
    its, converged = 0, norm_y == 0.0
    res = 0.0
    dtype_name = "float64" if op.dtype == xp.float64 else "float32"
    eps = float(xp.finfo(op.dtype).eps)
    trace = []  # tr K (its non-negative part), read once when first needed

    def trace_k():
        if not trace:
            d = op.diagonal()
            trace.append(float(xp.sum(xp.where(d > 0, d, xp.zeros_like(d)))) if n else 0.0)
        return trace[0]

    import numpy as np

    breakdown = None  # what broke CG down in floating point (module docstring), for the warning
    # float32 sums may overflow to inf/NaN: detected below and reported as a breakdown, not as a NumPy warning
    with np.errstate(over="ignore", invalid="ignore"):
        if not converged:
            z = precond(r)
            p = z
            rz = _dot(r, z, xp)
            while its < max_iter:
                Ap, _ = A(p)
                pAp = _dot(p, Ap, xp)
                if not (math.isfinite(pAp) and pAp > 0):
                    pp = _dot(p, p, xp)
                    # for a PSD K, |fl(pᵀ(K + μI)p) − pᵀ(K + μI)p| ≤ 2.1(n + 2)·eps·|p|ᵀ(|K| + μI)|p|
                    # ≤ 2.1(n + 2)·eps·(tr K + μ)·‖p‖² (|K_ij| ≤ √(K_ii K_jj)): a value below minus that proves K indefinite
                    bound = 2.1 * (n + 2) * eps * (trace_k() + mu) * pp
                    if math.isfinite(pAp) and math.isfinite(bound) and pAp < -bound:
                        raise InvalidParameterError(
                            f"The 'K' parameter of {caller} must be positive semidefinite: conjugate gradients found a "
                            f"direction p with pᵀ(K + (λ/2)I)p / pᵀp = {pAp / pp:.3g} < 0 at step {its + 1}, below the "
                            f"rounding error any PSD K allows ({-bound / pp:.3g}), so K has an eigenvalue below "
                            f"-λ/2 = {-mu:.3g}. A kernel machine's objective is not convex for an indefinite K"
                            f"{'' if check_psd is False else f' (check_psd={check_psd!r} accepted it: its test missed this eigenvalue)'}."
                        )
                    breakdown = (f"pᵀ(K + (λ/2)I)p rounded to {pAp:.3g} ≤ 0 for a search direction p, within its rounding "
                                 f"error" if math.isfinite(pAp) else
                                 f"pᵀ(K + (λ/2)I)p is not a finite number in {dtype_name} (its terms overflow)")
                    break
                step = rz / pAp
                alpha_new = alpha + step * p
                r_new = r - step * Ap
                rr, finite = read(xp, xp.sum(r_new * r_new), xp.all(xp.isfinite(alpha_new)))
                if not (math.isfinite(rr) and finite):
                    breakdown = f"the step α + (rᵀMr / pᵀ(K + (λ/2)I)p)·p overflows {dtype_name}"
                    break
                its += 1
                alpha, r = alpha_new, r_new
                restart = False
                if math.sqrt(rr) <= tol * norm_y or its == max_iter:
                    Aa, g = A(alpha)  # the true residual, not the recurrence
                    r = y_vec - Aa
                    res = math.sqrt(_dot(r, r, xp)) / norm_y
                    if res <= tol:
                        converged = True
                        break
                    if its == max_iter:
                        break
                    # r is now the true residual, larger than the recurrence's (rounding): a β = rᵀMr/rz mixing the
                    # two would blow p up (measured: α ~ 1e18 in float32 at tol below the attainable residual),
                    # so CG restarts from this iterate with p = Mr
                    restart = True
                z = precond(r)
                rz_new = _dot(r, z, xp)
                if not (math.isfinite(rz_new) and rz_new > 0):
                    breakdown = (f"rᵀMr (M the preconditioner) is {'not finite' if not math.isfinite(rz_new) else 'zero'} "
                                 f"in {dtype_name}")
                    break
                p = z if restart else z + (rz_new / rz) * p
                rz = rz_new
            if breakdown is not None:  # the last finite iterate, certified by its recomputed residual
                Aa, g = A(alpha)
                r = y_vec - Aa
                res = math.sqrt(_dot(r, r, xp)) / norm_y
                converged = res <= tol
    r_norm2 = res * res * norm_y * norm_y
    # certificate (module docstring): P − D = ‖g − y + μα‖² = ‖r‖², reported from r (no cancellation)
    quad = _dot(alpha, g, xp)
    primal = 0.5 * lam_sum * quad + _dot(g - y_vec, g - y_vec, xp)
    dual = lam_sum * _dot(alpha, y_vec, xp) - lam_sum**2 / 4 * _dot(alpha, alpha, xp) - 0.5 * lam_sum * quad
    kkt = float(xp.max(xp.abs(alpha - 2.0 * (y_vec - g) / lam_sum))) if n else 0.0
    # back to the scale of y: α, g times 2^e; the objectives and the gap times 4^e, the other bounds times 2^e
    with np.errstate(over="ignore"):
        alpha_out, g_out = _ldexp(alpha, e_y, xp), _ldexp(g, e_y, xp)
    if not (bool(xp.all(xp.isfinite(alpha_out))) and bool(xp.all(xp.isfinite(g_out)))):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} is too large: α = (K + (λ/2)I)⁻¹y or Kα overflows {dtype_name} "
            f"(max|y| = {y_max:.3g}); rescale y (α is linear in y).")
    if e_y < 0 and not bool(xp.all(_ldexp(alpha_out, -e_y, xp) == alpha)):
        # α fell (partly) among the subnormal numbers, which carry fewer digits: certify the α returned
        Aa, _ = A(_ldexp(alpha_out, -e_y, xp))
        r = y_vec - Aa
        res = math.sqrt(_dot(r, r, xp)) / norm_y
        r_norm2 = res * res * norm_y * norm_y
        if converged and res > tol:
            raise InvalidParameterError(
                f"The 'y' parameter of {caller} is too small: α = (K + (λ/2)I)⁻¹y falls among the subnormal "
                f"numbers of {dtype_name}, where it has relative residual {res:.3g} > tol = {tol:.3g} "
                f"(max|y| = {y_max:.3g}); rescale y (α is linear in y).")
    primal, dual = _ldexp_scalar(primal, 2 * e_y), _ldexp_scalar(dual, 2 * e_y)
    r_norm2, quad = _ldexp_scalar(r_norm2, 2 * e_y), _ldexp_scalar(max(quad, 0.0), 2 * e_y)
    kkt = _ldexp_scalar(kkt, e_y)
    if not all(math.isfinite(v) for v in (primal, dual, r_norm2, quad)):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} is too large: the objective values (quadratic in y) overflow float64 "
            f"(max|y| = {y_max:.3g}); rescale y (α is linear in y).")
    alpha, g = alpha_out, g_out
    if not converged and breakdown is not None:
        attainable = eps * (trace_k() + mu) / mu
        remedy = ("pass K and y in float64 (the attainable residual scales with eps), or use a larger lam or tol"
                  if dtype_name == "float32" else "use a larger lam or tol")
        tested = ("K passed the PSD test" if check_psd is not False else
                  "check_psd=False in this call, so K was not tested here; an indefinite K, with an eigenvalue "
                  "below -λ/2, also breaks CG down")
        warnings.warn(
            f"{caller}: conjugate gradients broke down in {dtype_name} after {its} steps, at relative residual "
            f"{res:.3g} > tol = {tol:.3g}: {breakdown}. That is rounding (CG loses conjugacy when "
            f"K + (λ/2)I is ill-conditioned for {dtype_name}), not a proof that K is indefinite ({tested}); "
            f"the attainable relative residual is about eps·(λ_max(K) + λ/2)/(λ/2) ≤ eps·(tr K + λ/2)/(λ/2) = "
            f"{attainable:.3g} in {dtype_name}. The iterate returned is certified by its recomputed residual; "
            f"{remedy}.",
            ConvergenceWarning,
            stacklevel=2,
        )
    elif not converged:
        warnings.warn(
            f"{caller}: conjugate gradients stopped at relative residual {res:.3g} > tol = {tol:.3g} after {its} "
            f"steps (the attainable residual is about eps·(λ_max(K) + λ/2)/(λ/2); raise max_iter, rank or tol).",
            ConvergenceWarning,
            stacklevel=2,
        )
    div = n if reduction == "mean" else 1
    return KRRMachine(
        alpha_=op.result(alpha), loss=_losses.get("squared"), lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=r_norm2 / div,
        kkt_residual=kkt, n_iter=its, converged=bool(converged), rkhs_norm_=math.sqrt(quad),
        train_output_=op.result(g), residual=res, tol=tol,
        alpha_error_bound=_ldexp_scalar(res * norm_y / mu, e_y),
        preconditioner=preconditioner, rank=kept, psd_margin=psd_margin,
    )


def fit_cg(K, y, lam, **kwargs):
    """Coefficients α of :func:`solve_cg` (same parameters)."""
    return solve_cg(K, y, lam, **kwargs).alpha_
