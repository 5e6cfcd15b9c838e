r"""Normalized margins of homogeneous models and the weak-regularization limit (seed 002 §4, App. B.3, B.4, C).

Seed 002 (Wei, Lee, Liu, Ma, *Regularization Matters*) shows that for an
a-positive-homogeneous model f(x; cΘ) = c^a f(x; Θ) the minimizer Θ_λ of the
weakly regularized cross-entropy has the max normalized margin as λ → 0.
This module implements, with one sample a row (``x`` of shape (n, d)):

- :func:`margins`, :func:`normalized_margin` — γ(Θ) = min_i y_i f(x_i; Θ)/‖Θ‖^a
  (§4, binary labels ±1) and its multi-class form (C.2)
  min_i [f_{y_i} − max_{j≠y_i} f_j]/‖Θ‖^a (integer labels 0..l−1; the paper's
  [l] is 1-based).
- :func:`regularized_loss`, :func:`regularized_loss_and_grad` — eq. (4.1)
  (1/n)Σ log(1 + e^{−y_i f_i}) + λ‖Θ‖^r, eq. (C.1) (mean cross-entropy) and
  the regression loss of Thm B.9 (1/n)Σ(f_i − y_i)² + λ‖Θ‖², ‖·‖ = ‖·‖_F.
- :func:`train_regularized` — full-batch gradient descent, or L-BFGS (SciPy on
  the host) for precise minimizers.
- :func:`linear_max_margin` — γ* of linear models by an independent QP
  (binary SVM, Crammer–Singer multi-class), solved exactly as a least-distance
  program through NNLS (Lawson & Hanson).
- :func:`margin_certificate` — the two-sided certificate of the proof of
  Thm C.1 ((C.4)–(C.7)): for a global minimizer,
  γ* − log(n(l−1)/ln 2)/‖Θ_λ‖^a ≤ γ_λ ≤ γ* (the lower side when
  ‖Θ_λ‖^aγ* > log(n(l−1)/ln 2)), and
  λ‖Θ_λ‖^r ≤ L_λ(Θ_λ) ≤ min_B [log(1 + (l−1)e^{−B^aγ*}) + λB^r];
  (valid for the architecture's true γ* and a global minimizer; see
  :class:`MarginCertificate` for what a γ* estimate does to each side);
  :func:`margin_lower_bound` — γ(Θ) ≥ −log(e^{n ℓ̂(Θ)} − 1)/‖Θ‖^a for ANY Θ
  with n ℓ̂(Θ) < log 2 (ℓ̂ the mean cross-entropy; sharper than the
  x/(1+x) step of the proof of Thm C.2).
- :func:`relu_features`, :func:`circle_directions`, :func:`l1_svm` —
  the ℓ1-SVM (B.14) over ReLU features of a fixed dictionary of directions by
  linear programming; Prop. B.10: γ*,m = γ_ℓ1/2 for m ≥ n + 1 (see
  :func:`ntkref.nets.balanced_two_layer` for the network).
- :func:`l1_interpolation` — min ‖μ‖₁ s.t. ⟨μ, φ_relu(x_i)⟩ = y_i, whose value
  doubled is ‖Θ*,m‖² of (B.13) (Thm B.9's limit, m ≥ n).
- :func:`width4_loss_upper_bound` — U(λ) = min_{s≥0} log(1+e^{−s}) + 8λs, the
  regularized loss of the rescaled width-4 net of §2 on any sample of 𝒟.

Errata of seed 002 handled here (each documented where it matters, tests show them):

- γ* is defined with "max_{‖Θ‖<1}" (§4 and C.1): over the open ball the max
  is not attained; it is max_{‖Θ‖≤1}.
- Eq. (4.3) prints the denominator q^{\frac{q−1}{2}\sqrt n}; it is
  q^{(q−1)/2}·√n (as in (D.1)).
- Thm B.9 prints "‖Θ_λ,m‖₂ → ‖Θ*,m‖₂²": both sides are squared norms.
- Footnote 6 says a unit-norm Θ corresponds to "‖μ‖ = 2": it is ‖μ‖₁ ≤ 1/2.
- Proof of Thm C.1, (C.3): the inner sum index is j, and the lower bound
  (C.5) uses Σ_{j≠y_i} exp(…) ≥ exp(−M^aγ_Θ) for the worst sample (the text
  writes "= exp γ_Θ").
- Proof of Thm C.2: "log(x) ≥ x/(1+x) ∀ x ≥ −1" is false (x = 1/2:
  log ½ < ⅓; log(−½) is undefined); the inequality used is
  log(1 + x) ≥ x/(1 + x) for x > −1, applied at x = exp(−γ'‖Θ'‖^a) > 0.
  The conclusion stands (:func:`margin_lower_bound` uses the exact inverse
  instead).

LPs and QPs are solved on the host with SciPy (HiGHS, NNLS) as reference
solvers; inputs of any namespace are converted with ``to_numpy`` and results
returned in the caller's namespace.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._lib.backend import asarray, device_of, is_array, namespace, to_numpy
from ._lib.validation import InvalidParameterError, check_array, check_int, check_labels, check_option, check_real
from ._lib.memory import check_memory

__all__ = [
    "LinearMaxMargin",
    "L1Solution",
    "MarginCertificate",
    "TrainingRecord",
    "circle_directions",
    "l1_interpolation",
    "l1_svm",
    "linear_max_margin",
    "margin_certificate",
    "margin_lower_bound",
    "margins",
    "normalized_margin",
    "regularized_loss",
    "regularized_loss_and_grad",
    "relu_features",
    "train_regularized",
    "width4_loss_upper_bound",
]


# --------------------------------------------------------------------------- labels and margins
def _check_targets(y, n, n_outputs, loss, caller, xp, dtype, like=None):
    """Targets for ``loss``; Python lists are created on the device of ``like`` (the net's outputs or x)."""
    if like is not None and y is not None and not is_array(y):
        try:
            y = asarray(y, like=like)
        except Exception:  # noqa: BLE001 - let the checks below report what is wrong with y
            pass
    if loss == "squared":
        if n_outputs != 1:
            raise InvalidParameterError(f"{caller}: the squared loss (Thm B.9) needs a scalar-output net.")
        return check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,), dtype=dtype)
    if n_outputs == 1:
        y = check_labels(check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,), dtype=dtype), "y",
                         caller=caller)
        return y
    yy = xp.asarray(y) if is_array(y) else xp.asarray(y, device=None if like is None else device_of(like))
    if yy.ndim != 1 or yy.shape[0] != n:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},); got {tuple(yy.shape)}.")
    if xp.isdtype(yy.dtype, "real floating"):
        if not bool(xp.all(yy == xp.round(yy))):
            raise InvalidParameterError(f"The 'y' parameter of {caller} must hold integer class labels.")
        yy = xp.astype(yy, xp.int64)
    elif not xp.isdtype(yy.dtype, "integral"):
        raise InvalidParameterError(f"The 'y' parameter of {caller} must hold integer class labels 0..{n_outputs - 1}.")
    if n and not bool(xp.all((yy >= 0) & (yy < n_outputs))):
        raise InvalidParameterError(f"The 'y' parameter of {caller} must hold class labels in 0..{n_outputs - 1}.")
    return yy


