r"""Gradient flow of eq. (7) for a kernel machine, and its variation-of-constants solution.

- Seed 000 eqs. (3), (8), (26)–(27), (51): dα/dt = −λα − c·l′(g_t(X), y), g_t = e^{−λt} g₀ + K α_t —
  :func:`gradient_flow`, which validates, picks the method and runs it:

  - ``"eigh"`` (squared loss, here): the closed form in the eigenbasis of K, including seed 004 eq. (3)
    at λ = 0 (u(t) = y + e^{−ηHt}(u₀ − y) with ηH = 2cK);
  - ``"events"`` (hinge, ε-insensitive): the exact event-driven Filippov flow with its box-LCP sliding
    selection — :mod:`ntkref.dynamics._flow_events`;
  - ``"dopri5"`` (any loss): adaptive Dormand–Prince 5(4) — :mod:`ntkref.dynamics._flow_dopri`;

  float32 inputs run the last two in float64 and are rounded back here.
- Seed 000 eqs. (4), (28): g_T = e^{−λT}(g₀ + ∫₀ᵀ Q(t) e^{λt} dt) for piecewise-constant l′ —
  :func:`continuous_closed_form`.

Conventions and errata: the package docstring (:mod:`ntkref.dynamics`).
"""
from __future__ import annotations

import math
from dataclasses import fields

from .. import losses as _losses
from .._lib import dispatch
from .._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from .._lib.memory import check_memory
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ._flow_dopri import flow_dopri
from ._flow_events import flow_events
from ._trajectory import (
    assemble,
    check_kernel,
    check_targets,
    check_test,
    check_times,
    check_vector,
    phi,
    phi_scalar,
    reduction_scale,
)


