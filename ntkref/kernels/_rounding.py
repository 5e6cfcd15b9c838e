r"""Proven rounding-error bounds of the FC kernels (``kernels.fc(..., error_bound=True)``).

A forward (running) error analysis in the style of Higham, *Accuracy and Stability of Numerical Algorithms*,
ch. 3, of the exact operations :func:`._layers.relu_unbiased_block` performs (ReLU without biases: seed 004
eqs. (6)–(8) in neural-tangents' convention, the arc-cosine dual of Cho & Saul), carried out once per call on
scalars and applied per entry.

**Theorem.**  Let K̃ be the float kernel returned by ``fc`` (ReLU, all ``b_std`` = 0, any depth L and d the
first-order guard below admits, any per-layer ``W_std``, float64 or float32, not a JAX array) and K the exact real-number kernel of the exact float inputs.  For
every entry

.. math::  |K̃_{ij} − K_{ij}| ≤ B_{ij} = β·S̃_{ij} + g_i·b̃_j + ã_i·g_j + c_0 ,

where ã_i = fl(‖x_i‖·√q) are the computed row scales, S̃_ij = fl(ã_i b̃_j) the computed scale of the entry,
and β (``nngp``; ``ntk``: its own β), g, c_0 the coefficients of :func:`relu_coefficients`.  For rows whose
computed scale is at least 2η (η the smallest normal number: 2.2e-308 float64, 1.2e-38 float32), g_i = 0
(otherwise g_i ≈ η: the scale may have underflowed) and the scaled bound B/√(K(x,x)K(x′,x′)) is ≈ β
(≈ β/(L+1) for the NTK): the a-priori constant c(L, d)·u of :func:`scaled_bound`, up to absolute terms of
the size of η (so an entry whose exact value is below ~1e-290 — it underflows — has no relative bound).
Rows of subnormal norm (below η) are lifted by the exact power of two 2^64 before their norm is formed
(``_layers.row_norms(lift=True)``: their norm then has full precision and the analysis applies to the lifted
row unchanged), and the output and its bound are multiplied by 2^-64 per lifted row afterwards — exact by
positive homogeneity, K(2^64·x, x′) = 2^64·K(x, x′), up to the underflow of that product, which the
absolute term covers (the bound becomes fl(B·F) + c₀).  A zero row gives K̃ = K = 0 exactly.

**Assumptions** (the only ones): IEEE-754 arithmetic in the array's dtype with round-to-nearest for
+ − × ÷ and a correctly rounded √ (gradual underflow or flush-to-zero of results: both are covered by the
absolute underflow error η per operation; inputs are read as given, no denormals-are-zero), no
reduced-precision matmul (TF32); a dot product of length d in any summation order (BLAS, FMA or not) has
error ≤ γ_d Σ|a_i||b_i|, γ_n = nu/(1 − nu); the library functions atan, atan2, sin, cos are within
N = 4 ulp (:data:`ULPS`: glibc documents ≤ 1–2 ulp for double, NumPy's float32 SIMD loops ≤ 4 ulp, CUDA's
libdevice ≤ 2 ulp — stated conservatively, an assumption, not checked); Python floats are IEEE binary64.
TF32 is the user's to keep off where it is a setting (CuPy: ``CUPY_TF32`` unset; PyTorch:
``torch.backends.cuda.matmul.allow_tf32 = False``, its default).  JAX arrays are refused (``error_bound=True``
raises NotImplementedError naming it): XLA multiplies float32 in TF32 on GPUs by default and uses its own
implementations of atan/atan2/sin/cos, whose accuracy is not documented.

**Proof outline** (each step is a line of :func:`relu_coefficients`).  The float state of a layer is
(ρ̃, ω̃, õ) ≈ (cos θ, 1 − cos θ, 1 + cos θ).  Its *shadow angle* θ′ = 2 atan √(ω̃/õ) (real arithmetic) is the
angle the state encodes; ω̃ = λ(1 − cos θ′), õ = λ(1 + cos θ′) with λ = (ω̃ + õ)/2.  Carried are the angle
error E ≥ |θ′ − θ| and the defects N ≥ |ω̃ + ρ̃ − 1|, T ≥ |õ − 1 − ρ̃|, so |λ − 1| ≤ (N + T)/2 and
|ρ̃ − cos θ′| ≤ max(N, T)/(1 − (N + T)/2).  (1) The computed θ̃/π = φ̃ has relative error κ = (2N + 6)u
against θ′ (sqrt, two divisions, atan, the constant 2/π).  (2) One layer maps θ′ to T(θ′), cos T(θ) =
J(θ)/π, J(θ) = sin θ + (π − θ) cos θ; the computed ω̃₊ = ω̃ + φ̃ρ̃ − s̃/π differs from 1 − J(θ′)/π by at
most θ′·D₁ (every term is proportional to θ′ — the bias-free difference (θ cos θ − sin θ) is evaluated *at
the shadow angle*, so no 1/θ appears), and θ ≤ 4.5 sin(T(θ)/2) on [0, π] (:data:`Q_RATIO`) turns it into the
new shadow angle's local error ℓ ≈ 2π·D₁ + 0.5σ₊ (:func:`angle_step`: its hypotheses, proof and exact form).  (3) T is 1-Lipschitz and |d cos T/dθ| ≤
(1 − θ/π) sin θ ≤ 0.6 (:data:`J_LIP`), so E₊ ≤ E + ℓ.  (4) ρ̃₊ and the NTK's factor 1 − θ/π inherit E and
the local roundings; the NTK sum Θ_h = (1 − θ_{h−1}/π)Θ_{h−1} + ρ_h adds them up (|Θ_h| ≤ h + 1).  (5) The
input: normalised rows carry a common relative error m ≤ γ_d/2 + O(u) and per component 2u; the dot product
γ_d; the angle is then within δ = γ_d-terms of θ₀, through arccos where |cos| ≤ 0.95 (Lipschitz
1/√(1 − 0.95²) = 3.2) and through 2 atan2(‖x̂ − x̂′‖, ‖x̂ + x̂′‖) elsewhere (well conditioned; the unequal
lengths of the two computed unit rows cost acosh(r) ≤ √(2(r − 1))).  (6) The output K̃ = fl(ρ̃ S̃) adds the
scale's relative error (norms, q computed exactly in rational arithmetic against its float value).  All
first-order coefficients are inflated by (1 + 1e-2) to cover the second-order terms, which is valid while every
first-order quantity is small: :func:`relu_coefficients` checks max over the layers of E_h, N_h, T_h, A_h and
F_h/(h + 1) ≤ 1e-3 (the NTK's error relative to its scale h + 1) and otherwise refuses, NotImplementedError
naming ``error_bound``, as :mod:`._rounding_bias` does (refused: float32 with d > 2 602 at depth 0, d > 674 at
depth 10, any d beyond depth 14; float64 beyond depth ~1 050, where the scaled bound itself reaches 1e-3);
γ_d > 1e-3 is refused at the input stage.  The bound's own evaluation
in floats is covered by the factor (1 + 2u)/(1 − u)⁵ and 5η.

The constant γ_d makes the bound grow linearly with d: the scaled float64 bound at depth 3 is about
(7.4·d + 690)·u (:func:`scaled_bound`), ≤ 1e-12 for d ≤ 1118 (depths 0, 1, 2: d ≤ 2975, 1800, 1382); past
that the worst-case dot-product rounding dominates (the observed error grows like √d).  A running bound
from Σ|x̂||x̂′| would gain at most the factor Σ|x̂||x̂′| ≤ 1 (≈ 2/π for random rows, 1 for the near-parallel
pairs that decide the worst case), not the √d of the observed errors, so it is not used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .._lib.validation import InvalidParameterError

__all__ = ["ULPS", "J_LIP", "Q_RATIO", "A_PRIORI_ROW_FLOOR", "RoundingCoefficients", "angle_step", "relu_coefficients", "scaled_bound"]

#: assumed maximal error, in ulps, of the library functions the kernels call (an assumption, stated)
ULPS = {"atan": 4, "atan2": 4, "sin": 4, "cos": 4, "hypot": 4}
#: sup over θ ∈ [0, π] of (1 − θ/π) sin θ = |d(J(θ)/π)/dθ| (≈ 0.5792; tests/test_error_bound.py checks it)
J_LIP = 0.6
#: θ ≤ Q_RATIO·sin(T(θ)/2) on [0, π], T the ReLU angle map, i.e. 1 − J(θ)/π ≥ 2θ²/Q² (the sup of θ/sin(T/2)
#: is π√2 ≈ 4.443, at θ = π).  Proof: on [0, 2], 1 − J/π ≥ θ²(1/2 − θ/(3π) − θ²/24) and the factor is
#: decreasing, ≥ 0.121 ≥ 2/Q² at θ = 2; on [2, π], 1 − J/π is increasing (its derivative is (1 − θ/π) sin θ
#: ≥ 0), so 1 − J(a)/π ≥ 2b²/Q² on each cell [a, b] of a grid suffices (tests/test_error_bound.py checks the
#: grid at 40 digits)
Q_RATIO = 4.5
#: sin(π/4) rounded up: the new state's half-angle sine is at most this (T ≤ π/2, as cos T = J/π ≥ 0)
_S_MAX = 0.70711
_FIRST_ORDER = 1.01  # inflation covering second-order terms (u ≤ 2⁻²⁴)
_PARALLEL = 0.95  # the input's arccos/atan2 switch (ntkref.kernels._layers._PARALLEL_THRESHOLD)
#: the a-priori constants (``scaled``) hold for rows whose exact NNGP scale √Σ_L(x,x) is at least this: the
#: absolute underflow terms (multiples of η) are then negligible, and are included, relative to the scale
A_PRIORI_ROW_FLOOR = {"float64": 2.0 ** -400, "float32": 2.0 ** -40}


def refuse_error_bound(error_bound, caller, what):
    """The ``error_bound`` keyword of the kernels without a proven bound: ``False`` passes; ``True`` raises
    NotImplementedError naming the parameter (a clear refusal, never a silent unbounded result); anything
    else InvalidParameterError.

    Examples
    --------
    >>> from ntkref.kernels._rounding import refuse_error_bound
    >>> refuse_error_bound(False, "cntk", "the CNTK")
    >>> try:
    ...     refuse_error_bound(True, "cntk", "the CNTK")
    ... except NotImplementedError as e:
    ...     print(str(e)[:35])
    The 'error_bound' parameter of cntk
    """
    if error_bound is False:
        return
    if error_bound is not True:
        raise InvalidParameterError(f"The 'error_bound' parameter of {caller} must be True or False. Got "
                                    f"{error_bound!r} instead.")
    raise NotImplementedError(
        f"The 'error_bound' parameter of {caller}: no proven per-entry bound is available for {what}; use "
        "error_bound=False (the tested accuracy of ntkref.testing.certified_bound applies), "
        "kernels.fc(..., error_bound=True) for the FC ReLU kernels, or the ball-arithmetic enclosures of "
        "ntkref.enclosures.")


def _unit(dtype_name):
    if dtype_name == "float64":
        return 2.0 ** -53, 2.0 ** -1022
    return 2.0 ** -24, 2.0 ** -126


def _gamma(n, u):
    if n * u >= 0.5:
        return math.inf
    return n * u / (1 - n * u)


@dataclass(frozen=True)
class RoundingCoefficients:
    """Coefficients of the per-entry bound of one output (see the module docstring and :func:`apply`).

    B = β·S̃ + g·b̃_j·[ã_i < ``row_floor``] + g·ã_i·[b̃_j < ``row_floor``] + c₀ (``row_floor`` = 2η; rows
    of subnormal norm are lifted by 2^64 before, see :func:`apply`).
    ``scaled``: the a-priori scaled bound, ≈ β/V (V = 1 for the NNGP, L + 1 for the NTK): |K̃ − K| ≤
    ``scaled``·√(K(x,x)K(x′,x′)) for every entry whose rows have √Σ_L(x,x) ≥ :data:`A_PRIORI_ROW_FLOOR`
    (the factors of the computed scale S̃ against the exact one and the absolute terms over that floor
    included: :func:`relu_coefficients`).
    """

    beta: float
    g_row: float
    c0: float
    row_floor: float
    eta_a: float
    scaled: float


def _input_stage(d, u, eta, N):
    """Angle error E₀, defects (N₀, T₀) and the cos error A₀ of the input geometry (step (5)), or
    NotImplementedError naming ``error_bound`` where γ_d > 1e-3 (E₀ ≥ 3.2γ_d: every caller's first-order
    guard would refuse it; for d·u ≥ 1 the expressions below would divide by zero)."""
    g = _gamma(d, u)
    if not g <= 1e-3:
        raise NotImplementedError(
            f"The 'error_bound' parameter of fc: the rounding analysis of dot products of d = {d} features does "
            f"not apply at unit roundoff {u:.3g} (γ_d = d·u/(1 − d·u) = {g:.3g} > 1e-3); use float64 or fewer "
            "features, or check against ntkref.enclosures.fc.")
    s_eta = math.sqrt(d) * eta
    # normalised rows: common factor μ, |μ − 1| ≤ m; per component ≤ e_ind (2 roundings + underflow)
    rad = g + d * eta  # relative error of the sum of squares
    e_s = 1 - math.sqrt(max(0.0, 1 - rad)) * (1 - u)  # √ of it, rounded (the larger, lower side)
    e_y = u + s_eta
    m = 1 / ((1 - e_y) * (1 - e_s) * (1 - 2 * u) * (1 - u)) - 1
    e_ind = _gamma(2, u) + s_eta
    delta_ang = 2 * math.asin(min(1.0, e_ind / (1 - e_ind)))  # angle(x̂, x̂ + e) ≤ asin‖e‖/(1−‖e‖), twice
    norm2 = ((1 + m) * (1 + e_ind)) ** 2
    delta_rho = (norm2 - 1) + g * norm2 + 2 * d * eta  # |ρ̃ − cos ∠(a, b)|
    sh = 10 * math.sqrt(eta)  # underflow in the angle state (ω̃ of tiny angles)
    # branch |ρ̃| ≤ 0.95: ω̃ = fl(1 − ρ̃), õ = fl(1 + ρ̃); shadow vs arccos ρ̃ ≤ u_sh
    lam = math.sqrt((1 + u) / (1 - u)) - 1
    u_sh = lam / (1 - lam) ** 2
    top = _PARALLEL + delta_rho
    acos_gap = delta_rho / math.sqrt(1 - top * top) if top < 1 else math.pi
    e0_nr = u_sh + acos_gap + delta_ang + sh
    a0_nr = delta_rho + delta_ang
    # branch |ρ̃| > 0.95: θ̃ = fl(2 atan2(D̃, S̃)), D̃ = ‖a − b‖, S̃ = ‖a + b‖ rounded
    e_ds = 1 - math.sqrt(max(0.0, 1 - _gamma(d + 2, u))) * (1 - u)
    lam_ds = (1 + e_ds) / (1 - e_ds) - 1
    atan_ds = lam_ds / (1 - lam_ds) ** 2 + 2 * math.sqrt(d * eta)
    k = (1 + m) * (1 + e_ind) / ((1 - m) * (1 - e_ind))  # ratio of the computed unit rows' lengths
    unequal = abs(math.sqrt(k) - 1 / math.sqrt(k))  # acosh(r) ≤ √(2(r − 1)) = |√k − 1/√k|
    n_atan2, n_sin, n_cos = ULPS["atan2"], ULPS["sin"], ULPS["cos"]
    theta_round = 2 * n_atan2 * u * math.pi  # fl(atan2) relative 2Nu, θ ≤ π
    # the state 2 sin²(θ̃/2), 2 cos²(θ̃/2), cos θ̃ and its shadow angle
    e1 = 2 * max(n_sin, n_cos) * u
    lam_r = (1 + e1) / (1 - e1) * math.sqrt((1 + u) / (1 - u)) - 1
    shadow_r = lam_r / (1 - lam_r) ** 2
    e0_r = shadow_r + theta_round + atan_ds + unequal + delta_ang + sh
    a0_r = 2 * n_cos * u + e0_r
    e_om = (1 + e1) ** 2 * (1 + u) - 1
    n0_r = 2 * e_om + 2 * n_cos * u + 4 * eta
    n0_nr = 1.95 * u * (1 + u)
    E0 = max(e0_nr, e0_r)
    N0 = max(n0_r, n0_nr)
    A0 = max(a0_nr, a0_r)
    return E0, N0, N0, A0


def _layer(E, N, T, h, u, eta):
    """One ReLU layer (steps (1)–(4)): the new (E, N, T), the cos error A_h and the NTK factor error M_h."""
    f = _FIRST_ORDER
    lam_bound = (N + T) / 2
    a = max(N, T) / (1 - lam_bound)
    kappa = (2 * ULPS["atan"] + 6) * u
    # |ρ̃₊ − J(θ′)/π|
    R = f * ((1 + u) * a + u + kappa + (lam_bound + 5 * u) / math.pi + 2 * u)
    A = R + J_LIP * E
    M = u * (1 + kappa) + kappa + E / math.pi
    # |ω̃₊ − (1 − J(θ′)/π)| ≤ θ′·D1
    D1 = f * (lam_bound * (1 + 1 / math.pi) + (a + kappa) / math.pi + u * (3 + 7 / math.pi))
    N_new = N + 10 * u * f + Q_RATIO ** 2 / 2 * D1 * D1  # the last term: the clip at 0 (θ′ < 18·D1)
    T_new = 2 * u * (1 + R + u)
    E_new = min(math.pi, E + angle_step(D1, N_new + T_new) + 10 * math.sqrt(eta))
    return E_new, N_new, T_new, A, M


def angle_step(D1, sigma):
    r"""The local error ℓ of the new shadow angle after one ReLU layer (step (2) of the module docstring).

    Hypotheses: θ′ ∈ [0, π] the shadow angle of the layer's input state, T = T(θ′) the exact ReLU angle map
    (cos T = J(θ′)/π, so T ∈ [0, π/2]), the computed ω̃₊ ≥ 0 with |ω̃₊ − (1 − cos T)| ≤ θ′·D₁, and
    |λ₊ − 1| ≤ σ/2 for λ₊ = (ω̃₊ + õ₊)/2.  Claim: the new shadow angle θ′₊ = 2 atan √(ω̃₊/õ₊) satisfies
    |θ′₊ − T| ≤ ℓ.

    Proof.  ω̃₊ = λ₊(1 − cos θ′₊) = 2λ₊ sin²(θ′₊/2), so sin(θ′₊/2) = √(ω̃₊/2)/√λ₊.  With s* = sin(T/2) =
    √((1 − cos T)/2) and |√a − √b| = |a − b|/(√a + √b) ≤ |a − b|/√b: |√(ω̃₊/2) − s*| ≤ θ′D₁/(2s*) ≤ Q·D₁/2
    (:data:`Q_RATIO`: θ′ ≤ Q s*; for s* = 0, θ′ = 0 and ω̃₊ = 0).  Then |1/√λ₊ − 1| ≤ (σ/4)/(1 − σ/2)^{3/2}
    (mean value theorem) and √(ω̃₊/2) ≤ s* + QD₁/2 ≤ 0.70711 + QD₁/2 (:data:`_S_MAX`), so
    |sin(θ′₊/2) − s*| ≤ Δ = QD₁/2 + (0.70711 + QD₁/2)(σ/4)/(1 − σ/2)^{3/2}.  asin is increasing and convex
    on [0, 1): |asin(s*± Δ) − asin s*| ≤ Δ/√(1 − (s* + Δ)²) ≤ Δ/√(1 − (0.70711 + Δ)²), and θ′₊/2, T/2 are
    the asin of the two sines: ℓ = 2Δ/√(1 − (0.70711 + Δ)²).  (To first order ℓ ≈ 2π·D₁ + 0.5σ: the sup
    of 2θ/sin T(θ) is 2π, at θ = π — the earlier bound 3(6D₁ + 0.7072σ)/(2 − σ) ≈ 9D₁ rested on a cruder
    θ ≤ 6 sin(T/2) and a cruder Lipschitz step.)  Rounded up by the factor 1 + 1e-9 (the evaluation in
    floats of a few operations); π where Δ > 0.2 (no first-order regime).

    Examples
    --------
    >>> from ntkref.kernels._rounding import angle_step
    >>> round(angle_step(1e-13, 0.0) / 1e-13, 2)   # ≈ 2π·D₁ (Q = 4.5: 6.36)
    6.36
    """
    s = sigma / 4 / (1 - sigma / 2) ** 1.5 if sigma < 1 else math.inf
    delta = Q_RATIO * D1 / 2 + (_S_MAX + Q_RATIO * D1 / 2) * s
    if not 0.0 <= delta <= 0.2:  # (a negative δ comes only from meaningless inputs: no first-order regime)
        return math.pi
    return 2 * delta / math.sqrt(1 - (_S_MAX + delta) ** 2) * (1 + 1e-9)


def _layer_errors(d, depth, u, eta):
    """(A_L, F_L, worst): errors of the normalised NNGP ρ̃_L and NTK Θ̃_L/q, before the output scaling, and
    the largest first-order quantity met, max(E_h, N_h, T_h, A_h, F_h/(h + 1)) over the layers (F_h/(h + 1):
    the NTK's error relative to its scale, |Θ_h| ≤ h + 1), which :func:`relu_coefficients` keeps ≤ 1e-3 —
    the regime where the inflation ``_FIRST_ORDER`` covers the second-order terms (as
    :func:`._rounding_bias.bias_coefficients` does); the loop stops early once it is exceeded."""
    E, N, T, A = _input_stage(d, u, eta, ULPS)
    F = A
    worst = max(E, N, T, A)
    for h in range(1, depth + 1):
        if not worst <= 1e-3:
            break
        E_next, N_next, T_next, A_h, M = _layer(E, N, T, h, u, eta)
        # Θ_h = (1 − θ_{h−1}/π)Θ_{h−1} + ρ_h, |Θ_{h−1}| ≤ h, computed fl(fl(Θ̃ m̃) + ρ̃_h)
        F = F * (1 + u) + h * M + A_h + _FIRST_ORDER * u * (2 * h + 1)
        A = A_h
        E, N, T = E_next, N_next, T_next
        worst = max(worst, E, N, T, A, F / (h + 1))
    return min(A, 2.0 + 4 * u), F, worst


def _scale_error(d, Ws, dtype_name, u, eta):
    """Relative error e of the computed row scale ã = fl(ñ·r̃) against ‖x‖√q (rows with ñ ≥ η/u), the
    factor r̃ as the code forms it, and the absolute underflow η_a of ã."""
    q = Fraction(Ws[0]) ** 2 / d
    qf = Ws[0] * Ws[0] / d
    for W in Ws[1:]:
        q *= Fraction(W) ** 2 / 2
        qf *= W * W / 2
    r64 = math.sqrt(qf) if math.isfinite(qf) else qf
    if q == 0:
        return 0.0, r64, 0.0  # every entry is exactly 0 in both
    r_dt = _to_dtype(r64, dtype_name)
    if not math.isfinite(r_dt):
        # the plain kernel's scale √q (a Python float, then in the array's dtype) overflows, so every entry of
        # ``fc`` is inf or NaN: the same error as its check_finite_kernel
        big = 1.7976931348623157e308 if dtype_name == "float64" else 3.4028234663852886e38
        raise InvalidParameterError(
            f"fc: the kernel for these 'x1'/'x2', 'W_std' and 'b_std' is outside the representable range of "
            f"{dtype_name} (largest finite {big:.3g}); rescale the inputs or the standard deviations.")
    rels = []
    for r in (r64, r_dt):
        rels.append(float(abs(Fraction(r) ** 2 - q) / q) * (1 + 1e-12))  # |r − √q|/√q ≤ |r² − q|/q
    e_r = max(rels)
    if e_r >= 0.25:
        return math.inf, r64, 0.0
    g = _gamma(d, u)
    e_s = 1 - math.sqrt(max(0.0, 1 - g - d * eta)) * (1 - u)
    # y rounding, √Σ, scale·t (a computed norm ≥ 2η is normal: its product did not underflow beyond 2u)
    e_n = (1 + u + math.sqrt(d) * eta) * (1 + e_s) * (1 + 2 * u) - 1
    e = (1 + e_n) * (1 + e_r) * (1 + u) - 1
    eta_a = eta * (r64 * (1 + u) + 1)
    return e, r64, eta_a


def _to_dtype(x, dtype_name):
    """x rounded to the dtype (round to nearest; ±inf where it overflows, as the array's cast does)."""
    if dtype_name == "float64" or not math.isfinite(x):
        return x
    import struct

    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # struct refuses what rounds beyond FLT_MAX; the cast gives inf
        return math.copysign(math.inf, x)


def relu_coefficients(d, Ws, depth, dtype_name, outputs=("nngp", "ntk")):
    """{output: :class:`RoundingCoefficients`} of the bias-free ReLU ``fc`` (the theorem of the module).

    Examples
    --------
    >>> from ntkref.kernels._rounding import relu_coefficients
    >>> c = relu_coefficients(16, [1.0] * 4, 3, "float64")
    >>> bool(c["ntk"].scaled < 1e-12), bool(c["nngp"].scaled < 1e-12)
    (True, True)
    """
    u, eta = _unit(dtype_name)
    A, F, worst = _layer_errors(d, depth, u, eta)
    if not worst <= 1e-3:
        raise NotImplementedError(
            "The 'error_bound' parameter of fc: the first-order rounding analysis of the ReLU kernel does not "
            f"apply at depth {depth} with d = {d} features in {dtype_name} (a rounding term reaches {worst:.2g} > "
            "1e-3); use float64, fewer features or a smaller depth, or check against ntkref.enclosures.fc.")
    e, r, eta_a = _scale_error(d, Ws, dtype_name, u, eta)
    out = {}
    infl = (1 + 2 * u) / (1 - u) ** 5
    for g in outputs:
        V, err = (1.0, A) if g == "nngp" else (depth + 1.0, F)
        if not math.isfinite(e):
            raise NotImplementedError(
                "The 'error_bound' parameter of fc: the product of the W_std (the scale q) underflows or is "
                "not representable to 25 % in floating point; no bound is available. Rescale W_std.")
        # S̃ = fl(ã b̃), ã = a*(1 + ε) + η_a; |S̃ − a*b*| ≤ a*b*·e_S + (η_a b* + η_b a*)(1 + e)(1 + u) + …
        e_S = (1 + e) ** 2 * (1 + u) - 1
        beta = err + u * (V + err) + V * e_S / ((1 - e) ** 2 * (1 - u))
        beta *= (1 + u) / (1 - u)  # ab ≤ (S̃ + η)/(1 − u)
        g_row = eta_a * V * (e_S / (1 - e) ** 2 + (1 + u) * (1 + e) / (1 - e)) + eta_a * err
        c0 = V * (e_S * (eta / (1 - u) + eta_a ** 2) / (1 - e) ** 2 + 3 * eta_a ** 2 + eta) + 2 * eta
        c0_out = c0 * infl + 5 * eta
        # the a-priori constant: rows with a* = √Σ_L(x,x) ≥ ν (A_PRIORI_ROW_FLOOR) have ã ≤ a*(1 + e + η_a/ν),
        # computed norms ≥ 2η (no g_row term), S̃ ≤ a*b*·(1 + e′)²(1 + u) + η and a scale V·a*b* ≥ V·ν²; B is
        # fl(fl(S̃β) + c₀) (times 2^-64 and + c₀ again for a lifted row): at most
        # (β·S̃(1 + u) + 2c₀)(1 + u)²; the last factor covers this expression's own rounding
        nu = A_PRIORI_ROW_FLOOR[dtype_name]
        e1 = e + eta_a / nu
        S_rel = (1 + e1) ** 2 * (1 + u) + eta / (nu * nu)
        scaled = ((beta * infl * S_rel * (1 + u) + 2 * c0_out / (nu * nu)) * (1 + u) ** 2 / V) * (1 + 1e-12)
        out[g] = RoundingCoefficients(beta * infl, g_row * infl, c0_out, 2 * eta, eta_a, scaled)
    return out


def scaled_bound(depth, d, dtype="float64"):
    """The a-priori proven bound of |K̃ − K|/√(K(x,x)K(x′,x′)) of the bias-free ReLU ``fc``, W_std = 1
    (max over NNGP and NTK), for rows with √Σ_L(x,x) ≥ :data:`A_PRIORI_ROW_FLOOR` (2^-400 in float64); the
    per-entry bounds of ``fc(..., error_bound=True)`` are at most this times the scale.

    Examples
    --------
    >>> from ntkref.kernels._rounding import scaled_bound
    >>> b = scaled_bound(3, 100)
    >>> 1e-14 < b < 1e-12
    True
    """
    c = relu_coefficients(d, [1.0] * (depth + 1), depth, dtype)
    return max(v.scaled for v in c.values())


def apply(coef, S, a, b, xp):
    """The bound B of one output on the inputs' device (``a``, ``b``: the computed row scales; ``S`` their
    outer product): β·S + c₀; plus g·b_j for a row scale a_i below 2η (it may have underflowed: absolute
    error η_a) and g·a_i likewise.  Rows of subnormal norm arrive lifted by 2^64 (``_layers.row_norms``), and
    ``fc`` multiplies B by their factors and adds c₀; a zero row has S = 0 and K̃ = K = 0 exactly."""
    B = S * coef.beta
    B += coef.c0
    floor = coef.row_floor
    low1, low2 = a < floor, b < floor
    if bool(xp.any(low1)) or bool(xp.any(low2)):
        g1 = xp.where(low1, xp.full_like(a, coef.g_row), xp.zeros_like(a))
        g2 = xp.where(low2, xp.full_like(b, coef.g_row), xp.zeros_like(b))
        B += g1[:, None] * b[None, :]
        B += a[:, None] * g2[None, :]
    return B
