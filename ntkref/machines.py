r"""Exact ℓ2-regularized kernel machines of seed 000 Table 1.

Seed 000 eq. (7) (with the representer theorem, β = Σᵢ αᵢ Φ(xᵢ), g = K α):

.. math::

    L(\beta) = \frac{\lambda}{2}\|\beta\|^2 + \sum_{i=1}^n l(g(x_i), y_i),
    \qquad g(x) = \sum_i \alpha_i K(x, x_i),\quad \|\beta\|^2 = \alpha^\top K \alpha .

There is **no bias term** (the paper's kernel machine g(x) = Σ αᵢ K(x, xᵢ) has
none).  This module returns the exact minimiser α for every loss of
:mod:`ntkref.losses`:

==========================  ==================================================================
loss                        solver (all derived for the *sum* convention above, C = 1/λ)
==========================  ==================================================================
``squared`` (y − z)²        KRR closed form α = (K + (λ/2) I)⁻¹ y (no ½ in the loss, as the
                            official code); λ = 0 is kernel regression α = K⁻¹ y.
``hinge``                   SVM dual: max yᵀα − ½ αᵀKα  s.t. 0 ≤ yᵢαᵢ ≤ 1/λ (no bias ⇒ no
                            equality constraint).  λ → 0: :func:`hard_margin_svm`.
``squared_hinge``           2-norm SVM dual: max yᵀα − ½ αᵀ(K + (λ/2) I)α  s.t. yᵢαᵢ ≥ 0.
``epsilon_insensitive``     SVR dual: max yᵀα − ε‖α‖₁ − ½ αᵀKα  s.t. |αᵢ| ≤ 1/λ.
``logistic``                damped Newton on the primal in β-space (see :func:`solve`).
==========================  ==================================================================

Derivation (Fenchel duality).  With lᵢ* the convex conjugate of z ↦ l(z, yᵢ),
the dual of (7) is

.. math::

    D(\alpha) = -\sum_i l_i^*(-\lambda\alpha_i) - \frac{\lambda}{2}\alpha^\top K\alpha ,

and at the optimum α = −l′(Kα)/λ (stationarity λβ + Σ l′ᵢ Φ(xᵢ) = 0).  The
conjugates are: hinge −t with t = λyα ∈ [0, 1]; squared hinge −t + t²/4, t ≥ 0;
ε-insensitive −λαy + ελ|α| on |λα| ≤ 1; squared −λαy + λ²α²/4; logistic
t log t + (1 − t) log(1 − t), t = λyα ∈ [0, 1].  The three piecewise-linear
losses thus give box-constrained quadratic programmes (times −λ), solved here by
a primal active-set method (exact solves of the face equations Q_FF a_F = r_F,
projected steps that fix many bounds at once, ratio-test steps and null-space
directions when K is singular) on a growing working set (chunking) — array-API
only.  Logistic: damped Newton, then one extra full Newton step.

Devices.  Every array returned is on K's device.  The active-set solvers (hinge,
squared hinge, ε-insensitive, hard margin) run in K's namespace on K's device: the
Gram mat-vecs, the working-set gathers and the face solves stay there, and the host
reads a few stacked scalars per iteration (the decisions).  For a namespace other
than NumPy and n ≤ 4096 they run instead as one explicit host step (K and y copied
to the host once, results copied back), identical to the NumPy solve: there the
synchronisations would cost more than the arithmetic.

Exactness.  Every solve reports the duality gap P(α) − D(α̃) ≥ P(α) − P* (α̃ the
dual point; α itself for the QPs).  P is λ-strongly convex in β, so

.. math::  \|\beta - \beta^*\|_{\mathcal H} \le \sqrt{2\,\mathrm{gap}/\lambda},
           \qquad |g(x) - g^*(x)| \le \sqrt{K(x,x)}\,\sqrt{2\,\mathrm{gap}/\lambda},

which :attr:`KernelMachine.beta_error_bound` gives.  The default stopping rule is
gap ≤ tol·max(1, P(α)) with tol = 1e-10 (float64) / 1e-4 (float32), after adding the estimate of the
gap's own rounding (``gap_rounding``: g = Kα is rounded, and where |α| ~ 1/λ is large the computed P and D
share that error and their difference cancels; measured: a λ = 1e-12 hinge solve reported gap 2e-15 while its
exact P(α) − P* was 2.6e-4, now converged=False).  The floor max(1, P) makes the rule absolute where P < 1:
there (e.g. a logistic loss with P* ≪ 1) a converged α can be far from α* relatively, though
|g − g*| ≤ √K(x,x)·beta_error_bound holds; pass a smaller tol.  Active-set
solutions are exact to rounding once the active set is identified.  float32 inputs are solved and
certified in float64 arithmetic and α is returned in float32 (:func:`solve`, Notes); the objective
functions (:func:`objective`, :func:`dual_objective`, :func:`duality_gap`) also evaluate float32
inputs in float64, so they reproduce a solve's certificate.

Sum vs mean (docs/conventions.md, 'Losses and regularisation').  ``reduction="mean"`` minimises (λ/2)‖β‖² + (1/n)Σ l,
which is the sum problem with λ_sum = n·λ_mean.  The paper's experiments
(App. A, footnote 5) and its official code use the mean: Figure 1's
λ = 0.001 mean-hinge on n = 128 is ``reduction="mean", lam=0.001``; Table 3's
SVM "λ = 0.064" is the code's 0.001 × batch 64 in the sum convention (its
minibatch-SGD objective per batch).  Table 3's KRR rows use the **sum**
convention (official ``regression.py``: (Θ + (λ/2) I)⁻¹ y), i.e.
``reduction="sum"``.

Validation (every public function): K square, finite, symmetric to
max|K − Kᵀ| ≤ √eps·max|K| (then symmetrised), and positive semidefinite to
λ_min(K) ≥ −δ, δ = n·eps·‖K‖_F: ``check_psd="cholesky"`` certifies it by a Cholesky
factorization of K + δI (O(n³/3)); ``check_psd="lanczos"`` is a one-sided test (40
Lanczos mat-vecs; a refusal comes with a vector u, uᵀKu < 0, acceptance is a stated
probabilistic bound, see ``ntkref._gram._check_psd``); the default ``check_psd=True`` ("auto") is the
Cholesky certificate for n ≤ 4096 and the Lanczos test above; ``check_psd=False`` skips
it (:func:`checked_gram` runs these checks once for many fits on one K, e.g. a λ sweep); y of shape
(n,), ±1 for classification
losses; λ > 0 (λ = 0 only for the squared loss, with K nonsingular).  A K whose
squared entries overflow is refused by the PSD check.  Finite or error: a solve
(:func:`solve`, :func:`fit`, :func:`hard_margin_svm`) whose objective, duality gap,
KKT residual or coefficients come out non-finite (float overflow, e.g. y ~ 1e300)
raises :class:`~ntkref._lib.validation.InvalidParameterError` naming the inputs whose
scale is beyond √(float max) — never ``converged=True`` with a NaN gap.

Note on scikit-learn.  ``SVC(kernel="precomputed")`` solves a different problem
(it fits an unregularised bias: Σ αᵢ = 0 in its dual) and libsvm caches kernel
entries in single precision, so even at ``tol=1e-12`` its decision values agree
with an exact solution only to ~1e-5 relative (tests/test_machines.py compares
on a point-symmetric data set, where its bias is 0 and the problems coincide).

Cost: ``validation/bench/bench_machines.py`` measures validation, the PSD tests and the
solves against scikit-learn's SVC in one run (JSON output).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

from . import losses as _losses
from ._lib import dispatch
from ._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from ._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ._boxqp import _chunked_qp, _soft, _solve_vec, _support_matvec
from ._gram import (CheckedGram, _check_gram, _check_psd, _cholesky_ok, _eps, _eye, _psd_method, _read,
                    _upgrade_psd, checked_gram)

__all__ = [
    "KernelMachine",
    "CheckedGram",
    "checked_gram",
    "ConvergenceWarning",
    "fit",
    "solve",
    "hard_margin_svm",
    "predict",
    "rkhs_norm",
    "objective",
    "dual_objective",
    "duality_gap",
]

REDUCTIONS = ("sum", "mean")
_QP_LOSSES = ("hinge", "squared_hinge", "epsilon_insensitive")


class ConvergenceWarning(UserWarning):
    """A solver stopped before its duality-gap tolerance was met."""


def _check_lam(lam, loss, caller, *, allow_zero):
    if loss.name == "squared" and allow_zero:
        return check_real(lam, "lam", caller=caller, low=0.0)
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    if lam == 0.0:
        hint = " (the λ → 0 limit of the hinge loss is hard_margin_svm(K, y))" if loss.name == "hinge" else ""
        raise InvalidParameterError(
            f"The 'lam' parameter of {caller} must be > 0 for the {loss.name!r} loss{hint}. Got 0.0 instead."
        )
    return lam


def _prepare(K, y, loss, lam, reduction, caller, *, psd=True, allow_zero=True):
    loss = _get_loss(loss, caller)
    check_option(reduction, "reduction", REDUCTIONS, caller=caller)
    checked = K if isinstance(K, CheckedGram) else None
    K = _check_gram(K, caller, psd=False)
    xp = namespace(K)
    n = K.shape[0]
    y = loss.check_targets(check_array(y, "y", caller=caller, xp=xp, like=K), "y", caller=caller)
    if y.shape != (n,):
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},) to match K; got {tuple(y.shape)}.")
    y = xp.astype(y, K.dtype) if y.dtype != K.dtype else y
    lam = _check_lam(lam, loss, caller, allow_zero=allow_zero)
    lam_sum = lam * n if reduction == "mean" else lam
    method = _psd_method(psd, n, caller)
    if checked is not None:  # checked once: only a stronger PSD test than the one it passed runs
        _upgrade_psd(checked, method, caller, "K")
    elif method:  # last: the only check costlier than O(n²)
        _check_psd(K, caller, method=method)
    return K, y, loss, lam, lam_sum, xp


def _get_loss(loss, caller):
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


_HOST_MAX_N = 4096  # active-set solves of at most this n run on the host for non-NumPy namespaces


def _on_host(solver, K, y):
    """``solver(K, y, xp)`` where it is fastest: an explicit host step for small non-NumPy problems.

    The box-QP solvers are sequences of small data-dependent decisions (which coordinates enter or
    leave the face, a ratio test, a duality-gap test), a few batched host reads per iteration; on a
    GPU each is a synchronisation, which costs more than the whole iteration's arithmetic when n is
    small.  So for a namespace other than NumPy and n ≤ ``_HOST_MAX_N`` (4096), K and y are copied to
    the host once (:func:`~ntkref._lib.backend.to_numpy`), the NumPy code runs there, and the arrays it
    returns are copied back to K's device (``xp.asarray(..., device=device_of(K))``): the result is the
    NumPy solve of the same (validated, symmetrised) K and y, bit for bit.  Above that size the solver
    runs in K's namespace on K's device (Gram mat-vecs, working-set gathers and face solves there; the
    host reads only scalars and index counts).  Non-array outputs (floats, ints, bools) are returned as
    they are.
    """
    xp = namespace(K)
    if is_numpy_namespace(xp) or K.shape[0] > _HOST_MAX_N:
        return solver(K, y, xp)
    K_host, y_host = to_numpy(K), to_numpy(y)
    out = solver(K_host, y_host, namespace(K_host))
    dev = device_of(K)
    return tuple(xp.asarray(o, device=dev) if is_array(o) else o for o in out)


def _overflow_error(caller, what, K, y, lam, xp, alpha=None):
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


def _check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha):
    """Finite or error: never ``converged=True`` with a NaN/inf objective, duality gap or coefficient."""
    values = [primal, dual, primal - dual, kkt]
    if not all(math.isfinite(v) for v in values) or not bool(xp.all(xp.isfinite(alpha))):
        raise _overflow_error(caller, "objective, duality gap or solution", K, y, lam, xp)


def _default_tol(dtype, xp):
    return 1e-10 if dtype == xp.float64 else 1e-4


# --------------------------------------------------------------------------- objectives


def _primal_from_g(alpha, g, y, loss, lam_sum, xp):
    """(λ/2)αᵀg + Σ l(g, y) with g = Kα (sum convention)."""
    reg = 0.5 * lam_sum * float(xp.sum(alpha * g))
    try:
        values = loss._value(g, y, xp)  # g, y validated by the caller
    except _losses.LossOverflowError:
        return math.inf  # the caller's finiteness check names the inputs (K, y, lam, alpha) that overflow
    return reg + float(xp.sum(values))


def _dual_from_g(alpha, g, y, loss, lam_sum, xp, slack=1e-9, on_overflow=None):
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


def _gap_rounding(alpha, g, absKa, y, loss, lam_sum, primal, dual, xp):
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


def _rounding_of_gap(K, alpha, g, y, loss, lam_sum, primal, dual, tol, xp):
    """:func:`_gap_rounding` with |K||α| bounded first by √Kᵢᵢ·Σⱼ√Kⱼⱼ|αⱼ| (|Kᵢⱼ| ≤ √(KᵢᵢKⱼⱼ) for a PSD K; O(n)),
    and computed from the support's rows (|S|·n) only where that bound does not already leave the gap within tol."""
    d = xp.linalg.diagonal(K)
    sq = xp.sqrt(xp.maximum(d if d.dtype == alpha.dtype else xp.astype(d, alpha.dtype), 0.0))
    e = _gap_rounding(alpha, g, sq * float(xp.sum(sq * xp.abs(alpha))), y, loss, lam_sum, primal, dual, xp)
    if primal - dual + e <= tol * max(1.0, primal):
        return e
    return _gap_rounding(alpha, g, _support_matvec(K, alpha, xp, True), y, loss, lam_sum, primal, dual, xp)


