r"""Proof in floating point of the certified radii: the outward-rounded re-evaluation of each certificate's
bound at the radius returned (issue 25, item 5), and the shrinking of any radius it does not prove.

The search (``_radius.bisect``) runs on round-to-nearest bounds widened by a-priori slack; its answer r is then
*verified*: the lower bound of σ·g over the ball of radius r is evaluated again in the interval arithmetic of
:mod:`ntkref.intervals` (every + − × ÷ √ rounded outward by ``nextafter``, atan2 within ``LIBRARY_ULPS``,
sums and matrix products with the a-priori bounds γₙ; assumptions (A1)–(A4) of that module), from the
float inputs exactly as given.  The radius is reported only if that lower bound is > 0 — then σ·g(x) > 0 on
the whole ball is a theorem about the given floats under (A1)–(A4).  Otherwise it is shrunk by the factors
(1 + tol)^(−1), (1 + tol)^(−2), (1 + tol)^(−4), … until proven, and set to 0 below top·2⁻⁶⁰ (``info``
flags ``"shrunk"`` and ``"unproven"``).

NTK certificate (seed 000 Thm 4.2, eqs. (65)–(66); the ``ntkref.certify`` docstring has the proofs).  In the
units of the search (x₀/2^k0, xᵢ/2^kt, α/2^ka — enclosed as intervals: exact unless a scaled entry is
subnormal, then ± one subnormal step), the ranges pᴸ, pᵁ of ⟨x, xᵢ⟩ and rᴸ, rᵁ of ‖x‖ (``"tight"``: paper ∩
Hölder ∩ exact norm ∩ box domain, exact or relaxed as the search used) are interval expressions; their
outer ends give a polygon P = [pᴸ, pᵁ] × [Rᴸ, Rᵁ] ∩ {|p| ≤ R} with float corners that contains every (p, R)
reachable from the ball.  Then, Φ(p, R) = 2p·atan2(√((R−p)(R+p)), −p) + √((R−p)(R+p)) = 2πd·Θ being convex:

- min_P Φ ≥ the least over the four box edges (restricted to the cone) of: on R = R_c, the value at the end
  b (if b ≤ the enclosure of u*·R_c: Φ decreases on the edge), at the end a (if a ≥ it), else R_c·h_min;
  on p = p_c, the value at R = Rᵁ (if Rᵁ ≤ √2|p_c|), at R = max(Rᴸ, |p_c|) (if that is ≥ √2|p_c|), else the
  closed form Φ(p_c, √2|p_c|) = p_c(3π/2 + 1) (p_c ≥ 0) or |p_c|(1 − π/2); with u* ∈ [H_ARGMIN ∓ 1 ulp]
  and h_min ≥ H_MIN − 1 ulp (both float64 literals are the nearest to the 50-digit roots, which the tests
  recompute).
- max_P Φ ≤ the largest Φ at the ends of those edges (a convex function's maximum over a polygon is at a
  vertex, and every vertex lies on a box edge).
- σ·g ≥ Σᵢ |αᵢ|·(min Φ or −max Φ)/(2πd): the sum in interval arithmetic; the positive factor 1/(2πd) and the
  power-of-two scalings do not change the sign, so they are left out.

``method="paper"`` radii are verified by this tight bound, which is never below the paper's in exact
arithmetic (``ntkref.certify`` docstring): the statement proven — σ·g > 0 on the ball — is the same.

IBP certificate (App. H.2, eq. (67)): the layers z = W_std·(h@W)/√fan_in + b_std·b with interval h (the box
x₀ ∓ δ ∩ domain, or for ℓ2 the exact range x₀@W ∓ δ‖W_{:,k}‖₂), ReLU on both ends, in interval arithmetic;
with ``params0`` the same for f₀ and g = f − f₀ as an interval difference; proven iff σ·g's lower end > 0.
"""
from __future__ import annotations

import math
from fractions import Fraction

from .. import intervals as iv
from .._lib.backend import device_of
from ..intervals import Interval
from ._checks import normalized
from ._ntk_interval import H_ARGMIN, H_MIN, _blocked

_BLOCK = 1 << 14
_DEVICE_BLOCK = 1 << 23


def _point(x):
    return Interval._make(x, x, True)


