r"""Training dynamics of ℓ2-regularised kernel machines, continuous and discrete.

A kernel machine g(x) = ⟨β, Φ(x)⟩ with K(x, x′) = ⟨Φ(x), Φ(x′)⟩ trained on
L(β) = (λ/2)‖β‖² + c·Σᵢ l(g(xᵢ), yᵢ) (seed 000 eq. (7); c = 1 for
``reduction="sum"``, c = 1/n for ``"mean"`` as in App. A eq. (11)).  Starting
from β₀ with outputs g₀, every iterate has the form

    g_t(x) = w(t)·g₀(x) + Σᵢ α_{t,i} K(x, xᵢ),                             (15)

with w(t) = e^{−λt} (flow) or (1 − ηλ)^t (descent): the trajectories below
carry α, the weight w and the outputs on the training points (rows of K) and
on test points (rows of ``K_test``, shape (m, n)).

Seed 000 equations implemented here
-----------------------------------
- (3), (8), (26)–(27), (51): gradient flow dg/dt(x) = −λ g(x) − c Σᵢ l′(g(xᵢ), yᵢ) K(x, xᵢ),
  i.e. dα/dt = −λ α − c l′(g(X)) — :func:`gradient_flow`;
- (4), (28): its variation-of-constants solution
  g_T = e^{−λT}(g₀ + ∫₀ᵀ Q(t) e^{λt} dt) — :func:`continuous_closed_form`;
- (5), (12), (16), (36)–(37), (53): subgradient descent
  α_{t+1} = (1 − ηλ) α_t − η c l′(g_t(X)), and the minibatch variant of App. A.1
  (decay of all α, as Pegasos, or of the batch's α only, as the official code) —
  :func:`subgradient_descent`;
- (38), (14) (and (13), corrected): g_T = (1 − ηλ)^T g₀ + Σ_{t<T} (1 − ηλ)^{T−1−t} Q(t)
  — :func:`discrete_closed_form`;
- the limits printed in Thm 3.1/3.2, (4), (35), (40):
  C Σᵢ 𝟙(yᵢ g_T(xᵢ) < 1) yᵢ K(x, xᵢ) — :func:`svm_limit_printed` (see the errata below);
- seed 004 eq. (3): λ = 0 kernel regression u(t) = y + e^{−ηHt}(u₀ − y).

Conventions
-----------
- λ here is the λ of eq. (7); the C-form of Thm 3.1/3.2 (½‖β‖² + C Σ hinge) is λ = 1/C
  with time t_C = λ·t (dg/dt_C = −g + C Σ 𝟙(yg<1) y K).  Its rate e^{−2 t_C} is e^{−2λt} here.
- The squared loss is (y − z)² with l′ = 2(z − y) (no ½, Table 1): for λ = 0 the flow is
  u(t) = y + e^{−2cKt}(u₀ − y), seed 004's e^{−ηHt} with ηH = 2cK (seed 004 uses ½(u − y)²).
- The hinge subgradient in the *discrete* recursion is the strict 𝟙(yz < 1) of the paper and of
  :mod:`ntkref.losses`.  The *continuous* flow with a discontinuous l′ is the Filippov solution,
  which is the gradient flow of the convex function L along its minimal-norm subgradient
  (Brezis): a point whose margin the flow pushes back and forth slides along yᵢgᵢ = 1 with an
  effective l′ᵢ ∈ [−c, 0]·yᵢ.  This is the η → 0 limit of the discrete recursion.

Errata in seed 000 (tested in tests/test_dynamics.py)
-----------------------------------------------------
- Thm 3.1/3.2 limits (4), (35), (40): "lim g_T = C Σ 𝟙(yᵢ g_T(xᵢ) < 1) yᵢ K(x, xᵢ)" holds only if no
  training point sits on the margin at the optimum.  Margin support vectors carry fractional
  weights 0 < αᵢyᵢ < C, and the limit is the SVM dual solution (docs/errata.md).
- Eq. (13) multiplies Σ_t (1 − η̂λ)^{−t−1} Q(t) by η̂/n although Q(t) already contains η̂/n: the
  factor is counted twice.  (14) and (38) are right.
- Thm 3.1's rate L(β_t) − L(β*) ≤ e^{−2t}(L(β₀) − L(β*)) is for the C-form (λ = 1 in eq. (7)).
  With eq. (7)'s λ the PL constant is λ (λ-strong convexity) and the rate is e^{−2λt};
  e^{−2t} fails for λ < 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from . import losses as _losses
from ._lib import dispatch
from ._lib.backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from ._lib.compat import eigh
from ._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real, check_square
from ._lib.memory import check_memory

__all__ = [
    "Trajectory",
    "gradient_flow",
    "subgradient_descent",
    "discrete_closed_form",
    "continuous_closed_form",
    "svm_limit_printed",
]

_EXACT_LOSSES = ("squared", "hinge", "epsilon_insensitive")


# --------------------------------------------------------------------------------------------
# result container
# --------------------------------------------------------------------------------------------
@dataclass
class Trajectory:
    """Outputs of a kernel machine along training.

    Attributes
    ----------
    times : array, shape (T,)
        Flow times t (for :func:`subgradient_descent`: t = η·k, the flow time the step count
        k approximates).
    g_train : array, shape (T, n)
        g_t(xᵢ) on the training points.
    g_test : array, shape (T, m) or None
        g_t on the test points (rows of ``K_test``).
    alpha : array, shape (T, n)
        Kernel coefficients: g_t = g0_weight[t]·g₀ + K α_t (eq. (15)).
    g0_weight : array, shape (T,)
        e^{−λt} (flow) or (1 − ηλ)^k (descent): how much of the initial function g₀ remains.
    method : str
        ``"eigh"`` (squared loss, closed form), ``"events"`` (piecewise-constant l′, exact),
        ``"dopri5"`` (adaptive Dormand–Prince 5(4)), or ``"subgradient"``/``"sgd"``.
    n_events : int
        Number of margin/kink events (``"events"``) or accepted steps (``"dopri5"``).
    error_estimate : float
        ``"dopri5"``: sum over accepted steps of the max-norm local error estimate of α
        (a heuristic bound on the global error for this contracting flow); ``"eigh"`` and
        ``"events"``: 0.0 (exact up to rounding); descent: 0.0.
    event_times : tuple of float
        Times at which the set of active/sliding points changed (``"events"``).
    segment_times, segment_derivatives : array or None
        ``"events"`` only: the flow is exactly dα/dt = −λα − p_k on
        [segment_times[k], segment_times[k+1]) with p_k = segment_derivatives[k] (the effective,
        reduction-scaled l′, including the Filippov values of sliding points).
    steps : array of int or None
        Descent: the step index k of each record.
    subgradients : array, shape (steps, n) or None
        Descent with ``record_subgradients=True``: s_k with α_{k+1} = D_k α_k − η s_k
        (s_k = scaled l′, zero outside the minibatch).
    batch_masks : array of bool, shape (steps, n) or None
        Descent with ``decay="batch"`` and ``record_subgradients=True``: which α decayed.
    """

    times: object
    g_train: object
    g_test: object
    alpha: object
    g0_weight: object
    method: str
    n_events: int = 0
    error_estimate: float = 0.0
    event_times: tuple = ()
    segment_times: object = None
    segment_derivatives: object = None
    steps: object = None
    subgradients: object = None
    batch_masks: object = None
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------
def _check_kernel(K, caller, *, psd=True, xp=None):
    """Square, symmetric (to rounding) and, if ``psd``, positive semidefinite (to rounding)."""
    K = check_array(K, "K", caller=caller, ndim=2, xp=xp)
    xp = namespace(K)
    n = check_square(K, "K", caller)
    eps = float(xp.finfo(K.dtype).eps)
    scale = float(xp.max(xp.abs(K)))
    asym = float(xp.max(xp.abs(K - K.T)))
    # rounding in a kernel computed entrywise is a few ulps of the largest entry
    if asym > 100 * eps * max(scale, 1e-300):
        raise InvalidParameterError(
            f"The 'K' parameter of {caller} must be symmetric; max |K - K^T| = {asym:.3g} "
            f"(max |K| = {scale:.3g})."
        )
    K = (K + K.T) / 2
    evals = None
    if psd:
        evals, evecs = eigh(K, xp)
        lo = float(evals[0])
        hi = float(evals[-1])
        # eigenvalues of a PSD matrix perturbed by rounding: |error| <~ n eps ||K||
        if lo < -10 * n * eps * max(abs(hi), scale, 1e-300):
            raise InvalidParameterError(
                f"The 'K' parameter of {caller} must be positive semidefinite; its smallest "
                f"eigenvalue is {lo:.3g} (largest {hi:.3g})."
            )
        evals = (evals, evecs)
    return K, xp, evals


def _check_targets(loss, y, n, caller, xp, dtype, like=None):
    y = check_array(y, "y", caller=caller, ndim=1, xp=xp, like=like)
    if y.shape[0] != n:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have length n = {n}; got {y.shape[0]}.")
    if loss.classification and not bool(xp.all((y == 1) | (y == -1))):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} must contain only -1 and +1 labels for the {loss.name} loss."
        )
    return xp.astype(y, dtype)


def _check_vector(v, name, n, caller, xp, dtype, like=None):
    if v is None:
        return None
    v = check_array(v, name, caller=caller, ndim=1, xp=xp, like=like)
    if v.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have length {n}; got {v.shape[0]}.")
    return xp.astype(v, dtype)


def _check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=None):
    if K_test is None:
        if g0_test is not None:
            raise InvalidParameterError(f"'g0_test' of {caller} needs 'K_test'.")
        return None, None
    K_test = check_array(K_test, "K_test", caller=caller, ndim=2, xp=xp, like=like)
    if K_test.shape[1] != n:
        raise InvalidParameterError(
            f"The 'K_test' parameter of {caller} must have shape (m, {n}); got {tuple(K_test.shape)}."
        )
    K_test = xp.astype(K_test, dtype)
    m = K_test.shape[0]
    if g0 is not None and g0_test is None:
        raise InvalidParameterError(
            f"{caller}: 'g0' is given, so 'g0_test' (the initial outputs on the test points) is needed too."
        )
    g0_test = _check_vector(g0_test, "g0_test", m, caller, xp, dtype, like=like)
    return K_test, g0_test


def _reduction_scale(reduction, n, caller):
    check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    return 1.0 if reduction == "sum" else 1.0 / n


def _phi(mu, t, xp):
    """(1 − e^{−μt})/μ, = t at μ = 0, without cancellation (μ ≥ 0 array, t ≥ 0 scalar)."""
    x = mu * t
    small = x < 1e-5
    safe_mu = xp.where(small, xp.ones_like(mu), mu)
    xs = xp.where(small, x, xp.zeros_like(x))  # the series only where it is used (no overflow elsewhere)
    series = t * (1 - xs / 2 + xs * xs / 6)  # error (μt)³/24 < 5e-17 relative
    return xp.where(small, series, -xp.expm1(-x) / safe_mu)


def _phi_scalar(mu, t):
    """(1 − e^{−μt})/μ for host floats μ ≥ 0, t ≥ 0 (the formulas of :func:`_phi`, in float64)."""
    x = mu * t
    if x < 1e-5:
        return t * (1 - x / 2 + x * x / 6)
    return -math.expm1(-x) / mu


def _check_times(times, caller, name="times"):
    # host-side bookkeeping: requested output times are a short list of floats (a scalar or a 1-d sequence)
    where = f"The {name!r} parameter of {caller}"
    if isinstance(times, (str, bytes)):
        raise InvalidParameterError(f"{where} must be a real number or a 1-d sequence of reals; got {times!r}.")
    try:
        if hasattr(times, "shape") and hasattr(times, "dtype"):  # an array of any namespace
            host = to_numpy(times)
            if host.ndim > 1:
                raise InvalidParameterError(f"{where} must be a scalar or 1-d; got shape {tuple(host.shape)}.")
            if host.dtype.kind not in "fiub":
                raise InvalidParameterError(f"{where} must hold real numbers; got dtype {host.dtype}.")
            ts = [float(t) for t in host.reshape(-1).tolist()]
        else:
            ts = [float(t) for t in times]
    except InvalidParameterError:
        raise
    except TypeError:
        try:
            ts = [float(times)]
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"{where} must be a real number or a 1-d sequence of reals: {exc}") from exc
    except Exception as exc:  # strings inside a list, nested lists, ...
        raise InvalidParameterError(f"{where} must be a 1-d sequence of reals: {exc}") from exc
    if not ts:
        raise InvalidParameterError(f"{where} must not be empty.")
    for t in ts:
        if not math.isfinite(t) or t < 0:
            raise InvalidParameterError(f"{where} must contain finite times >= 0; got {t!r}.")
    if any(b < a for a, b in zip(ts, ts[1:])):
        raise InvalidParameterError(f"{where} must be nondecreasing.")
    return ts


# --------------------------------------------------------------------------------------------
# gradient flow
# --------------------------------------------------------------------------------------------
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
    ts = _check_times(times, caller)
    max_events = check_int(max_events, "max_events", caller=caller, low=1)
    max_steps = check_int(max_steps, "max_steps", caller=caller, low=1)
    K, xp, eig = _check_kernel(K, caller, psd=True, xp=namespace(K, y, g0, alpha0, K_test, g0_test))
    n = K.shape[0]
    dtype = K.dtype
    y = _check_targets(loss, y, n, caller, xp, dtype, like=K)
    g0 = _check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = _check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = _check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    c = _reduction_scale(reduction, n, caller)
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
            traj = _flow_events(max_events=max_events, **ctx)
        else:
            # explicit host step: the event loop is a sequence of small host decisions (which point
            # reaches a kink first, the pivoting of the sliding set); on a GPU each would be a
            # synchronisation.  The inputs go to the host once, the NumPy code runs there, and the
            # trajectory comes back to K's device: identical to the NumPy computation.
            host = {k: (to_numpy(v) if is_array(v) else v) for k, v in ctx.items() if k != "xp"}
            traj = _flow_events(max_events=max_events, xp=namespace(host["K"]), **host)
            traj = _trajectory_to(traj, xp, device_of(K))
    else:
        floor = 100 * float(xp.finfo(work).eps)
        if rtol < floor:
            raise InvalidParameterError(
                f"The 'rtol' parameter of {caller} must be >= 100·eps = {floor:.3g} of the working precision "
                f"({'float64' if work == xp.float64 else 'float32'}; float32 inputs are integrated in float64); got "
                f"rtol={rtol!r}. Below it the error control only sees rounding and the step size collapses."
            )
        traj = _flow_dopri(rtol=rtol, atol=atol, max_steps=max_steps, **ctx)
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


def _assemble(xp, ts, alphas, lam, K, g0, K_test, g0_test, method, g_train=None, **kw):
    alpha = xp.stack(alphas)
    times = xp.asarray(ts, dtype=K.dtype, device=device_of(K))
    w = xp.exp(-lam * times)
    if g_train is None:
        g_train = w[:, None] * g0[None, :] + alpha @ K
    else:
        g_train = xp.stack(g_train)
    g_test = None
    if K_test is not None:
        g_test = alpha @ K_test.T
        if g0_test is not None:
            g_test = g_test + w[:, None] * g0_test[None, :]
    return Trajectory(times=times, g_train=g_train, g_test=g_test, alpha=alpha, g0_weight=w, method=method, **kw)


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
        coef = (xp.exp(-mu * t) * a_init + 2 * c * b * _phi(mu, t, xp)
                - 2 * c * d * (math.exp(-lam * t) * _phi(2 * c * evals, t, xp)))
        alphas.append(V @ coef)
        # g = e^{−λt} g0 + V Λ coef: same arithmetic as K α but without forming K α's cancellation
        gtr.append(math.exp(-lam * t) * g0 + V @ (evals * coef))
    return _assemble(xp, times, alphas, lam, K, g0, K_test, g0_test, "eigh", g_train=gtr)


def _in_range(evals, n, xp):
    """Mask of the eigenvalues of a PSD K that are not 0 to rounding: Λ_k > n·eps·Λ_max."""
    top = float(xp.max(evals))
    return evals > n * float(xp.finfo(evals.dtype).eps) * max(top, 0.0)


# ---- event-driven flow for piecewise-constant l′ ---------------------------------------------
def _kinks(loss, y, c, xp):
    """Kink positions in z and the l′ values (scaled by c) on their left and right.

    Returns (kinks, left, right) each of shape (n, 2); unused slots have kink = +inf.
    """
    inf = xp.full(y.shape, math.inf, dtype=y.dtype, device=device_of(y))
    if loss.name == "hinge":
        # kink at z = y (y z = 1); for y = +1: l′ = −1 left, 0 right; y = −1: 0 left, +1 right
        left = xp.where(y > 0, -xp.ones_like(y), xp.zeros_like(y)) * c
        right = xp.where(y > 0, xp.zeros_like(y), xp.ones_like(y)) * c
        return (xp.stack([y, inf], axis=1), xp.stack([left, left], axis=1), xp.stack([right, right], axis=1))
    eps = loss.epsilon
    one = xp.ones_like(y) * c
    zero = xp.zeros_like(y)
    if eps == 0:
        return (xp.stack([y, inf], axis=1), xp.stack([-one, -one], axis=1), xp.stack([one, one], axis=1))
    return (xp.stack([y - eps, y + eps], axis=1), xp.stack([-one, zero], axis=1), xp.stack([zero, one], axis=1))


def _lprime(loss, z, y, xp):
    """l′(z, y) of :meth:`ntkref.losses.Loss.derivative` (same formulas and kink conventions)
    without re-validating z and y at every step of an inner loop (they are checked once by the
    callers).  Equality with ``loss.derivative`` is a test."""
    name = loss.name
    if name == "hinge":
        return xp.where(y * z < 1, -y, xp.zeros_like(z))
    if name == "squared_hinge":
        return -2 * y * xp.maximum(1 - y * z, 0.0)
    if name == "epsilon_insensitive":
        r = z - y
        return xp.where(xp.abs(r) > loss.epsilon, xp.sign(r), xp.zeros_like(r))
    if name == "squared":
        return 2 * (z - y)
    if name == "logistic":
        m = y * z
        e = xp.exp(-xp.abs(m))
        return -y * xp.where(m >= 0, e / (1 + e), 1 / (1 + e))
    return loss.derivative(z, y)  # pragma: no cover - a loss added later: the validated route


def _region_derivative(loss, g, y, c, xp):
    """l′ away from kinks (scaled by c)."""
    return c * _lprime(loss, g, y, xp)


def _host(a):
    """Host (Python) copy of a small array, for the event loop's bookkeeping decisions."""
    return to_numpy(a).tolist()


