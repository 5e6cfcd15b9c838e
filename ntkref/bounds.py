r"""Bounds between a network and its kernel machine (seed 000 Thm 3.5 / App. F, Lemma D.1, App. B).

Notation (App. F): e_t = f_t − g_t on the n training points, the NN with tangent kernel Θ̂(w_t),
the KM with K = Θ̂(w₀), both trained on (7) from f₀ = g₀; ρ and β_l the loss's Lipschitz and
smoothness constants; a(t) = ρ√n‖Θ̂(w_t) − Θ̂(w₀)‖₂ and c = β_l‖Θ̂(w₀)‖₂.

**Seed error (SPEC §4).**  App. F derives ‖e_T‖ ≤ ∫₀ᵀ e^{−λ(T−t)}(c‖e_t‖ + a(t)) dt and then
prints, "by Grönwall",  ‖e_T‖ ≤ e^{−λT} e^{(1−e^{−λT})c/λ} ∫₀ᵀ a(t)e^{λt} dt.  That step is
invalid: the extremal case u' = (c − λ)u + a satisfies the hypothesis with equality and exceeds
the printed value (λ = 1, c = ½, a ≡ 1: u(∞) = 2 > e^{½} ≈ 1.65; see
``tests/test_bounds.py``).  The correct consequence is

.. math:: ‖e_T‖ ≤ \int_0^T e^{(c−λ)(T−t)} a(t)\,dt \qquad\text{(:func:`gronwall_gap_bound`)}

and its exact discrete analogue for gradient descent with step η,
‖e_K‖ ≤ Σ_{k<K} η a_k (1 − ηλ + ηc)^{K−1−k} (valid for any η with 1 − ηλ ≥ 0).

**Convex losses** (:func:`convex_gap_bound`): with l' monotone, in the K₀^{-1} norm the
difference obeys d‖e‖_{K₀⁻¹}/dt ≤ −λ‖e‖_{K₀⁻¹} + b(t), b(t) = ‖K₀^{-1/2}(Θ̂_t − K₀)l'(f_t)‖, so
‖e_T‖₂ ≤ √λ_max(K₀) ∫₀ᵀ e^{−λ(T−t)} b(t) dt — no exponential growth, valid for the hinge loss
too (in gradient flow).  Discrete steps: the same with (1 − ηλ)^{K−1−k}, provided
η β_l λ_max(K₀) ≤ 2(1 − ηλ) (so not for the hinge loss, whose l' jumps).

**Test points** (App. F.2): no Grönwall step is needed once the training bound U_t is known:
|e_T(x)| ≤ ∫₀ᵀ e^{−λ(T−t)}(β_l‖Θ̂₀(x, X)‖ U_t + ρ√n‖Θ̂_t(x, X) − Θ̂₀(x, X)‖) dt.

**PL condition** (Lemma D.1): for the soft-margin loss (6) with C = 1/λ, λ_min(Θ̂(w_t)) ≥ 2/C
gives ‖∇L‖² ≥ 2(L − L*), hence for (7) (= λ·(6)) L(w_t) − L* ≤ e^{−2λt}(L(w₀) − L*).

**Generalisation** (App. B, Lemmas B.1–B.2): for f = Σ aᵢK(·, xᵢ) with ‖f‖_H ≤ B and a loss
with values in [0, c] that is ρ-Lipschitz, with probability ≥ 1 − δ,
L_D(f) ≤ L_S(f) + 2ρ(B/n)√(tr K) + 3c√(log(2/δ)/(2n)).  Lemma B.2 needs a *bounded* loss:
the hinge loss is not, so use the ramp loss min(1, max(0, 1 − yz)) (c = 1, ρ = 1), or state
c from a bound on |f|.  The official code used δ = 0.99 where confidence 1 − δ = 0.99 means
δ = 0.01 (SPEC §4).

The recursions over time run on the host (NumPy) on 1-D series of measured scalars (drifts,
remainders, l' norms), whatever namespace produced them: an explicit host step (the series are
copied with ``to_numpy``; they are short, and the recursions are sequential).  The bound series
they return are put back in the namespace and on the device of the measured series given
(``drift``, ``integrand``, ``drift_test``), NumPy arrays for NumPy or Python inputs.  Only
:func:`pl_condition`, :func:`rademacher_bound` and :func:`ramp_loss` work in the inputs' own
namespace.
"""
from __future__ import annotations

import math

from ._backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from ._compat import eigh
from ._validation import InvalidParameterError, check_array, check_real
from . import losses as _losses