def _scaled(x, k, xp):
    """An interval enclosing x/2ᵏ exactly (the float quotient is exact unless it is subnormal; then the exact
    quotient lies within half a subnormal step of it, and ± one step is exact subnormal arithmetic)."""
    xs = normalized(x, k)
    if k <= 0:
        return _point(xs)  # scaling up (or not at all) is exact for finite inputs
    fi = xp.finfo(xs.dtype)
    inexact = (xp.abs(xs) < float(fi.smallest_normal)) & (x != 0.0)
    if not bool(xp.any(inexact)):
        return _point(xs)
    step = xp.where(inexact, float(fi.smallest_normal) * float(fi.eps), 0.0)
    return Interval._make(xs - step, xs + step)


def _concat(parts, xp, axis):
    return Interval._make(xp.concat([p.lo for p in parts], axis=axis), xp.concat([p.hi for p in parts], axis=axis))


def _transpose(a, xp):
    return Interval._make(xp.matrix_transpose(a.lo), xp.matrix_transpose(a.hi), a._point)


def _constants(like):
    """Enclosures of u* = argmin h, h_min, √2, 3π/2 + 1 and 1 − π/2 in ``like``'s dtype."""
    u_lo, u_hi = math.nextafter(H_ARGMIN, -math.inf), math.nextafter(H_ARGMIN, math.inf)
    h_lo = math.nextafter(H_MIN, -math.inf)
    ustar = iv.constant(Fraction(u_lo), like)
    ustar = Interval._make(ustar.lo, iv.constant(Fraction(u_hi), like).hi)
    pi = iv.acos(iv.constant(-1, like))  # π, enclosed (assumption (A2))
    return {
        "ustar": ustar,
        "hmin": iv.constant(Fraction(h_lo), like),
        "sqrt2": iv.sqrt(iv.constant(2, like)),
        "c_plus": pi * 1.5 + 1,
        "c_minus": 1 - pi * 0.5,
    }


def _phi(p, R):
    """Φ(p, R) = 2p·atan2(q, −p) + q, q = √((R − p)(R + p)), at the float points (p, R), |p| ≤ R."""
    P, Rr = _point(p), _point(R)
    q = iv.sqrt((Rr - P) * (Rr + P))
    return P * iv.atan2(q, -P) * 2 + q


def _signed_phi_lower(pL, pU, RL, RU, want_min, xp, c):
    """A proven lower bound of min_P Φ (``want_min``) or of −max_P Φ, P = [pL,pU]×[RL,RU] ∩ {|p| ≤ R} (floats)."""
    inf = math.inf
    RL = xp.maximum(RL, 0.0)
    RU = xp.maximum(RU, RL)
    pL = xp.minimum(pL, RU)  # enlarging P keeps the bound sound (and P non-empty)
    pU = xp.maximum(xp.maximum(pU, -RU), pL)
    best = None
    any_edge = None
    for Rc in (RL, RU):  # edges R = Rc, p ∈ [a, b]
        a, b = xp.maximum(pL, -Rc), xp.minimum(pU, Rc)
        feasible = a <= b
        b = xp.where(feasible, b, a)
        s = _point(Rc) * c["ustar"]  # encloses u*·Rc, the unconstrained minimiser
        dec, inc = b <= s.lo, a >= s.hi
        first = xp.where(want_min & dec, b, a)
        v1, v2 = _phi(first, Rc), _phi(b, Rc)
        interior = (_point(Rc) * c["hmin"]).lo
        lo_val = xp.where(dec | inc, v1.lo, interior)
        hi_val = xp.maximum(v1.hi, v2.hi)
        val = xp.where(feasible, xp.where(want_min, lo_val, -hi_val), inf)
        best = val if best is None else xp.minimum(best, val)
        any_edge = feasible if any_edge is None else (any_edge | feasible)
    for Pc in (pL, pU):  # edges p = Pc, R ∈ [max(RL, |Pc|), RU]
        absP = xp.abs(Pc)
        lo_R = xp.maximum(RL, absP)
        feasible = lo_R <= RU
        lo_R = xp.where(feasible, lo_R, RU)
        t = _point(absP) * c["sqrt2"]  # encloses √2|Pc|, the minimiser along the edge
        dec, inc = RU <= t.lo, lo_R >= t.hi
        first = xp.where(want_min & dec, RU, lo_R)
        v1, v2 = _phi(Pc, first), _phi(Pc, RU)
        factor = iv.where(Pc >= 0, c["c_plus"], c["c_minus"])
        interior = (_point(absP) * factor).lo
        lo_val = xp.where(dec | inc, v1.lo, interior)
        hi_val = xp.maximum(v1.hi, v2.hi)
        val = xp.where(feasible, xp.where(want_min, lo_val, -hi_val), inf)
        best = xp.minimum(best, val)
        any_edge = any_edge | feasible
    return xp.where(any_edge, best, -inf)  # an empty polygon cannot be (x₀ is in it): refuse


