r"""Bounds between a network and its kernel machine (seed 000 Thm 3.5 / App. F, Lemma D.1, App. B).

Notation (App. F): e_t = f_t − g_t on the n training points, the NN with tangent kernel Θ̂(w_t),
the KM with K = Θ̂(w₀), both trained on (7) from f₀ = g₀; ρ and β_l the loss's Lipschitz and
smoothness constants; a(t) = ρ√n‖Θ̂(w_t) − Θ̂(w₀)‖₂ and c = β_l‖Θ̂(w₀)‖₂.

**Seed error (docs/errata.md).**  App. F derives ‖e_T‖ ≤ ∫₀ᵀ e^{−λ(T−t)}(c‖e_t‖ + a(t)) dt and then
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
δ = 0.01 (docs/errata.md, seed 000 App. B).

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

from ._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from ._lib.compat import eigh
from ._lib.validation import InvalidParameterError, check_array, check_int, check_real
from . import losses as _losses
from .machines._gram import check_gram

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


def _host_array(v, name, caller):
    import numpy as np

    if v is None:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be an array. Got None instead.")
    try:
        a = to_numpy(v)  # the bounds' recursions run on the host: an explicit copy of device arrays
        if a.dtype.kind not in "fiub":
            raise TypeError(f"dtype {a.dtype}")
        return a.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a real array: {exc}") from None


def _series(v, name, caller="bounds", *, nonneg=False, increasing=False, min_len=2):
    """A finite 1-D host series of at least ``min_len`` values (non-negative / strictly increasing if asked)."""
    import numpy as np

    a = _host_array(v, name, caller)
    if a.ndim != 1 or a.size < min_len or not np.all(np.isfinite(a)):
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be a finite 1-D series of at least {min_len} values; "
            f"got shape {a.shape}{'' if np.all(np.isfinite(a)) else ' with NaN or infinite values'}."
        )
    if nonneg and np.any(a < 0):
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be non-negative (a norm); its minimum is {float(a.min())!r}."
        )
    if increasing and np.any(np.diff(a) <= 0):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be strictly increasing.")
    return a


def _tail(v, name, caller, length, *, ndim=1, cols=None):
    """A per-step series of ``length`` − 1 or ``length`` values (the last step's is unused), padded to ``length``."""
    import numpy as np

    a = _host_array(v, name, caller)
    ok = a.ndim == ndim and a.shape[0] in (length - 1, length) and (cols is None or a.shape[1:] == (cols,))
    if not ok:
        want = f"({length - 1} or {length}{'' if cols is None else ', ' + str(cols)})"
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have shape {want}; got {a.shape}.")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be finite and non-negative (a norm).")
    pad = np.zeros((length - a.shape[0],) + a.shape[1:])
    return np.concatenate([a, pad])


def _finite_result(value, caller, names):
    """Finite or error: a bound that overflowed is refused, naming the parameters that set its scale."""
    import numpy as np

    if not np.all(np.isfinite(value)):
        raise InvalidParameterError(
            f"{caller}: the bound overflows the float64 range (it is not finite); the scale of "
            + ", ".join(repr(n) for n in names) + " is too large for it to be represented."
        )
    return value


def _check_n(n, caller):
    return check_int(n, "n", caller=caller, low=1)


def _check_norm(v, name, caller):
    return check_real(v, name, caller=caller, low=0.0)


def _like(out, ref):
    """The host result ``out`` in the namespace and on the device of the measured input ``ref``."""
    if not is_array(ref):
        return out
    xp = namespace(ref)
    if is_numpy_namespace(xp):
        return out
    return xp.asarray(out, device=device_of(ref))


_SERIES_BELOW = 1.0  # |rate·h| below which the step weights use their Taylor series (no cancellation)


