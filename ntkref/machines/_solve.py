r"""The exact solvers of seed 000 eq. (7): :func:`solve` (every loss), :func:`fit` and :func:`hard_margin_svm`.

The squared loss by its closed form α = (K + (λ/2) I)⁻¹ y; hinge, squared hinge and ε-insensitive by the exact
active-set method on their dual box QPs (:mod:`ntkref.machines._boxqp`, the bounds and gaps of
:mod:`ntkref.machines._duality`); logistic by damped Newton in α (:func:`_logistic_newton`); the hard margin as
the λ → 0 limit along a path of soft margins (:func:`soft_margin_path`).  Each result carries its duality-gap
certificate; ``fit_intercept=True`` goes to :func:`ntkref.machines._intercept.fit_with_intercept`, a Dask K to
the Dask engine through the ``solve`` / ``hard_margin_svm`` seams.  :func:`_on_host` runs the small active-set
solves of a non-NumPy K as one explicit host step.

:func:`soft_margin_path` is also used by the Dask engine (ntkref/_engines/dask/_machines.py).
"""
from __future__ import annotations

import math
import warnings

from .. import losses as _losses
from .._lib import compat as _compat
from .._lib import dispatch
from .._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from .._lib.validation import InvalidParameterError, check_int, check_real
from . import _boxqp, _duality, _gram, _intercept, _proof
from ._result import ConvergenceWarning, KernelMachine


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



def _default_tol(dtype, xp):
    return 1e-10 if dtype == xp.float64 else 1e-4