class ProvenNTKMargin:
    """σ·g's proven lower bound over balls: the outward-rounded re-evaluation of ``_NTKGeometry.signed_lower``."""

    def __init__(self, geo, x_test, x_train, alpha, ka, domain, exact_domain):
        xp = geo.xp
        self.xp, self.geo, self.norm, self.exact_domain = xp, geo, geo.norm, exact_domain
        self.k0 = geo.k0
        X = _scaled(x_test, geo.k0, xp)
        T = _scaled(x_train, geo.kt, xp)
        self.abs_alpha = iv.abs(_scaled(alpha, ka, xp))
        self.sign_alpha = xp.sign(alpha)
        self.d = x_test.shape[1]
        like = x_test[:0, 0]
        self.c = _constants(like)
        self.sqrt_d = iv.sqrt(iv.constant(self.d, like))
        self.X, self.absX = X, iv.abs(X)
        self.P0 = iv.matmul(X, _transpose(T, xp))
        self.N2 = iv.sqrt(iv.sum(iv.square(T), axis=1))
        self.N1 = iv.sum(iv.abs(T), axis=1)
        self.S2 = iv.sum(iv.square(X), axis=1)
        self.X0N = iv.sqrt(self.S2)
        self.L1 = iv.sum(self.absX, axis=1)
        self.domain = None
        if geo.domain is not None:
            lo, hi = domain  # the checked domain in the inputs' units
            self.domain = (_scaled(lo, geo.k0, xp), _scaled(hi, geo.k0, xp))
            if exact_domain:
                self.T_T, self.absT_T = _transpose(T, xp), _transpose(iv.abs(T), xp)
            else:  # boundary indicators from the unscaled floats (exact comparisons)
                at = xp.astype(xp.concat([x_test == lo[None, :], x_test == hi[None, :]], axis=1), x_test.dtype)
                pos, neg = iv.relu(T), iv.relu(-T)
                self.corr_lower = iv.matmul(_point(at), _transpose(_concat([pos, neg], xp, 1), xp))
                self.corr_upper = iv.matmul(_point(at), _transpose(_concat([neg, pos], xp, 1), xp))

    def _ranges(self, D, rows):
        """Interval ranges of p (rows × train) and ‖x‖ (rows) for the scaled radii D (an interval)."""
        X0N, P0 = self.X0N[rows], self.P0[rows, :]
        Dc = D[:, None]
        rho = D * self.sqrt_d if self.norm == "linf" else D
        spread = rho[:, None] * self.N2[None, :]
        pL, pU = P0 - spread, P0 + spread
        rL, rU = iv.relu(X0N - rho), X0N + rho
        if self.norm == "linf" and self.domain is None:
            hold = Dc * self.N1[None, :]
            pL, pU = iv.maximum(pL, P0 - hold), iv.minimum(pU, P0 + hold)
            rU = iv.minimum(rU, iv.sqrt(self.S2[rows] + D * self.L1[rows] * 2 + iv.square(D) * self.d))
            rL = iv.maximum(rL, iv.sqrt(iv.sum(iv.square(iv.relu(self.absX[rows, :] - Dc)), axis=1)))
        elif self.domain is not None:
            lo, hi = self.domain
            X = self.X[rows, :]
            a, b = iv.maximum(X - Dc, lo[None, :]), iv.minimum(X + Dc, hi[None, :])
            if self.exact_domain:
                cc, w = (a + b) * 0.5, (b - a) * 0.5
                cp, wp = iv.matmul(cc, self.T_T), iv.matmul(w, self.absT_T)
                pL, pU = iv.maximum(pL, cp - wp), iv.minimum(pU, cp + wp)
            else:
                hold = Dc * self.N1[None, :]
                pL = iv.maximum(pL, P0 - hold + Dc * self.corr_lower[rows, :])
                pU = iv.minimum(pU, P0 + hold - Dc * self.corr_upper[rows, :])
            dist = iv.relu(iv.maximum(a, -b))  # dist(0, [a, b]) for a ≤ b
            rL = iv.maximum(rL, iv.sqrt(iv.sum(iv.square(dist), axis=1)))
            rU = iv.minimum(rU, iv.sqrt(iv.sum(iv.maximum(iv.square(a), iv.square(b)), axis=1)))
        return pL, pU, rL, rU

    def lower(self, delta, sign):
        """Proven lower bound (up to a positive factor) of sign·g over the balls of radii ``delta`` (original
        units), shape (n_test,)."""
        xp = self.xp
        n, m = self.X.shape[0], self.P0.shape[1]
        D_all = _scaled(delta, self.k0, xp)
        block = max(1, (_BLOCK if _blocked(xp) else _DEVICE_BLOCK) // max(m, 1))
        out = []
        for start in range(0, n, block):
            rows = slice(start, min(n, start + block))
            pL, pU, rL, rU = self._ranges(D_all[rows], rows)
            RL = (rL[:, None] * self.N2[None, :]).lo
            RU = (rU[:, None] * self.N2[None, :]).hi
            want_min = (sign[rows][:, None] * self.sign_alpha[None, :]) > 0
            v = _signed_phi_lower(pL.lo, pU.hi, RL, RU, want_min, xp, self.c)
            terms = self.abs_alpha[None, :] * _point(v)
            out.append(iv.sum(Interval._make(terms.lo, terms.lo, True), axis=1).lo)
        if not out:
            return xp.zeros((0,), dtype=self.X.dtype, device=device_of(self.X.lo))
        return xp.concat(out) if len(out) > 1 else out[0]


def ibp_proven_margin(layers, ws, bs, layers0, ws0, bs0, x_test, norm, domain, xp):
    """``margin(delta, sign)`` → proven lower bound of sign·g by IBP in interval arithmetic (module docstring)."""
    X = _point(x_test)
    like = x_test[:0, 0]

    def forward(lays, wss, bss, delta):
        D = _point(delta)[:, None]
        W, b = lays[0]
        z = None
        if norm == "linf" or domain is not None:
            a, c = (X - D).lo, (X + D).hi
            if domain is not None:
                a, c = xp.maximum(a, domain[0][None, :]), xp.minimum(c, domain[1][None, :])
            z = iv.matmul(Interval._make(a, c), W)
        if norm == "l2":  # exact: max over ‖Δ‖₂ ≤ δ of ⟨Δ, W_{:,k}⟩ is δ‖W_{:,k}‖₂
            col = iv.sqrt(iv.sum(iv.square(_point(W)), axis=0))
            e = (D * col[None, :]).hi
            z2 = iv.matmul(X, W) + Interval._make(-e, e)
            z = z2 if z is None else Interval._make(xp.maximum(z.lo, z2.lo), xp.minimum(z.hi, z2.hi))
        z = _affine_tail(z, b, wss[0], bss[0], W.shape[0], like)
        for i in range(1, len(lays)):
            W, b = lays[i]
            z = _affine_tail(iv.matmul(iv.relu(z), W), b, wss[i], bss[i], W.shape[0], like)
        return z[:, 0]

    def margin(delta, sign):
        g = forward(layers, ws, bs, delta)
        if layers0 is not None:
            g = g - forward(layers0, ws0, bs0, delta)
        return xp.where(sign > 0, g.lo, -g.hi)

    return margin


def _affine_tail(zw, b, w_std, b_std, fan_in, like):
    """W_std·(h@W)/√fan_in + b_std·b from the interval h@W."""
    scale = iv.constant(Fraction(w_std), like) / iv.sqrt(iv.constant(fan_in, like))
    z = zw * scale
    if b is not None and b_std != 0.0:
        z = z + _point(b)[None, :] * iv.constant(Fraction(b_std), like)
    return z


def verify_and_shrink(radii, margin, sign, floor, tol, xp):
    """Radii proven by ``margin`` (> 0), shrinking the others (module docstring); returns (radii, shrunk, unproven).

    ``floor`` (the bracket top·2⁻⁶⁰, in the radii's units): a radius shrunk below it becomes 0."""
    proven = (radii == 0.0) | (margin(radii, sign) > 0.0)
    shrunk = ~proven
    if bool(xp.all(proven)):
        return radii, shrunk, xp.zeros_like(shrunk)
    power = 1
    while not bool(xp.all(proven)):
        factor = (1.0 + tol) ** (-power)
        trial = radii * factor if factor > 0 else xp.zeros_like(radii)
        trial = xp.where(trial < floor, 0.0, trial)
        radii = xp.where(proven, radii, trial)
        proven = proven | (radii == 0.0) | (margin(radii, sign) > 0.0)
        power *= 2
    unproven = shrunk & (radii == 0.0)
    return radii, shrunk, unproven
