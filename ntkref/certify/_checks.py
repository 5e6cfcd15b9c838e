"""Argument checks and the exact power-of-two scaling shared by the certificates of :mod:`ntkref.certify`.

- Checks of the points, radii, box domains, coefficients α and ``tol`` (with the messages every certificate
  raises), and :func:`split_alpha`, which drops the training points with αᵢ = 0.
- The per-array normalisation behind the scale-free bounds (``ntkref.certify`` docstring, "Scale"):
  :func:`pow2_exponent`, :func:`normalized` (exact division by 2ᵏ), :func:`times_pow2` (scaling back; a bound
  whose result underflows is moved outward by the smallest normal number) and :func:`finite_out` (names the
  inputs when a bound overflows).

Also used by ``_ntk_interval`` (points, radius, domain, scaling), ``_radius`` (α, tol, scaling) and ``_ibp``
(domain, tol, :func:`dtype_eps`).
"""
from __future__ import annotations

import math
import numbers

from .._lib import compat as _compat
from .._lib.backend import device_of, is_array, namespace
from .._lib.validation import InvalidParameterError, check_array, check_real


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------
def dtype_eps(dtype, xp):
    """The machine epsilon of ``dtype`` as a Python float."""
    return float(xp.finfo(dtype).eps)


def check_points(x_train, x_test, caller, test_name="x_test"):
    xp = namespace(x_train, x_test)
    x_train = check_array(x_train, "x_train", caller=caller, ndim=2, xp=xp)
    x_test = check_array(x_test, test_name, caller=caller, ndim=2, xp=xp)
    if x_test.shape[1] != x_train.shape[1]:
        raise InvalidParameterError(
            f"The {test_name!r} parameter of {caller} must have as many columns as 'x_train' "
            f"({x_train.shape[1]}); got shape {tuple(x_test.shape)}."
        )
    if x_train.shape[1] == 0:
        raise InvalidParameterError(f"The 'x_train' parameter of {caller} must have at least one column.")
    if x_test.dtype != x_train.dtype:  # compute in the wider of the two
        dt = xp.float64 if xp.float64 in (x_test.dtype, x_train.dtype) else x_test.dtype
        x_train, x_test = xp.astype(x_train, dt), xp.astype(x_test, dt)
    return xp, x_train, x_test


def on_device_of(arr, given, like, xp):
    """``arr`` (converted from ``given``) on ``like``'s device: Python lists and scalars become arrays on the
    default device in :func:`check_array`; they are moved to the inputs' device here (arrays are left alone)."""
    if is_array(given):
        return arr
    dev = device_of(like)
    return arr if device_of(arr) == dev else xp.asarray(arr, device=dev)


def check_radius(radius, like, xp, caller, name="radius"):
    n, dtype = like.shape[0], like.dtype
    if isinstance(radius, numbers.Real) or getattr(radius, "shape", None) == ():
        r = check_real(radius, name, caller=caller, low=0.0)
        return xp.full((n,), r, dtype=dtype, device=device_of(like))
    r = on_device_of(check_array(radius, name, caller=caller, ndim=1, xp=xp, shape=(n,)), radius, like, xp)
    if r.shape[0] and not bool(xp.all(r >= 0)):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be non-negative.")
    return xp.astype(r, dtype)


def check_domain(domain, x_test, xp, caller, test_name="x_test"):
    if domain is None:
        return None
    try:
        lo, hi = domain
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"The 'domain' parameter of {caller} must be a pair (lo, hi) of scalars or arrays of shape (d,)."
        ) from None
    d = x_test.shape[1]
    out = []
    for name, v in (("domain[0]", lo), ("domain[1]", hi)):
        if isinstance(v, numbers.Real):
            if math.isnan(v):
                raise InvalidParameterError(f"The {name!r} parameter of {caller} must not be NaN.")
            arr = xp.full((d,), float(v), dtype=x_test.dtype, device=device_of(x_test))
        else:
            arr = check_array(v, name, caller=caller, ndim=1, xp=xp, shape=(d,), finite=False)
            arr = on_device_of(arr, v, x_test, xp)
            if bool(xp.any(xp.isnan(arr))):
                raise InvalidParameterError(f"The {name!r} parameter of {caller} must not contain NaN.")
            arr = xp.astype(arr, x_test.dtype)
        out.append(arr)
    lo, hi = out
    if not bool(xp.all(lo <= hi)):
        raise InvalidParameterError(f"The 'domain' parameter of {caller} must satisfy lo <= hi.")
    if x_test.shape[0] and not bool(xp.all((x_test >= lo) & (x_test <= hi))):
        raise InvalidParameterError(f"The {test_name!r} points of {caller} must lie inside 'domain'.")
    return lo, hi


