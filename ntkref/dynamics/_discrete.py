r"""Discrete dynamics: (sub)gradient descent in kernel form and its closed forms.

- Seed 000 eqs. (5), (12), (16), (36)–(37), (53): α_{t+1} = (1 − ηλ) α_t − η c l′(g_t(X)), full batch or
  the minibatch variant of App. A.1 (decay of all α, as Pegasos, or of the batch's α only, as the official
  code) — :func:`subgradient_descent`;
- eqs. (38), (14) (and (13), corrected): g_T = (1 − ηλ)^T g₀ + Σ_{t<T} (1 − ηλ)^{T−1−t} Q(t) —
  :func:`discrete_closed_form`;
- the limit printed in Thm 3.1/3.2, eqs. (4), (35), (40) (valid only without margin support vectors) —
  :func:`svm_limit_printed`.

:func:`sgd_schedule` (the checks and scales before the recursion) and :func:`check_diverged` (the
overflow check naming ``lr``) are also used by the Dask engine (ntkref/_engines/dask/_machines.py).
Conventions and errata: the package docstring (:mod:`ntkref.dynamics`).
"""
from __future__ import annotations

import numpy as np

from .. import losses as _losses
from .._lib import dispatch
from .._lib.backend import device_of, namespace
from .._lib.memory import check_memory
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ._trajectory import (
    Trajectory,
    check_kernel,
    check_targets,
    check_test,
    check_vector,
    lprime,
    reduction_scale,
)


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
        Check that K is PSD (an O(n³) eigendecomposition; skip it for large trusted kernels).  True or False
        only: any other value (None included) is refused.

    Returns
    -------
    Trajectory
        ``times = η·steps``; ``g0_weight = (1 − ηλ)^k``.

    Accuracy
    --------
    Plain recursion: rounding grows like k·eps·‖K‖‖α‖.  Note the hinge's 𝟙(yg < 1) is a
    discontinuous test; points within rounding of the margin may flip between backends.

    Examples
    --------
    Squared loss, λ = 0, K = I, η = 0.1: g_{k+1} = g_k − 2η(g_k − y), so g_k = (1 − (1 − 2η)ᵏ)·y.

    >>> import numpy as np
    >>> from ntkref import dynamics
    >>> K, y = np.eye(2), np.array([1.0, -1.0])
    >>> tr = dynamics.subgradient_descent(K, y, "squared", 0.0, 0.1, 10)
    >>> print(float(tr.times[-1]), np.round(tr.g_train[-1], 6).tolist(), f"{1 - 0.8**10:.6f}")
    1.0 [0.892626, -0.892626] 0.892626
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
    if not isinstance(check_psd, bool):  # documented as a bool: None, 0, "yes" ... are refused, never read as False
        raise InvalidParameterError(f"The 'check_psd' parameter of {caller} must be one of True, False. Got "
                                    f"{check_psd!r} instead.")
    K, xp, _ = check_kernel(K, caller, psd=check_psd, xp=namespace(K, y, g0, alpha0, K_test, g0_test))
    n = K.shape[0]
    dtype = K.dtype
    y = check_targets(loss, y, n, caller, xp, dtype, like=K)
    g0 = check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
    c, cb, batch_size, rng = sgd_schedule(g0, decay, reduction, n, steps, record_every, K_test, record_subgradients,
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
        lp = lprime(loss, g, y, xp)
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
    check_diverged(caller, loss, lr, lam, c if batch_size is None else cb, xp,
                    alpha_arr, g_train, g_test, *(subs[-1:] if record_subgradients else []))
    return Trajectory(
        times=times, g_train=g_train, g_test=g_test, alpha=alpha_arr, g0_weight=warr,
        method="subgradient" if batch_size is None else "sgd", steps=steps_arr,
        subgradients=(xp.stack(subs) if subs else xp.zeros((0, n), dtype=dtype, device=dev)) if record_subgradients else None,
        batch_masks=(xp.stack(masks) if masks else None) if (record_subgradients and decay == "batch" and batch_size) else None,
    )


def check_diverged(caller, loss, lr, lam, c, xp, *arrays):
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


def sgd_schedule(g0, decay, reduction, n, steps, record_every, K_test, record_subgradients, batch_size, seed,
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
    c = reduction_scale(reduction, n, caller)
    n_rec = steps // record_every + 2
    m_test = 0 if K_test is None else K_test.shape[0]
    check_memory(n_rec * (2 * n + m_test) * (2 if record_subgradients else 1),
                 f"The recorded trajectory ({n_rec} records of 'steps'/'record_every' x n = {n})", caller, like,
                 ways_out=ways_out)
    if batch_size is None:
        return c, c, None, None
    batch_size = check_int(batch_size, "batch_size", caller=caller, low=1, high=n)
    # host-side: the random batch indices (seeded, reproducible)
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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import dynamics, kernels
    >>> X = np.random.default_rng(0).standard_normal((8, 3))
    >>> K, y = kernels.fc(X).ntk, np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> tr = dynamics.subgradient_descent(K, y, "hinge", 0.1, 0.5, 50, record_subgradients=True)
    >>> _, g_T, _ = dynamics.discrete_closed_form(K, tr.subgradients, 0.1, 0.5)   # eq. (38)
    >>> bool(np.allclose(g_T, tr.g_train[-1], rtol=0, atol=1e-12))                # = the recursion
    True
    """
    caller = "discrete_closed_form"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, high=None if lam == 0 else 1 / lam, closed="neither")
    K, xp, _ = check_kernel(K, caller, psd=False, xp=namespace(K, subgradients))
    n = K.shape[0]
    dtype = K.dtype
    S = check_array(subgradients, "subgradients", caller=caller, ndim=2, xp=xp, like=K)
    if S.shape[1] != n:
        raise InvalidParameterError(f"'subgradients' of {caller} must have shape (T, {n}); got {tuple(S.shape)}.")
    S = xp.astype(S, dtype)
    T = S.shape[0]
    g0 = check_vector(g0, "g0", n, caller, xp, dtype, like=K)
    alpha0 = check_vector(alpha0, "alpha0", n, caller, xp, dtype, like=K)
    K_test, g0_test = check_test(K_test, g0, g0_test, n, caller, xp, dtype, like=K)
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

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import dynamics, machines
    >>> K, y = np.eye(2), np.array([1.0, -1.0])
    >>> g = K @ machines.fit(K, y, "hinge", 2.0)       # λ = 2: g* = y/2, no point on the margin
    >>> np.round(g, 6).tolist(), dynamics.svm_limit_printed(K, y, g, C=1 / 2.0).tolist()
    ([0.5, -0.5], [0.5, -0.5])
    >>> # λ = 0.5: g* = y (machines.fit(K, y, "hinge", 0.5)), both points on the margin: the printed limit is wrong
    >>> dynamics.svm_limit_printed(K, y, y, C=1 / 0.5).tolist()
    [0.0, 0.0]
    """
    caller = "svm_limit_printed"
    K_eval = check_array(K_eval, "K_eval", caller=caller, ndim=2)
    xp = namespace(K_eval)
    n = K_eval.shape[1]
    C = check_real(C, "C", caller=caller, low=0.0, closed="neither")
    y = check_targets(_losses.get("hinge"), y, n, caller, xp, K_eval.dtype, like=K_eval)
    g_T = check_vector(g_T, "g_T", n, caller, xp, K_eval.dtype, like=K_eval)
    active = xp.astype(y * g_T < 1, K_eval.dtype)
    return C * (K_eval @ (active * y))
