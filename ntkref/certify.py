r"""Robustness certificates: NTK interval bounds (seed 000 §4.2, App. H.1) and IBP (App. H.2).

Seed equations implemented
--------------------------
- Seed 000 eq. (63)–(64): the two-layer ReLU NTK
  Θ(x, x′) = ‖x‖‖x′‖ h(u) / (2πd),  h(u) = 2u(π − arccos u) + √(1 − u²),
  u = ⟨x, x′⟩ / (‖x‖‖x′‖), with Θ(x, 0) = Θ(0, x′) = 0.
- Seed 000 Thm 4.2 / App. H.1: interval bounds [Θᴸ, Θᵁ] of Θ(x, xᵢ) over a ball
  around x₀ and the bounds (65)–(66) of g(x) = Σᵢ αᵢ Θ(x, xᵢ):
  g ≥ Σ_{α>0} αΘᴸ + Σ_{α<0} αΘᵁ,  g ≤ Σ_{α<0} αΘᴸ + Σ_{α>0} αΘᵁ,
  and the certified radius (problem (10)) by bisection.
- Seed 000 App. H.2 eq. (67): interval bound propagation (IBP) through fully
  connected ReLU nets in NTK parameterization (centre/radius form).

Two NTK interval methods
------------------------
``method="paper"``
    App. H.1 as printed, with its errata fixed (docs/errata.md, seed 000 App. H.1): the ℓ∞ ball is mapped
    to the ℓ2 ball of radius √d·δ; ‖x‖ ∈ [max(‖x₀‖ − √dδ, 0), ‖x₀‖ + √dδ];
    ⟨x, x′⟩ ∈ ⟨x₀, x′⟩ ∓ √dδ‖x′‖; uᴸ, uᵁ by dividing by the norm end that makes
    the quotient extreme; then [hᴸ, hᵁ] and Θ = ‖x‖‖x′‖h/(2πd) with ‖x‖ and u
    treated as independent.  Fixes: (i) uᴸ is clipped to −1 (printed: only uᵁ
    is clipped to 1, so arccos(uᴸ) is NaN when uᴸ < −1); (ii) the ``else``
    branch of uᵁ must be (⟨x₀,x′⟩ **+** √dδ‖x′‖)/(‖x‖ᵁ‖x′‖) (printed with a minus:
    that is a value below the true maximum, an unsound bound); (iii) when
    ‖x‖ᴸ = 0 the quotient is ±∞, i.e. u can reach ∓1: we use uᴸ = −1 / uᵁ = 1
    instead of dividing by zero.  ``tests/test_certify.py`` shows the printed
    form failing (NaN and an unsound Θᵁ) and the fixed one holding.

``method="tight"``
    Sound and never looser than ``"paper"`` (proof below):

    * Hölder: for the ℓ∞ ball, ⟨x₀ + Δ, x′⟩ ranges exactly over
      ⟨x₀, x′⟩ ∓ δ‖x′‖₁ (the paper uses √dδ‖x′‖₂ ≥ δ‖x′‖₁).
    * Exact norm range: max ‖x₀ + Δ‖₂ = ‖ |x₀| + δ ‖₂,
      min ‖x₀ + Δ‖₂ = ‖ max(|x₀| − δ, 0) ‖₂ (coordinatewise, separable).
    * Optional box domain [lo, hi] (e.g. pixels in [0, 1]): the feasible set is
      the coordinate box [aⱼ, bⱼ] = [max(x₀ⱼ − δ, loⱼ), min(x₀ⱼ + δ, hiⱼ)]; then
      ⟨x, x′⟩ ∈ ⟨c, x′⟩ ∓ ⟨w, |x′|⟩ with c = (a + b)/2, w = (b − a)/2, and
      ‖x‖² ∈ [Σⱼ dist(0, [aⱼ, bⱼ])², Σⱼ max(aⱼ², bⱼ²)] — both exact
      (``exact_domain=True``: two matrix products per radius).  The default
      keeps the norm range exact and relaxes the dot range soundly to the one
      of the set where only coordinates *on* the boundary (x₀ⱼ = loⱼ or hiⱼ,
      e.g. the many zero pixels) are restricted to move inwards:
      ⟨x₀, x′⟩ − δ‖x′‖₁ + δ(E_lo·x′₊ + E_hi·x′₋) ≤ ⟨x, x′⟩ ≤
      ⟨x₀, x′⟩ + δ‖x′‖₁ − δ(E_hi·x′₊ + E_lo·x′₋), E = boundary indicators
      (two matrix products once; it contains the exact set, so it is sound).
    * Joint treatment of ‖x‖ and u.  Write p = ⟨x, x′⟩ and R = ‖x‖‖x′‖.  Then
      2πd·Θ = Φ(p, R) := R·h(p/R) = 2p·(π − arccos(p/R)) + √(R² − p²),
      the *perspective* of h.  h is convex on [−1, 1]
      (h″(u) = 2/√(1−u²) + (1−u²)^{−3/2} > 0), so Φ is jointly convex on the
      cone {|p| ≤ R}.  The pairs (p, R) reachable from the feasible set lie in
      the polygon P = [pᴸ, pᵁ] × [Rᴸ, Rᵁ] ∩ {|p| ≤ R} (ranges above; |p| ≤ R
      is Cauchy–Schwarz).  We return min_P Φ and max_P Φ, computed exactly:
      - max of a convex function over a polygon is attained at a vertex;
        every vertex of P lies on one of its four box edges;
      - Φ has no stationary point in the interior of the cone
        (∇Φ = (h′(t), h(t) − t h′(t)), t = p/R, cannot vanish: h′(t) = 0 only
        at t = u* where h(u*) ≠ 0), so the minimum lies on ∂P; Φ is linear on
        the cone's edges (Φ(R, R) = 2πR, Φ(−R, R) = 0), so it suffices to
        minimise along the four box edges.  On R = const the minimiser is
        p = clip(u*·R) (u* = argmin h); on p = const, ∂Φ/∂R = −cos 2θ / sin θ
        (u = cos θ) vanishes at |p|/R = 1/√2, so the minimiser is
        R = clip(√2·|p|).  Both are exact one-dimensional convex minimisations.
    * Soundness: every x in the feasible set gives a (p, R) ∈ P, so
      min_P Φ ≤ 2πd·Θ(x, x′) ≤ max_P Φ.  ``"tight"`` ≥ ``"paper"``: the tight
      ranges are contained in the paper's (we intersect them, so this also
      holds in floating point), and the paper's bound is the minimum of R·h(u)
      over the larger set {R ∈ [Rᴸ, Rᵁ], u ∈ [uᴸ, uᵁ]} which contains
      {(R, p/R) : (p, R) ∈ P}.

    ℓ2 balls (``norm="l2"``): ⟨x, x′⟩ ∈ ⟨x₀, x′⟩ ∓ δ‖x′‖₂ and
    ‖x‖ ∈ [max(‖x₀‖ − δ, 0), ‖x₀‖ + δ] (exact); with a domain these ranges are
    intersected with those of the ℓ∞ ball of the same radius ∩ domain (which
    contains the ℓ2 ball ∩ domain).

h and its minimum
-----------------
h(−1) = 0, h(1) = 2π, h is convex with its minimum h(u*) = −0.42973780... at
u* = −0.79410... (``H_ARGMIN``, ``H_MIN``: the float64 values nearest to the
root of h′ and to h there, from a 50-digit mpmath computation that the tests
repeat).  h < 0 exactly on (−1, −0.39423…).

Floating point
--------------
All bounds are exact in exact arithmetic.  To keep them sound in floating
point, the ranges of p and R are widened outward by γ = (d + 4)·eps times
their magnitude (the standard bound on the rounding error of a length-d dot
product), the Θ bounds by 32·eps·Rᵁ/(2πd), and the bounds of g by
(n + 2)·eps·Σᵢ|αᵢ||Θᵢ^bound| (the summation error).  This costs a relative ~1e-13 in float64
(~1e-4 in float32, where d·eps is large) and matters only for points whose
margin is at rounding level.  The widening of p is what prevents the √eps loss
of h near u = ±1 (h has a square-root singularity there) from making a bound
unsound.  The price: near u = ±1 the interval has width O(√((d+4)·eps))·‖x‖‖x′‖/d
even at δ = 0 (about 1e-7 relative in float64), elsewhere ~1e-13.

Scale.  Θ(a·x, b·x′) = ab·Θ(x, x′) for a, b > 0, and the ball {‖x − x₀‖ ≤ δ} (∩ domain) scales with x₀.
Every call therefore works on x₀/2^k0, xᵢ/2^kt (and α/2^ka), each array's largest entry in [1, 2), with
δ/2^k0, and scales the results back: exact power-of-two scalings, so nothing overflows or underflows on
the way (the products ‖x₀‖²‖xᵢ‖², (R − p)(R + p) would for inputs of size 1e±150 in float64, 1e±15 in
float32), inputs of ordinary size give the same bits as without scaling, and the results are exactly
homogeneous for power-of-two factors: ntk_interval(s·x₀, t·xᵢ, s·δ) = st·ntk_interval(x₀, xᵢ, δ),
output_bounds(c·α, t·xᵢ, s·x₀, s·δ) = cst·output_bounds(α, xᵢ, x₀, δ), certified_radius(c·α, t·xᵢ, s·x₀)
= s·certified_radius(α, xᵢ, x₀) (with max_radius scaled by s).  A bound whose value underflows when
scaled back (|Θ| below the dtype's smallest normal number) is moved outward by that number, so the
intervals contain Θ and g at every common scale of the inputs.  The normalisation is per array, not per
row: where a test row and a training row are both smaller than their arrays' largest by a factor below
about 2⁻²⁴⁰ (float64) or 2⁻²⁵ (float32) (one of them alone: 2⁻⁴⁸⁰, 2⁻⁵⁰), (R − p)(R + p) would underflow
and their bound would not be guaranteed: such inputs are refused with an error naming them (the smallest nonzero
row norms multiply to less than 4·√(smallest_normal/eps)) — certify rows of such different magnitudes in
separate calls.

Certified radius
----------------
For each test point x₀ with σ = sign g(x₀) ≠ 0 the certificate at radius δ is
σ·(bound of g on the ball) > 0 (the lower bound for σ = +1, the upper for
σ = −1).  The bounds are monotone in δ (the ranges are nested), so bisection
is valid.  All test points are bisected at once: after one matrix product of
test and training points, each step costs O(n_test·n_train) (plus O(n_test·d)
for the norm ranges); with ``exact_domain=True`` each step needs two matrix
products.
Bracket: [0, max_radius] (default max_radius: the distance of x₀ to the
origin in the ball's norm — there x = 0 is in the ball and g(0) = 0, so the
certificate must fail); points whose bound fails already at δ = 0 get 0.  The
bracket [lo, hi] (lo certified, hi not) shrinks by a safeguarded regula falsi
on the margin bound (secant proposals nudged towards closing the bracket,
bisection as fallback) until hi ≤ lo·√(1 + tol); then the result snaps to the
grid max_radius·(1 + tol)^(−k/2): r is the largest certified grid point, so r
is certified and r·(1 + tol) is not (r = max_radius if certified there; r = 0
if not certified even at max_radius·2⁻⁶⁰).  Snapping makes r a function of
the set of certified radii alone, so a method whose bounds are tighter never
returns a smaller radius.  Typically 6–8 bound evaluations in all.

IBP (App. H.2)
--------------
``params`` is a list of (W, b), W of shape (fan_in, fan_out), b of shape
(fan_out,) or None; layer l computes z = W_std·(h @ W)/√fan_in + b_std·b, ReLU
between layers, none on the readout (fan_out 1).  Intervals are propagated in
centre/radius form μ′ = W_std·(μ @ W)/√fan_in + b_std·b,
r′ = |W_std|·(r @ |W|)/√fan_in (eq. (67)), then ReLU on both ends.  For an ℓ2
ball the first layer uses the exact ℓ2 range (radius δ‖W_{:,k}‖₂).  The
official code certifies f − f₀ by subtracting f₀ at the *clean* point only,
which is not sound (docs/errata.md; a counterexample is in the tests): with
``params0`` we bound f₀ over the ball too: f − f₀ ∈ [fᴸ − f₀ᵁ, fᵁ − f₀ᴸ].
"""
from __future__ import annotations

