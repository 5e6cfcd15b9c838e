r"""The primal and dual objectives of seed 000 eq. (7) and the certificates of the kernel machines.

P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) and its Fenchel dual D(α) = −Σ lᵢ*(−λαᵢ) − (λ/2)αᵀKα (the conjugates are in
:mod:`ntkref.machines`' docstring), evaluated from g = Kα (:func:`primal_from_g`, :func:`dual_from_g`); the box
of the dual QPs of the piecewise-linear losses (:func:`qp_bounds`); the KKT residual; the estimate of the
rounding of the computed gap (:func:`gap_rounding`, :func:`rounding_of_gap`, :func:`hard_margin_rounding`);
the input checks shared by every solver (:func:`prepare`, :func:`check_lam`, :func:`get_loss`) and the
finite-or-error rule (:func:`overflow_error`, :func:`check_finite_solution`); and the public objectives
:func:`objective`, :func:`dual_objective`, :func:`duality_gap`.

Used by the solvers (:mod:`ntkref.machines._solve`, :mod:`ntkref.machines._intercept`) and also used by the
Dask engine (ntkref/_engines/dask/_machines.py), which builds the same certificates from block products.
"""
from __future__ import annotations

import math
import warnings

from .. import losses as _losses
from .._lib.backend import device_of, namespace
from .._lib.validation import InvalidParameterError, check_array, check_option, check_real
from . import _boxqp, _gram
from ._gram import CheckedGram


REDUCTIONS = ("sum", "mean")
QP_LOSSES = ("hinge", "squared_hinge", "epsilon_insensitive")


def check_lam(lam, loss, caller, *, allow_zero):
    if loss.name == "squared" and allow_zero:
        return check_real(lam, "lam", caller=caller, low=0.0)
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    if lam == 0.0:
        hint = " (the λ → 0 limit of the hinge loss is hard_margin_svm(K, y))" if loss.name == "hinge" else ""
        raise InvalidParameterError(
            f"The 'lam' parameter of {caller} must be > 0 for the {loss.name!r} loss{hint}. Got 0.0 instead."
        )
    return lam


def prepare(K, y, loss, lam, reduction, caller, *, psd=True, allow_zero=True, info=None):
    """The checked (K, y, loss, lam, lam_sum, xp) of a solver; ``info`` (a dict) receives ``psd_margin``, what the
    PSD test proved (:func:`ntkref.machines._gram.refuse_indefinite`: 0.0 K ≻ 0, μ λ_min > −μ, inf nothing)."""
    loss = get_loss(loss, caller)
    check_option(reduction, "reduction", REDUCTIONS, caller=caller)
    checked = K if isinstance(K, CheckedGram) else None
    K = _gram.check_gram(K, caller, psd=False)
    xp = namespace(K)
    n = K.shape[0]
    y = loss.check_targets(check_array(y, "y", caller=caller, xp=xp, like=K), "y", caller=caller)
    if y.shape != (n,):
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},) to match K; got {tuple(y.shape)}.")
    y = xp.astype(y, K.dtype) if y.dtype != K.dtype else y
    lam = check_lam(lam, loss, caller, allow_zero=allow_zero)
    lam_sum = lam * n if reduction == "mean" else lam
    method = _gram.psd_method(psd, n, caller)
    margin = math.inf
    if checked is not None:  # checked once: only a stronger PSD test than the one it passed runs
        margin = _gram.upgrade_psd(checked, method, caller, "K") if method else checked.psd_margin
    elif method:  # last: the only check costlier than O(n²)
        margin = _gram.refuse_indefinite(K, caller, method=method)
    if info is not None:
        info["psd_margin"] = margin
    return K, y, loss, lam, lam_sum, xp


def get_loss(loss, caller):
    if isinstance(loss, _losses.Loss):
        return loss
    if not isinstance(loss, str):
        raise InvalidParameterError(
            f"The 'loss' parameter of {caller} must be a loss name or a losses.Loss. Got {loss!r} instead."
        )
    try:
        return _losses.get(loss)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"The 'loss' parameter of {caller}: {exc}") from exc