def _in_work_precision(y, K, xp):
    """y in the working precision of the exact QP solvers: float64 whatever K's dtype.

    A float32 K is solved in float64 arithmetic (``ntkref._boxqp._chunked_qp`` converts its working-set
    matrices exactly); the α returned is then rounded to K's dtype by :func:`_rounded_into_box`."""
    return y if y.dtype == xp.float64 else xp.astype(y, xp.float64)


def _rounded_into_box(alpha, lo, hi, dtype, xp):
    """α rounded to ``dtype`` and back, each entry rounded towards 0 where the nearest value leaves [lo, hi].

    lo ≤ 0 ≤ hi, so the neighbour towards 0 of a value past a bound lies inside: the rounded α is dual
    feasible, and its certificate (computed in α's precision) is that of the α returned."""
    a = xp.astype(alpha, dtype)
    back = xp.astype(a, alpha.dtype)
    a = xp.where((back > hi) | (back < lo), xp.nextafter(a, xp.zeros_like(a)), a)
    return xp.astype(a, alpha.dtype)


def _qp_bounds(y, loss, lam_sum, xp):
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


# --------------------------------------------------------------------------- logistic Newton


def _logistic_newton(K, y, loss, lam_sum, tol, max_iter, xp):
    """Damped Newton for the ℓ2-regularised logistic loss, in α.

    The Newton step in β-space restricted to span{Φ(xᵢ)} solves
    (λI + D K) Δ = −(λα + l′(Kα)), D = diag l″(Kα) (this is the primal Newton
    step Φᵀ(λI + ΦDΦᵀ)… pulled back to α); a backtracking Armijo search on the
    primal P(α + tΔ) (evaluated in O(n) from KΔ) makes it globally convergent.
    """
    n = K.shape[0]
    alpha = xp.zeros_like(y)
    g = xp.zeros_like(y)
    eye = _eye(n, K, xp)
    it = 0
    polished = False
    for it in range(1, max_iter + 1):
        l1 = loss._derivative(g, y, xp)
        primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
        done = primal - dual <= tol * max(1.0, primal)
        if done and polished:
            return alpha, g, it - 1, True
        r = lam_sum * alpha + l1
        e = xp.exp(-xp.abs(y * g))
        l2 = e / (1 + e) ** 2
        delta = _solve_vec(lam_sum * eye + l2[:, None] * K, -r, xp)
        Kd = K @ delta
        slope = float(xp.sum(r * Kd))  # = ∇_β P · Δβ
        if done:
            # one more full Newton step once the gap test passes: the gap bounds ‖β − β*‖ only
            # by √(2·gap/λ), while Newton's quadratic convergence makes this step exact to rounding
            polished = True
            if slope < 0:
                a_t, g_t = alpha + delta, g + Kd
                if _primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= primal:
                    alpha, g = a_t, g_t
            continue
        if not slope < 0:
            return alpha, g, it, False  # no descent left: rounding floor
        t = 1.0
        p0 = primal
        for _ in range(60):
            a_t, g_t = alpha + t * delta, g + t * Kd
            if _primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= p0 + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return alpha, g, it, False
        alpha, g = a_t, g_t
    l1 = loss._derivative(g, y, xp)
    primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
    dual = _dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
    return alpha, g, max_iter, primal - dual <= tol * max(1.0, primal)