def _solve_box_lcp(Kmm, q, lo, hi, state, xp, max_iter):
    """Minimal-norm selection on the kink set: p ∈ [lo, hi] with v = −(q + Kmm p) and
    p = lo ⇒ v ≤ 0, p = hi ⇒ v ≥ 0, lo < p < hi ⇒ v = 0 (KKT of min ½pᵀKp + qᵀp on the box).

    Murty's least-index principal pivoting (finite for positive definite Kmm).  ``state`` is a
    host list of 'L', 'U', 'F' (initial guess).  Returns p (xp array), state, velocities v.
    """
    m = len(state)
    dev = device_of(q)
    lo_h = _host(lo)  # host copies for the pivoting decisions (bookkeeping)
    hi_h = _host(hi)
    pscale = max(max(abs(a) for a in lo_h), max(abs(a) for a in hi_h))
    kscale = float(xp.max(xp.abs(Kmm)))
    scale = float(xp.max(xp.abs(q))) + kscale * pscale
    tol = 1e3 * float(xp.finfo(q.dtype).eps) * max(scale, 1e-300) * max(m, 1)  # velocities v (units of q)
    # p has the units of l′ (not of q = λg + Kp): its tolerance is tol / max|Kmm|, scale-free under K → sK
    tol_p = tol / kscale if kscale > 0 else 1e3 * float(xp.finfo(q.dtype).eps) * max(pscale, 1e-300) * max(m, 1)
    for _ in range(max_iter):
        fixed_vals = [lo_h[i] if s == "L" else (hi_h[i] if s == "U" else 0.0) for i, s in enumerate(state)]
        p = xp.asarray(fixed_vals, dtype=q.dtype, device=dev)
        free = [i for i, s in enumerate(state) if s == "F"]
        if free:
            fi = xp.asarray(free, device=dev)
            Kff = xp.take(xp.take(Kmm, fi, axis=0), fi, axis=1)
            rhs = -xp.take(q + Kmm @ p, fi)
            try:
                pf = xp.linalg.solve(Kff, rhs[:, None])[:, 0]
                ok = bool(xp.all(xp.isfinite(pf)))
            except Exception:  # exactly singular (duplicated points on the kink)
                ok = False
            if not ok:
                # consistent singular system: the minimum-norm solution splits the weight equally
                pf = xp.linalg.pinv(Kff) @ rhs
            # scatter pf into p without fancy setitem: build via a selection matrix
            sel = xp.take(xp.eye(m, dtype=q.dtype, device=dev), fi, axis=0)  # (|F|, m)
            p = p + pf @ sel
        v = -(q + Kmm @ p)
        ph = _host(p)
        vh = _host(v)
        bad = None
        for i, s in enumerate(state):
            if s == "F" and ph[i] < lo_h[i] - tol_p:
                bad = (i, "L")
            elif s == "F" and ph[i] > hi_h[i] + tol_p:
                bad = (i, "U")
            elif s == "L" and vh[i] > tol:
                bad = (i, "F")
            elif s == "U" and vh[i] < -tol:
                bad = (i, "F")
            if bad is not None:
                break
        if bad is None:
            # clip rounding-level excursions of free values into the box
            p = xp.minimum(xp.maximum(p, lo), hi)
            return p, state, v, tol
        state = list(state)
        state[bad[0]] = bad[1]
    raise RuntimeError(
        "gradient_flow: the sliding-mode (box LCP) pivoting did not terminate; the kernel submatrix "
        "of the points on a kink is probably singular (duplicated points)."
    )


