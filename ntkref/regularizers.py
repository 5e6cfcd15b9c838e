r"""The NTK function-norm regulariser and its kernel-ridge-regression equivalence (seed 003, Chapter 2).

Seed equations implemented here (seed 003 = Shi, *Applications of NTK theory in deep learning*):

- (2.1)/(1.12) dual and (2.2) primal RKHS norm: ‖f‖²_H = αᵀKα = f(X)ᵀK⁻¹f(X) for f = Σⱼ αⱼK(xⱼ, ·)
  (:func:`rkhs_norm_sq`, :func:`rkhs_norm_sq_dual`).  For a general f, f(X)ᵀK⁻¹f(X) is the squared norm
  of the minimum-norm interpolant of f on X, hence ≤ ‖f‖²_H.
- (1.13)–(1.17), (2.5): kernel ridge regression with the dissertation's **mean** convention
  (1/N)Σ(f(xᵢ) − yᵢ)² + ζ‖f‖²_H (squared loss without ½), α = (K + ζN I)⁻¹Y (:func:`krr_fit`,
  :func:`krr_predict`, :func:`krr_objective`); ``reduction="sum"`` gives Σ(f − y)² + ζ‖f‖², α = (K + ζI)⁻¹Y.
- (2.4)/(2.14): the regularised training objective; (2.15)–(2.17) and Algorithm 1: the regulariser
  τ f(X_𝓘)ᵀΘ(X_𝓘, X_𝓘)⁻¹f(X_𝓘) of a finite network with Θ held constant (stop-gradient, §2.6.1), its
  parameter gradient 2τ J_𝓘ᵀΘ⁻¹f(X_𝓘) by the net's backward pass (:func:`ntk_regularizer`), and full-batch
  gradient descent on MSE + ζ·regulariser (:func:`train_regularized`).
- Approximation 1: the sub-batch estimator (N/b)·E_𝓘[f_𝓘ᵀK_𝓘𝓘⁻¹f_𝓘] (:func:`sub_batch_rkhs_norm`); it is
  biased (Schur complement: every sub-batch term is ≤ the full norm) except in special cases (diagonal K:
  unbiased over uniform subsets; block-diagonal K with block-aligned sub-batches: additive), all tested.
- (2.31)–(2.33): the regularised gradient flow in closed form (:func:`regularized_flow`).  **Seed error**:
  (2.33) as printed, K(x, X)(K + ζNI)⁻¹(I − e^{−(2η/N)tK})Y, does not solve (2.32) for ζ > 0; the exponent
  must be −(2η/N)t(K + ζNI).  ``printed=True`` evaluates the printed (wrong) form for comparison.
- (2.34)–(2.36): the gap between the flows with the empirical Θ and the analytic 𝒦
  (:func:`flow_gap_bound`); **seed error**: (2.36) integrates with ‖B‖ instead of λ_min(B).
- (1.29): the linearised MSE flow (:func:`linearized_mse_flow`).  **Seed convention**: (1.29) holds for the
  *sum* Σ½(f − y)²; with the 1/N mean of (1.3) the exponent is −ηΘt/N (``reduction`` argument).
- Theorem 2.2.1's exact finite-dimensional analogue: a linear-in-parameters model f = Φθ (random features,
  or :class:`ntkref.nets.Linearized`) trained by gradient descent from θ = 0 on the NTK-regularised
  objective converges to the KRR predictor Θ(x, X)(Θ + ζNI)⁻¹Y at every x (:func:`regularized_gd_linear`).
- Proposition 2.2.3, (2.42)–(2.48): the linearised Gaussian prior N(f(X; μ), σ²JJᵀ) (:func:`linearized_prior`),
  its log-density **with** the log-det term the dissertation drops (:func:`gaussian_logpdf`,
  :func:`fs_map_log_prior`), Kolmogorov-consistent marginals (2.53) (:func:`gaussian_marginal`).
- (2.10)/(2.11): the FS-MAP / continual-learning objectives.  **Seed error**: both are printed with
  +Σ log p(y | f) under a minimisation; the correct objective is −Σ log p + τ·penalty
  (:func:`fs_map_objective`, ``printed=True`` for the printed sign; :func:`continual_learning_penalty`).
- Theorem 1.2.1 (1.19)/(1.20) and Theorem 2.2.2 (2.7): generalisation bounds, with Tr of the **sample**
  Gram matrix K(X, X) (Mohri et al. Thm 10.7, the theorem the dissertation cites); the dissertation's
  operator trace Tr(𝒦) = O(1) makes its bound √N too small (:func:`kernel_generalization_bound`,
  :func:`ntk_regularized_generalization_bound`, :func:`krr_norm_bound`).

Conventions: X has shape (N, d), one sample a row; f(X) and Y have shape (N,) (or (N, k) where stated,
column by column); kernels are (N, N) Gram matrices, symmetrised before use.  All linear algebra goes
through the symmetric eigendecomposition (``_compat.eigh``): a matrix that must be inverted is checked to be
positive definite, λ_min > 10·N·eps·λ_max, and a singular or indefinite one is an
:class:`~ntkref.InvalidParameterError` suggesting an explicit ``jitter`` (added as K + jitter·I, never
silently).  Accuracy: relative errors ≈ cond(K)·eps (float64: eps = 2.2e-16; float32: 1.2e-7).

Finite or error: quadratic forms fᵀK⁻¹f, αᵀKα, sums of squares and ‖Y‖ are computed from f/max|f| and scaled
back (exact), so every result that is representable is returned (e.g. (cf)ᵀ(cK)⁻¹(cf) = c·fᵀK⁻¹f at c = 1e300);
a result outside the dtype's range, or a diverged gradient descent, is a ``FloatingPointError`` naming the
argument to rescale (or ``lr``), never a silent inf/NaN.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np  # host side only: seeded sub-batch draws and integer index bookkeeping, never the math

from ._backend import device_of, namespace
from ._compat import eigh
from ._validation import InvalidParameterError, check_array, check_int, check_option, check_real

__all__ = [
    "Flow",
    "RegularizedTrajectory",
    "continual_learning_penalty",
    "flow_gap_bound",
    "fs_map_log_prior",
    "fs_map_objective",
    "gaussian_logpdf",
    "gaussian_marginal",
    "kernel_generalization_bound",
    "krr_fit",
    "krr_norm_bound",
    "krr_objective",
    "krr_predict",
    "linearized_mse_flow",
    "linearized_prior",
    "ntk_regularized_generalization_bound",
    "ntk_regularizer",
    "regularized_flow",
    "regularized_gd_linear",
    "rkhs_norm_sq",
    "rkhs_norm_sq_dual",
    "sub_batch_rkhs_norm",
    "sub_batch_term",
    "tau_from_zeta",
    "train_regularized",
]


# --------------------------------------------------------------------------- helpers
def _eps(dtype, xp):
    return float(xp.finfo(dtype).eps)


def _check_kernel(K, name, caller, xp=None, n=None, dtype=None):
    K = check_array(K, name, caller=caller, ndim=2, xp=xp, dtype=dtype)
    xp = namespace(K)
    if K.shape[0] != K.shape[1]:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a square matrix; got shape {tuple(K.shape)}.")
    if n is not None and K.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be ({n}, {n}); got {tuple(K.shape)}.")
    if K.shape[0] == 0:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must not be empty.")
    scale = float(xp.max(xp.abs(K)))
    asym = float(xp.max(xp.abs(K - xp.matrix_transpose(K))))
    if asym > math.sqrt(_eps(K.dtype, xp)) * max(scale, 1e-300):
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be symmetric; max |K − Kᵀ| = {asym:.3g} (max |K| = {scale:.3g})."
        )
    return (K + xp.matrix_transpose(K)) / 2


def _with_jitter(K, jitter, caller, xp):
    jitter = check_real(jitter, "jitter", caller=caller, low=0.0)
    if jitter == 0.0:
        return K
    return K + jitter * xp.eye(K.shape[-1], dtype=K.dtype, device=device_of(K))


def _pd_eigh(K, name, caller, xp, *, shift=0.0, need_pd=True):
    """eigh of a symmetric (stack of) matrix; with ``need_pd`` refuse λ_min(K) + shift ≤ 10·n·eps·λ_max."""
    w, V = eigh(K, xp)
    n = K.shape[-1]
    top = float(xp.max(xp.abs(w))) + abs(shift)
    tol = 10.0 * n * _eps(K.dtype, xp) * max(top, 1e-300)
    low = float(xp.min(w))
    if low < -tol:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} is not positive semidefinite (λ_min = {low:.3g}, λ_max = {top:.3g})."
        )
    if need_pd and low + shift <= tol:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} is singular to working precision (λ_min = {low:.3g}, "
            f"λ_max = {top:.3g}); f(X)ᵀK⁻¹f(X) is not defined. Pass an explicit jitter > 0 (K + jitter·I) "
            f"or use fewer points than the kernel's rank."
        )
    return w, V


def _check_values(f, name, caller, n, xp, dtype, ndim=(1, 2), like=None):
    f = check_array(f, name, caller=caller, ndim=ndim, xp=xp, dtype=dtype, like=like)
    if f.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have {n} rows (one per point); got {tuple(f.shape)}.")
    return f


def _max_abs(a, xp):
    return float(xp.max(xp.abs(a))) if a.size else 0.0


def _quad(proj, w, xp):
    """Σ proj²/w (w > 0) through proj/s, s = max|proj|, so that proj² never overflows or underflows when the
    result is representable: Σ(proj/s)²/w · s · s (quadratic in proj, so the rescaling is exact)."""
    s = _max_abs(proj, xp)
    if s == 0.0:
        return xp.sum(proj * proj / w)
    q = proj / s
    return (xp.sum(q * q / w) * s) * s


def _sum_sq(r, xp):
    """Σ r² through r/s, s = max|r| (exact rescaling; finite whenever the sum is)."""
    s = _max_abs(r, xp)
    if s == 0.0 or not math.isfinite(s):
        return xp.sum(r * r)
    q = r / s
    return (xp.sum(q * q) * s) * s


def _finite(value, caller, what):
    """Finite or error: a result that is ±inf/NaN for finite valid inputs is out of the dtype's range."""
    xp = namespace(value)
    if not bool(xp.all(xp.isfinite(value))):
        raise FloatingPointError(
            f"The result of {caller} overflows {value.dtype}: {what}. Rescale the inputs (the exact value is not "
            f"representable in this dtype).")
    return value