# --------------------------------------------------------------------------- results


@dataclass
class KernelMachine:
    """An exact kernel-machine solution g(x) = Σᵢ αᵢ K(x, xᵢ) (no bias).

    Attributes
    ----------
    alpha_ : array, shape (n,)
        Coefficients, g = K α on the training points.
    loss : losses.Loss
    lam : float
        λ as given (in the ``reduction`` convention); ``lam_sum`` = λ in the sum convention (7).
    reduction : {"sum", "mean"}
    primal_objective, dual_objective, duality_gap : float
        P(α), D(α̃) and P − D ≥ P(α) − P*, in the ``reduction`` convention (mean = sum / n).
    kkt_residual : float
        max |α − α̂| where α̂ = −l′(Kα)/λ is the stationarity fixed point (smooth
        losses), or the natural residual ‖α − prox(α − τ∇q)‖∞ of the dual QP
        (τ = 1/max Qᵢᵢ); for the hard margin the primal infeasibility max(0, 1 − min yᵢgᵢ).
    n_iter : int
        Newton / active-set iterations (0 for closed forms).
    converged : bool
        Whether the duality gap met gap + gap_rounding ≤ tol·max(1, P).
    gap_rounding : float
        Estimate of the error of the computed gap from the rounding of g = Kα and of the sums
        (:func:`_gap_rounding`; same reduction as the gap).  It matters where |α| ~ 1/λ is large against g:
        there the computed P and D share the rounded g and their difference cancels.
    rkhs_norm_ : float
        √(αᵀKα) = ‖β‖.
    beta_error_bound : float
        √(2·(gap_sum + gap_rounding_sum)/λ_sum) ≥ ‖β − β*‖, so |g(x) − g*(x)| ≤ √K(x,x)·beta_error_bound.
    """

    alpha_: object
    loss: object
    lam: float
    lam_sum: float
    reduction: str
    primal_objective: float
    dual_objective: float
    duality_gap: float
    kkt_residual: float
    n_iter: int
    converged: bool
    rkhs_norm_: float
    train_output_: object = None
    gap_rounding: float = 0.0

    @property
    def beta_error_bound(self):
        if self.lam_sum == 0:
            return math.nan
        n = self.alpha_.shape[0]
        gap_sum = (max(self.duality_gap, 0.0) + self.gap_rounding) * (n if self.reduction == "mean" else 1)
        return math.sqrt(2 * gap_sum / self.lam_sum)

    def predict(self, K_test_train):
        """g(x) = Σᵢ αᵢ K(x, xᵢ) for the rows of ``K_test_train`` (shape (m, n)) → shape (m,).

        ``K_test_train`` must live where the machine was fitted (``alpha_``'s array library and device)."""
        return _predict(self.alpha_, K_test_train, "KernelMachine.predict", "alpha_ (the fitted coefficients)")

    def rkhs_norm(self):
        """‖β‖ = √(αᵀKα)."""
        return self.rkhs_norm_


