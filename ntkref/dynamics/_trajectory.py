r"""The record of a training trajectory, and what the flow and the descent share.

- :class:`Trajectory`: g_t on the training points (rows of K) and on test points (rows of ``K_test``), the
  coefficients α_t and the weight w(t) of the initial function, g_t = w(t)·g₀ + K α_t (seed 000 eq. (15));
  :func:`assemble` builds one from recorded α_t with w(t) = e^{−λt};
- the input checks: :func:`check_kernel` (square, symmetric and positive semidefinite to rounding),
  :func:`check_targets`, :func:`check_vector`, :func:`check_test`, :func:`check_times`;
- :func:`reduction_scale`: c = 1 for ``reduction="sum"`` (eq. (7)), 1/n for ``"mean"`` (App. A eq. (11));
- :func:`phi`, :func:`phi_scalar`: φ(μ, t) = (1 − e^{−μt})/μ, the weight of the variation-of-constants
  solutions (eqs. (4), (28)), without cancellation;
- :func:`lprime`: l′ of :mod:`ntkref.losses` for inner loops (checked once by the callers);
- :func:`host`: a small array copied to the host for bookkeeping decisions.

``check_targets``, ``check_vector``, ``check_test`` and ``lprime`` are also used by the Dask engine
(ntkref/_engines/dask/_machines.py).  Conventions and errata: the package docstring (:mod:`ntkref.dynamics`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._lib.backend import device_of, namespace, to_numpy
from .._lib.compat import eigh
from .._lib.validation import InvalidParameterError, check_array, check_option, check_square


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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import dynamics
    >>> K, y = np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0])
    >>> tr = dynamics.gradient_flow(K, y, "hinge", 0.5, [0.0, 1.0, 2.0])
    >>> tr.method, tr.g_train.shape, tr.alpha.shape
    ('events', (3, 2), (3, 2))
    >>> bool(np.allclose(tr.g_train, tr.alpha @ K))   # eq. (15) with g₀ = 0: g_t = K α_t
    True
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
def check_kernel(K, caller, *, psd=True, xp=None):
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


def check_targets(loss, y, n, caller, xp, dtype, like=None):
    y = check_array(y, "y", caller=caller, ndim=1, xp=xp, like=like)
    if y.shape[0] != n:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have length n = {n}; got {y.shape[0]}.")
    if loss.classification and not bool(xp.all((y == 1) | (y == -1))):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} must contain only -1 and +1 labels for the {loss.name} loss."
        )
    return xp.astype(y, dtype)


def check_vector(v, name, n, caller, xp, dtype, like=None):
    if v is None:
        return None
    v = check_array(v, name, caller=caller, ndim=1, xp=xp, like=like)
    if v.shape[0] != n:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have length {n}; got {v.shape[0]}.")
    return xp.astype(v, dtype)


def check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=None):
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
    g0_test = check_vector(g0_test, "g0_test", m, caller, xp, dtype, like=like)
    return K_test, g0_test


def reduction_scale(reduction, n, caller):
    check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    return 1.0 if reduction == "sum" else 1.0 / n


def phi(mu, t, xp):
    """(1 − e^{−μt})/μ, = t at μ = 0, without cancellation (μ ≥ 0 array, t ≥ 0 scalar)."""
    x = mu * t
    small = x < 1e-5
    safe_mu = xp.where(small, xp.ones_like(mu), mu)
    xs = xp.where(small, x, xp.zeros_like(x))  # the series only where it is used (no overflow elsewhere)
    series = t * (1 - xs / 2 + xs * xs / 6)  # error (μt)³/24 < 5e-17 relative
    return xp.where(small, series, -xp.expm1(-x) / safe_mu)


def phi_scalar(mu, t):
    """(1 − e^{−μt})/μ for host floats μ ≥ 0, t ≥ 0 (the formulas of :func:`phi`, in float64)."""
    x = mu * t
    if x < 1e-5:
        return t * (1 - x / 2 + x * x / 6)
    return -math.expm1(-x) / mu


def check_times(times, caller, name="times"):
    # host-side bookkeeping: requested output times are a short list of floats (a scalar or a 1-d sequence)
    where = f"The {name!r} parameter of {caller}"
    if isinstance(times, (str, bytes)):
        raise InvalidParameterError(f"{where} must be a real number or a 1-d sequence of reals; got {times!r}.")
    try:
        if hasattr(times, "shape") and hasattr(times, "dtype"):  # an array of any namespace
            on_host = to_numpy(times)
            if on_host.ndim > 1:
                raise InvalidParameterError(f"{where} must be a scalar or 1-d; got shape {tuple(on_host.shape)}.")
            if on_host.dtype.kind not in "fiub":
                raise InvalidParameterError(f"{where} must hold real numbers; got dtype {on_host.dtype}.")
            ts = [float(t) for t in on_host.reshape(-1).tolist()]
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


def assemble(xp, ts, alphas, lam, K, g0, K_test, g0_test, method, g_train=None, **kw):
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


def lprime(loss, z, y, xp):
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


def host(a):
    """Host (Python) copy of a small array, for the event loop's bookkeeping decisions."""
    return to_numpy(a).tolist()