def _as_column(f, xp):
    return (f[:, None], True) if f.ndim == 1 else (f, False)


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# --------------------------------------------------------------------------- RKHS norms
def rkhs_norm_sq(f_values, K, *, jitter=0.0):
    r"""Primal RKHS norm ‖f‖²_H = f(X)ᵀK(X, X)⁻¹f(X) (seed 003 eq. (2.2)).

    Parameters
    ----------
    f_values : array, shape (N,) or (N, k)
        f(X); k outputs are summed column by column (K ⊗ I_k).
    K : array, shape (N, N)
        Symmetric positive definite Gram matrix K(X, X) (symmetrised; asymmetry above √eps·max|K| is refused).
    jitter : float ≥ 0
        Explicit regularisation: K + jitter·I is used.  0 (default) means none; a singular or indefinite K
        is then an :class:`~ntkref.InvalidParameterError`.

    Returns
    -------
    0-d array
        For f = Σⱼ αⱼK(xⱼ, ·) this equals the dual form αᵀKα (2.1); for any other f it is the squared norm of
        the minimum-norm interpolant of f on X.  Relative accuracy ≈ cond(K)·eps.
    """
    return _rkhs_norm_sq(f_values, K, jitter, "rkhs_norm_sq", "f_values", "K")


def _rkhs_norm_sq(f_values, K, jitter, caller, f_name, K_name, f_desc=None):
    """f(X)ᵀK⁻¹f(X) with the caller's parameter names in every message (``f_desc``: what f is, if derived)."""
    xp = namespace(f_values, K)
    K = _check_kernel(K, K_name, caller, xp)
    f = _check_values(f_values, f_name, caller, K.shape[0], xp, K.dtype, like=K)
    K = _with_jitter(K, jitter, caller, xp)
    w, V = _pd_eigh(K, K_name, caller, xp)
    proj = xp.matrix_transpose(V) @ _as_column(f, xp)[0]
    return _finite(_quad(proj, w[:, None], xp), caller,
                   f"{f_desc or repr(f_name)} (max |·| = {_max_abs(f, xp):.3g}) is too large for the inverse of "
                   f"{K_name!r} (λ_min = {float(xp.min(w)):.3g})")


def rkhs_norm_sq_dual(alpha, K):
    r"""Dual RKHS norm ‖f‖²_H = αᵀK(X, X)α of f = Σⱼ αⱼK(xⱼ, ·) (seed 003 eqs. (1.12), (2.1)).

    ``alpha`` has shape (N,) or (N, k) (columns summed); K is symmetric PSD (N, N).
    """
    caller = "rkhs_norm_sq_dual"
    xp = namespace(alpha, K)
    K = _check_kernel(K, "K", caller, xp)
    a = _as_column(_check_values(alpha, "alpha", caller, K.shape[0], xp, K.dtype, like=K), xp)[0]
    s = _max_abs(a, xp)
    if s == 0.0:
        return xp.sum(a * (K @ a))
    u = a / s  # αᵀKα = s²·uᵀKu: exact rescaling, so that Kα never overflows when the norm is representable
    return _finite((xp.sum(u * (K @ u)) * s) * s, caller,
                   f"'alpha' (max |·| = {s:.3g}) is too large for 'K' (max |·| = {_max_abs(K, xp):.3g})")


# --------------------------------------------------------------------------- KRR
def _ridge(zeta, n, reduction, caller):
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    check_option(reduction, "reduction", ("mean", "sum"), caller=caller)
    return zeta * n if reduction == "mean" else zeta


def krr_fit(K, Y, zeta, *, reduction="mean", jitter=0.0):
    r"""Kernel ridge regression coefficients (seed 003 eqs. (1.13)–(1.15), (2.5)).

    ``reduction="mean"`` (the dissertation's (1.10)/(1.13)/(2.4)):
    min_f (1/N)Σᵢ(f(xᵢ) − yᵢ)² + ζ‖f‖²_H  ⇒  α = (K + ζN·I)⁻¹Y.
    ``reduction="sum"``: Σᵢ(f(xᵢ) − yᵢ)² + ζ‖f‖²_H ⇒ α = (K + ζI)⁻¹Y.  (The squared loss has no ½; with
    seed 000's (λ/2)‖β‖² + Σ(f − y)² convention use ζ = λ/2, i.e. :func:`ntkref.machines.fit`.)

    ζ = 0 is ridgeless kernel regression (1.17) and needs K positive definite (or an explicit ``jitter``:
    K + jitter·I is used).  ``Y`` has shape (N,) or
    (N, k).  Returns α of Y's shape; the predictor is f(x) = K(x, X)α (:func:`krr_predict`), and
    f(X) = K(K + ζN I)⁻¹Y.  Accuracy ≈ cond(K + ζN I)·eps.
    """
    caller = "krr_fit"
    xp = namespace(K, Y)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Y = _check_values(Y, "Y", caller, n, xp, K.dtype, like=K)
    ridge = _ridge(zeta, n, reduction, caller)
    K = _with_jitter(K, jitter, caller, xp)
    w, V = _pd_eigh(K, "K", caller, xp, shift=ridge)
    Yc, squeeze = _as_column(Y, xp)
    alpha = V @ ((xp.matrix_transpose(V) @ Yc) / (w + ridge)[:, None])
    return alpha[:, 0] if squeeze else alpha


def krr_predict(K_test_train, alpha):
    """KRR prediction f(x) = K(x, X)α (seed 003 eq. (1.16)/(2.5)); K_test_train is (M, N), α (N,) or (N, k)."""
    caller = "krr_predict"
    xp = namespace(K_test_train, alpha)
    Kt = check_array(K_test_train, "K_test_train", caller=caller, ndim=2, xp=xp)
    a = _check_values(alpha, "alpha", caller, Kt.shape[1], xp, Kt.dtype, like=Kt)
    return Kt @ a