def _step_weights(rate, h):
    """(i0, i1) = (∫₀ʰ e^{rate(h−s)} ds, ∫₀ʰ e^{rate(h−s)} (s/h) ds) = (h·E₁(x), h·E₂(x)), x = rate·h.

    With σ = s/h: i0 = h∫₀¹e^{x(1−σ)}dσ = h(eˣ − 1)/x and i1 = h∫₀¹e^{x(1−σ)}σ dσ = h(eˣ − 1 − x)/x²,
    i.e. E₁(x) = Σ_{k≥0} xᵏ/(k+1)!, E₂(x) = Σ_{k≥0} xᵏ/(k+2)! (E₁(0) = 1, E₂(0) = ½).  For |x| < 1 the
    series (terms until they no longer change the sum; both ≥ 0 for all x) avoid the cancellation of
    eˣ − 1 − x (relative error ~2eps/|x|); otherwise the closed forms, accurate to a few eps for |x| ≥ 1.
    Raises OverflowError when eˣ overflows.
    """
    x = rate * h
    if abs(x) < _SERIES_BELOW:
        e1 = e2 = 0.0
        term1, term2 = 1.0, 0.5  # x^k/(k+1)!, x^k/(k+2)!
        k = 0
        while True:
            new1, new2 = e1 + term1, e2 + term2
            if new1 == e1 and new2 == e2:
                break
            e1, e2 = new1, new2
            k += 1
            term1 *= x / (k + 1)
            term2 *= x / (k + 2)
        return h * e1, h * e2
    e = math.expm1(x)
    return e / rate, (e - x) / (rate * x)  # h(eˣ − 1)/x, h(eˣ − 1 − x)/x² (h/x² = 1/(rate·x))


def _trapz_weighted(times, values, rate):
    """∫₀ᵀ e^{rate (T − t)} v(t) dt for the piecewise-linear v through (tₖ, vₖ), in closed form.

    Exact in exact arithmetic for any grid (the exponential weight is integrated exactly over each step,
    see :func:`_step_weights`); relative error a few eps per step in floating point.
    """
    t, v = times, values
    T = t[-1]
    total = 0.0
    for k in range(len(t) - 1):
        h = t[k + 1] - t[k]
        if h <= 0:
            raise InvalidParameterError("times must be strictly increasing.")
        try:
            w_hi = math.exp(rate * (T - t[k + 1]))
            i0, i1 = _step_weights(rate, h)
        except OverflowError:
            return math.inf
        # ∫ over [t_k, t_{k+1}] of e^{rate(T−t)} (v_k + (v_{k+1} − v_k)(t − t_k)/h) dt = e^{rate(T−t_{k+1})}·(…)
        total += w_hi * (v[k] * i0 + (v[k + 1] - v[k]) * i1)
    return total


def printed_gap_bound(times, drift, lam, loss, kernel0_norm, n):
    """The bound as printed in seed 000 App. F.1 — **not valid in general** (see the module docstring).

    e^{−λT} e^{(1−e^{−λT}) c/λ} ∫₀ᵀ a(t) e^{λt} dt with a = ρ√n·drift, c = β_l‖Θ̂(w₀)‖.
    Offered only to compare with the corrected :func:`gronwall_gap_bound`.

    Validation (as :func:`gronwall_gap_bound`): ``times`` finite and strictly increasing, ``drift``
    finite, non-negative and of the same length, λ > 0, ``kernel0_norm`` ≥ 0 finite, ``n`` an int ≥ 1;
    a value that overflows float64 raises :class:`InvalidParameterError` instead of returning inf.

    Examples
    --------
    The module docstring's counterexample: a ≡ 1 (logistic loss: ρ = 1; n = 1), c = β_l‖Θ̂₀‖ = ¼·2 = ½,
    λ = 1.  The extremal u′ = (c − λ)u + a reaches 2, above the printed e^{1/2}:

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> t = np.linspace(0.0, 40.0, 401)
    >>> printed = bounds.printed_gap_bound(t, np.ones_like(t), 1.0, "logistic", 2.0, 1)
    >>> valid = bounds.gronwall_gap_bound(t, np.ones_like(t), 1.0, "logistic", 2.0, 1)
    >>> print(f"{printed:.6f} {valid:.6f} {np.exp(0.5):.6f}")
    1.648721 2.000000 1.648721
    """
    caller = "printed_gap_bound"
    rho, beta, lam = _constants(loss, lam, need_beta=True)
    t, d = _times_and(times, drift, "drift", caller)
    a = rho * math.sqrt(_check_n(n, caller)) * d
    T = t[-1]
    c = beta * _check_norm(kernel0_norm, "kernel0_norm", caller)
    integral = _trapz_weighted(t, a, -lam)  # = e^{−λT}∫ a e^{λt}
    try:
        value = math.exp((1 - math.exp(-lam * T)) * c / lam) * integral
    except OverflowError:
        value = math.inf
    return float(_finite_result(value, caller, ("kernel0_norm", "lam", "times", "drift")))