import math
import numbers

from ._lib.backend import device_of, is_array, namespace
from ._lib import dispatch
from ._lib.validation import InvalidParameterError, check_array, check_labels, check_option, check_real
from ._lib.memory import check_memory

__all__ = [
    "H_ARGMIN",
    "H_MIN",
    "ntk_h",
    "ntk_interval",
    "dot_norm_ranges",
    "output_bounds",
    "certified_radius",
    "ibp_bounds",
    "ibp_radius",
]


# ---------------------------------------------------------------------------
# the function h of eq. (64) and its minimum (host-side scalar computation)
# ---------------------------------------------------------------------------
# u* = argmin h solves h′(u) = 2(π − arccos u) + u/√(1 − u²) = 0; in θ = arccos u:
# 2(π − θ) sin θ + cos θ = 0 (a simple root on (π/2, π)).  The constants are the float64 values nearest
# to the 50-digit roots u* = −0.794099864810322519301106…, h(u*) = −0.429737820518316118333536…
# (tests/test_certify.py recomputes them with mpmath.findroot).  Newton in double precision with
# h evaluated in double precision lands 1 ulp off, hence the literals.
H_ARGMIN = -0.7940998648103225
"""u* = argmin h over [−1, 1] (seed 000 App. H.1: −0.79410)."""
H_MIN = -0.4297378205183161
"""h(u*) = min h (seed 000 App. H.1: −0.4297378).  h < 0 exactly on (−1, −0.3942348686727…)."""

_SQRT2 = math.sqrt(2.0)


def _phi(p, R, xp):
    """Φ(p, R) = R·h(p/R) = 2p·(π − arccos(p/R)) + √(R² − p²), for R ≥ 0.

    p is clipped into [−R, R]; Φ(0, 0) = 0.  π − arccos(t) is computed as
    atan2(√(R²−p²), −p), accurate also near t = −1.
    """
    p = xp.minimum(xp.maximum(p, -R), R)
    q = xp.sqrt(xp.maximum((R - p) * (R + p), 0.0))
    return 2.0 * p * xp.atan2(q, -p) + q


def ntk_h(u):
    r"""h(u) = 2u(π − arccos u) + √(1 − u²) of seed 000 eq. (64).

    Parameters
    ----------
    u : array, values in [−1, 1] (clipped).

    Returns
    -------
    array of the same shape; h(−1) = 0, h(1) = 2π, min h = ``H_MIN`` at
    ``H_ARGMIN``.  Accurate to a few ulps of max(|h|, 1) for exact u.
    """
    u = check_array(u, "u", caller="ntk_h")
    xp = namespace(u)
    return _phi(u, xp.ones_like(u), xp)


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------
def _eps(dtype, xp):
    return float(xp.finfo(dtype).eps)


def _check_points(x_train, x_test, caller, test_name="x_test"):
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


def _on_device_of(arr, given, like, xp):
    """``arr`` (converted from ``given``) on ``like``'s device: Python lists and scalars become arrays on the
    default device in :func:`check_array`; they are moved to the inputs' device here (arrays are left alone)."""
    if is_array(given):
        return arr
    dev = device_of(like)
    return arr if device_of(arr) == dev else xp.asarray(arr, device=dev)


def _check_radius(radius, like, xp, caller, name="radius"):
    n, dtype = like.shape[0], like.dtype
    if isinstance(radius, numbers.Real) or getattr(radius, "shape", None) == ():
        r = check_real(radius, name, caller=caller, low=0.0)
        return xp.full((n,), r, dtype=dtype, device=device_of(like))
    r = _on_device_of(check_array(radius, name, caller=caller, ndim=1, xp=xp, shape=(n,)), radius, like, xp)
    if r.shape[0] and not bool(xp.all(r >= 0)):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be non-negative.")
    return xp.astype(r, dtype)


def _check_domain(domain, x_test, xp, caller, test_name="x_test"):
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
            arr = _on_device_of(arr, v, x_test, xp)
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


def _check_alpha(alpha, like, xp, caller):
    n_train, dtype = like.shape[0], like.dtype
    a = check_array(alpha, "alpha", caller=caller, ndim=1, xp=xp, shape=(n_train,))
    return xp.astype(_on_device_of(a, alpha, like, xp), dtype)


# ---------------------------------------------------------------------------
# ranges of p = <x, x'> and r = ||x|| over the feasible set
# ---------------------------------------------------------------------------
def _pow2_exponent(x, xp):
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


def _normalized(x, k):
    """x / 2ᵏ (exact, see :func:`_pow2_exponent`)."""
    return x if k == 0 else x / math.ldexp(1.0, k)


def _times_pow2(v, k, xp, outward=0):
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


def _finite_out(values, caller, names):
    """``values`` (a tuple of arrays) if all finite, else an error naming the inputs that are too large."""
    for v in values:
        xp = namespace(v)
        if not bool(xp.all(xp.isfinite(v))):
            listed = " and ".join(repr(n) for n in names)
            raise InvalidParameterError(
                f"{caller}: the bounds overflow {v.dtype} (the NTK is 1-homogeneous in each argument: "
                f"|Θ(x, x′)| ≤ ‖x‖‖x′‖); the values of {listed} are too large. Rescale them.")
    return values