def krr_objective(f_values, Y, K, zeta, *, reduction="mean", jitter=0.0):
    r"""The KRR / NTK-regularised objective as a function of f(X) (seed 003 eqs. (1.13), (2.4)).

    J(f) = (1/N)‖f(X) − Y‖² + ζ f(X)ᵀK⁻¹f(X)  (``reduction="mean"``; ``"sum"`` drops the 1/N).
    Its unique minimiser over f(X) is K(K + ζN I)⁻¹Y (the fitted values of :func:`krr_fit`).
    For ζ > 0, K (+ ``jitter``·I) must be positive definite; ζ = 0 is the plain squared error and
    accepts any symmetric K (the penalty, and K⁻¹, are not evaluated).  Returns a 0-d array.
    """
    caller = "krr_objective"
    xp = namespace(f_values, Y, K)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = _check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    Y = _check_values(Y, "Y", caller, n, xp, K.dtype, like=K)
    if tuple(f.shape) != tuple(Y.shape):
        raise InvalidParameterError(f"f_values {tuple(f.shape)} and Y {tuple(Y.shape)} of {caller} must have the same shape.")
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    check_option(reduction, "reduction", ("mean", "sum"), caller=caller)
    fit = _sum_sq(f - Y, xp) / (n if reduction == "mean" else 1)
    what = f"'f_values' − 'Y' (max |·| = {_max_abs(f - Y, xp):.3g}) is too large"
    K = _with_jitter(K, jitter, caller, xp)
    if zeta == 0.0:  # no penalty: K⁻¹ is not needed, so K may be singular (ridgeless fit (1.17))
        return _finite(fit, caller, what)
    w, V = _pd_eigh(K, "K", caller, xp)
    proj = xp.matrix_transpose(V) @ _as_column(f, xp)[0]
    return _finite(fit + zeta * _quad(proj, w[:, None], xp), caller,
                   what + f", or 'f_values' (max |·| = {_max_abs(f, xp):.3g}) for the inverse of 'K'")


def krr_norm_bound(Y, zeta, *, reduction="mean"):
    r"""‖f_ntr‖²_H ≤ ‖Y‖²/(4ζN) for the KRR solution (seed 003 (2.5); makes Thm 2.2.2's "Λ depends on ζ" concrete).

    ‖f‖²_H = Yᵀ(K + ζNI)⁻¹K(K + ζNI)⁻¹Y ≤ max_λ λ/(λ + ζN)² ‖Y‖² = ‖Y‖²/(4ζN) for every PSD K
    (``reduction="sum"``: ζN → ζ).  Returns a float; ζ > 0 required.
    """
    caller = "krr_norm_bound"
    Y = check_array(Y, "Y", caller=caller, ndim=(1, 2))
    xp = namespace(Y)
    if Y.shape[0] == 0:
        raise InvalidParameterError(f"The 'Y' parameter of {caller} must not be empty (N ≥ 1 targets).")
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0, closed="neither")
    ridge = _ridge(zeta, Y.shape[0], reduction, caller)
    s = _max_abs(Y, xp)  # ‖Y‖²/(4·ridge) = (s·‖Y/s‖/(2√ridge))², finite whenever the bound is
    t = s * math.sqrt(float(_sum_sq(Y / s, xp))) / (2.0 * math.sqrt(ridge)) if s > 0 else 0.0
    bound = t * t
    if not math.isfinite(bound):
        raise FloatingPointError(
            f"The result of {caller} overflows float: 'Y' (max |·| = {s:.3g}) is too large for zeta = {zeta!r}; "
            f"rescale Y.")
    return bound


# --------------------------------------------------------------------------- Approximation 1
def _subset_kernel(K, idx, xp):
    """K[idx][:, idx] for a stack of index rows ``idx`` (S, b) through xp.take on the flat matrix."""
    n = K.shape[0]
    flat = idx[:, :, None] * n + idx[:, None, :]
    s, b = idx.shape
    return xp.reshape(xp.take(xp.reshape(K, (-1,)), xp.reshape(flat, (-1,))), (s, b, b))


def _subset_terms(f, K, idx_np, xp, caller):
    idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(K))
    s, b = idx_np.shape
    K_sub = _subset_kernel(K, idx, xp)
    fc, _ = _as_column(f, xp)
    k = fc.shape[1]
    scale = _max_abs(fc, xp)  # the terms are quadratic in f: computed for f/scale, times scale² (exact)
    if scale > 0:
        fc = fc / scale
    f_sub = xp.reshape(xp.take(fc, xp.reshape(idx, (-1,)), axis=0), (s, b, k))
    w, V = _pd_eigh(K_sub, "K (a sub-batch block)", caller, xp)
    proj = xp.matrix_transpose(V) @ f_sub
    terms = xp.sum(xp.sum(proj * proj / w[:, :, None], axis=2), axis=1)
    if scale > 0:
        terms = (terms * scale) * scale
    return _finite(terms, caller, f"'f_values' (max |·| = {scale:.3g}) is too large for the inverse of 'K' "
                                  f"(sub-batch λ_min = {float(xp.min(w)):.3g})")


def sub_batch_term(f_values, K, indices, *, jitter=0.0):
    r"""One unscaled sub-batch term f(X_𝓘)ᵀK(X_𝓘, X_𝓘)⁻¹f(X_𝓘) (seed 003 Approximation 1, Algorithm 1 line 7).

    ``indices``: distinct integers into the N points (a sequence or a 1-D integer array).  By the Schur
    complement, for 𝓘 ⊂ 𝓙 the term of 𝓘 is ≤ the term of 𝓙; in particular every term is ≤ the full
    norm :func:`rkhs_norm_sq`.  Returns a 0-d array.
    """
    caller = "sub_batch_term"
    xp = namespace(f_values, K)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = _check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    idx = _check_indices(indices, n, caller)
    K = _with_jitter(K, jitter, caller, xp)
    return _subset_terms(f, K, idx[None, :], xp, caller)[0]


def _check_indices(indices, n, caller):
    try:
        idx = np.asarray(indices if not hasattr(indices, "__array_namespace__") else _host(indices)).reshape(-1)
    except Exception as exc:  # noqa: BLE001
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be integers: {exc}") from exc
    if idx.size == 0 or idx.dtype.kind not in "iu":
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be a non-empty sequence of integers.")
    if idx.min() < 0 or idx.max() >= n or len(set(idx.tolist())) != idx.size:
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be distinct integers in [0, {n}).")
    return idx.astype(np.int64)


def _host(x):
    from ._backend import to_numpy

    return to_numpy(x)


def sub_batch_rkhs_norm(f_values, K, subset_size, *, n_draws=1, seed=None, scaled=True, jitter=0.0):
    r"""Sub-batch estimate of the RKHS norm (seed 003 Approximation 1).

    .. math::  \|f\|^2_{\mathcal H} ≈ \frac{N}{b}\,\mathbb E_{𝓘}\big[f(X_𝓘)^\top K(X_𝓘, X_𝓘)^{-1} f(X_𝓘)\big],

    with 𝓘 a uniformly random subset of b distinct points.  ``n_draws``: number of random subsets (seeded
    by ``seed``), or ``"all"`` to average over all C(N, b) subsets exactly (at most 200 000 of them).
    ``scaled=False`` omits the N/b factor.

    The estimator is **biased** (the dissertation says so: K_𝓘𝓘⁻¹ is a block of K, not of K⁻¹).  Exact
    facts (tested): each unscaled term is ≤ the full norm (Schur complement), so the unscaled mean
    under-estimates; for diagonal K the scaled all-subsets mean equals the full norm; for block-diagonal K,
    the terms of the blocks add up to the full norm.  Returns a 0-d array.
    """
    caller = "sub_batch_rkhs_norm"
    xp = namespace(f_values, K)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = _check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    b = check_int(subset_size, "subset_size", caller=caller, low=1, high=n)
    K = _with_jitter(K, jitter, caller, xp)
    if isinstance(n_draws, str):
        check_option(n_draws, "n_draws", ("all",), caller=caller)
        count = math.comb(n, b)
        if count > 200_000:
            raise InvalidParameterError(f"n_draws='all' of {caller} would enumerate C({n}, {b}) = {count} subsets (> 200000).")
        idx = np.asarray(list(itertools.combinations(range(n), b)), dtype=np.int64)
    else:
        draws = check_int(n_draws, "n_draws", caller=caller, low=1)
        rng = _rng(seed)
        idx = np.stack([rng.choice(n, size=b, replace=False) for _ in range(draws)]).astype(np.int64)
    terms = []
    for start in range(0, idx.shape[0], 4096):  # bounded memory for the stacked sub-blocks
        terms.append(_subset_terms(f, K, idx[start : start + 4096], xp, caller))
    mean = xp.mean(xp.concat(terms))
    return _finite(mean * (n / b) if scaled else mean, caller, "'f_values' is too large for the inverse of 'K'")


