r"""Mean-field two-layer ReLU nets and the perturbed Wasserstein gradient flow (seed 002, §3 and App. E).

An infinitely wide two-layer net is a distribution ρ over the parameters θ = (w, u) ∈ ℝ^{d+1} of one hidden
unit (Example 3.2: θ = (w, u), w the output weight first).  Seed 002 §3 minimises

    L[ρ] = R(∫Φ dρ) + ∫V dρ,                                                        (§3)
    Φᵢ(θ) = w·[uᵀxᵢ]₊ (k = n),  V(θ) = λ‖θ‖²₂,  R(a) = Σᵢ log(1 + exp(−yᵢaᵢ))          (Example 3.2)

(R is a **sum** over the n training points, not a mean), with the first variation and velocity

    L′[ρ](θ) = ⟨∇R(∫Φ dρ), Φ(θ)⟩ + V(θ),   v[ρ](θ) = −∇_θ L′[ρ](θ),                  (§3)

the Wasserstein gradient flow dρ/dt = −∇·(v[ρ]ρ) (3.1) and the perturbed flow
dρ/dt = −σρ + σU^d − ∇·(v[ρ]ρ) (3.2), U^d uniform on 𝕊^d ⊂ ℝ^{d+1}.  Its discrete-time version (App. E.3,
Thm E.21) is ρ_{t+1} = ρ_t + η(−σρ_t + σU^d − ∇·(v[ρ_t]ρ_t)).

Representation
--------------
ρ = Σⱼ pⱼ δ_{θⱼ}: particles ``theta`` of shape (m, d+1) (column 0 = w, columns 1: = u) and weights ``p``
of shape (m,) (Σp = 1 for a probability measure; the evaluation functions accept any real weights, since
L extends to signed measures).  Inputs ``x`` have shape (n, d), one sample a row; labels y ∈ {−1, +1}.
The ReLU derivative at 0 is 𝟙(uᵀx ≥ 0), as in seed 002.

Seed 002 equations implemented here
-----------------------------------
- §3 / Example 3.2: L[ρ], L′[ρ], ∇L′[ρ] — :func:`functional`, :func:`first_variation`,
  :func:`first_variation_gradient` (also :func:`feature_map`, :func:`outputs`);
- Lemma E.7: dL/dt = −σE_ρ[L′] + σE_{U^d}[L′(θ̄)] − E_ρ‖v‖² — :func:`flow_time_derivative`
  (E_{U^d}[L′(θ̄)] = λ exactly: w ↦ −w maps U^d to itself and flips the sign of ⟨∇R, Φ⟩);
- App. E.3 update, one step — :func:`perturbed_step`; the whole simulation — :func:`perturbed_wasserstein_flow`;
- Assumptions E.1–E.3, Lemmas E.6, E.13 constants (B_L = M_R B_Φ + B_V, c₂ = √k M_R M_Φ + M_V) —
  :func:`regularity_constants`;
- (E.13) optimality certificate — :func:`min_first_variation`, :func:`optimality_certificate`;
- Lemma E.14's spherical-cap bound, printed and corrected — :func:`cap_measure_lower_bound`;
- Lemma E.15 (Euler): θ̄ᵀ∇L′[ρ](θ) = 2‖θ‖L′[ρ](θ̄) for the 2-homogeneous L′ (tested);
- the finite-net correspondence (inventory G2, G13): Θⱼ = √pⱼ θⱼ gives f(x; Θ) = ∫Φ dρ and
  L[ρ] = n·L^{(2.2)}_{λ/n}(Θ), and one transport step θⱼ ← θⱼ − η∇L′[ρ](θⱼ) is exactly one gradient step of
  step η on R(f(X; Θ)) + λ‖Θ‖²_F — :func:`to_network`, :func:`from_network`, :func:`network_objective`.

Errata in seed 002 App. E (documented; tests in tests/test_mean_field.py)
--------------------------------------------------------------------------
- Lemma E.6 and (E.13) write θ̄ ∈ 𝕊^{d−1}; the parameters live in ℝ^{d+1}, so the sphere is 𝕊^d (as in
  Assumptions E.2, E.3 and Lemma E.14).
- W* ≜ E_{ρ*}‖θ‖² is defined as a second moment but (E.13) uses W*² as if W* were its square root
  (W_t ≜ √E‖θ‖² elsewhere).  The step −E_{ρ*}[L′] ≤ −W*²·min{min L′, 0} is right with
  W*² = E_{ρ*}‖θ‖² and false with the literal (E‖θ‖²)² when E_{ρ*}‖θ‖² < 1 (test
  ``test_e13_second_moment_reading`` refutes that *step* for a δ-measure ρ*; the inequality (E.13) itself,
  with W*² read as E_{ρ*}‖θ‖², is what :func:`optimality_certificate` implements).  Consistently the
  threshold is τ = ε/(2W*²), not ε/(2W*) as printed; the later formulas (the definition of l and (E.15))
  use τ = ε/(2W_ε²) (W_ε² ≥ W*², so K^{−ε/(2W_ε²)} ⊇ K^{−ε/(2W*²)} is nonempty whenever the latter is).
- Lemma E.14 (log m(K^{−τ+δ}) ≥ −2d·log(c₂/δ)) uses a cap bound m(cap of chord radius r) ≥ r^{2d} that
  holds only for small r (≲ 0.32 on 𝕊¹); the cited Lemma 2.3 of Ball (1997) gives m ≥ ½(r/2)^d for all
  0 ≤ r ≤ 2, i.e. log m(K^{−τ+δ}) ≥ −d·log(2c₂/δ) − log 2 (test ``test_lemma_e14_cap_bound``).  In the
  range the proof uses the printed bound is harmless for Example 3.2 with d ≥ 2: r = δ/c₂ ≤ τ/c₂ with
  τ ≤ ½·max|g| − λ < ½·n·M_Φ (K^{−τ} nonempty) and c₂ = n·M_Φ + 2λ (k = n, M_R = √n), so r < ½, and for
  d ≥ 2, r ≤ ½ the exact cap measure is ≥ r^{2d} (equality at d = 2, r = ½: Archimedes r²/4; tested for
  d = 2…200).  Only d = 1 (sphere 𝕊¹) or general (Φ, R, V) with larger δ/c₂ is affected.
- Assumption E.2 (Φ differentiable) fails for ReLU (the paper's footnote 3); the simulation uses the
  subgradient 𝟙(uᵀx ≥ 0).  All identities tested here hold exactly away from the kinks.

Accuracy: float64 everything to rounding (the transport/GD identity to ~1e-14 relative); float32 inputs give
float32 results within 1e-6 relative (L[ρ]: measured 2e-8–6e-8; tested at 1e-6).  Randomness (fresh
particles, sphere samples) is drawn on the host with ``numpy.random.default_rng(seed)`` and moved to the
inputs' namespace and device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._lib.backend import device_of, namespace
from ._lib.compat import eigh
from ._lib.validation import InvalidParameterError, check_array, check_int, check_labels, check_option, check_real
from ._lib.memory import check_memory

__all__ = [
    "FlowRecord",
    "cap_measure_lower_bound",
    "feature_map",
    "first_variation",
    "first_variation_gradient",
    "flow_time_derivative",
    "from_network",
    "functional",
    "min_first_variation",
    "network_objective",
    "optimality_certificate",
    "outputs",
    "perturbed_step",
    "perturbed_wasserstein_flow",
    "regularity_constants",
    "sphere_uniform",
    "to_network",
]


# --------------------------------------------------------------------------- validation helpers
def _rng(seed):
    import numpy as np  # host-side seeded draws only

    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InvalidParameterError(f"The 'seed' parameter must be an int or a numpy Generator. Got {seed!r} instead.")
    return np.random.default_rng(int(seed))


def _data(x, y, caller, xp=None):
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    xp = namespace(x)
    y = check_labels(y, "y", caller=caller, xp=xp)
    if y.shape[0] != x.shape[0]:
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} must have one label per row of x ({x.shape[0]}); got {y.shape[0]}."
        )
    return x, xp.astype(y, x.dtype), xp


def _points(theta, d, xp, dtype, caller, name="theta"):
    return check_array(theta, name, caller=caller, ndim=2, xp=xp, dtype=dtype, shape=(None, d + 1))


def _sphere_points(sphere, d, xp, dtype, caller, name="sphere"):
    """At least one row, every row a point of 𝕊^d (unit norm to a dtype-scaled tolerance)."""
    sphere = _points(sphere, d, xp, dtype, caller, name)
    if sphere.shape[0] == 0:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have at least one row (points of S^d).")
    tol = 1e-6 if sphere.dtype == xp.float64 else 1e-3
    if not bool(xp.all(xp.abs(xp.sqrt(xp.sum(sphere * sphere, axis=1)) - 1.0) <= tol)):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must hold unit rows (points of S^d).")
    return sphere


def _particles(theta, p, d, xp, dtype, caller, name="theta"):
    theta = _points(theta, d, xp, dtype, caller, name)
    if p is None:
        raise InvalidParameterError(
            f"The 'p' parameter of {caller} is required (the weights of the particles, shape ({theta.shape[0]},)).")
    p = check_array(p, "p", caller=caller, ndim=1, xp=xp, dtype=dtype, shape=(theta.shape[0],))
    return theta, p


def _lam(lam, caller, positive=False):
    if positive:
        return check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    return check_real(lam, "lam", caller=caller, low=0.0)


# --------------------------------------------------------------------------- primitives
def _sigmoid(z, xp):
    # 1/(1+e^{-z}) without overflow for large |z|
    e = xp.exp(-xp.abs(z))
    return xp.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(z, xp):
    return xp.logaddexp(xp.zeros_like(z), z)


def _relu_parts(theta, x, xp):
    pre = theta[:, 1:] @ xp.matrix_transpose(x)  # (m, n): uⱼᵀxᵢ
    active = pre >= 0
    return xp.where(active, pre, xp.zeros_like(pre)), active


def _pow2_scale(a, xp):
    """A power of two near max|a| (1 for a zero array): dividing by it is exact, and the quotient is O(1)."""
    big = xp.max(xp.abs(a)) if math.prod(a.shape) else xp.asarray(0.0, dtype=a.dtype, device=device_of(a))
    big = xp.where(big > 0, big, xp.ones_like(big))
    return xp.pow(xp.asarray(2.0, dtype=a.dtype, device=device_of(a)), xp.floor(xp.log2(big)))


def _outputs(theta, p, x, xp):
    # a = s_θ²·s_x·ã with ã computed from θ/s_θ and x/s_x (powers of two: exact): a that overflows becomes ±inf
    # instead of inf − inf = NaN, so that ∇R(a) (bounded) stays finite and correct (issue 14)
    s_t, s_x = _pow2_scale(theta, xp), _pow2_scale(x, xp)
    relu, _ = _relu_parts(theta / s_t, x / s_x, xp)
    return (((p * (theta[:, 0] / s_t)) @ relu) * s_x) * s_t * s_t


def _finite(value, caller, names):
    """``value`` if every entry is finite, else an error naming the inputs whose size overflowed the dtype."""
    xp = namespace(value)
    if bool(xp.all(xp.isfinite(value))):
        return value
    listed = ", ".join(repr(n) for n in names)
    raise InvalidParameterError(
        f"{caller}: the result overflows {value.dtype} (it is 2-homogeneous in the particles and grows with the "
        f"inputs); the values of {listed} are too large. Rescale them (e.g. theta by 1/s multiplies Phi by 1/s^2)."
    )


def _residual(a, y, xp):
    # ∇R(a)ᵢ = −yᵢ σ(−yᵢaᵢ)
    return -y * _sigmoid(-y * a, xp)


def _loss_R(a, y, xp):
    return xp.sum(_softplus(-y * a, xp))


def _fv(theta_eval, r, x, lam, xp):
    relu, _ = _relu_parts(theta_eval, x, xp)
    return theta_eval[:, 0] * (relu @ r) + lam * xp.sum(theta_eval * theta_eval, axis=1)


def _fv_grad(theta_eval, r, x, lam, xp):
    relu, active = _relu_parts(theta_eval, x, xp)
    w = theta_eval[:, 0]
    gw = relu @ r + 2.0 * lam * w
    gu = w[:, None] * (xp.where(active, r[None, :], xp.zeros_like(relu)) @ x) + 2.0 * lam * theta_eval[:, 1:]
    return xp.concat([gw[:, None], gu], axis=1)


def _uniform_speed2(r, x, lam, xp):
    r"""E_{θ̄∼U^d}‖∇L′[ρ](θ̄)‖² in closed form (the speed² of mass that stands for U^d).

    With θ̄ = (w, u), g(u) = Σᵢrᵢ[uᵀxᵢ]₊, h(u) = Σᵢrᵢ𝟙(uᵀxᵢ ≥ 0)xᵢ: ‖∇L′‖² = (g + 2λw)² + ‖w h + 2λu‖²; the terms
    odd in w vanish under w ↦ −w, and under U^d, w² = 1 − ‖u‖² with E‖u‖² = d/(d+1), ū = u/‖u‖ uniform on
    𝕊^{d−1} independent of ‖u‖, so the mean is (d·E_ū[g(ū)²] + E_ū‖h(ū)‖²)/(d+1) + 4λ², with the arc-cosine
    moments E_ū[[ūᵀxᵢ]₊[ūᵀxⱼ]₊] = ‖xᵢ‖‖xⱼ‖(sin θᵢⱼ + (π − θᵢⱼ)cos θᵢⱼ)/(2πd) and E_ū[𝟙𝟙] = (π − θᵢⱼ)/(2π).
    θᵢⱼ = 2·atan2(‖x̂ᵢ − x̂ⱼ‖, ‖x̂ᵢ + x̂ⱼ‖) (accurate near 0 and π); zero rows contribute 0.
    """
    d = x.shape[1]
    norms = xp.sqrt(xp.sum(x * x, axis=1))
    safe = xp.where(norms > 0, norms, xp.ones_like(norms))
    unit = x / safe[:, None]
    diff = unit[:, None, :] - unit[None, :, :]
    summ = unit[:, None, :] + unit[None, :, :]
    angle = 2.0 * xp.atan2(xp.sqrt(xp.sum(diff * diff, axis=2)), xp.sqrt(xp.sum(summ * summ, axis=2)))
    nn = norms[:, None] * norms[None, :]
    relu_moment = nn * (xp.sin(angle) + (math.pi - angle) * xp.cos(angle)) / (2.0 * math.pi * d)
    step_moment = (x @ xp.matrix_transpose(x)) * (math.pi - angle) / (2.0 * math.pi)
    g2 = r @ (relu_moment @ r)
    h2 = r @ (step_moment @ r)
    return (d * g2 + h2) / (d + 1) + 4.0 * lam * lam


# --------------------------------------------------------------------------- public evaluation functions
def feature_map(theta, x):
    r"""Φ(θⱼ) for every particle: Φᵢ(θⱼ) = wⱼ·[uⱼᵀxᵢ]₊ (seed 002 Example 3.2).

    Parameters
    ----------
    theta : array, shape (m, d+1)
        Particles θⱼ = (wⱼ, uⱼ), output weight in column 0.
    x : array, shape (n, d)

    Returns
    -------
    array, shape (m, n)
        Row j is Φ(θⱼ) ∈ ℝⁿ.  2-homogeneous in θ.
    """
    x = check_array(x, "x", caller="feature_map", ndim=2)
    xp = namespace(x)
    theta = _points(theta, x.shape[1], xp, x.dtype, "feature_map")
    check_memory(3 * theta.shape[0] * x.shape[0], f"The ({theta.shape[0]}, {x.shape[0]}) features of 'theta'/'x'",
                 "feature_map", x)
    relu, _ = _relu_parts(theta, x, xp)
    return _finite(theta[:, 0][:, None] * relu, "feature_map", ("theta", "x"))


def outputs(theta, p, x):
    r"""a = ∫Φ dρ = Σⱼ pⱼ Φ(θⱼ): the mean-field net's outputs on the rows of ``x`` (seed 002 Example 3.2).

    Equals f^{NN}(xᵢ; Θ) = Σⱼ Wⱼ[Uⱼᵀxᵢ]₊ of the finite net Θⱼ = √pⱼ θⱼ (2-homogeneity).  Shape (n,).
    """
    x = check_array(x, "x", caller="outputs", ndim=2)
    xp = namespace(x)
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "outputs")
    return _finite(_outputs(theta, p, x, xp), "outputs", ("theta", "p", "x"))


def functional(theta, p, x, y, lam):
    r"""L[ρ] = Σᵢ log(1 + e^{−yᵢaᵢ}) + λ Σⱼ pⱼ‖θⱼ‖², a = ∫Φ dρ (seed 002 §3, Example 3.2).

    Parameters
    ----------
    theta : array (m, d+1); p : array (m,) (real weights; Σp = 1 for a probability measure)
    x : array (n, d); y : array (n,) of ±1; lam : float ≥ 0 (the λ of V(θ) = λ‖θ‖²)

    Returns
    -------
    0-d array.  For ρ = (1/m)Σδ_{√m Θⱼ} this is n·L^{(2.2)}_{λ/n}(Θ) (:func:`network_objective`).
    """
    x, y, xp = _data(x, y, "functional")
    lam = _lam(lam, "functional")
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "functional")
    a = _outputs(theta, p, x, xp)
    return _finite(_loss_R(a, y, xp) + lam * xp.sum(p * xp.sum(theta * theta, axis=1)), "functional",
                   ("theta", "p", "x"))


def first_variation(theta_eval, theta, p, x, y, lam):
    r"""L′[ρ](θ) = ⟨∇R(∫Φ dρ), Φ(θ)⟩ + V(θ) = w·Σᵢ rᵢ[uᵀxᵢ]₊ + λ‖θ‖² (seed 002 §3).

    rᵢ = ∂R/∂aᵢ = −yᵢ/(1 + e^{yᵢaᵢ}) at a = ∫Φ dρ.  Evaluated at each row of ``theta_eval`` (shape (M, d+1));
    ρ = Σⱼ pⱼ δ_{θⱼ} is given by ``theta``, ``p``.  Returns shape (M,).  2-homogeneous in θ_eval.
    """
    x, y, xp = _data(x, y, "first_variation")
    lam = _lam(lam, "first_variation")
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "first_variation")
    theta_eval = _points(theta_eval, x.shape[1], xp, x.dtype, "first_variation", name="theta_eval")
    r = _residual(_outputs(theta, p, x, xp), y, xp)
    return _finite(_fv(theta_eval, r, x, lam, xp), "first_variation", ("theta_eval", "x"))


def first_variation_gradient(theta_eval, theta, p, x, y, lam):
    r"""∇_θ L′[ρ](θ) = −v[ρ](θ) at each row of ``theta_eval`` (seed 002 §3; inventory G3).

    ∂_w L′ = Σᵢ rᵢ[uᵀxᵢ]₊ + 2λw,  ∇_u L′ = w Σᵢ rᵢ 𝟙(uᵀxᵢ ≥ 0) xᵢ + 2λu.  Shape (M, d+1); 1-homogeneous.
    """
    x, y, xp = _data(x, y, "first_variation_gradient")
    lam = _lam(lam, "first_variation_gradient")
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "first_variation_gradient")
    theta_eval = _points(theta_eval, x.shape[1], xp, x.dtype, "first_variation_gradient", name="theta_eval")
    r = _residual(_outputs(theta, p, x, xp), y, xp)
    return _finite(_fv_grad(theta_eval, r, x, lam, xp), "first_variation_gradient", ("theta_eval", "x"))


def flow_time_derivative(theta, p, x, y, lam, sigma, *, sphere=None):
    r"""dL[ρ_t]/dt under the perturbed Wasserstein gradient flow (3.2) at ρ_t = ρ (seed 002 Lemma E.7).

        dL/dt = −σ E_ρ[L′[ρ](θ)] + σ E_{θ̄∼U^d}[L′[ρ](θ̄)] − E_ρ[‖v[ρ](θ)‖²].

    With ``sphere=None`` the middle expectation is its exact value λ (w ↦ −w preserves U^d and negates
    w·Σrᵢ[uᵀxᵢ]₊, and ‖θ̄‖ = 1); with ``sphere`` (shape (M, d+1), rows on 𝕊^d) it is the mean over those
    points, i.e. the derivative for the flow that re-injects the empirical measure of ``sphere``.
    Returns a 0-d array.
    """
    x, y, xp = _data(x, y, "flow_time_derivative")
    lam = _lam(lam, "flow_time_derivative")
    sigma = check_real(sigma, "sigma", caller="flow_time_derivative", low=0.0)
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "flow_time_derivative")
    r = _residual(_outputs(theta, p, x, xp), y, xp)
    mean_fv = xp.sum(p * _fv(theta, r, x, lam, xp))
    grad = _fv_grad(theta, r, x, lam, xp)
    speed2 = xp.sum(p * xp.sum(grad * grad, axis=1))
    if sphere is None:
        uniform_fv = lam
    else:
        sphere = _sphere_points(sphere, x.shape[1], xp, x.dtype, "flow_time_derivative")
        uniform_fv = xp.mean(_fv(sphere, r, x, lam, xp))
    return _finite(-sigma * mean_fv + sigma * uniform_fv - speed2, "flow_time_derivative", ("theta", "p", "x"))


def sphere_uniform(n_points, dim, seed, *, antithetic=False, xp=None, dtype=None, device=None):
    r"""``n_points`` i.i.d. points of the uniform distribution on 𝕊^{dim−1} ⊂ ℝ^{dim} (normalised Gaussians).

    With ``antithetic=True`` (``n_points`` even) the second half is the first with column 0 (the output
    weight w) negated: the set is then exactly invariant under w ↦ −w, as U^d is, so its re-injection adds
    nothing to ∫Φ dρ (only λ·mass to ∫V dρ).  Drawn on the host with ``numpy.random.default_rng(seed)``.
    Returns shape (n_points, dim) in ``xp`` (default namespace if None) on ``device`` (if None: the default
    device ``NTKREF_DEVICE`` when ``xp`` is the default namespace, else the namespace's own default), float64
    unless ``dtype``.
    """
    import numpy as np  # host-side seeded draw

    from .nets._common import init_target

    n_points = check_int(n_points, "n_points", caller="sphere_uniform", low=1)
    dim = check_int(dim, "dim", caller="sphere_uniform", low=1)
    xp, dtype, device = init_target(xp, dtype, device, "sphere_uniform")
    rng = _rng(seed)
    if antithetic:
        if n_points % 2:
            raise InvalidParameterError(
                f"The 'n_points' parameter of sphere_uniform must be even when antithetic=True. Got {n_points}.")
        half = _unit_rows(rng.standard_normal((n_points // 2, dim)))
        flipped = half.copy()
        flipped[:, 0] = -flipped[:, 0]
        pts = np.concatenate([half, flipped], axis=0)
    else:
        pts = _unit_rows(rng.standard_normal((n_points, dim)))
    return xp.asarray(pts, dtype=dtype, device=device)


def _antithetic_groups(n_groups, group, dim, rng):
    """Host (n_groups·group, dim) unit rows; each consecutive block of ``group`` (even) rows is w-symmetric.

    Block j is (q₁, …, q_{group/2}, q₁′, …, q_{group/2}′) with q′ = q with column 0 negated, so every single
    injection of the ``append`` simulator is exactly invariant under w ↦ −w (not only a whole pre-drawn block).
    """
    import numpy as np  # host-side seeded draw

    half = _unit_rows(rng.standard_normal((n_groups * (group // 2), dim))).reshape(n_groups, group // 2, dim)
    flipped = half.copy()
    flipped[:, :, 0] = -flipped[:, :, 0]
    return np.concatenate([half, flipped], axis=1).reshape(n_groups * group, dim)


def _unit_rows(g):
    import numpy as np  # host-side

    norms = np.linalg.norm(g, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # probability zero; keeps the draw finite
    return g / norms


# --------------------------------------------------------------------------- finite-net correspondence
def to_network(theta, p):
    r"""Finite net of ρ = Σⱼ pⱼδ_{θⱼ}: Θⱼ = √pⱼ θⱼ (inventory G13; 2-homogeneity of Φ and V).

    Then f^{NN}(x; Θ) = Σⱼ Wⱼ[Uⱼᵀx]₊ = ∫Φ dρ and λ‖Θ‖²_F = ∫V dρ, so L[ρ] = R(f(X; Θ)) + λ‖Θ‖²_F.
    ``p`` must be ≥ 0.  Returns shape (m, d+1) (row j = (Wⱼ, Uⱼ)).
    """
    theta = check_array(theta, "theta", caller="to_network", ndim=2)
    xp = namespace(theta)
    p = check_array(p, "p", caller="to_network", ndim=1, xp=xp, dtype=theta.dtype, shape=(theta.shape[0],))
    if bool(xp.any(p < 0)):
        raise InvalidParameterError("The 'p' parameter of to_network must be nonnegative.")
    return xp.sqrt(p)[:, None] * theta


def from_network(Theta):
    r"""Empirical measure of a width-m net: ρ = (1/m)Σⱼ δ_{√m Θⱼ} (inventory G2).

    Returns (theta, p) with theta = √m·Θ and p = 1/m; :func:`to_network` inverts it exactly up to rounding.
    """
    Theta = check_array(Theta, "Theta", caller="from_network", ndim=2)
    xp = namespace(Theta)
    m = Theta.shape[0]
    if m == 0:
        raise InvalidParameterError("The 'Theta' parameter of from_network must have at least one row.")
    return math.sqrt(m) * Theta, xp.full((m,), 1.0 / m, dtype=Theta.dtype, device=device_of(Theta))


def network_objective(Theta, x, y, lam):
    r"""Seed 002 eq. (2.2): L_λ(Θ) = (1/n)Σᵢ log(1 + exp(−yᵢ f^{NN}(xᵢ; Θ))) + λ‖Θ‖²_F.

    f^{NN}(x; Θ) = Σⱼ wⱼ[uⱼᵀx]₊, rows of ``Theta`` (m, d+1) = (wⱼ, uⱼ).  Note the **mean** here against the
    sum in Example 3.2: L[ρ] = n·L^{(2.2)}_{λ/n}(Θ) for ρ = (1/m)Σδ_{√mΘⱼ}.  Returns a 0-d array.
    """
    x, y, xp = _data(x, y, "network_objective")
    lam = _lam(lam, "network_objective")
    Theta = _points(Theta, x.shape[1], xp, x.dtype, "network_objective", name="Theta")
    ones = xp.ones((Theta.shape[0],), dtype=x.dtype, device=device_of(x))
    a = _outputs(Theta, ones, x, xp)
    return _finite(_loss_R(a, y, xp) / x.shape[0] + lam * xp.sum(Theta * Theta), "network_objective", ("Theta", "x"))


# --------------------------------------------------------------------------- one step of App. E.3
def perturbed_step(theta, p, x, y, lam, eta, sigma, fresh):
    r"""One step of the discrete perturbed flow (seed 002 App. E.3), deterministic weighted-particle form.

        ρ_{t+1} = (1 − ησ)·(id − η∇L′[ρ_t])_# ρ_t + ησ·Û,  Û = (1/M)Σ_k δ_{fresh_k},

    i.e. transport θⱼ ← θⱼ − η∇L′[ρ_t](θⱼ), shrink the weights pⱼ ← (1 − ησ)pⱼ, and append the M rows of
    ``fresh`` (points of 𝕊^d, e.g. :func:`sphere_uniform`) with weight ησ/M each.  This is App. E.3's
    ρ_t + η(−σρ_t + σU^d − ∇·(vρ_t)) with U^d replaced by its empirical measure Û, reading the transport
    term ρ_t − η∇·(vρ_t) as the push-forward (id + ηv)_#ρ_t (the particle reading): the two differ by the
    O(η²σ) transport of the removed mass ησρ_t.  Against the literal linearized update (the signed measure
    acting on test functions φ as ∫φ dρ_t + η∫∇φ·v dρ_t) the difference is O(η²) (the push-forward's
    second-order term ½η²∫vᵀ∇²φ v dρ_t).  Total mass is conserved exactly (up to rounding).
    Returns (theta, p) with m + M rows.
    """
    x, y, xp = _data(x, y, "perturbed_step")
    lam = _lam(lam, "perturbed_step")
    eta = check_real(eta, "eta", caller="perturbed_step", low=0.0, closed="neither")
    sigma = check_real(sigma, "sigma", caller="perturbed_step", low=0.0)
    if eta * sigma > 1:
        raise InvalidParameterError(f"perturbed_step needs eta*sigma <= 1 (weights stay >= 0); got {eta * sigma!r}.")
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "perturbed_step")
    fresh = _points(fresh, x.shape[1], xp, x.dtype, "perturbed_step", name="fresh")
    r = _residual(_outputs(theta, p, x, xp), y, xp)
    moved = _finite(theta - eta * _fv_grad(theta, r, x, lam, xp), "perturbed_step", ("theta", "x"))
    k = fresh.shape[0]
    if k == 0 or sigma == 0:
        return moved, p
    p_new = xp.full((k,), eta * sigma / k, dtype=x.dtype, device=device_of(x))
    return xp.concat([moved, fresh], axis=0), xp.concat([(1.0 - eta * sigma) * p, p_new])


# --------------------------------------------------------------------------- Assumptions E.1–E.3 constants
def regularity_constants(x, lam, *, k=None):
    r"""Constants of Assumptions E.1–E.3 for Example 3.2 and the derived B_L (Lemma E.6) and c₂ (Lemma E.13).

    For R(a) = Σᵢ log(1 + e^{−yᵢaᵢ}), Φᵢ(θ) = w[uᵀxᵢ]₊, V = λ‖θ‖² on the sphere 𝕊^d:

    - C_R = 1/4 (∇²R = diag σ(1−σ)), M_R = √n (|∂R/∂aᵢ| < 1);
    - B_Φ = ½‖X‖₂ (|w|‖u‖ ≤ ½ on 𝕊^d, ‖[Xu]₊‖ ≤ ‖X‖₂‖u‖), M_Φ = maxᵢ‖xᵢ‖ (‖∇Φᵢ‖ ≤ ‖xᵢ‖ in the unit ball,
      and chords of 𝕊^d stay in it);
    - b_V = B_V = λ, M_V = 2λ;
    - B_L = M_R B_Φ + B_V (Lemma E.6), c₂ = √k M_R M_Φ + M_V with k = n (Lemma E.13),
      c₁ = max{k C_R B_Φ², k C_R B_Φ M_Φ, B_L} (Lemma E.12).

    Returns a dict of Python floats.  ``k`` overrides the output dimension of Φ (default n).
    """
    x = check_array(x, "x", caller="regularity_constants", ndim=2)
    xp = namespace(x)
    lam = _lam(lam, "regularity_constants")
    n = x.shape[0]
    if n == 0 or x.shape[1] == 0:
        raise InvalidParameterError(
            f"The 'x' parameter of regularity_constants must have at least one row and one column; got shape {x.shape}.")
    k = n if k is None else check_int(k, "k", caller="regularity_constants", low=1)
    # ‖X‖₂ and maxᵢ‖xᵢ‖ of x/s (s a power of two: exact) times s, so that XᵀX does not overflow for large x
    s = float(_pow2_scale(x, xp))
    xs = x / s
    gram_eigs, _ = eigh(xp.matrix_transpose(xs) @ xs, xp)
    op_norm = s * math.sqrt(max(float(xp.max(gram_eigs)), 0.0))
    B_phi = 0.5 * op_norm
    M_phi = s * float(xp.max(xp.sqrt(xp.sum(xs * xs, axis=1))))
    M_R, C_R = math.sqrt(n), 0.25
    B_L = M_R * B_phi + lam
    out = {
        "C_R": C_R, "M_R": M_R, "B_Phi": B_phi, "M_Phi": M_phi, "b_V": lam, "B_V": lam, "M_V": 2.0 * lam,
        "B_L": B_L, "c_1": max(k * C_R * B_phi * B_phi, k * C_R * B_phi * M_phi, B_L),
        "c_2": math.sqrt(k) * M_R * M_phi + 2.0 * lam,
    }
    if not all(math.isfinite(v) for v in out.values()):
        raise InvalidParameterError(
            "regularity_constants: c_1 = k C_R B_Phi^2 overflows float64; the values of 'x' are too large "
            f"(max row norm {M_phi!r}). Rescale x.")
    return out


# --------------------------------------------------------------------------- min L′ over the sphere, certificate
def _max_abs_g_exact_2d(r, x, xp):
    """max over unit u ∈ ℝ² of |g(u)|, g(u) = Σᵢ rᵢ[uᵀxᵢ]₊, and a maximiser."""
    x1, x2 = x[:, 0], x[:, 1]
    # directions orthogonal to xᵢ: the kinks of g on the circle
    phi = xp.atan2(x1, -x2)
    angles = xp.sort(xp.concat([phi, phi + math.pi]))
    two_pi = 2.0 * math.pi
    angles = angles - two_pi * xp.floor(angles / two_pi)
    angles = xp.sort(angles)
    nxt = xp.concat([angles[1:], angles[:1] + two_pi])
    mid = 0.5 * (angles + nxt)
    u_mid = xp.stack([xp.cos(mid), xp.sin(mid)], axis=1)
    active = (u_mid @ xp.matrix_transpose(x)) >= 0
    # on each arc between kinks g(u) = cᵀu with c = Σ_{active} rᵢxᵢ: |cᵀu| is maximal at an end of the arc
    # or at ±c/‖c‖; every candidate is a point of the circle, so max |g| over candidates is exact
    c = (xp.astype(active, x.dtype) * r[None, :]) @ x
    cn = xp.sqrt(xp.sum(c * c, axis=1))
    safe = cn > 0
    c_unit = xp.where(safe[:, None], c / xp.where(safe, cn, xp.ones_like(cn))[:, None],
                      xp.zeros_like(c) + xp.asarray([1.0, 0.0], dtype=x.dtype, device=device_of(x)))
    u_kink = xp.stack([xp.cos(angles), xp.sin(angles)], axis=1)
    cand = xp.concat([u_kink, c_unit, -c_unit], axis=0)
    return _max_abs_g_on(cand, r, x, xp)


def _max_abs_g_on(cand, r, x, xp):
    pre = cand @ xp.matrix_transpose(x)
    g = xp.where(pre >= 0, pre, xp.zeros_like(pre)) @ r
    idx = int(xp.argmax(xp.abs(g)))
    return xp.abs(g[idx]), cand[idx, :], g[idx]


def min_first_variation(theta, p, x, y, lam, *, method="auto", n_samples=100_000, seed=0):
    r"""min over θ̄ ∈ 𝕊^d of L′[ρ](θ̄), and a minimiser (seed 002 (E.13), Lemma E.14's K_t^{−τ}).

    On 𝕊^d, L′[ρ](w, u) = w‖u‖·g(ū) + λ with g(ū) = Σᵢ rᵢ[ūᵀxᵢ]₊, and min_{w²+s²=1} ws·g = −|g|/2, so

        min_{θ̄∈𝕊^d} L′[ρ](θ̄) = λ − ½·max_{ū∈𝕊^{d−1}} |g(ū)|,

    attained at θ̄ = (−sign g(ū*)/√2, ū*/√2) (inventory G11).

    ``method``: ``"exact"`` (d ≤ 2: the kinks of g on the circle and the stationary directions of each
    linear piece — exact), ``"sample"`` (max over ``n_samples`` uniform ū: the result is an **upper**
    bound on the true minimum, so a certificate built from it is not rigorous), ``"auto"`` (exact if d ≤ 2).

    Returns (value, theta_bar): a 0-d array and an array of shape (d+1,).
    """
    x, y, xp = _data(x, y, "min_first_variation")
    lam = _lam(lam, "min_first_variation")
    method = check_option(method, "method", ("auto", "exact", "sample"), caller="min_first_variation")
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "min_first_variation")
    d = x.shape[1]
    if method == "auto":
        method = "exact" if d <= 2 else "sample"
    r = _residual(_outputs(theta, p, x, xp), y, xp)
    if method == "exact":
        if d > 2:
            raise InvalidParameterError(f"min_first_variation: method='exact' needs d <= 2 inputs; got d = {d}.")
        if d == 1:
            cand = xp.asarray([[1.0], [-1.0]], dtype=x.dtype, device=device_of(x))
            best, u_star, g_star = _max_abs_g_on(cand, r, x, xp)
        else:
            best, u_star, g_star = _max_abs_g_exact_2d(r, x, xp)
    else:
        n_samples = check_int(n_samples, "n_samples", caller="min_first_variation", low=1)
        rng = _rng(seed)
        best = u_star = g_star = None
        chunk = 16384
        for start in range(0, n_samples, chunk):
            k = min(chunk, n_samples - start)
            cand = xp.asarray(_unit_rows(rng.standard_normal((k, d))), dtype=x.dtype, device=device_of(x))
            b, u, g = _max_abs_g_on(cand, r, x, xp)
            if best is None or bool(b > best):
                best, u_star, g_star = b, u, g
    dev = device_of(x)
    sign = xp.where(g_star >= 0, xp.asarray(1.0, dtype=x.dtype, device=dev), xp.asarray(-1.0, dtype=x.dtype, device=dev))
    theta_bar = xp.concat([xp.reshape(-sign, (1,)), u_star]) / math.sqrt(2.0)
    return _finite(lam - 0.5 * best, "min_first_variation", ("x",)), theta_bar


def optimality_certificate(theta, p, x, y, lam, *, min_fv=None):
    r"""Upper bound on L[ρ] − inf L from (E.13) (seed 002 proof of Thm E.4; inventory G11).

    Convexity of L in ρ gives, for any ρ*, L[ρ] − L[ρ*] ≤ E_ρ[L′[ρ]] − E_{ρ*}[L′[ρ]] and
    E_{ρ*}[L′[ρ]] = E_{ρ*}[‖θ‖²L′[ρ](θ̄)] ≥ E_{ρ*}‖θ‖²·min{min_{𝕊^d} L′[ρ], 0}.  Any ρ* with L[ρ*] ≤ L[ρ] has
    λE_{ρ*}‖θ‖² ≤ L[ρ*] ≤ L[ρ] (R ≥ 0), so

        L[ρ] − inf L ≤ E_ρ[L′[ρ](θ)] + (L[ρ]/λ)·max{0, −min_{θ̄∈𝕊^d} L′[ρ](θ̄)},

    with E_ρ[L′[ρ]] = ⟨∇R(a), a⟩ + λE_ρ‖θ‖².  Rigorous when ``min_fv`` is a lower bound of the minimum
    (default: :func:`min_first_variation` with ``method="auto"``, exact for d ≤ 2).  Needs λ > 0 (b_V > 0).
    Returns a 0-d array.
    """
    x, y, xp = _data(x, y, "optimality_certificate")
    lam = _lam(lam, "optimality_certificate", positive=True)
    theta, p = _particles(theta, p, x.shape[1], xp, x.dtype, "optimality_certificate")
    if bool(xp.any(p < 0)):
        raise InvalidParameterError("The 'p' parameter of optimality_certificate must be nonnegative (ρ is a measure).")
    if min_fv is None:
        min_fv, _ = min_first_variation(theta, p, x, y, lam)
    a = _outputs(theta, p, x, xp)
    r = _residual(a, y, xp)
    value = _loss_R(a, y, xp) + lam * xp.sum(p * xp.sum(theta * theta, axis=1))
    mean_fv = xp.sum(r * a) + lam * xp.sum(p * xp.sum(theta * theta, axis=1))
    dev = device_of(x)
    neg_min = -xp.asarray(min_fv, dtype=x.dtype, device=dev)
    return _finite(mean_fv + (value / lam) * xp.maximum(neg_min, xp.zeros_like(neg_min)), "optimality_certificate",
                   ("theta", "p", "x"))


# --------------------------------------------------------------------------- Lemma E.14
def cap_measure_lower_bound(radius, sphere_dim, *, form="corrected"):
    r"""Lower bound on the normalised measure of a spherical cap {θ̄ ∈ 𝕊^D : ‖θ̄ − θ̄₀‖ ≤ r} (Lemma E.14).

    ``form="printed"``: r^{2D}, the bound behind seed 002 Lemma E.14 (log m(K^{−τ+δ}) ≥ −2d log(c₂/δ) with
    r = δ/c₂, D = d).  It is **false** for moderate r (on 𝕊¹ for r > 0.32, e.g. r = 0.5: exact 0.161 < 0.25);
    it holds for r ≲ 0.32.  ``form="corrected"``: ½(r/2)^D, Lemma 2.3 of Ball (1997), the paper's reference
    [8], valid for 0 ≤ r ≤ 2; Lemma E.14 then reads log m(K^{−τ+δ}) ≥ −d·log(2c₂/δ) − log 2.
    Returns a Python float.
    """
    radius = check_real(radius, "radius", caller="cap_measure_lower_bound", low=0.0, high=2.0)
    sphere_dim = check_int(sphere_dim, "sphere_dim", caller="cap_measure_lower_bound", low=1)
    form = check_option(form, "form", ("corrected", "printed"), caller="cap_measure_lower_bound")
    if form == "printed":
        return radius ** (2 * sphere_dim)
    return 0.5 * (radius / 2.0) ** sphere_dim


# --------------------------------------------------------------------------- the simulator
@dataclass
class FlowRecord:
    """Trajectory of :func:`perturbed_wasserstein_flow`, recorded every ``record_every`` steps.

    Attributes
    ----------
    steps : list of int
        Step indices t of the records (0 = initial measure; the last one is ``steps``).
    loss : array (T,)
        L[ρ_t] (seed 002 §3).
    mean_first_variation : array (T,)
        E_{ρ_t}[L′[ρ_t](θ)] (= 0 at stationary points of (3.1)).
    second_moment : array (T,)
        W_t² = E_{ρ_t}‖θ‖² (App. E.2).
    speed2 : array (T,)
        E_{ρ_t}‖v[ρ_t]‖² (Lemma E.7); mass waiting for re-injection (``inject_every > 1``) counts as U^d,
        E_{U^d}‖v‖² = (d·E_ū[g²] + E_ū‖h‖²)/(d+1) + 4λ² in closed form (g(ū) = Σᵢrᵢ[ūᵀxᵢ]₊,
        h(ū) = Σᵢrᵢ𝟙(ūᵀxᵢ ≥ 0)xᵢ).
    n_particles : list of int
        Number of particles carrying mass.
    min_first_variation, certificate : array (T,) or None
        min over 𝕊^d of L′[ρ_t] and the (E.13) certificate, when ``track_min=True`` (the waiting mass, as
        U^d, adds λ·pending to L and to E[L′]: the certificate grows by λ·pending·(1 + max{0, −min L′}/λ)).
    theta, p : arrays
        The final particles and weights (mass-carrying ones only).
    """

    steps: list
    loss: object
    mean_first_variation: object
    second_moment: object
    speed2: object
    n_particles: list
    theta: object
    p: object
    min_first_variation: object = None
    certificate: object = None
    settings: dict = field(default_factory=dict)


def perturbed_wasserstein_flow(x, y, *, n_particles=400, steps=1000, eta=0.05, sigma=1e-3, lam=0.01, seed=0,
                               record_every=1, reinjection="append", n_new=2, init_scale=1.0, theta0=None, p0=None,
                               inject_every=1, track_min=False, min_method="auto", min_samples=20000):
    r"""Simulate seed 002's discrete-time perturbed Wasserstein gradient flow (App. E.3) with weighted particles.

    Each step (inventory G13):

    1. a = Σⱼ pⱼ wⱼ[uⱼᵀX]₊ and r = ∇R(a);
    2. transport: θⱼ ← θⱼ − η∇L′[ρ](θⱼ) (= one gradient step on the finite net Θⱼ = √pⱼθⱼ);
    3. noise re-injection σ(U^d − ρ), by one of

       - ``reinjection="append"`` (deterministic weights; App. E.3's update with U^d replaced by the
         empirical measure of ``n_new`` fresh uniform points): pⱼ ← (1 − ησ)pⱼ and ``n_new`` fresh points of
         𝕊^d join with weight ησ/n_new each (drawn antithetically in w when ``n_new`` is even: the n_new
         points of every single injection are exactly w-symmetric, like U^d).  Mass is conserved; the
         particle count grows by ``n_new`` per injection (fresh particles are pre-drawn in blocks and carry
         zero weight until injected).  ``inject_every=K > 1`` lumps K steps of re-injection: the decayed mass
         Σ_{s<K} ησ(1 − ησ)^s waits and joins at once on ``n_new`` fresh points every K steps (and at the
         last step), so the count grows K times slower; records count the waiting mass as the uniform
         measure it stands for (it adds λ per unit mass to L, E[L′] and the certificate's L, 1 to W²,
         E_{U^d}‖v‖² to the speed², and nothing to ∫Φ dρ), and the returned weights always sum to 1;
         fresh particles do not move before they are injected;
       - ``reinjection="resample"`` (fixed count; "re-initializing a very small fraction of the neurons",
         §3): each particle independently, with probability ησ, is replaced by a fresh point of 𝕊^d with
         its weight kept.  The expected next measure is (1 − ησ)(id + ηv)_#ρ + ησU^d.

       ``sigma=0`` gives the unperturbed flow (3.1), i.e. plain gradient descent of the finite net.

    Parameters
    ----------
    x : array (n, d); y : array (n,) of ±1
    n_particles : int, initial particle count m (ignored if ``theta0`` is given)
    steps : int; eta : float > 0 (step η); sigma : float ≥ 0 with ησ ≤ 1; lam : float ≥ 0 (V = λ‖θ‖²)
    seed : int or numpy Generator (initial and fresh particles; resampling decisions)
    record_every : int; records at t = 0, every ``record_every`` steps, and at the end
    reinjection : {"append", "resample"}; n_new : int, fresh points per injection ("append");
    inject_every : int, steps between injections ("append")
    init_scale : float, initial particles θⱼ = init_scale·(uniform on 𝕊^d), pⱼ = 1/m
    theta0, p0 : optional initial particles (m, d+1) and weights (m,) (p0 ≥ 0, Σp0 = 1; default 1/m)
    track_min : bool, also record min_{𝕊^d} L′[ρ_t] (:func:`min_first_variation`) and the (E.13)
        certificate (needs λ > 0); ``min_method``/``min_samples`` as there.

    Returns
    -------
    FlowRecord

    Notes
    -----
    Cost O(m·n·d) per step with m the current particle count (m + n_new·steps/inject_every at the end for
    "append").  The inventory's instance (n = 10, (x, 1) inputs, λ = n·2⁻⁸, m = 400, η = 0.05, σ = 1e-3,
    20 000 steps, ``inject_every=50``) takes ~10 s on one core and ends within 2e-4 (relative) of an L-BFGS
    optimum of the finite net, with min L′ ≈ −1e-3.
    """
    import numpy as np  # host-side seeded draws only

    caller = "perturbed_wasserstein_flow"
    x, y, xp = _data(x, y, caller)
    n, d = x.shape
    dtype, dev = x.dtype, device_of(x)
    steps = check_int(steps, "steps", caller=caller, low=0)
    eta = check_real(eta, "eta", caller=caller, low=0.0, closed="neither")
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0)
    lam = _lam(lam, caller, positive=track_min)
    record_every = check_int(record_every, "record_every", caller=caller, low=1)
    inject_every = check_int(inject_every, "inject_every", caller=caller, low=1)
    reinjection = check_option(reinjection, "reinjection", ("append", "resample"), caller=caller)
    min_method = check_option(min_method, "min_method", ("auto", "exact", "sample"), caller=caller)
    n_new = check_int(n_new, "n_new", caller=caller, low=1)
    init_scale = check_real(init_scale, "init_scale", caller=caller, low=0.0, closed="neither")
    if eta * sigma > 1:
        raise InvalidParameterError(f"{caller} needs eta*sigma <= 1 (weights stay >= 0); got {eta * sigma!r}.")
    rng = _rng(seed)
    # a separate stream for the sphere samples of min L′, so that track_min does not change the trajectory
    min_rng = np.random.default_rng(int(rng.integers(2**63)))
    if theta0 is None:
        m = check_int(n_particles, "n_particles", caller=caller, low=1)
        theta = xp.asarray(init_scale * _unit_rows(rng.standard_normal((m, d + 1))), dtype=dtype, device=dev)
    else:
        theta = _points(theta0, d, xp, dtype, caller, name="theta0")
        m = theta.shape[0]
        if m == 0:
            raise InvalidParameterError(f"The 'theta0' parameter of {caller} must have at least one row.")
    if p0 is None:
        p = xp.full((m,), 1.0 / m, dtype=dtype, device=dev)
    else:
        p = check_array(p0, "p0", caller=caller, ndim=1, xp=xp, dtype=dtype, shape=(m,))
        if bool(xp.any(p < 0)) or abs(float(xp.sum(p)) - 1.0) > 1e-9:
            raise InvalidParameterError(f"The 'p0' parameter of {caller} must be nonnegative and sum to 1.")

    append = reinjection == "append" and sigma > 0
    if append and n_new % 2 == 0:
        # each injection (n_new consecutive rows) is itself w-symmetric, like U^d
        draw = lambda k: xp.asarray(_antithetic_groups(k, n_new, d + 1, rng), dtype=dtype, device=dev)  # noqa: E731
    else:
        draw = lambda k: sphere_uniform(k * n_new, d + 1, rng, xp=xp, dtype=dtype, device=dev)  # noqa: E731
    # zero-weight pending fresh particles; active[j] says whether particle j has been injected
    n_active = m
    block = 256
    active = xp.ones((m,), dtype=xp.bool, device=dev)

    rec = {k: [] for k in ("steps", "loss", "mean_fv", "w2", "speed2", "count", "min_fv", "cert")}

    def record(t, a, r, grad, pending):
        # mass awaiting re-injection counts as its uniform measure: ∫Φ dU^d = 0, ∫V dU^d = λ, ∫‖θ‖² dU^d = 1,
        # ∫‖∇L′‖² dU^d = _uniform_speed2 (closed form)
        sq = xp.sum(theta * theta, axis=1)
        w2 = xp.sum(p * sq) + pending
        loss = _loss_R(a, y, xp) + lam * w2
        rec["steps"].append(t)
        rec["loss"].append(float(loss))
        rec["mean_fv"].append(float(xp.sum(r * a) + lam * w2))
        rec["w2"].append(float(w2))
        speed2 = xp.sum(p * xp.sum(grad * grad, axis=1))
        if pending:
            speed2 = speed2 + pending * _uniform_speed2(r, x, lam, xp)
        rec["speed2"].append(float(speed2))
        rec["count"].append(n_active)
        if track_min:
            mv, _ = min_first_variation(theta, p, x, y, lam, method=min_method, n_samples=min_samples,
                                        seed=min_rng)
            rec["min_fv"].append(float(mv))
            cert = optimality_certificate(theta, p, x, y, lam, min_fv=mv)
            # the pending mass adds λ·pending to L and to E[L′] (both bounds grow by it; stays rigorous)
            rec["cert"].append(float(cert) + lam * pending * (1.0 + max(-float(mv), 0.0) / lam))

    decay = 1.0 - eta * sigma
    pending = 0.0  # mass removed by the decay and not yet re-injected (inject_every > 1)
    for t in range(steps + 1):
        a = _outputs(theta, p, x, xp)
        r = _residual(a, y, xp)
        grad = _fv_grad(theta, r, x, lam, xp)
        if t % record_every == 0 or t == steps:
            record(t, a, r, grad, pending)
        if t == steps:
            break
        if append:
            # the pending (zero-weight) particles must not move before they are injected
            theta = theta - eta * xp.where(active[:, None], grad, xp.zeros_like(grad))
            p = decay * p
            pending = decay * pending + eta * sigma
            if (t + 1) % inject_every == 0 or t + 1 == steps:
                if n_active + n_new > theta.shape[0]:
                    theta = xp.concat([theta, draw(block)], axis=0)
                    p = xp.concat([p, xp.zeros((block * n_new,), dtype=dtype, device=dev)])
                    active = xp.concat([active, xp.zeros((block * n_new,), dtype=xp.bool, device=dev)])
                idx = xp.arange(theta.shape[0], device=dev)
                new = (idx >= n_active) & (idx < n_active + n_new)
                p = p + xp.where(new, xp.asarray(pending / n_new, dtype=dtype, device=dev), xp.zeros_like(p))
                active = active | new
                n_active += n_new
                pending = 0.0
        else:
            theta = theta - eta * grad
            if sigma > 0:
                hit = rng.random(theta.shape[0]) < eta * sigma
                if hit.any():
                    fresh = np.zeros((theta.shape[0], d + 1))
                    fresh[hit] = _unit_rows(rng.standard_normal((int(hit.sum()), d + 1)))
                    theta = xp.where(xp.asarray(hit, device=dev)[:, None], xp.asarray(fresh, dtype=dtype, device=dev),
                                     theta)

    if not all(math.isfinite(v) for k in ("loss", "mean_fv", "w2", "speed2") for v in rec[k]):
        raise InvalidParameterError(
            f"{caller}: the flow overflowed (non-finite L[rho] or speed); the values of 'x' (or 'init_scale', "
            f"'theta0', 'eta') are too large. Rescale the inputs or take a smaller step 'eta'.")
    # injected particles are the first n_active rows (fresh ones are activated in order)
    theta_out, p_out = theta[:n_active, :], p[:n_active]
    arr = lambda v: xp.asarray(v, dtype=xp.float64, device=dev)  # noqa: E731
    return FlowRecord(
        steps=rec["steps"], loss=arr(rec["loss"]), mean_first_variation=arr(rec["mean_fv"]),
        second_moment=arr(rec["w2"]), speed2=arr(rec["speed2"]), n_particles=rec["count"],
        theta=theta_out, p=p_out,
        min_first_variation=arr(rec["min_fv"]) if track_min else None,
        certificate=arr(rec["cert"]) if track_min else None,
        settings={"eta": eta, "sigma": sigma, "lam": lam, "reinjection": reinjection, "n_new": n_new,
                  "steps": steps, "n_particles": m, "init_scale": init_scale},
    )