class _NTKGeometry:
    """Quantities computed once per (x_test, x_train): the matrix product and norms."""

    def __init__(self, x_test, x_train, xp, norm, domain, method, exact_domain=False):
        # Θ(a·x, b·x′) = ab·Θ(x, x′) (a, b > 0) and the ball {‖x − x₀‖ ≤ δ} ∩ box scales with x₀: the geometry
        # works on x₀/s₀, x′/s_t (s₀ = 2^k0, s_t = 2^kt: the largest entry of each in [1, 2); exact, and
        # bit-identical results when no scaling is needed) with δ/s₀, and the results are scaled back
        # (_times_pow2), so that ⟨x₀, x′⟩, ‖x₀‖², (R − p)(R + p) neither overflow for large finite inputs nor
        # underflow for tiny ones.  The bounds are then homogeneous: exactly so for power-of-two factors.
        self.k0, self.kt = _pow2_exponent(x_test, xp), _pow2_exponent(x_train, xp)
        self.s0 = math.ldexp(1.0, self.k0)
        if self.k0:
            x_test = _normalized(x_test, self.k0)
            if domain is not None:
                domain = (_normalized(domain[0], self.k0), _normalized(domain[1], self.k0))
        x_train = _normalized(x_train, self.kt)
        self.xp, self.norm, self.domain, self.method = xp, norm, domain, method
        self.exact_domain = exact_domain
        self.x_test, self.x_train = x_test, x_train
        self.d = x_test.shape[1]
        self.dtype = x_test.dtype
        self.eps = _eps(self.dtype, xp)
        self.gamma = (self.d + 4) * self.eps
        self.p0 = x_test @ xp.matrix_transpose(x_train)  # the one O(n_test·n_train·d) product
        self.n2 = xp.sqrt(xp.sum(x_train * x_train, axis=1))  # ‖x′‖₂
        self.n1 = xp.sum(xp.abs(x_train), axis=1)  # ‖x′‖₁
        self.abs_test = xp.abs(x_test)
        self.x0_norm = xp.sqrt(xp.sum(x_test * x_test, axis=1))
        self.x0_l1 = xp.sum(self.abs_test, axis=1)
        if domain is not None and exact_domain:
            self.abs_train_T = xp.matrix_transpose(xp.abs(x_train))
            self.train_T = xp.matrix_transpose(x_train)
        elif domain is not None:
            # coordinates of x₀ on the box boundary can move only inwards: with E_lo = 𝟙(x₀ⱼ = loⱼ),
            # E_hi = 𝟙(x₀ⱼ = hiⱼ), x′₊ = max(x′, 0), x′₋ = max(−x′, 0) (computed once, two products):
            # ⟨x, x′⟩ ≥ ⟨x₀, x′⟩ − δ‖x′‖₁ + δ(E_lo·x′₊ + E_hi·x′₋),
            # ⟨x, x′⟩ ≤ ⟨x₀, x′⟩ + δ‖x′‖₁ − δ(E_hi·x′₊ + E_lo·x′₋)
            lo, hi = domain
            at_lo = xp.astype(x_test == lo[None, :], self.dtype)
            at_hi = xp.astype(x_test == hi[None, :], self.dtype)
            both = xp.concat([at_lo, at_hi], axis=1)  # (n, 2d)
            pos = xp.maximum(x_train, 0.0)
            neg = xp.maximum(-x_train, 0.0)
            self.corr_lower = both @ xp.matrix_transpose(xp.concat([pos, neg], axis=1))
            self.corr_upper = both @ xp.matrix_transpose(xp.concat([neg, pos], axis=1))

    def ranges(self, delta, start=0, stop=None):
        """(pL, pU, rL, rU) for the test rows start:stop and their radii ``delta``, widened for rounding."""
        pL, pU, rL, rU = self._ranges(_normalized(delta, self.k0), start, stop)
        xp, k = self.xp, self.k0 + self.kt
        rL = xp.maximum(_times_pow2(rL, self.k0, xp, -1), 0.0)
        return (_times_pow2(pL, k, xp, -1), _times_pow2(pU, k, xp, 1), rL, _times_pow2(rU, self.k0, xp, 1))

    def _ranges(self, delta, start=0, stop=None):
        """:meth:`ranges` of the scaled geometry (``delta`` already divided by s₀)."""
        xp = self.xp
        stop = self.x_test.shape[0] if stop is None else stop
        p0 = self.p0[start:stop, :]
        x0_norm = self.x0_norm[start:stop]
        dcol = delta[:, None]
        n2 = self.n2[None, :]
        sqrt_d = math.sqrt(self.d)
        rho = sqrt_d * delta if self.norm == "linf" else delta  # ℓ2 radius containing the ball
        # the paper's ranges (triangle inequality / Cauchy–Schwarz with the ℓ2 radius rho)
        rho_c = rho[:, None]
        pL = p0 - rho_c * n2
        pU = p0 + rho_c * n2
        rL = xp.maximum(x0_norm - rho, 0.0)
        rU = x0_norm + rho
        if self.method == "tight":
            if self.norm == "linf" and self.domain is None:
                hold = dcol * self.n1[None, :]  # Hölder: |<Δ, x′>| ≤ δ‖x′‖₁
                pL = xp.maximum(pL, p0 - hold)
                pU = xp.minimum(pU, p0 + hold)
                x0_l1 = self.x0_l1[start:stop]
                rU = xp.minimum(rU, xp.sqrt(x0_norm**2 + 2.0 * delta * x0_l1 + self.d * delta**2))
                abs_test = self.abs_test[start:stop, :]
                rL = xp.maximum(rL, xp.sqrt(xp.sum(xp.maximum(abs_test - dcol, 0.0) ** 2, axis=1)))
            elif self.domain is not None:
                lo, hi = self.domain
                x_test = self.x_test[start:stop, :]
                a = xp.maximum(x_test - dcol, lo[None, :])
                b = xp.minimum(x_test + dcol, hi[None, :])
                if self.exact_domain:  # exact: two products per step
                    c = (a + b) / 2.0
                    w = (b - a) / 2.0
                    cp = c @ self.train_T
                    wp = w @ self.abs_train_T
                    pL = xp.maximum(pL, cp - wp)
                    pU = xp.minimum(pU, cp + wp)
                else:  # exact on boundary coordinates, Hölder on the others: O(rows·n_train)
                    hold = dcol * self.n1[None, :]
                    pL = xp.maximum(pL, p0 - hold + dcol * self.corr_lower[start:stop, :])
                    pU = xp.minimum(pU, p0 + hold - dcol * self.corr_upper[start:stop, :])
                straddle = (a <= 0.0) & (b >= 0.0)
                min_sq = xp.where(straddle, 0.0, xp.minimum(a * a, b * b))
                rL = xp.maximum(rL, xp.sqrt(xp.sum(min_sq, axis=1)))
                rU = xp.minimum(rU, xp.sqrt(xp.sum(xp.maximum(a * a, b * b), axis=1)))
        # outward widening for rounding: |fl(<c,x'>) − <c,x'>| ≤ γ Σ|c_j||x'_j| ≤ γ (‖x₀‖ + 2√dδ)‖x′‖
        widen = self.gamma * (x0_norm + 2.0 * sqrt_d * delta)[:, None] * n2
        pL = pL - widen
        pU = pU + widen
        rL = rL * (1.0 - self.gamma)
        rU = rU * (1.0 + self.gamma)
        return pL, pU, rL, rU

    def theta_bounds(self, delta):
        """(Θᴸ, Θᵁ), shape (n_test, n_train)."""
        xp = self.xp
        pL, pU, rL, rU = self._ranges(_normalized(delta, self.k0))
        n2 = self.n2[None, :]
        RL = rL[:, None] * n2
        RU = rU[:, None] * n2
        if self.method == "tight":
            lo, hi = _phi_box_bounds(pL, pU, RL, RU, xp)
        else:
            lo, hi = _paper_phi_bounds(pL, pU, RL, RU, xp)
        scale = 1.0 / (2.0 * math.pi * self.d)
        slack = 32.0 * self.eps * RU
        k = self.k0 + self.kt
        return _times_pow2((lo - slack) * scale, k, xp, -1), _times_pow2((hi + slack) * scale, k, xp, 1)

    def signed_lower(self, delta, row_sign, alpha):
        """Lower bound of row_sign_k · g(x) over ball k, g = Σᵢ αᵢΘ(·, xᵢ); shape (n_test,), in the geometry's
        units: ``delta`` is the radius divided by s₀ and the result the bound divided by s₀·s_t (a positive
        factor: the same sign; :func:`output_bounds` scales it back).

        Σᵢ |αᵢ| · min over the ball of cₖᵢΘ(x, xᵢ), cₖᵢ = row_sign_k·sign αᵢ: per pair only the minimum
        (c > 0) or the maximum (c < 0) of Θ is needed, which halves the work.  Computed in row blocks that
        fit in cache (NumPy) or of about 16M pairs (other namespaces: GPU memory); each block costs O(rows·n_train).
        """
        xp = self.xp
        n, m = self.x_test.shape[0], self.x_train.shape[0]
        sa = xp.sign(alpha)[None, :]
        aa = xp.abs(alpha)[None, :]
        n2 = self.n2[None, :]
        inv = 1.0 / (2.0 * math.pi * self.d)
        block = max(1, (_BLOCK_ELEMENTS if _blocked(xp) else _DEVICE_BLOCK_ELEMENTS) // max(m, 1))
        out = []
        for start in range(0, n, block):
            stop = min(n, start + block)
            pL, pU, rL, rU = self._ranges(delta[start:stop], start, stop)
            RL = rL[:, None] * n2
            RU = rU[:, None] * n2
            want_min = (row_sign[start:stop, None] * sa) > 0
            if self.method == "tight":
                v = _signed_phi_tight(pL, pU, RL, RU, want_min, xp)
            else:
                lo, hi = _paper_phi_bounds(pL, pU, RL, RU, xp)
                v = xp.where(want_min, lo, -hi)
            v = v - 32.0 * self.eps * RU
            total = xp.sum(aa * v, axis=1)
            slack = (m + 2) * self.eps * xp.sum(aa * xp.abs(v), axis=1)
            out.append((total - slack) * inv)
        if not out:
            return xp.zeros((0,), dtype=self.dtype, device=device_of(self.x_test))
        return xp.concat(out) if len(out) != 1 else out[0]

    def theta_center(self):
        """Θ(x₀/s₀, xᵢ/s_t) (the NTK at the clean points in the geometry's units), shape (n_test, n_train)."""
        R = self.x0_norm[:, None] * self.n2[None, :]
        return _phi(self.p0, R, self.xp) / (2.0 * math.pi * self.d)


def _phi_box_bounds(pL, pU, RL, RU, xp):
    """Exact min and max of the convex Φ over P = [pL,pU]×[RL,RU] ∩ {|p| ≤ R} (see module docstring)."""
    RL = xp.maximum(RL, 0.0)
    RU = xp.maximum(RU, RL)
    # rounding may push the ranges just outside the cone; widening them keeps P non-empty and sound
    pL = xp.minimum(pL, RU)
    pU = xp.maximum(xp.maximum(pU, -RU), pL)
    inf = float("inf")
    mins, maxs = [], []
    for R in (RL, RU):  # edges R = const, p ∈ [a, b]
        a = xp.maximum(pL, -R)
        b = xp.minimum(pU, R)
        feasible = a <= b
        p_star = xp.minimum(xp.maximum(H_ARGMIN * R, a), b)
        mins.append(xp.where(feasible, _phi(p_star, R, xp), inf))
        maxs.append(xp.where(feasible, xp.maximum(_phi(a, R, xp), _phi(b, R, xp)), -inf))
    for P in (pL, pU):  # edges p = const, R ∈ [max(RL, |p|), RU]
        lo = xp.maximum(RL, xp.abs(P))
        feasible = lo <= RU
        R_star = xp.minimum(xp.maximum(_SQRT2 * xp.abs(P), lo), RU)
        mins.append(xp.where(feasible, _phi(P, R_star, xp), inf))
        maxs.append(xp.where(feasible, _phi(P, lo, xp), -inf))  # the other end (P, RU) is an R = RU vertex
    lo_val, hi_val = mins[0], maxs[0]
    for m in mins[1:]:
        lo_val = xp.minimum(lo_val, m)
    for m in maxs[1:]:
        hi_val = xp.maximum(hi_val, m)
    return lo_val, hi_val


def _signed_phi_tight(pL, pU, RL, RU, want_min, xp):
    """min_P Φ where ``want_min``, else −max_P Φ (the lower bound of c·Φ, c = ±1); same values as
    :func:`_phi_box_bounds` with four Φ evaluations per pair instead of ten.

    Minimum: the four edge minimisers.  Maximum: the vertices of P — the four box corners with |p| ≤ R, and
    the cone vertices, where Φ is known in closed form (Φ(R, R) = 2πR, Φ(−R, R) = 0): the largest of those on
    the line p = R is at R = min(pU, RU).
    """
    RL = xp.maximum(RL, 0.0)
    RU = xp.maximum(RU, RL)
    pL = xp.minimum(pL, RU)
    pU = xp.maximum(xp.maximum(pU, -RU), pL)
    inf = float("inf")
    absL, absU = xp.abs(pL), xp.abs(pU)
    aL, bL = xp.maximum(pL, -RL), xp.minimum(pU, RL)
    aU, bU = xp.maximum(pL, -RU), xp.minimum(pU, RU)
    p_star_L = xp.minimum(xp.maximum(H_ARGMIN * RL, aL), bL)
    p_star_U = xp.minimum(xp.maximum(H_ARGMIN * RU, aU), bU)
    loL, loU = xp.maximum(RL, absL), xp.maximum(RL, absU)
    R_star_L = xp.minimum(xp.maximum(_SQRT2 * absL, loL), RU)
    R_star_U = xp.minimum(xp.maximum(_SQRT2 * absU, loU), RU)
    # slot: (min candidate | max candidate) sharing one coordinate
    slots = (
        (xp.where(want_min, p_star_L, pU), RL, xp.where(want_min, aL <= bL, absU <= RL)),
        (xp.where(want_min, p_star_U, pL), RU, xp.where(want_min, aU <= bU, absL <= RU)),
        (pL, xp.where(want_min, R_star_L, RL), xp.where(want_min, loL <= RU, absL <= RL)),
        (pU, xp.where(want_min, R_star_U, RU), xp.where(want_min, loU <= RU, absU <= RU)),
    )
    val = None
    for p, R, feasible in slots:
        v = _phi(p, R, xp)
        v = xp.where(feasible, xp.where(want_min, v, -v), inf)
        val = v if val is None else xp.minimum(val, v)
    top_plus = xp.minimum(pU, RU)
    plus_feasible = xp.maximum(pL, RL) <= top_plus
    minus_feasible = xp.maximum(RL, -pU) <= xp.minimum(RU, -pL)
    cone = xp.minimum(
        xp.where(plus_feasible, -2.0 * math.pi * top_plus, inf), xp.where(minus_feasible, xp.zeros_like(pL), inf)
    )
    return xp.where(want_min, val, xp.minimum(val, cone))


def _paper_phi_bounds(pL, pU, RL, RU, xp):
    """App. H.1 with the errata fixed, in units of 2πd: R·h(u) with R and u decoupled."""
    RL = xp.maximum(RL, 0.0)
    RU = xp.maximum(RU, RL)
    safe_RL = xp.where(RL > 0, RL, 1.0)
    safe_RU = xp.where(RU > 0, RU, 1.0)
    # uᴸ: divide by the norm end that makes the quotient smallest; ‖x‖ᴸ = 0 with pᴸ < 0 means u reaches −1
    uL = xp.where(pL >= 0, pL / safe_RU, xp.where(RL > 0, pL / safe_RL, -1.0))
    # uᵁ: the printed `else` branch has (⟨x₀,x′⟩ − √dδ‖x′‖); it must be pᵁ = ⟨x₀,x′⟩ + √dδ‖x′‖
    uU = xp.where(pU >= 0, xp.where(RL > 0, pU / safe_RL, 1.0), pU / safe_RU)
    uL = xp.minimum(xp.maximum(uL, -1.0), 1.0)  # the printed form does not clip uᴸ to −1
    uU = xp.minimum(xp.maximum(uU, uL), 1.0)
    ones = xp.ones_like(uL)
    hL = _phi(xp.minimum(xp.maximum(H_ARGMIN * ones, uL), uU), ones, xp)  # h convex: min at clip(u*)
    hU = xp.maximum(_phi(uL, ones, xp), _phi(uU, ones, xp))
    lo = xp.where(hL >= 0, RL * hL, RU * hL)
    hi = xp.where(hU >= 0, RU * hU, RL * hU)
    return lo, hi


def _prepare(x0, x_train, caller, norm, method, domain, exact_domain=False, test_name="x_test"):
    xp, x_train, x0 = _check_points(x_train, x0, caller, test_name)
    check_option(norm, "norm", ("linf", "l2"), caller=caller)
    check_option(method, "method", ("tight", "paper"), caller=caller)
    dom = _check_domain(domain, x0, xp, caller, test_name)
    if dom is not None and method == "paper":
        raise InvalidParameterError(
            f"The 'domain' parameter of {caller} is only supported with method='tight' (App. H.1 has no domain)."
        )
    if not isinstance(exact_domain, bool):
        raise InvalidParameterError(f"The 'exact_domain' parameter of {caller} must be a bool; got {exact_domain!r}.")
    # the geometry holds about a dozen (n_test, n_train) ranges and temporaries
    check_memory(12 * x0.shape[0] * x_train.shape[0],
                 f"The ({x0.shape[0]}, {x_train.shape[0]}) test-train ranges of {test_name!r}/'x_train'", caller, x_train,
                 ways_out="certify fewer test points per call, or use float32")
    geo = _NTKGeometry(x0, x_train, xp, norm, dom, method, exact_domain)
    _check_row_scales(geo, caller, test_name)
    return xp, x_train, x0, geo


def _check_row_scales(geo, caller, test_name):
    """Refuse rows too small against their array's largest for a sound bound (module docstring, "Scale").

    After the per-array normalisation, (R − p)(R + p) with R = ‖x₀‖‖x′‖ is computed in the normal range only if
    R ≥ √(smallest_normal/eps): below that it underflows and the bound of that pair is not guaranteed.  Zero rows
    are exact (Θ = 0) and allowed."""
    xp = geo.xp
    if geo.x0_norm.shape[0] == 0 or geo.n2.shape[0] == 0:
        return
    inf = xp.asarray(math.inf, dtype=geo.dtype, device=device_of(geo.x_test))
    m0 = float(xp.min(xp.where(geo.x0_norm > 0, geo.x0_norm, inf)))
    mt = float(xp.min(xp.where(geo.n2 > 0, geo.n2, inf)))
    floor = 4.0 * math.sqrt(float(xp.finfo(geo.dtype).smallest_normal) / geo.eps)
    if math.isfinite(m0) and math.isfinite(mt) and m0 * mt < floor:
        raise InvalidParameterError(
            f"The rows of {test_name!r} and 'x_train' of {caller} span too many orders of magnitude for a guaranteed "
            f"bound: the smallest nonzero row norms, relative to their arrays' largest entries, multiply to "
            f"{m0 * mt:.3g} < {floor:.3g} ({geo.dtype}), where the NTK's (R − p)(R + p) underflows. Certify the "
            f"small rows in a separate call (each call is normalised by its own largest entry), or use float64."
        )


# ---------------------------------------------------------------------------
# public NTK bounds
# ---------------------------------------------------------------------------
def ntk_interval(x0, x_train, radius, *, method="tight", norm="linf", domain=None, exact_domain=False):
    r"""Interval bounds of the two-layer ReLU NTK over a ball (seed 000 App. H.1, Thm 4.2).

    For every test point x₀ (row of ``x0``) and training point xᵢ,
    Θᴸ ≤ Θ(x, xᵢ) ≤ Θᵁ for all x with ‖x − x₀‖ ≤ radius (and x in ``domain``),
    where Θ(x, x′) = ‖x‖‖x′‖h(u)/(2πd) (seed 000 eq. (63)).

    Parameters
    ----------
    x0 : array (n_test, d)
        Centres of the balls, one per row.
    x_train : array (n_train, d)
        Second arguments xᵢ of the kernel.  Zero rows give Θ ≡ 0.
    radius : float or array (n_test,)
        δ ≥ 0 (per test point if an array).
    method : {"tight", "paper"}
        ``"paper"``: App. H.1 with its errata fixed; ``"tight"``: Hölder dot
        range, exact norm range, exact joint extremes of ‖x‖·h(u) (module
        docstring has the proofs).  Θᴸ_tight ≥ Θᴸ_paper and Θᵁ_tight ≤ Θᵁ_paper.
    norm : {"linf", "l2"}
        The ball's norm.
    domain : (lo, hi) or None
        Box constraint (scalars or arrays of shape (d,)), e.g. (0, 1) for
        pixels; x0 must lie inside.  ``method="tight"`` only.
    exact_domain : bool
        With a domain: False (default) treats coordinates of x₀ lying on the
        box boundary exactly (they can only move inwards) and the others by
        Hölder (sound, cheap: two matrix products once); True uses the exact
        range over ball ∩ box (two matrix products per radius).  The norm
        range is exact either way.

    Returns
    -------
    lower, upper : arrays (n_test, n_train)

    Notes
    -----
    Sound in exact arithmetic; in floating point the ranges are widened
    outward by (d+4)·eps (module docstring), so the bounds hold up to nothing
    worse than the rounding of the final sums.  The inputs are normalised by
    powers of two (module docstring, "Scale"): the bounds hold at every common
    scale of ``x0``, ``x_train`` and ``radius`` (tiny and huge inputs alike) and
    ntk_interval(2ᵏx0, 2ʲx_train, 2ᵏδ) = 2ᵏ⁺ʲ·ntk_interval(x0, x_train, δ) bit for bit.
    """
    caller = "ntk_interval"
    xp, x_train, x0, geo = _prepare(x0, x_train, caller, norm, method, domain, exact_domain, test_name="x0")
    delta = _check_radius(radius, x0, xp, caller)
    return _finite_out(geo.theta_bounds(delta), caller, ("x0", "x_train", "radius"))


def dot_norm_ranges(x0, x_train, radius, *, norm="linf", domain=None, exact_domain=False):
    r"""Exact ranges of ⟨x, xᵢ⟩ and ‖x‖₂ over the ball around x₀ (∩ domain).

    ℓ∞: ⟨x₀, xᵢ⟩ ∓ δ‖xᵢ‖₁ and [‖max(|x₀| − δ, 0)‖₂, ‖ |x₀| + δ ‖₂]
    (with a domain: over the box [max(x₀ − δ, lo), min(x₀ + δ, hi)]; the dot
    range is exact with ``exact_domain=True``, else the sound relaxation of
    :func:`ntk_interval`, exact when every coordinate of x₀ is on the
    boundary or at least δ inside); ℓ2:
    ⟨x₀, xᵢ⟩ ∓ δ‖xᵢ‖₂ and [max(‖x₀‖ − δ, 0), ‖x₀‖ + δ] (with a domain,
    intersected with the ℓ∞ ranges: a sound, not necessarily exact, range).
    These are the ranges used by ``ntk_interval(method="tight")``, widened
    outward by (d + 4)·eps of their magnitude for rounding.

    Returns
    -------
    p_lower, p_upper : arrays (n_test, n_train)
    r_lower, r_upper : arrays (n_test,)
    """
    caller = "dot_norm_ranges"
    xp, x_train, x0, geo = _prepare(x0, x_train, caller, norm, "tight", domain, exact_domain, test_name="x0")
    delta = _check_radius(radius, x0, xp, caller)
    return _finite_out(geo.ranges(delta), caller, ("x0", "x_train", "radius"))


_BLOCK_ELEMENTS = 1 << 15  # row blocks of about 32k pairs keep the elementwise passes in cache
# other namespaces (GPUs): row blocks of about 16M pairs, large enough that each elementwise kernel fills
# the device, small enough that the ~40 temporaries of one bound evaluation (128 MiB each in float64)
# fit in a few GiB
_DEVICE_BLOCK_ELEMENTS = 1 << 24


def _blocked(xp):
    from ._lib.backend import is_numpy_namespace

    return is_numpy_namespace(xp)


def _split_alpha(alpha, x_train, xp):
    keep = alpha != 0  # non-support vectors do not contribute
    if not bool(xp.all(keep)):
        idx = xp.nonzero(keep)[0]
        alpha = xp.take(alpha, idx)
        x_train = xp.take(x_train, idx, axis=0)
    return alpha, x_train


def output_bounds(alpha, x_train, x_test, radius, *, method="tight", norm="linf", domain=None, exact_domain=False):
    r"""Lower and upper bounds of g(x) = Σᵢ αᵢ Θ(x, xᵢ) over balls (seed 000 eqs. (65)–(66)).

    g ≥ Σ_{αᵢ>0} αᵢΘᴸ(x, xᵢ) + Σ_{αᵢ<0} αᵢΘᵁ(x, xᵢ) and
    g ≤ Σ_{αᵢ<0} αᵢΘᴸ(x, xᵢ) + Σ_{αᵢ>0} αᵢΘᵁ(x, xᵢ), with [Θᴸ, Θᵁ] from
    :func:`ntk_interval`.  Any real α (SVM, KRR, SVR, logistic, …).

    Parameters
    ----------
    alpha : array (n_train,), finite
    x_train : array (n_train, d)
    x_test : array (n_test, d)
        Ball centres.
    radius : float or array (n_test,), ≥ 0
    method, norm, domain, exact_domain : as in :func:`ntk_interval`.

    Returns
    -------
    lower, upper : arrays (n_test,)
        Sound bounds of g over each ball (widened by (n + 2)·eps·Σ|αᵢ||Θ| for
        the rounding of the sums), at every common scale of ``alpha``,
        ``x_train`` and (``x_test``, ``radius``): the computation runs on
        power-of-two normalised inputs (module docstring, "Scale").
    """
    caller = "output_bounds"
    xp, x_train, x_test = _check_points(x_train, x_test, caller)
    alpha = _check_alpha(alpha, x_train, xp, caller)
    alpha, x_train = _split_alpha(alpha, x_train, xp)
    xp, x_train, x_test, geo = _prepare(x_test, x_train, caller, norm, method, domain, exact_domain)
    n = x_test.shape[0]
    delta = _check_radius(radius, x_test, xp, caller)
    if alpha.shape[0] == 0:
        zero = xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test))
        return zero, zero
    ones = xp.ones((n,), dtype=x_test.dtype, device=device_of(x_test))
    # g is linear in α: the sums run on α/2^ka (largest |α| in [1, 2)) and the radius δ/s₀, then scale back
    ka = _pow2_exponent(alpha, xp)
    alpha, delta = _normalized(alpha, ka), _normalized(delta, geo.k0)
    k = geo.k0 + geo.kt + ka
    lower = _times_pow2(geo.signed_lower(delta, ones, alpha), k, xp, -1)
    upper = _times_pow2(-geo.signed_lower(delta, -ones, alpha), k, xp, 1)
    return _finite_out((lower, upper), caller, ("alpha", "x_train", "x_test", "radius"))