def overflow_error(caller, what, K, y, lam, xp, alpha=None):
    """The error for a solve or an objective that is not finite: names the inputs whose scale overflows
    (``alpha`` too where the coefficients are an input, as in :func:`objective`)."""
    kmax = float(xp.max(xp.abs(K)))
    ymax = float(xp.max(xp.abs(y))) if y.shape[0] else 0.0
    big = math.sqrt(float(xp.finfo(K.dtype).max))
    scales = [("K", kmax), ("y", ymax), ("lam", abs(lam))]
    if alpha is not None:
        scales.insert(0, ("alpha", float(xp.max(xp.abs(alpha))) if alpha.shape[0] else 0.0))
    names = [nm for nm, v in scales if v > big]
    if not names:  # no single input is near the limit: their product is
        names = [nm for nm, _ in scales]
    return InvalidParameterError(
        f"{caller}: the {what} is not finite (float overflow in {K.dtype}): the scale of "
        + ", ".join(repr(nm) for nm in names) + " is too large ("
        + ", ".join(f"max|{nm}| = {v:.3g}" if nm != "lam" else f"lam = {v:.3g}" for nm, v in scales)
        + "); rescale the problem."
    )


def check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha):
    """Finite or error: never ``converged=True`` with a NaN/inf objective, duality gap or coefficient."""
    values = [primal, dual, primal - dual, kkt]
    if not all(math.isfinite(v) for v in values) or not bool(xp.all(xp.isfinite(alpha))):
        raise overflow_error(caller, "objective, duality gap or solution", K, y, lam, xp)



# --------------------------------------------------------------------------- objectives


def primal_from_g(alpha, g, y, loss, lam_sum, xp):
    """(λ/2)αᵀg + Σ l(g, y) with g = Kα (sum convention)."""
    reg = 0.5 * lam_sum * float(xp.sum(alpha * g))
    try:
        values = loss._value(g, y, xp)  # g, y validated by the caller
    except _losses.LossOverflowError:
        return math.inf  # the caller's finiteness check names the inputs (K, y, lam, alpha) that overflow
    return reg + float(xp.sum(values))


def dual_from_g(alpha, g, y, loss, lam_sum, xp, slack=1e-9, on_overflow=None):
    """D(α) = −Σ l*(−λα) − (λ/2)αᵀg, or −inf if α is dual-infeasible beyond ``slack``.

    ``on_overflow``: a function returning the error to raise when a dual-feasible α gives a non-finite value
    (float overflow; the −inf of an infeasible α is a value, not an overflow)."""
    quad = 0.5 * lam_sum * float(xp.sum(alpha * g))
    name = loss.name
    if name in ("hinge", "squared_hinge", "logistic"):
        t = lam_sum * y * alpha
        hi = 1.0 + slack if name != "squared_hinge" else math.inf
        if not bool(xp.all((t >= -slack) & (t <= hi))):
            return -math.inf
        t = xp.clip(t, 0.0, None) if name == "squared_hinge" else xp.clip(t, 0.0, 1.0)
        if name == "hinge":
            conj = -t
        elif name == "squared_hinge":
            conj = -t + t * t / 4
        else:  # logistic: negative binary entropy, 0·log 0 = 0
            tlog = xp.where(t > 0, t * xp.log(xp.where(t > 0, t, 1.0)), 0.0)
            u = 1 - t
            ulog = xp.where(u > 0, u * xp.log(xp.where(u > 0, u, 1.0)), 0.0)
            conj = tlog + ulog
    elif name == "epsilon_insensitive":
        s = lam_sum * alpha
        if not bool(xp.all(xp.abs(s) <= 1.0 + slack)):
            return -math.inf
        conj = -s * y + loss.epsilon * xp.abs(s)
    else:  # squared
        s = lam_sum * alpha
        conj = -s * y + s * s / 4
    val = -float(xp.sum(conj)) - quad
    if on_overflow is not None and not math.isfinite(val):
        raise on_overflow()
    return val


_CURVATURE = {"squared": 2.0, "squared_hinge": 2.0, "logistic": 0.25}  # max l″ (0 for the piecewise-linear losses)