def _onehot(y, n_classes, xp, dtype, like):
    classes = xp.arange(n_classes, device=device_of(like))
    return xp.astype(y[:, None] == xp.astype(classes, y.dtype)[None, :], dtype)


def _margins_from_outputs(f, y, xp):
    """y_i f_i (binary, f of shape (n,)) or f_{y_i} − max_{j≠y_i} f_j (f of shape (n, l))."""
    if f.ndim == 1:
        return y * f
    oh = _onehot(y, f.shape[1], xp, f.dtype, f)
    f_true = xp.sum(oh * f, axis=1)
    others = xp.where(oh > 0, xp.asarray(-xp.inf, dtype=f.dtype, device=device_of(f)), f)
    return f_true - xp.max(others, axis=1)


def margins(net, params, x, y):
    r"""Unnormalized margins per sample (seed 002 §4, (C.2)).

    Binary (``net.n_outputs == 1``, y ∈ {−1, +1}): y_i f(x_i; Θ).
    Multi-class (l = n_outputs ≥ 2, y ∈ {0, …, l−1}): f_{y_i}(x_i) − max_{j≠y_i} f_j(x_i).
    Returns shape (n,).
    """
    caller = "margins"
    f = net.apply(params, x)
    xp = namespace(f)
    y = _check_targets(y, f.shape[0], net.n_outputs, "logistic", caller, xp, f.dtype, like=f)
    return _margins_from_outputs(f, y, xp)


def normalized_margin(net, params, x, y):
    r"""Normalized margin γ(Θ) = min_i margin_i(Θ) / ‖Θ‖_F^a, a = ``net.homogeneity`` (seed 002 §4, (C.2)).

    Equal to min_i y_i f(x_i; Θ/‖Θ‖_F) by a-homogeneity, hence invariant under
    Θ → cΘ (c > 0).  The max over ‖Θ‖_F ≤ 1 is γ* (the seed writes ‖Θ‖ < 1 in §4
    and C.1 *[erratum]*: over the open ball the supremum is not attained).
    Returns a 0-d array; Θ = 0 is refused.
    """
    nrm = net.norm(params)
    if not bool(nrm > 0):
        raise InvalidParameterError("normalized_margin: the parameters are all zero (the margin is undefined).")
    m = margins(net, params, x, y)
    return namespace(m).min(m) / nrm ** net.homogeneity


# --------------------------------------------------------------------------- losses
_LOSSES = ("logistic", "squared")


def _data_loss_and_dloss(f, y, loss, xp):
    """Mean data loss and its derivative with respect to the outputs (same shape as f)."""
    n = f.shape[0]
    if loss == "squared":
        r = f - y
        return xp.sum(r * r) / n, (2.0 / n) * r
    if f.ndim == 1:
        t = y * f
        per = xp.logaddexp(xp.zeros_like(t), -t)  # log(1 + e^{−t})
        sig = xp.exp(-xp.logaddexp(xp.zeros_like(t), t))  # σ(−t) = 1/(1 + e^{t})
        return xp.sum(per) / n, (-1.0 / n) * y * sig
    # cross-entropy (C.1) written as softplus(logsumexp_{j≠y}(f_j − f_y)): exact for tiny losses, and for l = 2 it
    # is exactly log(1 + e^{−margin}), the binary logistic loss of the margin
    oh = _onehot(y, f.shape[1], xp, f.dtype, f)
    f_true = xp.sum(oh * f, axis=1)
    g = f - f_true[:, None]
    neg_inf = xp.asarray(-xp.inf, dtype=f.dtype, device=device_of(f))
    g_others = xp.where(oh > 0, neg_inf, g)
    gmax = xp.max(g_others, axis=1)
    e = xp.where(oh > 0, xp.zeros_like(g), xp.exp(g_others - gmax[:, None]))
    lse = gmax + xp.log(xp.sum(e, axis=1))
    per = xp.logaddexp(xp.zeros_like(lse), lse)
    # softmax p_j = exp(g_j − lse_all), lse_all = softplus(lse); p_y − 1 = −Σ_{j≠y} p_j (no cancellation)
    p = xp.where(oh > 0, xp.zeros_like(g), xp.exp(g_others - per[:, None]))
    p_true = -xp.sum(p, axis=1)
    d = xp.where(oh > 0, p_true[:, None] * oh, p)
    return xp.sum(per) / n, d / n


def _sq_norm(params, xp):
    return sum(xp.sum(W * W) for W in params)