__all__ = [
    "printed_gap_bound",
    "gronwall_gap_bound",
    "gronwall_gap_bound_discrete",
    "convex_gap_bound",
    "gap_bound_test_points",
    "pl_condition",
    "rademacher_bound",
    "ramp_loss",
]


def _series(v, name):
    import numpy as np

    a = np.asarray(to_numpy(v), dtype=np.float64)
    if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)):
        raise InvalidParameterError(f"The {name!r} parameter must be a finite 1-D series of at least 2 values.")
    return a


def _like(out, ref):
    """The host result ``out`` in the namespace and on the device of the measured input ``ref``."""
    if not is_array(ref):
        return out
    xp = namespace(ref)
    if is_numpy_namespace(xp):
        return out
    return xp.asarray(out, device=device_of(ref))


def _trapz_weighted(times, values, rate):
    """∫₀ᵀ e^{rate (T − t)} v(t) dt for piecewise-linear v on the grid (exact for the exponential weight)."""
    import numpy as np

    t, v = times, values
    T = t[-1]
    total = 0.0
    for k in range(len(t) - 1):
        h = t[k + 1] - t[k]
        if h <= 0:
            raise InvalidParameterError("times must be strictly increasing.")
        w_hi = math.exp(rate * (T - t[k + 1]))
        # ∫ over [t_k, t_{k+1}] of e^{rate(T−t)} (v_k + (v_{k+1} − v_k)(t − t_k)/h) dt, in closed form
        x = rate * h
        if abs(x) < 1e-8:
            i0, i1 = h, h / 2
        else:
            e = math.expm1(x)
            i0 = e / rate  # ∫₀ʰ e^{rate(h−s)} ds
            i1 = (e - x) / (rate * x) * h  # ∫₀ʰ e^{rate(h−s)} s/h ds
        total += w_hi * (v[k] * i0 + (v[k + 1] - v[k]) * i1)
    return total


def printed_gap_bound(times, drift, lam, loss, kernel0_norm, n):
    """The bound as printed in seed 000 App. F.1 — **not valid in general** (see the module docstring).

    e^{−λT} e^{(1−e^{−λT}) c/λ} ∫₀ᵀ a(t) e^{λt} dt with a = ρ√n·drift, c = β_l‖Θ̂(w₀)‖.
    Offered only to compare with the corrected :func:`gronwall_gap_bound`.
    """
    rho, beta, lam = _constants(loss, lam, need_beta=True)
    t, a = _series(times, "times"), rho * math.sqrt(n) * _series(drift, "drift")
    T = t[-1]
    c = beta * kernel0_norm
    integral = _trapz_weighted(t, a, -lam)  # = e^{−λT}∫ a e^{λt}
    return math.exp((1 - math.exp(-lam * T)) * c / lam) * integral


def _constants(loss, lam, need_beta, need_rho=True):
    loss = _losses.get(loss)
    lam = check_real(lam, "lam", low=0.0, closed="neither")
    if need_rho and loss.lipschitz is None:
        raise InvalidParameterError(f"the {loss.name} loss is not Lipschitz: Theorem 3.5's bound needs ρ.")
    if need_beta and loss.smoothness is None:
        raise InvalidParameterError(
            f"the {loss.name} loss is not smooth (β_l undefined): use convex_gap_bound for convex losses."
        )
    return loss.lipschitz, (loss.smoothness if need_beta else None), lam


def _forcing(drift, n, rho, lprime_norm):
    """a_k = ‖Θ̂_k − Θ̂₀‖₂·‖l'(f_k)‖, with ‖l'(f_k)‖ measured if given, else bounded by ρ√n."""
    d = _series(drift, "drift")
    if lprime_norm is None:
        return rho * math.sqrt(n) * d
    ln = _series(lprime_norm, "lprime_norm")
    if ln.shape != d.shape:
        raise InvalidParameterError("lprime_norm must have one value per drift value.")
    return d * ln


def gronwall_gap_bound(times, drift, lam, loss, kernel0_norm, n):
    """Corrected Thm 3.5 bound for gradient flow: ‖f_T − g_T‖ ≤ ∫₀ᵀ e^{(c−λ)(T−t)} a(t) dt.

    ``drift`` is ‖Θ̂(w_t) − Θ̂(w₀)‖₂ on the training set at ``times`` (measured, or any upper bound);
    the integral uses the exact exponential weight and a piecewise-linear drift.
    """
    rho, beta, lam = _constants(loss, lam, need_beta=True)
    t, a = _series(times, "times"), rho * math.sqrt(n) * _series(drift, "drift")
    return _trapz_weighted(t, a, beta * kernel0_norm - lam)


