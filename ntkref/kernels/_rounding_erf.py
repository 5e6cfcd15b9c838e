r"""Proven per-entry rounding-error bounds of the FC **erf** kernels (``fc(..., activation="erf", error_bound=True)``).

A per-entry running error analysis (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3) of the
operations of :func:`._layers.fc_block` with :func:`._layers._erf_layer` (seed 004 eqs. (6)–(8) in
neural-tangents' convention; the erf dual of the module docstring of :mod:`._fc`: E[σσ] = (2/π) asin r,
r = 2t₁t₂ρ, t = s/p, p = √(1 + 2s²), E[σ′σ′] = (4/π)u₁u₂/√(1 − r²), u = 1/p), with biases and per-layer
``W_std``/``b_std``.  Bounds are arrays carried alongside the values, computed from the computed values; the
input geometry and the first affine step reuse the scalar angle-space analysis of :mod:`._rounding`
(``_input_stage``) and :mod:`._rounding_bias` (``_dense``, ``_norm_error``).

**Theorem.**  Let K̃ be the float kernel returned by ``fc`` (erf, closed form, any per-layer W_std/b_std, depth
L ≤ 10, float64 or float32) and K the exact real-number kernel of the exact float inputs (and of the Python
floats W_std, b_std).  For every entry |K̃ᵢⱼ − Kᵢⱼ| ≤ Bᵢⱼ, the array returned as ``nngp_bound``/``ntk_bound``.
For a pair with an *irregular* row — a row of computed norm below T = 2^-1000 (float64; 2^-120 float32), a
row lifted by 2^64, or one whose computed scale chain (below) drops under 4η without being 0 — B is the trivial
bound |K̃| + P̂ᵢP̂ⱼ, P̂ an upper bound of √K(x,x) (Cauchy–Schwarz; E[erf²] ≤ 1, E[erf′²] ≤ 4/π).

Refused (NotImplementedError naming ``error_bound``): depth > 10, JAX arrays, γ_d > 1e-3, a b_std whose square
underflows to 0, and a first-order quantity of stage (A) or a per-layer scale error e_h above 1e-3 (e.g. float32
with a non-zero b_std below ~1e-35: e_h ∋ η/b).

**Assumptions** (the only ones): those of :mod:`._rounding` (IEEE-754 round-to-nearest for + − × ÷ √, gradual
underflow or flush-to-zero covered by an absolute η per operation, no TF32, dot products within γ_d, atan,
atan2, sin, cos, hypot within N = 4 ulp, i.e. a relative 2Nu = 8u plus an absolute η — :data:`._rounding.ULPS`),
and the erf layer's intermediate arrays are those of ``_erf_layer(parts=...)`` (they are: the same call).

**Proof** (u the unit roundoff, η the smallest normal; "rel(a, b, …)" = Π(1 + ·) − 1, evaluated in exact
rational arithmetic and rounded up, :func:`_rel`).

(A) Input and first affine step.  The unit rows' state (ρ̃, ω̃, õ) has shadow angle θ′ = 2 atan √(ω̃/õ) within
E of the exact angle and defects N, T (:func:`._rounding._input_stage`; with b₀ > 0 after
:func:`._rounding_bias._dense`); the scales s̃ have relative error e (``_norm_error``, then W·s or hypot).  With
λ = (ω̃ + õ)/2, |λ − 1| ≤ λ_b = (N + T)/2, ω̃ = λ(1 − cos θ′), sin θ′ = √(ω̃õ)/λ and |cos θ′ − cos θ| ≤
E(sin θ′ + E), the *per-entry* absolute errors of the state are
D_ω = (λ_b ω̃ + E√ω̃√õ)/(1 − λ_b) + E², D_o likewise with õ, D_ρ = max(N, T)/(1 − λ_b) + E: proportional
to sin θ′ near 0 and π, which the first erf layer at large scales needs (its gap 1 − r ≥ 1/(1 + 2s²) can be
~1e-300).  Σ⁰ = fl(fl(W²·fl(s̃₁s̃₂))·ρ̃) + b²: |Σ̃⁰ − Σ⁰| ≤ W²S̃·(rel(u, u, e, e) + A₀)/(1 − rel) + 2.1u|Σ̃⁰| +
u b² + O(η) (A₀: the input cos error).

(B) One erf layer (:func:`_erf_layer_bound`), exact c = 2t₁t₂, g = 1 − c, a = g + cω = 1 − cρ, b = g + co,
x₀ = √(ab) = √(1 − r²).  Per row: p̃ = hypot(1, √2 s̃) is p(s̃)(1 ± rel(2u, 8u)); t and u have
log-derivatives in s of 1/(1 + 2s²) ∈ (0, 1] and −2s²/(1 + 2s²) ∈ [−1, 0], so t̃, ũ are within ε₁ =
rel(e/(1 − e), rel(δ_p/(1 − δ_p), u)) relative; tt̃ within ε_c = rel(ε₁, ε₁, u) (+η); gap̃ — a quotient of sums
of products of t̃, ũ, all non-negative (u² + 2t² = 1 makes it equal 1 − c exactly) — within ε_g (+20η).
Then |r̃ − r| ≤ Δr = tt̃(ε_c′ + u + (1 + ε_c′)D_ρ) + O(η), |ã − a| ≤ Δa = m_a ã + (1 + ε_c′)tt̃ D_ω + O(η)
(m_a from max(ε_g′, ε_c′) and the two roundings of ã), Δb likewise, |ãb̃ − ab| ≤ ΔA = Δa(b̃ + Δb) + ãΔb.  With
x̃ = √(ãb̃): |x̃ − x₀| ≤ min(ΔA/x̃, √ΔA) (|√A − √B| ≤ |A − B|/√A and ≤ √|A − B|: the min makes the bound
per-entry conditioned — the ill-conditioned entries at large scale and angle ~u get √ΔA, an absolute error
~√u·… of the *angle*, and a trivial NTK factor, which is the real conditioning there, not an artefact),
|root̃ − x̃| ≤ 1.51u x̃ + 1.01√η, and x̃ ≥ x_lo = fl(fl(root̃ − 1.01√η)(1 − 4u)) (directed by construction);
ΔA/x_lo is used where x_lo ≥ 1e-300 (1e-36 float32; ΔA ≤ ~60, so it is finite), √ΔA alone elsewhere.
(r, x₀) is a unit vector, so by the mean value theorem on the segment to (r̃, root̃) (|∇atan2| = 1/‖v‖ ≥ …),
|atan2(r̃, root̃) − asin r| ≤ Δ/(1 − Δ) ≤ 1.36Δ for Δ = Δr + |root̃ − x₀| ≤ 0.26, else ≤ π; atan2 (8u), the
constant 2/π and the product add 10.1u: ΔE.  Σʰ = W²E + b²: ΔΣ = W²(1 + u)ΔE + 3.1u(W² + b²) + O(η).
E[σ′σ′]: dõt = fl(fl(4/π·fl(ũ₁ũ₂))/root̃) = dot·(x₀/root̃)(1 ± ε_d), ε_d = rel(ε₁, ε₁, u, u, u, u), so
|dõt − dot| ≤ dõt(|root̃ − x₀|/x_lo₂ + ε_d)/(1 − ε_d) with x_lo₂ = fl(fl(root̃ − |root̃ − x₀|)(1 − 3u)) > 0 a
lower bound of x₀; otherwise ≤ dõt + (4/π)min(u₁, u₂) (as (1 + 2q₁)(1 + 2q₂) − 4Σ₁₂² ≥ 1 + 2q₁ + 2q₂ ≥ p_max²).
Θʰ = W²·dot·Θʰ⁻¹ + Σʰ: ΔΘ = W²(1 + u)((Δdot + 4.1u dõt)|Θ̃ʰ⁻¹| + (dõt + Δdot)ΔΘʰ⁻¹) + ΔΣ + O(u)(W² + b²).
(C) The next state (:func:`._layers._pair_from_kernel`): ρ̃₊ = fl(fl(Ẽ/s̃₁₊)/s̃₂₊) (clipped: the clip only moves
it towards [−1, 1] ∋ ρ₊) with s̃₊ = erf_root(s̃) within rel(e, 12u) + 1e-23 (f(s) = (2/π)asin(2s²/(1 + 2s²)) has
f(λs)/f(s) ∈ [λ², 1] for λ ≤ 1 — f(q)/q decreasing — so √f is within the relative error of s; the s < 1e-6
branch's model error atan z ≥ z − z³/3 is ≤ 1.4e-24 relative): D_ρ₊ = ΔE(1 + 2.01u)/(s̃₁₊s̃₂₊) + rel-terms + η/s̃₂₊,
divided by the computed scales themselves — never by a capped or floored scale: ΔE ≈ 10u|Ẽ| + 2η is relative, so
a cap on 1/s̃ would underestimate D by up to the cap — and capped at 2 (|ρ̃₊ − ρ₊| ≤ 2 always; the first quotient
is capped at 4 before the second division, which keeps it finite and still gives 2, as s̃₊ ≤ 1 + 8u), D_ω, D_o =
D_ρ + 4u (1 ∓ ρ̃ rounded once).  An entry with a row of s̃₊ < 4η gets D = 2 (a zero row: c = 0 or P = 0 next, so
its undefined angle never enters; an irregular row: its entries get the trivial bound).  (D) An affine step with b_h > 0 in absolute mode: the exact
map F(ω; a₁, a₂) = (S − P − b² + Pω)/S is linear in ω with slope P/S = κ₁κ₂ (κ = Wa/hypot(Wa, b)) and, for
consistent (ρ, ω, o), equals 1 − cos ψ with ψ the angle of (a₁x̂, b), (a₂ŷ, b), ½-Lipschitz in each log aᵢ
(:mod:`._rounding_bias`, step (2)), so D′ = κ̃₁κ̃₂K·D + e_a/(1 − e_a) + 2.1ε_dense + 10η/b² + 10η/b, ε_dense
the relative rounding of the quotients of non-negative sums (:func:`_dense_rel`).
(E) The bound's own evaluation: every bound array is a positive expression (+, ×, ÷ by a proven lower bound,
√, min, max) of non-negative floats with at most 40 roundings on a path, so its computed value is at least
(1 − u)⁴⁰ times the exact one less the absolute underflow, which the explicit O(η) terms (sized ×2) absorb;
every consumed bound is multiplied by INF = 1 + 64u (folded into the constants), the outputs once at the end.

Observed: the scaled bound B/√(K(x,x)K(x′,x′)) is ~1e-15…1e-13 for rows of moderate scale (the tests report it
per depth and d), grows with the scale s = W₀‖x‖/√d of the first layer where the angle is near 0 or π (the
kernel's own condition number there: Σ̇ = (4/π)/√(1 + 4q + 4q²θ²) depends on qθ), and is trivial for pairs
whose computed angle cannot resolve 1/q (e.g. rows x and 3x of norm 1e150: their computed angle is ~u, the
exact 0, and the NTK entry truly has an O(1) relative error).  Rows with scale above ~1e145 also lose
relative NTK accuracy to the underflow of the gap's terms (η/g); such bounds are proven but loose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .._lib.backend import device_of
from ._layers import _dense_pair, _dense_scale, _erf_layer, _erf_root, input_angles
from ._rounding import ULPS, _input_stage, _unit
from ._rounding_bias import _dense, _norm_error

__all__ = ["ErfSetup", "erf_setup", "erf_rows", "erf_block"]

MAX_DEPTH = 10
_LIFT = 2.0 ** 64


def _up(x):
    """A float ≥ the exact rational x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def _rel(*eps):
    """rel(a, b, …) = Π(1 + εᵢ) − 1 in exact arithmetic, rounded up (a float)."""
    p = Fraction(1)
    for e in eps:
        p *= 1 + Fraction(e)
    return _up(p - 1)