# ---------------------------------------------------------------------------
# vectorised bisection
# ---------------------------------------------------------------------------
_MAX_SHRINK = 60  # give up below top·2⁻⁶⁰
_MAX_STEPS = 500


def _bisect(margin, top, active, tol, xp):
    """Largest certified radius on the grid top·q^(−k), q = √(1 + tol), for every point at once.

    ``margin(delta)`` → lower bound of σ·g over the balls; certified iff > 0; continuous and non-increasing
    in δ.  Points with margin(0) ≤ 0 are never certified (radius 0).  Invariant: lo is certified (lo = 0
    counts, as margin(0) > 0), hi is not.  Each step proposes the secant root of the margin between
    (lo, m(lo)) and (hi, m(hi)) — on MNIST the margin bound is nearly linear in δ, so this is accurate —
    nudged by ±(q − 1)/3 to the side that did not move last (so two accurate proposals close the
    bracket), kept inside the bracket, with a bisection step (geometric midpoint, or hi/8 while lo = 0)
    after two moves of the same end; stop when hi ≤ lo·q.  Finally snap to the grid: the answer is the
    largest certified grid point (one more evaluation for the grid point inside (lo, hi), if any).  So the
    result is a function of the certified set alone — a method whose certified set is larger never
    returns a smaller radius — and r is certified while r·(1 + tol) = r·q² is not.
    Returns (radius, capped, number of margin evaluations).
    """
    q = math.sqrt(1.0 + tol)
    log_q = math.log(q)
    zero = xp.zeros_like(top)
    m_zero = margin(zero)
    m_top = margin(top)
    evaluations = 2
    active = active & (m_zero > 0)
    ok_top = active & (m_top > 0)
    lo = xp.where(ok_top, top, zero)
    m_lo = xp.where(ok_top, m_top, m_zero)
    hi, m_hi = top, m_top
    todo = active & ~ok_top
    same_side = zero
    last_lo = xp.zeros(top.shape, dtype=xp.bool, device=device_of(top))
    floor = top * 2.0**-_MAX_SHRINK
    nudge = (q - 1.0) / 3.0
    for _ in range(_MAX_STEPS):
        if not bool(xp.any(todo)):
            break
        width = hi - lo
        denom = m_lo - m_hi
        est = lo + width * (m_lo / xp.where(denom > 0, denom, 1.0))
        prop = xp.where(last_lo, est * (1.0 + nudge), est * (1.0 - nudge))
        fallback = xp.where(lo > 0, xp.sqrt(lo * hi), hi / 8.0)
        prop = xp.where(same_side >= 2, fallback, prop)
        delta = xp.minimum(xp.maximum(prop, lo + width * 2.0**-20), hi - width * 2.0**-20)
        m = margin(delta)
        evaluations += 1
        ok = m > 0
        move_lo = todo & ok
        move_hi = todo & ~ok
        repeat = (move_lo & last_lo) | (move_hi & ~last_lo)
        same_side = xp.where(todo, xp.where(repeat, same_side + 1.0, 0.0), same_side)
        lo = xp.where(move_lo, delta, lo)
        m_lo = xp.where(move_lo, m, m_lo)
        hi = xp.where(move_hi, delta, hi)
        m_hi = xp.where(move_hi, m, m_hi)
        last_lo = xp.where(todo, ok, last_lo)
        done = ((lo > 0) & (hi <= lo * q)) | ((lo == 0) & (hi <= floor))
        todo = todo & ~done
    # snap to the grid top·q^(−k): g = the largest grid point ≤ lo (certified, by monotonicity) and
    # c = the next one up; c is certified iff it lies below hi and passes.
    inner = (lo > 0) & ~ok_top
    safe_lo = xp.where(inner, lo, top)
    k = xp.ceil(xp.log(top / safe_lo) / log_q)
    g = top * xp.exp(-k * log_q)
    k = xp.where(g > safe_lo, k + 1.0, k)  # guard against rounding in the logarithm
    g = top * xp.exp(-k * log_q)
    c = top * xp.exp(-(k - 1.0) * log_q)
    need = inner & (c > safe_lo) & (c < hi)
    result = xp.where(inner, g, lo)
    if bool(xp.any(need)):
        ok_c = margin(xp.where(need, c, safe_lo)) > 0
        evaluations += 1
        result = xp.where(need & ok_c, c, result)
    return result, ok_top, evaluations