def regularized_loss(net, params, x, y, lam, *, r=2.0, loss="logistic"):
    r"""L_λ(Θ) of seed 002: data loss (mean) + λ‖Θ‖_F^r, a 0-d array.

    - ``loss="logistic"``, scalar output: eq. (4.1) (1/n)Σ log(1 + exp(−y_i f(x_i; Θ))) + λ‖Θ‖^r
      (eq. (2.2) is r = 2); ``n_outputs = l ≥ 2``: the cross-entropy (C.1)
      −(1/n)Σ log softmax(f(x_i))_{y_i} + λ‖Θ‖^r, labels 0..l−1.
    - ``loss="squared"``: Thm B.9's (1/n)Σ(f(x_i; Θ) − y_i)² + λ‖Θ‖^r (r = 2 there).

    Computed stably (log(1 + e^{−t}) via logaddexp, the cross-entropy as
    softplus(logsumexp_{j≠y}(f_j − f_y))): relative accuracy ~(1 + |margin|)·ε,
    the conditioning of e^{−t} (float64: ~1e-13 even for losses ~e^{−700}; no
    underflow to 0 before the true value does).  For l = 2 with f̃ = (−f/2, f/2) the cross-entropy
    equals the binary logistic loss exactly (§C.3's reduction).
    """
    value, _ = _loss(net, params, x, y, lam, r, loss, "regularized_loss", need_grad=False)
    return value


def regularized_loss_and_grad(net, params, x, y, lam, *, r=2.0, loss="logistic"):
    r"""(L_λ(Θ), ∇_Θ L_λ(Θ)) with the gradient as a list shaped like ``params``.

    ∇ = vjp(∂ℓ/∂f) + λ r ‖Θ‖^{r−2} Θ (the regularizer's gradient is taken as 0 at
    Θ = 0, a subgradient for r ≥ 1).  The ReLU derivative at 0 is 𝟙(z ≥ 0)
    (see :class:`ntkref.nets.HomogeneousNet`).
    """
    return _loss(net, params, x, y, lam, r, loss, "regularized_loss_and_grad", need_grad=True)


def _loss(net, params, x, y, lam, r, loss, caller, need_grad):
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    r = check_real(r, "r", caller=caller, low=0.0, closed="neither")
    check_option(loss, "loss", _LOSSES, caller=caller)
    if hasattr(net, "_outputs_and_pullback"):
        f, pullback = net._outputs_and_pullback(params, x, caller)
    else:  # any net with apply / vjp
        f = net.apply(params, x)

        def pullback(c):
            return net.vjp(params, x, c)
    xp = namespace(f)
    y = _check_targets(y, f.shape[0], net.n_outputs, loss, caller, xp, f.dtype, like=f)
    value, grads = _objective(net, params, f, pullback, y, lam, r, loss, xp, need_grad)
    if not bool(xp.isfinite(value)):
        raise InvalidParameterError(
            f"{caller}: L_λ overflows {value.dtype} (λ‖Θ‖^r and the loss grow with the weights and inputs); the values "
            f"of 'params' or 'x' are too large. Rescale them.")
    return value, grads


def _fast_loss(net, params, x, y, lam, r, loss, xp, need_grad):
    """_loss without validation, for training loops (inputs checked once before the loop)."""
    if hasattr(net, "_forward"):
        hs, zs = net._forward(params, x, xp)
        f = zs[-1][:, 0] if net.n_outputs == 1 else zs[-1]

        def pullback(c):
            cc = c[:, None] if net.n_outputs == 1 else c
            return [xp.matrix_transpose(h) @ d for h, d in zip(hs, net._backward(params, hs, zs, cc, xp))]
    else:
        f = net.apply(params, x)

        def pullback(c):
            return net.vjp(params, x, c)
    return _objective(net, params, f, pullback, y, lam, r, loss, xp, need_grad)


def _objective(net, params, f, pullback, y, lam, r, loss, xp, need_grad):
    data, dloss = _data_loss_and_dloss(f, y, loss, xp)
    sq = _sq_norm(params, xp)
    norm = xp.sqrt(sq)
    value = data + lam * norm ** r
    if not need_grad:
        return value, None
    grads = pullback(dloss)
    if lam > 0:
        # no host sync: the regularizer's gradient λ r ‖Θ‖^{r−2} Θ, set to 0 at Θ = 0
        safe = xp.where(sq > 0, norm, xp.ones_like(norm))
        coef = xp.where(sq > 0, lam * r * safe ** (r - 2.0), xp.zeros_like(norm))
        grads = [g + coef * W for g, W in zip(grads, params)]
    return value, grads


# --------------------------------------------------------------------------- training
@dataclass
class TrainingRecord:
    """What :func:`train_regularized` saw: per recorded step the objective, ‖Θ‖_F and γ(Θ) (host floats)."""

    method: str
    lam: float
    r: float
    loss: str
    steps: list = field(default_factory=list)
    objective: list = field(default_factory=list)
    norm: list = field(default_factory=list)
    normalized_margin: list = field(default_factory=list)
    n_iterations: int = 0
    converged: bool = False
    message: str = ""