def gap_rounding(alpha, g, absKa, y, loss, lam_sum, primal, dual, xp):
    """Estimate of |gap(α, fl(Kα)) − gap(α, Kα)| plus the rounding of the sums P and D.

    gap(α, g) = λαᵀg + Σ [l(gᵢ) + l*(−λαᵢ)] has ∂gap/∂gᵢ = λαᵢ + l′(gᵢ) (0 at the optimum, off kinks), a jump of
    l′ (1 for hinge and ε-insensitive; 2 for ε = 0) where gᵢ is within its rounding of a kink, and curvature
    ≤ max l″.  gᵢ = (Kα)ᵢ is computed with an error δgᵢ estimated as eps·(|K||α|)ᵢ (``absKa``: one unit in the
    last place of the largest partial sums; measured 0.06–0.4 of it on a λ = 1e-5 hinge solve with exact rational
    arithmetic, against the worst case n·eps), so the estimate is Σ (|λαᵢ + l′(gᵢ)| + jumpᵢ)·δgᵢ
    + ½ max l″·Σ δgᵢ² + √n·eps·(|P| + |D|) (the sums).  Negligible at ordinary scales; where |α| ~ 1/λ is large
    against g (λ → 0) it is what limits the certificate.  An estimate, not a bound: a compensated evaluation of
    Kα would make it one.
    """
    n = g.shape[0]
    eps = float(xp.finfo(g.dtype).eps)
    dg = eps * absKa
    slope = xp.abs(lam_sum * alpha + loss._derivative(g, y, xp))
    if loss.name == "hinge":
        slope = slope + xp.astype(xp.abs(y * g - 1.0) <= dg, g.dtype)
    elif loss.name == "epsilon_insensitive":
        jump = 2.0 if loss.epsilon == 0 else 1.0
        slope = slope + jump * xp.astype(xp.abs(xp.abs(g - y) - loss.epsilon) <= dg, g.dtype)
    e = float(xp.sum(slope * dg)) + 0.5 * _CURVATURE.get(loss.name, 0.0) * float(xp.sum(dg * dg))
    return e + math.sqrt(n) * eps * (abs(primal) + (abs(dual) if math.isfinite(dual) else 0.0))


def rounding_of_gap(K, alpha, g, y, loss, lam_sum, primal, dual, tol, xp):
    """:func:`gap_rounding` with |K||α| bounded first by √Kᵢᵢ·Σⱼ√Kⱼⱼ|αⱼ| (|Kᵢⱼ| ≤ √(KᵢᵢKⱼⱼ) for a PSD K; O(n)),
    and computed from the support's rows (|S|·n) only where that bound does not already leave the gap within tol."""
    d = xp.linalg.diagonal(K)
    sq = xp.sqrt(xp.maximum(d if d.dtype == alpha.dtype else xp.astype(d, alpha.dtype), 0.0))
    e = gap_rounding(alpha, g, sq * float(xp.sum(sq * xp.abs(alpha))), y, loss, lam_sum, primal, dual, xp)
    if primal - dual + e <= tol * max(1.0, primal):
        return e
    return gap_rounding(alpha, g, _boxqp.support_matvec(K, alpha, xp, True), y, loss, lam_sum, primal, dual, xp)


def qp_bounds(y, loss, lam_sum, xp):
    C = 1.0 / lam_sum
    if loss.name == "hinge":
        zero = xp.zeros_like(y)
        lo = xp.where(y > 0, zero, -C)
        hi = xp.where(y > 0, C, zero)
        return lo, hi, 0.0, 0.0
    if loss.name == "squared_hinge":
        zero = xp.zeros_like(y)
        lo = xp.where(y > 0, zero, -math.inf)
        hi = xp.where(y > 0, math.inf, zero)
        return lo, hi, 0.0, lam_sum / 2
    C_arr = xp.full(y.shape, C, dtype=y.dtype, device=device_of(y))
    return -C_arr, C_arr, loss.epsilon, 0.0