def _kkt_residual(alpha, g, y, K, loss, lam_sum, xp):
    if loss.name in _QP_LOSSES:
        lo, hi, eps, shift = _qp_bounds(y, loss, lam_sum, xp)
        G = g + shift * alpha - y
        # the solver's scale-free step τ = 1/max Qᵢᵢ (τ = 1 would mix the units of α and g)
        tau = 1.0 / max(float(xp.max(xp.linalg.diagonal(K))) + shift, 1e-300)
        v = alpha - tau * G
        prox = xp.minimum(xp.maximum(_soft(v, tau * eps, xp) if eps else v, lo), hi)
        return float(xp.max(xp.abs(alpha - prox)))
    return float(xp.max(xp.abs(alpha + loss._derivative(g, y, xp) / lam_sum)))


# --------------------------------------------------------------------------- public API


def solve(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, fit_intercept=False):
    r"""Exact minimiser of seed 000 eq. (7) in kernel form, with its certificate.

    .. math::  \min_\beta \frac{\lambda}{2}\|\beta\|^2 + \sum_i l(\langle\beta, \Phi(x_i)\rangle, y_i),
               \quad \beta = \sum_i \alpha_i \Phi(x_i),\ g = K\alpha .

    Parameters
    ----------
    K : array, shape (n, n)
        Gram matrix K(xᵢ, xⱼ), symmetric PSD (see the module docstring for the tolerances).
    y : array, shape (n,)
        Targets; ±1 for ``hinge``, ``squared_hinge`` and ``logistic``.
    loss : str or losses.Loss
        One of ``losses.NAMES`` or a Loss (e.g. ``losses.get("epsilon_insensitive", epsilon=0.5)``).
    lam : float
        λ > 0 (λ = 0 only for ``squared``: kernel regression α = K⁻¹y, K must be nonsingular).
    reduction : {"sum", "mean"}
        "sum" is eq. (7); "mean" divides the loss sum by n (⇔ λ_sum = n·λ); the paper's
        experiments use "mean" (module docstring).
    tol : float, optional
        Relative duality-gap tolerance: stop when gap ≤ tol·max(1, P). Default 1e-10 (float64),
        1e-4 (float32).
    max_iter : int, optional
        Iteration cap of the Newton loop (default 200) / of each active-set solve (default max(1000, 10n)).
    check_psd : bool or {"auto", "cholesky", "lanczos"}
        Verify K ⪰ 0 (to −n·eps·‖K‖_F): "cholesky" certifies it (O(n³/3)); "lanczos" refuses K
        only with a proof of a negative eigenvalue, in 40 mat-vecs (O(40·n²)), and may accept an
        indefinite K (bound in ``ntkref._gram._check_psd``); True (default) = "auto": Cholesky for
        n ≤ 4096, Lanczos above; False skips it.
    fit_intercept : bool
        False (default): eq. (7), g = Kα, no bias (the paper's model).  True: the machine with an
        unregularised intercept, f = Kα + b (scikit-learn's ``SVC``/libsvm model), solved exactly by
        :func:`ntkref.kkt.fit_with_intercept`, which returns an ``InterceptMachine`` (a KernelMachine
        with ``intercept_``, ``intercept_interval_`` and its own duality gap and KKT residual).

    Returns
    -------
    KernelMachine
        with ``alpha_``, the duality gap, KKT residual, iterations, convergence flag.

    Notes
    -----
    Cost: squared O(n³) (one solve); QP losses O(n·|W|) per round plus O(|F|³) per active-set
    step (W working set, F free support vectors); logistic O(n³) per Newton step.
    Accuracy: the duality gap bounds the error (module docstring); active-set solutions are
    exact to rounding (relative gap ~1e-15 in float64, ~1e-6 in float32 at n ~ 100).

    float32: a float32 K is solved in float64 arithmetic (exact conversions: the working-set matrices for
    the QP losses, one n×n copy for logistic's Newton systems and the squared loss's closed form), α is rounded to float32 (towards 0 where
    rounding to nearest would leave the dual box), and the objectives, gap and ``converged`` are those of
    the float32 α returned, evaluated in float64.  Where |α| is large against g = Kα (small λ, singular K)
    the rounding alone can exceed tol: the result then says ``converged=False`` and the warning gives the
    gap of the float64 solution, which a float64 K returns.

    A Dask K: every loss, by ``ntkref._engines.dask._machines``: the QP losses exactly by active-set solves on
    working sets of gathered columns (the client holds n·|W|), logistic by Newton-CG with block
    mat-vecs, the squared loss by :func:`ntkref.krr.solve_cg`; the same duality-gap certificate; K
    checked (finite, symmetric) in one pass over its blocks and ``check_psd`` by the Lanczos test
    ("cholesky" is refused: it needs the whole K in one process).

    Where it runs: validation (symmetry, the PSD test), the squared loss (one solve), the
    logistic Newton loop and the active-set solver of ``hinge``, ``squared_hinge`` and
    ``epsilon_insensitive`` run in K's namespace on K's device, reading a few stacked scalars
    per iteration.  For a non-NumPy K with n ≤ 4096 the active-set solver is instead an explicit
    host step: K and y are copied to the host once, solved by the NumPy code, and
    ``alpha_``/``train_output_`` are copied back to K's device (the NumPy solve's result, bit
    for bit).
    """
    caller = "machines.solve"
    if not isinstance(fit_intercept, bool):
        raise InvalidParameterError(
            f"The 'fit_intercept' parameter of {caller} must be True or False. Got {fit_intercept!r} instead."
        )
    engine = dispatch.solve.lookup(K)
    if engine is not None:  # a Dask K, every loss: working sets of gathered columns / Newton-CG (ntkref/_engines/dask)
        if fit_intercept:
            raise InvalidParameterError(
                f"{caller}: fit_intercept=True is not supported on a Dask Gram; use K.compute() when it fits in "
                f"memory, or the bias-free model (fit_intercept=False)."
            )
        return engine(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter, check_psd=check_psd)
    if fit_intercept:
        from . import kkt  # (kkt imports this module)

        return kkt.fit_with_intercept(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter,
                                      check_psd=check_psd)
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, caller, psd=check_psd)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    if max_iter is not None:  # checked for every loss (the squared loss's closed form has no iterations)
        max_iter = check_int(max_iter, "max_iter", caller=caller, low=1)
    div = n if reduction == "mean" else 1

    if loss.name == "squared":
        if lam_sum == 0.0:
            delta = n * _eps(K.dtype, xp) * float(xp.linalg.vector_norm(K))
            if not _cholesky_ok(K, -delta, xp):
                raise InvalidParameterError(
                    f"With lam=0 (kernel regression) {caller} needs a nonsingular K, but its smallest eigenvalue is "
                    f"≤ n*eps*||K||_F = {delta:.3g}; use lam > 0."
                )
        # a float32 K: the closed form in float64 on an exact copy, α rounded to float32 and certified
        Kw = K if K.dtype == xp.float64 else xp.astype(K, xp.float64)
        yw = _in_work_precision(y, K, xp)
        try:
            alpha = _solve_vec(Kw + (lam_sum / 2) * _eye(n, Kw, xp) if lam_sum else Kw, yw, xp)
        except Exception as exc:  # an exactly singular system (LinAlgError of the namespace)
            raise InvalidParameterError(
                f"{caller}: K + (lam/2)·I is singular in float64 (lam = {lam!r}, max|K| = "
                f"{float(xp.max(xp.abs(Kw))):.3g}); use a larger lam."
            ) from exc
        its, gap_work = 0, None
        if K.dtype != xp.float64:
            if lam_sum > 0:  # the float64 solution's gap, for the warning if the rounding to float32 alone fails
                g = Kw @ alpha
                gap_work = (_primal_from_g(alpha, g, yw, loss, lam_sum, xp)
                            - _dual_from_g(alpha, g, yw, loss, lam_sum, xp))
            alpha = xp.astype(xp.astype(alpha, K.dtype), xp.float64)
        g = Kw @ alpha
        primal = _primal_from_g(alpha, g, yw, loss, lam_sum, xp)
        dual = _dual_from_g(alpha, g, yw, loss, lam_sum, xp) if lam_sum > 0 else 0.0
        kkt = _kkt_residual(alpha, g, yw, Kw, loss, lam_sum, xp) if lam_sum > 0 else float(xp.max(xp.abs(g - yw)))
        gap_rounding = 0.0
        conv = True  # λ = 0: kernel regression, no dual
        if lam_sum > 0:
            gap_rounding = _rounding_of_gap(Kw, alpha, g, yw, loss, lam_sum, primal, dual, tol, xp)
            conv = primal - dual + gap_rounding <= tol * max(1.0, primal)
        norm2 = float(xp.sum(alpha * g))
        alpha, g = xp.astype(alpha, K.dtype), xp.astype(g, K.dtype)
    elif loss.name in _QP_LOSSES:
        max_iter = max(1000, 10 * n) if max_iter is None else max_iter

        def qp(K, y_in, xp):
            y = _in_work_precision(y_in, K, xp)
            lo, hi, eps, shift = _qp_bounds(y, loss, lam_sum, xp)

            last = {}

            def gap_fn(a, g):  # the last evaluation is kept (with its arrays): the solver's final one is the result's
                if last.get("a") is not a or last.get("g") is not g:
                    last.update(a=a, g=g, pd=(_primal_from_g(a, g, y, loss, lam_sum, xp),
                                              _dual_from_g(a, g, y, loss, lam_sum, xp)))
                return last["pd"]

            alpha, g, its, conv = _chunked_qp(K, y, lo, hi, eps, shift, gap_fn, tol, max_iter, xp)
            primal, dual = gap_fn(alpha, g)
            gap_work = None
            if alpha.dtype != K.dtype:  # the certificate is that of the α returned, rounded to K's dtype
                gap_work = primal - dual
                alpha = _rounded_into_box(alpha, lo, hi, K.dtype, xp)
                g = _support_matvec(K, alpha, xp)
                primal, dual = gap_fn(alpha, g)
            e = _rounding_of_gap(K, alpha, g, y, loss, lam_sum, primal, dual, tol, xp)
            conv = conv and primal - dual + e <= tol * max(1.0, primal)
            kkt = _kkt_residual(alpha, g, y, K, loss, lam_sum, xp)
            return (xp.astype(alpha, K.dtype), xp.astype(g, K.dtype), its, conv, primal, dual, kkt,
                    float(xp.sum(alpha * g)), gap_work, e)

        alpha, g, its, conv, primal, dual, kkt, norm2, gap_work, gap_rounding = _on_host(qp, K, y)
    else:  # logistic
        max_iter = 200 if max_iter is None else max_iter
        # a float32 K: Newton in float64 on an exact copy, the α returned rounded to float32 and certified
        Kw = K if K.dtype == xp.float64 else xp.astype(K, xp.float64)
        yw = _in_work_precision(y, K, xp)
        alpha, g, its, conv = _logistic_newton(Kw, yw, loss, lam_sum, tol, max_iter, xp)
        g = Kw @ alpha  # afresh: Newton's g was updated step by step (g + t·KΔ) and drifts when |α| is large
        gap_work = None
        if K.dtype != xp.float64:
            a_dual = -loss._derivative(g, yw, xp) / lam_sum
            gap_work = (_primal_from_g(alpha, g, yw, loss, lam_sum, xp)
                        - _dual_from_g(a_dual, Kw @ a_dual, yw, loss, lam_sum, xp))
            alpha = xp.astype(xp.astype(alpha, K.dtype), xp.float64)
            g = Kw @ alpha
        a_dual = -loss._derivative(g, yw, xp) / lam_sum
        g_dual = Kw @ a_dual
        primal = _primal_from_g(alpha, g, yw, loss, lam_sum, xp)
        dual = _dual_from_g(a_dual, g_dual, yw, loss, lam_sum, xp)
        conv = conv and primal - dual <= tol * max(1.0, primal)
        if conv:
            # return the representer form α = −l′(g)/λ (stationarity), free of null(K) components when K is
            # singular, if it is certified too (its primal with the same dual); else the certified iterate
            a_rep = a_dual if K.dtype == xp.float64 else xp.astype(xp.astype(a_dual, K.dtype), xp.float64)
            g_rep = g_dual if K.dtype == xp.float64 else Kw @ a_rep
            primal_rep = _primal_from_g(a_rep, g_rep, yw, loss, lam_sum, xp)
            if primal_rep - dual <= tol * max(1.0, primal_rep):
                alpha, g, primal = a_rep, g_rep, primal_rep
        gap_rounding = _rounding_of_gap(Kw, alpha, g, yw, loss, lam_sum, primal, dual, tol, xp)
        conv = conv and primal - dual + gap_rounding <= tol * max(1.0, primal)
        kkt = _kkt_residual(alpha, g, yw, Kw, loss, lam_sum, xp)
        norm2 = float(xp.sum(alpha * g))
        alpha, g = xp.astype(alpha, K.dtype), xp.astype(g, K.dtype)
    _check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha)
    if not math.isfinite(gap_rounding):
        raise _overflow_error(caller, "rounding estimate of the duality gap", K, y, lam, xp)
    if not conv:
        rounding = ""
        if gap_work is not None and gap_work <= tol * max(1.0, primal):
            rounding = (f" That is the gap of α rounded to K's dtype {K.dtype}: the float64 solution it was rounded "
                        f"from has gap {gap_work:.3g}. Pass K in float64 for it, or a larger tol.")
        elif gap_rounding > tol * max(1.0, primal):
            rounding = (f" The rounding of g = Kα alone limits the certificate to about {gap_rounding:.3g} "
                        f"(max|α| = {float(xp.max(xp.abs(alpha))):.3g}, against 1/λ = {1 / lam_sum:.3g}): float64 "
                        f"cannot certify this solution to tol; the gap plus this estimate bounds P(α) − P*.")
        warnings.warn(
            f"{caller}: the {loss.name} solver stopped with duality gap {primal - dual:.3g} (+ its rounding "
            f"estimate {gap_rounding:.3g}) > tol·max(1, P) = {tol * max(1.0, primal):.3g} after {its} "
            f"iterations.{rounding}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=(primal - dual) / div,
        kkt_residual=kkt, n_iter=its, converged=bool(conv),
        rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g, gap_rounding=gap_rounding / div,
    )


