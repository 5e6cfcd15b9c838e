r"""Proven rounding-error bounds of the FC ReLU kernels *with biases* (``fc(..., b_std > 0, error_bound=True)``).

A running error analysis (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3) of the operations of
:func:`._layers.fc_block` for ReLU (seed 004 eqs. (6)–(8) in neural-tangents' convention, with the bias terms
b_h² of the module docstring of :mod:`._fc`), in the angle space of :mod:`._rounding` (its shadow angle, its
defects N, T and its input stage are reused; its assumptions are the assumptions here, plus ``hypot`` within
N = 4 ulp, :data:`._rounding.ULPS`).

**Theorem.**  Let K̃ be the float kernel returned by ``fc`` (ReLU, per-layer ``W_std``/``b_std`` with at least one
b_h > 0, any depth L, float64 or float32) and K the exact real-number kernel of the exact float inputs (and of the
Python floats W_std, b_std).  For every entry

.. math::  |K̃_{ij} − K_{ij}| ≤ B_{ij} = C·P̃_i·P̃_j + c_0 ,

P̃ the computed diagonal scales of :func:`row_scales` (√Σ_L(x,x) for the NNGP, √Θ_L(x,x) for the NTK) and
C, c₀ the scalars of :func:`bias_coefficients`, for every pair of *regular* rows: rows whose computed norm and
computed scales before the first non-zero bias are at least T = 2^-1000 (float64; 2^-120 float32), and zero
rows (exact: the input angle of a zero row does not enter the kernel).  An entry
with an irregular row (a norm below ~1e-301, or scales that underflow through tiny W_std) gets the trivial
bound |K̃| + |K| ≤ |K̃| + P̂_i P̂_j/(1 − e)², P̂ the scales of the same recursion with every value raised to at
least T (an upper bound of the exact scale: every map of the recursion is increasing).  So B/√(K(x,x)K(x′,x′))
≈ C, an a-priori constant (:func:`bias_scaled_bound`), the same kind of constant c(L, d)·u as the bias-free
bound, for every entry of regular rows — cancellation of W²x·x′/d against b² included (the bound is relative to
the scale, not to the entry: an entry that cancels to 1e-20 of its scale has an error of ~u of its scale, which
no evaluation from the rounded inputs' dot product avoids).

**Proof outline** (a line of :func:`bias_coefficients` each).  (1) The input: the unit rows' state (ρ̃, ω̃, õ)
of :func:`._rounding._input_stage` (angle error E₀, defects N₀ = T₀, cos error A₀); the scales s̃ = fl(‖x‖/√d)
carry a relative error e (norm, √d, division).  Σ̃⁰ = fl(fl(W²·s̃₁s̃₂)·ρ̃ + b²) differs from Σ⁰ by at most
W²s₁s₂(A₀ + 2e + 6u) + u·|Σ̃⁰| + 2u·b² ≤ c₀·σ₀(x)σ₀(x′), σ₀ = √(W²s² + b²) ≥ Ws, b.  (2) A dense step with
bias (:func:`._layers._dense_pair`): its angle map is the angle between U = (a₁x̂, b) and V = (a₂ŷ, b), which
is 1-Lipschitz in the angle of (x̂, ŷ) (a rotation moves V by a₂·|ŷ − ŷ′| ≤ |V|·angle) and ½-Lipschitz in
log a₁ and in log a₂ (dU/d log a₁ = (a₁x̂, 0) has the component a₁b/|U| orthogonal to U, and a₁b/|U|² =
a₁b/(a₁² + b²) ≤ ½), so the scales' relative errors e (each) and the shadow state's λ (it multiplies P
as a scale a₁ would) move it by at most e + |λ − 1|/2 (to first order; the inflation covers log(1 + ε) ≤
ε/(1 − ε)); its computed 1 − ρ and 1 + ρ are
quotients of sums of non-negative terms (excess = b²W²(s₁ − s₂)²/(S + P + b²) = S − P − b² exactly), each
with relative error ≤ |λ − 1| + (22 + 6N)u, so the new shadow angle is within that of the exact map's
(|d(2 atan(e^y t))/dy| ≤ 1), the defects grow to at most N + T + (30 + 6N)u (the clip of ρ̃ to [−1, 1]
shrinks one defect and adds it to the other), and the new scale hypot(W s̃, b) has relative error
e + (2 + 2N)u.  Underflow of a product against S ≥ b²: η/b² (b the smallest non-zero b_std).  (3) A ReLU layer
(:func:`._layers.relu_layer`): θ̃ = 2 atan √(ω̃/õ) has relative error κ = (2N + 2)u against the shadow angle θ′;
|J̃ − J(θ′)| ≤ R_J = π(κ + a + 5u) + |λ − 1| + 2u (a = |ρ̃ − cos θ′|); J is π·0.6-Lipschitz in θ
(:data:`._rounding.J_LIP`), so Σ̃ʰ = fl(W²·fl(s̃₁s̃₂)J̃/(2π)) + b² is within c_h·σ_h(x)σ_h(x′),
c_h = R_J/π + 0.6E + 2e + 11u, of Σʰ (σ_h² = W²s²/2 + b² ≥ W²s₁s₂/2 by AM-GM on the pair and b² ≤ σσ).  The new
state: ω̃₊ = ω̃ + (θ̃ρ̃ − sin_t)/π differs from 1 − J(θ′)/π by θ′·D₁ (every term proportional to θ′, as in
:mod:`._rounding`, with D₁ = 0.73|λ − 1| + (κ + a + |λ − 1| + 8u)/π + 1.5u, 0.73 ≥ sup (1 − cos θ)/θ); the
sum ω̃₊ + ρ̃₊ equals ω̃ + ρ̃ up to 16u; the lemma θ ≤ 4.5 sin(T(θ)/2) turns D₁ into the new angle error
ℓ ≈ 2πD₁ + 0.5σ₊ (:func:`._rounding.angle_step`), and T is 1-Lipschitz: E₊ ≤ E + ℓ.  (4) The NTK:
Θ̃ʰ = fl(fl(ṁ·Θ̃ʰ⁻¹)·fl(W²)) + Σ̃ʰ with |ṁ − (π − θ)/(2π)| ≤ Δm = (π(κ + 3u) + E)/(2π) + 2u, ṁ ≤ (1 + 4u)/2 and
|Θʰ⁻¹| ≤ τ_{h−1}τ′_{h−1} (a PSD kernel; τ′ the other row's), so
|Θ̃ʰ − Θʰ| ≤ p_h·τ_hτ′_h·((1 + 4u)F_{h−1} + 2Δm + 3u) + r_h·τ_hτ′_h·c_h + u·|Θ̃ʰ| with
p_h = W²τ_{h−1}τ′_{h−1}/(2τ_hτ′_h) and r_h = σ_hσ′_h/(τ_hτ′_h).  The diagonal recursion τ_h² = σ_h² + W²τ_{h−1}²/2
(E[σ′(u)²] = 1/2) and Cauchy–Schwarz, √(σ² + w τ²)·√(σ′² + w τ′²) ≥ σσ′ + w ττ′, give p_h + r_h ≤ 1: the error is a
convex combination, F_h ≤ max((1 + 4u)F_{h−1} + 2Δm + 3u, c_h) + u (not the sum of the two: the NNGP part and
the propagated part share the scale τ_hτ′_h).  (5) Underflow of products (rows of norm 1e-300,
b₀ = 0): absolute terms of size η·W², carried in c₀.  (6) The output: P̃ from :func:`row_scales` (relative
error e_P, every term non-negative), B = fl(fl(C′P̃_i)P̃_j) + c₀′ with C′ = C/((1 − e_P)²(1 − u)³).  All
first-order coefficients are inflated by 1.01 (second-order terms: every quantity is checked to stay below
1e-3, else no bound is given).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .._lib.backend import device_of
from ._rounding import A_PRIORI_ROW_FLOOR, J_LIP, Q_RATIO, ULPS, _input_stage, _unit, angle_step

__all__ = ["BiasCoefficients", "bias_coefficients", "row_scales", "bias_scaled_bound", "apply_bias"]

_F = 1.01  # first-order inflation
_C = 1 / math.sqrt(2.0)  # the ReLU scale factor as _layers.relu_layer forms it


@dataclass(frozen=True)
class BiasCoefficients:
    """B = ``C``·P̃_iP̃_j + ``c0`` for regular rows; ``trivial``·P̂_iP̂_j + |K̃| + ``c0`` otherwise
    (module docstring).  ``scaled``: the a-priori scaled bound (≈ C): |K̃ − K| ≤ ``scaled``·√(K(x,x)K(x′,x′))
    for every entry of regular rows with √Σ_L(x,x) ≥ :data:`._rounding.A_PRIORI_ROW_FLOOR` (the computed
    scales' error e_P and the absolute term over that floor included: :func:`bias_coefficients`)."""

    C: float
    c0: float
    trivial: float
    scaled: float


def _norm_error(d, u, eta):
    """Relative error of the computed norm fl(max|x|·√Σ(x/max|x|)²) of a row of norm ≥ 2^-1000 (as
    :func:`._rounding._scale_error`), and of s̃ = fl(norm/fl(√d))."""
    g = d * u / (1 - d * u)
    e_s = 1 - math.sqrt(max(0.0, 1 - g - d * eta)) * (1 - u)
    e_n = (1 + u + math.sqrt(d) * eta) * (1 + e_s) * (1 + 2 * u) - 1
    return (1 + e_n) * (1 + 1.5 * u) * (1 + u) - 1


def _dense(E, N, T, e, W, b, u, eta, bmin, h_ulp):
    """One affine step Σ′ = W²Σ + b² (step (2)): the new (E, N, T) and scale error."""
    if b == 0.0:
        return E, N, T, e + u
    lam = (N + T) / 2
    under = 4 * eta / bmin ** 2 + 4 * eta / bmin
    E = E + _F * (e + lam / 2 + (24 + 6 * h_ulp) * u) + under  # each scale: angle ½-Lipschitz in its log
    NT = _F * (N + T + (30 + 6 * h_ulp) * u) + under
    return E, NT, NT, e + (3 + 2 * h_ulp) * u + eta / bmin


def bias_coefficients(d, Ws, bs, depth, dtype_name, outputs=("nngp", "ntk")):
    """{output: :class:`BiasCoefficients`} (the theorem of the module), or NotImplementedError naming
    ``error_bound`` where a first-order quantity exceeds 1e-3.

    Examples
    --------
    >>> from ntkref.kernels._rounding_bias import bias_coefficients
    >>> c = bias_coefficients(16, [1.0] * 3, [0.1] * 3, 2, "float64")
    >>> bool(c["ntk"].scaled < 1e-12), bool(c["nngp"].scaled < 1e-12)
    (True, True)
    """
    u, eta = _unit(dtype_name)
    h_ulp = ULPS["hypot"]
    bmin = min(b for b in bs if b > 0)
    if not bmin * bmin >= eta:  # the underflow terms η/b² (below) would exceed 1: no first-order regime
        raise NotImplementedError(
            f"The 'error_bound' parameter of fc: the smallest non-zero b_std, {bmin:.3g}, has a square below the "
            f"smallest normal number of {dtype_name} ({eta:.3g}); the rounding analysis does not apply. Use b_std "
            "= 0 for that layer or a larger b_std, or check against ntkref.enclosures.fc.")
    sh = 10 * math.sqrt(eta)
    E, N, T, A0 = _input_stage(d, u, eta, ULPS)
    e = _norm_error(d, u, eta)
    W, b = Ws[0], bs[0]
    c = _F * (A0 + 2 * e + 6 * u)  # step (1), relative to σ₀σ₀
    Zs = (W * W + 3) * eta
    Fn, Zt = c, Zs
    E, N, T, e = _dense(E, N, T, e, W, b, u, eta, bmin, h_ulp)
    worst = max(E, N, T, c)
    kappa = (2 * ULPS["atan"] + 2) * u
    for h in range(1, depth + 1):
        if not worst <= 1e-3:  # the first-order regime is left: refused below (the terms would turn meaningless)
            break
        W, b = Ws[h], bs[h]
        lam = (N + T) / 2
        a = max(N, T) / (1 - lam)
        RJ = _F * (math.pi * (kappa + a + 5 * u) + lam + 2 * u) + math.pi * sh
        c = _F * (RJ / math.pi + J_LIP * E + 2 * e + 11 * u)  # step (3)
        Zs = (W * W + 1) * 4 * eta
        dm = _F * ((math.pi * (kappa + 3 * u) + sh + E) / (2 * math.pi) + 2 * u)
        Fn = _F * (max((1 + 4 * u) * Fn + 2 * dm + 3 * u, c) + u)  # step (4): a convex combination
        Zt = W * W * 0.6 * Zt + Zs + (3 * W * W + 2) * eta
        if h < depth:
            D1 = _F * (0.73 * lam + (kappa + a + lam + 8 * u) / math.pi + 1.5 * u) + sh
            N1 = N + 16 * u + Q_RATIO ** 2 / 2 * D1 * D1 + 10 * eta
            T1 = 2.1 * u
            ell = angle_step(D1, N1 + T1) + 10 * math.sqrt(eta)
            E, N, T = min(math.pi, E + ell), N1, T1
            E, N, T, e = _dense(E, N, T, e + 2.5 * u, W, b, u, eta, bmin, h_ulp)
        worst = max(worst, E, N, T, c, Fn)
    if not worst <= 1e-3 or not math.isfinite(Zt):
        raise NotImplementedError(
            "The 'error_bound' parameter of fc: the first-order rounding analysis does not apply to these "
            f"W_std/b_std in {dtype_name} (a rounding term reaches {worst:.2g}; smallest non-zero b_std "
            f"{bmin:.3g}); use float64, fewer features or larger b_std, or check against ntkref.enclosures.fc.")
    e_P = _scale_recursion_error(Ws, bs, depth, u, eta, bmin, h_ulp, _norm_error(d, u, eta))
    infl = 1 / ((1 - e_P) ** 2 * (1 - u) ** 3)
    nu = A_PRIORI_ROW_FLOOR[dtype_name]
    out = {}
    for g in outputs:
        C, Z = (c, Zs) if g == "nngp" else (Fn, Zt)
        c0 = (Z + 3 * eta) / (1 - u) + eta
        # the a-priori constant: B = fl(fl(C′P̃_i)P̃_j) + c₀ ≤ (C′(1 + e_P)²PP′(1 + u)² + c₀)(1 + u), and the
        # exact scale PP′ ≥ σσ′ ≥ ν² (τ ≥ σ); the last factor covers this expression's own rounding
        scaled = (C * infl * (1 + e_P) ** 2 * (1 + u) ** 3 + c0 * (1 + u) / (nu * nu)) * (1 + 1e-12)
        out[g] = BiasCoefficients(C * infl, c0, infl, scaled)
    return out


def _scale_recursion_error(Ws, bs, depth, u, eta, bmin, h_ulp, e_in):
    """Relative error bound of the scales of :func:`row_scales` (both outputs): every operation is a product,
    quotient or hypot of non-negative values ≥ T (normal), so relative errors add."""
    e_sig = e_in + (1 + 2 * h_ulp) * u + eta / bmin
    e_tau = e_sig
    for h in range(1, depth + 1):
        e_a = e_sig + 2.5 * u
        e_sig = e_a + (1 + 2 * h_ulp) * u + eta / bmin
        e_tau = max(e_sig, e_tau + 4.5 * u) + 2 * h_ulp * u
    return _F * max(e_sig, e_tau) + 2 * u


def row_scales(norms, d, Ws, bs, xp, floor):
    """Per row: (σ̃_L, τ̃_L) — the computed √Σ_L(x,x), √Θ_L(x,x) from the computed norms — and whether the
    row is regular (module docstring).  Every value is raised to at least ``floor`` = T (exact upper bounds
    of the exact scales for irregular rows; no change for regular ones)."""
    one_floor = xp.full_like(norms, floor)
    zero = norms == 0  # a zero row is exact: its scales are 0 (raised to T: an upper bound)

    def ok(v):
        return zero | (v >= floor)

    regular = ok(norms)
    s = xp.maximum(norms, one_floor) / math.sqrt(d)

    def dense(v, W, b):
        v = xp.hypot(W * v, xp.asarray(b, dtype=v.dtype, device=device_of(v))) if b != 0.0 else W * v
        return xp.maximum(v, one_floor)

    prefix = bs[0] == 0.0
    if prefix:
        regular = regular & ok(norms / math.sqrt(d)) & ok(Ws[0] * (norms / math.sqrt(d)))
    sig = dense(s, Ws[0], bs[0])
    tau = sig
    for h in range(1, len(Ws)):
        W, b = Ws[h], bs[h]
        a = sig * _C
        if prefix:
            regular = regular & ok(a)
            prefix = b == 0.0
            if prefix:
                regular = regular & ok(W * a)
        sig = dense(a, W, b)
        tau = xp.maximum(xp.hypot(sig, (W * _C) * tau), one_floor)
    return sig, tau, regular


def apply_bias(coef, K, P1, P2, irregular, xp):
    """The bound B of one output block (``P1``/``P2``: the rows' scales of :func:`row_scales`; ``irregular``:
    None or a boolean (n1, n2) mask of the entries with an irregular row)."""
    B = (P1 * coef.C)[:, None] * P2[None, :]
    B += coef.c0
    if irregular is not None:
        triv = (P1 * coef.trivial)[:, None] * P2[None, :]
        triv += xp.abs(K)
        triv += coef.c0
        B = xp.where(irregular, triv, B)
    return B


def bias_scaled_bound(depth, d, b_std=0.1, dtype="float64"):
    """The a-priori proven scaled bound |K̃ − K|/√(K(x,x)K(x′,x′)) of the biased ReLU ``fc`` (W_std = 1, b_std
    the same in every layer), max over NNGP and NTK, for regular rows with √Σ_L(x,x) ≥ 2^-400 (float64).

    Examples
    --------
    >>> from ntkref.kernels._rounding_bias import bias_scaled_bound
    >>> 1e-14 < bias_scaled_bound(2, 100) < bias_scaled_bound(3, 100) < 4e-13 < bias_scaled_bound(3, 660) < 1e-12
    True
    """
    c = bias_coefficients(d, [1.0] * (depth + 1), [b_std] * (depth + 1), depth, dtype)
    return max(v.scaled for v in c.values())