def tau_from_zeta(zeta, n, *, noise_std=1.0, subset_size=None):
    r"""Algorithm 1 / (2.10)'s τ that reproduces (2.4)'s ζ (seed 003 footnote 1: "τ is a hyperparameter").

    (2.4) × N/(2s²) with a Gaussian likelihood of standard deviation s (−log p = (f − y)²/(2s²) + const):
    Σ(f − y)²/(2s²) + (ζN/(2s²))·fᵀK⁻¹f, so τ = ζN/(2s²); with a sub-batch of b points, Approximation 1's
    N/b factor is absorbed into τ: τ = ζN²/(2s²b) multiplies the **unscaled** term f(X_𝓘)ᵀΘ_𝓘𝓘⁻¹f(X_𝓘)
    (Algorithm 1 line 7), which is what :func:`train_regularized` with ``subset_size=b`` and this ζ
    minimises (tested against its recorded objective).  Returns a float.
    """
    caller = "tau_from_zeta"
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    n = check_int(n, "n", caller=caller, low=1)
    s = check_real(noise_std, "noise_std", caller=caller, low=0.0, closed="neither")
    tau = zeta * n / (2.0 * s * s)
    if subset_size is not None:
        tau *= n / check_int(subset_size, "subset_size", caller=caller, low=1, high=n)
    return tau


# --------------------------------------------------------------------------- regulariser of a network
def _tree_axpy(a, x, y):
    """y + a·x over params-shaped structures (lists of (W, b) or tuples of such lists)."""
    if isinstance(y, tuple):
        return tuple(_tree_axpy(a, xi, yi) for xi, yi in zip(x, y))
    return [(Wy + a * Wx, None if by is None else by + a * bx) for (Wx, bx), (Wy, by) in zip(x, y)]


def _first_array(params):
    p = params
    while isinstance(p, (tuple, list)):
        p = p[0]
    return p


def ntk_regularizer(net, params, x_sub, *, tau=1.0, kernel=None, jitter=0.0):
    r"""The NTK function-norm regulariser of a network and its stop-gradient parameter gradient.

    R(θ) = τ f_θ(X_𝓘)ᵀ Θ(X_𝓘, X_𝓘)⁻¹ f_θ(X_𝓘)  (seed 003 Algorithm 1 line 7, (2.10); (2.4) with 𝒦).

    Θ is the empirical tangent kernel ``net.empirical_ntk(params, x_sub)`` at the current parameters
    (``kernel=None``) or a given constant matrix (e.g. the analytic NTK 𝒦(X_𝓘, X_𝓘) of (2.4)).  As in
    the dissertation (§2.6.1, "the inverse kernel matrix is not involved in auto-differentiation") Θ is held
    constant: the returned gradient is

        ∇_θ R = 2τ J_𝓘ᵀ Θ⁻¹ f(X_𝓘)   (one ``net.vjp`` with cotangent 2τΘ⁻¹f(X_𝓘)),

    which is *not* the full derivative of R when Θ depends on θ.  With the empirical Θ = J_𝓘J_𝓘ᵀ and
    J_𝓘 of full row rank, J_𝓘∇_θR = 2τ f(X_𝓘) exactly: in function space the regulariser is a pure decay
    (eq. (2.17)).

    Parameters
    ----------
    net : a network with ``apply``, ``vjp`` and ``empirical_ntk`` (e.g. :class:`ntkref.nets.FullyConnected`,
        :class:`~ntkref.nets.Antisymmetric`, :class:`~ntkref.nets.Linearized`).
    params : the network's parameters.
    x_sub : array, shape (b, d)
        The sub-batch X_𝓘 (b ≤ number of parameters, else Θ is singular; use ``jitter`` explicitly).
    tau : float ≥ 0
    kernel : None or array (b, b)
    jitter : float ≥ 0, added to Θ.

    Returns
    -------
    value : 0-d array
    grads : parameters-shaped gradient.
    """
    caller = "ntk_regularizer"
    tau = check_real(tau, "tau", caller=caller, low=0.0)
    first = _first_array(params)
    xp = namespace(first, x_sub)
    x_sub = check_array(x_sub, "x_sub", caller=caller, xp=xp, like=first, ndim=_input_ndim(net),
                        dtype=first.dtype if _is_real_array(first, xp) else None)
    if x_sub.ndim == 0 or x_sub.shape[0] == 0:
        raise InvalidParameterError(f"The 'x_sub' parameter of {caller} must hold at least one point; got shape "
                                    f"{tuple(x_sub.shape)}.")
    f = net.apply(params, x_sub)
    b = f.shape[0]
    if not bool(xp.all(xp.isfinite(f))):
        raise FloatingPointError(f"{caller}: the network's output on 'x_sub' overflows {f.dtype} (max |x_sub| = "
                                 f"{_max_abs(x_sub, xp):.3g}); rescale x_sub or params.")
    if kernel is None:
        Theta = _empirical_ntk(net, params, x_sub, "x_sub", caller)
        name = "kernel Θ(x_sub, x_sub) (the empirical NTK)"
    else:
        Theta = _check_kernel(kernel, "kernel", caller, xp, n=b, dtype=f.dtype)
        name = "kernel"
    Theta = _with_jitter(Theta, jitter, caller, xp)
    w, V = _pd_eigh(Theta, name, caller, xp)
    c = V @ ((xp.matrix_transpose(V) @ f) / w)
    value = tau * xp.sum(f * c)
    return value, net.vjp(params, x_sub, (2.0 * tau) * c)


def _input_ndim(net):
    """The number of input dimensions of a built-in net (2: (n, d); 4: images (n, c, h, w)); None if unknown."""
    from .nets import Antisymmetric, ConvNet, FullyConnected, HomogeneousNet, Linearized, Scaled

    while isinstance(net, (Antisymmetric, Linearized, Scaled)):
        net = net.net
    if isinstance(net, (FullyConnected, HomogeneousNet)):
        return 2
    return 4 if isinstance(net, ConvNet) else None


def _is_real_array(a, xp):
    from ._backend import is_array

    return is_array(a) and xp.isdtype(a.dtype, "real floating")


def _empirical_ntk(net, params, x, x_name, caller):
    """Θ(x, x) = net.empirical_ntk(params, x), symmetrised; a failure (the NTK out of the dtype's range) names
    the points the kernel is taken on."""
    try:
        Theta = net.empirical_ntk(params, x)
    except (InvalidParameterError, FloatingPointError) as exc:
        raise type(exc)(f"{caller}: the tangent kernel Θ on {x_name!r} cannot be computed: {exc}") from exc
    return (Theta + namespace(Theta).matrix_transpose(Theta)) / 2


@dataclass
class RegularizedTrajectory:
    """What :func:`train_regularized` recorded (arrays of the parameters' namespace; R records)."""

    steps: object  # (R,) step indices
    objective: object  # (R,) MSE + ζ·penalty (the penalty as estimated at that step)
    mse: object  # (R,) (1/N)Σ(f − y)²
    penalty: object  # (R,) the (estimated) f(X)ᵀΘ⁻¹f(X); NaN when ζ = 0 (not needed, Θ may be singular)
    f_train: object  # (R, N)
    f_test: object  # (R, M) or None
    params: object  # final parameters


