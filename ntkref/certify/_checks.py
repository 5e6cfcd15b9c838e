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