def fit(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, fit_intercept=False):
    r"""Coefficients α (shape (n,), g = Kα) of the exact minimiser of seed 000 eq. (7).

    Same as ``solve(...).alpha_``; see :func:`solve` for the parameters, the
    conventions (sum/mean, no bias, squared loss without ½) and the accuracy.
    With ``fit_intercept=True`` it returns the pair ``(alpha, b)`` of the machine f = Kα + b.
    """
    m = solve(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter, check_psd=check_psd,
              fit_intercept=fit_intercept)
    return (m.alpha_, m.intercept_) if fit_intercept else m.alpha_


def hard_margin_svm(K, y, *, tol=None, max_iter=None, C_max=None, check_psd=True):
    r"""Hard-margin SVM: min ½‖β‖² s.t. yᵢ g(xᵢ) ≥ 1 — the λ → 0 limit of the hinge machine (Table 1).

    Dual: max yᵀα − ½αᵀKα s.t. yᵢαᵢ ≥ 0.  Solved as soft-margin SVMs with C = 1/λ
    growing tenfold (warm-started) until no coefficient sits at its upper bound C:
    that soft-margin solution satisfies the hard-margin KKT conditions exactly, so
    soft margin = hard margin for every λ ≤ 1/max yᵢαᵢ.

    Raises
    ------
    InvalidParameterError
        If the data are not separable in the RKHS with geometric margin ≥ 1/√C_max
        (C_max default 1e12/mean Kᵢᵢ): if a hard-margin β* existed, ‖β*‖² = Σ yᵢαᵢ* ≥ max yᵢαᵢ*,
        so a solution needing C > C_max has margin 1/‖β*‖ < 1/√C_max.

    Returns
    -------
    KernelMachine
        ``lam = 0``; primal ½αᵀKα, dual yᵀα − ½αᵀKα, ``kkt_residual`` = max(0, 1 − min yᵢgᵢ).

    Notes
    -----
    Validation runs on K's device; so does the soft-margin path (active-set solves), except for a
    non-NumPy K with n ≤ 4096, an explicit host step as in :func:`solve`.  A Dask K takes the same path with
    working sets of gathered columns (as :func:`solve` on Dask; ``check_psd`` the Lanczos test).
    """
    caller = "machines.hard_margin_svm"
    engine = dispatch.hard_margin_svm.lookup(K)
    if engine is not None:  # a Dask K: the same path with working sets of gathered columns (ntkref/_engines/dask)
        return engine(K, y, tol=tol, max_iter=max_iter, C_max=C_max, check_psd=check_psd)
    loss = _losses.get("hinge")
    K, y, loss, _, _, xp = _prepare(K, y, loss, 1.0, "sum", caller, psd=check_psd)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    max_iter = max(1000, 10 * n) if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
    scale = float(xp.mean(xp.linalg.diagonal(K)))
    if scale <= 0:
        raise InvalidParameterError(f"The 'K' parameter of {caller} is zero on the diagonal: no point can be separated.")
    C_max = 1e12 / scale if C_max is None else check_real(C_max, "C_max", caller=caller, low=0.0, closed="right")

    def soft_margin_path(K, y_in, xp):
        y = _in_work_precision(y_in, K, xp)

        def solve_c(lo, hi, gap_fn, alpha0):
            alpha, g, its, _ = _chunked_qp(K, y, lo, hi, 0.0, 0.0, gap_fn, tol, max_iter, xp, alpha0=alpha0)
            return alpha, g, its

        alpha, g, lo, hi, its_total = _soft_margin_path(solve_c, y, scale, C_max, caller, xp)
        if alpha.dtype != K.dtype:  # the certificate is that of the α returned, rounded to K's dtype
            alpha = _rounded_into_box(alpha, lo, hi, K.dtype, xp)
            g = _support_matvec(K, alpha, xp)
        norm2 = float(xp.sum(alpha * g))
        dual = float(xp.sum(y * alpha)) - 0.5 * norm2
        infeas = max(0.0, 1.0 - float(xp.min(y * g)))
        e = _hard_margin_rounding(alpha, _support_matvec(K, alpha, xp, True), norm2, dual, xp)
        return xp.astype(alpha, K.dtype), xp.astype(g, K.dtype), its_total, norm2, dual, infeas, e

    alpha, g, its_total, norm2, dual, infeas, gap_rounding = _on_host(soft_margin_path, K, y)
    primal = 0.5 * norm2
    _check_finite_solution(caller, K, y, 0.0, xp, primal, dual, infeas, alpha)
    conv = primal - dual + gap_rounding <= tol * max(1.0, primal) and infeas <= math.sqrt(tol)
    if not conv:
        warnings.warn(f"{caller}: gap {primal - dual:.3g} (+ its rounding estimate {gap_rounding:.3g}), margin "
                      f"violation {infeas:.3g}.", ConvergenceWarning, stacklevel=2)
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=0.0, lam_sum=0.0, reduction="sum", primal_objective=primal,
        dual_objective=dual, duality_gap=primal - dual, kkt_residual=infeas, n_iter=its_total,
        converged=bool(conv), rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g, gap_rounding=gap_rounding,
    )