def train_regularized(net, params0, x, y, lam, *, r=2.0, steps=1000, lr=0.1, loss="logistic", method="gd",
                      record_every=None, gtol=1e-10):
    r"""Minimize seed 002's L_λ (eq. (4.1)/(2.2), (C.1), or Thm B.9's squared loss) from ``params0``.

    Parameters
    ----------
    net : HomogeneousNet
    params0 : list of arrays
        Starting point (e.g. ``net.init(seed, scale=...)``).
    x : array (n, d)
    y : array (n,)
        ±1 labels (scalar logistic), class indices 0..l−1 (cross-entropy), reals (squared).
    lam : float ≥ 0
        λ of the regularizer λ‖Θ‖_F^r.
    r : float > 0
    steps : int
        Gradient steps (``method="gd"``) or the L-BFGS iteration cap.
    lr : float
        Step size of full-batch gradient descent Θ ← Θ − lr ∇L_λ(Θ).
    method : {"gd", "lbfgs"}
        ``"lbfgs"`` runs SciPy's L-BFGS-B on the host in float64 (a reference
        route for precise minimizers: convex linear models reach gtol ~1e-10;
        ReLU nets are non-smooth, so it stops at a stationary point up to its
        tolerances); the result is returned in the namespace of ``params0``.
    record_every : int, optional
        Record the objective, ‖Θ‖_F and γ(Θ) every this many steps (default
        steps // 100 for GD, every 10 iterations for L-BFGS), and at the end.
    gtol : float
        L-BFGS stopping tolerance on the largest gradient entry.

    Returns
    -------
    params : list of arrays
    record : TrainingRecord
    """
    caller = "train_regularized"
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    r = check_real(r, "r", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    check_option(method, "method", ("gd", "lbfgs"), caller=caller)
    check_option(loss, "loss", _LOSSES, caller=caller)
    gtol = check_real(gtol, "gtol", caller=caller, low=0.0)
    if hasattr(net, "_check_params"):  # HomogeneousNet: every error names 'params0'
        xp, params = net._check_params(params0, caller, name="params0")
    else:
        if not isinstance(params0, (list, tuple)) or not params0:
            raise InvalidParameterError(f"The 'params0' parameter of {caller} must be a non-empty list of arrays.")
        xp = namespace(*params0)
        params = [check_array(W, f"params0[{i}]", caller=caller, xp=xp) for i, W in enumerate(params0)]
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=params[0].dtype)
    f0 = net.apply(params, x)  # validates params and x against the net
    y = _check_targets(y, f0.shape[0], net.n_outputs, loss, caller, xp, f0.dtype, like=f0)
    record = TrainingRecord(method=method, lam=lam, r=r, loss=loss)

    def note(step, value, ps, data_x, data_y):
        # ps and (data_x, data_y) live together: on the parameters' device for GD, on the host for L-BFGS
        if not math.isfinite(float(value)):
            raise InvalidParameterError(
                f"{caller}: the objective is not finite at step {step} ({float(value)}): gradient descent diverged or "
                f"overflowed; lower 'lr', or rescale 'params0' and 'x'.")
        record.steps.append(int(step))
        record.objective.append(float(value))
        nrm = float(net.norm(ps))
        record.norm.append(nrm)
        if loss == "squared" or nrm == 0:
            record.normalized_margin.append(float("nan"))
        else:
            record.normalized_margin.append(float(normalized_margin(net, ps, data_x, data_y)))

    if method == "gd":
        lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
        every = max(1, steps // 100) if record_every is None else check_int(record_every, "record_every",
                                                                           caller=caller, low=1)
        for t in range(steps):
            value, grads = _fast_loss(net, params, x, y, lam, r, loss, xp, need_grad=True)
            if t % every == 0:
                note(t, value, params, x, y)
            params = [W - lr * g for W, g in zip(params, grads)]
        value, _ = _fast_loss(net, params, x, y, lam, r, loss, xp, need_grad=False)
        if not math.isfinite(float(value)):
            raise InvalidParameterError(
                f"{caller}: gradient descent diverged (objective {float(value)}); lower 'lr', or rescale 'params0' "
                f"and 'x'.")
        note(steps, value, params, x, y)
        record.n_iterations = steps
        record.converged = False
        record.message = f"{steps} gradient steps"
        return params, record

    # L-BFGS on the host (a reference solver: SciPy has no array-API version)
    import array_api_compat.numpy as hnp
    import numpy as np
    from scipy.optimize import minimize

    host_params = [hnp.asarray(to_numpy(W), dtype=hnp.float64) for W in params]
    host_x = hnp.asarray(to_numpy(x), dtype=hnp.float64)
    host_y = hnp.asarray(to_numpy(y))
    if hnp.isdtype(host_y.dtype, "real floating"):
        host_y = hnp.astype(host_y, hnp.float64)
    shapes = [tuple(W.shape) for W in host_params]
    sizes = [a * b for a, b in shapes]

    def unpack(v):
        out, off = [], 0
        for s, k in zip(shapes, sizes):
            out.append(v[off:off + k].reshape(s))
            off += k
        return out

    def fun(v):
        value, grads = _fast_loss(net, unpack(v), host_x, host_y, lam, r, loss, hnp, need_grad=True)
        return float(value), np.concatenate([np.asarray(g).ravel() for g in grads])

    every = 10 if record_every is None else check_int(record_every, "record_every", caller=caller, low=1)
    counter = [0]

    def callback(v):
        counter[0] += 1
        if counter[0] % every == 0:
            ps = unpack(v)
            note(counter[0], _loss(net, ps, host_x, host_y, lam, r, loss, caller, need_grad=False)[0], ps, host_x, host_y)

    v0 = np.concatenate([np.asarray(W).ravel() for W in host_params])
    note(0, fun(v0)[0], unpack(v0), host_x, host_y)
    res = minimize(fun, v0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": max(steps, 1), "maxfun": 4 * max(steps, 1), "gtol": gtol, "ftol": 0.0,
                            "maxcor": 30})
    final = unpack(res.x)
    note(int(res.nit), fun(res.x)[0], final, host_x, host_y)
    record.n_iterations = int(res.nit)
    record.converged = bool(res.success)
    record.message = str(res.message)
    out = [xp.asarray(np.ascontiguousarray(W), dtype=params[0].dtype, device=device_of(params[0])) for W in final]
    return out, record


# --------------------------------------------------------------------------- max margin of linear models (QP)
@dataclass
class LinearMaxMargin:
    """Max-margin linear model: ``weights`` (d,) binary or (d, l) multi-class, ``gamma`` = γ* = 1/‖weights‖,
    ``min_margin`` = min over the constraints of the scaled margin (≥ 1 − tol at the solution)."""

    weights: object
    gamma: float
    min_margin: float


def _least_distance(G):
    """min ‖θ‖₂ s.t. G θ ≥ 1 — Lawson & Hanson's LDP through NNLS (exact active-set solver, host side).

    With E = [Gᵀ; 1ᵀ] and f = e_{d+1}, NNLS gives u ≥ 0 minimizing ‖Eu − f‖; the residual r = Eu − f is nonzero
    iff the constraints are feasible, and then θ = −r_{1:d}/r_{d+1}.
    """
    import numpy as np
    from scipy.optimize import nnls

    m, d = G.shape
    # scale invariance: rows of norm ≤ 1, so that |r_{d+1}| = 1/(1 + ‖θ'‖²) ≥ 1e-14 means γ*/max‖G_i‖ ≳ 1e-7
    scale = float(np.max(np.linalg.norm(G, axis=1)))
    if not scale > 0:
        return None
    E = np.vstack([G.T / scale, np.ones((1, m))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + d + 1))
    res = E @ u - f
    if abs(res[-1]) < 1e-14 or not np.all(np.isfinite(res)):
        return None
    theta = -res[:d] / res[-1] / scale
    if np.min(G @ theta) < 1 - 1e-6:  # NNLS did not deliver a feasible point: refuse rather than mislead
        return None
    return theta