def _times_and(times, values, name, caller):
    """``times`` (strictly increasing) and a non-negative series of the same length on it."""
    t = _series(times, "times", caller, increasing=True)
    v = _series(values, name, caller, nonneg=True)
    if v.shape != t.shape:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must have one value per time ({t.shape[0]}); got {v.shape[0]}."
        )
    return t, v


def _constants(loss, lam, need_beta, need_rho=True):
    loss = loss if isinstance(loss, _losses.Loss) else _losses.get(loss)
    lam = check_real(lam, "lam", low=0.0, closed="neither")
    if need_rho and loss.lipschitz is None:
        raise InvalidParameterError(f"the {loss.name} loss is not Lipschitz: Theorem 3.5's bound needs ρ.")
    if need_beta and loss.smoothness is None:
        raise InvalidParameterError(
            f"the {loss.name} loss is not smooth (β_l undefined): use convex_gap_bound for convex losses."
        )
    return loss.lipschitz, (loss.smoothness if need_beta else None), lam


def _forcing(drift, n, rho, lprime_norm, caller):
    """a_k = ‖Θ̂_k − Θ̂₀‖₂·‖l'(f_k)‖, with ‖l'(f_k)‖ measured if given, else bounded by ρ√n."""
    d = _series(drift, "drift", caller, nonneg=True)
    n = _check_n(n, caller)
    if lprime_norm is None:
        return rho * math.sqrt(n) * d
    ln = _series(lprime_norm, "lprime_norm", caller, nonneg=True)
    if ln.shape != d.shape:
        raise InvalidParameterError(
            f"The 'lprime_norm' parameter of {caller} must have one value per drift value ({d.shape[0]}); "
            f"got {ln.shape[0]}."
        )
    return d * ln


def gronwall_gap_bound(times, drift, lam, loss, kernel0_norm, n):
    """Corrected Thm 3.5 bound for gradient flow: ‖f_T − g_T‖ ≤ ∫₀ᵀ e^{(c−λ)(T−t)} a(t) dt.

    ``drift`` is ‖Θ̂(w_t) − Θ̂(w₀)‖₂ on the training set at ``times`` (measured, or any upper bound);
    the integral uses the exact exponential weight and a piecewise-linear drift.

    Validation: ``times`` a finite, strictly increasing series of ≥ 2 values; ``drift`` finite,
    non-negative, one value per time; λ > 0; ``kernel0_norm`` finite ≥ 0; ``n`` an int ≥ 1.  A bound
    that overflows float64 (e.g. a huge (c − λ)T) raises :class:`InvalidParameterError`.

    Examples
    --------
    With a ≡ 1 (logistic, n = 1) and c − λ = ¼·2 − 1 = −½: ∫₀ᵀ e^{−(T−t)/2} dt = 2(1 − e^{−T/2}).

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> t = np.linspace(0.0, 2.0, 3)
    >>> b = bounds.gronwall_gap_bound(t, np.ones(3), 1.0, "logistic", 2.0, 1)
    >>> print(f"{b:.6f} {2 * (1 - np.exp(-1.0)):.6f}")
    1.264241 1.264241
    """
    caller = "gronwall_gap_bound"
    rho, beta, lam = _constants(loss, lam, need_beta=True)
    t, d = _times_and(times, drift, "drift", caller)
    a = rho * math.sqrt(_check_n(n, caller)) * d
    value = _trapz_weighted(t, a, beta * _check_norm(kernel0_norm, "kernel0_norm", caller) - lam)
    return float(_finite_result(value, caller, ("kernel0_norm", "times", "drift")))