def _hard_margin_rounding(alpha, absKa, norm2, dual, xp):
    """The hard-margin gap αᵀg − yᵀα has ∂/∂gᵢ = αᵢ: its rounding estimate Σ|αᵢ|·eps·(|K||α|)ᵢ plus that of the
    sums (:func:`_gap_rounding`'s model)."""
    n = alpha.shape[0]
    eps = float(xp.finfo(alpha.dtype).eps)
    return eps * float(xp.sum(xp.abs(alpha) * absKa)) + math.sqrt(n) * eps * (0.5 * abs(norm2) + abs(dual))


def _soft_margin_path(solve_c, y, scale, C_max, caller, xp):
    """The soft-margin path of :func:`hard_margin_svm` (dense and Dask): C = 1/λ from min(1/mean Kᵢᵢ, C_max),
    tenfold, each SVM by ``solve_c(lo, hi, gap_fn, alpha0)`` → (α, g, iterations) warm-started from the last α,
    until no yᵢαᵢ sits at C.  Returns (α, g, lo, hi, iterations); data still at the bound at C_max are refused."""
    loss = _losses.get("hinge")
    C, alpha, its_total = min(1.0 / scale, C_max), None, 0
    while True:
        lam = 1.0 / C
        lo, hi, _, _ = _qp_bounds(y, loss, lam, xp)

        def gap_fn(a, g, lam=lam):
            return _primal_from_g(a, g, y, loss, lam, xp), _dual_from_g(a, g, y, loss, lam, xp)

        alpha, g, its = solve_c(lo, hi, gap_fn, alpha)
        its_total += its
        if not bool(xp.any(y * alpha >= C * (1 - 1e-9))):
            return alpha, g, lo, hi, its_total
        if C >= C_max:
            raise InvalidParameterError(
                f"The data given to {caller} are not separable in the RKHS of K with geometric margin "
                f">= 1/sqrt(C_max) = {1 / math.sqrt(C_max):.3g} (soft-margin SVM with C = {C:.3g} still has "
                "coefficients at the bound C). Use a soft margin (machines.fit(K, y, 'hinge', lam))."
            )
        C = min(10.0 * C, C_max)
        if not bool(xp.any(alpha != 0)):
            alpha = None


