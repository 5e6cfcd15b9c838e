r"""The regularised training of seed 003 Chapter 2: the network's regulariser, gradient descent and the flows.

- (2.15)–(2.17), Algorithm 1 line 7: the regulariser τ f(X_𝓘)ᵀΘ(X_𝓘, X_𝓘)⁻¹f(X_𝓘) of a network with Θ
  held constant, and its gradient 2τ J_𝓘ᵀΘ⁻¹f(X_𝓘) by one backward pass (:func:`ntk_regularizer`);
- (2.4)/(2.14), Algorithm 1: full-batch gradient descent on MSE + ζ·regulariser, with Approximation 1's
  sub-batches (:func:`train_regularized`, :class:`RegularizedTrajectory`);
- Theorem 2.2.1 in exact finite-dimensional form: gradient descent on a linear-in-parameters model
  converges to the KRR predictor (:func:`regularized_gd_linear`);
- (2.31)–(2.33), corrected exponent: the regularised gradient flow in closed form (:func:`regularized_flow`,
  :class:`Flow`); (2.34)–(2.36), corrected constant: the gap between the flows with Θ and K
  (:func:`flow_gap_bound`); (1.29): the linearised MSE flow (:func:`linearized_mse_flow`).

The checked linear algebra (``check_kernel``, ``pd_eigh``, ``sum_sq``, …) comes from ``_rkhs``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np  # host side only: seeded sub-batch draws and integer index bookkeeping, never the math

from .._lib.backend import device_of, is_array, namespace
from .._lib.compat import eigh
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ..nets import Antisymmetric, ConvNet, FullyConnected, HomogeneousNet, Linearized, Scaled
from ._rkhs import (
    as_generator,
    check_kernel,
    check_values,
    eps,
    max_abs,
    pd_eigh,
    subset_kernel,
    sum_sq,
    with_jitter,
)


# --------------------------------------------------------------------------- regulariser of a network
def _tree_axpy(a, x, y):
    """y + a·x over params-shaped structures (lists of (W, b) or tuples of such lists)."""
    if isinstance(y, tuple):
        return tuple(_tree_axpy(a, xi, yi) for xi, yi in zip(x, y))
    return [(Wy + a * Wx, None if by is None else by + a * bx) for (Wx, bx), (Wy, by) in zip(x, y)]


def _first_array(params):
    p = params
    while isinstance(p, (tuple, list)):
        p = p[0]
    return p


def ntk_regularizer(net, params, x_sub, *, tau=1.0, kernel=None, jitter=0.0):
    r"""The NTK function-norm regulariser of a network and its stop-gradient parameter gradient.

    R(θ) = τ f_θ(X_𝓘)ᵀ Θ(X_𝓘, X_𝓘)⁻¹ f_θ(X_𝓘)  (seed 003 Algorithm 1 line 7, (2.10); (2.4) with 𝒦).

    Θ is the empirical tangent kernel ``net.empirical_ntk(params, x_sub)`` at the current parameters
    (``kernel=None``) or a given constant matrix (e.g. the analytic NTK 𝒦(X_𝓘, X_𝓘) of (2.4)).  As in
    the dissertation (§2.6.1, "the inverse kernel matrix is not involved in auto-differentiation") Θ is held
    constant: the returned gradient is

        ∇_θ R = 2τ J_𝓘ᵀ Θ⁻¹ f(X_𝓘)   (one ``net.vjp`` with cotangent 2τΘ⁻¹f(X_𝓘)),

    which is *not* the full derivative of R when Θ depends on θ.  With the empirical Θ = J_𝓘J_𝓘ᵀ and
    J_𝓘 of full row rank, J_𝓘∇_θR = 2τ f(X_𝓘) exactly: in function space the regulariser is a pure decay
    (eq. (2.17)).

    Parameters
    ----------
    net : a network with ``apply``, ``vjp`` and ``empirical_ntk`` (e.g. :class:`ntkref.nets.FullyConnected`,
        :class:`~ntkref.nets.Antisymmetric`, :class:`~ntkref.nets.Linearized`).
    params : the network's parameters.
    x_sub : array, shape (b, d)
        The sub-batch X_𝓘 (b ≤ number of parameters, else Θ is singular; use ``jitter`` explicitly).
    tau : float ≥ 0
    kernel : None or array (b, b)
    jitter : float ≥ 0, added to Θ.

    Returns
    -------
    value : 0-d array
    grads : parameters-shaped gradient.
    """
    caller = "ntk_regularizer"
    tau = check_real(tau, "tau", caller=caller, low=0.0)
    first = _first_array(params)
    xp = namespace(first, x_sub)
    x_sub = check_array(x_sub, "x_sub", caller=caller, xp=xp, like=first, ndim=_input_ndim(net),
                        dtype=first.dtype if _is_real_array(first, xp) else None)
    if x_sub.ndim == 0 or x_sub.shape[0] == 0:
        raise InvalidParameterError(f"The 'x_sub' parameter of {caller} must hold at least one point; got shape "
                                    f"{tuple(x_sub.shape)}.")
    f = net.apply(params, x_sub)
    b = f.shape[0]
    if not bool(xp.all(xp.isfinite(f))):
        raise FloatingPointError(f"{caller}: the network's output on 'x_sub' overflows {f.dtype} (max |x_sub| = "
                                 f"{max_abs(x_sub, xp):.3g}); rescale x_sub or params.")
    if kernel is None:
        Theta = _empirical_ntk(net, params, x_sub, "x_sub", caller)
        name = "kernel Θ(x_sub, x_sub) (the empirical NTK)"
    else:
        Theta = check_kernel(kernel, "kernel", caller, xp, n=b, dtype=f.dtype)
        name = "kernel"
    Theta = with_jitter(Theta, jitter, caller, xp)
    w, V = pd_eigh(Theta, name, caller, xp)
    c = V @ ((xp.matrix_transpose(V) @ f) / w)
    value = tau * xp.sum(f * c)
    return value, net.vjp(params, x_sub, (2.0 * tau) * c)


def _input_ndim(net):
    """The number of input dimensions of a built-in net (2: (n, d); 4: images (n, c, h, w)); None if unknown."""
    while isinstance(net, (Antisymmetric, Linearized, Scaled)):
        net = net.net
    if isinstance(net, (FullyConnected, HomogeneousNet)):
        return 2
    return 4 if isinstance(net, ConvNet) else None


def _is_real_array(a, xp):
    return is_array(a) and xp.isdtype(a.dtype, "real floating")


def _empirical_ntk(net, params, x, x_name, caller):
    """Θ(x, x) = net.empirical_ntk(params, x), symmetrised; a failure (the NTK out of the dtype's range) names
    the points the kernel is taken on."""
    try:
        Theta = net.empirical_ntk(params, x)
    except (InvalidParameterError, FloatingPointError) as exc:
        raise type(exc)(f"{caller}: the tangent kernel Θ on {x_name!r} cannot be computed: {exc}") from exc
    return (Theta + namespace(Theta).matrix_transpose(Theta)) / 2


@dataclass
class RegularizedTrajectory:
    """What :func:`train_regularized` recorded (arrays of the parameters' namespace; R records)."""

    steps: object  # (R,) step indices
    objective: object  # (R,) MSE + ζ·penalty (the penalty as estimated at that step)
    mse: object  # (R,) (1/N)Σ(f − y)²
    penalty: object  # (R,) the (estimated) f(X)ᵀΘ⁻¹f(X); NaN when ζ = 0 (not needed, Θ may be singular)
    f_train: object  # (R, N)
    f_test: object  # (R, M) or None
    params: object  # final parameters


def train_regularized(net, params, x, y, *, zeta, lr, steps, kernel=None, subset_size=None, seed=None,
                      jitter=0.0, x_test=None, record_every=None):
    r"""Full-batch gradient descent on MSE + ζ·(NTK function norm) (seed 003 (2.4)/(2.14), Algorithm 1).

    Objective, with f = f_θ and N training points:

    .. math::  L(θ) = \frac1N \sum_i (f(x_i) - y_i)^2 + ζ\,\hat R(θ),\qquad
               \hat R = f(X)^\top Θ(X, X)^{-1} f(X)

    (``subset_size=None``) or Approximation 1's (N/b)·f(X_𝓘)ᵀΘ(X_𝓘, X_𝓘)⁻¹f(X_𝓘) with a fresh uniformly
    random sub-batch of b points each step (``subset_size=b``; the draw of each step is
    ``sorted(numpy.random.default_rng(seed).choice(N, b, replace=False))`` from one generator).  Θ is the empirical NTK
    at the current parameters (``kernel=None``, held constant in the gradient as in Algorithm 1) or a fixed
    (N, N) matrix on the training points, e.g. the analytic NTK 𝒦(X, X) of (2.4) (its sub-batch blocks are
    taken for ``subset_size``).  Update: θ ← θ − lr·(vjp(X, (2/N)(f − Y)) + ζ·vjp(X_𝓘, 2(N/b)Θ⁻¹f_𝓘)).

    In function space (lazy regime, eq. (2.17)): df/dt = −lr((2/N)Θ(f − Y) + 2ζf), whose limit is the KRR
    predictor Θ(Θ + ζN I)⁻¹Y (Theorem 2.2.1); with a fixed 𝒦 the stationary training values are exactly
    𝒦(𝒦 + ζNI)⁻¹Y whenever Θ̂ is invertible.

    Returns a :class:`RegularizedTrajectory` recorded every ``record_every`` steps (default: only the
    start and the end).
    """
    caller = "train_regularized"
    first = _first_array(params)
    xp = namespace(first)
    if not _is_real_array(first, xp):
        raise InvalidParameterError(
            f"The 'params' parameter of {caller} must hold real floating arrays (as returned by net.init); got "
            f"{getattr(first, 'dtype', type(first).__name__)}.")
    dtype = first.dtype
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=dtype, like=_first_array(params))
    n = x.shape[0]
    y = check_values(y, "y", caller, n, xp, dtype, ndim=1, like=x)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    every = steps if record_every is None else check_int(record_every, "record_every", caller=caller, low=1)
    every = max(every, 1)
    if x_test is not None:
        x_test = check_array(x_test, "x_test", caller=caller, ndim=2, xp=xp, dtype=dtype)
    K_fixed = None
    if kernel is not None:
        K_fixed = with_jitter(check_kernel(kernel, "kernel", caller, xp, n=n, dtype=dtype), jitter, caller, xp)
    b = n if subset_size is None else check_int(subset_size, "subset_size", caller=caller, low=1, high=n)
    rng = as_generator(seed)
    arange = xp.arange(n, device=device_of(x))

    rec = {"steps": [], "objective": [], "mse": [], "penalty": [], "f_train": [], "f_test": []}

    def penalty_and_cotangent(p, f):
        if b == n:
            idx_np = np.arange(n)
        else:
            idx_np = np.sort(rng.choice(n, size=b, replace=False))
        idx = xp.asarray(idx_np, dtype=xp.int64, device=device_of(x))
        f_sub = xp.take(f, idx)
        if K_fixed is None:
            x_sub = x if b == n else xp.take(x, idx, axis=0)
            Theta = with_jitter(_empirical_ntk(net, p, x_sub, "x", caller), jitter, caller, xp)
            name = "kernel Θ(x, x) (the empirical NTK)" if b == n else "kernel Θ(x[𝓘], x[𝓘]) (the empirical NTK)"
        else:
            Theta = K_fixed if b == n else subset_kernel(K_fixed, idx[None, :], xp)[0, ...]
            name = "kernel" if b == n else "kernel (a sub-batch block)"
        w, V = pd_eigh(Theta, name, caller, xp)
        c = V @ ((xp.matrix_transpose(V) @ f_sub) / w)
        scale = n / b
        pen = scale * xp.sum(f_sub * c)
        if b == n:
            cot = c
        else:  # scatter the sub-batch cotangent into the N training points
            onehot = xp.astype(idx[:, None] == arange[None, :], dtype)
            cot = xp.matmul(c[None, :], onehot)[0, :]
        return pen, (2.0 * scale) * cot

    def record(k, p, f, pen):
        mse = xp.mean((f - y) ** 2)
        rec["steps"].append(k)
        rec["mse"].append(mse)
        rec["penalty"].append(pen)
        rec["objective"].append(mse + zeta * pen if zeta > 0 else mse)
        rec["f_train"].append(f)
        if x_test is not None:
            rec["f_test"].append(net.apply(p, x_test))

    p = params
    for k in range(steps + 1):
        f = net.apply(p, x)
        _check_progress(f, y, k, caller, xp)
        if zeta > 0:
            pen, cot_reg = penalty_and_cotangent(p, f)
        else:
            pen = xp.asarray(float("nan"), dtype=dtype, device=device_of(x))
        if k % every == 0 or k == steps:
            record(k, p, f, pen)
        if k == steps:
            break
        cot = (2.0 / n) * (f - y)
        if zeta > 0:
            cot = cot + zeta * cot_reg
        p = _tree_axpy(-lr, net.vjp(p, x, cot), p)

    stack = lambda v: xp.stack(v) if v else None  # noqa: E731
    return RegularizedTrajectory(
        steps=xp.asarray(rec["steps"], device=device_of(x)), objective=stack(rec["objective"]), mse=stack(rec["mse"]),
        penalty=stack(rec["penalty"]), f_train=stack(rec["f_train"]), f_test=stack(rec["f_test"]), params=p,
    )


def _check_progress(f, y, k, caller, xp):
    """Finite or error at every step: the outputs and the squared error stay representable, else say why."""
    if bool(xp.all(xp.isfinite(f))) and math.isfinite(float(sum_sq(f - y, xp))):
        return
    if k == 0:
        raise FloatingPointError(
            f"{caller}: the squared error (f(x) − y)² at the initial parameters overflows {f.dtype} "
            f"(max |y| = {max_abs(y, xp):.3g}); rescale 'y' (or 'x'/'params').")
    raise FloatingPointError(f"{caller}: gradient descent diverged after {k} steps (the outputs or the squared "
                             f"error overflow); lower 'lr'.")


def regularized_gd_linear(features, y, zeta, *, lr, steps, features_test=None, theta0=None):
    r"""Gradient descent on the NTK-regularised objective for a linear-in-parameters model (Thm 2.2.1, exact form).

    Model f_θ(x) = φ(x)ᵀθ with features Φ = φ(X) of shape (N, P), P ≥ N and full row rank; its tangent
    kernel Θ = ΦΦᵀ does not depend on θ, so the regulariser's gradient needs no stop-gradient.  Objective
    (2.4) with 𝒦 = Θ: (1/N)‖Φθ − Y‖² + ζ(Φθ)ᵀΘ⁻¹(Φθ); update θ ← θ − lr·Φᵀ((2/N)(Φθ − Y) + 2ζΘ⁻¹Φθ).

    From θ₀ = 0 (default) the iterates stay in the row space of Φ and converge (for
    0 < lr < N/(λ_max(Θ) + ζN)) to θ* with φ(x)ᵀθ* = Θ(x, X)(Θ + ζNI)⁻¹Y **at every x** — the KRR
    predictor (2.5) with the model's own kernel.  In function space each step multiplies the error
    f − f_∞ by I − lr(2/N)(Θ + ζNI).

    Returns ``(theta, f_train, f_test)`` (``f_test`` None without ``features_test``).
    """
    caller = "regularized_gd_linear"
    xp = namespace(features, y)
    Phi = check_array(features, "features", caller=caller, ndim=2, xp=xp)
    n, P = Phi.shape
    y = check_values(y, "y", caller, n, xp, Phi.dtype, ndim=1, like=Phi)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    Theta = Phi @ xp.matrix_transpose(Phi)
    if not bool(xp.all(xp.isfinite(Theta))):
        raise FloatingPointError(
            f"{caller}: the tangent kernel Θ = ΦΦᵀ of 'features' overflows {Phi.dtype} (max |features| = "
            f"{max_abs(Phi, xp):.3g}); rescale the features.")
    w, V = pd_eigh((Theta + xp.matrix_transpose(Theta)) / 2, "features (Θ = ΦΦᵀ)", caller, xp)
    theta = xp.zeros(P, dtype=Phi.dtype, device=device_of(Phi)) if theta0 is None else \
        check_values(theta0, "theta0", caller, P, xp, Phi.dtype, ndim=1, like=Phi)
    PhiT = xp.matrix_transpose(Phi)
    for _ in range(steps):
        f = Phi @ theta
        reg = V @ ((xp.matrix_transpose(V) @ f) / w)
        theta = theta - lr * (PhiT @ ((2.0 / n) * (f - y) + (2.0 * zeta) * reg))
    if not bool(xp.all(xp.isfinite(theta))):  # finite or error: a diverged run is never returned as NaN/inf
        raise FloatingPointError(
            f"{caller}: gradient descent diverged (θ overflowed) with lr = {lr!r}; it converges for "
            f"0 < lr < N/(λ_max(Θ) + ζN) = {n / (float(xp.max(w)) + zeta * n):.6g}. Lower 'lr'.")
    f_test = None
    if features_test is not None:
        Pt = check_array(features_test, "features_test", caller=caller, ndim=2, xp=xp, dtype=Phi.dtype)
        if Pt.shape[1] != P:
            raise InvalidParameterError(f"features_test of {caller} must have {P} columns; got {Pt.shape[1]}.")
        f_test = Pt @ theta
    return theta, Phi @ theta, f_test


# --------------------------------------------------------------------------- closed-form flows
@dataclass
class Flow:
    """f_t on training points (T, N) and test points (T, M) or None, at ``times`` (T,)."""

    times: object
    train: object
    test: object


def _times(times, xp, dtype, device, caller):
    t = check_array(times, "times", caller=caller, ndim=(0, 1), xp=xp, dtype=dtype, device=device)
    t = xp.reshape(t, (-1,))
    if t.shape[0] > 0 and float(xp.min(t)) < 0:
        raise InvalidParameterError(f"The 'times' parameter of {caller} must be ≥ 0.")
    return t


def _phi1(z, xp):
    """(1 − e^{−z})/z, = 1 at z = 0 (stable through expm1)."""
    safe = xp.where(z > 0, z, xp.ones_like(z))
    return xp.where(z > 0, -xp.expm1(-safe) / safe, xp.ones_like(z))


def regularized_flow(K, Y, zeta, times, *, lr=1.0, f0=None, K_test=None, f0_test=None, printed=False):
    r"""Closed-form gradient flow of the NTK-regularised objective (seed 003 eqs. (2.31)–(2.33), corrected).

    The flow (2.32) with kernel K = 𝒦(X, X), rate η = ``lr`` and the mean convention of (2.4):

    .. math::  \frac{df}{dt} = -\frac{2η}{N}\big((K + ζN I) f - K Y\big),\qquad f(0) = f_0,

    has the solution (B = (2η/N)(K + ζNI))

    .. math::  f_t(X) = e^{-Bt} f_0 + (K + ζNI)^{-1} K (I - e^{-Bt}) Y,

    and at a test point x (the same flow for a model whose tangent kernel is K:
    df(x)/dt = −(2η/N)K(x, X)K⁻¹((K + ζNI)f(X) − KY))

    .. math::  f_t(x) = f_0(x) + K(x, X) K^{-1}(I - e^{-Bt})(f_∞ - f_0(X)),\quad f_∞ = (K + ζNI)^{-1}KY,

    which for f₀ = 0 is K(x, X)(K + ζNI)⁻¹(I − e^{−(2η/N)t(K + ζNI)})Y: (2.33) with the **corrected**
    exponent.  Both forms tend to the KRR predictor (2.5) as t → ∞.

    **Seed error**: (2.33) is printed with e^{−(2η/N)tK}; that does not solve (2.32) for ζ > 0 (it has the
    right t → ∞ limit but the wrong transient).  ``printed=True`` evaluates the printed formula (f₀ = 0
    only) so that the error can be shown (tests: it misses an ODE integration by ≫ the tolerance that the
    corrected form meets).

    ζ = 0 is (1.29) with Θ₀ = K and η replaced by 2η/N (see :func:`linearized_mse_flow`).

    A singular K (ζ = 0): eigenvalues w ≤ N·eps·w_max are exactly 0 (rounding cannot tell them from 0), so
    the flow stays in f₀ + range(K) at every t: along null(K) f(X) keeps f₀'s component and the test terms
    vanish (K(x, X)v = 0 when Kv = 0).  As t → ∞, f(X) → f₀(X) + P(Y − f₀(X)) with P the projection onto
    range(K), and f(x) → f₀(x) + K(x, X)K⁺(Y − f₀(X)) (the min-norm interpolant); duplicate points get the
    mean of their targets.

    Parameters
    ----------
    K : (N, N) symmetric PSD; it must be positive definite only when ``f0`` and ``K_test`` are both given
        with ζ > 0 (then K⁻¹ is needed).
    Y : (N,); zeta ≥ 0; times : scalar or (T,) non-negative; lr > 0.
    f0, f0_test : initial values on the training (N,) and test (M,) points (default 0).
    K_test : (M, N) kernel K(x, X) between test and training points.

    Returns
    -------
    Flow
        ``train`` (T, N), ``test`` (T, M) or None.  Computed from one eigendecomposition of K; accuracy
        ≈ cond(K + ζNI)·eps relative to max(‖Y‖, ‖f₀‖).
    """
    caller = "regularized_flow"
    xp = namespace(K, Y, f0, K_test, f0_test)
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Y = check_values(Y, "Y", caller, n, xp, K.dtype, ndim=1, like=K)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    t = _times(times, xp, K.dtype, device_of(K), caller)
    if printed and (f0 is not None or f0_test is not None):
        raise InvalidParameterError(f"printed=True of {caller}: (2.33) as printed assumes f0 = 0; do not pass f0.")
    f0 = xp.zeros_like(Y) if f0 is None else check_values(f0, "f0", caller, n, xp, K.dtype, ndim=1, like=K)
    nonzero_f0 = bool(xp.any(f0 != 0))
    ridge = zeta * n
    need_pd = K_test is not None and nonzero_f0 and ridge > 0
    w, V = pd_eigh(K, "K", caller, xp, need_pd=need_pd)
    # eigenvalues at rounding level (w ≤ n·eps·w_max, and the negatives of a PSD K) are exactly 0: eigh is
    # backward stable (its w are those of K + E, ‖E‖₂ ≲ n·eps·‖K‖₂), so such a direction cannot be told from
    # null(K); fitting it would move the flow out of range(K) at t ≳ N/(2η·n·eps·w_max) (duplicate points with
    # different targets got different outputs).  Along null(K) f stays f₀ and K(x, X)v = 0 (for a kernel,
    # K v = 0 ⇒ K(x, X) v = 0): the test terms there are exactly 0.
    in_range = w > n * eps(K.dtype, xp) * max(float(xp.max(w)), 0.0)
    w = xp.where(in_range, w, xp.zeros_like(w))
    c = 2.0 * lr / n
    Vt = xp.matrix_transpose(V)
    y_t, f0_t = Vt @ Y, Vt @ f0
    b = c * (w + ridge)
    bt = t[:, None] * (c * w if printed else b)[None, :]  # (T, N) exponents
    one_minus_E = -xp.expm1(-bt)
    den = w + ridge
    if float(xp.min(den)) <= 0:  # ζ = 0 and K singular: the (1 − e^{−bt})/w factors stay finite
        gain = c * t[:, None] * _phi1(bt, xp)  # (1 − e^{−cwt})/w
    else:
        gain = one_minus_E / den[None, :]
    if printed:
        train_t = (w[None, :] * gain) * y_t[None, :]
    else:
        train_t = xp.exp(-bt) * f0_t[None, :] + (w[None, :] * gain) * y_t[None, :]
    train = train_t @ Vt
    test = None
    if K_test is not None:
        Kt = check_array(K_test, "K_test", caller=caller, ndim=2, xp=xp, dtype=K.dtype)
        if Kt.shape[1] != n:
            raise InvalidParameterError(f"K_test of {caller} must have {n} columns; got {tuple(Kt.shape)}.")
        m = Kt.shape[0]
        coef = gain * y_t[None, :]
        if nonzero_f0:
            if ridge > 0:  # need_pd: every w > 10·n·eps·w_max
                inv_w = 1.0 / xp.where(in_range, w, xp.ones_like(w))
                coef = coef - (one_minus_E * inv_w[None, :]) * f0_t[None, :]
            else:
                coef = coef - (c * t[:, None] * _phi1(bt, xp)) * f0_t[None, :]
        coef = xp.where(in_range[None, :], coef, xp.zeros_like(coef))  # K(x, X)v = 0 on null(K)
        test = coef @ xp.matrix_transpose(Kt @ V)
        if f0_test is not None:
            test = test + check_values(f0_test, "f0_test", caller, m, xp, K.dtype, ndim=1, like=K)[None, :]
    elif f0_test is not None:
        raise InvalidParameterError(f"f0_test of {caller} needs K_test.")
    return Flow(times=t, train=train, test=test)


def flow_gap_bound(K, Theta, Y, zeta, *, printed=False):
    r"""Bound on the gap between the regularised flows with kernels Θ and K (seed 003 eqs. (2.34)–(2.36), corrected).

    With f_Θ solving (2.31) and f_K solving (2.32) from f₀ = 0 (same η; the bound does not depend on η),
    h = f_Θ − f_K solves h' = −Bh + (2η/N)(Θ − K)(Y − f_Θ), B = (2η/N)(K + ζNI), so

    .. math::  \sup_t \|h(t)\| \le \frac{\|Θ - K\|_2\,\sup_t\|Y - f_Θ(t)\|}{λ_{\min}(K) + ζN}
               \le \frac{\|Θ - K\|_2\,\|Y\|}{λ_{\min}(K) + ζN}

    (each eigencomponent of Y − f_Θ(t) lies between ζN/(λ + ζN) and 1 times that of Y, for PSD Θ).
    **Seed error**: the middle line of (2.36) integrates with ‖B‖ where λ_min(B) is needed; that gives
    ‖Θ − K‖‖Y‖/(λ_max(K) + ζN) (``printed=True``), which the flows violate when Θ − K acts along a small
    eigenvalue of K (tested).  ζ ≥ 0; ζ = 0 compares the unregularised flows and needs K positive definite
    (a singular K is refused).  Returns a float (an overflowing bound is a ``FloatingPointError``).
    """
    caller = "flow_gap_bound"
    xp = namespace(K, Theta, Y)
    K = check_kernel(K, "K", caller, xp)
    n = K.shape[0]
    Th = check_kernel(Theta, "Theta", caller, xp, n=n, dtype=K.dtype)
    Y = check_values(Y, "Y", caller, n, xp, K.dtype, ndim=1, like=K)
    zeta = check_real(zeta, "zeta", caller=caller, low=0.0)
    w, _ = pd_eigh(K, "K", caller, xp, shift=zeta * n)
    pd_eigh(Th, "Theta", caller, xp, need_pd=False)
    dw, _ = eigh(Th - K, xp)
    pert = float(xp.max(xp.abs(dw)))
    lam = float(xp.max(w)) if printed else float(xp.min(w))
    s = max_abs(Y, xp)  # ‖Y‖ = s·‖Y/s‖: no overflow of Σ Y² when ‖Y‖ is representable
    y_norm = s * math.sqrt(float(sum_sq(Y / s, xp))) if s > 0 else 0.0
    bound = pert * (y_norm / (max(lam, 0.0) + zeta * n))
    if not math.isfinite(bound):
        raise FloatingPointError(
            f"The result of {caller} overflows float: ‖Θ − K‖ = {pert:.3g} times ‖Y‖ = {y_norm:.3g} over "
            f"λ_min(K) + ζN = {max(lam, 0.0) + zeta * n:.3g}; rescale 'Y' (or 'K' and 'Theta').")
    return bound


def linearized_mse_flow(K, Y, times, *, lr=1.0, f0=None, K_test=None, f0_test=None, reduction="sum"):
    r"""The linearised network's MSE gradient flow (seed 003 eq. (1.29)).

    f_t(x) = f₀(x) − Θ₀(x, X)Θ₀⁻¹(I − e^{−η_eff Θ₀ t})(f₀(X) − Y) with

    - ``reduction="sum"``: loss Σᵢ ½(f(xᵢ) − yᵢ)², η_eff = η — (1.29) as printed;
    - ``reduction="mean"``: loss (1/N)Σᵢ ½(f(xᵢ) − yᵢ)² of (1.3), η_eff = η/N.

    **Seed convention**: (1.29) is stated after (1.3)'s 1/N mean but only holds for the sum (or with η/N).
    Evaluated as :func:`regularized_flow` with ζ = 0 and lr = η_eff·N/2; Θ₀ may be singular (its
    rounding-level eigenvalues count as 0: as t → ∞ the test outputs tend to f₀(x) + Θ₀(x, X)Θ₀⁺(Y − f₀(X))).
    """
    caller = "linearized_mse_flow"
    check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    xp = namespace(K)
    n = check_array(K, "K", caller=caller, ndim=2, xp=xp).shape[0]
    eta_eff = lr if reduction == "sum" else lr / n
    return regularized_flow(K, Y, 0.0, times, lr=eta_eff * n / 2.0, f0=f0, K_test=K_test, f0_test=f0_test)
