r"""Checkers for kernel machines, training dynamics and certificates (re-exported by :mod:`ntkref.testing`).

Modes, reports and JSON: as for :func:`ntkref.testing.check_kernel` (``mode="assert"`` / ``"measure"``).
Failure kinds here: ``"exception"`` (the candidate raised), ``"shape"`` (wrong shape, or invalid values such as
negative radii), ``"non_finite"`` (inf/NaN in α, g or the radii); for fits by cause (:func:`ntkref.kkt.diagnose`):
``"convention"`` (a named slip makes the candidate optimal), ``"precision"`` (the float32-K limit, or within
10·n·eps), ``"formula"`` (anything else, no hint); for dynamics ``"convention"`` / ``"precision"`` (an error above
the verdict tolerance, above / below ``convention_threshold``); ``"soundness"`` (certificates: a
counterexample inside a claimed radius, or a positive radius where g(x₀) = 0).
"""
from __future__ import annotations

import math
import warnings

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design
from hypothesis import strategies as st

from .. import certify, dynamics, kernels, losses, machines
from .. import kkt as _kkt
from .._lib.backend import to_numpy
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ._engine import check_candidate, check_dtype, check_mode, drive, finish
from ._kernel import host, mover
from ._report import Mismatch
from ._strategies import machine_problems

__all__ = ["check_fit", "check_dynamics", "check_certificate", "fit_convention_hint"]

DYNAMICS_BOUNDS = {"squared": 1e-13, "hinge": 1e-13, "epsilon_insensitive": 1e-13, "logistic": 1e-8,
                   "squared_hinge": 1e-8}
"""ntkref.dynamics' accuracy in check_dynamics' scaled measure: exact (closed form / event-driven) for squared, hinge
and ε-insensitive (1e-13), the adaptive integrator's ~10·rtol for logistic and squared hinge (1e-8)."""


def _scaled_gap(a, b, floor=1.0):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(floor, float(np.max(np.abs(b))) if b.size else 0.0)
    with np.errstate(all="ignore"):
        err = np.abs(a - b) / scale
    return np.where(np.isfinite(err), err, np.inf)


def _call_failure(rec, inputs, tol, exc):
    m = Mismatch(inputs, (), math.nan, math.nan, math.inf, tol, "call",
                 f"candidate raised {type(exc).__name__}: {exc}", kind="exception")
    rec.failure(m)
    return [m], math.inf


def _threshold(value, default, caller):
    return default if value is None else check_real(value, "convention_threshold", caller=caller, low=0.0)


# ---------------------------------------------------------------------------------------------
# kernel machines
# ---------------------------------------------------------------------------------------------
_PRECISION_MULTIPLE = 10  # an unexplained objective error within 10·n·eps of the working precision (a sum of n
# rounded loss terms: what a solver computing in that precision can reach) is "precision"; above it, "formula"


def _solve_quiet(Kx, yx, loss_obj, lam, reduction, fit_intercept):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return machines.solve(Kx, yx, loss_obj, lam, reduction=reduction, fit_intercept=fit_intercept)


def _fit_diagnosis(K, y, alpha, b, loss_obj, lam, reduction, fit_intercept, tol, eps):
    """(kind, hint, slips) of a failing fit (host float64 K, y, alpha; b or None), by cause, from the candidate's
    own duality gaps (:func:`ntkref.kkt.diagnose` at the verdict's tolerance): a usual slip that the candidate
    provably solves — its relative duality gap under the slipped problem (on K, or on K rounded to float32) is at
    most ``tol`` — is ``"convention"``; the asked problem on float32-rounded K is ``"precision"``, as is an error
    within 10·n·eps; anything else ``"formula"`` with no hint.  (A gap ≤ tol proves P − P* ≤ tol·max(1, |P|) by
    weak duality, so a slip is named only when it explains the candidate.)"""
    put = mover(None)
    d = _kkt.diagnose(put(alpha), put(K), put(y), loss_obj, lam, intercept=b if fit_intercept else None,
                      reduction=reduction, tol=tol)
    if d.optimal:  # its gap certifies the asked problem to tol: the excess is the rounding of the two evaluations
        return "precision", "", ()
    if d.kind == "formula" and d.relative_gap <= _PRECISION_MULTIPLE * K.shape[0] * eps:
        return "precision", "", ()
    hint = d.hint.replace("check it on a Gram exact in float32", "check it with dtype='float32' (K exact in float32)")
    return d.kind, hint, d.slips