def train_regularized(net, params, x, y, *, zeta, lr, steps, kernel=None, subset_size=None, seed=None,
                      jitter=0.0, x_test=None, record_every=None):
    r"""Full-batch gradient descent on MSE + ζ·(NTK function norm) (seed 003 (2.4)/(2.14), Algorithm 1).

    Objective, with f = f_θ and N training points:

    .. math::  L(θ) = \frac1N \sum_i (f(x_i) - y_i)^2 + ζ\,\hat R(θ),\qquad
               \hat R = f(X)^\top Θ(X, X)^{-1} f(X)

    (``subset_size=None``) or Approximation 1's (N/b)·f(X_𝓘)ᵀΘ(X_𝓘, X_𝓘)⁻¹f(X_𝓘) with a fresh uniformly
    random sub-batch of b points each step (``subset_size=b``; the draw of each step is
    ``sorted(numpy.random.default_rng(seed).choice(N, b, replace=False))`` from one generator).  Θ is the empirical NTK
    at the current parameters (``kernel=None``, held constant in the gradient as in Algorithm 1) or a fixed
    (N, N) matrix on the training points, e.g. the analytic NTK 𝒦(X, X) of (2.4) (its sub-batch blocks are
    taken for ``subset_size``).  Update: θ ← θ − lr·(vjp(X, (2/N)(f − Y)) + ζ·vjp(X_𝓘, 2(N/b)Θ⁻¹f_𝓘)).

    In function space (lazy regime, eq. (2.17)): df/dt = −lr((2/N)Θ(f − Y) + 2ζf), whose limit is the KRR
    predictor Θ(Θ + ζN I)⁻¹Y (Theorem 2.2.1); with a fixed 𝒦 the stationary training values are exactly
    𝒦(𝒦 + ζNI)⁻¹Y whenever Θ̂ is invertible.

    Returns a :class:`RegularizedTrajectory` recorded every ``record_every`` steps (default: only the
    start and the end).
    """
    caller = "train_regularized"
    first = _first_array(params)
    xp = namespace(first)
    if not _is_real_array(first, xp):
        raise InvalidParameterError(
            f"The 'params' parameter of {caller} must hold real floating arrays (as returned by net.init); got "
            f"{getattr(first, 'dtype', type(first).__name__)}.")
    dtype = first.dtype
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=dtype, like=_first_array(params))
    n = x.shape[0]
    y = _check_values(y, "y", caller, n, xp, dtype, ndim=1, like=x)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    every = steps if record_every is None else check_int(record_every, "record_every", caller=caller, low=1)
    every = max(every, 1)
    if x_test is not None:
        x_test = check_array(x_test, "x_test", caller=caller, ndim=2, xp=xp, dtype=dtype)
    K_fixed = None
    if kernel is not None:
        K_fixed = _with_jitter(_check_kernel(kernel, "kernel", caller, xp, n=n, dtype=dtype), jitter, caller, xp)
    b = n if subset_size is None else check_int(subset_size, "subset_size", caller=caller, low=1, high=n)
    rng = _rng(seed)
    arange = xp.arange(n, device=device_of(x))

    rec = {"steps": [], "objective": [], "mse": [], "penalty": [], "f_train": [], "f_test": []}

    def penalty_and_cotangent(p, f):
        if b == n:
            idx_np = np.arange(n)
        else:
            idx_np = np.sort(rng.choice(n, size=b, replace=False))
        idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(x))
        f_sub = xp.take(f, idx)
        if K_fixed is None:
            x_sub = x if b == n else xp.take(x, idx, axis=0)
            Theta = _with_jitter(_empirical_ntk(net, p, x_sub, "x", caller), jitter, caller, xp)
            name = "kernel Θ(x, x) (the empirical NTK)" if b == n else "kernel Θ(x[𝓘], x[𝓘]) (the empirical NTK)"
        else:
            Theta = K_fixed if b == n else _subset_kernel(K_fixed, idx[None, :], xp)[0, ...]
            name = "kernel" if b == n else "kernel (a sub-batch block)"
        w, V = _pd_eigh(Theta, name, caller, xp)
        c = V @ ((xp.matrix_transpose(V) @ f_sub) / w)
        scale = n / b
        pen = scale * xp.sum(f_sub * c)
        if b == n:
            cot = c
        else:  # scatter the sub-batch cotangent into the N training points
            onehot = xp.astype(idx[:, None] == arange[None, :], dtype)
            cot = xp.matmul(c[None, :], onehot)[0, :]
        return pen, (2.0 * scale) * cot

    def record(k, p, f, pen):
        mse = xp.mean((f - y) ** 2)
        rec["steps"].append(k)
        rec["mse"].append(mse)
        rec["penalty"].append(pen)
        rec["objective"].append(mse + zeta * pen if zeta > 0 else mse)
        rec["f_train"].append(f)
        if x_test is not None:
            rec["f_test"].append(net.apply(p, x_test))

    p = params
    for k in range(steps + 1):
        f = net.apply(p, x)
        _check_progress(f, y, k, caller, xp)
        if zeta > 0:
            pen, cot_reg = penalty_and_cotangent(p, f)
        else:
            pen = xp.asarray(float("nan"), dtype=dtype, device=device_of(x))
        if k % every == 0 or k == steps:
            record(k, p, f, pen)
        if k == steps:
            break
        cot = (2.0 / n) * (f - y)
        if zeta > 0:
            cot = cot + zeta * cot_reg
        p = _tree_axpy(-lr, net.vjp(p, x, cot), p)

    stack = lambda v: xp.stack(v) if v else None  # noqa: E731
    return RegularizedTrajectory(
        steps=xp.asarray(rec["steps"], device=device_of(x)), objective=stack(rec["objective"]), mse=stack(rec["mse"]),
        penalty=stack(rec["penalty"]), f_train=stack(rec["f_train"]), f_test=stack(rec["f_test"]), params=p,
    )


def _check_progress(f, y, k, caller, xp):
    """Finite or error at every step: the outputs and the squared error stay representable, else say why."""
    if bool(xp.all(xp.isfinite(f))) and math.isfinite(float(_sum_sq(f - y, xp))):
        return
    if k == 0:
        raise FloatingPointError(
            f"{caller}: the squared error (f(x) − y)² at the initial parameters overflows {f.dtype} "
            f"(max |y| = {_max_abs(y, xp):.3g}); rescale 'y' (or 'x'/'params').")
    raise FloatingPointError(f"{caller}: gradient descent diverged after {k} steps (the outputs or the squared "
                             f"error overflow); lower 'lr'.")


def regularized_gd_linear(features, y, zeta, *, lr, steps, features_test=None, theta0=None):
    r"""Gradient descent on the NTK-regularised objective for a linear-in-parameters model (Thm 2.2.1, exact form).

    Model f_θ(x) = φ(x)ᵀθ with features Φ = φ(X) of shape (N, P), P ≥ N and full row rank; its tangent
    kernel Θ = ΦΦᵀ does not depend on θ, so the regulariser's gradient needs no stop-gradient.  Objective
    (2.4) with 𝒦 = Θ: (1/N)‖Φθ − Y‖² + ζ(Φθ)ᵀΘ⁻¹(Φθ); update θ ← θ − lr·Φᵀ((2/N)(Φθ − Y) + 2ζΘ⁻¹Φθ).

    From θ₀ = 0 (default) the iterates stay in the row space of Φ and converge (for
    0 < lr < N/(λ_max(Θ) + ζN)) to θ* with φ(x)ᵀθ* = Θ(x, X)(Θ + ζNI)⁻¹Y **at every x** — the KRR
    predictor (2.5) with the model's own kernel.  In function space each step multiplies the error
    f − f_∞ by I − lr(2/N)(Θ + ζNI).

    Returns ``(theta, f_train, f_test)`` (``f_test`` None without ``features_test``).
    """
    caller = "regularized_gd_linear"
    xp = namespace(features, y)
    Phi = check_array(features, "features", caller=caller, ndim=2, xp=xp)
    n, P = Phi.shape
    y = _check_values(y, "y", caller, n, xp, Phi.dtype, ndim=1, like=Phi)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    Theta = Phi @ xp.matrix_transpose(Phi)
    if not bool(xp.all(xp.isfinite(Theta))):
        raise FloatingPointError(
            f"{caller}: the tangent kernel Θ = ΦΦᵀ of 'features' overflows {Phi.dtype} (max |features| = "
            f"{_max_abs(Phi, xp):.3g}); rescale the features.")
    w, V = _pd_eigh((Theta + xp.matrix_transpose(Theta)) / 2, "features (Θ = ΦΦᵀ)", caller, xp)
    theta = xp.zeros(P, dtype=Phi.dtype, device=device_of(Phi)) if theta0 is None else \
        _check_values(theta0, "theta0", caller, P, xp, Phi.dtype, ndim=1, like=Phi)
    PhiT = xp.matrix_transpose(Phi)
    for _ in range(steps):
        f = Phi @ theta
        reg = V @ ((xp.matrix_transpose(V) @ f) / w)
        theta = theta - lr * (PhiT @ ((2.0 / n) * (f - y) + (2.0 * zeta) * reg))
    if not bool(xp.all(xp.isfinite(theta))):  # finite or error: a diverged run is never returned as NaN/inf
        raise FloatingPointError(
            f"{caller}: gradient descent diverged (θ overflowed) with lr = {lr!r}; it converges for "
            f"0 < lr < N/(λ_max(Θ) + ζN) = {n / (float(xp.max(w)) + zeta * n):.6g}. Lower 'lr'.")
    f_test = None
    if features_test is not None:
        Pt = check_array(features_test, "features_test", caller=caller, ndim=2, xp=xp, dtype=Phi.dtype)
        if Pt.shape[1] != P:
            raise InvalidParameterError(f"features_test of {caller} must have {P} columns; got {Pt.shape[1]}.")
        f_test = Pt @ theta
    return theta, Phi @ theta, f_test


# --------------------------------------------------------------------------- closed-form flows
@dataclass
class Flow:
    """f_t on training points (T, N) and test points (T, M) or None, at ``times`` (T,)."""

    times: object
    train: object
    test: object