def _check_tol(tol, dtype, xp, caller):
    """``tol`` in [4·eps, 1] for the computing dtype: a finer relative grid cannot be resolved.

    Below it, q = √(1 + tol) rounds to 1 (or to within an ulp of it) and the grid
    top·q^(−k) collapses: the bracket test hi ≤ lo·q and the snap's log q break (NaN radii).
    """
    tol = check_real(tol, "tol", caller=caller, low=0.0, high=1.0, closed="right")
    floor = 4.0 * _eps(dtype, xp)
    if tol < floor:
        raise InvalidParameterError(
            f"The 'tol' parameter of {caller} must be at least 4*eps = {floor:.3g} for {dtype} inputs (a finer "
            f"relative tolerance cannot be resolved in that precision). Got {tol!r} instead."
        )
    return tol


def _radius_setup(x_test, xp, norm, max_radius, caller):
    n = x_test.shape[0]
    if max_radius is None:
        if norm == "linf":
            top = (xp.max(xp.abs(x_test), axis=1) if x_test.shape[1]
                   else xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test)))
        else:
            top = xp.sqrt(xp.sum(x_test * x_test, axis=1))
        top = xp.where(top > 0, top, 1.0)
    else:
        r = check_real(max_radius, "max_radius", caller=caller, low=0.0, closed="right")
        top = xp.full((n,), r, dtype=x_test.dtype, device=device_of(x_test))
    return top


