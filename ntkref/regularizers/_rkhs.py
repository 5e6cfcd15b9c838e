r"""RKHS norms, kernel ridge regression and Approximation 1's sub-batch estimator (seed 003, Chapter 2).

Holds, besides the public functions:

- the checked linear algebra every module of :mod:`ntkref.regularizers` goes through (also used by
  ``_training`` and ``_priors``): :func:`check_kernel` (square, symmetric up to √eps·max|K|, symmetrised),
  :func:`check_values`, :func:`with_jitter` (K + jitter·I, never silently), :func:`pd_eigh` (the symmetric
  eigendecomposition, refusing λ_min ≤ 10·N·eps·λ_max), the exactly rescaled sums :func:`quad` (Σ proj²/w)
  and :func:`sum_sq` (Σ r²), :func:`finite` (finite or error), :func:`named_rkhs_norm_sq` (f(X)ᵀK⁻¹f(X)
  with the caller's parameter names), :func:`subset_kernel` and :func:`check_indices` (sub-batch blocks);
- (2.1)/(1.12) dual and (2.2) primal RKHS norms (:func:`rkhs_norm_sq`, :func:`rkhs_norm_sq_dual`);
- (1.13)–(1.17), (2.5): kernel ridge regression with the mean convention α = (K + ζN I)⁻¹Y
  (:func:`krr_fit`, :func:`krr_predict`, :func:`krr_objective`) and the norm bound ‖Y‖²/(4ζN)
  (:func:`krr_norm_bound`);
- Approximation 1: the sub-batch terms f(X_𝓘)ᵀK(X_𝓘, X_𝓘)⁻¹f(X_𝓘) and their (N/b)-scaled mean
  (:func:`sub_batch_term`, :func:`sub_batch_rkhs_norm`), and (2.10)'s τ that reproduces (2.4)'s ζ
  (:func:`tau_from_zeta`).
"""
from __future__ import annotations

import itertools
import math

import numpy as np  # host side only: seeded sub-batch draws and integer index bookkeeping, never the math

from .._lib.backend import device_of, namespace, to_numpy
from .._lib.compat import eigh
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real


# --------------------------------------------------------------------------- helpers
def eps(dtype, xp):
    return float(xp.finfo(dtype).eps)


def check_kernel(K, name, caller, xp=None, n=None, dtype=None):
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
    if asym > math.sqrt(eps(K.dtype, xp)) * max(scale, 1e-300):
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be symmetric; max |K − Kᵀ| = {asym:.3g} (max |K| = {scale:.3g})."
        )
    return (K + xp.matrix_transpose(K)) / 2


def with_jitter(K, jitter, caller, xp):
    jitter = check_real(jitter, "jitter", caller=caller, low=0.0)
    if jitter == 0.0:
        return K
    return K + jitter * xp.eye(K.shape[-1], dtype=K.dtype, device=device_of(K))


def pd_eigh(K, name, caller, xp, *, shift=0.0, need_pd=True):
    """eigh of a symmetric (stack of) matrix; with ``need_pd`` refuse λ_min(K) + shift ≤ 10·n·eps·λ_max."""
    w, V = eigh(K, xp)
    n = K.shape[-1]
    top = float(xp.max(xp.abs(w))) + abs(shift)
    tol = 10.0 * n * eps(K.dtype, xp) * max(top, 1e-300)
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


def check_values(f, name, caller, n, xp, dtype, ndim=(1, 2), like=None):
    f = check_array(f, name, caller=caller, ndim=ndim, xp=xp, dtype=dtype, like=like)
    if f.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have {n} rows (one per point); got {tuple(f.shape)}.")
    return f


def max_abs(a, xp):
    return float(xp.max(xp.abs(a))) if a.size else 0.0


def quad(proj, w, xp):
    """Σ proj²/w (w > 0) through proj/s, s = max|proj|, so that proj² never overflows or underflows when the
    result is representable: Σ(proj/s)²/w · s · s (quadratic in proj, so the rescaling is exact)."""
    s = max_abs(proj, xp)
    if s == 0.0:
        return xp.sum(proj * proj / w)
    q = proj / s
    return (xp.sum(q * q / w) * s) * s


def sum_sq(r, xp):
    """Σ r² through r/s, s = max|r| (exact rescaling; finite whenever the sum is)."""
    s = max_abs(r, xp)
    if s == 0.0 or not math.isfinite(s):
        return xp.sum(r * r)
    q = r / s
    return (xp.sum(q * q) * s) * s