def check_alpha(alpha, like, xp, caller):
    n_train, dtype = like.shape[0], like.dtype
    a = check_array(alpha, "alpha", caller=caller, ndim=1, xp=xp, shape=(n_train,))
    return xp.astype(on_device_of(a, alpha, like, xp), dtype)


def split_alpha(alpha, x_train, xp):
    keep = alpha != 0  # non-support vectors do not contribute
    if not bool(xp.all(keep)):
        idx = xp.nonzero(keep)[0]
        alpha = xp.take(alpha, idx)
        x_train = xp.take(x_train, idx, axis=0)
    return alpha, x_train


def check_tol(tol, dtype, xp, caller):
    """``tol`` in [4·eps, 1] for the computing dtype: a finer relative grid cannot be resolved.

    Below it, q = √(1 + tol) rounds to 1 (or to within an ulp of it) and the grid
    top·q^(−k) collapses: the bracket test hi ≤ lo·q and the snap's log q break (NaN radii).
    """
    tol = check_real(tol, "tol", caller=caller, low=0.0, high=1.0, closed="right")
    floor = 4.0 * dtype_eps(dtype, xp)
    if tol < floor:
        raise InvalidParameterError(
            f"The 'tol' parameter of {caller} must be at least 4*eps = {floor:.3g} for {dtype} inputs (a finer "
            f"relative tolerance cannot be resolved in that precision). Got {tol!r} instead."
        )
    return tol


# ---------------------------------------------------------------------------
# power-of-two scaling (exact)
# ---------------------------------------------------------------------------
def pow2_exponent(x, xp):
    """k with 2ᵏ ≤ max|x| < 2ᵏ⁺¹ — the array's scale as a power of two (0 for an empty or all-zero x).

    x / 2ᵏ is exact (a power-of-two scaling: the inputs are finite, so 2ᵏ is representable in their dtype, and
    the result's largest entry lies in [1, 2)); k = 0 leaves x alone, bit for bit.
    """
    if math.prod(x.shape) == 0:
        return 0
    big = float(xp.max(xp.abs(x)))
    if not big > 0.0:
        return 0
    return math.frexp(big)[1] - 1


def normalized(x, k):
    """x / 2ᵏ (exact, see :func:`pow2_exponent`)."""
    return x if k == 0 else x / math.ldexp(1.0, k)


def times_pow2(v, k, xp, outward=0):
    """v·2ᵏ, for a bound: ``outward`` = −1 (lower) or +1 (upper) keeps it a bound when the product underflows.

    The factor is applied in steps that are normal numbers of v's dtype (2ᵏ itself may not be representable).
    Each step is exact unless its result leaves the normal range: overflow gives ±inf (the caller reports it),
    and an underflowing result (below smallest_normal in magnitude; every step of k < 0 scales down, so
    only the result can be) is rounded with an absolute error of at most half the smallest subnormal
    (smallest_normal with flush-to-zero); so for k < 0 the bounds of magnitude ≤ smallest_normal are moved
    outward by smallest_normal.  Relative rounding, eps/2 per step at most, is covered by the callers' own
    slack.
    """
    if k == 0:
        return v
    fi = xp.finfo(v.dtype)
    k_min = math.frexp(float(fi.smallest_normal))[1] - 1  # −1022 (float64), −126 (float32)
    k_max = math.frexp(float(fi.max))[1] - 1  # 1023, 127
    if k > 0:  # results that would overflow become ±inf without the overflow itself (the caller reports them)
        over = xp.abs(v) > math.ldexp(float(fi.max), -k)
        inf = xp.where(v > 0, xp.full_like(v, math.inf), xp.full_like(v, -math.inf))
        v = xp.where(over, 0.0, v)
    rest = k
    while rest:
        step = min(max(rest, k_min), k_max)
        v = v * math.ldexp(1.0, step)
        rest -= step
    if k > 0:
        return xp.where(over, inf, v)
    if outward:
        tiny = float(fi.smallest_normal)
        v = xp.where(xp.abs(v) <= tiny, v + outward * tiny, v)
    return v