def gradient_flow(
    K,
    y,
    loss,
    lam,
    times,
    *,
    g0=None,
    alpha0=None,
    K_test=None,
    g0_test=None,
    reduction="sum",
    method="auto",
    rtol=1e-9,
    atol=1e-12,
    max_events=100_000,
    max_steps=1_000_000,
):
    r"""Gradient flow of eq. (7) for a kernel machine: seed 000 eqs. (3), (8), (28).

    Solves, on training points X (kernel ``K``) and test points (``K_test``),

        dg_t(x)/dt = −λ g_t(x) − c Σᵢ l′(g_t(xᵢ), yᵢ) K(x, xᵢ),   g_t = e^{−λt} g₀ + K α_t,

    i.e. dα/dt = −λα − c·l′(g_t(X), y), α(0) = ``alpha0`` (default 0), with c = 1 (``"sum"``)
    or 1/n (``"mean"``).  g₀ (``g0``/``g0_test``) is the output of an initial β₀ that need not
    lie in the span of the Φ(xᵢ) (e.g. a network's f₀); it decays as e^{−λt}.

    Methods (``method="auto"`` picks the exact one where it exists):

    - ``"eigh"`` — squared loss (y − z)², l′ = 2(z − y): with K = VΛVᵀ and μ_k = λ + 2cΛ_k,
      (Vᵀα)_k(t) = e^{−μ_k t}(Vᵀα₀)_k + 2c(Vᵀy)_k φ(μ_k, t) − 2c(Vᵀg₀)_k e^{−λt} φ(2cΛ_k, t),
      φ(μ, t) = (1 − e^{−μt})/μ.  λ = 0 is kernel regression, u(t) = y + e^{−2cKt}(u₀ − y)
      (seed 004 eq. (3) with ηH = 2cK: the factor 2 is that of (y − z)², which has no ½).
      Eigenvalues Λ_k ≤ n·eps·Λ_max are exactly 0 (rounding cannot tell them from 0): there g keeps
      e^{−λt}(Vᵀg₀)_k and α only e^{−λt}(Vᵀα₀)_k — the ODE's forcing of α along null(K) by the parts of y
      and g₀ outside range(K) changes no output (Kv = 0 ⇒ K_test v = 0) and is dropped.  So the flow
      stays in range(K) at every t: as t → ∞ with λ = 0 and g₀ = α₀ = 0, g → the projection of y onto
      range(K) (the min-norm interpolant K K⁺y; duplicate points get the mean of their targets).
    - ``"events"`` — hinge and ε-insensitive (l′ piecewise constant): between events the
      effective derivative vector p is constant, so α(t₀+τ) = e^{−λτ}α(t₀) − p φ(λ, τ) and each
      gᵢ moves monotonically towards its rest point; the time a point reaches a kink of its loss
      (yᵢgᵢ = 1; |gᵢ − yᵢ| = ε) is closed form, τ = log((gᵢ − rᵢ)/(kink − rᵢ))/λ.  At each event
      the derivatives of the points sitting on a kink are the minimal-norm (Filippov) selection:
      the box QP min ½pᵀK_MM p + (λg_M + K_MN p_N)ᵀp over p_M in the subdifferential, solved by
      principal pivoting to machine precision.  Points with an interior value slide along the
      kink (e.g. yᵢgᵢ ≡ 1).  This is exactly the gradient flow of the convex L (unique), and the
      η → 0 limit of :func:`subgradient_descent`.
    - ``"dopri5"`` — any loss (used for logistic and squared hinge): Dormand–Prince 5(4) with
      error control ‖err/(atol + rtol·|α|)‖_∞ ≤ 1, landing exactly on the requested times.

    The event loop and the step-size control are invariant under the scaling of K:
    flow(sK, λ, t) = flow(K, λ/s, s·t) (same g and g_test, α divided by s; α₀ → α₀/s), since their
    tolerances are relative to the time scale 1/(λ + c‖K‖_∞) and the l′ scale (tested for s = 1e±12).

    Parameters
    ----------
    K : array, shape (n, n)
        Training kernel matrix; symmetric positive semidefinite (checked to rounding).
    y : array, shape (n,)
        Targets; ±1 labels for hinge, squared hinge, logistic.
    loss : str or losses.Loss
    lam : float
        λ ≥ 0 of eq. (7).  (λ = 0 allowed; convergence to a unique minimiser needs λ > 0.)
    times : sequence of float
        Nondecreasing times ≥ 0 at which the trajectory is reported.
    g0, alpha0 : array, shape (n,), optional
        Initial outputs g₀(X) of a β₀ (decaying as e^{−λt}) and initial coefficients.
    K_test : array, shape (m, n), optional
    g0_test : array, shape (m,), optional
        g₀ on the test points; required when ``g0`` and ``K_test`` are given.
    reduction : {"sum", "mean"}
        Σ l (eq. (7)) or (1/n)Σ l (App. A eq. (11)); mean with λ equals sum with nλ in time t/n.
    method : {"auto", "eigh", "events", "dopri5"}
    rtol, atol : float
        Tolerances of ``"dopri5"``; rtol ≥ 100·eps of the working precision (2.2e-14: float32 inputs
        are integrated in float64), a smaller rtol is refused (the error control would only see
        rounding and the step size would collapse).
    max_events, max_steps : int
        Safeguards of ``"events"`` and ``"dopri5"``.

    Returns
    -------
    Trajectory

    Accuracy
    --------
    ``"eigh"`` and ``"events"`` are exact up to rounding: errors of order n·eps·‖K‖·t·(#events)
    in float64 (≈1e-13 in the tests).  ``"dopri5"``: the global error is typically ≲ 10·rtol·|α|,
    reported as ``error_estimate``.

    float32: ``"events"`` and ``"dopri5"`` compute on exact float64 copies of the float32 inputs and
    round the trajectory to float32 (returned on K's device): against the float64 flow of the same
    float32 numbers the error is the final rounding, ≤ 6e-8·max(1, |g|) (n = 30 ReLU-NTK and RBF Grams,
    hinge, ε-insensitive, squared hinge, logistic, λ ∈ {0.01, 0.1}, t ≤ 50; before, the float32 event loop
    was off by up to 4.5e-2 and dopri5's rtol = 1e-9 < eps₃₂ collapsed its steps).  ``"eigh"`` runs in
    float32 (one eigendecomposition; its rounding-level cut-off is n·eps₃₂·Λ_max): ≤ 3e-7·max(1, |g|)
    on the same problems (λ ∈ {0, 0.01, 0.1}).

    Notes
    -----
    The limit t → ∞ (λ > 0) is the minimiser of (7) — for the hinge loss the SVM dual solution,
    *not* the limit printed in Thm 3.1 (see :func:`svm_limit_printed`).

    Examples
    --------
    Squared loss, λ = 0, K = I: u(t) = y + e^{−2Kt}(u₀ − y) = (1 − e^{−2t})·y.

    >>> import numpy as np
    >>> from ntkref import dynamics
    >>> K, y = np.eye(2), np.array([1.0, -1.0])
    >>> tr = dynamics.gradient_flow(K, y, "squared", 0.0, [0.0, 1.0])
    >>> print(tr.method, np.round(tr.g_train[-1], 6).tolist(), f"{1 - np.exp(-2.0):.6f}")
    eigh [0.864665, -0.864665] 0.864665

    Hinge, λ = 0.5: each gᵢ heads for 2yᵢ, reaches the margin yᵢgᵢ = 1 at t = 2 log 2 and slides along it:

    >>> tr = dynamics.gradient_flow(K, y, "hinge", 0.5, [1.0, 2.0, 10.0])
    >>> print(tr.method, np.round(tr.g_train[:, 0], 6).tolist(), f"{2 * (1 - np.exp(-0.5)):.6f}")
    events [0.786939, 1.0, 1.0] 0.786939
    """
    caller = "gradient_flow"
    engine = dispatch.gradient_flow.lookup(K, K_test)
    if engine is not None:  # a Dask K: the engine answers (it refuses: the solvers need K in one process)
        return engine(K, K_test=K_test)
    loss = _losses.get(loss) if not isinstance(loss, _losses.Loss) else loss
    check_option(method, "method", ("auto", "eigh", "events", "dopri5"), caller=caller)
    if method == "auto":
        method = {"squared": "eigh", "hinge": "events", "epsilon_insensitive": "events"}.get(loss.name, "dopri5")
    if method == "eigh" and loss.name != "squared":
        raise InvalidParameterError(f"method='eigh' of {caller} is the closed form of the squared loss only; got {loss.name!r}.")
    if method == "events" and loss.name not in ("hinge", "epsilon_insensitive"):
        raise InvalidParameterError(
            f"method='events' of {caller} needs a piecewise-constant l' (hinge, epsilon_insensitive); got {loss.name!r}."
        )
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    rtol = check_real(rtol, "rtol", caller=caller, low=0.0, closed="neither")
    atol = check_real(atol, "atol", caller=caller, low=0.0)
    ts = check_times(times, caller)
    max_events = check_int(max_events, "max_events", caller=caller, low=1)
    max_steps = check_int(max_steps, "max_steps", caller=caller, low=1)
    if is_array(K) and len(K.shape) == 2:  # the memory guard, before the eigendecomposition and the outputs
        n_, m_ = K.shape[0], (K_test.shape[0] if is_array(K_test) and len(K_test.shape) == 2 else 0)
        # K's symmetrised copy, V and the eigensolver's workspace (4n²), K_test's working copy, and α, g_train,
        # g_test at every time (listed, then stacked: twice); float32 K: the event loop and dopri5 run in float64
        check_memory(4 * n_ * n_ + m_ * n_ + 2 * len(ts) * (2 * n_ + m_),
                     f"The trajectory at {len(ts)} 'times' of {n_} training and {m_} test outputs (with the "
                     f"eigendecomposition of the ({n_}, {n_}) 'K')", caller, K, itemsize=None if method == "eigh" else 8,
                     ways_out="ways out: fewer output times per call (a flow continues from time T with "
                              "alpha0=α(T), g0=e^(−λT)·g0, g0_test=e^(−λT)·g0_test), or fewer training/test points")
    K, xp, eig = check_kernel(K, caller, psd=True, xp=namespace(K, y, g0, alpha0, K_test, g0_test))
    n = K.shape[0]
    dtype = K.dtype
    y = check_targets(loss, y, n, caller, xp, dtype, like=K)
    g0 = check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    c = reduction_scale(reduction, n, caller)
    zeros = xp.zeros((n,), dtype=dtype, device=device_of(K))
    g0_ = zeros if g0 is None else g0
    a0 = zeros if alpha0 is None else alpha0
    ctx = dict(K=K, y=y, loss=loss, lam=lam, c=c, g0=g0_, a0=a0, K_test=K_test,
               g0_test=g0_test, xp=xp, times=ts)
    if method == "eigh":
        return _flow_squared(eig, **ctx)
    # a float32 K: the event loop and Dormand-Prince run in float64 on exact copies of the float32 inputs,
    # and the trajectory is rounded back to float32 (their tolerances, relative to eps, are then those
    # of float64: the float32 event loop misjudged kinks and sliding sets, and dopri5's rtol fell below eps)
    work = xp.float64 if dtype == xp.float32 else dtype
    if work != dtype:
        ctx.update({k: (xp.astype(v, work) if is_array(v) else v) for k, v in ctx.items() if k != "xp"})
    if method == "events":
        if is_numpy_namespace(xp):
            traj = flow_events(max_events=max_events, **ctx)
        else:
            # explicit host step: the event loop is a sequence of small host decisions (which point
            # reaches a kink first, the pivoting of the sliding set); on a GPU each would be a
            # synchronisation.  The inputs go to the host once, the NumPy code runs there, and the
            # trajectory comes back to K's device: identical to the NumPy computation.
            host = {k: (to_numpy(v) if is_array(v) else v) for k, v in ctx.items() if k != "xp"}
            traj = flow_events(max_events=max_events, xp=namespace(host["K"]), **host)
            traj = _trajectory_to(traj, xp, device_of(K))
    else:
        floor = 100 * float(xp.finfo(work).eps)
        if rtol < floor:
            raise InvalidParameterError(
                f"The 'rtol' parameter of {caller} must be >= 100·eps = {floor:.3g} of the working precision "
                f"({'float64' if work == xp.float64 else 'float32'}; float32 inputs are integrated in float64); got "
                f"rtol={rtol!r}. Below it the error control only sees rounding and the step size collapses."
            )
        traj = flow_dopri(rtol=rtol, atol=atol, max_steps=max_steps, **ctx)
    return traj if work == dtype else _trajectory_astype(traj, xp, dtype)