def _ru(x):
    """x/(1 − x) rounded up: the relative error of the inverse direction."""
    return _up(Fraction(x) / (1 - Fraction(x)))


@dataclass(frozen=True)
class ErfSetup:
    """Scalars of the analysis (module docstring): unit roundoff ``u``, ``eta``, stage (A)'s ``E``, ``lam``
    (λ_b), ``a_def``, ``A0``, the per-layer scale errors ``e`` (e[h]: of the scale entering erf layer h), and
    ``floor`` T."""

    u: float
    eta: float
    E: float
    lam: float
    a_def: float
    A0: float
    e0: float
    e: tuple
    floor: float
    scale_floor: float
    Ws: tuple
    bs: tuple
    d: int
    c0: float  # the absolute term fc's _unlift adds to lifted entries' bounds


def erf_setup(d, Ws, bs, depth, dtype_name):
    """The scalars of :class:`ErfSetup`, or NotImplementedError naming ``error_bound`` (depth > 10, or a
    first-order quantity of stage (A) above 1e-3)."""
    if depth > MAX_DEPTH:
        raise NotImplementedError(
            f"The 'error_bound' parameter of fc: the proven erf bound is available up to depth {MAX_DEPTH} "
            f"(got {depth}); use error_bound=False or check against ntkref.enclosures.fc.")
    u, eta = _unit(dtype_name)
    tiny = [b for b in bs if b > 0 and b * b == 0.0]
    if tiny:  # the terms η/b² of steps (A), (D): b² underflows to 0 (b < 1.5e-162)
        raise NotImplementedError(
            f"The 'error_bound' parameter of fc: b_std = {tiny[0]:.3g} has a square that underflows to 0; the "
            "rounding analysis does not apply. Use b_std = 0 for that layer or a larger b_std, or check against "
            "ntkref.enclosures.fc.")
    E, N, T, A0 = _input_stage(d, u, eta, ULPS)
    e = _norm_error(d, u, eta)
    e_s = e
    W, b = Ws[0], bs[0]
    if b > 0:
        E, N, T, e = _dense(E, N, T, e, W, b, u, eta, b, ULPS["hypot"])
    else:
        e = _rel(e, u)
    worst = max(E, N, T, e)
    if not worst <= 1e-3:
        raise NotImplementedError(
            "The 'error_bound' parameter of fc: the rounding analysis of the erf kernel's input stage does not "
            f"apply in {dtype_name} here (a rounding term reaches {worst:.2g}); use float64 or fewer features, or "
            "check against ntkref.enclosures.fc.")
    lam = (N + T) / 2
    a_def = _up(Fraction(max(N, T)) / (1 - Fraction(lam)))
    es = [e]
    for h in range(1, depth + 1):
        e_a = _rel(e, 12 * u) + 1e-23  # erf_root (module docstring, (C))
        bh = bs[h]
        e = _rel(e_a, u, 2 * ULPS["hypot"] * u) + eta / bh if bh > 0 else _rel(e_a, u)
        es.append(e)
    if not max(es) <= 1e-3:  # the per-layer scale errors enter as e/(1 − e) (:func:`_ru`): keep them first-order
        raise NotImplementedError(
            "The 'error_bound' parameter of fc: the rounding analysis of the erf kernel's scales does not apply "
            f"in {dtype_name} here (a scale error reaches {max(es):.2g}); use float64 or larger non-zero b_std, or "
            "check against ntkref.enclosures.fc.")
    floor = 2.0 ** -1000 if dtype_name == "float64" else 2.0 ** -120
    return ErfSetup(u, eta, E, lam, a_def, A0, e_s, tuple(es), floor, 4 * eta, tuple(Ws), tuple(bs), d,
                    8 * eta)