def finite_out(values, caller, names):
    """``values`` (a tuple of arrays) if all finite, else an error naming the inputs that are too large."""
    for v in values:
        xp = namespace(v)
        if not bool(xp.all(xp.isfinite(v))):
            listed = " and ".join(repr(n) for n in names)
            raise InvalidParameterError(
                f"{caller}: the bounds overflow {v.dtype} (the NTK is 1-homogeneous in each argument: "
                f"|Θ(x, x′)| ≤ ‖x‖‖x′‖); the values of {listed} are too large. Rescale them.")
    return values


# ---------------------------------------------------------------------------
# proven positive definiteness (Rump 2006)
# ---------------------------------------------------------------------------
_U64 = 2.0 ** -53
_ETA64 = 2.0 ** -1074


def rump_shift(n, trace, max_diag, u=_U64, eta=_ETA64):
    r"""The a-priori shift c of Rump's test: if the floating-point Cholesky factorization of Ã ⪯ A − cI runs to
    completion, A is positive definite.

    .. math::  c = \frac{\gamma_{n+2}}{1 - 2\gamma_{n+2}}\,\mathrm{tr}(A) + 4n\,(2(n+1) + \max_i a_{ii})\,\eta

    (S. M. Rump, "Verification of positive definiteness", BIT 46 (2006), with the underflow term as stated there;
    η the smallest positive subnormal of the working precision, u its unit roundoff).
    Proof of the main term: Cholesky run to completion gives R̂ᵀR̂ = Ã + ΔA with |ΔA| ≤ γ_{n+1}|R̂ᵀ||R̂| (Higham,
    Accuracy and Stability, Thm 10.3; any order of the inner products, no underflow), so ‖ΔA‖₂ ≤ γ_{n+1}‖R̂‖_F²
    ≤ γ_{n+1}/(1 − γ_{n+1})·tr(Ã); R̂ is nonsingular, so λ_min(Ã) > −‖ΔA‖₂ ≥ −c and A ⪰ Ã + cI ≻ 0.  Higham's
    theorem divides by r̂ⱼⱼ; LAPACK's unblocked potf2 in OpenBLAS/reference LAPACK multiplies by fl(1/r̂ⱼⱼ)
    instead, one more rounding per entry of R̂: γ_{n+2} (used here) covers it.  Assumptions: IEEE-754
    round-to-nearest with gradual underflow for + − × ÷ √ and a conventional (not Strassen-like) Cholesky (LAPACK's
    blocked potrf built on potf2, gemm and trsm; cuSOLVER's potrf for CuPy).  The result is rounded up.
    """
    g = (n + 2) * u / (1.0 - (n + 2) * u)
    c = g / (1.0 - 2.0 * g) * trace + 4.0 * n * (2.0 * (n + 1) + max_diag) * eta
    return c * (1.0 + 16.0 * u)