def _flow_events(K, y, loss, lam, c, g0, a0, K_test, g0_test, xp, times, max_events):
    n = K.shape[0]
    dtype = K.dtype
    dev = device_of(K)
    kinks, left, right = _kinks(loss, y, c, xp)
    eps = float(xp.finfo(dtype).eps)
    # host bookkeeping: which points sit on which kink (index 0/1), or None
    on_kink = [None] * n
    # host copy of the kink positions (n × 2 floats) for the per-event decisions
    kh = _host(kinks)
    alpha = a0
    g = g0 + K @ a0
    t = 0.0
    out_alpha, out_g = [], []
    seg_t, seg_p, event_times = [], [], []
    ti = 0
    n_events = 0
    gscale = max(1.0, float(xp.max(xp.abs(g))), float(xp.max(xp.abs(y))))
    # points that start on a kink (e.g. g0 = y for the hinge) are treated like event points
    gh = _host(g)
    for i in range(n):
        for k in (0, 1):
            if on_kink[i] is None and abs(gh[i] - kh[i][k]) <= 8 * eps * gscale:
                on_kink[i] = k
    g = xp.where(xp.asarray([ok is not None for ok in on_kink], device=dev),
                 xp.asarray([kh[i][ok] if ok is not None else 0.0 for i, ok in enumerate(on_kink)], dtype=dtype, device=dev), g)
    # time scale of the dynamics: |dgᵢ/dt| ≤ λ|gᵢ| + c‖K‖_∞ (|l′| ≤ 1), so points whose kink times differ by
    # less than 64·eps·tscale are within 64·eps·max(|gᵢ|, 1) of their kinks together (scale-covariant:
    # flow(sK, λ, t) = flow(K, λ/s, s·t) snaps the same points)
    rate = lam + c * float(xp.max(xp.sum(xp.abs(K), axis=1)))
    tscale = 1.0 / rate if rate > 0 else 0.0
    state_cache = {}
    leaving = {}
    while True:
        # ---- resolve the configuration at time t: derivatives p of all points ------------------
        p_region = _region_derivative(loss, g, y, c, xp)
        if leaving:
            # a point that just left a kink still sits on it (to the last bit) at an immediate
            # next event; l′ there is the one-sided value it left with, not the kink convention
            gh = _host(g)
            for i in list(leaving):
                if gh[i] != kh[i][leaving[i][0]]:
                    del leaving[i]
            if leaving:
                lm = xp.asarray([i in leaving for i in range(n)], device=dev)
                lv = xp.asarray([leaving[i][1] if i in leaving else 0.0 for i in range(n)], dtype=dtype, device=dev)
                p_region = xp.where(lm, lv, p_region)
        M = [i for i in range(n) if on_kink[i] is not None]
        if M:
            mi = xp.asarray(M, device=dev)
            ks = xp.asarray([on_kink[i] for i in M], device=dev)
            # left/right values at each point's kink (gather along axis 1 via a one-hot mask)
            onehot = xp.astype(xp.stack([ks == 0, ks == 1], axis=1), dtype)
            lo = xp.sum(xp.take(left, mi, axis=0) * onehot, axis=1)
            hi = xp.sum(xp.take(right, mi, axis=0) * onehot, axis=1)
            selM = xp.take(xp.eye(n, dtype=dtype, device=dev), mi, axis=0)  # (|M|, n) selection
            notM = 1 - xp.sum(selM, axis=0)
            p_N = p_region * notM
            Kmm = xp.take(xp.take(K, mi, axis=0), mi, axis=1)
            gM = xp.take(g, mi)
            q = lam * gM + xp.take(K @ p_N, mi)
            init = [state_cache.get(i, "F") for i in M]
            pM, st, vM, tolv = _solve_box_lcp(Kmm, q, lo, hi, init, xp, max_iter=50 * (len(M) + 1) ** 2)
            p = p_N + pM @ selM
            # points on a kink at a bound with a strictly signed velocity leave it; the rest slide
            vh = _host(vM)
            for j, i in enumerate(M):
                if (st[j] == "L" and vh[j] < -tolv) or (st[j] == "U" and vh[j] > tolv):
                    leaving[i] = (on_kink[i], float(pM[j]))
                    on_kink[i] = None
                    state_cache.pop(i, None)
                else:
                    state_cache[i] = st[j]
        else:
            p = p_region
        sliding = [i for i in range(n) if on_kink[i] is not None]
        Kp = K @ p
        seg_t.append(t)
        seg_p.append(p)
        # ---- next event: first time a moving point reaches a kink ------------------------------
        if lam > 0:
            rest = -Kp / lam  # each g_i moves monotonically from g_i towards rest_i
            up = rest > g
            # nearest kink strictly beyond g in the direction of motion
            k_up = xp.where(kinks > g[:, None], kinks, xp.full_like(kinks, math.inf))
            k_up = xp.min(k_up, axis=1)
            k_dn = xp.where(kinks < g[:, None], kinks, xp.full_like(kinks, -math.inf))
            k_dn = xp.max(k_dn, axis=1)
            target = xp.where(up, k_up, k_dn)
            reach = xp.where(up, target < rest, target > rest) & xp.isfinite(target)
            denom = target - rest
            safe = xp.where(reach, denom, xp.ones_like(denom))
            ratio = xp.where(reach, (g - target) / safe, xp.zeros_like(g))  # > 0 where reach
            tau = xp.where(reach, xp.log1p(ratio) / lam, xp.full_like(g, math.inf))
        else:
            vel = -Kp
            up = vel > 0
            k_up = xp.min(xp.where(kinks > g[:, None], kinks, xp.full_like(kinks, math.inf)), axis=1)
            k_dn = xp.max(xp.where(kinks < g[:, None], kinks, xp.full_like(kinks, -math.inf)), axis=1)
            target = xp.where(up, k_up, k_dn)
            reach = (vel != 0) & xp.isfinite(target)
            safe = xp.where(reach, vel, xp.ones_like(vel))
            tau = xp.where(reach, (target - g) / safe, xp.full_like(g, math.inf))
        if sliding:
            sl = xp.asarray(sliding, device=dev)
            mask = xp.sum(xp.take(xp.eye(n, dtype=dtype, device=dev), sl, axis=0), axis=0) > 0
            tau = xp.where(mask, xp.full_like(tau, math.inf), tau)
        tau_min = float(xp.min(tau))
        t_next = t + tau_min
        # ---- record requested times inside [t, t_next] -----------------------------------------
        while ti < len(times) and times[ti] <= t_next:
            dt = times[ti] - t
            e = math.exp(-lam * dt)
            ph = _phi(xp.asarray([lam], dtype=dtype, device=dev), dt, xp)[0]
            out_alpha.append(e * alpha - ph * p)
            out_g.append(e * g - ph * Kp)
            ti += 1
        if ti >= len(times):
            break
        # ---- advance to the event ---------------------------------------------------------------
        n_events += 1
        if n_events > max_events:
            raise RuntimeError(f"gradient_flow: more than max_events={max_events} events before t={times[-1]}.")
        e = math.exp(-lam * tau_min)
        ph = float(_phi(xp.asarray([lam], dtype=dtype, device=dev), tau_min, xp)[0])
        alpha = e * alpha - ph * p
        g = e * g - ph * Kp
        t = t_next
        event_times.append(t)
        # snap the point(s) that reached a kink (ties within rounding of the time) onto it
        hit = tau <= tau_min * (1 + 64 * eps) + 64 * eps * tscale
        hit = hit & xp.isfinite(tau)
        g = xp.where(hit, target, g)
        hh = _host(hit)
        tgt = _host(target)
        for i in range(n):
            if hh[i]:
                on_kink[i] = 0 if tgt[i] == kh[i][0] else 1
                state_cache.pop(i, None)
                leaving.pop(i, None)
        # points on a kink (sliding or just arrived) sit exactly on it: their velocity is zero to
        # rounding, snapping removes the drift
        on = xp.asarray([ok is not None for ok in on_kink], device=dev)
        kval = xp.asarray([kh[i][ok] if ok is not None else 0.0 for i, ok in enumerate(on_kink)], dtype=dtype, device=dev)
        g = xp.where(on, kval, g)
    traj = _assemble(xp, times, out_alpha, lam, K, g0, K_test, g0_test, "events", g_train=out_g,
                     n_events=n_events, event_times=tuple(event_times),
                     segment_times=xp.asarray(seg_t, dtype=dtype, device=dev), segment_derivatives=xp.stack(seg_p))
    return traj


