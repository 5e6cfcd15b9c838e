r"""Adapters between ntkref's conventions and peers' objects: neural-tangents ``stax`` models and scikit-learn
estimators fitted on a precomputed Gram matrix.

neural-tangents (optional: ``pip install -e ".[peers]"`` from ntkref's checkout; imported only by ``stax_*``)
-------------------------------------------------------------------------------------------------------------
:func:`stax_fc` and :func:`stax_cntk` return the ``(init_fn, apply_fn, kernel_fn)`` of the stax model whose
infinite-width kernels are ``kernels.fc`` / ``kernels.cntk`` with the same parameters (docs/conventions.md, 'FC
kernels'): per hidden layer ``Dense(1, W_std=W_h, b_std=b_h)`` (``Conv(1, (q, q), padding="SAME")`` for the CNTK)
followed by the activation (``Relu()``, ``Erf()`` — ntkref's erf is erf(x), stax's ``Erf(a=1, b=1, c=0)``), then
the readout ``Dense(1, W_std=W_L, b_std=b_L)`` (after ``GlobalAvgPool()`` or ``Flatten()`` for the CNTK); a
standard deviation of 0 becomes ``b_std=None`` (no bias parameters: the same kernels).  ``kernel_fn(x1, x2,
"ntk")`` then equals ntkref's kernel to rounding where both are accurate — enable float64 first
(``jax.config.update("jax_enable_x64", True)``): tests/test_adapters.py compares them to 1e-12 (FC, generic inputs)
in a separate interpreter with neural-tangents 0.6.5 / jax 0.5.3.  ntkref's CNTK takes NCHW images;
``layout="NCHW"`` (default) builds the stax convolutions with ``dimension_numbers=("NCHW", "HWIO", "NCHW")``
and pools over axis 1 so the same arrays go to both; ``layout="NHWC"`` is stax's default.

scikit-learn (on a precomputed Gram K)
--------------------------------------
ntkref's machines minimise seed 000 eq. (7), L(α) = (λ/2)αᵀKα + Σᵢ l((Kα)ᵢ, yᵢ) (``reduction="mean"``: the
loss sum divided by n), with the squared loss (y − z)² without ½:

- ``KernelRidge(alpha=a, kernel="precomputed")`` minimises ‖y − Kα‖² + a·αᵀKα, so a = λ/2 (sum) or nλ/2
  (mean); its ``dual_coef_`` is α.  :func:`kernel_ridge_alpha` gives a, :func:`from_kernel_ridge` (α, λ).
- ``SVC(C=C, kernel="precomputed")`` minimises ½‖w‖² + C Σ hinge with an unregularised intercept b, so
  λ = 1/C (sum) or 1/(nC) (mean); α = ``dual_coef_`` at ``support_`` (y = +1 for ``classes_[1]``) and
  b = ``intercept_``.  :func:`svc_C` gives C, :func:`from_svc` (α, b, λ) — the (α, b) conversion is
  ``ntkref.kkt.from_sklearn_svc``, reused here; judge the result with ``ntkref.kkt.kkt_residual`` /
  ``duality_gap`` (``intercept=b``).
"""
from __future__ import annotations

import numbers

from ._lib.validation import InvalidParameterError, check_int, check_option, check_real

__all__ = ["stax_fc", "stax_cntk", "kernel_ridge_alpha", "from_kernel_ridge", "svc_C", "from_svc"]

_ACTIVATIONS = ("relu", "erf")


def _stax():
    try:
        import neural_tangents
    except ImportError as exc:
        raise ImportError(
            "ntkref.adapters.stax_fc/stax_cntk need neural-tangents (and jax): install the 'peers' extra from "
            "ntkref's checkout, pip install -e \".[peers]\" (ntkref is not on a package index, so "
            "pip install \"ntkref[peers]\" does not work; neural-tangents 0.6.5 imports TensorFlow, which the "
            "extra pulls in: use a dedicated virtual environment to keep it out of yours)."
        ) from exc
    return neural_tangents.stax


def _per_layer(value, name, n, caller):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        values = [value] * n
    else:
        values = list(value)
        if len(values) != n:
            raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a number or a sequence of "
                                        f"depth + 1 = {n} numbers (readout last). Got {len(values)} values.")
    return [check_real(v, name, caller=caller, low=0.0) for v in values]


def _bias(b):
    return None if b == 0 else b


def _activation(stax, activation):
    return stax.Relu() if activation == "relu" else stax.Erf(a=1.0, b=1.0, c=0.0)


def stax_fc(depth, W_std=1.0, b_std=0.0, activation="relu"):
    """neural-tangents stax model with the kernels of ``kernels.fc(depth=depth, W_std=W_std, b_std=b_std,
    activation=activation)`` (module docstring).

    Parameters
    ----------
    depth : int ≥ 0
        Hidden layers.
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats (readout last)
    activation : {"relu", "erf"}

    Returns
    -------
    (init_fn, apply_fn, kernel_fn)
        ``stax.serial`` of the layers; ``kernel_fn(x1, x2, "ntk")`` is ntkref's ``fc(...).ntk``.
    """
    caller = "stax_fc"
    depth = check_int(depth, "depth", caller=caller, low=0)
    ws = _per_layer(W_std, "W_std", depth + 1, caller)
    bs = _per_layer(b_std, "b_std", depth + 1, caller)
    activation = check_option(activation, "activation", _ACTIVATIONS, caller=caller)
    stax = _stax()
    layers = []
    for h in range(depth):
        layers += [stax.Dense(1, W_std=ws[h], b_std=_bias(bs[h])), _activation(stax, activation)]
    layers.append(stax.Dense(1, W_std=ws[depth], b_std=_bias(bs[depth])))
    return stax.serial(*layers)