def predict(alpha, K_test_train):
    r"""g(x) = Σᵢ αᵢ K(x, xᵢ) for each row x of ``K_test_train`` (shape (m, n)) → shape (m,).

    A Dask ``K_test_train`` gives a lazy Dask result (per block, summed over column chunks)."""
    return _predict(alpha, K_test_train, "machines.predict", "alpha")


def _predict(alpha, K_test_train, caller, alpha_name):
    engine = dispatch.predict.lookup(K_test_train)
    if engine is not None:  # a Dask K_test_train: lazy, per block (ntkref/_engines/dask)
        return engine(alpha, K_test_train)
    K_test_train = check_array(K_test_train, "K_test_train", caller=caller, ndim=2)
    xp = namespace(K_test_train)
    if is_array(alpha) and not is_numpy_namespace(namespace(alpha)) and namespace(alpha) is not xp:
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} comes from another array library than {alpha_name}: "
            f"pass it in {alpha_name}'s namespace (no implicit conversions)."
        )
    if is_array(alpha) and namespace(alpha) is xp and device_of(alpha) != device_of(K_test_train):
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} is on device {device_of(K_test_train)!r} but {alpha_name} "
            f"is on {device_of(alpha)!r}: move one of them explicitly (no implicit copies between devices)."
        )
    alpha = check_array(alpha, alpha_name.split()[0], caller=caller, ndim=1, xp=xp, like=K_test_train)
    if K_test_train.shape[1] != alpha.shape[0]:
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} must have {alpha.shape[0]} columns (one per "
            f"training point); got shape {tuple(K_test_train.shape)}."
        )
    return K_test_train @ xp.astype(alpha, K_test_train.dtype)