def erf_rows(norms, factors, xp, st):
    """Per row: (regular mask, P̂ for the NNGP, P̂ for the NTK) — P̂ an upper bound of √K(x,x) of the row
    (times 2^64 for a lifted row, whose outputs ``fc`` scales by 2^-64 afterwards)."""
    d, Ws, bs, u, eta = st.d, st.Ws, st.bs, st.u, st.eta
    zero = norms == 0
    true_n = norms if factors is None else norms * factors
    regular = zero | (true_n >= st.floor)
    if factors is not None:
        regular = regular & (factors == 1)
    s = norms / math.sqrt(d)
    s = _dense_scale(s, Ws[0], bs[0], xp)
    regular = regular & ((s == 0) | (s >= st.scale_floor))
    for h in range(1, len(Ws)):
        a = _erf_root(s, xp)
        regular = regular & ((a == 0) | (a >= st.scale_floor))
        if h < len(Ws) - 1:
            if bs[h] > 0:  # W·a must not underflow where it is not 0 (its relative error enters the angle)
                wa = Ws[h] * a
                regular = regular & ((wa == 0) | (wa >= st.scale_floor))
            s = _dense_scale(a, Ws[h], bs[h], xp)
            regular = regular & ((s == 0) | (s >= st.scale_floor))
    # P̂ (as square roots, no overflow): √Θ⁰(x,x) ≤ W₀n(1 + e)/√d + b₀ (n the computed norm: lifted rows keep
    # their 2^64), then Σʰ(x,x) ≤ W_h² + b_h² and Θʰ(x,x) ≤ Σʰ + (4/π)W_h²Θʰ⁻¹ (E[erf²] ≤ 1, E[erf′²] ≤ 4/π),
    # so Θᴸ ≤ α + βΘ⁰ and √Θᴸ ≤ √α + √β·√Θ⁰
    infl = 1 + 64 * u
    r0 = norms * (Ws[0] / math.sqrt(d) * (1 + st.e0) * infl)
    r0 += bs[0] * infl + eta
    lifted = factors is not None
    lift = xp.where(factors < 1, xp.full_like(norms, _LIFT), xp.ones_like(norms)) if lifted else 1.0
    if len(Ws) == 1:
        return regular, r0, r0
    alpha, beta = 0.0, 1.0
    for h in range(1, len(Ws)):
        sig_h = (Ws[h] ** 2 + bs[h] ** 2) * infl
        alpha = (sig_h + 4 / math.pi * Ws[h] ** 2 * alpha) * infl
        beta = 4 / math.pi * Ws[h] ** 2 * beta * infl
    P_sig = (math.sqrt(sig_h) + eta) * infl * lift * xp.ones_like(norms)
    P_th = r0 * (math.sqrt(beta) * infl)
    P_th += lift * ((math.sqrt(alpha) + eta) * infl)
    return regular, P_sig, P_th