def _times(times, xp, dtype, device, caller):
    t = check_array(times, "times", caller=caller, ndim=(0, 1), xp=xp, dtype=dtype, device=device)
    t = xp.reshape(t, (-1,))
    if t.shape[0] > 0 and float(xp.min(t)) < 0:
        raise InvalidParameterError(f"The 'times' parameter of {caller} must be ≥ 0.")
    return t


def _phi1(z, xp):
    """(1 − e^{−z})/z, = 1 at z = 0 (stable through expm1)."""
    safe = xp.where(z > 0, z, xp.ones_like(z))
    return xp.where(z > 0, -xp.expm1(-safe) / safe, xp.ones_like(z))


def regularized_flow(K, Y, zeta, times, *, lr=1.0, f0=None, K_test=None, f0_test=None, printed=False):
    r"""Closed-form gradient flow of the NTK-regularised objective (seed 003 eqs. (2.31)–(2.33), corrected).

    The flow (2.32) with kernel K = 𝒦(X, X), rate η = ``lr`` and the mean convention of (2.4):

    .. math::  \frac{df}{dt} = -\frac{2η}{N}\big((K + ζN I) f - K Y\big),\qquad f(0) = f_0,

    has the solution (B = (2η/N)(K + ζNI))

    .. math::  f_t(X) = e^{-Bt} f_0 + (K + ζNI)^{-1} K (I - e^{-Bt}) Y,

    and at a test point x (the same flow for a model whose tangent kernel is K:
    df(x)/dt = −(2η/N)K(x, X)K⁻¹((K + ζNI)f(X) − KY))

    .. math::  f_t(x) = f_0(x) + K(x, X) K^{-1}(I - e^{-Bt})(f_∞ - f_0(X)),\quad f_∞ = (K + ζNI)^{-1}KY,

    which for f₀ = 0 is K(x, X)(K + ζNI)⁻¹(I − e^{−(2η/N)t(K + ζNI)})Y: (2.33) with the **corrected**
    exponent.  Both forms tend to the KRR predictor (2.5) as t → ∞.

    **Seed error**: (2.33) is printed with e^{−(2η/N)tK}; that does not solve (2.32) for ζ > 0 (it has the
    right t → ∞ limit but the wrong transient).  ``printed=True`` evaluates the printed formula (f₀ = 0
    only) so that the error can be shown (tests: it misses an ODE integration by ≫ the tolerance that the
    corrected form meets).

    ζ = 0 is (1.29) with Θ₀ = K and η replaced by 2η/N (see :func:`linearized_mse_flow`).

    A singular K (ζ = 0): eigenvalues w ≤ N·eps·w_max are exactly 0 (rounding cannot tell them from 0), so
    the flow stays in f₀ + range(K) at every t: along null(K) f(X) keeps f₀'s component and the test terms
    vanish (K(x, X)v = 0 when Kv = 0).  As t → ∞, f(X) → f₀(X) + P(Y − f₀(X)) with P the projection onto
    range(K), and f(x) → f₀(x) + K(x, X)K⁺(Y − f₀(X)) (the min-norm interpolant); duplicate points get the
    mean of their targets.

    Parameters
    ----------
    K : (N, N) symmetric PSD; it must be positive definite only when ``f0`` and ``K_test`` are both given
        with ζ > 0 (then K⁻¹ is needed).
    Y : (N,); zeta ≥ 0; times : scalar or (T,) non-negative; lr > 0.
    f0, f0_test : initial values on the training (N,) and test (M,) points (default 0).
    K_test : (M, N) kernel K(x, X) between test and training points.

    Returns
    -------
    Flow
        ``train`` (T, N), ``test`` (T, M) or None.  Computed from one eigendecomposition of K; accuracy
        ≈ cond(K + ζNI)·eps relative to max(‖Y‖, ‖f₀‖).
    """
    caller = "regularized_flow"
    xp = namespace(K, Y, f0, K_test, f0_test)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Y = _check_values(Y, "Y", caller, n, xp, K.dtype, ndim=1, like=K)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    t = _times(times, xp, K.dtype, device_of(K), caller)
    if printed and (f0 is not None or f0_test is not None):
        raise InvalidParameterError(f"printed=True of {caller}: (2.33) as printed assumes f0 = 0; do not pass f0.")
    f0 = xp.zeros_like(Y) if f0 is None else _check_values(f0, "f0", caller, n, xp, K.dtype, ndim=1, like=K)
    nonzero_f0 = bool(xp.any(f0 != 0))
    ridge = zeta * n
    need_pd = K_test is not None and nonzero_f0 and ridge > 0
    w, V = _pd_eigh(K, "K", caller, xp, need_pd=need_pd)
    # eigenvalues at rounding level (w ≤ n·eps·w_max, and the negatives of a PSD K) are exactly 0: eigh is
    # backward stable (its w are those of K + E, ‖E‖₂ ≲ n·eps·‖K‖₂), so such a direction cannot be told from
    # null(K); fitting it would move the flow out of range(K) at t ≳ N/(2η·n·eps·w_max) (duplicate points with
    # different targets got different outputs).  Along null(K) f stays f₀ and K(x, X)v = 0 (for a kernel,
    # K v = 0 ⇒ K(x, X) v = 0): the test terms there are exactly 0.
    in_range = w > n * _eps(K.dtype, xp) * max(float(xp.max(w)), 0.0)
    w = xp.where(in_range, w, xp.zeros_like(w))
    c = 2.0 * lr / n
    Vt = xp.matrix_transpose(V)
    y_t, f0_t = Vt @ Y, Vt @ f0
    b = c * (w + ridge)
    bt = t[:, None] * (c * w if printed else b)[None, :]  # (T, N) exponents
    one_minus_E = -xp.expm1(-bt)
    den = w + ridge
    if float(xp.min(den)) <= 0:  # ζ = 0 and K singular: the (1 − e^{−bt})/w factors stay finite
        gain = c * t[:, None] * _phi1(bt, xp)  # (1 − e^{−cwt})/w
    else:
        gain = one_minus_E / den[None, :]
    if printed:
        train_t = (w[None, :] * gain) * y_t[None, :]
    else:
        train_t = xp.exp(-bt) * f0_t[None, :] + (w[None, :] * gain) * y_t[None, :]
    train = train_t @ Vt
    test = None
    if K_test is not None:
        Kt = check_array(K_test, "K_test", caller=caller, ndim=2, xp=xp, dtype=K.dtype)
        if Kt.shape[1] != n:
            raise InvalidParameterError(f"K_test of {caller} must have {n} columns; got {tuple(Kt.shape)}.")
        m = Kt.shape[0]
        coef = gain * y_t[None, :]
        if nonzero_f0:
            if ridge > 0:  # need_pd: every w > 10·n·eps·w_max
                inv_w = 1.0 / xp.where(in_range, w, xp.ones_like(w))
                coef = coef - (one_minus_E * inv_w[None, :]) * f0_t[None, :]
            else:
                coef = coef - (c * t[:, None] * _phi1(bt, xp)) * f0_t[None, :]
        coef = xp.where(in_range[None, :], coef, xp.zeros_like(coef))  # K(x, X)v = 0 on null(K)
        test = coef @ xp.matrix_transpose(Kt @ V)
        if f0_test is not None:
            test = test + _check_values(f0_test, "f0_test", caller, m, xp, K.dtype, ndim=1, like=K)[None, :]
    elif f0_test is not None:
        raise InvalidParameterError(f"f0_test of {caller} needs K_test.")
    return Flow(times=t, train=train, test=test)


