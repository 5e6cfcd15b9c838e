r"""Side by side: a finite network and the kernel machines it is equivalent to (seed 000 §3.3–3.5).

:func:`compare` trains a network by (sub)gradient descent on (7) (:func:`ntkref.nets.train`) and
the kernel machine (8) by the *same* discrete dynamics (:func:`ntkref.dynamics.subgradient_descent`)
with K = Θ̂(w₀) (the empirical tangent kernel at initialisation) and, optionally, with the analytic
NTK of the architecture (:func:`ntkref.kernels.fc`, times κ² per :class:`~ntkref.nets.Scaled`), from the same initial function g₀ = f₀.  It
reports the gaps ‖f_t − g_t‖ on training and test points and the kernel drift ‖Θ̂(w_t) − Θ̂(w₀)‖₂.

Which network matches which machine (see :mod:`ntkref.nets._train` for the derivations):

- Theorem 3.4's equivalence needs f₀ = g₀ and a constant tangent kernel.  Use
  :class:`~ntkref.nets.Antisymmetric` (f₀ ≡ 0) and ``regularize="from_init"``: the gap then
  vanishes like m^{-1/2} (hinge) or faster (smooth losses).
- ``regularize="readout"`` is (7) as printed; with λ > 0 its tangent kernel drifts by O(λt) at
  every width and the gap does not vanish — a seed error, shown in ``tests/test_bounds.py``.
- A :class:`~ntkref.nets.Linearized` network with ``"from_init"`` *is* the kernel machine:
  the gap is rounding.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import dynamics as _dynamics
from . import kernels as _kernels
from . import losses as _losses
from ._lib.backend import is_array, namespace
from ._lib.validation import InvalidParameterError, check_array
from .nets import train as _train
from .nets._common import input_on

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    """Trajectories and gaps (arrays of the network's namespace; R records)."""

    nn: object  # NetTrajectory
    km: object  # dynamics.Trajectory with K = Θ̂(w₀)
    km_analytic: object  # dynamics.Trajectory with the analytic NTK, or None
    gap_train: object  # (R,) ‖f_t − g_t‖₂ on the training points
    gap_test: object  # (R,) max over test points |f_t(x) − g_t(x)|, or None
    gap_train_analytic: object  # (R,) or None
    drift: object  # (R,) ‖Θ̂(w_t) − Θ̂(w₀)‖₂ (training points), if tracked


def _analytic_target(net):
    """(base, c): the :class:`~ntkref.nets.FullyConnected` under ``net``'s wrappers and the factor c with
    which its analytic NTK is the wrappers' limit kernel.

    Unwrapped level by level: :class:`~ntkref.nets.Scaled` (f = κ·f_inner, so ∇f = κ∇f_inner and
    Θ̂ = κ²Θ̂_inner, seed 004 Theorem 2) multiplies c by κ²; :class:`~ntkref.nets.Antisymmetric`
    (Θ̂ = (Θ̂_A + Θ̂_B)/2, each half → Θ) and :class:`~ntkref.nets.Linearized` (Θ̂ ≡ Θ̂_inner(w₀)) keep it.
    Any other base (a ConvNet, a HomogeneousNet) has no ``kernels.fc`` limit: an error naming ``net``.
    """
    import math

    from .nets import Antisymmetric, FullyConnected, Linearized, Scaled

    factor, inner = 1.0, net
    while isinstance(inner, (Scaled, Antisymmetric, Linearized)):
        if isinstance(inner, Scaled):
            factor *= float(inner.kappa) ** 2
        inner = inner.net
    if not isinstance(inner, FullyConnected):
        raise InvalidParameterError(
            f"The 'net' parameter of compare with analytic=True must be a FullyConnected ReLU network, possibly "
            f"wrapped in Scaled, Antisymmetric or Linearized (its limit kernel is kernels.fc's NTK); its base is "
            f"{type(inner).__name__}. Pass analytic=False.")
    if not (math.isfinite(factor) and factor > 0):
        raise InvalidParameterError(
            f"The 'net' parameter of compare with analytic=True: the product of its Scaled wrappers' kappa**2 is "
            f"{factor!r}, not a positive finite float; rescale kappa.")
    return inner, factor


def compare(
    net,
    params,
    x,
    y,
    loss,
    lam,
    lr,
    steps,
    *,
    x_test=None,
    analytic=False,
    regularize="from_init",
    reduction="sum",
    track_kernel=True,
):
    """Train ``net`` and its kernel machines by the same full-batch (sub)gradient descent.

    Parameters are those of :func:`ntkref.nets.train`; ``analytic=True`` also runs the KM with
    c·``kernels.fc(depth, W_std, b_std).ntk`` of the network's architecture (ReLU), c the product of
    κ² over its :class:`~ntkref.nets.Scaled` wrappers (Antisymmetric and Linearized keep the kernel);
    a base other than :class:`~ntkref.nets.FullyConnected` is an error naming ``net``.  For a
    Linearized net the analytic kernel is the limit of Θ̂ at an *initialisation* w₀.
    The KM starts from g₀ = f₀ (the network's initial outputs) with coefficients α₀ = 0; under (8)
    its g₀ decays like (1 − ηλ)^k, while ``"from_init"`` keeps the network's f₀, so the two agree
    only for f₀ = 0 (:class:`~ntkref.nets.Antisymmetric`, or its :class:`~ntkref.nets.Linearized`).

    Finite or an error: ``params`` must be the network's parameters (as ``net.init`` returns them), the loss of the initial outputs f₀ against ``y`` must be representable, ``x_test`` (if
    given) needs a row, and a record that overflows during training is an error naming the inputs.
    """
    if analytic:
        base, factor = _analytic_target(net)
    _check_inputs(net, params, x, y, loss, x_test)
    nn = _train(
        net, params, x, y, loss, lam, lr, steps, x_test=x_test, regularize=regularize,
        reduction=reduction, track_kernel=track_kernel,
    )
    xp = namespace(nn.f_train)
    K0 = nn.kernel0 if nn.kernel0 is not None else net.empirical_ntk(params, x)
    K0t = None
    if x_test is not None:
        K0t = nn.kernel0_test if nn.kernel0_test is not None else net.empirical_ntk(params, x_test, x)
    g0, g0t = nn.f0_train, nn.f0_test
    km = _dynamics.subgradient_descent(
        K0, y, loss, lam, lr, steps, K_test=K0t, g0=g0, g0_test=g0t, reduction=reduction
    )
    gap = xp.sqrt(xp.sum((nn.f_train - km.g_train) ** 2, axis=1))
    gap_t = xp.max(xp.abs(nn.f_test - km.g_test), axis=1) if x_test is not None else None
    km_a = gap_a = None
    if analytic:
        arch = dict(depth=base.depth, W_std=list(base.W_std), b_std=list(base.b_std))
        K = factor * _kernels.fc(x, **arch).ntk
        Kt = factor * _kernels.fc(x_test, x, **arch).ntk if x_test is not None else None
        km_a = _dynamics.subgradient_descent(K, y, loss, lam, lr, steps, K_test=Kt, g0=g0, g0_test=g0t, reduction=reduction)
        gap_a = xp.sqrt(xp.sum((nn.f_train - km_a.g_train) ** 2, axis=1))
    out = Comparison(nn, km, km_a, gap, gap_t, gap_a, nn.drift)
    bad = _first_non_finite(out, "")
    if bad is not None:
        who = "'x_test'" if "test" in bad else "'x', 'y', 'params' and 'lr'"
        raise FloatingPointError(
            f"compare: the record {bad[1:]} is not finite (float overflow while training or tracking the kernel); "
            f"rescale {who}.")
    return out


def _check_inputs(net, params, x, y, loss, x_test):
    """What ``nets.train`` would only find deep inside (or name by an internal variable), named here."""
    caller = "compare"
    if is_array(params) or not isinstance(params, (list, tuple)) or not params:
        raise InvalidParameterError(
            f"The 'params' parameter of {caller} must be the network's parameters as returned by net.init (a "
            f"list of layers, or a tuple of such lists). Got {type(params).__name__} instead.")
    if x_test is not None and is_array(x_test) and x_test.ndim == 2 and x_test.shape[0] == 0:
        raise InvalidParameterError(
            f"The 'x_test' parameter of {caller} must have at least one row (gap_test is a max over the test "
            f"points); got shape {tuple(x_test.shape)}. Pass x_test=None for no test points.")
    loss = _losses.get(loss)
    f0 = net.apply(params, x)
    xp = namespace(f0)
    y = check_array(input_on(y, f0), "y", caller=caller, ndim=1, xp=xp)
    if y.shape[0] != f0.shape[0]:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have one entry per row of x "
                                    f"({f0.shape[0]}); got shape {tuple(y.shape)}.")
    f_max = float(xp.max(xp.abs(f0))) if f0.shape[0] else 0.0
    y_max = float(xp.max(xp.abs(y))) if y.shape[0] else 0.0
    try:
        value = loss.value(f0, xp.astype(y, f0.dtype))
    except InvalidParameterError as exc:
        if "overflows" not in str(exc):
            raise InvalidParameterError(f"The 'y' parameter of {caller} does not fit the {loss.name} loss: {exc}") from None
        value = None
    if value is None or not bool(xp.all(xp.isfinite(value))):
        who = "'y'" if y_max >= f_max else "'x' (or 'params')"
        raise InvalidParameterError(
            f"compare: the {loss.name} loss of the initial outputs f0 against y overflows (max|y| = {y_max:.3g}, "
            f"max|f0| = {f_max:.3g}); the scale of {who} is too large. Rescale it.")


def _first_non_finite(obj, path):
    """The dotted path of the first floating array (or float) in ``obj`` with a NaN or inf, else None."""
    import math

    if obj is None or isinstance(obj, (str, bool, int)):
        return None
    if isinstance(obj, float):
        return path if not math.isfinite(obj) else None
    if is_array(obj):
        xp = namespace(obj)
        if (xp.isdtype(obj.dtype, "real floating") and math.prod(tuple(obj.shape))
                and not bool(xp.all(xp.isfinite(obj)))):
            return path
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = ((f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj))
    elif isinstance(obj, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(obj))
    else:
        return None
    for name, v in items:
        bad = _first_non_finite(v, f"{path}.{name}")
        if bad is not None:
            return bad
    return None