def gronwall_gap_bound_discrete(lr, drift, lam, loss, kernel0_norm, n, remainder=None, lprime_norm=None):
    """Discrete analogue for gradient descent: ‖e_K‖ ≤ Σ_{k<K} (η a_k + ‖r_k‖)(1 − ηλ + ηc)^{K−1−k}.

    ``drift[k]`` = ‖Θ̂(w_k) − Θ̂(w₀)‖₂ at every step k = 0..K; ``remainder[k]`` = ‖r_k‖, the NN's
    one-step Taylor remainder (``NetTrajectory.remainder``; 0 in the gradient-flow limit);
    ``lprime_norm[k]`` = ‖l'(f_k)‖ measured on the network (replaces ρ√n, and makes the bound
    available for losses that are not globally Lipschitz, such as the squared loss).
    Returns the bound at every step (K + 1,), on the device of ``drift`` (computed on the host).
    Proof: e_{k+1} = (1 − ηλ)e_k − ηΘ̂₀(l'(f_k) − l'(g_k)) − η(Θ̂_k − Θ̂₀)l'(f_k) + r_k, so
    ‖e_{k+1}‖ ≤ (1 − ηλ + ηc)‖e_k‖ + η a_k + ‖r_k‖ when 1 − ηλ ≥ 0.
    """
    import numpy as np

    rho, beta, lam = _constants(loss, lam, need_beta=True, need_rho=lprime_norm is None)
    lr = check_real(lr, "lr", low=0.0, closed="neither")
    if lr * lam > 1:
        raise InvalidParameterError("the discrete bound needs 1 − ηλ ≥ 0.")
    a = _forcing(drift, n, rho, lprime_norm)
    r = np.zeros(len(a)) if remainder is None else np.concatenate([_series(remainder, "remainder"), [0.0]])[: len(a)]
    growth = 1 - lr * lam + lr * beta * kernel0_norm
    out = np.zeros_like(a)
    for k in range(1, len(a)):
        out[k] = growth * out[k - 1] + lr * a[k - 1] + r[k - 1]
    return _like(out, drift)


def convex_gap_bound(times_or_lr, integrand, lam, kernel0_eigs, *, discrete=False, loss=None, remainder=None):
    """Sharper bound for convex losses: ‖e_T‖₂ ≤ √λ_max(K₀) ∫₀ᵀ e^{−λ(T−t)} b(t) dt.

    ``integrand`` is b(t) = ‖K₀^{-1/2}(Θ̂_t − K₀) l'(f_t)‖ (``NetTrajectory.convex_integrand``);
    ``kernel0_eigs`` = (λ_min, λ_max) of K₀ = Θ̂(w₀) (λ_min > 0 needed for the K₀⁻¹ norm).
    With ``discrete=True`` the first argument is the step η and the bound at every step is
    √λ_max Σ_{k<K} (1 − ηλ)^{K−1−k}(η b_k + ‖r_k‖/√λ_min), valid if η β_l λ_max(K₀) ≤ 2(1 − ηλ)
    (checked, so ``loss`` is required and must be smooth); ``remainder`` as in
    :func:`gronwall_gap_bound_discrete`.  The discrete series is computed on the host and returned
    on the device of ``integrand``; the continuous bound is a float.
    """
    import numpy as np

    lam = check_real(lam, "lam", low=0.0)
    b = _series(integrand, "integrand")
    lmin, lmax = (check_real(v, "kernel0_eigs", low=0.0) for v in kernel0_eigs)
    if lmin <= 0:
        raise InvalidParameterError("convex_gap_bound needs a positive definite Θ̂(w₀) (λ_min > 0).")
    kernel0_max_eig = lmax
    scale = math.sqrt(lmax)
    if not discrete:
        return scale * _trapz_weighted(_series(times_or_lr, "times"), b, -lam)
    lr = check_real(times_or_lr, "lr", low=0.0, closed="neither")
    loss = _losses.get(loss) if loss is not None else None
    if loss is None or loss.smoothness is None or not loss.convex:
        raise InvalidParameterError("the discrete convex bound needs a smooth convex loss (β_l) to control the step.")
    if lr * loss.smoothness * kernel0_max_eig > 2 * (1 - lr * lam):
        raise InvalidParameterError(
            f"step too large for the discrete convex bound: η β_l λ_max = {lr * loss.smoothness * kernel0_max_eig:.3g} "
            f"> 2(1 − ηλ) = {2 * (1 - lr * lam):.3g}."
        )
    r = np.zeros(len(b)) if remainder is None else np.concatenate([_series(remainder, "remainder"), [0.0]])[: len(b)]
    out = np.zeros_like(b)
    for k in range(1, len(b)):
        out[k] = (1 - lr * lam) * out[k - 1] + lr * b[k - 1] + r[k - 1] / math.sqrt(lmin)
    return _like(scale * out, integrand)