def finite(value, caller, what):
    """Finite or error: a result that is ±inf/NaN for finite valid inputs is out of the dtype's range."""
    xp = namespace(value)
    if not bool(xp.all(xp.isfinite(value))):
        raise FloatingPointError(
            f"The result of {caller} overflows {value.dtype}: {what}. Rescale the inputs (the exact value is not "
            f"representable in this dtype).")
    return value


def as_column(f, xp):
    return (f[:, None], True) if f.ndim == 1 else (f, False)


def as_generator(seed):
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
    return named_rkhs_norm_sq(f_values, K, jitter, "rkhs_norm_sq", "f_values", "K")


def named_rkhs_norm_sq(f_values, K, jitter, caller, f_name, K_name, f_desc=None):
    """f(X)ᵀK⁻¹f(X) with the caller's parameter names in every message (``f_desc``: what f is, if derived)."""
    xp = namespace(f_values, K)
    K = check_kernel(K, K_name, caller, xp)
    f = check_values(f_values, f_name, caller, K.shape[0], xp, K.dtype, like=K)
    K = with_jitter(K, jitter, caller, xp)
    w, V = pd_eigh(K, K_name, caller, xp)
    proj = xp.matrix_transpose(V) @ as_column(f, xp)[0]
    return finite(quad(proj, w[:, None], xp), caller,
                   f"{f_desc or repr(f_name)} (max |·| = {max_abs(f, xp):.3g}) is too large for the inverse of "
                   f"{K_name!r} (λ_min = {float(xp.min(w)):.3g})")


def rkhs_norm_sq_dual(alpha, K):
    r"""Dual RKHS norm ‖f‖²_H = αᵀK(X, X)α of f = Σⱼ αⱼK(xⱼ, ·) (seed 003 eqs. (1.12), (2.1)).

    ``alpha`` has shape (N,) or (N, k) (columns summed); K is symmetric PSD (N, N).
    """
    caller = "rkhs_norm_sq_dual"
    xp = namespace(alpha, K)
    K = check_kernel(K, "K", caller, xp)
    a = as_column(check_values(alpha, "alpha", caller, K.shape[0], xp, K.dtype, like=K), xp)[0]
    s = max_abs(a, xp)
    if s == 0.0:
        return xp.sum(a * (K @ a))
    u = a / s  # αᵀKα = s²·uᵀKu: exact rescaling, so that Kα never overflows when the norm is representable
    return finite((xp.sum(u * (K @ u)) * s) * s, caller,
                   f"'alpha' (max |·| = {s:.3g}) is too large for 'K' (max |·| = {max_abs(K, xp):.3g})")


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
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Y = check_values(Y, "Y", caller, n, xp, K.dtype, like=K)
    ridge = _ridge(zeta, n, reduction, caller)
    K = with_jitter(K, jitter, caller, xp)
    w, V = pd_eigh(K, "K", caller, xp, shift=ridge)
    Yc, squeeze = as_column(Y, xp)
    alpha = V @ ((xp.matrix_transpose(V) @ Yc) / (w + ridge)[:, None])
    return alpha[:, 0] if squeeze else alpha


def krr_predict(K_test_train, alpha):
    """KRR prediction f(x) = K(x, X)α (seed 003 eq. (1.16)/(2.5)); K_test_train is (M, N), α (N,) or (N, k)."""
    caller = "krr_predict"
    xp = namespace(K_test_train, alpha)
    Kt = check_array(K_test_train, "K_test_train", caller=caller, ndim=2, xp=xp)
    a = check_values(alpha, "alpha", caller, Kt.shape[1], xp, Kt.dtype, like=Kt)
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
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    Y = check_values(Y, "Y", caller, n, xp, K.dtype, like=K)
    if tuple(f.shape) != tuple(Y.shape):
        raise InvalidParameterError(f"f_values {tuple(f.shape)} and Y {tuple(Y.shape)} of {caller} must have the same shape.")
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    check_option(reduction, "reduction", ("mean", "sum"), caller=caller)
    fit = sum_sq(f - Y, xp) / (n if reduction == "mean" else 1)
    what = f"'f_values' − 'Y' (max |·| = {max_abs(f - Y, xp):.3g}) is too large"
    K = with_jitter(K, jitter, caller, xp)
    if zeta == 0.0:  # no penalty: K⁻¹ is not needed, so K may be singular (ridgeless fit (1.17))
        return finite(fit, caller, what)
    w, V = pd_eigh(K, "K", caller, xp)
    proj = xp.matrix_transpose(V) @ as_column(f, xp)[0]
    return finite(fit + zeta * quad(proj, w[:, None], xp), caller,
                   what + f", or 'f_values' (max |·| = {max_abs(f, xp):.3g}) for the inverse of 'K'")


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
    s = max_abs(Y, xp)  # ‖Y‖²/(4·ridge) = (s·‖Y/s‖/(2√ridge))², finite whenever the bound is
    t = s * math.sqrt(float(sum_sq(Y / s, xp))) / (2.0 * math.sqrt(ridge)) if s > 0 else 0.0
    bound = t * t
    if not math.isfinite(bound):
        raise FloatingPointError(
            f"The result of {caller} overflows float: 'Y' (max |·| = {s:.3g}) is too large for zeta = {zeta!r}; "
            f"rescale Y.")
    return bound