def stax_cntk(depth, readout="gap", filter_size=3, W_std=1.0, b_std=0.0, *, layout="NCHW"):
    """neural-tangents stax model with the kernels of ``kernels.cntk(depth=depth, readout=readout,
    filter_size=filter_size, W_std=W_std, b_std=b_std)`` (module docstring).

    ``depth`` × [``Conv(1, (q, q), strides=(1, 1), padding="SAME")`` → ``Relu()``], then ``GlobalAvgPool()``
    (``readout="gap"``) or ``Flatten()`` (``"flatten"``) and ``Dense(1)``.  ``layout``: the images' layout
    (``"NCHW"``: the arrays given to ``kernels.cntk``; ``"NHWC"``: stax's default).  ntkref's
    ``fix_first_last`` has no stax counterpart (stax trains every layer) and is not offered.

    Returns
    -------
    (init_fn, apply_fn, kernel_fn)
    """
    caller = "stax_cntk"
    depth = check_int(depth, "depth", caller=caller, low=1)
    readout = check_option(readout, "readout", ("gap", "flatten"), caller=caller)
    q = check_int(filter_size, "filter_size", caller=caller, low=1)
    if q % 2 == 0:
        raise InvalidParameterError(f"The 'filter_size' parameter of {caller} must be odd; got {q}.")
    layout = check_option(layout, "layout", ("NCHW", "NHWC"), caller=caller)
    ws = _per_layer(W_std, "W_std", depth + 1, caller)
    bs = _per_layer(b_std, "b_std", depth + 1, caller)
    stax = _stax()
    dims = ("NCHW", "HWIO", "NCHW") if layout == "NCHW" else ("NHWC", "HWIO", "NHWC")
    channel_axis = 1 if layout == "NCHW" else -1
    layers = []
    for h in range(depth):
        layers += [stax.Conv(1, (q, q), strides=(1, 1), padding="SAME", W_std=ws[h], b_std=_bias(bs[h]),
                             dimension_numbers=dims), stax.Relu()]
    layers.append(stax.GlobalAvgPool(channel_axis=channel_axis) if readout == "gap" else stax.Flatten())
    layers.append(stax.Dense(1, W_std=ws[depth], b_std=_bias(bs[depth])))
    return stax.serial(*layers)


# ---------------------------------------------------------------------------------------------
# scikit-learn
# ---------------------------------------------------------------------------------------------
def _n_for(reduction, n, caller):
    reduction = check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    if reduction == "mean":
        if n is None:
            raise InvalidParameterError(f"The 'n' parameter of {caller} is needed with reduction='mean' "
                                        "(the number of training points).")
        return reduction, check_int(n, "n", caller=caller, low=1)
    return reduction, 1


def kernel_ridge_alpha(lam, *, reduction="sum", n=None):
    """scikit-learn ``KernelRidge``'s ``alpha`` for ntkref's squared-loss machine with λ = ``lam``:
    λ/2 (``reduction="sum"``) or nλ/2 (``"mean"``, n training points)."""
    caller = "kernel_ridge_alpha"
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    reduction, m = _n_for(reduction, n, caller)
    return m * lam / 2


def from_kernel_ridge(estimator, *, reduction="sum", n=None):
    """(α, λ) of a ``KernelRidge(kernel="precomputed")`` fitted on n points: α = ``dual_coef_`` (NumPy, shape
    (n,)), λ = 2·alpha (sum) or 2·alpha/n (mean), for ``ntkref.machines`` with ``loss="squared"``."""
    import numpy as np

    caller = "from_kernel_ridge"
    if not hasattr(estimator, "dual_coef_"):
        raise InvalidParameterError(f"The 'estimator' parameter of {caller} must be a fitted KernelRidge "
                                    "(no dual_coef_).")
    alpha = np.asarray(estimator.dual_coef_, dtype=np.float64)
    if alpha.ndim != 1:
        raise InvalidParameterError(f"The 'estimator' parameter of {caller} must be fitted on one target; "
                                    f"dual_coef_ has shape {alpha.shape}.")
    a = np.asarray(estimator.alpha, dtype=np.float64)
    if a.size != 1:
        raise InvalidParameterError(f"The 'estimator' parameter of {caller} must have one scalar alpha.")
    reduction, m = _n_for(reduction, alpha.shape[0] if (reduction == "mean" and n is None) else n, caller)
    return alpha, 2 * float(a) / m


def svc_C(lam, *, reduction="sum", n=None):
    """scikit-learn ``SVC``'s ``C`` for ntkref's hinge machine with λ = ``lam``: 1/λ (sum) or 1/(nλ) (mean)."""
    caller = "svc_C"
    lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
    reduction, m = _n_for(reduction, n, caller)
    return 1.0 / (m * lam)


def from_svc(estimator, n, *, reduction="sum"):
    """(α, b, λ) of a binary ``SVC(kernel="precomputed")`` fitted on n points: (α, b) from
    ``ntkref.kkt.from_sklearn_svc``, λ = 1/C (sum) or 1/(nC) (mean).  g(x) = Σᵢ αᵢ K(x, xᵢ) + b is then
    ``estimator.decision_function``; y = +1 for ``classes_[1]``."""
    from .kkt import from_sklearn_svc

    caller = "from_svc"
    n = check_int(n, "n", caller=caller, low=1)
    reduction, m = _n_for(reduction, n, caller)
    alpha, b = from_sklearn_svc(estimator, n)
    return alpha, b, 1.0 / (m * float(estimator.C))