def flow_gap_bound(K, Theta, Y, zeta, *, printed=False):
    r"""Bound on the gap between the regularised flows with kernels Θ and K (seed 003 eqs. (2.34)–(2.36), corrected).

    With f_Θ solving (2.31) and f_K solving (2.32) from f₀ = 0 (same η; the bound does not depend on η),
    h = f_Θ − f_K solves h' = −Bh + (2η/N)(Θ − K)(Y − f_Θ), B = (2η/N)(K + ζNI), so

    .. math::  \sup_t \|h(t)\| \le \frac{\|Θ - K\|_2\,\sup_t\|Y - f_Θ(t)\|}{λ_{\min}(K) + ζN}
               \le \frac{\|Θ - K\|_2\,\|Y\|}{λ_{\min}(K) + ζN}

    (each eigencomponent of Y − f_Θ(t) lies between ζN/(λ + ζN) and 1 times that of Y, for PSD Θ).
    **Seed error**: the middle line of (2.36) integrates with ‖B‖ where λ_min(B) is needed; that gives
    ‖Θ − K‖‖Y‖/(λ_max(K) + ζN) (``printed=True``), which the flows violate when Θ − K acts along a small
    eigenvalue of K (tested).  ζ ≥ 0; ζ = 0 compares the unregularised flows and needs K positive definite
    (a singular K is refused).  Returns a float (an overflowing bound is a ``FloatingPointError``).
    """
    caller = "flow_gap_bound"
    xp = namespace(K, Theta, Y)
    K = _check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Th = _check_kernel(Theta, "Theta", caller, xp, n=n, dtype=K.dtype)
    Y = _check_values(Y, "Y", caller, n, xp, K.dtype, ndim=1, like=K)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    w, _ = _pd_eigh(K, "K", caller, xp, shift=zeta * n)
    _pd_eigh(Th, "Theta", caller, xp, need_pd=False)
    dw, _ = eigh(Th - K, xp)
    pert = float(xp.max(xp.abs(dw)))
    lam = float(xp.max(w)) if printed else float(xp.min(w))
    s = _max_abs(Y, xp)  # ‖Y‖ = s·‖Y/s‖: no overflow of Σ Y² when ‖Y‖ is representable
    y_norm = s * math.sqrt(float(_sum_sq(Y / s, xp))) if s > 0 else 0.0
    bound = pert * (y_norm / (max(lam, 0.0) + zeta * n))
    if not math.isfinite(bound):
        raise FloatingPointError(
            f"The result of {caller} overflows float: ‖Θ − K‖ = {pert:.3g} times ‖Y‖ = {y_norm:.3g} over "
            f"λ_min(K) + ζN = {max(lam, 0.0) + zeta * n:.3g}; rescale 'Y' (or 'K' and 'Theta').")
    return bound


def linearized_mse_flow(K, Y, times, *, lr=1.0, f0=None, K_test=None, f0_test=None, reduction="sum"):
    r"""The linearised network's MSE gradient flow (seed 003 eq. (1.29)).

    f_t(x) = f₀(x) − Θ₀(x, X)Θ₀⁻¹(I − e^{−η_eff Θ₀ t})(f₀(X) − Y) with

    - ``reduction="sum"``: loss Σᵢ ½(f(xᵢ) − yᵢ)², η_eff = η — (1.29) as printed;
    - ``reduction="mean"``: loss (1/N)Σᵢ ½(f(xᵢ) − yᵢ)² of (1.3), η_eff = η/N.

    **Seed convention**: (1.29) is stated after (1.3)'s 1/N mean but only holds for the sum (or with η/N).
    Evaluated as :func:`regularized_flow` with ζ = 0 and lr = η_eff·N/2; Θ₀ may be singular (its
    rounding-level eigenvalues count as 0: as t → ∞ the test outputs tend to f₀(x) + Θ₀(x, X)Θ₀⁺(Y − f₀(X))).
    """
    caller = "linearized_mse_flow"
    check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    xp = namespace(K)
    n = check_array(K, "K", caller=caller, ndim=2, xp=xp).shape[0]
    eta_eff = lr if reduction == "sum" else lr / n
    return regularized_flow(K, Y, 0.0, times, lr=eta_eff * n / 2.0, f0=f0, K_test=K_test, f0_test=f0_test)


# --------------------------------------------------------------------------- FS-MAP
def linearized_prior(f_mu, jac_mu, sigma):
    r"""Linearised Gaussian function prior (seed 003 Prop. 2.2.3, eqs. (2.44), (2.47)).

    For θ ~ N(μ, σ²I_P) and f̃(X; θ) = f(X; μ) + J_μ(X)(θ − μ): f̃(X) ~ N(f(X; μ), σ²J_μJ_μᵀ).
    (The dissertation then sets the mean to 0 and evaluates J at the current θ, (2.48) — an ad-hoc step.)

    ``f_mu``: (n,); ``jac_mu``: (n, P).  Returns ``(mean (n,), cov (n, n))``, cov exactly symmetric.
    """
    caller = "linearized_prior"
    xp = namespace(f_mu, jac_mu)
    J = check_array(jac_mu, "jac_mu", caller=caller, ndim=2, xp=xp)
    m = _check_values(f_mu, "f_mu", caller, J.shape[0], xp, J.dtype, ndim=1, like=J)
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    cov = (sigma * sigma) * (J @ xp.matrix_transpose(J))
    _finite(cov, caller, f"σ²·J Jᵀ with 'jac_mu' (max |·| = {_max_abs(J, xp):.3g}) and sigma = {sigma!r} is too large")
    return m, (cov + xp.matrix_transpose(cov)) / 2


def gaussian_logpdf(f, mean, cov, *, jitter=0.0):
    r"""log N(f; mean, cov) = −½(f − m)ᵀC⁻¹(f − m) − ½ log det(2πC), C = cov + jitter·I (seed 003 Prop. 2.2.3).

    The full density, *including* the log-determinant that the dissertation drops when it writes
    log p̃ = c·fᵀΘ⁻¹f.  C must be positive definite.  Returns a 0-d array.
    """
    return _gaussian_logpdf(f, mean, cov, jitter, "gaussian_logpdf", "cov")


def _gaussian_logpdf(f, mean, cov, jitter, caller, cov_name):
    xp = namespace(f, mean, cov)
    C = _with_jitter(_check_kernel(cov, cov_name, caller, xp), jitter, caller, xp)
    n = C.shape[0]
    f = _check_values(f, "f", caller, n, xp, C.dtype, ndim=1, like=C)
    m = _check_values(mean, "mean", caller, n, xp, C.dtype, ndim=1, like=C) if mean is not None else None
    w, V = _pd_eigh(C, cov_name, caller, xp)
    r = f if m is None else f - m
    proj = xp.matrix_transpose(V) @ r
    value = -0.5 * _quad(proj, w, xp) - 0.5 * (n * math.log(2 * math.pi) + xp.sum(xp.log(w)))
    what = "'f'" if m is None else "'f' − 'mean'"
    return _finite(value, caller, f"{what} (max |·| = {_max_abs(r, xp):.3g}) is too large for the inverse of "
                                  f"{cov_name!r} (λ_min = {float(xp.min(w)):.3g})")


def fs_map_log_prior(f, kernel, sigma, *, include_logdet=True, jitter=0.0):
    r"""The FS-MAP log-prior log p̃(f(X_𝓘)) of (2.48): f ~ N(0, σ²Θ(X_𝓘, X_𝓘)) (seed 003 §2.2.2).

    = −f ᵀΘ⁻¹f/(2σ²) − ½ log det(2πσ²Θ).  ``include_logdet=False`` gives the dissertation's expression
    c·fᵀΘ⁻¹f with c = −1/(2σ²) (the θ-dependent log-det dropped).  Hence the regulariser
    fᵀΘ⁻¹f = −2σ²(log p̃ + ½ log det(2πσ²Θ)).  Returns a 0-d array.

    When is the dropped log-det a constant?  Under Prop. 2.2.3 as literally stated, J (hence Θ = JJᵀ) is
    evaluated at the prior mean μ: Θ does not depend on the current parameters and −½ log det(2πσ²Θ) is a
    constant of the objective (dropping it changes nothing).  In (2.48) and Algorithm 1, Θ̂(θ) is the
    empirical NTK at the **current** θ: then ½ log det Θ̂(θ) varies with θ and dropping it changes the
    objective (tested: it differs between parameter points, and by the amount numpy's slogdet gives).
    """
    caller = "fs_map_log_prior"
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    xp = namespace(f, kernel)
    Th = _check_kernel(kernel, "kernel", caller, xp)
    if not include_logdet:
        value = -_rkhs_norm_sq(f, Th, jitter, caller, "f", "kernel") / (2 * sigma * sigma)
        return _finite(value, caller, f"'f' is too large for the inverse of σ²·'kernel' (sigma = {sigma!r})")
    return _gaussian_logpdf(f, None, (sigma * sigma) * Th, (sigma * sigma) * check_real(
        jitter, "jitter", caller=caller, low=0.0), caller, "kernel")