def _info(g0, sign, at_margin, misclassified, capped, steps):
    return {"g": g0, "sign": sign, "at_margin": at_margin, "misclassified": misclassified, "capped": capped,
            "steps": steps}


def _finish(g0, y, xp, caller, n):
    sign = xp.sign(g0)
    at_margin = sign == 0
    if y is not None:
        y = _on_device_of(check_labels(y, "y", caller=caller, xp=xp), y, g0, xp)
        if y.shape[0] != n:
            raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},); got {tuple(y.shape)}.")
        misclassified = (~at_margin) & (xp.astype(y, g0.dtype) != sign)
    else:
        misclassified = xp.zeros((n,), dtype=xp.bool, device=device_of(g0))
    return sign, at_margin, misclassified


def certified_radius(
    alpha,
    x_train,
    x_test,
    *,
    method="tight",
    norm="linf",
    domain=None,
    exact_domain=False,
    y=None,
    tol=1e-4,
    max_radius=None,
    return_info=False,
):
    r"""Certified radius of the NTK machine g(x) = Σᵢ αᵢ Θ(x, xᵢ) (seed 000 §4.2, problem (10)).

    For each test point x₀ with σ = sign g(x₀): the largest δ (to relative
    tolerance ``tol``) such that the bound of :func:`output_bounds` proves
    σ·g(x) > 0 on the whole ball, i.e. the label of the infinitely wide
    two-layer ReLU net (equivalent to the kernel machine) cannot change.

    Parameters
    ----------
    alpha : array (n_train,), finite
        Coefficients of any kernel machine (SVM, KRR, …).
    x_train : array (n_train, d)
    x_test : array (n_test, d)
    method : {"tight", "paper"}
        See :func:`ntk_interval`.  The tight radius is ≥ the paper's on every
        point.
    norm : {"linf", "l2"}
    domain : (lo, hi) or None
        Box constraint, e.g. (0, 1) for pixels (``"tight"`` only).
    exact_domain : bool
        See :func:`ntk_interval`; True costs two matrix products per bisection
        step instead of O(n_test·n_train).
    y : array (n_test,) of ±1, optional
        Labels; points with sign g(x₀) ≠ y are *misclassified*: radius 0, not
        certified, and reported in ``info["misclassified"]``.
    tol : float in [4·eps, 1]
        Relative tolerance: the result r is the largest certified point of the
        grid max_radius·(1 + tol)^(−k/2); r is certified and r·(1 + tol) is not
        (unless r is the bracket top).  eps is that of the computing dtype
        (x_test's after promotion); a smaller tol cannot be resolved and raises
        :class:`InvalidParameterError` naming ``tol``.
    max_radius : float or None
        Bracket top.  Default: the distance from x₀ to the origin in the ball's
        norm (‖x₀‖∞ or ‖x₀‖₂), which is never certified since g(0) = 0 (unless
        a ``domain`` excludes 0).  Points certified at the top get radius = top
        and ``info["capped"]``.
    return_info : bool
        Also return a dict with ``"g"`` (g(x₀)), ``"sign"``, ``"at_margin"``
        (g(x₀) = 0: radius 0), ``"misclassified"``, ``"capped"`` and
        ``"steps"`` (number of bound evaluations for all points together).

    Returns
    -------
    radii : array (n_test,)
        0 where g(x₀) = 0, where the point is misclassified, or where not even
        the smallest radius tried (top·2⁻⁶⁰) is certified.
    info : dict, only if ``return_info``.

    Notes
    -----
    One matrix product of test and training points, then every bisection step
    costs O(n_test·n_train) elementwise work for all points at once (divide
    the top by 8 until certified, then a safeguarded regula falsi on the
    margin bound: typically 6–8 steps; the module docstring has the details).

    Scale-free: the search runs on x₀, xᵢ, α normalised by powers of two
    (module docstring, "Scale"), so radius(2ᵏx₀) = 2ᵏ·radius(x₀) bit for bit,
    scaling ``x_train`` or ``alpha`` leaves the radii unchanged, and tiny or
    huge inputs are certified as soundly as ordinary ones.

    Where it runs: everything is batched array work in the inputs' namespace
    and on their device.  The host reads (synchronisations on a GPU) are a
    few for validation, one per bisection step (whether any point is still
    open) and one for the final grid snap — a number independent of the
    number of test points; no data is copied to the host.
    """
    engine = dispatch.certified_radius.lookup(x_test)
    if engine is not None:  # a Dask x_test: lazy radii, one task per row chunk (ntkref/_engines/dask)
        return engine(alpha, x_train, x_test, y=y, method=method, norm=norm, domain=domain,
                      exact_domain=exact_domain, tol=tol, max_radius=max_radius, return_info=return_info)
    caller = "certified_radius"
    xp, x_train, x_test = _check_points(x_train, x_test, caller)
    alpha = _check_alpha(alpha, x_train, xp, caller)
    alpha, x_train = _split_alpha(alpha, x_train, xp)
    xp, x_train, x_test, geo = _prepare(x_test, x_train, caller, norm, method, domain, exact_domain)
    n = x_test.shape[0]
    tol = _check_tol(tol, x_test.dtype, xp, caller)
    # scale-free: the whole search runs in the geometry's units (x₀/s₀, xᵢ/s_t, α/2^ka, radii δ/s₀); only the
    # sign of the margin matters, and it is that of the bound in the original units (a positive factor), so
    # radius(2ᵏx₀, 2ʲxᵢ, 2ᵐα) = 2ᵏ·radius(x₀, xᵢ, α) exactly, and nothing underflows or overflows on the way
    ka = _pow2_exponent(alpha, xp)
    alpha = _normalized(alpha, ka)
    if max_radius is None:
        top = _radius_setup(geo.x_test, xp, norm, None, caller)
    else:  # in the geometry's units (beyond the dtype's range: its largest finite value)
        r = check_real(max_radius, "max_radius", caller=caller, low=0.0, closed="right") / geo.s0
        top = _radius_setup(geo.x_test, xp, norm, min(r, float(xp.finfo(x_test.dtype).max)), caller)
    if alpha.shape[0]:
        g0_n = xp.sum(alpha[None, :] * geo.theta_center(), axis=1)
    else:
        g0_n = xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test))
    sign, at_margin, misclassified = _finish(g0_n, y, xp, caller, n)
    active = (~at_margin) & (~misclassified)

    def margin(delta):  # lower bound of σ·g over the balls (geometry units); certified iff > 0
        return geo.signed_lower(delta, sign, alpha)

    if alpha.shape[0] == 0 or n == 0:
        dev = device_of(x_test)
        radii, capped = xp.zeros((n,), dtype=x_test.dtype, device=dev), xp.zeros((n,), dtype=xp.bool, device=dev)
        steps = 0
    else:
        radii, capped, steps = _bisect(margin, top, active, tol, xp)
    radii = xp.maximum(_times_pow2(radii, geo.k0, xp, -1), 0.0)  # certified: rounded down if it underflows
    if return_info:
        g0 = _times_pow2(g0_n, geo.k0 + geo.kt + ka, xp)
        return radii, _info(g0, sign, at_margin, misclassified, capped, steps)
    return radii