# ---- adaptive Dormand–Prince 5(4) --------------------------------------------------------------
_DP_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_DP_E = tuple(b5 - b4 for b5, b4 in zip(_DP_B5, _DP_B4))


def _flow_dopri(K, y, loss, lam, c, g0, a0, K_test, g0_test, xp, times, rtol, atol, max_steps):
    def rhs(t, a):
        g = math.exp(-lam * t) * g0 + K @ a
        return -lam * a - c * _lprime(loss, g, y, xp)

    a = a0
    t = 0.0
    k1 = rhs(t, a)
    # initial step (Hairer–Nørsett–Wanner II.4 heuristic, simplified)
    d0 = float(xp.max(xp.abs(a))) + atol
    d1 = float(xp.max(xp.abs(k1))) + atol
    # time scale 1/(λ + c‖K‖_∞) (1 for K = 0, λ = 0): the floors of h are relative to it, so that
    # flow(sK, λ, t) = flow(K, λ/s, s·t) takes the same steps for any s
    rate = lam + c * float(xp.max(xp.sum(xp.abs(K), axis=1)))
    tscale = max(1.0 / rate, 1e-300) if rate > 0 else 1.0
    h = 0.01 * d0 / d1 if d1 > 1e-300 else 1e-3 * tscale
    h = max(h, 1e-8 * tscale)
    out = []
    err_sum = 0.0
    n_steps = 0
    ti = 0
    while ti < len(times) and times[ti] <= t:
        out.append(a)
        ti += 1
    while ti < len(times):
        t_goal = times[ti]
        h = min(h, t_goal - t)
        ks = [k1]
        for s in range(1, 7):
            inc = ks[0] * _DP_A[s][0]
            for j in range(1, s):
                if _DP_A[s][j] != 0.0:
                    inc = inc + ks[j] * _DP_A[s][j]
            ks.append(rhs(t + _DP_C[s] * h, a + h * inc))
        a_new = a + h * sum((ks[j] * _DP_B5[j] for j in range(7) if _DP_B5[j] != 0.0), xp.zeros_like(a))
        err = h * sum((ks[j] * _DP_E[j] for j in range(7)), xp.zeros_like(a))
        sc = atol + rtol * xp.maximum(xp.abs(a), xp.abs(a_new))
        # one host read per step: the scaled error (step control) and the max error together
        # (atol = 0: a coordinate at 0 with no error contributes 0, not 0/0; with an error, inf: the step shrinks)
        pos = sc > 0
        scaled = xp.where(err == 0, xp.zeros_like(err),
                          xp.where(pos, xp.abs(err) / xp.where(pos, sc, xp.ones_like(sc)), xp.full_like(sc, math.inf)))
        en, err_max = _host(xp.stack([xp.max(scaled), xp.max(xp.abs(err))]))
        if en <= 1.0:
            err_sum += err_max
            t = t + h if t + h < t_goal else t_goal
            a = a_new
            k1 = ks[6]  # FSAL
            n_steps += 1
            while ti < len(times) and times[ti] <= t:
                out.append(a)
                ti += 1
            fac = 5.0 if en == 0 else min(5.0, 0.9 * en ** (-0.2))
            h = h * fac
        else:
            h = h * max(0.2, 0.9 * en ** (-0.2))
        if n_steps > max_steps or h < 1e-14 * max(tscale, t):
            raise RuntimeError(f"gradient_flow (dopri5): step size underflow or max_steps exceeded at t={t}.")
    return _assemble(xp, times, out, lam, K, g0, K_test, g0_test, "dopri5", n_events=n_steps, error_estimate=err_sum)


