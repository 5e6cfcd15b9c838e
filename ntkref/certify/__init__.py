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

Proof in floating point
-----------------------
The slack above makes the search's bounds sound in practice; the radii are
then *proven*: at the end each radius is re-checked by re-evaluating its bound
(NTK: ranges, the polygon's edge extremes of Φ, the sum over α; IBP: the layer
intervals) in outward-rounded interval arithmetic (``ntkref.intervals``:
IEEE-754 round-to-nearest and gradual underflow, library functions within 4
representable numbers, a-priori γₙ bounds for sums and products), from the
float inputs exactly.  A radius the check does not prove is shrunk until it
is, or set to 0 (``info["shrunk"]``, ``info["unproven"]``); none is reported
unproven.  ``tests/test_certify_proven.py`` re-checks the radii independently
in Arb ball arithmetic.

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
from ._ibp import ibp_bounds, ibp_radius
from ._ntk_interval import H_ARGMIN, H_MIN, dot_norm_ranges, ntk_h, ntk_interval
from ._radius import certified_radius, output_bounds

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

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