def frobenius_norm(K, xp):
    """‖K‖_F as a Python float, also where the squares of the entries underflow (max|K| ≲ 1.5e-162 gave 0.0 for a
    nonzero K): then recomputed on K scaled up by a power of two (exact) and scaled back; 0.0 only for K = 0."""
    fro = _compat.frobenius_norm(K, xp)
    if fro >= 2.0 ** -400 or math.prod(K.shape) == 0:
        return fro
    kmax = float(xp.max(xp.abs(K)))
    if kmax == 0.0:
        return 0.0
    k = -math.frexp(kmax)[1]  # K·2ᵏ has max entry in [1/2, 1) (2ᵏ itself may overflow: two steps)
    Ks = K * math.ldexp(1.0, k // 2) * math.ldexp(1.0, k - k // 2)
    return math.ldexp(_compat.frobenius_norm(Ks, xp), -k)


def prove_psd(K, xp, *, validate_shift=None):
    r"""Prove K ≻ 0 or bound λ_min(K) from below, by Rump's test (:func:`rump_shift`): returns (proven, margin).

    - ``(True, 0.0)``: the Cholesky factorization of K − c′I succeeded (c′ = c + 4u(max Kᵢᵢ + c), so that the
      rounded diagonal stays ≤ Kᵢᵢ − c): K is positive definite, proven (float32 K: in float64 on its exact copy).
    - ``(False, margin)``: that failed (e.g. a singular Gram: floating-point Cholesky cannot prove an exactly
      singular matrix PSD), but the Cholesky of Ã = fl(K + τI) succeeded, τ = ``validate_shift`` (default
      n·eps·‖K‖_F, the machines' validation shift; at least 4n·η): then K + margin·I ≻ 0 is proven, margin = τ_eff + c(Ã),
      τ_eff = τ + 2u(max|Kᵢᵢ| + τ) + 4η ≥ τ + the rounding of Ã's diagonal (u, η of K's dtype), i.e.
      λ_min(K) > −margin; margin > 0 always (η > 0), so 0.0 means only "K ≻ 0 proven".
    - ``(False, inf)``: both failed (K is not shown PSD at all; the machines refuse such a K).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.certify._checks import prove_psd
    >>> prove_psd(np.eye(3), np)                       # the identity is positive definite, proven
    (True, 0.0)
    >>> proven, margin = prove_psd(np.ones((3, 3)), np)   # rank 1: PSD but singular, only a margin
    >>> proven, bool(0 < margin < 1e-13)
    (False, True)
    """
    n = K.shape[0]
    if n == 0:
        return True, 0.0
    K64 = K if K.dtype == xp.float64 else xp.astype(K, xp.float64)
    d = xp.linalg.diagonal(K64)
    max_diag = float(xp.max(d))
    abs_diag = max(abs(max_diag), abs(float(xp.min(d))))  # max |Kᵢᵢ|
    trace = float(xp.sum(xp.maximum(d, 0.0))) * (1.0 + 2.0 * n * _U64)
    c = rump_shift(n, trace, max(max_diag, 0.0))
    # fl(Kᵢᵢ − c′) ≤ Kᵢᵢ − c: relative rounding u|Kᵢᵢ − c′| (normal) or η/2 absolute (subnormal)
    c_shift = c + 4.0 * _U64 * (abs_diag + c) + 2.0 * _ETA64
    if bool(xp.all(d > 0)) and _cholesky(K64, -c_shift, xp, _compat):
        return True, 0.0
    fi = xp.finfo(K.dtype)
    eps = float(fi.eps)
    eta_k = float(fi.smallest_normal) * eps  # the working dtype's smallest subnormal (exact in a Python float)
    tau = n * eps * frobenius_norm(K, xp) if validate_shift is None else float(validate_shift)
    if not (tau >= 0.0 and math.isfinite(tau)):
        return False, math.inf
    tau = max(tau, 4.0 * n * eta_k)  # at least the underflow level: n·eps·‖K‖_F rounds to 0 for subnormal K
    if not _cholesky(K, tau, xp, _compat):
        return False, math.inf
    u_k = eps / 2
    # Ã = fl(K + τI) in K's dtype: |Ãᵢᵢ − (Kᵢᵢ + τ)| ≤ 2u(|Kᵢᵢ| + τ)(1 + u) + η (τ rounded, then added; absolute
    # η terms for subnormal results, and for the underflow of these Python products)
    tau_eff = (tau + 2.0 * u_k * (abs_diag + tau) + 4.0 * eta_k) * (1.0 + 4.0 * _U64)
    margin = tau_eff + rump_shift(n, trace + n * tau_eff, abs_diag + tau_eff, u=u_k, eta=eta_k)
    margin = margin * (1.0 + 8.0 * _U64)
    if not margin > 0.0:  # (cannot happen: η > 0) never report 0 = "K ≻ 0 proven" without the proof
        return False, math.inf
    return False, margin


def _cholesky(K, shift, xp, _compat):
    ok = _compat.cholesky_succeeds(K, shift, xp)
    if ok is not None:
        return ok
    try:
        L = xp.linalg.cholesky(K + shift * xp.eye(K.shape[0], dtype=K.dtype, device=device_of(K)))
    except Exception:  # numpy/array_api_strict raise LinAlgError, torch its own error
        return False
    # CuPy returns NaN instead of raising; any backend: a factor is only a success with a finite L and a
    # positive diagonal (cheap, and backend-agnostic)
    return bool(xp.all(xp.isfinite(L))) and bool(xp.all(xp.linalg.diagonal(L) > 0))