def linear_max_margin(x, y, *, n_classes=None):
    r"""γ* of the linear model f(x) = xᵀθ (or f_j = xᵀw_j) over ‖θ‖₂ ≤ 1 (‖W‖_F ≤ 1), by a QP.

    Binary (y ∈ {−1, +1}): hard-margin SVM without bias, min ‖θ‖² s.t.
    y_i θᵀx_i ≥ 1, γ* = 1/‖θ̂‖ = max_{‖θ‖≤1} min_i y_i θᵀx_i.  Multi-class
    (``n_classes`` = l, y ∈ {0..l−1}): Crammer–Singer without bias,
    min ‖W‖_F² s.t. (w_{y_i} − w_j)ᵀx_i ≥ 1 ∀ j ≠ y_i, γ* = 1/‖Ŵ‖_F, the (C.2)
    max margin of the 1-homogeneous model ``HomogeneousNet(d, [], depth=1,
    n_outputs=l)``.  These are the γ* of seed 002 §4 / C.1 for linear models.

    Solved as a least-distance program by NNLS (SciPy, host side; an exact
    active-set method: γ* to ~1e-12 relative on well-scaled data).
    Non-separable data — and data with γ* below ~1e-7·maxᵢ‖xᵢ‖ (numerically
    inseparable) — raise :class:`InvalidParameterError`.

    Returns
    -------
    LinearMaxMargin with ``weights`` in the namespace of ``x``.
    """
    import numpy as np

    caller = "linear_max_margin"
    xp = namespace(x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    n, d = x.shape
    xh = to_numpy(x).astype(np.float64)
    if n_classes is None:
        yh = to_numpy(check_labels(check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,)), "y", caller=caller))
        G = yh[:, None] * xh
    else:
        n_classes = check_int(n_classes, "n_classes", caller=caller, low=2)
        yh = to_numpy(_check_targets(y, n, n_classes, "logistic", caller, xp, x.dtype, like=x)).astype(int)
        rows = []
        for i in range(n):
            for j in range(n_classes):
                if j != yh[i]:
                    a = np.zeros((d, n_classes))
                    a[:, yh[i]] = xh[i]
                    a[:, j] = -xh[i]
                    rows.append(a.ravel())  # row-major vec(W), W of shape (d, l)
        G = np.array(rows)
    # γ*(x/s) = γ*(x)/s and θ̂(x/s) = s·θ̂(x): solve on G/s (s a power of two near max|G|: exact), so that the
    # tolerances of the solver see O(1) data at every scale of x
    s = _pow2_host(G)
    theta = _least_distance(G / s)
    if theta is None:
        raise InvalidParameterError(f"{caller}: the data 'x' are not linearly separable (through the origin).")
    norm = float(np.linalg.norm(theta))
    theta = theta / s
    weights = theta if n_classes is None else theta.reshape(d, n_classes)
    out = LinearMaxMargin(weights=xp.asarray(weights, dtype=x.dtype, device=device_of(x)), gamma=s / norm,
                          min_margin=float(np.min((G / s) @ (theta * s))))
    if not (math.isfinite(out.gamma) and np.all(np.isfinite(theta))):
        raise InvalidParameterError(f"{caller}: γ* or the weights overflow float64; rescale 'x'.")
    return out


# --------------------------------------------------------------------------- certificates
@dataclass
class MarginCertificate:
    r"""Two-sided bounds of the proof of Thm C.1 for a global minimizer Θ_λ.

    ``margin_lower`` ≤ γ_λ ≤ ``margin_upper`` (= γ*); ``margin_lower`` is −inf when
    the precondition ‖Θ_λ‖^a γ* > log(n(l−1)/ln 2) fails (``precondition``);
    ``loss_lower`` = λ‖Θ_λ‖^r ≤ L_λ(Θ_λ) ≤ ``loss_upper`` = min_B[log(1+(l−1)e^{−B^aγ*}) + λB^r]
    (``argmin_B`` the B attaining it, up to the search's resolution; any B gives a valid upper bound).

    Validity.  ``loss_lower`` holds for any Θ.  Everything else assumes that ``gamma_star`` is the true γ* of
    the architecture and that Θ_λ is a **global** minimizer (a local one, e.g. from L-BFGS on a ReLU net, need
    not satisfy ``loss_upper`` or ``margin_lower``).  With an *estimate* g of γ*:

    - g ≤ γ* (e.g. :func:`l1_svm` ``.value``/2 on a finite dictionary, which under-estimates the continuum
      γ_ℓ1/2 = γ*,m for width m ≥ n + 1): ``margin_lower`` and ``loss_upper`` stay valid (both move the safe
      way), but ``margin_upper`` = g is **no longer an upper bound** on γ_λ;
    - g > γ* (e.g. γ_ℓ1/2 used for a net of width m < n + 1, whose γ*,m can be smaller): ``margin_upper`` is
      still an upper bound, but ``margin_lower`` and ``loss_upper`` may be **invalid**.
    """

    margin_lower: float
    margin_upper: float
    loss_lower: float
    loss_upper: float
    argmin_B: float
    precondition: bool


def _exp_capped(t):
    """e^t, +inf above the float range (math.exp raises OverflowError there)."""
    return math.exp(t) if t < 709.0 else math.inf


def _pow_or_inf(x, p):
    """x**p for x ≥ 0, +inf where it exceeds the float range."""
    try:
        return x**p
    except OverflowError:
        return math.inf


def _upper_loss_log(u, log_gamma, log_lam, a, r, l):
    """log(1 + (l−1)e^{−B^aγ*}) + λB^r at B = e^u, evaluated in logs: B^a, λB^r may exceed the float range
    (then the value is +inf, a valid — useless — upper bound)."""
    margin = _exp_capped(a * u + log_gamma)  # B^a γ*
    return math.log1p((l - 1) * math.exp(-margin)) + _exp_capped(log_lam + r * u)


