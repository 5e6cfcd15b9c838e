r"""Side by side: a finite network and the kernel machines it is equivalent to (seed 000 §3.3–3.5).

:func:`compare` trains a network by (sub)gradient descent on (7) (:func:`ntkref.nets.train`) and
the kernel machine (8) by the *same* discrete dynamics (:func:`ntkref.dynamics.subgradient_descent`)
with K = Θ̂(w₀) (the empirical tangent kernel at initialisation) and, optionally, with the analytic
NTK of the architecture (:func:`ntkref.kernels.fc`), from the same initial function g₀ = f₀.  It
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

from dataclasses import dataclass

from . import dynamics as _dynamics
from . import kernels as _kernels
from ._backend import namespace
from .nets import train as _train

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


def _base_net(net):
    inner = getattr(net, "net", net)
    return inner


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
    ``kernels.fc(depth, W_std, b_std).ntk`` of the network's architecture (ReLU).
    The KM starts from g₀ = f₀ (the network's initial outputs) with coefficients α₀ = 0; under (8)
    its g₀ decays like (1 − ηλ)^k, while ``"from_init"`` keeps the network's f₀, so the two agree
    only for f₀ = 0 (:class:`~ntkref.nets.Antisymmetric`, or its :class:`~ntkref.nets.Linearized`).
    """
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
        base = _base_net(net)
        K = _kernels.fc(x, depth=base.depth, W_std=list(base.W_std), b_std=list(base.b_std)).ntk
        Kt = _kernels.fc(x_test, x, depth=base.depth, W_std=list(base.W_std), b_std=list(base.b_std)).ntk if x_test is not None else None
        km_a = _dynamics.subgradient_descent(K, y, loss, lam, lr, steps, K_test=Kt, g0=g0, g0_test=g0t, reduction=reduction)
        gap_a = xp.sqrt(xp.sum((nn.f_train - km_a.g_train) ** 2, axis=1))
    return Comparison(nn, km, km_a, gap, gap_t, gap_a, nn.drift)