# --------------------------------------------------------------------------------------------
# discrete dynamics
# --------------------------------------------------------------------------------------------
def subgradient_descent(
    K,
    y,
    loss,
    lam,
    lr,
    steps,
    *,
    batch_size=None,
    seed=None,
    K_test=None,
    g0=None,
    g0_test=None,
    alpha0=None,
    decay="all",
    reduction="sum",
    record_every=1,
    record_subgradients=False,
    check_psd=True,
):
    r"""(Sub)gradient descent on eq. (7) in kernel form: seed 000 eqs. (5), (12), (16), (37).

    Full batch (``batch_size=None``):

        α_{k+1} = (1 − ηλ) α_k − η c l′(g_k(X), y),     g_k = (1 − ηλ)^k g₀ + K α_k,

    c = 1 (``"sum"``, eq. (5)/(37) with λ = 1/C) or 1/n (``"mean"``, App. A eqs. (12), (16)).
    The hinge subgradient is the paper's strict −y𝟙(yg < 1).

    Minibatch (App. A.1): at step k a batch B_k of ``batch_size`` distinct indices is drawn
    (``numpy.random.default_rng(seed)``, without replacement within a step, independently
    across steps); the gradient term is η c′ Σ_{i∈B} l′ with c′ = 1/|B| (``"mean"``) or n/|B|
    (``"sum"``, an unbiased estimate of the full sum), applied to the batch's α only, and the
    decay (1 − ηλ) multiplies

    - ``decay="all"``: every α (Pegasos, the subgradient of the minibatch objective);
    - ``decay="batch"``: only the batch's α — the official code
      ``alpha[ids] = (1 − lr·lam)·alpha[ids] + (lr/|B|)·(Y·g < 1)·Y``.

    Seed 000 Figure 1 (full batch, n = 128, η̂ ∈ {0.1, 0.01}, λ = 0.001) is ``reduction="mean"``
    (either decay); Figure A.1 (batch 64, η̂ = 1, λ = 0.001) is ``reduction="mean",
    decay="batch"`` — the paper's "λ = 0.064" is 64·0.001 (sum convention per batch).

    Parameters
    ----------
    K, y, loss, lam, K_test, g0, g0_test, alpha0, reduction
        As in :func:`gradient_flow`.
    lr : float
        η, in (0, 1/λ) so that 1 − ηλ ∈ (0, 1) (Thm 3.2's η ∈ (0, 1) in the C-form); any η > 0
        when λ = 0.  Step sizes above the stability limit of a smooth loss (full batch:
        η(λ + c·β_l·λ_max(K)) < 2) are *not* refused — the recursion is computed as asked, and a
        growing but finite trajectory is returned — but a run whose iterates overflow to inf/NaN
        raises :class:`~ntkref._lib.validation.InvalidParameterError` naming ``lr`` (divergence is
        detected once, on the recorded iterates and the final step, not at every step).
    steps : int
        Number of updates.
    batch_size : int, optional
    seed : int or numpy.random.Generator, optional
    decay : {"all", "batch"}
        ``g0`` (a β₀ outside the span) is only defined with ``"all"``.
    record_every : int
        Record every this many steps (step 0 and the last step are always recorded).
    record_subgradients : bool
        Keep s_k (and batch masks) for :func:`discrete_closed_form`.
    check_psd : bool
        Check that K is PSD (an O(n³) eigendecomposition; skip it for large trusted kernels).

    Returns
    -------
    Trajectory
        ``times = η·steps``; ``g0_weight = (1 − ηλ)^k``.

    Accuracy
    --------
    Plain recursion: rounding grows like k·eps·‖K‖‖α‖.  Note the hinge's 𝟙(yg < 1) is a
    discontinuous test; points within rounding of the margin may flip between backends.
    """
    engine = dispatch.subgradient_descent.lookup(K)
    if engine is not None:  # a Dask K: one block mat-vec per step (ntkref/_engines/dask)
        return engine(**{k: v for k, v in locals().items() if k != "engine"})
    caller = "subgradient_descent"
    loss = _losses.get(loss) if not isinstance(loss, _losses.Loss) else loss
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    hi = None if lam == 0 else 1.0 / lam
    lr = check_real(lr, "lr", caller=caller, low=0.0, high=hi, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    record_every = check_int(record_every, "record_every", caller=caller, low=1)
    check_option(decay, "decay", ("all", "batch"), caller=caller)
    K, xp, _ = _check_kernel(K, caller, psd=bool(check_psd), xp=namespace(K, y, g0, alpha0, K_test, g0_test))
    n = K.shape[0]
    dtype = K.dtype
    y = _check_targets(loss, y, n, caller, xp, dtype, like=K)
    g0 = _check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = _check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = _check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    c, cb, batch_size, rng = _sgd_schedule(g0, decay, reduction, n, steps, record_every, K_test, record_subgradients,
                                           batch_size, seed, caller, K, "record fewer steps (a larger record_every) "
                                           "or use float32")
    d = 1.0 - lr * lam
    dev = device_of(K)
    zeros = xp.zeros((n,), dtype=dtype, device=dev)
    g0_ = zeros if g0 is None else g0
    alpha = zeros if alpha0 is None else alpha0
    w = 1.0
    index = xp.arange(n, device=dev) if batch_size is not None else None
    rec_k, rec_a, rec_w, subs, masks = [], [], [], [], []
    for k in range(steps + 1):
        if k % record_every == 0 or k == steps:
            rec_k.append(k)
            rec_a.append(alpha)
            rec_w.append(w)
        if k == steps:
            break
        g = w * g0_ + K @ alpha
        lp = _lprime(loss, g, y, xp)
        if batch_size is None:
            s = cb * lp
            alpha = d * alpha - lr * s
            if record_subgradients:
                subs.append(s)
        else:
            ids = rng.choice(n, size=batch_size, replace=False)
            ids_x = xp.asarray(ids, device=dev)  # the host-drawn batch, copied explicitly
            mask = xp.astype(xp.any(index[None, :] == ids_x[:, None], axis=0), dtype)  # 0/1 indicator of B
            s = cb * lp * mask
            if decay == "all":
                alpha = d * alpha - lr * s
            else:
                alpha = (1 - lr * lam * mask) * alpha - lr * s
            if record_subgradients:
                subs.append(s)
                masks.append(mask > 0)
        w = w * d if (batch_size is None or decay == "all") else w
    steps_arr = xp.asarray(rec_k, device=dev)
    times = xp.asarray([lr * k for k in rec_k], dtype=dtype, device=dev)
    alpha_arr = xp.stack(rec_a)
    warr = xp.asarray(rec_w, dtype=dtype, device=dev)
    g_train = warr[:, None] * g0_[None, :] + alpha_arr @ K
    g_test = None
    if K_test is not None:
        g_test = alpha_arr @ K_test.T
        if g0_test is not None:
            g_test = g_test + warr[:, None] * g0_test[None, :]
    _check_diverged(caller, loss, lr, lam, c if batch_size is None else cb, xp,
                    alpha_arr, g_train, g_test, *(subs[-1:] if record_subgradients else []))
    return Trajectory(
        times=times, g_train=g_train, g_test=g_test, alpha=alpha_arr, g0_weight=warr,
        method="subgradient" if batch_size is None else "sgd", steps=steps_arr,
        subgradients=(xp.stack(subs) if subs else xp.zeros((0, n), dtype=dtype, device=dev)) if record_subgradients else None,
        batch_masks=(xp.stack(masks) if masks else None) if (record_subgradients and decay == "batch" and batch_size) else None,
    )


def _check_diverged(caller, loss, lr, lam, c, xp, *arrays):
    """Finite or error: iterates that overflowed (a step size beyond the stability limit) raise, naming ``lr``."""
    if all(a is None or bool(xp.all(xp.isfinite(a))) for a in arrays):
        return
    beta = getattr(loss, "smoothness", None)
    hint = (f" For the smooth {loss.name} loss gradient descent is stable only for "
            f"lr·(lam + {c:.3g}·{beta:.3g}·λ_max(K)) < 2." if beta is not None else "")
    raise InvalidParameterError(
        f"The 'lr' parameter of {caller}: the iteration diverged (iterates overflowed to inf/NaN) with "
        f"lr = {lr!r}, lam = {lam!r}; use a smaller step size (or rescale K and y).{hint}"
    )


def _sgd_schedule(g0, decay, reduction, n, steps, record_every, K_test, record_subgradients, batch_size, seed,
                  caller, like, ways_out):
    """What both subgradient-descent paths (dense, Dask) check and derive before the recursion: g0 only with
    decay='all', the memory of the records (``like``: the array whose device is asked), and the loss scales
    c (full batch) and cb (a batch's scale n/|B|, or 1/|B| for the mean) with the seeded batch generator.
    Returns (c, cb, batch_size, rng); rng is None for the full batch."""
    if g0 is not None and decay == "batch":
        raise InvalidParameterError(
            f"{caller}: 'g0' (outputs of a β₀ outside the span of the Φ(x_i)) has no defined decay with "
            "decay='batch'; pass alpha0 (coefficients) or use decay='all'."
        )
    c = _reduction_scale(reduction, n, caller)
    n_rec = steps // record_every + 2
    m_test = 0 if K_test is None else K_test.shape[0]
    check_memory(n_rec * (2 * n + m_test) * (2 if record_subgradients else 1),
                 f"The recorded trajectory ({n_rec} records of 'steps'/'record_every' x n = {n})", caller, like,
                 ways_out=ways_out)
    if batch_size is None:
        return c, c, None, None
    batch_size = check_int(batch_size, "batch_size", caller=caller, low=1, high=n)
    import numpy as np  # host-side: the random batch indices (seeded, reproducible)

    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return c, (1.0 / batch_size) if reduction == "mean" else (n / batch_size), batch_size, rng


def discrete_closed_form(K, subgradients, lam, lr, *, g0=None, alpha0=None, K_test=None, g0_test=None, batch_masks=None):
    r"""Variation-of-constants solution of the discrete dynamics: seed 000 eqs. (38), (14).

    With Q(t) = −η Σᵢ s_{t,i} K(x, xᵢ) (s_t the recorded, reduction-scaled subgradient; for the
    hinge in the C-form Q(t) = ηC Σ 𝟙(yᵢg_t(xᵢ) < 1) yᵢ K(x, xᵢ)),

        g_T(x) = (1 − ηλ)^T g₀(x) + Σ_{t=0}^{T−1} (1 − ηλ)^{T−1−t} Q(t)           (38), (14)
               = (1 − ηλ)^T (g₀(x) + Σ_{t=0}^{T−1} (1 − ηλ)^{−t−1} Q(t)),

    evaluated in the first form (the second overflows for large T).  App. A's eq. (13) prints an
    extra factor η̂/n in front of the sum although its Q(t) already contains η̂/n: that form is
    wrong (off by the factor η̂/n); (14) and (38) are right.

    With ``batch_masks`` (``decay="batch"``), coefficient i decays only at the steps where it is in
    the batch: α_{T,i} = (1 − ηλ)^{N_i(0,T)} α_{0,i} − η Σ_t (1 − ηλ)^{N_i(t+1,T)} s_{t,i}, with
    N_i(a, b) the number of steps in [a, b) whose batch contains i.

    Parameters
    ----------
    K : array, shape (n, n)
    subgradients : array, shape (T, n)
        ``Trajectory.subgradients`` of :func:`subgradient_descent`.
    lam, lr : float
    g0, alpha0, K_test, g0_test : optional
    batch_masks : array of bool, shape (T, n), optional

    Returns
    -------
    alpha_T : array (n,), g_T : array (n,), g_T_test : array (m,) or None

    Accuracy
    --------
    Equal to the iterated recursion up to rounding (≈ T·eps·‖K‖·max‖α‖).  A result that
    overflows (inf/NaN) raises :class:`~ntkref._lib.validation.InvalidParameterError` naming ``lr``.
    """
    caller = "discrete_closed_form"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, high=None if lam == 0 else 1 / lam, closed="neither")
    K, xp, _ = _check_kernel(K, caller, psd=False, xp=namespace(K, subgradients))
    n = K.shape[0]
    dtype = K.dtype
    S = check_array(subgradients, "subgradients", caller=caller, ndim=2, xp=xp, like=K)
    if S.shape[1] != n:
        raise InvalidParameterError(f"'subgradients' of {caller} must have shape (T, {n}); got {tuple(S.shape)}.")
    S = xp.astype(S, dtype)
    T = S.shape[0]
    g0 = _check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = _check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = _check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    d = 1.0 - lr * lam
    dev = device_of(K)
    a0 = xp.zeros((n,), dtype=dtype, device=dev) if alpha0 is None else alpha0
    if batch_masks is None:
        # weights (1 − ηλ)^{T−1−t}, t = 0..T−1
        expo = xp.asarray([float(T - 1 - t) for t in range(T)], dtype=dtype, device=dev)
        wts = d ** expo if T else xp.zeros((0,), dtype=dtype, device=dev)
        alpha_T = (d ** T) * a0 - lr * (wts @ S if T else xp.zeros((n,), dtype=dtype, device=dev))
        w_T = d ** T
    else:
        Mk = xp.astype(check_array(batch_masks, "batch_masks", caller=caller, ndim=2, xp=xp, like=K) != 0, dtype)
        if tuple(Mk.shape) != (T, n):
            raise InvalidParameterError(f"'batch_masks' of {caller} must have shape {(T, n)}; got {tuple(Mk.shape)}.")
        # N_i(t+1, T) = Σ_{u>t} M_{u,i}: reverse cumulative sum, exclusive
        total = xp.sum(Mk, axis=0)
        incl = xp.cumulative_sum(Mk, axis=0) if hasattr(xp, "cumulative_sum") else _cumsum(Mk, xp)
        after = total[None, :] - incl  # steps strictly after t
        alpha_T = d ** total * a0 - lr * xp.sum((d ** after) * S, axis=0)
        if g0 is not None:
            raise InvalidParameterError(f"{caller}: 'g0' has no defined decay with batch masks; pass alpha0.")
        w_T = 1.0
    g0_ = xp.zeros((n,), dtype=dtype, device=dev) if g0 is None else g0
    g_T = w_T * g0_ + K @ alpha_T
    g_T_test = None
    if K_test is not None:
        g_T_test = K_test @ alpha_T + (0 if g0_test is None else w_T * g0_test)
    if not all(a is None or bool(xp.all(xp.isfinite(a))) for a in (alpha_T, g_T, g_T_test)):
        raise InvalidParameterError(
            f"The 'lr' parameter of {caller}: the closed form overflowed (inf/NaN) with lr = {lr!r} and the given "
            "'subgradients'; use a smaller step size or rescale the subgradients."
        )
    return alpha_T, g_T, g_T_test