def _trajectory_to(traj, xp, device):
    """The arrays of ``traj`` (host NumPy arrays) copied to ``device`` of namespace ``xp``."""
    for f in fields(traj):
        v = getattr(traj, f.name)
        if is_array(v):
            setattr(traj, f.name, xp.asarray(v, device=device))
    return traj


def _trajectory_astype(traj, xp, dtype):
    """The floating arrays of ``traj`` rounded to ``dtype`` (a float32 K's trajectory, computed in float64)."""
    for f in fields(traj):
        v = getattr(traj, f.name)
        if is_array(v) and xp.isdtype(v.dtype, "real floating"):
            setattr(traj, f.name, xp.astype(v, dtype))
    return traj


def _flow_squared(eig, K, y, loss, lam, c, g0, a0, K_test, g0_test, xp, times):
    evals, V = eig
    # eigenvalues at rounding level are exactly 0: the eigendecomposition is backward stable (its Λ are
    # those of K + E, ‖E‖₂ ≲ n·eps·‖K‖₂) and a kernel computed entrywise is known to a few ulps of its
    # entries, so |Λ_k| ≤ n·eps·Λ_max cannot be told from 0 (checked PSD: the negatives are rounding too).
    # Fitting such a direction would move g out of range(K) at t ≳ 1/(2c·n·eps·Λ_max) (duplicate points
    # with different targets got different outputs); along null(K) only α₀'s part is kept (it decays),
    # the forcing by y and g₀ there changes no output (K v = 0 ⇒ K_test v = 0) and grows like t at λ = 0.
    rng_ = _in_range(evals, K.shape[0], xp)
    evals = xp.where(rng_, evals, xp.zeros_like(evals))
    b = xp.where(rng_, V.T @ y, xp.zeros_like(evals))
    d = xp.where(rng_, V.T @ g0, xp.zeros_like(evals))
    a_init = V.T @ a0
    mu = lam + 2 * c * evals
    alphas, gtr = [], []
    for t in times:
        coef = (xp.exp(-mu * t) * a_init + 2 * c * b * phi(mu, t, xp)
                - 2 * c * d * (math.exp(-lam * t) * phi(2 * c * evals, t, xp)))
        alphas.append(V @ coef)
        # g = e^{−λt} g0 + V Λ coef: same arithmetic as K α but without forming K α's cancellation
        gtr.append(math.exp(-lam * t) * g0 + V @ (evals * coef))
    return assemble(xp, times, alphas, lam, K, g0, K_test, g0_test, "eigh", g_train=gtr)