# ---------------------------------------------------------------------------
# IBP for finite nets (App. H.2)
# ---------------------------------------------------------------------------
def _per_layer(value, n_layers, name, caller, low=None):
    if value is None:
        return None
    if isinstance(value, numbers.Real) or getattr(value, "shape", None) == ():
        v = check_real(value, name, caller=caller, low=low)
        return [v] * n_layers
    vals = list(value)
    if len(vals) != n_layers:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be a scalar or have one value per layer ({n_layers}); "
            f"got {len(vals)}."
        )
    return [check_real(v, f"{name}[{i}]", caller=caller, low=low) for i, v in enumerate(vals)]


def _check_net(net, params, W_std, b_std, caller, xp=None):
    if params is None:
        params = getattr(net, "params", None)
    try:
        layers = [tuple(layer) for layer in params]
    except TypeError:
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a list of (W, b) pairs.") from None
    if not layers or any(len(layer) != 2 for layer in layers):
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a non-empty list of (W, b) pairs.")
    L = len(layers)
    ws = _per_layer(W_std if W_std is not None else getattr(net, "W_std", 1.0), L, "W_std", caller, low=0.0)
    bs = _per_layer(b_std if b_std is not None else getattr(net, "b_std", 0.0), L, "b_std", caller, low=0.0)
    if xp is None:
        xp = namespace(*[layer[0] for layer in layers])
    out = []
    fan_in = None
    for i, (W, b) in enumerate(layers):
        W = check_array(W, f"params[{i}][0]", caller=caller, ndim=2, xp=xp)
        if fan_in is not None and W.shape[0] != fan_in:
            raise InvalidParameterError(
                f"The 'params' parameter of {caller}: layer {i} has fan_in {W.shape[0]}, "
                f"but the previous layer has fan_out {fan_in}."
            )
        fan_in = W.shape[1]
        if b is not None:
            b = check_array(b, f"params[{i}][1]", caller=caller, ndim=1, xp=xp, shape=(W.shape[1],))
        out.append((W, b))
    if fan_in != 1:
        raise InvalidParameterError(
            f"The 'params' parameter of {caller}: the readout must have fan_out 1; got {fan_in}."
        )
    return out, ws, bs


def _affine_interval(mu, rad, W, b, ws, bs, xp, eps):
    fan_in = W.shape[0]
    scale = ws / math.sqrt(fan_in)
    absW = xp.abs(W)
    mu_new = scale * (mu @ W)
    rad_new = abs(scale) * (rad @ absW)
    # rounding: |fl(μW) − μW| ≤ γ|μ||W|; widen the radius so the interval stays sound
    err = (fan_in + 4) * eps * abs(scale) * ((xp.abs(mu) + rad) @ absW)
    if b is not None and bs != 0.0:
        mu_new = mu_new + bs * b[None, :]
        err = err + 4 * eps * abs(bs) * xp.abs(b)[None, :]
    return mu_new, rad_new + err


def _propagate(layers, ws, bs, lo, hi, start, xp, eps):
    """Propagate pre-activation bounds (lo, hi) of layer ``start − 1`` to the output."""
    for i in range(start, len(layers)):
        lo, hi = xp.maximum(lo, 0.0), xp.maximum(hi, 0.0)  # ReLU is monotone
        mu, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
        W, b = layers[i]
        mu, rad = _affine_interval(mu, rad, W, b, ws[i], bs[i], xp, eps)
        lo, hi = mu - rad, mu + rad
    return lo[:, 0], hi[:, 0]