def _cumsum(a, xp):
    rows, acc = [], xp.zeros_like(a[0, :])
    for i in range(a.shape[0]):
        acc = acc + a[i, :]
        rows.append(acc)
    return xp.stack(rows)


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
    """
    caller = "continuous_closed_form"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    T = check_real(T, "T", caller=caller, low=0.0)
    K, xp, _ = _check_kernel(K, caller, psd=False, xp=namespace(K, segment_derivatives))
    n = K.shape[0]
    dtype = K.dtype
    P = xp.astype(check_array(segment_derivatives, "segment_derivatives", caller=caller, ndim=2, xp=xp, like=K), dtype)
    st = _check_times(segment_times, caller, name="segment_times")
    if len(st) != P.shape[0] or P.shape[1] != n:
        raise InvalidParameterError(f"{caller}: segment_times (len {len(st)}) and segment_derivatives {tuple(P.shape)} disagree.")
    if st[0] != 0.0:
        raise InvalidParameterError(f"{caller}: segment_times must start at 0.")
    g0 = _check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = _check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = _check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    dev = device_of(K)
    a0 = xp.zeros((n,), dtype=dtype, device=dev) if alpha0 is None else alpha0
    # segment weights e^{−λ(T−b_k)}·φ(λ, b_k − a_k) on the host (the segment times are host floats),
    # then one product with the derivatives: no host read per segment
    wts = []
    for k, a in enumerate(st):
        if a >= T:
            break
        b = min(st[k + 1], T) if k + 1 < len(st) else T
        wts.append(math.exp(-lam * (T - b)) * _phi_scalar(lam, b - a))
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


def svm_limit_printed(K_eval, y, g_T, C):
    r"""The limit printed in seed 000 Thm 3.1/3.2, eqs. (4), (35), (40):

        lim_{T→∞} g_T(x) "=" C Σᵢ 𝟙(yᵢ g_T(xᵢ) < 1) yᵢ K(x, xᵢ).

    **Valid only when no training point lies on the margin** (yᵢ g*(xᵢ) = 1) at the optimum.
    The derivation (35) assumes Q(t) becomes constant, which fails when points slide along the
    margin: there the limit has fractional weights 0 < αᵢyᵢ < C (the SVM dual solution) and this
    formula is off by O(C·K) (40 points, 9 on the margin: off by 1.17; tests/test_dynamics.py).  Use
    :func:`gradient_flow` or an exact solver for the actual limit.

    Parameters
    ----------
    K_eval : array, shape (m, n)
        K(x, xᵢ) for the evaluation points x (``K`` itself for the training points).
    y : array (n,) of ±1
    g_T : array (n,)
        Outputs on the training points used in the indicator.
    C : float > 0
        1/λ.

    Returns
    -------
    array, shape (m,)
    """
    caller = "svm_limit_printed"
    K_eval = check_array(K_eval, "K_eval", caller=caller, ndim=2)
    xp = namespace(K_eval)
    n = K_eval.shape[1]
    C = check_real(C, "C", caller=caller, low=0.0, closed="neither")
    y = _check_targets(_losses.get("hinge"), y, n, caller, xp, K_eval.dtype, like=K_eval)
    g_T = _check_vector(g_T, "g_T", n, caller, xp, K_eval.dtype, like=K_eval)
    active = xp.astype(y * g_T < 1, K_eval.dtype)
    return C * (K_eval @ (active * y))
