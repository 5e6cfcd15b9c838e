r"""Training finite networks by (sub)gradient descent on seed 000's losses, with a record for the bounds.

Objective (seed 000 eq. (7), and eq. (6) for the hinge loss with C = 1/λ up to the factor λ):

.. math::  L(w) = \frac{λ}{2}\,R(w) + \sum_i l(f(w, x_i), y_i)\quad(\text{or } \tfrac1n\sum_i \text{ for } \texttt{reduction="mean"}),

with the regulariser ``R`` chosen by ``regularize``:

- ``"readout"`` (default, (7) as printed): R = ‖w_L‖² + ‖b_L‖², the readout's own (NTK-parameterised)
  variables.  Then ⟨∇_{w_L} f, w_L⟩ + ⟨∇_{b_L} f, b_L⟩ = f (seed 000 eq. (48)), so the flow is
  exactly eq. (9): df/dt = −λ f − Σᵢ l'(f(xᵢ), yᵢ) Θ̂(w_t; x, xᵢ).
  **Seed error**: the readout weights then decay like e^{−λt}, an O(1) relative change at every
  width, and the hidden-layer part of Θ̂ (∝ ‖w_L‖²/m) decays with them: Θ̂(w_t) does *not* stay
  at Θ̂(w₀) as m → ∞ when λ > 0, so Theorem 3.4 / Table 1's equivalence with the KM (8) fails for
  this regulariser (``tests/test_bounds.py::test_readout_regularisation_breaks_the_equivalence``).
- ``"from_init"``: R = ‖w − w₀‖² over all parameters.  In the lazy regime ⟨∇f, w − w₀⟩ =
  f − f₀ + O(m^{-1/2}), so with f₀ = 0 (:class:`~ntkref.nets.Antisymmetric`) the flow is (8) with
  K = Θ̂(w₀) up to O(m^{-1/2}) and the NN–KM gap vanishes with width (tested); for a
  :class:`~ntkref.nets.Linearized` network it is exactly the KM (8), β = w − w₀.  Use this one
  for the equivalence.
- ``"readout_over_width"``: R = ‖w_L/√m‖², as the official code; the decay per step is then ηλ/m
  instead of ηλ (it does *not* reproduce eq. (9)'s −λf; offered to reproduce the code).

``subtract_f0=True`` trains f(w, x) − f(w₀, x) (the official code's trick; note that the regulariser
then still produces −λ f(w_t, x), not −λ(f − f₀)); :class:`~ntkref.nets.Antisymmetric` gives
f₀ ≡ 0 without this mismatch.

Each step: w ← w − η(λ/2 ∇R + Σ_{i∈B} l'(f(xᵢ), yᵢ)∇f(xᵢ)/|B|^{[mean]}), full batch or seeded
minibatches (a fresh permutation each epoch).  The record keeps, at every ``record_every`` steps,
the outputs on training and test points, l'(f_t(xᵢ)), the objective, and — when
``track_kernel=True`` — the kernel drift ‖Θ̂(w_t) − Θ̂(w₀)‖₂ on the training set, the test rows'
drifts, the convex-bound integrand ‖K₀^{-1/2}(Θ̂_t − K₀)l'(f_t)‖, the running sums behind
Theorem 4.1's kernel, and the per-step Taylor remainder r_k = f_{k+1} − (1 − ηλ)f_k + ηΘ̂_k l'_k
(zero for gradient flow; it makes the discrete gap bounds rigorous); full Θ̂_t matrices only when
``keep_kernels=True``.  Memory: O(steps·(n + m)) numbers plus three n×n (and m×n) accumulators.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import losses as _losses
from .._lib.backend import device_of, namespace
from .._lib.compat import eigh
from .._lib.memory import check_memory
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real
from ._common import input_on

__all__ = ["NetTrajectory", "train"]


@dataclass
class NetTrajectory:
    """What :func:`train` recorded (arrays of the parameters' namespace; R = number of records)."""

    steps: object  # (R,) step indices
    lr: float
    lam: float
    f_train: object  # (R, n)
    f_test: object  # (R, m) or None
    lprime: object  # (R, n) l'(f_t(x_i), y_i) per sample (sum convention)
    objective: object  # (R,)
    params: object  # final parameters
    params0: object
    f0_train: object
    f0_test: object
    drift: object = None  # (R,) ‖Θ̂_t − Θ̂_0‖₂ on training points
    drift_test: object = None  # (R, m) ‖Θ̂_t(x, X) − Θ̂_0(x, X)‖₂ per test point
    convex_integrand: object = None  # (R,) ‖K₀^{-1/2}(Θ̂_t − K₀) l'(f_t)‖
    kernel0: object = None  # Θ̂(w₀) on training points (n, n)
    kernel0_test: object = None  # Θ̂(w₀; x_test, X) (m, n)
    kernels: list = field(default_factory=list)  # Θ̂_t (train) if keep_kernels
    kernels_test: list = field(default_factory=list)
    km_kernel: object = None  # Theorem 4.1 kernel on (train, train) at the last step
    km_kernel_test: object = None  # (test, train)
    km_kernel_trapezoid: object = None  # the same with the trapezoid rule (quadrature error estimate)
    km_kernel_test_trapezoid: object = None
    remainder: object = None  # (R,) ‖r_k‖ on training points, r_k = f_{k+1} − (1−ηλ)f_k + ηΘ̂_k c_k
    remainder_test: object = None  # (R, m) |r_k(x)| on test points

    @property
    def times(self):
        """Continuous time t = η·step (the gradient-flow clock for the sum convention)."""
        return self.lr * self.steps


def _scale_layers(grads, s):
    return [(s * dW, None if db is None else s * db) for dW, db in grads]


def _add_layers(a, b):
    return [(wa + wb, None if ba is None else ba + bb) for (wa, ba), (wb, bb) in zip(a, b)]


def _map_params(fn, params):
    """Apply fn to each (W, b) list in params (a list, or a tuple of lists for Antisymmetric)."""
    if isinstance(params, tuple):
        return tuple(fn(p) for p in params)
    return fn(params)


def _zip_params(fn, a, b):
    if isinstance(a, tuple):
        return tuple(fn(x, y) for x, y in zip(a, b))
    return fn(a, b)


def _reg_grad(params, params0, mode, net):
    """∇(R/2) for the chosen regulariser (a params-shaped gradient)."""

    def one(p, p0):
        out = []
        last = len(p) - 1
        for ell, ((W, b), (W0, b0)) in enumerate(zip(p, p0)):
            if mode == "from_init":
                out.append((W - W0, None if b is None else b - b0))
            elif ell == last:
                if mode == "readout":
                    out.append((W, b))
                else:  # readout_over_width: R = ‖W/√m‖², no bias term
                    m = W.shape[0]
                    out.append((W / m, None if b is None else 0 * b))
            else:
                out.append((0 * W, None if b is None else 0 * b))
        return out

    return _zip_params(one, params, params0)


def _reg_value(params, params0, mode, xp):
    """R(w) as a 0-d array on the parameters' device (no host read: training records it every step)."""

    def one(p, p0):
        total = None
        last = len(p) - 1
        for ell, ((W, b), (W0, b0)) in enumerate(zip(p, p0)):
            term = None
            if mode == "from_init":
                term = xp.sum((W - W0) ** 2) + (0.0 if b is None else xp.sum((b - b0) ** 2))
            elif ell == last:
                if mode == "readout":
                    term = xp.sum(W**2) + (0.0 if b is None else xp.sum(b**2))
                else:
                    term = xp.sum(W**2) / W.shape[0]
            if term is not None:
                term = xp.astype(term, xp.float64)  # layers summed in float64, as the record
                total = term if total is None else total + term
        return total

    if isinstance(params, tuple):
        return sum(one(p, p0) for p, p0 in zip(params, params0))
    return one(params, params0)


def _check_record_memory(n, m, steps, record_every, track_kernel, keep_kernels, like):
    """The memory guard of :func:`train`, before the first step: the records (outputs and l′ on the n training
    and m test points, each a list of rows stacked at the end: twice) and, with ``track_kernel``, the n×n and
    m×n kernels, their eigendecomposition and the running sums (about ten of each), and with ``keep_kernels``
    one kernel per step."""
    n_records = steps // record_every + 2
    entries = 2 * n_records * (2 * n + 2 * m + 4)
    kept = ""
    if track_kernel:
        entries += 10 * (n * n + m * n)
        if keep_kernels:
            entries += (steps + 1) * (n * n + m * n)
            kept = f" and {steps + 1} kernels of {n}×{n}" + (f" and {m}×{n}" if m else "")
    check_memory(entries, f"The records of 'steps' = {steps} with 'record_every' = {record_every} ({n_records} records "
                 f"of {n} training and {m} test outputs{kept}, 'keep_kernels' = {keep_kernels})", "train", like,
                 ways_out="ways out: a larger record_every, fewer steps per call (continue from the returned params), "
                          + ("keep_kernels=False, " if keep_kernels else "") + "or fewer rows of x/x_test")


def train(
    net,
    params,
    x,
    y,
    loss,
    lam,
    lr,
    steps,
    *,
    batch_size=None,
    seed=None,
    reduction="sum",
    regularize="readout",
    subtract_f0=False,
    x_test=None,
    record_every=1,
    track_kernel=False,
    keep_kernels=False,
):
    """Train ``net`` from ``params`` by (sub)gradient descent on (7); see the module docstring.

    Parameters
    ----------
    net : FullyConnected, Antisymmetric or Linearized
    params : the initial parameters (``net.init(seed)``)
    x : (n, d) training inputs; y : (n,) targets (±1 for classification losses)
    loss : name or :class:`ntkref.losses.Loss`
    lam : float ≥ 0, the regularisation λ of (7)
    lr : float > 0, the step η (continuous time t = η·step)
    steps : int ≥ 1
    batch_size : int, optional — minibatch SGD (seeded by ``seed``); default full batch
    track_kernel : bool — record kernel drifts and accumulate Theorem 4.1's kernel (needs
        ``record_every=1`` for the Theorem-4.1 sums, which must see every step)

    Returns
    -------
    NetTrajectory
    """
    from ._wrappers import validate_params

    loss = _losses.get(loss)
    if getattr(net, "d_in", None) is None:  # e.g. a ConvNet (images): train takes rows of features only
        raise InvalidParameterError(
            f"The 'net' parameter of train must take rows of features (a FullyConnected network, or a wrapper of "
            f"one); got {type(net).__name__}, which has no d_in."
        )
    params = validate_params(net, params, "train")
    first = params[0][0][0] if isinstance(params, tuple) else params[0][0]
    xp = namespace(first)
    x = check_array(input_on(x, first), "x", caller="train", ndim=2, xp=xp)
    n = x.shape[0]
    y = loss.check_targets(check_array(input_on(y, first), "y", caller="train", ndim=1, xp=xp), "y", caller="train")
    if y.shape[0] != n:
        raise InvalidParameterError(f"x has {n} rows but y has {y.shape[0]} entries.")
    if x.shape[1] != net.d_in:
        raise InvalidParameterError(f"x has {x.shape[1]} features; the network expects d_in = {net.d_in}.")
    lam = check_real(lam, "lam", caller="train", low=0.0)
    lr = check_real(lr, "lr", caller="train", low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller="train", low=1)
    record_every = check_int(record_every, "record_every", caller="train", low=1)
    reduction = check_option(reduction, "reduction", ("sum", "mean"), caller="train")
    regularize = check_option(regularize, "regularize", ("readout", "readout_over_width", "from_init"), caller="train")
    if lam > 0 and lr * lam >= 1:
        raise InvalidParameterError(f"lr·lam must be < 1 for the decay factor (1 − ηλ) to be positive; got {lr * lam}.")
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", caller="train", low=1, high=n)
    if track_kernel and (record_every != 1 or batch_size is not None):
        raise InvalidParameterError("track_kernel=True needs record_every=1 and full-batch training (Theorem 4.1's sums see every step).")
    if x_test is not None:
        x_test = check_array(input_on(x_test, first), "x_test", caller="train", ndim=2, xp=xp)
        if x_test.shape[1] != net.d_in:
            raise InvalidParameterError(f"x_test has {x_test.shape[1]} features; the network expects d_in = {net.d_in}.")
    _check_record_memory(n, 0 if x_test is None else x_test.shape[0], steps, record_every, track_kernel,
                         keep_kernels, x)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    params0 = params
    f0_train = net.apply(params0, x)
    f0_test = net.apply(params0, x_test) if x_test is not None else None
    shift_train = f0_train if subtract_f0 else 0 * f0_train
    shift_test = (f0_test if subtract_f0 else 0 * f0_test) if x_test is not None else None

    rec = dict(steps=[], f_train=[], f_test=[], lprime=[], objective=[], drift=[], drift_test=[], convex=[], rem=[], rem_t=[])
    pending = None  # (raw f_k, raw f_k(test), Θ̂_k c_k, Θ̂_k(test) c_k) for the remainder of step k
    kernels, kernels_test = [], []
    K0 = K0t = K0_isqrt = None
    if track_kernel:
        K0 = net.empirical_ntk(params0, x)
        K0t = net.empirical_ntk(params0, x_test, x) if x_test is not None else None
        w, V = eigh(K0, xp)
        if float(w[0]) > 0:
            K0_isqrt = (V / xp.sqrt(w)[None, :]) @ xp.matrix_transpose(V)
        decay = 1 - lr * lam
        # Theorem 4.1 (discrete form): K_T = η Σ_k (1−ηλ)^{T−1−k} |l'_k| Θ̂_k; kept as running sums
        km_left = xp.zeros_like(K0)
        km_left_t = xp.zeros_like(K0t) if K0t is not None else None
        km_trap = xp.zeros_like(K0)
        km_trap_t = xp.zeros_like(K0t) if K0t is not None else None
        prev = None

    def record(step, p, f_tr, lp):
        rec["steps"].append(step)
        rec["f_train"].append(f_tr)
        if x_test is not None:
            rec["f_test"].append(net.apply(p, x_test) - shift_test)
        rec["lprime"].append(lp)
        try:
            data = xp.sum(loss.value(f_tr, y))
        except _losses.LossOverflowError:  # the objective's finiteness check below names x, y, params, lr
            data = xp.asarray(math.inf, dtype=f_tr.dtype, device=device_of(f_tr))
        if reduction == "mean":
            data = data / n
        rec["objective"].append(lam / 2 * _reg_value(p, params0, regularize, xp) + xp.astype(data, xp.float64))

    params_t = params
    n_batches = 1 if batch_size is None else math.ceil(n / batch_size)
    order = None
    for step in range(steps + 1):
        try:
            f_raw = net.apply(params_t, x)
            f_tr = f_raw - shift_train
            lp = loss.derivative(f_tr, y)
        except InvalidParameterError as exc:
            if step == 0:
                raise
            raise InvalidParameterError(
                f"train: training diverged before step {step} (non-finite weights or outputs); lower 'lr', or "
                f"rescale 'x', 'y' or 'params'. ({exc})") from exc
        Kt = None
        if track_kernel:
            Kt = net.empirical_ntk(params_t, x)
            Ktt = net.empirical_ntk(params_t, x_test, x) if x_test is not None else None
            ft_raw = net.apply(params_t, x_test) if x_test is not None else None
            if pending is not None:
                # the residual of the KM-form step, f_{k+1} = (1 − ηλ)f_k − ηΘ̂_k c_k + r_k: for the readout
                # regulariser (eq. (48): it contributes exactly −ηλ f_k) r_k is the second-order Taylor
                # remainder; for the others it also holds the regulariser's deviation from −ηλ f_k
                pf, pft, kc, kct = pending
                rec["rem"].append(xp.sqrt(xp.sum((f_raw - (1 - lr * lam) * pf + lr * kc) ** 2)))
                if x_test is not None:
                    rec["rem_t"].append(xp.abs(ft_raw - (1 - lr * lam) * pft + lr * kct))
            coef_full = lp / n if reduction == "mean" else lp
            pending = (f_raw, ft_raw, Kt @ coef_full, (Ktt @ coef_full) if Ktt is not None else None)
            dK = Kt - K0
            rec["drift"].append(xp.max(xp.abs(eigh(dK, xp)[0])))
            if Ktt is not None:
                rec["drift_test"].append(xp.sqrt(xp.sum((Ktt - K0t) ** 2, axis=1)))
            if K0_isqrt is not None:
                rec["convex"].append(xp.sqrt(xp.sum((K0_isqrt @ (dK @ lp)) ** 2)))
            if keep_kernels:
                kernels.append(Kt)
                if Ktt is not None:
                    kernels_test.append(Ktt)
            # running Theorem-4.1 sums up to this step (left rule: weights at steps 0..T−1)
            if step < steps:
                term = xp.abs(lp)[None, :] * Kt
                term_t = xp.abs(lp)[None, :] * Ktt if Ktt is not None else None
                km_left = decay * km_left + lr * term
                if km_left_t is not None:
                    km_left_t = decay * km_left_t + lr * term_t
            cur = (xp.abs(lp)[None, :] * Kt, xp.abs(lp)[None, :] * Ktt if Ktt is not None else None)
            if prev is not None:
                # trapezoid on [k−1, k] of e^{−λ(t_T − t)}: decay applied to the old sum, the endpoint weights
                km_trap = decay * km_trap + (lr / 2) * (decay * prev[0] + cur[0])
                if km_trap_t is not None:
                    km_trap_t = decay * km_trap_t + (lr / 2) * (decay * prev[1] + cur[1])
            prev = cur
        if step % record_every == 0 or step == steps:
            record(step, params_t, f_tr, lp)
        if step == steps:
            break
        # the update
        if batch_size is None:
            idx = None
            coef = lp / n if reduction == "mean" else lp
            g_loss = net.vjp(params_t, x, coef)
        else:
            b = step % n_batches
            if b == 0:
                order = rng.permutation(n)
            sel = order[b * batch_size : (b + 1) * batch_size]
            idx = xp.asarray(sel, device=device_of(x))  # the host permutation, copied explicitly
            xb = xp.take(x, idx, axis=0)
            lpb = xp.take(lp, idx)
            coef = lpb / sel.shape[0] if reduction == "mean" else lpb * (n / sel.shape[0])
            g_loss = net.vjp(params_t, xb, coef)
        if lam > 0:
            g_reg = _reg_grad(params_t, params0, regularize, net)
            g = _zip_params(lambda a, c: _add_layers(a, _scale_layers(c, lam)), g_loss, g_reg)
        else:
            g = g_loss
        params_t = _zip_params(lambda p, gr: _add_layers(p, _scale_layers(gr, -lr)), params_t, g)

    stack = lambda v: xp.stack(v) if v else None  # noqa: E731
    scalars = lambda v: xp.astype(xp.stack(v), xp.float64)  # noqa: E731  (0-d records, read back once, not per step)
    dev = device_of(x)
    traj = NetTrajectory(
        steps=xp.asarray(rec["steps"], dtype=xp.float64, device=dev),
        lr=lr,
        lam=lam,
        f_train=stack(rec["f_train"]),
        f_test=stack(rec["f_test"]),
        lprime=stack(rec["lprime"]),
        objective=scalars(rec["objective"]),
        params=params_t,
        params0=params0,
        f0_train=f0_train,
        f0_test=f0_test,
        kernels=kernels,
        kernels_test=kernels_test,
    )
    if track_kernel:
        traj.drift = scalars(rec["drift"])
        traj.drift_test = stack(rec["drift_test"])
        traj.convex_integrand = scalars(rec["convex"]) if rec["convex"] else None
        traj.kernel0, traj.kernel0_test = K0, K0t
        traj.km_kernel, traj.km_kernel_test = km_left, km_left_t
        traj.km_kernel_trapezoid, traj.km_kernel_test_trapezoid = km_trap, km_trap_t
        if rec["rem"]:
            traj.remainder = scalars(rec["rem"])
            traj.remainder_test = stack(rec["rem_t"])
    return traj