def margin_certificate(gamma_star, theta_norm, lam, n, *, a=2.0, r=2.0, n_classes=2):
    r"""Certificate of the weak-regularization limit (seed 002, proof of Thm C.1, eqs. (C.4)–(C.7)).

    For the global minimizer Θ_λ of (4.1)/(C.1) with N = ‖Θ_λ‖^a, (C.6)–(C.7) give
    n·log(1 + (l−1)e^{−Nγ*}) ≥ log(1 + e^{−Nγ_λ}).  With log(1+u) ≤ u on the left
    and log(1+v) ≥ v·ln 2 for v ∈ [0, 1] on the right (γ_λ < 0 is impossible when
    n(l−1)e^{−Nγ*} < ln 2):

    .. math:: γ^\star - \frac{\log(n(l-1)/\ln 2)}{\|Θ_λ\|^a} \le γ_λ \le γ^\star
              \quad\text{if } \|Θ_λ\|^aγ^\star > \log\frac{n(l-1)}{\ln 2},

    and λ‖Θ_λ‖^r ≤ L_λ(Θ_λ) ≤ min_{B≥0}[log(1+(l−1)e^{−B^aγ*}) + λB^r] ((C.4) at BΘ*).
    The upper loss bound is found by a search over log B ≤ log((log l/λ)^{1/r}) (larger B are worse than
    B = 0) on a log grid refined by golden section, evaluated in logs so that no power overflows;
    every B evaluated gives a valid bound, so it is an upper bound whatever the
    search's accuracy (≈1e-12 relative to the true minimum).

    **Caveats** (see :class:`MarginCertificate`): the bounds are about the *true* γ* of the architecture and
    a *global* minimizer.  Passing ``l1_svm(...).value/2`` from a finite dictionary under-estimates γ*: the
    lower margin bound and the loss upper bound stay valid, but ``margin_upper`` is then not an upper bound.
    For a two-layer net of width m < n + 1, γ_ℓ1/2 can *over*-estimate γ*,m: the lower side is then invalid.

    Parameters
    ----------
    gamma_star : float > 0
        γ* (exact from :func:`linear_max_margin` for linear models; :func:`l1_svm` ``.value``/2 is a lower
        estimate for two-layer nets of width ≥ n + 1 — see the caveats above).
    theta_norm : float ≥ 0
        ‖Θ_λ‖ of the minimizer.
    lam : float > 0
    n : int ≥ 1
    a, r : float > 0
        Homogeneity degree and regularizer exponent.
    n_classes : int ≥ 2
        l.
    """
    caller = "margin_certificate"
    gamma_star = check_real(gamma_star, "gamma_star", caller=caller, low=0.0, closed="neither")
    theta_norm = check_real(theta_norm, "theta_norm", caller=caller, low=0.0)
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    n = check_int(n, "n", caller=caller, low=1)
    a = check_real(a, "a", caller=caller, low=0.0, closed="neither")
    r = check_real(r, "r", caller=caller, low=0.0, closed="neither")
    l = check_int(n_classes, "n_classes", caller=caller, low=2)
    N = _pow_or_inf(theta_norm, a)  # ‖Θ‖^a and λ‖Θ‖^r may exceed the float range: inf, never OverflowError
    threshold = math.log(n * (l - 1) / math.log(2.0))
    pre = N * gamma_star > threshold
    lower = gamma_star - threshold / N if pre else -math.inf
    loss_lower = lam * _pow_or_inf(theta_norm, r)
    # Search u = log B.  Any B with λB^r ≥ log l is no better than B = 0 (value log l): u ≤ u_max.  The
    # minimizer balances e^{−B^aγ*} against λB^r, near B^aγ* ≈ log(1/λ); search down to 10⁻⁶ of the smaller of
    # that scale and B_max on a log grid (50 points per decade), then refine by golden section.
    log_gamma, log_lam = math.log(gamma_star), math.log(lam)
    u_max = (math.log(math.log(float(l))) - log_lam) / r
    u_nat = (math.log(max(-log_lam, 1.0)) - log_gamma) / a
    u_min = min(u_nat, u_max) - 6.0 * math.log(10.0)
    n_grid = min(int(math.ceil((u_max - u_min) / (math.log(10.0) / 50.0))) + 1, 20001)  # coarser only for tiny r
    grid = [u_min + (u_max - u_min) * k / (n_grid - 1) for k in range(n_grid)]

    def h(u):
        return _upper_loss_log(u, log_gamma, log_lam, a, r, l)

    vals = [h(u) for u in grid]
    best_u, best = None, math.log(float(l))  # B = 0
    k = min(range(len(grid)), key=vals.__getitem__)
    if vals[k] < best:
        best_u, best = grid[k], vals[k]
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        phi = (math.sqrt(5.0) - 1) / 2
        c1, c2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
        f1, f2 = h(c1), h(c2)
        for _ in range(200):
            if f1 < f2:
                hi, c2, f2 = c2, c1, f1
                c1 = hi - phi * (hi - lo)
                f1 = h(c1)
            else:
                lo, c1, f1 = c1, c2, f2
                c2 = lo + phi * (hi - lo)
                f2 = h(c2)
            for u, v in ((c1, f1), (c2, f2)):
                if v < best:
                    best_u, best = u, v
    best_B = 0.0 if best_u is None else math.exp(best_u)
    return MarginCertificate(margin_lower=lower, margin_upper=gamma_star, loss_lower=loss_lower,
                             loss_upper=best, argmin_B=best_B, precondition=pre)