def gaussian_marginal(mean, cov, indices):
    """Marginal of N(mean, cov) on the coordinates ``indices``: (mean[I], cov[I, I]) (seed 003 (2.53)).

    Kolmogorov consistency: the marginal of the prior built on X_𝓘 equals the prior built on X_𝓙 ⊂ X_𝓘.
    ``mean`` (n,), ``cov`` (n, n), ``indices`` b distinct integers in [0, n): the result, ((b,), (b, b)), has
    the sub-batch's length b, not n — it is what the sub-batch penalty of (2.48)/Algorithm 1 uses.
    """
    caller = "gaussian_marginal"
    xp = namespace(mean, cov)
    C = _check_kernel(cov, "cov", caller, xp)
    m = _check_values(mean, "mean", caller, C.shape[0], xp, C.dtype, ndim=1, like=C)
    idx_np = _check_indices(indices, C.shape[0], caller)
    idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(C))
    return xp.take(m, idx), _subset_kernel(C, idx[None, :], xp)[0, ...]


def continual_learning_penalty(f_new, f_old, kernel_old, *, jitter=0.0):
    r"""Δf(C)ᵀΘ_{s−1}(C, C)⁻¹Δf(C), Δf = f_{θ_s}(C) − f_{θ_{s−1}}(C) on the coreset C (seed 003 eq. (2.11)).

    Θ_{s−1} is the tangent kernel frozen after task s − 1.  Zero when the function does not change.
    """
    caller = "continual_learning_penalty"
    xp = namespace(f_new, f_old, kernel_old)
    Th = _check_kernel(kernel_old, "kernel_old", caller, xp)
    a = _check_values(f_new, "f_new", caller, Th.shape[0], xp, Th.dtype, ndim=1, like=Th)
    b = _check_values(f_old, "f_old", caller, Th.shape[0], xp, Th.dtype, ndim=1, like=Th)
    return _rkhs_norm_sq(a - b, Th, jitter, caller, "f_new", "kernel_old", f_desc="'f_new' − 'f_old'")


def fs_map_objective(f, y, f_penalty, kernel, tau, *, noise_std=1.0, printed=False, jitter=0.0):
    r"""FS-MAP objective with a Gaussian likelihood (seed 003 eqs. (2.10), (2.11), to be **minimised**).

    Corrected:  −Σᵢ log p(yᵢ | f(xᵢ)) + τ·f_pᵀΘ⁻¹f_p,  −log p = (y − f)²/(2s²) + ½ log(2πs²),
    with f_p = f(X_𝓘) for (2.10) or Δf(C) for (2.11) (:func:`continual_learning_penalty`).

    Shapes: ``f`` and ``y`` are (N,) (the likelihood's points); ``f_penalty`` is (b,) and ``kernel``
    (b, b) — the penalty's points, which may be a sub-batch X_𝓘 (b < N) or a coreset C, so f_p need not
    have f's length.  With the full batch (f_p = f, Θ = K) and τ = :func:`tau_from_zeta` (ζ, N, noise_std=s),
    the objective is N/(2s²) times (2.4) plus a constant: its minimiser is K(K + ζNI)⁻¹Y (tested).

    **Seed error**: (2.10) and (2.11) are printed with +Σ log p; minimising that pushes f *away* from
    the labels (``printed=True`` evaluates it: its stationary point is Θ(Θ − 2τs²I)⁻¹Y instead of the
    KRR/MAP solution Θ(Θ + 2τs²I)⁻¹Y, and it is unbounded below when τ < λ_max(Θ)/(2s²)).
    Returns a 0-d array.
    """
    caller = "fs_map_objective"
    xp = namespace(f, y, f_penalty, kernel)
    f = check_array(f, "f", caller=caller, ndim=1, xp=xp)
    y = _check_values(y, "y", caller, f.shape[0], xp, f.dtype, ndim=1, like=f)
    tau = check_real(tau, "tau", caller=caller, low=0.0)
    s = check_real(noise_std, "noise_std", caller=caller, low=0.0, closed="neither")
    nll = _sum_sq(y - f, xp) / (2 * s * s) + 0.5 * f.shape[0] * math.log(2 * math.pi * s * s)
    _finite(nll, caller, f"'y' − 'f' (max |·| = {_max_abs(y - f, xp):.3g}) is too large for noise_std = {s!r}")
    pen = _rkhs_norm_sq(f_penalty, kernel, jitter, caller, "f_penalty", "kernel")
    return _finite((-nll if printed else nll) + tau * pen, caller,
                   "the likelihood term plus tau times the penalty of 'f_penalty'")


# --------------------------------------------------------------------------- generalisation bounds
def _trace(gram_trace, n, caller):
    if hasattr(gram_trace, "shape") and len(gram_trace.shape) == 2:
        G = _check_kernel(gram_trace, "gram_trace", caller, n=n)  # the N×N sample Gram matrix, nothing else
        xp = namespace(G)
        return float(xp.sum(G * xp.eye(G.shape[0], dtype=G.dtype, device=device_of(G))))
    return check_real(gram_trace, "gram_trace", caller=caller, low=0.0)


def kernel_generalization_bound(n, delta, *, r, Lam, gram_trace=None):
    r"""Theorem 1.2.1 (Mohri et al. 2012, Thm 10.7) as printed in seed 003 eqs. (1.19), (1.20).

    (1.19): 8r²Λ²/√N · (1 + ½√(log(1/δ)/2)) (``gram_trace=None``);
    (1.20): 8r²Λ²/√N · (√(Tr K/(N r²)) + ¾√(log(2/δ)/2)), Tr K the trace of the **sample** Gram matrix
    K(X, X) (a number, or the (N, N) matrix itself; a matrix of another shape is refused).  Requires
    K(x, x) ≤ r², so Tr K ≤ N r² (checked).  The Tr K term is 8rΛ·(Λ√(Tr K)/N), 8rΛ times the bound
    Λ√(Tr K)/N on the empirical Rademacher complexity (Λ/N)·E_ε√(εᵀKε) of the ball ‖f‖_H ≤ Λ, which is
    itself ≥ Λ√(Tr K)/(N√2) (Khintchine–Kahane): it scales as N^{-1/2} (tested by Monte Carlo).
    Returns the bound on R(h) − R̂(h) (a float).
    """
    caller = "kernel_generalization_bound"
    n = check_int(n, "n", caller=caller, low=1)
    delta = check_real(delta, "delta", caller=caller, low=0.0, high=1.0, closed="neither")
    r = check_real(r, "r", caller=caller, low=0.0, closed="neither")
    Lam = check_real(Lam, "Lam", caller=caller, low=0.0)
    lead = 8.0 * r * r * Lam * Lam / math.sqrt(n)
    if gram_trace is None:
        return lead * (1.0 + 0.5 * math.sqrt(math.log(1.0 / delta) / 2.0))
    tr = _trace(gram_trace, n, caller)
    if tr > n * r * r * (1 + 1e-12):
        raise InvalidParameterError(
            f"gram_trace of {caller} = {tr:.6g} exceeds N·r² = {n * r * r:.6g}: the theorem needs K(x, x) ≤ r²."
        )
    return lead * (math.sqrt(tr / (n * r * r)) + 0.75 * math.sqrt(math.log(2.0 / delta) / 2.0))


def ntk_regularized_generalization_bound(n, delta, *, Lam, C1, gram_trace, eps=0.0, C0=0.0, kappa=1.0, c=0.0):
    r"""Theorem 2.2.2 / 2.6.4 (seed 003 eq. (2.7)) with the sample Gram trace.

    R(f_nr) − R̂(f_nr) ≤ 4(C₀κ + c)ε + 8C₁²Λ²/√N · (√(C_K/(N C₁²)) + ¾√(log(2/δ)/2)),

    where ε is Theorem 2.2.1's gap, r = C₁ and **C_K = Tr 𝒦(X, X), the trace of the N×N sample Gram
    matrix** (≈ N·E𝒦(x, x)), as in the theorem the proof invokes ((1.20), Mohri Thm 10.7).  **Seed error**:
    the dissertation takes C_K = Tr(𝒦) as an operator trace, an O(1) constant; the cited theorem does not
    support that, and it makes the complexity term √N too small.  Λ bounds ‖f‖_H; for KRR,
    Λ² ≤ ‖Y‖²/(4ζN) (:func:`krr_norm_bound`).  Returns a float.
    """
    caller = "ntk_regularized_generalization_bound"
    C1 = check_real(C1, "C1", caller=caller, low=0.0, closed="neither")  # r = C₁ of (1.20): checked by its name here
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    C0 = check_real(C0, "C0", caller=caller, low=0.0)
    kappa = check_real(kappa, "kappa", caller=caller, low=0.0)
    c = check_real(c, "c", caller=caller, low=0.0)
    return 4.0 * (C0 * kappa + c) * eps + kernel_generalization_bound(n, delta, r=C1, Lam=Lam, gram_trace=gram_trace)