def _dense_rel(u, h_ulp):
    """ε_dense: relative rounding of ω̃′, õ′, ρ̃′ of :func:`._layers._dense_pair` against the exact map at the
    computed scales (module docstring, (D))."""
    t = _rel(u, 2 * h_ulp * u)
    S = _rel(t, t, u)
    P = _rel(u, u, u)
    g = _rel(u, u)
    sq = _rel(g, g, u)
    den = _rel(max(S, P, u), u, u)
    ex = _rel(_rel(sq, _ru(den), u), u, u)
    num = _rel(max(ex, _rel(P, u), u), u)
    return _rel(num, _ru(S), u)


def _erf_layer_bound(st, h, parts, Dr, Dw, Do, s1, s2, E_val, dot, inf_in, xp):
    """Step (B) for erf layer h: (ΔE, Δdot) arrays (the bounds of the unscaled E[σσ] and E[σ′σ′])."""
    u, eta = st.u, st.eta
    e = st.e[h - 1]
    dp = _rel(_ru(_rel(u, u)), 2 * ULPS["hypot"] * u)
    eps1 = _rel(_ru(e), _rel(_ru(dp), u))
    eps_c = _rel(eps1, eps1, u)
    epc = _ru(eps_c)
    x = _rel(eps1, eps1, u)
    sq = _rel(x, x, u)
    num = _rel(sq, u, u)
    den = _rel(eps_c, u) + 2 * eta
    eps_g = _rel(num, _ru(den), u)
    epg = _ru(eps_g)
    m = max(epg, epc)
    ma = _up((Fraction(m) + Fraction(2.01) * Fraction(u)) / (1 - Fraction(2.01) * Fraction(u))) * (1 + 64 * u)
    kc = (1 + epc) * inf_in * (1 + 64 * u)
    tt, a, b, root, u1, u2 = (parts[k] for k in ("tt", "a", "b", "root", "u1", "u2"))
    infl = 1 + 64 * u
    # Δr
    Dr_ = tt * ((epc + u) * infl + kc * Dr) + 20 * eta
    # Δa, Δb, ΔA
    Da = a * ma
    Da += tt * (kc * Dw)
    Da += 60 * eta
    Db = b * ma
    Db += tt * (kc * Do)
    Db += 60 * eta
    DA = (b + Db) * Da
    DA += a * Db
    DA *= infl
    # |root̃ − x₀|
    c1 = _up(Fraction(1.01) * Fraction(math.sqrt(eta)) * Fraction(1 + 1e-12))
    x_lo = root - c1
    x_lo *= 1 - 4 * u
    # ΔA/x_lo only where x_lo ≥ 1e-300 (1e-36 float32: ΔA ≤ ~60, so no overflow), a proven lower bound of x̃;
    # elsewhere √ΔA alone (no floor on a divisor: a floored x_lo would underestimate ΔA/x̃)
    ok_lo = x_lo >= (1e-300 if u < 1e-10 else 1e-36)
    Dx = DA / xp.where(ok_lo, x_lo, xp.ones_like(x_lo))
    Dx = xp.where(ok_lo, xp.minimum(Dx, xp.sqrt(DA)), xp.sqrt(DA))
    Dx *= infl
    Dx += root * (1.53 * u * infl)
    Dx += 2.1 * math.sqrt(eta)
    Dt = Dr_ + Dx  # Δ
    # |Δψ| ≤ (Δr + (|r̃| + Δr)·Δx/(1 − Δ))/(1 − Δ) ≤ 1.34(Δr + 1.34(|r̃| + Δr)Δx) for Δ ≤ 0.2501
    kE = _up(Fraction(2) / Fraction(math.pi) * Fraction(1.34) * (1 + Fraction(10 ** -12))) * infl
    rr = xp.abs(parts["r"])
    rr += Dr_
    rr *= Dx
    rr *= 1.34 * infl
    rr += Dr_
    DE = xp.where(Dt <= 0.25, rr * kE, xp.full_like(Dt, 2.0))
    DE += xp.abs(E_val) * (10.1 * u * infl)
    DE += 2 * eta
    Ddot = None
    if dot is not None:
        eps_d = _rel(eps1, eps1, u, u, u, u)
        kd1 = _up(1 / (1 - Fraction(eps_d))) * infl
        kd2 = _ru(eps_d) * infl
        x_lo2 = (root - Dx) * (1 - 3 * u)
        ok2 = x_lo2 > 0
        rel = Dx / xp.where(ok2, x_lo2, xp.ones_like(x_lo2))
        rel *= kd1
        rel += kd2
        kmax = _up(Fraction(4) / Fraction(math.pi) * (1 + Fraction(10 ** -12)) / (1 - Fraction(eps1))) * infl
        umin = xp.minimum(u1, u2)
        Ddot = xp.where(ok2, dot * rel, dot * infl + umin * kmax)
    return DE, Ddot