def gronwall_gap_bound_discrete(lr, drift, lam, loss, kernel0_norm, n, remainder=None, lprime_norm=None):
    """Discrete analogue for gradient descent: ‖e_K‖ ≤ Σ_{k<K} (η a_k + ‖r_k‖)(1 − ηλ + ηc)^{K−1−k}.

    ``drift[k]`` = ‖Θ̂(w_k) − Θ̂(w₀)‖₂ at every step k = 0..K; ``remainder[k]`` = ‖r_k‖, the NN's
    one-step Taylor remainder (``NetTrajectory.remainder``; 0 in the gradient-flow limit);
    ``lprime_norm[k]`` = ‖l'(f_k)‖ measured on the network (replaces ρ√n, and makes the bound
    available for losses that are not globally Lipschitz, such as the squared loss).
    Returns the bound at every step (K + 1,), on the device of ``drift`` (computed on the host).
    Proof: e_{k+1} = (1 − ηλ)e_k − ηΘ̂₀(l'(f_k) − l'(g_k)) − η(Θ̂_k − Θ̂₀)l'(f_k) + r_k, so
    ‖e_{k+1}‖ ≤ (1 − ηλ + ηc)‖e_k‖ + η a_k + ‖r_k‖ when 1 − ηλ ≥ 0.

    Validation: η > 0 with ηλ ≤ 1; λ > 0; ``kernel0_norm`` finite ≥ 0; ``n`` an int ≥ 1; ``drift``
    (and ``lprime_norm``, same length) finite non-negative series of ≥ 2 values; ``remainder`` finite,
    non-negative, with K or K + 1 values.  A bound that overflows float64 raises
    :class:`InvalidParameterError`.

    Examples
    --------
    a ≡ 1, η = 0.1, λ = 1, c = ½: growth 1 − ηλ + ηc = 0.95, so the bound is 2(1 − 0.95ᴷ).

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> b = bounds.gronwall_gap_bound_discrete(0.1, np.ones(11), 1.0, "logistic", 2.0, 1)
    >>> print(b.shape, f"{b[-1]:.6f} {2 * (1 - 0.95**10):.6f}")
    (11,) 0.802526 0.802526
    """
    import numpy as np

    caller = "gronwall_gap_bound_discrete"
    rho, beta, lam = _constants(loss, lam, need_beta=True, need_rho=lprime_norm is None)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    if lr * lam > 1:
        raise InvalidParameterError(f"The 'lr' parameter of {caller}: the discrete bound needs 1 − ηλ ≥ 0, "
                                    f"i.e. lr ≤ 1/lam = {1 / lam:.6g}. Got {lr!r} instead.")
    kernel0_norm = _check_norm(kernel0_norm, "kernel0_norm", caller)
    a = _forcing(drift, n, rho, lprime_norm, caller)
    r = np.zeros(len(a)) if remainder is None else _tail(remainder, "remainder", caller, len(a))
    growth = 1 - lr * lam + lr * beta * kernel0_norm
    out = np.zeros_like(a)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, len(a)):
            out[k] = growth * out[k - 1] + lr * a[k - 1] + r[k - 1]
    _finite_result(out, caller, ("kernel0_norm", "lr", "drift", "remainder"))
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

    Validation: λ ≥ 0 finite; ``integrand`` a finite non-negative series of ≥ 2 values (one per
    time in the continuous form, with ``times`` strictly increasing); ``kernel0_eigs`` a pair of
    finite numbers with 0 < λ_min ≤ λ_max; ``discrete`` a bool; η > 0; ``remainder`` finite,
    non-negative, K or K + 1 values.  A bound that overflows float64 raises
    :class:`InvalidParameterError`.

    Examples
    --------
    b ≡ 1, λ = 1, λ_max(K₀) = 4: the bound is 2(1 − e^{−T}), with no exponential growth.

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> t = np.linspace(0.0, 2.0, 5)
    >>> b = bounds.convex_gap_bound(t, np.ones(5), 1.0, (0.5, 4.0))
    >>> print(f"{b:.6f} {2 * (1 - np.exp(-2.0)):.6f}")
    1.729329 1.729329
    """
    import numpy as np

    caller = "convex_gap_bound"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    if not isinstance(discrete, bool):
        raise InvalidParameterError(f"The 'discrete' parameter of {caller} must be a bool. Got {discrete!r} instead.")
    b = _series(integrand, "integrand", caller, nonneg=True)
    try:
        pair = list(kernel0_eigs)
    except TypeError:
        pair = None
    if pair is None or len(pair) != 2:
        raise InvalidParameterError(
            f"The 'kernel0_eigs' parameter of {caller} must be a pair (λ_min, λ_max). Got {kernel0_eigs!r} instead."
        )
    lmin, lmax = (check_real(v, "kernel0_eigs", caller=caller, low=0.0) for v in pair)
    if lmin <= 0:
        raise InvalidParameterError(
            f"The 'kernel0_eigs' parameter of {caller} must have λ_min > 0: the bound needs a positive definite "
            f"Θ̂(w₀). Got {kernel0_eigs!r} instead."
        )
    if lmin > lmax:
        raise InvalidParameterError(
            f"The 'kernel0_eigs' parameter of {caller} must be ordered (λ_min ≤ λ_max). Got {kernel0_eigs!r} instead."
        )
    kernel0_max_eig = lmax
    scale = math.sqrt(lmax)
    if not discrete:
        t = _series(times_or_lr, "times_or_lr", caller, increasing=True)
        if t.shape != b.shape:
            raise InvalidParameterError(
                f"The 'integrand' parameter of {caller} must have one value per time in 'times_or_lr' ({t.shape[0]}); "
                f"got {b.shape[0]}."
            )
        value = scale * _trapz_weighted(t, b, -lam)
        return float(_finite_result(value, caller, ("kernel0_eigs", "integrand", "times_or_lr")))
    lr = check_real(times_or_lr, "times_or_lr", caller=caller, low=0.0, closed="neither")
    loss = (loss if isinstance(loss, _losses.Loss) else _losses.get(loss)) if loss is not None else None
    if loss is None or loss.smoothness is None or not loss.convex:
        raise InvalidParameterError(
            f"The 'loss' parameter of {caller} must be a smooth convex loss (β_l controls the step) when "
            f"discrete=True. Got {loss!r} instead."
        )
    if lr * loss.smoothness * kernel0_max_eig > 2 * (1 - lr * lam):
        raise InvalidParameterError(
            f"The 'times_or_lr' parameter (the step η) of {caller} is too large for the discrete convex bound: η β_l λ_max = {lr * loss.smoothness * kernel0_max_eig:.3g} "
            f"> 2(1 − ηλ) = {2 * (1 - lr * lam):.3g}."
        )
    r = np.zeros(len(b)) if remainder is None else _tail(remainder, "remainder", caller, len(b))
    out = np.zeros_like(b)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, len(b)):
            out[k] = (1 - lr * lam) * out[k - 1] + lr * b[k - 1] + r[k - 1] / math.sqrt(lmin)
        out = scale * out
    _finite_result(out, caller, ("kernel0_eigs", "integrand", "remainder"))
    return _like(out, integrand)


def gap_bound_test_points(lr, train_bound, drift_test, lam, loss, kernel0_test_norm, n, remainder_test=None, lprime_norm=None):
    """App. F.2 (discrete form) without a Grönwall step: for each test point x,
    |e_K(x)| ≤ Σ_{k<K} η (1 − ηλ)^{K−1−k} (β_l‖Θ̂₀(x, X)‖ U_k + ρ√n‖Θ̂_k(x, X) − Θ̂₀(x, X)‖).

    ``train_bound`` (K + 1,) is a valid training-set bound U_k (e.g. from
    :func:`gronwall_gap_bound_discrete`), ``drift_test`` (K + 1, m) the test rows' drifts,
    ``kernel0_test_norm`` (m,) the norms ‖Θ̂₀(x, X)‖, ``lprime_norm`` as in
    :func:`gronwall_gap_bound_discrete`.  Returns (K + 1, m), computed on the host and returned on
    the device of ``drift_test``.

    Validation: η > 0 with ηλ ≤ 1; λ > 0; ``n`` an int ≥ 1; ``drift_test`` a finite non-negative
    (K + 1, m) array with K ≥ 1; ``train_bound`` and ``lprime_norm`` finite non-negative series of
    K + 1 values; ``kernel0_test_norm`` finite non-negative of shape (m,); ``remainder_test`` finite
    non-negative of shape (K, m) or (K + 1, m).  A bound that overflows float64 raises
    :class:`InvalidParameterError`.

    Examples
    --------
    U_k = 0 and test drifts ½ (logistic: ρ = 1; n = 4): ρ√n·½·Σ_{k<K} η(1 − ηλ)^{K−1−k} = 1 − 0.9ᴷ.

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> drift_test = np.full((11, 2), 0.5)
    >>> B = bounds.gap_bound_test_points(0.1, np.zeros(11), drift_test, 1.0, "logistic", np.ones(2), 4)
    >>> print(B.shape, np.round(B[-1], 6).tolist(), f"{1 - 0.9**10:.6f}")
    (11, 2) [0.651322, 0.651322] 0.651322
    """
    import numpy as np

    caller = "gap_bound_test_points"
    rho, beta, lam = _constants(loss, lam, need_beta=True, need_rho=lprime_norm is None)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    if lr * lam > 1:
        raise InvalidParameterError(f"The 'lr' parameter of {caller}: the discrete bound needs 1 − ηλ ≥ 0, "
                                    f"i.e. lr ≤ 1/lam = {1 / lam:.6g}. Got {lr!r} instead.")
    n = _check_n(n, caller)
    D = _host_array(drift_test, "drift_test", caller)
    if D.ndim != 2 or D.shape[0] < 2 or not np.all(np.isfinite(D)) or np.any(D < 0):
        raise InvalidParameterError(
            f"The 'drift_test' parameter of {caller} must be a finite non-negative (K + 1, m) array with K ≥ 1; "
            f"got shape {D.shape}."
        )
    steps, m = D.shape
    U = _series(train_bound, "train_bound", caller, nonneg=True)
    if U.shape[0] != steps:
        raise InvalidParameterError(
            f"The 'train_bound' parameter of {caller} must have one value per row of drift_test ({steps}); "
            f"got {U.shape[0]}."
        )
    lpn = None if lprime_norm is None else _series(lprime_norm, "lprime_norm", caller, nonneg=True)
    if lpn is not None and lpn.shape[0] != steps:
        raise InvalidParameterError(
            f"The 'lprime_norm' parameter of {caller} must have one value per row of drift_test ({steps}); "
            f"got {lpn.shape[0]}."
        )
    k0 = _host_array(kernel0_test_norm, "kernel0_test_norm", caller)
    if k0.shape != (m,) or not np.all(np.isfinite(k0)) or np.any(k0 < 0):
        raise InvalidParameterError(
            f"The 'kernel0_test_norm' parameter of {caller} must be finite, non-negative, of shape ({m},); "
            f"got shape {k0.shape}."
        )
    R = np.zeros_like(D) if remainder_test is None else _tail(remainder_test, "remainder_test", caller, steps, ndim=2,
                                                              cols=m)
    out = np.zeros_like(D)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, steps):
            lnorm = rho * math.sqrt(n) if lpn is None else lpn[k - 1]
            out[k] = (1 - lr * lam) * out[k - 1] + lr * (beta * k0 * U[k - 1] + lnorm * D[k - 1]) + R[k - 1]
    _finite_result(out, caller, ("train_bound", "drift_test", "kernel0_test_norm", "remainder_test"))
    return _like(out, drift_test)


def pl_condition(kernel, lam):
    """Lemma D.1: (holds, λ_min(Θ̂), 2/C) with C = 1/λ — the PL inequality holds if λ_min(Θ̂) ≥ 2λ.

    Under it, L(w_t) − L* ≤ e^{−2λt}(L(w₀) − L*) for (7) (e^{−2t} in (6)'s normalisation).

    Validation: ``kernel`` a finite, square, non-empty, symmetric matrix (to √eps relative, as in
    :mod:`ntkref.machines`; it need not be PSD — the test is about λ_min); λ > 0 finite.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import bounds
    >>> bounds.pl_condition(np.diag([3.0, 5.0]), 1.0)    # λ_min = 3 ≥ 2λ = 2
    (True, 3.0, 2.0)
    >>> bounds.pl_condition(np.diag([3.0, 5.0]), 2.0)[0]   # 3 < 4
    False
    """
    caller = "pl_condition"
    K = check_gram(_renamed(kernel, caller), caller, psd=False, name="kernel")
    xp = namespace(K)
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    w = eigh((K + xp.matrix_transpose(K)) / 2, xp)[0]
    lmin = float(w[0])
    return lmin >= 2 * lam, lmin, 2 * lam


def ramp_loss(z, y):
    """min(1, max(0, 1 − yz)): bounded in [0, 1] and 1-Lipschitz, an upper bound of the 0–1 error.

    Validation: ``z`` and ``y`` finite arrays of the same shape (``y`` the ±1 labels, or any real
    weights); lists take the device of the other argument.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import bounds
    >>> bounds.ramp_loss(np.array([2.0, 0.5, -1.0]), np.ones(3)).tolist()   # margins yz = 2, ½, −1
    [0.0, 0.5, 1.0]
    """
    caller = "ramp_loss"
    xp = namespace(z, y)
    like = z if is_array(z) else (y if is_array(y) else None)
    z = check_array(z, "z", caller=caller, xp=xp, like=like)
    y = check_array(y, "y", caller=caller, xp=xp, like=like)
    if tuple(z.shape) != tuple(y.shape):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} must have the shape of 'z' {tuple(z.shape)}; got {tuple(y.shape)}."
        )
    return xp.clip(1 - y * z, 0.0, 1.0)


def rademacher_bound(kernel, a, empirical_loss, *, delta, c, rho):
    """App. B: L_S + 2ρ·(B/n)√(tr K) + 3c√(log(2/δ)/(2n)), B = √(aᵀKa), with probability ≥ 1 − δ.

    ``empirical_loss`` is L_S(f), the mean over the n training points of a loss bounded in [0, c]
    and ρ-Lipschitz (e.g. :func:`ramp_loss`: c = ρ = 1).  ``delta`` is the failure probability
    (0.01 for the paper's 99 % confidence; the official code's 0.99 is the wrong way round).

    Validation: ``kernel`` finite, square, non-empty, symmetric and positive semidefinite (the
    Cholesky check of :mod:`ntkref.machines`: λ_min ≥ −n·eps·‖K‖_F; B = √(aᵀKa) is an RKHS norm only
    for a PSD kernel); ``a`` finite of shape (n,); δ ∈ (0, 1); c finite > 0 (a loss bounded by
    c = 0 is identically zero: nothing to bound); ρ finite ≥ 0; ``empirical_loss`` a
    finite mean of a loss with values in [0, c], so in [0, c].  A bound that overflows float64
    raises :class:`InvalidParameterError`.

    Examples
    --------
    K = I (n = 4), a = ½·1: B = 1 and 2ρ(B/n)√tr K = 1, plus 3c√(log(2/δ)/(2n)) at δ = 0.01:

    >>> import numpy as np
    >>> from ntkref import bounds
    >>> v = bounds.rademacher_bound(np.eye(4), np.full(4, 0.5), 0.0, delta=0.01, c=1.0, rho=1.0)
    >>> print(f"{v:.6f} {1 + 3 * np.sqrt(np.log(200) / 8):.6f}")
    3.441435 3.441435
    """
    caller = "rademacher_bound"
    xp = namespace(kernel, a)
    K = check_gram(_renamed(kernel, caller, xp), caller, psd=True, name="kernel")
    a = check_array(a, "a", caller=caller, ndim=1, xp=xp, shape=(K.shape[0],), like=K)
    delta = check_real(delta, "delta", caller=caller, low=0.0, high=1.0, closed="neither")
    c = check_real(c, "c", caller=caller, low=0.0, closed="neither")
    rho = check_real(rho, "rho", caller=caller, low=0.0)
    empirical_loss = check_real(empirical_loss, "empirical_loss", caller=caller, low=0.0, high=c)
    n = K.shape[0]
    B = math.sqrt(max(float(a @ (K @ a)), 0.0))
    complexity = B / n * math.sqrt(max(float(xp.sum(xp.linalg.diagonal(K))), 0.0))
    value = empirical_loss + 2 * rho * complexity + 3 * c * math.sqrt(math.log(2 / delta) / (2 * n))
    return float(_finite_result(value, caller, ("kernel", "a", "rho", "c")))


def _renamed(kernel, caller, xp=None):
    """``kernel`` as a 2-D array (the machines' Gram check then reports it under its own name)."""
    return check_array(kernel, "kernel", caller=caller, ndim=2, xp=xp if xp is not None else namespace(kernel))