def _forward(layers, ws, bs, x, xp):
    h = x
    for i, (W, b) in enumerate(layers):
        z = ws[i] * (h @ W) / math.sqrt(W.shape[0])
        if b is not None and bs[i] != 0.0:
            z = z + bs[i] * b[None, :]
        h = xp.maximum(z, 0.0) if i + 1 < len(layers) else z
    return h[:, 0]


def ibp_bounds(net, params, x_lower, x_upper, *, W_std=None, b_std=None):
    r"""Interval bound propagation through an NTK-parameterised ReLU net (seed 000 App. H.2, eq. (67)).

    Bounds f(x) for all x with x_lower ≤ x ≤ x_upper (elementwise), where
    f = layer_L ∘ ReLU ∘ … ∘ ReLU ∘ layer_1 and layer_l(h) = W_std·(h @ W)/√fan_in
    + b_std·b (W of shape (fan_in, fan_out), no activation on the readout).
    Centre/radius form: μ′ = W_std·(μ @ W)/√fan_in + b_std·b,
    r′ = |W_std|·(r @ |W|)/√fan_in; ReLU applied to both ends.

    Parameters
    ----------
    net : object or None
        Supplies ``W_std`` and ``b_std`` attributes (e.g. ``ntkref.nets.FullyConnected``);
        None → the keywords (defaults 1.0 and 0.0).
    params : list of (W, b)
        b may be None (no bias).  The readout has fan_out 1.
    x_lower, x_upper : arrays (n, d)
    W_std, b_std : float or sequence (one per layer), optional
        Override the net's values.  Finite and ≥ 0 (standard deviations: a
        negative value raises :class:`InvalidParameterError` naming ``W_std``/``b_std``).

    Returns
    -------
    lower, upper : arrays (n,)
        Sound: each interval is widened by (fan_in + 4)·eps·(|μ| + r)@|W| per layer
        for rounding.
    """
    caller = "ibp_bounds"
    xp = namespace(x_lower, x_upper)
    layers, ws, bs = _check_net(net, params, W_std, b_std, caller, xp)
    d = layers[0][0].shape[0]
    xl = check_array(x_lower, "x_lower", caller=caller, ndim=2, xp=xp)
    xu = check_array(x_upper, "x_upper", caller=caller, ndim=2, xp=xp, shape=tuple(xl.shape))
    if xl.shape[1] != d:
        raise InvalidParameterError(f"The 'x_lower' parameter of {caller} must have {d} columns; got {xl.shape[1]}.")
    if not bool(xp.all(xl <= xu)):
        raise InvalidParameterError(
            f"The 'x_lower' and 'x_upper' parameters of {caller} must satisfy x_lower <= x_upper."
        )
    eps = _eps(xl.dtype, xp)
    mu, rad = _affine_interval((xl + xu) / 2.0, (xu - xl) / 2.0, *layers[0], ws[0], bs[0], xp, eps)
    return _propagate(layers, ws, bs, mu - rad, mu + rad, 1, xp, eps)


def _first_layer_ball(layers, ws, bs, x0, delta, norm, domain, xp, eps):
    """Pre-activation interval of layer 1 over the ball (∩ domain)."""
    W, b = layers[0]
    dcol = delta[:, None]
    if norm == "linf" or domain is not None:
        a, c = x0 - dcol, x0 + dcol
        if domain is not None:
            a, c = xp.maximum(a, domain[0][None, :]), xp.minimum(c, domain[1][None, :])
        mu, rad = _affine_interval((a + c) / 2.0, (c - a) / 2.0, W, b, ws[0], bs[0], xp, eps)
        lo, hi = mu - rad, mu + rad
    if norm == "l2":
        # exact: max_{‖Δ‖₂ ≤ δ} ⟨Δ, W_{:,k}⟩ = δ‖W_{:,k}‖₂
        mu, rad = _affine_interval(x0, xp.zeros_like(x0), W, b, ws[0], bs[0], xp, eps)
        col = abs(ws[0]) / math.sqrt(W.shape[0]) * xp.sqrt(xp.sum(W * W, axis=0))
        rad = rad + dcol * col[None, :] * (1.0 + (W.shape[0] + 4) * eps)
        lo2, hi2 = mu - rad, mu + rad
        if domain is not None:
            lo, hi = xp.maximum(lo, lo2), xp.minimum(hi, hi2)
        else:
            lo, hi = lo2, hi2
    return lo, hi


def ibp_radius(
    net,
    params,
    x_test,
    *,
    params0=None,
    y=None,
    norm="linf",
    domain=None,
    tol=1e-4,
    max_radius=None,
    W_std=None,
    b_std=None,
    return_info=False,
):
    r"""Certified radius of a finite net by IBP (seed 000 App. H.2, Table 2), bisection as in
    :func:`certified_radius`.

    The certified function is g = f(params, ·) or, with ``params0``,
    g = f(params, ·) − f(params0, ·) (the official code's f − f₀ convention).
    The bound of g over the ball is sound in both cases: with ``params0`` the
    lower bound is fᴸ − f₀ᵁ, both from IBP over the same ball.  (The official
    code uses fᴸ − f₀(x₀), i.e. f₀ at the clean point only — not a certificate
    for f − f₀; docs/errata.md.)

    Parameters
    ----------
    net : object or None
        Supplies ``W_std``/``b_std`` (see :func:`ibp_bounds`).
    params : list of (W, b)
    x_test : array (n_test, d)
    params0 : list of (W, b) or None
        Initial parameters; same shapes as ``params``.
    y : array (n_test,) of ±1, optional
        Misclassified points get radius 0 (``info["misclassified"]``).
    norm : {"linf", "l2"}
    domain : (lo, hi) or None
    tol, max_radius, return_info : as in :func:`certified_radius`; the default
        top is ‖x₀‖ in the ball's norm (for bias-free nets g(0) = 0 there).
    W_std, b_std : float or sequence, optional
        As in :func:`ibp_bounds`: finite, W_std ≥ 0 and b_std ≥ 0 (standard deviations).

    Returns
    -------
    radii : array (n_test,) (and the info dict if ``return_info``)

    Notes
    -----
    At initialisation the IBP radius scales like m^{−1/2} in the width m
    (App. H.2: the interval radius grows like √m while f = O(1)).  Each step
    costs one IBP pass (two matrix products per layer).
    """
    caller = "ibp_radius"
    xp = namespace(x_test)
    layers, ws, bs = _check_net(net, params, W_std, b_std, caller, xp)
    d = layers[0][0].shape[0]
    x_test = check_array(x_test, "x_test", caller=caller, ndim=2, xp=xp)
    if x_test.shape[1] != d:
        raise InvalidParameterError(f"The 'x_test' parameter of {caller} must have {d} columns; got {x_test.shape[1]}.")
    layers0 = None
    if params0 is not None:
        layers0, ws0, bs0 = _check_net(net, params0, W_std, b_std, caller, xp)
        if [tuple(W.shape) for W, _ in layers0] != [tuple(W.shape) for W, _ in layers]:
            raise InvalidParameterError(f"The 'params0' parameter of {caller} must have the same shapes as 'params'.")
    check_option(norm, "norm", ("linf", "l2"), caller=caller)
    dom = _check_domain(domain, x_test, xp, caller)
    tol = _check_tol(tol, x_test.dtype, xp, caller)
    n = x_test.shape[0]
    eps = _eps(x_test.dtype, xp)
    top = _radius_setup(x_test, xp, norm, max_radius, caller)
    g0 = _forward(layers, ws, bs, x_test, xp)
    if layers0 is not None:
        g0 = g0 - _forward(layers0, ws0, bs0, x_test, xp)
    sign, at_margin, misclassified = _finish(g0, y, xp, caller, n)
    active = (~at_margin) & (~misclassified)

    def bounds(delta):
        lo, hi = _first_layer_ball(layers, ws, bs, x_test, delta, norm, dom, xp, eps)
        lower, upper = _propagate(layers, ws, bs, lo, hi, 1, xp, eps)
        if layers0 is not None:
            lo0, hi0 = _first_layer_ball(layers0, ws0, bs0, x_test, delta, norm, dom, xp, eps)
            lower0, upper0 = _propagate(layers0, ws0, bs0, lo0, hi0, 1, xp, eps)
            lower, upper = lower - upper0, upper - lower0
        return lower, upper

    def margin(delta):
        lower, upper = bounds(delta)
        return xp.where(sign > 0, lower, -upper)

    if n == 0:
        dev = device_of(x_test)
        radii, capped = xp.zeros((0,), dtype=x_test.dtype, device=dev), xp.zeros((0,), dtype=xp.bool, device=dev)
        steps = 0
    else:
        radii, capped, steps = _bisect(margin, top, active, tol, xp)
    if return_info:
        return radii, _info(g0, sign, at_margin, misclassified, capped, steps)
    return radii