def unbounded_dual_error(caller, exc, lam, lam_sum, n, reduction, delta):
    r"""The error for a squared-hinge dual that is unbounded below to working precision
    (:class:`ntkref.machines._boxqp.UnboundedDirection` ``exc``), naming ``lam`` and bounding λ_min(K).

    The dual of eq. (7) with the squared hinge is a QP in Q = K + (λ/2)I over a box that is unbounded on one
    side of every coordinate.  The solver met a feasible ray along which dᵀQd/dᵀd = ρ (computed) is not above
    the rounding of Q's eigenvalues: then λ_min(K) ≤ dᵀKd/dᵀd = ρ − λ/2.  This happens when K's smallest
    eigenvalue is a rounding-level negative number (accepted by the PSD test, to −δ = −n·eps·‖K‖_F) below −λ/2,
    or when λ/2 itself is below the resolution m·eps·max Qᵢᵢ of Q's eigenvalues.  Eq. (7) has no minimiser for
    such a K (the dual is unbounded, so the stored K is not PSD), or none that float64 can resolve; regularising K
    would certify a different problem, so the solve is refused: λ_sum must exceed about 2·(2·max(δ, |λ_min(K)|) +
    resolution), for which K + (λ/2)I is positive definite for every K that passes the Cholesky PSD test.
    """
    rho_k = exc.rayleigh - lam_sum / 2
    resolution = exc.m * exc.dtype_eps * exc.qmax
    need_sum = 2 * (2 * max(delta, -rho_k, 0.0) + resolution)
    need = need_sum / n if reduction == "mean" else need_sum
    if rho_k < 0:
        why = "K has a negative eigenvalue" + (
            f" within the PSD test's tolerance -n*eps*||K||_F = {-delta:.3g} (rounding-level)" if rho_k >= -delta else "")
    else:
        why = f"lam_sum/2 = {lam_sum / 2:.3g} is below the resolution of Q's eigenvalues"
    return InvalidParameterError(
        f"The 'lam' parameter of {caller} is too small for the squared_hinge loss with this K: the dual QP's matrix "
        f"Q = K + (lam/2)*I is not positive definite to float64 resolution along a direction d that the dual box "
        f"leaves unbounded, so the dual is unbounded below and there is no minimiser to certify. Along d, "
        f"d^T K d / d^T d = {rho_k:.3g} (so lambda_min(K) <= {rho_k:.3g}) against -lam_sum/2 = {-lam_sum / 2:.3g} "
        f"(lam_sum = lam{' * n' if reduction == 'mean' else ''}), and Q's "
        f"eigenvalues are resolved to about m*eps*max Q_ii = {resolution:.3g} (m = {exc.m} free coordinates): "
        f"{why}. Use lam >= {need:.3g} (reduction={reduction!r}; Q is then positive definite if K passed the Cholesky "
        f"PSD test, which bounds |lambda_min(K)| by n*eps*||K||_F; |alpha| grows like "
        f"1/lam, so a certificate to tol may need a larger lam), or make K positive semidefinite (e.g. K + c*I with "
        f"c >= |lambda_min(K)|, or K with its negative eigenvalues set to 0: a change of kernel). Got lam = {lam!r}."
    )


def kkt_residual(alpha, g, y, K, loss, lam_sum, xp):
    if loss.name in QP_LOSSES:
        lo, hi, eps, shift = qp_bounds(y, loss, lam_sum, xp)
        G = g + shift * alpha - y
        # the solver's scale-free step τ = 1/max Qᵢᵢ (τ = 1 would mix the units of α and g)
        tau = 1.0 / max(float(xp.max(xp.linalg.diagonal(K))) + shift, 1e-300)
        v = alpha - tau * G
        prox = xp.minimum(xp.maximum(_boxqp.soft(v, tau * eps, xp) if eps else v, lo), hi)
        return float(xp.max(xp.abs(alpha - prox)))
    return float(xp.max(xp.abs(alpha + loss._derivative(g, y, xp) / lam_sum)))



def hard_margin_rounding(alpha, absKa, norm2, dual, xp):
    """The hard-margin gap αᵀg − yᵀα has ∂/∂gᵢ = αᵢ: its rounding estimate Σ|αᵢ|·eps·(|K||α|)ᵢ plus that of the
    sums (:func:`gap_rounding`'s model)."""
    n = alpha.shape[0]
    eps = float(xp.finfo(alpha.dtype).eps)
    return eps * float(xp.sum(xp.abs(alpha) * absKa)) + math.sqrt(n) * eps * (0.5 * abs(norm2) + abs(dual))



def as_float64(xp, *arrays):
    """The arrays in float64 (exact conversions): the objectives of float32 inputs are evaluated in float64,
    so that they are the values of the float32 numbers given, as the solvers' certificates are."""
    return tuple(a if a.dtype == xp.float64 else xp.astype(a, xp.float64) for a in arrays)


def objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Primal value P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (``reduction="mean"``: loss term / n).

    This is eq. (7) at β = Σ αᵢ Φ(xᵢ).  K is checked square/symmetric but not PSD.  Finite or error: a value
    beyond the float range (e.g. α or y ~ 1e300) is an InvalidParameterError naming the input at fault.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> K, zero = kernels.fc(X).ntk, np.zeros(20)
    >>> machines.objective(zero, K, y, "hinge", 0.1)   # P(0) = Σ max(0, 1 − yᵢ·0) = n
    20.0
    >>> machines.objective(zero, K, y, "hinge", 0.1, reduction="mean")
    1.0
    """
    K, y, loss, lam, lam_sum, xp = prepare(K, y, loss, lam, reduction, "machines.objective", psd=False)
    alpha = check_array(alpha, "alpha", caller="machines.objective", xp=xp, shape=(K.shape[0],), like=K)
    K, y, alpha = as_float64(xp, K, y, alpha)
    overflow = lambda: overflow_error("machines.objective", "objective", K, y, lam, xp, alpha=alpha)  # noqa: E731
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is reported below, naming the input
            val = primal_from_g(alpha, K @ alpha, y, loss, lam_sum, xp)
    except InvalidParameterError as exc:  # the loss's own overflow check: it names z = Kα, not an input
        raise overflow() from exc
    if not math.isfinite(val):  # finite inputs, overflowing products: an error naming the input at fault
        raise overflow()
    return val / (K.shape[0] if reduction == "mean" else 1)


def dual_objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Fenchel dual D(α) = −Σ lᵢ*(−λαᵢ) − (λ/2)αᵀKα (−inf outside the dual domain).

    Weak duality: D(α′) ≤ P(α) for all α, α′ (K PSD); equality at the optimum.  A dual-feasible α whose
    value overflows (e.g. the squared loss at α ~ 1e300) is an InvalidParameterError naming the input.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> K = kernels.fc(X).ntk
    >>> alpha = machines.fit(K, y, "hinge", 0.1)
    >>> P = machines.objective(alpha, K, y, "hinge", 0.1)
    >>> print(f"{P:.6f} {machines.dual_objective(alpha, K, y, 'hinge', 0.1):.6f}")   # equal at the optimum
    1.492987 1.492987
    >>> machines.dual_objective(0.5 * alpha, K, y, "hinge", 0.1) <= P                 # weak duality
    True
    """
    K, y, loss, lam, lam_sum, xp = prepare(K, y, loss, lam, reduction, "machines.dual_objective", psd=False,
                                            allow_zero=False)
    alpha = check_array(alpha, "alpha", caller="machines.dual_objective", xp=xp, shape=(K.shape[0],), like=K)
    K, y, alpha = as_float64(xp, K, y, alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is an error naming the input (on_overflow)
        val = dual_from_g(alpha, K @ alpha, y, loss, lam_sum, xp, on_overflow=lambda: overflow_error(
            "machines.dual_objective", "dual objective", K, y, lam, xp, alpha=alpha))
    return val / (K.shape[0] if reduction == "mean" else 1)


def duality_gap(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""P(α) − D(α̃) ≥ P(α) − P*: α̃ = α for the nonsmooth losses; for the smooth ones the better (larger) of
    D(α) and D(−l′(Kα)/λ), both lower bounds on P* by weak duality (α itself can be dual-feasible yet a poor
    dual point, e.g. an optimal α with a null(K) component).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> K = kernels.fc(X).ntk
    >>> machines.duality_gap(machines.fit(K, y, "hinge", 0.1), K, y, "hinge", 0.1) <= 1e-10
    True
    >>> machines.duality_gap(np.zeros(20), K, y, "hinge", 0.1)   # P(0) − D(0) = n − 0
    20.0
    """
    P = objective(alpha, K, y, loss, lam, reduction=reduction)
    D = dual_objective(alpha, K, y, loss, lam, reduction=reduction)
    loss_obj = get_loss(loss, "machines.duality_gap")
    if loss_obj.smoothness is not None:
        K = K.K if isinstance(K, CheckedGram) else K
        xp = namespace(K)
        Kx = check_array(K, "K", xp=xp)
        n = Kx.shape[0]
        lam_sum = lam * n if reduction == "mean" else lam
        a = check_array(alpha, "alpha", xp=xp, like=Kx)
        Kx, yy, a = as_float64(xp, Kx, check_array(y, "y", xp=xp, like=Kx), a)
        ad = -loss_obj.derivative(Kx @ a, yy) / lam_sum
        D = max(D, dual_objective(ad, K, y, loss, lam, reduction=reduction))
    return P - D