def fit_convention_hint(K, y, alpha, loss, lam, *, reduction="sum", tol=1e-8, loss_options=None,
                        fit_intercept=False, intercept=None):
    """Which usual convention slip explains a candidate α (and b), if any (host NumPy inputs).

    Tries λ′ ∈ {2λ, λ/2, 1/λ, nλ, λ/n} — named for the SVM and logistic losses by scikit-learn's C = 1/λ (sum
    convention): C = 1/(2λ), 2/λ, λ, … — and the intercept missing (``fit_intercept=True``) or added
    (``fit_intercept=False``), each on K and on K rounded to float32 (libsvm's kernel cache), and says which one
    the candidate provably solves: its relative duality gap under that problem at most ``tol``
    (:func:`ntkref.kkt.diagnose`; weak duality then bounds its objective excess there), e.g. ``"... lam' = 2*lam ..."`` — the ½ convention of the squared loss — or ``"... C = 1/(2*lam)
    ..."``.  Also names the exact solution of the asked problem for K rounded to float32 (a precision limit, not a
    slip).  Returns ``""`` if nothing explains the candidate (no hint rather than a wrong one).

    ``intercept``: the candidate's b with ``fit_intercept=True`` (required then).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import machines
    >>> from ntkref.testing import fit_convention_hint
    >>> K = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]]); y = np.array([1.0, -1.0, 1.0])
    >>> a = machines.fit(K, y, "squared", 0.2)           # solved with 2λ: the ½ convention of the squared loss
    >>> "lam' = 2*lam" in fit_convention_hint(K, y, a, "squared", 0.1)
    True
    >>> fit_convention_hint(K, y, machines.fit(K, y, "squared", 0.1), "squared", 0.1)
    ''
    """
    caller = "fit_convention_hint"
    loss_obj = losses.get(loss, **(loss_options or {})) if isinstance(loss, str) else loss
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    tol = check_real(tol, "tol", caller=caller, low=0.0)
    reduction = check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    if not isinstance(fit_intercept, bool):
        raise InvalidParameterError(f"The 'fit_intercept' parameter of {caller} must be True or False. Got "
                                    f"{fit_intercept!r} instead.")
    b = None
    if fit_intercept:
        if intercept is None:
            raise InvalidParameterError(f"The 'intercept' parameter of {caller} is required with fit_intercept=True "
                                        "(the candidate's b).")
        b = check_real(float(np.asarray(to_numpy(intercept), dtype=np.float64).reshape(-1)[0])
                       if np.ndim(to_numpy(intercept)) else intercept, "intercept", caller=caller)
    K = check_array(np.asarray(to_numpy(K)), "K", caller=caller, ndim=2, xp=np, dtype=np.float64)
    n = K.shape[0]
    if n == 0 or K.shape[1] != n:
        raise InvalidParameterError(f"The 'K' parameter of {caller} must be a non-empty square matrix; got shape "
                                    f"{K.shape}.")
    y, alpha = (check_array(np.asarray(to_numpy(a)), name, caller=caller, xp=np, dtype=np.float64, shape=(n,))
                for a, name in ((y, "y"), (alpha, "alpha")))
    kind, hint, _ = _fit_diagnosis(K, y, alpha, b, loss_obj, lam, reduction, fit_intercept, tol,
                                   float(np.finfo(np.float64).eps))
    return hint if kind in ("convention", "precision") else ""


def _round32(K):
    """K + τI rounded to float32 (as float64), τ = n·eps₃₂·max|K|: PSD whenever K is (Weyl: the rounding error E
    has ‖E‖₂ ≤ n·max|Eᵢⱼ| ≤ n·(eps₃₂/2)·max|K + τI| < τ), so the float32 problem has a convex reference."""
    n = K.shape[0]
    tau = n * float(np.finfo(np.float32).eps) * float(np.max(np.abs(K))) if K.size else 0.0
    return (K + tau * np.eye(n)).astype(np.float32).astype(np.float64)


def _two_classes(problem):
    """A problem whose ±1 labels hold both classes (an intercept model needs them: logistic has no minimiser
    otherwise, SVC refuses one class): a single-class y gets its last label flipped."""
    K, y = problem
    y = np.array(y, dtype=np.float64)
    if y.size >= 2 and np.all(y == y[0]):
        y[-1] = -y[0]
    return K, y