# --------------------------------------------------------------------------- Approximation 1
def subset_kernel(K, idx, xp):
    """K[idx][:, idx] for a stack of index rows ``idx`` (S, b) through xp.take on the flat matrix."""
    n = K.shape[0]
    flat = idx[:, :, None] * n + idx[:, None, :]
    s, b = idx.shape
    return xp.reshape(xp.take(xp.reshape(K, (-1,)), xp.reshape(flat, (-1,))), (s, b, b))


def _subset_terms(f, K, idx_np, xp, caller):
    idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(K))
    s, b = idx_np.shape
    K_sub = subset_kernel(K, idx, xp)
    fc, _ = as_column(f, xp)
    k = fc.shape[1]
    scale = max_abs(fc, xp)  # the terms are quadratic in f: computed for f/scale, times scale² (exact)
    if scale > 0:
        fc = fc / scale
    f_sub = xp.reshape(xp.take(fc, xp.reshape(idx, (-1,)), axis=0), (s, b, k))
    w, V = pd_eigh(K_sub, "K (a sub-batch block)", caller, xp)
    proj = xp.matrix_transpose(V) @ f_sub
    terms = xp.sum(xp.sum(proj * proj / w[:, :, None], axis=2), axis=1)
    if scale > 0:
        terms = (terms * scale) * scale
    return finite(terms, caller, f"'f_values' (max |·| = {scale:.3g}) is too large for the inverse of 'K' "
                                  f"(sub-batch λ_min = {float(xp.min(w)):.3g})")


def sub_batch_term(f_values, K, indices, *, jitter=0.0):
    r"""One unscaled sub-batch term f(X_𝓘)ᵀK(X_𝓘, X_𝓘)⁻¹f(X_𝓘) (seed 003 Approximation 1, Algorithm 1 line 7).

    ``indices``: distinct integers into the N points (a sequence or a 1-D integer array).  By the Schur
    complement, for 𝓘 ⊂ 𝓙 the term of 𝓘 is ≤ the term of 𝓙; in particular every term is ≤ the full
    norm :func:`rkhs_norm_sq`.  Returns a 0-d array.
    """
    caller = "sub_batch_term"
    xp = namespace(f_values, K)
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    idx = check_indices(indices, n, caller)
    K = with_jitter(K, jitter, caller, xp)
    return _subset_terms(f, K, idx[None, :], xp, caller)[0]


def check_indices(indices, n, caller):
    try:
        idx = np.asarray(indices if not hasattr(indices, "__array_namespace__") else to_numpy(indices)).reshape(-1)
    except Exception as exc:  # noqa: BLE001
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be integers: {exc}") from exc
    if idx.size == 0 or idx.dtype.kind not in "iu":
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be a non-empty sequence of integers.")
    if idx.min() < 0 or idx.max() >= n or len(set(idx.tolist())) != idx.size:
        raise InvalidParameterError(f"The 'indices' parameter of {caller} must be distinct integers in [0, {n}).")
    return idx.astype(np.int64)


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
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    f = check_values(f_values, "f_values", caller, n, xp, K.dtype, like=K)
    b = check_int(subset_size, "subset_size", caller=caller, low=1, high=n)
    K = with_jitter(K, jitter, caller, xp)
    if isinstance(n_draws, str):
        check_option(n_draws, "n_draws", ("all",), caller=caller)
        count = math.comb(n, b)
        if count > 200_000:
            raise InvalidParameterError(f"n_draws='all' of {caller} would enumerate C({n}, {b}) = {count} subsets (> 200000).")
        idx = np.asarray(list(itertools.combinations(range(n), b)), dtype=np.int64)
    else:
        draws = check_int(n_draws, "n_draws", caller=caller, low=1)
        rng = as_generator(seed)
        idx = np.stack([rng.choice(n, size=b, replace=False) for _ in range(draws)]).astype(np.int64)
    terms = []
    for start in range(0, idx.shape[0], 4096):  # bounded memory for the stacked sub-blocks
        terms.append(_subset_terms(f, K, idx[start : start + 4096], xp, caller))
    mean = xp.mean(xp.concat(terms))
    return finite(mean * (n / b) if scaled else mean, caller, "'f_values' is too large for the inverse of 'K'")


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