def gap_bound_test_points(lr, train_bound, drift_test, lam, loss, kernel0_test_norm, n, remainder_test=None, lprime_norm=None):
    """App. F.2 (discrete form) without a Grönwall step: for each test point x,
    |e_K(x)| ≤ Σ_{k<K} η (1 − ηλ)^{K−1−k} (β_l‖Θ̂₀(x, X)‖ U_k + ρ√n‖Θ̂_k(x, X) − Θ̂₀(x, X)‖).

    ``train_bound`` (K + 1,) is a valid training-set bound U_k (e.g. from
    :func:`gronwall_gap_bound_discrete`), ``drift_test`` (K + 1, m) the test rows' drifts,
    ``kernel0_test_norm`` (m,) the norms ‖Θ̂₀(x, X)‖, ``lprime_norm`` as in
    :func:`gronwall_gap_bound_discrete`.  Returns (K + 1, m), computed on the host and returned on
    the device of ``drift_test``.
    """
    import numpy as np

    rho, beta, lam = _constants(loss, lam, need_beta=True, need_rho=lprime_norm is None)
    lpn = None if lprime_norm is None else _series(lprime_norm, "lprime_norm")
    U = _series(train_bound, "train_bound")
    D = np.asarray(to_numpy(drift_test), dtype=np.float64)
    k0 = np.asarray(to_numpy(kernel0_test_norm), dtype=np.float64)
    R = np.zeros_like(D) if remainder_test is None else np.concatenate([np.asarray(to_numpy(remainder_test)), np.zeros((1, D.shape[1]))])[: D.shape[0]]
    out = np.zeros_like(D)
    for k in range(1, D.shape[0]):
        lnorm = rho * math.sqrt(n) if lpn is None else lpn[k - 1]
        out[k] = (1 - lr * lam) * out[k - 1] + lr * (beta * k0 * U[k - 1] + lnorm * D[k - 1]) + R[k - 1]
    return _like(out, drift_test)


def pl_condition(kernel, lam):
    """Lemma D.1: (holds, λ_min(Θ̂), 2/C) with C = 1/λ — the PL inequality holds if λ_min(Θ̂) ≥ 2λ.

    Under it, L(w_t) − L* ≤ e^{−2λt}(L(w₀) − L*) for (7) (e^{−2t} in (6)'s normalisation).
    """
    xp = namespace(kernel)
    K = check_array(kernel, "kernel", caller="pl_condition", ndim=2, xp=xp)
    lam = check_real(lam, "lam", caller="pl_condition", low=0.0, closed="neither")
    w = eigh((K + xp.matrix_transpose(K)) / 2, xp)[0]
    lmin = float(w[0])
    return lmin >= 2 * lam, lmin, 2 * lam


def ramp_loss(z, y):
    """min(1, max(0, 1 − yz)): bounded in [0, 1] and 1-Lipschitz, an upper bound of the 0–1 error."""
    xp = namespace(z, y)
    return xp.clip(1 - y * z, 0.0, 1.0)


def rademacher_bound(kernel, a, empirical_loss, *, delta, c, rho):
    """App. B: L_S + 2ρ·(B/n)√(tr K) + 3c√(log(2/δ)/(2n)), B = √(aᵀKa), with probability ≥ 1 − δ.

    ``empirical_loss`` is L_S(f), the mean over the n training points of a loss bounded in [0, c]
    and ρ-Lipschitz (e.g. :func:`ramp_loss`: c = ρ = 1).  ``delta`` is the failure probability
    (0.01 for the paper's 99 % confidence; the official code's 0.99 is the wrong way round).
    """
    xp = namespace(kernel, a)
    K = check_array(kernel, "kernel", caller="rademacher_bound", ndim=2, xp=xp)
    a = check_array(a, "a", caller="rademacher_bound", ndim=1, xp=xp, shape=(K.shape[0],), like=K)
    delta = check_real(delta, "delta", caller="rademacher_bound", low=0.0, high=1.0, closed="neither")
    c = check_real(c, "c", caller="rademacher_bound", low=0.0)
    rho = check_real(rho, "rho", caller="rademacher_bound", low=0.0)
    n = K.shape[0]
    B = math.sqrt(max(float(a @ (K @ a)), 0.0))
    complexity = B / n * math.sqrt(max(float(xp.sum(xp.linalg.diagonal(K))), 0.0))
    return float(empirical_loss) + 2 * rho * complexity + 3 * c * math.sqrt(math.log(2 / delta) / (2 * n))