def _in_work_precision(y, K, xp):
    """y in the working precision of the exact QP solvers: float64 whatever K's dtype.

    A float32 K is solved in float64 arithmetic (``ntkref.machines._boxqp.chunked_qp`` converts its working-set
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
    eye = _gram.eye(n, K, xp)
    it = 0
    polished = False
    for it in range(1, max_iter + 1):
        l1 = loss._derivative(g, y, xp)
        primal = _duality.primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _duality.dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
        done = primal - dual <= tol * max(1.0, primal)
        if done and polished:
            return alpha, g, it - 1, True
        r = lam_sum * alpha + l1
        e = xp.exp(-xp.abs(y * g))
        l2 = e / (1 + e) ** 2
        delta = _boxqp.solve_vec(lam_sum * eye + l2[:, None] * K, -r, xp)
        Kd = K @ delta
        slope = float(xp.sum(r * Kd))  # = ∇_β P · Δβ
        if done:
            # one more full Newton step once the gap test passes: the gap bounds ‖β − β*‖ only
            # by √(2·gap/λ), while Newton's quadratic convergence makes this step exact to rounding
            polished = True
            if slope < 0:
                a_t, g_t = alpha + delta, g + Kd
                if _duality.primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= primal:
                    alpha, g = a_t, g_t
            continue
        if not slope < 0:
            return alpha, g, it, False  # no descent left: rounding floor
        t = 1.0
        p0 = primal
        for _ in range(60):
            a_t, g_t = alpha + t * delta, g + t * Kd
            if _duality.primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= p0 + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return alpha, g, it, False
        alpha, g = a_t, g_t
    l1 = loss._derivative(g, y, xp)
    primal = _duality.primal_from_g(alpha, g, y, loss, lam_sum, xp)
    dual = _duality.dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
    return alpha, g, max_iter, primal - dual <= tol * max(1.0, primal)


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
        indefinite K (bound in ``ntkref.machines._gram.refuse_indefinite``); True (default) = "auto": Cholesky for
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
    The squared hinge's dual box is unbounded: a λ/2 below −λ_min(K) (a rounding-level negative eigenvalue that
    the PSD test accepts, to −n·eps·‖K‖_F) or below the resolution of K + (λ/2)I's eigenvalues leaves the dual
    unbounded below; that is refused, naming ``lam``, with the bound on λ_min(K) found and the λ that makes
    K + (λ/2)I positive definite (``ntkref.machines._duality.unbounded_dual_error``), never regularised silently.

    float32: a float32 K is solved in float64 arithmetic (exact conversions: the working-set matrices for
    the QP losses, one n×n copy for logistic's Newton systems and the squared loss's closed form), α is rounded to float32 (towards 0 where
    rounding to nearest would leave the dual box), and the objectives, gap and ``converged`` are those of
    the float32 α returned, evaluated in float64; y is rounded to float32 with K (the certified problem is the
    one with the rounded y), and with ``reduction="mean"`` the certificate is for λ_sum = fl(n·λ).  Where |α| is
    large against g = Kα (small λ, singular K) the rounding alone can exceed tol: the result then says ``converged=False`` and the warning gives the
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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> m = machines.solve(kernels.fc(X).ntk, y, "hinge", 0.1)       # an SVM, C = 1/λ = 10
    >>> print(m.converged, f"{m.primal_objective:.6f} {m.dual_objective:.6f}")
    True 1.492987 1.492987
    >>> bool(np.all((y * m.alpha_ >= 0) & (y * m.alpha_ <= 1 / 0.1)))   # the dual box 0 ≤ yᵢαᵢ ≤ 1/λ
    True
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
        return _intercept.fit_with_intercept(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter,
                                             check_psd=check_psd)
    info = {}
    K, y, loss, lam, lam_sum, xp = _duality.prepare(K, y, loss, lam, reduction, caller, psd=check_psd, info=info)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    if max_iter is not None:  # checked for every loss (the squared loss's closed form has no iterations)
        max_iter = check_int(max_iter, "max_iter", caller=caller, low=1)
    div = n if reduction == "mean" else 1
    mu = info.get("psd_margin", math.inf)  # what the PSD test proved: the certificate accounts for it (_proof)
    note = {}  # what the certificate found beyond the solver's own gap (for the warning)

    if loss.name == "squared":
        if lam_sum == 0.0:
            delta = n * _gram.machine_eps(K.dtype, xp) * float(xp.linalg.vector_norm(K))
            if not _gram.cholesky_ok(K, -delta, xp):
                raise InvalidParameterError(
                    f"With lam=0 (kernel regression) {caller} needs a nonsingular K, but its smallest eigenvalue is "
                    f"≤ n*eps*||K||_F = {delta:.3g}; use lam > 0."
                )
        # a float32 K: the closed form in float64 on an exact copy, α rounded to float32 and certified
        Kw = K if K.dtype == xp.float64 else xp.astype(K, xp.float64)
        yw = _in_work_precision(y, K, xp)
        try:
            alpha = _boxqp.solve_vec(Kw + (lam_sum / 2) * _gram.eye(n, Kw, xp) if lam_sum else Kw, yw, xp)
        except Exception as exc:  # an exactly singular system (LinAlgError of the namespace)
            raise InvalidParameterError(
                f"{caller}: K + (lam/2)·I is singular in float64 (lam = {lam!r}, max|K| = "
                f"{float(xp.max(xp.abs(Kw))):.3g}); use a larger lam."
            ) from exc
        its, gap_work = 0, None
        if K.dtype != xp.float64:
            if lam_sum > 0:  # the float64 solution's gap, for the warning if the rounding to float32 alone fails
                g = Kw @ alpha
                gap_work = (_duality.primal_from_g(alpha, g, yw, loss, lam_sum, xp)
                            - _duality.dual_from_g(alpha, g, yw, loss, lam_sum, xp))
            alpha = xp.astype(xp.astype(alpha, K.dtype), xp.float64)
        gap_rounding = 0.0
        conv = True  # λ = 0: kernel regression, no dual
        if lam_sum > 0:  # the proven certificate (compensated g = Kα, ntkref.machines._proof)
            g, primal, dual, gap, gap_rounding, conv = _certificate(K, alpha, yw, loss, lam_sum, tol, xp,
                                                                    support=False, psd_margin=mu)
        else:
            g = Kw @ alpha
            primal, dual = _duality.primal_from_g(alpha, g, yw, loss, lam_sum, xp), 0.0
            gap = primal
        kkt = _duality.kkt_residual(alpha, g, yw, Kw, loss, lam_sum, xp) if lam_sum > 0 else float(xp.max(xp.abs(g - yw)))
        norm2 = float(xp.sum(alpha * g))
        alpha, g = xp.astype(alpha, K.dtype), xp.astype(g, K.dtype)
    elif loss.name in _duality.QP_LOSSES:
        max_iter = max(1000, 10 * n) if max_iter is None else max_iter

        def qp(K, y_in, xp):
            y = _in_work_precision(y_in, K, xp)
            lo, hi, eps, shift = _duality.qp_bounds(y, loss, lam_sum, xp)

            last = {}

            def gap_fn(a, g):  # the last evaluation is kept (with its arrays): the solver's final one is the result's
                if last.get("a") is not a or last.get("g") is not g:
                    last.update(a=a, g=g, pd=(_duality.primal_from_g(a, g, y, loss, lam_sum, xp),
                                              _duality.dual_from_g(a, g, y, loss, lam_sum, xp)))
                return last["pd"]

            try:
                alpha, g, its, conv = _boxqp.chunked_qp(K, y, lo, hi, eps, shift, gap_fn, tol, max_iter, xp)
            except _boxqp.UnboundedDirection as exc:  # the squared hinge, lam/2 below -λ_min(K) + rounding
                delta = n * _gram.machine_eps(K.dtype, xp) * _compat.frobenius_norm(K, xp)
                raise _duality.unbounded_dual_error(caller, exc, lam, lam_sum, n, reduction, delta) from None
            primal, dual = gap_fn(alpha, g)
            gap_work = None
            if alpha.dtype != K.dtype:  # the certificate is that of the α returned, rounded to K's dtype
                gap_work = primal - dual
                alpha = _rounded_into_box(alpha, lo, hi, K.dtype, xp)
                g = _boxqp.support_matvec(K, alpha, xp)
                primal, dual = gap_fn(alpha, g)
            g, primal, dual, gap, e, proven = _certificate(K, alpha, y, loss, lam_sum, tol, xp, psd_margin=mu)
            note["resolved"] = not (conv and not proven)  # the solver's own float gap met tol, the proven one not
            conv = conv and proven
            kkt = _duality.kkt_residual(alpha, g, y, K, loss, lam_sum, xp)
            return (xp.astype(alpha, K.dtype), xp.astype(g, K.dtype), its, conv, primal, dual, kkt,
                    float(xp.sum(alpha * g)), gap_work, e, gap)

        alpha, g, its, conv, primal, dual, kkt, norm2, gap_work, gap_rounding, gap = _on_host(qp, K, y)
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
            gap_work = (_duality.primal_from_g(alpha, g, yw, loss, lam_sum, xp)
                        - _duality.dual_from_g(a_dual, Kw @ a_dual, yw, loss, lam_sum, xp))
            alpha = xp.astype(xp.astype(alpha, K.dtype), xp.float64)
            g = Kw @ alpha
        a_dual = -loss._derivative(g, yw, xp) / lam_sum
        g_dual = Kw @ a_dual
        primal = _duality.primal_from_g(alpha, g, yw, loss, lam_sum, xp)
        dual = _duality.dual_from_g(a_dual, g_dual, yw, loss, lam_sum, xp)
        if conv and primal - dual <= tol * max(1.0, primal):  # (the proven certificate below decides converged)
            # return the representer form α = −l′(g)/λ (stationarity), free of null(K) components when K is
            # singular, if it is certified too (its primal with the same dual); else the certified iterate
            a_rep = a_dual if K.dtype == xp.float64 else xp.astype(xp.astype(a_dual, K.dtype), xp.float64)
            g_rep = g_dual if K.dtype == xp.float64 else Kw @ a_rep
            primal_rep = _duality.primal_from_g(a_rep, g_rep, yw, loss, lam_sum, xp)
            if primal_rep - dual <= tol * max(1.0, primal_rep):
                alpha, g, primal = a_rep, g_rep, primal_rep
        g, primal, dual, gap, gap_rounding, proven = _certificate(K, alpha, yw, loss, lam_sum, tol, xp,
                                                                  support=False, psd_margin=mu)
        conv = conv and proven
        kkt = _duality.kkt_residual(alpha, g, yw, Kw, loss, lam_sum, xp)
        norm2 = float(xp.sum(alpha * g))
        alpha, g = xp.astype(alpha, K.dtype), xp.astype(g, K.dtype)
    _duality.check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha)
    if not math.isfinite(gap_rounding):
        raise _duality.overflow_error(caller, "proven bound of the duality gap", K, y, lam, xp)
    if not conv:
        rounding = ""
        if gap_work is not None and gap_work <= tol * max(1.0, primal):
            rounding = (f" That is the gap of α rounded to K's dtype {K.dtype}: the float64 solution it was rounded "
                        f"from has gap {gap_work:.3g}. Pass K in float64 for it, or a larger tol.")
        elif gap_rounding > tol * max(1.0, primal):
            rounding = (f" The proven rounding bound of the gap alone exceeds tol (max|α| = "
                        f"{float(xp.max(xp.abs(alpha))):.3g}, against 1/λ = {1 / lam_sum:.3g}): this solution cannot "
                        f"be certified to tol in float64; the gap plus this bound bounds P(α) − P*.")
        elif not note.get("resolved", True):
            rounding = (f" The solver's own gap, from g = Kα in plain float64, met tol, but the proven gap (g = Kα "
                        f"compensated, exact to ~u|g|) does not: where |α| ~ 1/λ = {1 / lam_sum:.3g} the rounding of "
                        f"Kα in the solver's iterations (|K||α|·eps) hides the suboptimality; use a larger lam.")
        warnings.warn(
            f"{caller}: the {loss.name} solver stopped with duality gap {gap:.3g} (+ its proven rounding "
            f"bound {gap_rounding:.3g}) > tol·max(1, P) = {tol * max(1.0, primal):.3g} after {its} "
            f"iterations.{rounding}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=gap / div,
        kkt_residual=kkt, n_iter=its, converged=bool(conv),
        rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g, gap_rounding=gap_rounding / div,
        psd_margin=info.get("psd_margin", math.inf),
    )


def _certificate(K, alpha, y, loss, lam_sum, tol, xp, support=True, psd_margin=math.inf):
    """The proven certificate of α (:func:`ntkref.machines._proof.proven_gap`): (g, P, D, gap, gap_rounding, ok).

    g is the compensated Kα, gap = Σ Fᵢ (the Fenchel–Young form of P(α) − D(α′), computed without the cancellation
    of P − D; the result's ``duality_gap``), D = fl(P − gap) (so P − D equals the gap only to the rounding of P),
    ``gap_rounding`` ≥ proven upper bound − max(gap, 0) (rounded up: max(gap, 0) + gap_rounding ≥ the bound
    in exact arithmetic, with 4u·bound to spare for the caller's own sum), and ok = (proven upper bound ≤ tol·max(1, proven lower bound of P)):
    then P(α) − D(α′) ≤ tol·max(1, P(α)) in real arithmetic on the given floats, hence P(α) − P* ≤ tol·max(1, P(α))
    for K ⪰ 0 (``psd_margin`` μ: the bounds account for λ_min(K) > −μ, :mod:`ntkref.machines._proof`, "Indefinite
    K"; inf assumes K ⪰ 0).  A NaN gives ok False and a NaN ``gap_rounding`` (the callers refuse it)."""
    c = _proof.proven_gap(K, alpha, y, loss, lam_sum, xp, support=support, psd_margin=psd_margin)
    gap, upper = c["gap"], c["gap_upper"]
    ok = _proof.certified(upper, c["primal_low"], tol)
    rounding = _proof.rounding_of(gap, upper)
    return c["g"], c["primal"], c["primal"] - gap, gap, rounding, bool(ok)


def fit(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, fit_intercept=False):
    r"""Coefficients α (shape (n,), g = Kα) of the exact minimiser of seed 000 eq. (7).

    Same as ``solve(...).alpha_``; see :func:`solve` for the parameters, the
    conventions (sum/mean, no bias, squared loss without ½) and the accuracy.
    With ``fit_intercept=True`` it returns the pair ``(alpha, b)`` of the machine f = Kα + b.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> K = kernels.fc(X).ntk
    >>> alpha = machines.fit(K, y, "squared", 2.0)     # KRR: α = (K + (λ/2)·I)⁻¹ y (no ½ in the loss)
    >>> bool(np.allclose(alpha, np.linalg.solve(K + np.eye(20), y)))
    True
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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import machines
    >>> X = np.array([[1.0, 0.0], [-1.0, 0.0], [2.0, 1.0]])
    >>> y = np.array([1.0, -1.0, 1.0])
    >>> m = machines.hard_margin_svm(X @ X.T, y)      # linear kernel: β* = (1, 0), margin 1/‖β*‖ = 1
    >>> np.round(m.alpha_, 6).tolist(), f"{m.rkhs_norm_:.6f}"   # the third point is no support vector
    ([0.5, -0.5, 0.0], '1.000000')
    >>> print(f"{float(np.min(y * m.predict(X @ X.T))):.6f}")    # min yᵢ g(xᵢ) = 1
    1.000000
    """
    caller = "machines.hard_margin_svm"
    engine = dispatch.hard_margin_svm.lookup(K)
    if engine is not None:  # a Dask K: the same path with working sets of gathered columns (ntkref/_engines/dask)
        return engine(K, y, tol=tol, max_iter=max_iter, C_max=C_max, check_psd=check_psd)
    loss = _losses.get("hinge")
    info = {}
    K, y, loss, _, _, xp = _duality.prepare(K, y, loss, 1.0, "sum", caller, psd=check_psd, info=info)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    max_iter = max(1000, 10 * n) if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
    scale = float(xp.mean(xp.linalg.diagonal(K)))
    if scale <= 0:
        raise InvalidParameterError(f"The 'K' parameter of {caller} is zero on the diagonal: no point can be separated.")
    C_max = 1e12 / scale if C_max is None else check_real(C_max, "C_max", caller=caller, low=0.0, closed="right")

    def margin_path(K, y_in, xp):
        y = _in_work_precision(y_in, K, xp)

        def solve_c(lo, hi, gap_fn, alpha0):
            alpha, g, its, _ = _boxqp.chunked_qp(K, y, lo, hi, 0.0, 0.0, gap_fn, tol, max_iter, xp, alpha0=alpha0)
            return alpha, g, its

        alpha, g, lo, hi, its_total = soft_margin_path(solve_c, y, scale, C_max, caller, xp)
        if alpha.dtype != K.dtype:  # the certificate is that of the α returned, rounded to K's dtype
            alpha = _rounded_into_box(alpha, lo, hi, K.dtype, xp)
            g = _boxqp.support_matvec(K, alpha, xp)
        # the proven certificate: g = Kα compensated, gap = αᵀKα − yᵀα = Σ yαᵢ(yᵢgᵢ − 1) bounded (_proof)
        g, gap, upper = _proof.hard_margin_gap(K, alpha, y, xp)
        norm2 = float(xp.sum(alpha * g))
        dual = float(xp.sum(y * alpha)) - 0.5 * norm2
        infeas = 1.0 - float(xp.min(y * g))
        infeas = infeas if not infeas < 0.0 else 0.0  # (max(0.0, nan) would hide a NaN)
        e = _proof.rounding_of(gap, upper)
        return xp.astype(alpha, K.dtype), xp.astype(g, K.dtype), its_total, norm2, dual, infeas, e, gap

    alpha, g, its_total, norm2, dual, infeas, gap_rounding, gap = _on_host(margin_path, K, y)
    primal = 0.5 * norm2
    _duality.check_finite_solution(caller, K, y, 0.0, xp, primal, dual, infeas, alpha)
    if not math.isfinite(gap_rounding):
        raise _duality.overflow_error(caller, "proven bound of the duality gap", K, y, 0.0, xp)
    conv = max(gap, 0.0) + gap_rounding <= tol * max(1.0, primal) and infeas <= math.sqrt(tol)
    if not conv:
        warnings.warn(f"{caller}: gap {gap:.3g} (+ its proven rounding bound {gap_rounding:.3g}), margin "
                      f"violation {infeas:.3g}.", ConvergenceWarning, stacklevel=2)
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=0.0, lam_sum=0.0, reduction="sum", primal_objective=primal,
        dual_objective=dual, duality_gap=gap, kkt_residual=infeas, n_iter=its_total,
        converged=bool(conv), rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g, gap_rounding=gap_rounding,
        psd_margin=info.get("psd_margin", math.inf),
    )


def soft_margin_path(solve_c, y, scale, C_max, caller, xp):
    """The soft-margin path of :func:`hard_margin_svm` (dense and Dask): C = 1/λ from min(1/mean Kᵢᵢ, C_max),
    tenfold, each SVM by ``solve_c(lo, hi, gap_fn, alpha0)`` → (α, g, iterations) warm-started from the last α,
    until no yᵢαᵢ sits at C.  Returns (α, g, lo, hi, iterations); data still at the bound at C_max are refused."""
    loss = _losses.get("hinge")
    C, alpha, its_total = min(1.0 / scale, C_max), None, 0
    while True:
        lam = 1.0 / C
        lo, hi, _, _ = _duality.qp_bounds(y, loss, lam, xp)

        def gap_fn(a, g, lam=lam):
            return _duality.primal_from_g(a, g, y, loss, lam, xp), _duality.dual_from_g(a, g, y, loss, lam, xp)

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

