"""Interval bounds of the two-layer ReLU NTK over a ball (seed 000 eqs. (63)–(64), App. H.1, Thm 4.2).

- h of eq. (64) (:func:`ntk_h`) and its minimum ``H_MIN`` at ``H_ARGMIN``.
- The perspective Φ(p, R) = R·h(p/R) = 2πd·Θ and its bounds over the pairs (p, R) = (⟨x, xᵢ⟩, ‖x‖‖xᵢ‖)
  reachable from the ball: the exact extremes over the polygon [pᴸ, pᵁ] × [Rᴸ, Rᵁ] ∩ {|p| ≤ R}
  (``method="tight"``: :func:`_phi_box_bounds`, and :func:`_signed_phi_tight` for one side per pair) or
  App. H.1 with its errata fixed (``method="paper"``: :func:`_paper_phi_bounds`).
- :class:`_NTKGeometry`: the one test × train matrix product and the norms, computed once; per radius, the
  ranges of ⟨x, xᵢ⟩ and ‖x‖ (paper, Hölder, exact norm, box domain), the bounds of Θ and the lower bound of
  σ·g = σ·Σᵢ αᵢΘ(x, xᵢ) (seed 000 eqs. (65)–(66)) in row blocks.
- :func:`ntk_interval` and :func:`dot_norm_ranges`.

The proofs, the rounding slack and the scaling are in the ``ntkref.certify`` docstring.

Also used by ``_radius``: :func:`prepare` (checks the points and builds the geometry).
"""
from __future__ import annotations

import math