def margin_lower_bound(mean_data_loss, theta_norm, n, *, a=2.0):
    r"""γ(Θ) ≥ −log(e^{n ℓ̂} − 1)/‖Θ‖^a for ANY Θ with n ℓ̂ < log 2 (seed 002, proof of Thm C.2, sharpened).

    ℓ̂ is the mean logistic / cross-entropy loss of Θ (without the regularizer).
    The worst sample's loss is ≥ log(1 + e^{−‖Θ‖^aγ(Θ)}) and ≤ n ℓ̂, which
    inverts to the bound (the seed's chain uses log(1+x) ≥ x/(1+x) — printed as
    "log(x) ≥ x/(1+x) ∀ x ≥ −1" *[erratum]* — and gets the weaker
    −log(nℓ̂/(1 − nℓ̂))).  Tight: for one sample of a scalar-output net,
    ℓ̂ = log(1 + e^{−‖Θ‖^aγ}) and the bound equals γ(Θ).  Returns −inf when
    n ℓ̂ ≥ log 2 (such a loss allows γ(Θ) ≤ 0).  ℓ̂ must be > 0
    (a computed 0 is an underflow and certifies nothing).
    """
    caller = "margin_lower_bound"
    # a loss of exactly 0 is an underflow (the true loss is > 0), from which no margin bound follows
    ell = check_real(mean_data_loss, "mean_data_loss", caller=caller, low=0.0, closed="neither")
    theta_norm = check_real(theta_norm, "theta_norm", caller=caller, low=0.0, closed="neither")
    n = check_int(n, "n", caller=caller, low=1)
    a = check_real(a, "a", caller=caller, low=0.0, closed="neither")
    s = n * ell
    if s >= math.log(2.0):
        return -math.inf
    return -math.log(math.expm1(s)) / theta_norm ** a


def width4_loss_upper_bound(lam):
    r"""U(λ) = min_{s≥0} [log(1 + e^{−s}) + 8λs] — an upper bound on min L_λ (eq. (2.2)) on any sample of 𝒟.

    The width-4 net of §2 scaled by c has y f = c² = s on every point of 𝒟 and
    ‖cΘ‖_F² = 8s, so L_λ(cΘ) = log(1 + e^{−s}) + 8λs (mean logistic loss, any
    width ≥ 4 by zero padding).  Closed form (inventory B7):
    U(λ) = −log(1 − 8λ) + 8λ log((1 − 8λ)/(8λ)) for 0 < λ < 1/16, and log 2
    (s = 0) for λ ≥ 1/16.  Evaluated with log1p; relative accuracy ~1e-15.
    """
    lam = check_real(lam, "lam", caller="width4_loss_upper_bound", low=0.0, closed="neither")
    if lam >= 1.0 / 16.0:
        return math.log(2.0)
    e = 8.0 * lam
    return -math.log1p(-e) + e * (math.log1p(-e) - math.log(e))


# --------------------------------------------------------------------------- ℓ1-SVM over ReLU features (B.4)
def relu_features(x, directions):
    r"""φ_relu on a finite dictionary: F_ik = [ū_kᵀ x_i]₊ (seed 002 App. B.1, B.4), shape (n, K).

    ``x`` (n, d); ``directions`` (K, d), normally unit rows ū_k.
    """
    xp = namespace(x, directions)
    x = check_array(x, "x", caller="relu_features", ndim=2, xp=xp)
    U = check_array(directions, "directions", caller="relu_features", ndim=2, xp=xp, dtype=x.dtype)
    check_memory(2 * x.shape[0] * U.shape[0], f"The ({x.shape[0]}, {U.shape[0]}) features of 'x'/'directions'",
                 "relu_features", x)
    if U.shape[1] != x.shape[1]:
        raise InvalidParameterError(
            f"relu_features: 'directions' have {U.shape[1]} coordinates but 'x' has {x.shape[1]} features."
        )
    z = x @ xp.matrix_transpose(U)
    return xp.maximum(z, xp.zeros_like(z))


def circle_directions(K, *, offset=0.0, xp=None, dtype=None, device=None):
    r"""K evenly spaced unit vectors (cos φ_k, sin φ_k), φ_k = offset + 2πk/K: the dictionary of App. F.4
    ("1000 evenly spaced values of (w, b)" with w² + b² = 1).  Shape (K, 2), in ``xp`` (default: the
    ``NTKREF_BACKEND`` namespace) on ``device`` (default: ``NTKREF_DEVICE`` for the default namespace)."""
    K = check_int(K, "K", caller="circle_directions", low=1)
    offset = check_real(offset, "offset", caller="circle_directions")
    from .nets._common import init_target

    xp, dtype, device = init_target(xp, dtype, device, "circle_directions")
    phi = offset + (2.0 * math.pi / K) * xp.astype(xp.arange(K, device=device), dtype)
    return xp.stack([xp.cos(phi), xp.sin(phi)], axis=1)


def _pow2_host(a):
    """A power of two near max|a| (1 for a zero or empty array): an exact scale for host data."""
    import numpy as np

    big = float(np.max(np.abs(a))) if a.size else 0.0
    return math.ldexp(1.0, math.frexp(big)[1] - 1) if big > 0 else 1.0


def _scaled_features(x, directions, caller, xp):
    """(F/s, s) on the host in float64: F = φ_relu(x) on the dictionary, s a power of two near max|F|, computed
    from x/s_x and directions/s_u (relu is 1-homogeneous) so that neither F nor the LP's tolerances see the
    inputs' scale."""
    import numpy as np

    U = check_array(directions, "directions", caller=caller, ndim=2, xp=xp, dtype=x.dtype)
    if U.shape[0] == 0:
        raise InvalidParameterError(f"The 'directions' parameter of {caller} must have at least one row.")
    xh, Uh = to_numpy(x).astype(np.float64), to_numpy(U).astype(np.float64)
    sx, su = _pow2_host(xh), _pow2_host(Uh)
    F = to_numpy(relu_features(xh / sx, Uh / su)).astype(np.float64)
    sf = _pow2_host(F)
    return F / sf, sx * su * sf


@dataclass
class L1Solution:
    """Solution of an ℓ1 LP over a dictionary: ``mu`` (K,), ``value`` (γ_ℓ1 for :func:`l1_svm`, ‖μ‖₁ for
    :func:`l1_interpolation`), ``support`` (indices with μ_k ≠ 0), ``status`` (HiGHS message)."""

    mu: object
    value: float
    support: object
    status: str