def _in_range(evals, n, xp):
    """Mask of the eigenvalues of a PSD K that are not 0 to rounding: Λ_k > n·eps·Λ_max."""
    top = float(xp.max(evals))
    return evals > n * float(xp.finfo(evals.dtype).eps) * max(top, 0.0)


def continuous_closed_form(K, segment_times, segment_derivatives, lam, T, *, g0=None, alpha0=None, K_test=None, g0_test=None):
    r"""Variation-of-constants solution of the flow, seed 000 eqs. (4), (28), for piecewise-constant l′.

        g_T(x) = e^{−λT} (g₀(x) + ∫₀ᵀ Q(t) e^{λt} dt),   Q(t) = −Σᵢ p_{t,i} K(x, xᵢ),

    (in the C-form Q(t) = C Σ 𝟙(yᵢg_t(xᵢ) < 1) yᵢ K(x, xᵢ)), with p_t = segment_derivatives[k] on
    [segment_times[k], segment_times[k+1]) (the last segment extends to T).  The integral is
    exact: ∫_a^b e^{λt} dt = e^{λb}φ(λ, b − a), evaluated as Σ_k e^{−λ(T−b_k)} φ(λ, b_k − a_k) p_k
    to avoid overflow.  ``Trajectory.segment_*`` of :func:`gradient_flow` (``"events"``) are such
    data.

    Returns
    -------
    alpha_T, g_T, g_T_test

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import dynamics, kernels
    >>> X = np.random.default_rng(0).standard_normal((8, 3))
    >>> K, y = kernels.fc(X).ntk, np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> tr = dynamics.gradient_flow(K, y, "hinge", 0.1, [5.0])       # exact event-driven flow
    >>> _, g_T, _ = dynamics.continuous_closed_form(K, tr.segment_times, tr.segment_derivatives, 0.1, 5.0)
    >>> bool(np.allclose(g_T, tr.g_train[-1], rtol=0, atol=1e-12))   # eq. (28) reproduces it
    True
    """
    caller = "continuous_closed_form"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    T = check_real(T, "T", caller=caller, low=0.0)
    K, xp, _ = check_kernel(K, caller, psd=False, xp=namespace(K, segment_derivatives))
    n = K.shape[0]
    dtype = K.dtype
    P = xp.astype(check_array(segment_derivatives, "segment_derivatives", caller=caller, ndim=2, xp=xp, like=K), dtype)
    st = check_times(segment_times, caller, name="segment_times")
    if len(st) != P.shape[0] or P.shape[1] != n:
        raise InvalidParameterError(f"{caller}: segment_times (len {len(st)}) and segment_derivatives {tuple(P.shape)} disagree.")
    if st[0] != 0.0:
        raise InvalidParameterError(f"{caller}: segment_times must start at 0.")
    g0 = check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    dev = device_of(K)
    a0 = xp.zeros((n,), dtype=dtype, device=dev) if alpha0 is None else alpha0
    # segment weights e^{−λ(T−b_k)}·φ(λ, b_k − a_k) on the host (the segment times are host floats),
    # then one product with the derivatives: no host read per segment
    wts = []
    for k, a in enumerate(st):
        if a >= T:
            break
        b = min(st[k + 1], T) if k + 1 < len(st) else T
        wts.append(math.exp(-lam * (T - b)) * phi_scalar(lam, b - a))
    if wts:
        acc = xp.asarray(wts, dtype=dtype, device=dev) @ P[: len(wts), :]
    else:
        acc = xp.zeros((n,), dtype=dtype, device=dev)
    eT = math.exp(-lam * T)
    alpha_T = eT * a0 - acc
    g0_ = xp.zeros((n,), dtype=dtype, device=dev) if g0 is None else g0
    g_T = eT * g0_ + K @ alpha_T
    g_T_test = None
    if K_test is not None:
        g_T_test = K_test @ alpha_T + (0 if g0_test is None else eT * g0_test)
    return alpha_T, g_T, g_T_test