from .._lib.backend import device_of, is_numpy_namespace, namespace
from .._lib.memory import check_memory
from .._lib.validation import InvalidParameterError, check_array, check_option
from ._checks import (check_domain, check_points, check_radius, dtype_eps, finite_out, normalized, pow2_exponent,
                      times_pow2)


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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify
    >>> np.round(certify.ntk_h(np.array([-1.0, 0.0, 1.0])), 6).tolist()     # h(−1) = 0, h(0) = 1, h(1) = 2π
    [0.0, 1.0, 6.283185]
    >>> print(f"{float(certify.ntk_h(np.array(certify.H_ARGMIN))):.8f} {certify.H_MIN:.8f}")   # the minimum
    -0.42973782 -0.42973782
    """
    u = check_array(u, "u", caller="ntk_h")
    xp = namespace(u)
    return _phi(u, xp.ones_like(u), xp)


_BLOCK_ELEMENTS = 1 << 15  # row blocks of about 32k pairs keep the elementwise passes in cache
# other namespaces (GPUs): row blocks of about 16M pairs, large enough that each elementwise kernel fills
# the device, small enough that the ~40 temporaries of one bound evaluation (128 MiB each in float64)
# fit in a few GiB
_DEVICE_BLOCK_ELEMENTS = 1 << 24


def _blocked(xp):
    return is_numpy_namespace(xp)


# ---------------------------------------------------------------------------
# ranges of p = <x, x'> and r = ||x|| over the feasible set
# ---------------------------------------------------------------------------
class _NTKGeometry:
    """Quantities computed once per (x_test, x_train): the matrix product and norms."""

    def __init__(self, x_test, x_train, xp, norm, domain, method, exact_domain=False):
        # Θ(a·x, b·x′) = ab·Θ(x, x′) (a, b > 0) and the ball {‖x − x₀‖ ≤ δ} ∩ box scales with x₀: the geometry
        # works on x₀/s₀, x′/s_t (s₀ = 2^k0, s_t = 2^kt: the largest entry of each in [1, 2); exact, and
        # bit-identical results when no scaling is needed) with δ/s₀, and the results are scaled back
        # (times_pow2), so that ⟨x₀, x′⟩, ‖x₀‖², (R − p)(R + p) neither overflow for large finite inputs nor
        # underflow for tiny ones.  The bounds are then homogeneous: exactly so for power-of-two factors.
        self.k0, self.kt = pow2_exponent(x_test, xp), pow2_exponent(x_train, xp)
        self.s0 = math.ldexp(1.0, self.k0)
        if self.k0:
            x_test = normalized(x_test, self.k0)
            if domain is not None:
                domain = (normalized(domain[0], self.k0), normalized(domain[1], self.k0))
        x_train = normalized(x_train, self.kt)
        self.xp, self.norm, self.domain, self.method = xp, norm, domain, method
        self.exact_domain = exact_domain
        self.x_test, self.x_train = x_test, x_train
        self.d = x_test.shape[1]
        self.dtype = x_test.dtype
        self.eps = dtype_eps(self.dtype, xp)
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
        pL, pU, rL, rU = self._ranges(normalized(delta, self.k0), start, stop)
        xp, k = self.xp, self.k0 + self.kt
        rL = xp.maximum(times_pow2(rL, self.k0, xp, -1), 0.0)
        return (times_pow2(pL, k, xp, -1), times_pow2(pU, k, xp, 1), rL, times_pow2(rU, self.k0, xp, 1))

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
        pL, pU, rL, rU = self._ranges(normalized(delta, self.k0))
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
        return times_pow2((lo - slack) * scale, k, xp, -1), times_pow2((hi + slack) * scale, k, xp, 1)

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
    """Exact min and max of the convex Φ over P = [pL,pU]×[RL,RU] ∩ {|p| ≤ R} (see the ``ntkref.certify`` docstring)."""
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


def prepare(x0, x_train, caller, norm, method, domain, exact_domain=False, test_name="x_test"):
    xp, x_train, x0 = check_points(x_train, x0, caller, test_name)
    check_option(norm, "norm", ("linf", "l2"), caller=caller)
    check_option(method, "method", ("tight", "paper"), caller=caller)
    dom = check_domain(domain, x0, xp, caller, test_name)
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
    """Refuse rows too small against their array's largest for a sound bound (``ntkref.certify`` docstring, "Scale").

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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify, kernels
    >>> rng = np.random.default_rng(0)
    >>> x0, x_train = rng.standard_normal((1, 5)), rng.standard_normal((3, 5))
    >>> lo, hi = certify.ntk_interval(x0, x_train, 0.1)            # Θ(x, xᵢ) over ‖x − x₀‖∞ ≤ 0.1
    >>> Theta = kernels.two_layer_relu_ntk(x0 + rng.uniform(-0.1, 0.1, (1000, 5)), x_train)
    >>> bool(np.all((lo <= Theta) & (Theta <= hi)))                # sound on 1000 points of the ball
    True
    >>> lo_p, hi_p = certify.ntk_interval(x0, x_train, 0.1, method="paper")
    >>> bool(np.all((lo_p <= lo) & (hi <= hi_p)))                   # "tight" is never looser
    True
    """
    caller = "ntk_interval"
    xp, x_train, x0, geo = prepare(x0, x_train, caller, norm, method, domain, exact_domain, test_name="x0")
    delta = check_radius(radius, x0, xp, caller)
    return finite_out(geo.theta_bounds(delta), caller, ("x0", "x_train", "radius"))


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

    Examples
    --------
    x₀ = (1, 0), xᵢ = (1, 1), δ = ¼ (ℓ∞): ⟨x, xᵢ⟩ ∈ 1 ∓ δ‖xᵢ‖₁ and ‖x‖₂ ∈ [‖(¾, 0)‖, ‖(5/4, ¼)‖]:

    >>> import numpy as np
    >>> from ntkref import certify
    >>> p_lo, p_hi, r_lo, r_hi = certify.dot_norm_ranges(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]), 0.25)
    >>> print(f"{p_lo[0, 0]:.6f} {p_hi[0, 0]:.6f} {r_lo[0]:.6f} {r_hi[0]:.6f} {np.hypot(1.25, 0.25):.6f}")
    0.500000 1.500000 0.750000 1.274755 1.274755
    """
    caller = "dot_norm_ranges"
    xp, x_train, x0, geo = prepare(x0, x_train, caller, norm, "tight", domain, exact_domain, test_name="x0")
    delta = check_radius(radius, x0, xp, caller)
    return finite_out(geo.ranges(delta), caller, ("x0", "x_train", "radius"))