def l1_svm(x, y, directions):
    r"""ℓ1-SVM over ReLU features (seed 002 eq. (B.14)) on a finite dictionary, by linear programming.

    .. math:: γ_{ℓ1} = \max_{\|μ\|_1\le1}\min_i y_i⟨μ, φ_{relu}(x_i)⟩,\quad
              ⟨μ, φ_{relu}(x)⟩ = \sum_k μ_k[ū_k^\top x]_+ .

    Written with μ = μ⁺ − μ⁻ as the LP max γ s.t. y_i F_i(μ⁺ − μ⁻) ≥ γ,
    1ᵀ(μ⁺ + μ⁻) ≤ 1, μ^± ≥ 0 (2K + 1 variables, n + 1 constraints), solved by
    HiGHS dual simplex on the host: the solution is a vertex with at most n + 1
    basic variables, one of which is γ > 0, so μ has at most n nonzeros — within
    Prop. B.10's width m ≥ n + 1 for γ*,m = γ_ℓ1/2 (build the network with
    :func:`ntkref.nets.balanced_two_layer`).
    A finite dictionary gives a lower bound on the continuum γ_ℓ1.

    Data that the dictionary's ReLU features cannot separate (γ_ℓ1 ≤ 1e-9·max|yᵢF_ik|,
    HiGHS' tolerance — e.g. a point repeated with both labels, where μ = 0 is optimal)
    raise :class:`InvalidParameterError`.

    Returns
    -------
    L1Solution with ``mu`` (K,) in the namespace of ``x``, ``value`` = γ_ℓ1
    (optimal to HiGHS' tolerances, ~1e-9 absolute; the margin of ``mu``
    recomputed from the features is exact to rounding).
    """
    import numpy as np
    from scipy.optimize import linprog

    caller = "l1_svm"
    xp = namespace(x, directions)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    F, s = _scaled_features(x, directions, caller, xp)
    n, K = F.shape
    yh = to_numpy(check_labels(check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,)), "y", caller=caller))
    A = yh[:, None] * F  # the features / s: γ_ℓ1 = s·(the LP's γ), μ unchanged (1-homogeneity)
    # variables [μ⁺ (K), μ⁻ (K), γ]; minimize −γ
    c = np.zeros(2 * K + 1)
    c[-1] = -1.0
    A_ub = np.vstack([np.hstack([-A, A, np.ones((n, 1))]), np.hstack([np.ones((1, 2 * K)), np.zeros((1, 1))])])
    b_ub = np.concatenate([np.zeros(n), [1.0]])
    bounds = [(0, None)] * (2 * K) + [(None, None)]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs-ds")
    if res.status != 0:
        raise InvalidParameterError(f"{caller}: the LP failed ({res.message}).")
    mu = res.x[:K] - res.x[K:2 * K]
    mu = np.where(np.abs(mu) > 1e-14 * max(1.0, np.abs(mu).max()), mu, 0.0)
    support = np.nonzero(mu)[0]
    gamma = float(np.min(A @ mu))  # recomputed: the margin of the returned μ itself
    scale = float(np.max(np.abs(A))) if A.size else 0.0
    if not gamma > 1e-9 * scale:  # γ = 0 (μ = 0) is always feasible: that is the optimum of inseparable data
        raise InvalidParameterError(
            f"{caller}: the data 'x', 'y' are not separable by the ReLU features of these 'directions' "
            f"(γ_ℓ1 = {gamma * s:.3g} ≤ 1e-9·max|y_i F_ik| = {1e-9 * scale * s:.3g})."
        )
    gamma = gamma * s
    if not math.isfinite(gamma):
        raise InvalidParameterError(f"{caller}: γ_ℓ1 overflows float64; rescale 'x' or 'directions'.")
    return L1Solution(mu=xp.asarray(mu, dtype=x.dtype, device=device_of(x)), value=gamma,
                      support=xp.asarray(support, device=device_of(x)), status=str(res.message))


def l1_interpolation(x, y, directions):
    r"""Minimum-ℓ1 interpolation over ReLU features: min ‖μ‖₁ s.t. Σ_k μ_k[ū_kᵀx_i]₊ = y_i (seed 002 App. B.3).

    For a two-layer net of width m ≥ (support size), the balanced conversion
    (:func:`ntkref.nets.balanced_two_layer`) turns the solution into an
    interpolating net with ‖Θ‖_F² = 2‖μ‖₁, and every interpolating net has
    ‖Θ‖_F² ≥ 2‖μ_Θ‖₁: so on a dictionary containing the optimal directions,
    ‖Θ*,m‖² of (B.13) = 2·value, the limit of ‖Θ_λ,m‖² in Thm B.9 (squared on
    both sides — the seed prints "‖Θ_λ,m‖₂ → ‖Θ*,m‖₂²" *[erratum]*).  A finite
    dictionary gives an upper bound on the continuum value.  LP by HiGHS dual
    simplex (vertex: ≤ n nonzeros).
    """
    import numpy as np
    from scipy.optimize import linprog

    caller = "l1_interpolation"
    xp = namespace(x, directions)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    F, s = _scaled_features(x, directions, caller, xp)
    n, K = F.shape
    yh = to_numpy(check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,))).astype(np.float64)
    # (F/s)μ′ = y/t has μ′ = μ·s/t (s, t powers of two): the LP sees O(1) data at every scale of x and y
    t = _pow2_host(yh)
    c = np.ones(2 * K)
    A_eq = np.hstack([F, -F])
    res = linprog(c, A_eq=A_eq, b_eq=yh / t, bounds=[(0, None)] * (2 * K), method="highs-ds")
    if res.status != 0:
        raise InvalidParameterError(
            f"{caller}: the LP failed ({res.message}); are the data 'x', 'y' interpolable by the ReLU features of "
            f"these 'directions'?")
    mu = res.x[:K] - res.x[K:]
    mu = np.where(np.abs(mu) > 1e-14 * max(1.0, np.abs(mu).max()), mu, 0.0)
    with np.errstate(over="ignore"):
        mu = mu * (t / s)
    if not np.all(np.isfinite(mu)):
        raise InvalidParameterError(f"{caller}: μ overflows float64; rescale 'x', 'y' or 'directions'.")
    return L1Solution(mu=xp.asarray(mu, dtype=x.dtype, device=device_of(x)), value=float(np.abs(mu).sum()),
                      support=xp.asarray(np.nonzero(mu)[0], device=device_of(x)), status=str(res.message))