def _as_pair(out, n):
    """(alpha, b) from a candidate with an intercept: a pair (alpha, b) (b a number or a length-1 array)."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"with fit_intercept=True the candidate must return a pair (alpha, b); got "
                        f"{type(out).__name__}")
    alpha = host(out[0])
    b = np.asarray(to_numpy(out[1]) if not isinstance(out[1], (int, float)) else out[1], dtype=np.float64)
    if b.size != 1:
        raise TypeError(f"the intercept b must be one number; got shape {b.shape}")
    return alpha, float(b.reshape(-1)[0])


def check_fit(candidate, *, loss="hinge", lam=0.1, reduction="sum", loss_options=None, objective_tol=None,
              fit_intercept=False, dtype="float64", max_examples=50, problems=None, backend=None, seed=0,
              shrink=True, raise_on_failure=True, mode="assert", convention_threshold=None):
    r"""Check a kernel-machine solver ``candidate(K, y, lam) -> alpha`` (``fit_intercept=True``: ``-> (alpha, b)``)
    against ``ntkref.machines.solve``.

    The minimiser of seed 000 eq. (7), P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (``"mean"``:
    the loss sum / n) — with ``fit_intercept=True`` the machine f = Kα + b with an unregularised intercept,
    P(α, b) = (λ/2)αᵀKα + Σ l((Kα)ᵢ + b, yᵢ) (:mod:`ntkref.kkt`; scikit-learn's ``SVC(kernel="precomputed",
    C=1/λ)``) — is unique in β (λ-strong convexity) but α need not be (singular K), nor b (no free support
    vector), so the candidate is judged by its objective:

    .. math::  e = \frac{P(\alpha_{\rm cand}[, b_{\rm cand}]) - P^{\rm ref}}{\max(1, |P^{\rm ref}|)} \le
               \max(\text{objective\_tol}, g_{\rm ref}),

    g_ref = the reference's relative duality gap plus its rounding estimate (``machines.solve(...)``'s
    certificate P^ref − P* ≤ gap: ntkref's own bound, used in the verdict when larger than the user's).  This bounds
    the function error: ‖β_cand − β*‖² ≤ 2(P_cand − P*)/λ (strong convexity), so
    |g_cand(x) − g*(x)| ≤ √K(x,x)·√(2 e max(1,|P*|)/λ).  ``max_error`` also records
    max |f_cand − f_ref| / max(1, max|f_ref|) on the training points (f = Kα [+ b]).

    Kinds by cause (the hint says which): ``"convention"`` — a usual slip that the candidate provably solves
    (its own duality gap under the slipped problem, :func:`ntkref.kkt.diagnose`, meets the same tolerance): λ′ = 2λ,
    λ/2, 1/λ, nλ, λ/n (for the SVM and logistic losses named as scikit-learn's C: C = 1/(2λ), 2/λ, λ, … where
    C = 1/λ belongs), the intercept missing or added, on K or on K rounded to float32; ``"precision"`` — the exact
    solution of the asked problem for K rounded to float32 (libsvm's single-precision kernel cache), or an error
    within 10·n·eps (eps of ``dtype``); ``"formula"`` — anything else (an inexact or wrong solver), without a hint.

    scikit-learn's ``SVC``: libsvm caches K in float32, so at a tight ``tol`` it solves the problem for fl32(K)
    (relative objective error up to ~3e-6 on the default problems: kind ``"precision"`` with that hint).
    ``dtype="float32"`` checks it below that limit: K and y are rounded to float32 and given to the candidate as
    float32 arrays, and the reference solves that problem exactly (the correctly mapped
    ``SVC(kernel="precomputed", C=1/lam, tol=1e-12)`` then agrees to ~1e-12; tests/test_oracle_fits.py).

    Parameters
    ----------
    candidate : callable (K, y, lam) -> alpha (shape (n,)), or -> (alpha, b) with ``fit_intercept=True``
    loss, lam, reduction, loss_options : as in ``ntkref.machines.solve`` / ``ntkref.losses.get``
    objective_tol : float, optional
        Default 1e-8 (``dtype="float32"``: 1e-5, a float32 solver's n·eps).
    fit_intercept : bool
        Check the machine with an unregularised intercept (``ntkref.kkt.fit_with_intercept``).
    dtype : {"float64", "float32"}
        The candidate's inputs (float32: rounded, and the reference solves the rounded problem).
    problems : hypothesis strategy of (K, y), optional
        Default :func:`ntkref.testing.machine_problems` (regression labels for the regression losses; with an
        intercept and ±1 labels, both classes present).
    backend : str, optional
        Namespace of the reference computation.
    max_examples, seed, shrink, raise_on_failure, mode : as in :func:`ntkref.testing.check_kernel`.
    convention_threshold : float, optional
        Accepted for compatibility and ignored: kinds are decided by cause, not by size.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.testing import check_fit
    >>> def krr(K, y, lam):      # (y − z)² without ½: α = (K + (λ/2) I)⁻¹ y (docs/conventions.md)
    ...     return np.linalg.solve(K + lam / 2 * np.eye(len(y)), y)
    >>> check_fit(krr, loss="squared", lam=0.3, max_examples=5).passed
    True
    >>> def krr_intercept(K, y, lam):   # [[K + (λ/2)I, 1], [1ᵀ, 0]]·[α; b] = [y; 0]
    ...     n = len(y); A = np.block([[K + lam / 2 * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    ...     s = np.linalg.solve(A, np.append(y, 0.0)); return s[:n], s[n]
    >>> check_fit(krr_intercept, loss="squared", lam=0.3, fit_intercept=True, max_examples=5).passed
    True
    """
    check_candidate(candidate, "check_fit")
    loss_obj = losses.get(loss, **(loss_options or {}))
    dtype = check_dtype(dtype, "check_fit")
    if not isinstance(fit_intercept, bool):
        raise InvalidParameterError(f"The 'fit_intercept' parameter of check_fit must be True or False. Got "
                                    f"{fit_intercept!r} instead.")
    objective_tol = (1e-8 if dtype == "float64" else 1e-5) if objective_tol is None else check_real(
        objective_tol, "objective_tol", caller="check_fit", low=0.0)
    lam = check_real(lam, "lam", caller="check_fit", low=0.0, closed="neither")
    mode = check_mode(mode, "check_fit")
    _threshold(convention_threshold, 1e-3, "check_fit")  # validated, no longer used (kinds by cause)
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    if problems is None:
        problems = machine_problems(kind="binary" if loss_obj.classification else "regression")
        if fit_intercept and loss_obj.classification:
            problems = problems.map(_two_classes)
    pinned = {"slips": None}

    def evaluate(problem, rec):
        K, y = (np.asarray(a, dtype=np.float64) for a in problem)
        if dtype == "float32":  # the problem the candidate sees, exactly, in float64 (a PSD one: _round32)
            K, y = _round32(K), y.astype(np.float32).astype(np.float64)
        put = mover(backend)
        Kx, yx = put(K), put(y)
        sol = _solve_quiet(Kx, yx, loss_obj, lam, reduction, fit_intercept)
        alpha_ref = host(sol.alpha_)
        b_ref = float(sol.intercept_) if fit_intercept else 0.0
        p_ref = float(sol.primal_objective)
        bound = (max(float(sol.duality_gap), 0.0) + sol.gap_rounding) / max(1.0, abs(p_ref))  # (+ its rounding)
        if not math.isfinite(bound):  # an uncertified reference never widens the verdict to "anything passes"
            bound = 0.0
        tol = max(objective_tol, bound)
        src = "ntkref" if bound > objective_tol else "user"
        inputs = {"K": K, "y": y, "lam": lam}
        cast = (lambda a: a.astype(np.float32)) if dtype == "float32" else (lambda a: a.copy())
        try:
            out = candidate(cast(K), cast(y), lam)
            if fit_intercept:
                alpha, b = _as_pair(out, K.shape[0])
            else:
                alpha, b = host(out), None
        except Exception as exc:
            return _call_failure(rec, inputs, tol, exc)
        if alpha.shape != (K.shape[0],):
            m = Mismatch(inputs, (), math.nan, p_ref, math.inf, tol, "shape",
                         f"candidate returned shape {alpha.shape}, expected {(K.shape[0],)}", kind="shape")
            rec.failure(m)
            return [m], math.inf
        alpha = alpha.astype(np.float64)
        rec.values(1, src == "ntkref")
        if not np.all(np.isfinite(alpha)) or (b is not None and not math.isfinite(b)):
            bad = np.nonzero(~np.isfinite(alpha))[0]
            for i in bad:
                rec.bad_value((i,), float(alpha[i]))
            where = f"coefficients at {bad.tolist()}" if bad.size else f"intercept b = {b!r}"
            first = (int(bad[0]),) if bad.size else ("b",)
            m = Mismatch(inputs | {"alpha_candidate": alpha}, first, float(alpha[bad[0]]) if bad.size else b, p_ref,
                         math.inf, tol, "alpha" if bad.size else "intercept",
                         f"candidate returned non-finite {where}", kind="non_finite", tolerance_source=src)
            rec.failure(m, max(len(bad), 1))
            return [m], math.inf
        p_c = _kkt._objective(put(alpha), Kx, yx, loss_obj, lam, b, reduction)
        err = (p_c - p_ref) / max(1.0, abs(p_ref))
        f_c, f_ref = K @ alpha + (b or 0.0), K @ alpha_ref + b_ref
        g_err = _scaled_gap(f_c, f_ref)
        rec.error("objective", err)
        rec.error("outputs", float(np.max(g_err)) if g_err.size else 0.0)
        if not err <= tol:
            kind, hint, slips = _fit_diagnosis(K, y, alpha, b, loss_obj, lam, reduction, fit_intercept, tol, eps)
            if pinned["slips"] is not None and rec.source == "shrink" and (kind, slips) != pinned["slips"]:
                return [], 0.0  # a shrink step must keep the cause first found
            i = int(np.argmax(g_err))
            extra = {"alpha_candidate": alpha, "alpha_reference": alpha_ref}
            if fit_intercept:
                extra |= {"b_candidate": b, "b_reference": b_ref}
            m = Mismatch(inputs | extra, ("objective",), p_c, p_ref, err, tol, "objective",
                         f"largest output gap at training point {i}: f_cand = {float(f_c[i])!r}, "
                         f"f_ref = {float(f_ref[i])!r}" + (f"; b_cand = {b!r}, b_ref = {b_ref!r} (every b in "
                                                           f"{tuple(sol.intercept_interval_)} is optimal with "
                                                           "alpha_ref)" if fit_intercept else ""),
                         kind=kind, tolerance_source=src, hint=hint)
            m.diagnosis = (kind, slips)
            rec.failure(m)
            return [m], err / tol if tol > 0 else math.inf
        return [], err / tol if tol > 0 else 0.0

    def pin(diagnosis):
        pinned["slips"] = diagnosis

    desc = (f"check_fit({getattr(candidate, '__qualname__', candidate)}, loss={loss_obj.name!r}, lam={lam!r}, "
            f"reduction={reduction!r}, fit_intercept={fit_intercept!r}, dtype={dtype!r}, "
            f"objective_tol={objective_tol:g})")
    report = drive("check_fit", strategy=problems, evaluate=evaluate, battery_cases=[], order=("K", "y"), mode=mode,
                   max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
                   tolerance={"user": {"objective": objective_tol}, "ntkref_bound": None,
                              "bound_source": "the reference solve's relative duality gap, per problem"},
                   hint=lambda m: m.hint, pin=pin)
    return finish(report, raise_on_failure)


# ---------------------------------------------------------------------------------------------
# dynamics
# ---------------------------------------------------------------------------------------------
def check_dynamics(candidate, *, loss="squared", lam=0.1, kind="flow", times=(0.0, 0.5, 1.0, 2.0), lr=0.05,
                   steps=20, reduction="sum", tol=1e-6, max_examples=30, problems=None, backend=None, seed=0,
                   shrink=True, raise_on_failure=True, mode="assert", convention_threshold=None):
    r"""Check training-dynamics code against ``ntkref.dynamics``.

    ``kind="flow"``: ``candidate(K, y, lam, times) -> g`` of shape (T, n), the
    outputs g_t(xᵢ) of the gradient flow dα/dt = −λα − c·l′(Kα) from α = 0
    (seed 000 eqs. (3), (8); c = 1 for ``"sum"``, 1/n for ``"mean"``), compared
    with ``ntkref.dynamics.gradient_flow(K, y, loss, lam, times).g_train``
    (exact for squared, hinge and ε-insensitive losses).

    ``kind="descent"``: ``candidate(K, y, lam, lr, steps) -> g`` of shape
    (steps + 1, n), the full-batch (sub)gradient descent
    α_{k+1} = (1 − ηλ)α_k − η c l′(Kα_k) (eq. (5)), compared with
    ``ntkref.dynamics.subgradient_descent(...).g_train``.  (With the hinge loss
    the discrete trajectory is discontinuous in the data at yᵢgᵢ = 1; such ties
    are measure-zero in the default strategy.)

    Error: |g_cand − g_ref| / max(1, max|g_ref|) per (t, i), failing above max(``tol``, b) with b ntkref's
    accuracy (:data:`DYNAMICS_BOUNDS`: 1e-13 for the exact squared/hinge/ε-insensitive references and for
    descent, 1e-8 for the adaptive integrator of logistic/squared hinge flows).  Kinds: ``"convention"``
    above ``convention_threshold`` (default 1e-3), ``"precision"`` below.

    Parameters
    ----------
    candidate : callable
        ``(K, y, lam, times) -> (T, n)`` for ``"flow"``, ``(K, y, lam, lr, steps) -> (steps + 1, n)``
        for ``"descent"`` (NumPy float64 inputs).
    loss, lam, reduction : as in ``ntkref.dynamics.gradient_flow``
    kind : {"flow", "descent"}
    times : sequence of float
        Flow output times (nondecreasing, ≥ 0).
    lr, steps : float, int
        Descent step size η (< 1/λ) and number of steps.
    tol : float
    problems : hypothesis strategy of (K, y), optional
        Default :func:`ntkref.testing.machine_problems` with n ≤ 6.
    max_examples, backend, seed, shrink, raise_on_failure, mode, convention_threshold : as in :func:`check_fit`.
    """
    check_candidate(candidate, "check_dynamics")
    kind = check_option(kind, "kind", ("flow", "descent"), caller="check_dynamics")
    # checked for either kind (a flow check ignores them, but a NaN step size is never meant)
    lr = check_real(lr, "lr", caller="check_dynamics", low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller="check_dynamics", low=0)
    loss_obj = losses.get(loss)
    tol = check_real(tol, "tol", caller="check_dynamics", low=0.0)
    mode = check_mode(mode, "check_dynamics")
    threshold = _threshold(convention_threshold, 1e-3, "check_dynamics")
    bound = 1e-13 if kind == "descent" else DYNAMICS_BOUNDS.get(loss_obj.name, 1e-8)
    tol_used = max(tol, bound)
    src = "ntkref" if bound > tol else "user"
    times_np = np.asarray(times, dtype=np.float64)
    if problems is None:
        problems = machine_problems(n=(2, 6), kind="binary" if loss_obj.classification else "regression")

    def evaluate(problem, rec):
        K, y = (np.asarray(a, dtype=np.float64) for a in problem)
        put = mover(backend)
        Kx, yx = put(K), put(y)
        if kind == "flow":
            traj = dynamics.gradient_flow(Kx, yx, loss_obj, lam, put(times_np), reduction=reduction)
            call = lambda: candidate(K, y, lam, times_np.copy())  # noqa: E731
        else:
            traj = dynamics.subgradient_descent(Kx, yx, loss_obj, lam, lr, steps, reduction=reduction)
            call = lambda: candidate(K, y, lam, lr, steps)  # noqa: E731
        g_ref = host(traj.g_train)
        inputs = {"K": K, "y": y, "lam": lam}
        try:
            g = host(call())
        except Exception as exc:
            return _call_failure(rec, inputs, tol_used, exc)
        if g.shape != g_ref.shape:
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, tol_used, "shape",
                         f"candidate returned shape {g.shape}, expected {g_ref.shape}", kind="shape")
            rec.failure(m)
            return [m], math.inf
        rec.values(g.size, g.size if src == "ntkref" else 0)
        finite = np.isfinite(g)
        err = _scaled_gap(g, g_ref)
        if finite.any():
            rec.error("outputs", float(np.max(err[finite])))
        for loc in zip(*np.nonzero(~finite)):
            rec.bad_value(loc, float(g[loc]))
        bad = ~finite | (err > tol_used)
        kinds = np.where(~finite, "non_finite", np.where(err > threshold, "convention", "precision"))
        fails = []
        for k in ("non_finite", "convention", "precision"):
            mask = bad & (kinds == k)
            if not mask.any():
                continue
            t, i = np.unravel_index(int(np.argmax(np.where(mask, np.where(np.isfinite(err), err, 1e308), -1.0))),
                                    err.shape)
            where = f"t = {times_np[t]!r}" if kind == "flow" else f"step {t}"
            m = Mismatch(inputs, (int(t), int(i)), float(g[t, i]), float(g_ref[t, i]), float(err[t, i]), tol_used,
                         "trajectory", f"{where}, training point {i}", kind=k, tolerance_source=src)
            rec.failure(m, int(mask.sum()))
            fails.append(m)
        worst = float(np.max(err)) if err.size else 0.0
        return fails, worst / tol_used if tol_used > 0 else (math.inf if worst > 0 else 0.0)

    desc = (f"check_dynamics({getattr(candidate, '__qualname__', candidate)}, kind={kind!r}, "
            f"loss={loss_obj.name!r}, lam={lam!r}, reduction={reduction!r}, tol={tol:g})")
    report = drive("check_dynamics", strategy=problems, evaluate=evaluate, battery_cases=[], order=("K", "y"),
                   mode=mode, max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
                   tolerance={"user": {"outputs": tol}, "ntkref_bound": bound,
                              "bound_source": "ntkref.testing._machines.DYNAMICS_BOUNDS (ntkref.dynamics' accuracy)"})
    return finish(report, raise_on_failure)


# ---------------------------------------------------------------------------------------------
# certificates
# ---------------------------------------------------------------------------------------------
def _ntk_outputs(alpha, x_train, points):
    """g(points) = Θ(points, x_train) α of the two-layer NTK machine, computed on the default namespace and device
    (NTKREF_BACKEND/NTKREF_DEVICE) from host inputs; returned on the host."""
    put = mover(None)
    g = kernels.two_layer_relu_ntk(put(host(points)), put(host(x_train))) @ put(host(alpha))
    return host(g)


def _attack_points(x0, radius, x_train, alpha, rng, n_random):
    """Candidate adversarial points in the ℓ∞ ball: corners, projected training points, sign-gradient steps."""
    d = x0.shape[0]
    pts = [x0 + radius * rng.choice((-1.0, 1.0), size=(n_random, d)),
           x0 + radius * rng.uniform(-1.0, 1.0, size=(n_random, d)),
           np.clip(x_train, x0 - radius, x0 + radius)]
    # FGSM/PGD-like: signs of a central-difference gradient of g at x0 and at a few corners
    h = 1e-6 * max(1.0, float(np.max(np.abs(x0))))
    for start in [x0] + list(pts[0][: min(4, n_random)]):
        e = np.eye(d) * h
        grad = (_ntk_outputs(alpha, x_train, start + e) - _ntk_outputs(alpha, x_train, start - e)) / (2 * h)
        for s in (1.0, -1.0):
            pts.append((x0 + s * radius * np.sign(grad))[None, :])
    return np.concatenate(pts, axis=0)


def check_certificate(candidate, *, norm="linf", n_attack=64, compare_reference=True, max_examples=20,
                      problems=None, seed=0, shrink=True, raise_on_failure=True, mode="assert"):
    r"""Check certified radii ``candidate(alpha, x_train, x_test) -> radii`` for soundness.

    The machine is g(x) = Σᵢ αᵢ Θ(x, xᵢ) with Θ the two-layer ReLU NTK of seed
    000 eq. (63).  A radius rₖ claims sign g(x) = sign g(x₀ₖ) on the whole
    ℓ∞ ball ‖x − x₀ₖ‖∞ ≤ rₖ (Thm 4.2).  The checker attacks each claim with
    corners of the ball, training points projected onto it and sign-gradient
    points (``n_attack`` random ones per test point); any point whose g has the
    other sign (or is 0) is a counterexample: a ``"soundness"`` failure, reported
    with the point, g(x₀) and g(x).  Radii must be finite (else ``"non_finite"``), ≥ 0 and of the right
    shape (else ``"shape"``), and 0 where g(x₀) = 0 (else ``"soundness"``).

    With ``compare_reference``, ``max_error["ratio_to_ntkref"]`` records the
    largest r_cand / r_ntkref (``ntkref.certify.certified_radius``, method
    ``"tight"``): > 1 is not an error (ntkref's bound is not the exact radius) but
    tells you your certificate claims more than ntkref can prove.

    Only ``norm="linf"`` attacks are implemented.

    Parameters
    ----------
    candidate : callable (alpha, x_train, x_test) -> radii, shape (n_test,)
    norm : {"linf"}
    n_attack : int
        Random corners and random interior points tried per test point (plus the projected
        training points and 10 sign-gradient points).
    compare_reference : bool
        Also run ``ntkref.certify.certified_radius`` and record the ratio.
    problems : hypothesis strategy of (alpha, x_train, x_test), optional
        Default: two Gaussian clusters in d ≤ 4, n_train ≤ 6, n_test ≤ 3.
    max_examples, seed, shrink, raise_on_failure, mode : as in :func:`ntkref.testing.check_kernel`.

    Notes
    -----
    An attack can only refute a certificate, never prove it: passing means no counterexample
    was found, not that the radii are sound.
    """
    check_candidate(candidate, "check_certificate")
    check_option(norm, "norm", ("linf",), caller="check_certificate")
    n_attack = check_int(n_attack, "n_attack", caller="check_certificate", low=1)
    mode = check_mode(mode, "check_certificate")
    if problems is None:
        problems = _certificate_problems()

    def evaluate(problem, rec):
        alpha, x_train, x_test = (np.asarray(a, dtype=np.float64) for a in problem)
        inputs = {"alpha": alpha, "x_train": x_train, "x_test": x_test}
        try:
            radii = host(candidate(alpha, x_train, x_test))
        except Exception as exc:
            return _call_failure(rec, inputs, 0.0, exc)
        if radii.shape != (x_test.shape[0],):
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "shape",
                         f"radii must have shape {(x_test.shape[0],)}; got {radii.shape}", kind="shape")
            rec.failure(m)
            return [m], math.inf
        rec.values(radii.size)
        if not np.all(np.isfinite(radii)):
            bad = np.nonzero(~np.isfinite(radii))[0]
            for k in bad:
                rec.bad_value((k,), float(radii[k]))
            m = Mismatch(inputs, (int(bad[0]),), float(radii[bad[0]]), math.nan, math.inf, 0.0, "radius",
                         f"non-finite radii at test points {bad.tolist()}", kind="non_finite")
            rec.failure(m, len(bad))
            return [m], math.inf
        if np.any(radii < 0):
            k = int(np.argmin(radii))
            m = Mismatch(inputs, (k,), float(radii[k]), 0.0, math.inf, 0.0, "radius",
                         f"radii must be ≥ 0; got {radii!r}", kind="shape")
            rec.failure(m, int(np.count_nonzero(radii < 0)))
            return [m], math.inf
        g0 = _ntk_outputs(alpha, x_train, x_test)
        if compare_reference:
            put = mover(None)
            r_ref = host(certify.certified_radius(put(alpha), put(x_train), put(x_test)))
            with np.errstate(all="ignore"):
                ratio = np.where(r_ref > 0, radii / np.where(r_ref > 0, r_ref, 1.0), np.where(radii > 0, np.inf, 1.0))
            rec.error("ratio_to_ntkref", float(np.max(ratio)))
        rng = np.random.default_rng(seed)
        found = []
        for k in range(x_test.shape[0]):
            if radii[k] == 0:
                continue
            if g0[k] == 0:
                found.append(Mismatch(inputs, (k,), float(radii[k]), 0.0, math.inf, 0.0, "radius",
                                      f"test point {k} has g(x0) = 0 but a positive radius", kind="soundness"))
                continue
            pts = _attack_points(x_test[k], radii[k], x_train, alpha, rng, n_attack)
            g = _ntk_outputs(alpha, x_train, pts)
            flipped = np.sign(g) != np.sign(g0[k])
            if flipped.any():
                j = int(np.argmax(flipped))
                dist = float(np.max(np.abs(pts[j] - x_test[k])))
                found.append(Mismatch(inputs | {"counterexample": pts[j]}, (k,), float(radii[k]), dist, math.inf,
                                      0.0, "soundness",
                                      f"g(x0) = {g0[k]!r} but g(counterexample) = {g[j]!r} at ℓ∞ distance "
                                      f"{dist!r} ≤ claimed radius {radii[k]!r} "
                                      "(candidate_value = claimed radius, reference_value = distance)",
                                      kind="soundness"))
        if found:
            rec.failure(found[0], len(found))
            return [found[0]], math.inf
        return [], 0.0

    desc = f"check_certificate({getattr(candidate, '__qualname__', candidate)}, norm={norm!r})"
    report = drive("check_certificate", strategy=problems, evaluate=evaluate, battery_cases=[],
                   order=("alpha", "x_train", "x_test"), mode=mode, max_examples=max_examples, seed=seed,
                   shrink=shrink, description=desc,
                   tolerance={"user": {}, "ntkref_bound": None, "bound_source": "soundness: no tolerance"})
    return finish(report, raise_on_failure)


def _certificate_problems():
    """(alpha, x_train, x_test): two Gaussian clusters in d ≤ 4, α from a hinge SVM-like rule."""

    @st.composite
    def strategy(draw):
        seed = draw(st.integers(0, 2**32 - 1))
        n = draw(st.integers(2, 6))
        d = draw(st.integers(1, 4))
        m = draw(st.integers(1, 3))
        rng = np.random.default_rng(seed)
        centre = rng.standard_normal(d)
        y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        x_train = y[:, None] * centre + 0.5 * rng.standard_normal((n, d))
        x_test = x_train[rng.integers(0, n, size=m)] + 0.1 * rng.standard_normal((m, d))
        alpha = y * rng.uniform(0.1, 1.0, size=n)
        return alpha, x_train, x_test

    return strategy()