def erf_block(x1n, x1u, x2n, x2u, d, Ws, bs, want_ntk, xp, st, diag=False):
    """The erf values of :func:`._layers.fc_block` (the same operations in the same order: bit-for-bit) and
    their bounds before the irregular-row replacement: (nngp, ntk, nngp_bound, ntk_bound)."""
    u, eta = st.u, st.eta
    infl = 1 + 64 * u
    s1 = x1n[:, None] / math.sqrt(d)
    s2 = x2n[None, :] / math.sqrt(d)
    pair = input_angles(x1u, x2u, xp)
    W, b = Ws[0], bs[0]
    nngp = (W * W) * (s1 * s2) * pair.rho + b * b
    # (A) Σ⁰
    w2 = W * W
    r4 = _rel(u, u, st.e0, st.e0)
    k0 = _up((Fraction(r4) + Fraction(st.A0)) / (1 - Fraction(r4)) + Fraction(2.02) * Fraction(u)) * w2 * infl ** 2
    S = s1 * s2
    DS = S * k0
    DS += xp.abs(nngp) * (2.1 * u * infl)
    DS += u * b * b * infl + 3 * eta + 4 * w2 * eta
    pair = _dense_pair(pair, s1, s2, W, b, xp)
    s1, s2 = _dense_scale(s1, W, b, xp), _dense_scale(s2, W, b, xp)
    # the state's per-entry errors (angle mode)
    E, lam = st.E, st.lam
    root_w = xp.sqrt(pair.omr) * xp.sqrt(pair.opr) * (E * infl)
    kl = 1 / (1 - lam) * infl
    Dw = (pair.omr * lam + root_w) * kl + E * E * infl
    Do = (pair.opr * lam + root_w) * kl + E * E * infl
    Dr = (st.a_def + E) * infl
    if diag:  # a row with itself: the exact ω is 0 and the computed ω̃ is exactly 0 (θ̃ = 2 atan2(0, ·) = 0; the
        # affine step keeps it: excess = b²(W·0)²/… = 0, P·0 = 0), so D_ω = 0 on the diagonal of a symmetric block
        eye = xp.eye(Dw.shape[0], dtype=xp.bool, device=device_of(Dw))
        Dw = xp.where(eye, xp.zeros_like(Dw), Dw)
    ntk = nngp if want_ntk else None
    DT = DS if want_ntk else None
    n_layers = len(Ws) - 1
    dense_rel = _dense_rel(u, ULPS["hypot"])
    for h, (W, b) in enumerate(zip(Ws[1:], bs[1:]), start=1):
        last = h == n_layers
        parts = {}
        e_ff, e_dd, pair_a, (a1, a2) = _erf_layer(pair, s1, s2, xp, parts)
        DE, Ddot = _erf_layer_bound(st, h, parts, Dr, Dw, Do, s1, s2, e_ff, e_dd if want_ntk else None, infl, xp)
        w2 = W * W
        kW = _up(Fraction(w2) / (1 - Fraction(u))) * infl * infl
        c_sig = 3.1 * u * infl  # × |Σ̃ʰ| (the roundings of W²Ẽ + b² and of the NTK's last sum)
        if want_ntk:  # before the in-place updates of e_dd (the values' arrays)
            absT = xp.abs(ntk)
            t1 = Ddot + e_dd * (4.1 * u)
            t1 *= absT
            t2 = e_dd + Ddot
            t2 *= DT
            t1 += t2
            t1 *= kW
        nngp = e_ff
        DS = DE * kW
        DS += 4 * eta
        if not last:
            # (C) the next state from Ẽ (unscaled) and the new scales
            e_a = _rel(st.e[h - 1], 12 * u) + 1e-23
            rel_ss = _up(1 / (1 - Fraction(e_a)) ** 2 - 1)
            kq = _rel(u, u, u, u, 2.01 * u) + 1
            # D = (ΔE·kq/s̃₁₊ + 2η)/s̃₂₊ + rel-terms, divided by the computed scales themselves (no cap: ΔE is
            # relative, ~10u|Ẽ| + 2η, so any cap on 1/s̃ underestimates D).  Overflow-free: a row with
            # s̃₊ ≥ 4η has ΔE·kq/s̃₁₊ ≤ 2.1/(4η) < ∞, which is then capped at 4 (sound: beyond 4, the exact
            # D ≥ 4/s̃₂₊ ≥ 2 since s̃₊ ≤ 1 + 8u, and the min below gives 2 either way), and ≤ 4.01/(4η) < ∞ after
            # the second division.  A row with s̃₊ < 4η (zero, or an irregular row: its entries get the trivial
            # bound) gets D = 2, always valid as |ρ̃₊ − ρ₊| ≤ 2 (both in [−1, 1]).
            lo = st.scale_floor
            ok1, ok2 = a1 >= lo, a2 >= lo
            D = DE * (kq * infl)
            D /= xp.where(ok1, a1, xp.ones_like(a1))
            D = xp.minimum(D, xp.full_like(D, 4.0))
            D += 2 * eta
            D /= xp.where(ok2, a2, xp.ones_like(a2))
            D += (rel_ss + 2.01 * u * (1 + rel_ss) + eta) * infl
            D = xp.where(ok1 & ok2, xp.minimum(D, xp.full_like(D, 2.0)), xp.full_like(D, 2.0))
            D += 4 * u
        if W != 1.0:
            nngp *= W * W
        if b != 0.0:
            nngp += b * b
        absS = xp.abs(nngp)
        absS *= c_sig
        DS += absS
        if want_ntk:
            e_dd *= ntk
            if W != 1.0:
                e_dd *= W * W
            e_dd += nngp
            ntk = e_dd
            t1 += DS
            t1 += absS
            t1 += 3 * eta
            DT = t1
        if not last:
            pair = _dense_pair(pair_a, a1, a2, W, b, xp)
            s1, s2 = _dense_scale(a1, W, b, xp), _dense_scale(a2, W, b, xp)
            if b != 0.0:
                # (D) absolute mode through the affine step with bias
                bb = xp.asarray(b, dtype=a1.dtype, device=device_of(a1))
                k1 = (W * a1) / xp.hypot(W * a1, bb)
                k2 = (W * a2) / xp.hypot(W * a2, bb)
                kk = _up(1 / (1 - Fraction(_rel(2 * ULPS["hypot"] * u, u, u)))) ** 2 * infl ** 2
                D = D * (k1 * kk)
                D *= k2
                e_a = _rel(st.e[h - 1], 12 * u) + 1e-23
                D += (_ru(e_a) + 2.1 * dense_rel + 10 * eta / (b * b) + 10 * eta / b) * infl
                D = xp.minimum(D, xp.full_like(D, 2.0))
                D += 4 * u
            Dr = Dw = Do = D * infl
    outs_b = DS * infl
    ntk_b = DT * infl if want_ntk else None
    return nngp, ntk, outs_b, ntk_b


def apply_irregular(K, B, P1, P2, reg1, reg2, st, xp):
    """Replace the bound of entries with an irregular row by the trivial bound |K̃| + P̂ᵢP̂ⱼ (+ η)."""
    mask = ~(reg1[:, None] & reg2[None, :])
    if not bool(xp.any(mask)):
        return B
    # P̂ᵢP̂ⱼ where a row is irregular (its P̂ is small: no overflow), 0 elsewhere (not used there)
    triv = xp.where(mask, P1[:, None], xp.zeros_like(B)) * P2[None, :]
    triv *= 1 + 8 * st.u
    triv += xp.abs(K)
    triv += 4 * st.eta
    return xp.where(mask, triv, B)