def rkhs_norm(alpha, K, *, check_psd=False):
    r"""‖β‖_H = √(αᵀKα) for β = Σ αᵢ Φ(xᵢ) (negative rounding clamped to 0).

    Computed scale-free (α and K divided by powers of two first), so it is finite and exact to rounding for
    every finite α and K, e.g. α ~ 1e300 where αᵀKα itself overflows; float32 inputs in float64 arithmetic
    (the value of the float32 numbers given, as a float32 solve's ``rkhs_norm_``)."""
    K = _check_gram(K, "machines.rkhs_norm", psd=check_psd)
    xp = namespace(K)
    alpha = check_array(alpha, "alpha", caller="machines.rkhs_norm", xp=xp, shape=(K.shape[0],), like=K)
    alpha, K = _float64(xp, alpha, K)  # float32 inputs evaluated in float64, as the objectives
    # scale-free: α = 2^a·ᾱ, K = 4^k·K̄ (powers of two: exact, so results at ordinary scales are unchanged bit
    # for bit) and ‖β‖ = 2^(a+k)·√(ᾱᵀK̄ᾱ), finite for α ~ 1e300 or K ~ 1e300 (αᵀKα itself would overflow)
    a_max, k_max = _read(xp, xp.max(xp.abs(alpha)), xp.max(xp.abs(K)))
    if a_max == 0.0 or k_max == 0.0:
        return 0.0
    ea, ek = _pow2_exponent(a_max), _pow2_exponent(k_max) // 2
    a_bar, K_bar = alpha * 2.0 ** -ea, K * 4.0 ** -ek
    return math.ldexp(math.sqrt(max(float(a_bar @ (K_bar @ a_bar)), 0.0)), ea + ek)


def _pow2_exponent(m):
    """e with 2^e ≈ m (frexp's exponent, kept in ±1000 so that 2^-e is a finite float)."""
    return max(min(math.frexp(m)[1], 1000), -1000)


def _float64(xp, *arrays):
    """The arrays in float64 (exact conversions): the objectives of float32 inputs are evaluated in float64,
    so that they are the values of the float32 numbers given, as the solvers' certificates are."""
    return tuple(a if a.dtype == xp.float64 else xp.astype(a, xp.float64) for a in arrays)


def objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Primal value P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (``reduction="mean"``: loss term / n).

    This is eq. (7) at β = Σ αᵢ Φ(xᵢ).  K is checked square/symmetric but not PSD.  Finite or error: a value
    beyond the float range (e.g. α or y ~ 1e300) is an InvalidParameterError naming the input at fault.
    """
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, "machines.objective", psd=False)
    alpha = check_array(alpha, "alpha", caller="machines.objective", xp=xp, shape=(K.shape[0],), like=K)
    K, y, alpha = _float64(xp, K, y, alpha)
    overflow = lambda: _overflow_error("machines.objective", "objective", K, y, lam, xp, alpha=alpha)  # noqa: E731
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is reported below, naming the input
            val = _primal_from_g(alpha, K @ alpha, y, loss, lam_sum, xp)
    except InvalidParameterError as exc:  # the loss's own overflow check: it names z = Kα, not an input
        raise overflow() from exc
    if not math.isfinite(val):  # finite inputs, overflowing products: an error naming the input at fault
        raise overflow()
    return val / (K.shape[0] if reduction == "mean" else 1)


def dual_objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Fenchel dual D(α) = −Σ lᵢ*(−λαᵢ) − (λ/2)αᵀKα (−inf outside the dual domain).

    Weak duality: D(α′) ≤ P(α) for all α, α′ (K PSD); equality at the optimum.  A dual-feasible α whose
    value overflows (e.g. the squared loss at α ~ 1e300) is an InvalidParameterError naming the input.
    """
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, "machines.dual_objective", psd=False,
                                            allow_zero=False)
    alpha = check_array(alpha, "alpha", caller="machines.dual_objective", xp=xp, shape=(K.shape[0],), like=K)
    K, y, alpha = _float64(xp, K, y, alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is an error naming the input (on_overflow)
        val = _dual_from_g(alpha, K @ alpha, y, loss, lam_sum, xp, on_overflow=lambda: _overflow_error(
            "machines.dual_objective", "dual objective", K, y, lam, xp, alpha=alpha))
    return val / (K.shape[0] if reduction == "mean" else 1)


def duality_gap(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""P(α) − D(α̃) ≥ P(α) − P*: α̃ = α for the nonsmooth losses; for the smooth ones the better (larger) of
    D(α) and D(−l′(Kα)/λ), both lower bounds on P* by weak duality (α itself can be dual-feasible yet a poor
    dual point, e.g. an optimal α with a null(K) component)."""
    P = objective(alpha, K, y, loss, lam, reduction=reduction)
    D = dual_objective(alpha, K, y, loss, lam, reduction=reduction)
    loss_obj = _get_loss(loss, "machines.duality_gap")
    if loss_obj.smoothness is not None:
        K = K.K if isinstance(K, CheckedGram) else K
        xp = namespace(K)
        Kx = check_array(K, "K", xp=xp)
        n = Kx.shape[0]
        lam_sum = lam * n if reduction == "mean" else lam
        a = check_array(alpha, "alpha", xp=xp, like=Kx)
        Kx, yy, a = _float64(xp, Kx, check_array(y, "y", xp=xp, like=Kx), a)
        ad = -loss_obj.derivative(Kx @ a, yy) / lam_sum
        D = max(D, dual_objective(ad, K, y, loss, lam, reduction=reduction))
    return P - D
