"""Interval bound propagation (IBP) through fully connected ReLU nets in NTK parameterization (seed 000
App. H.2, eq. (67)) and the IBP certified radius of a finite net (Table 2), searched as in ``certified_radius``.

Centre/radius form, widened per layer for rounding; for an ℓ2 ball the first layer uses the exact ℓ2 range.
With ``params0`` the initial net f₀ is bounded over the whole ball too (f − f₀ ∈ [fᴸ − f₀ᵁ, fᵁ − f₀ᴸ]): the
official code's subtraction of f₀ at the clean point only is not sound (docs/errata.md).
"""
from __future__ import annotations

import math
import numbers

from .._lib.backend import device_of, namespace
from .._lib.validation import InvalidParameterError, check_array, check_option, check_real
from ._checks import check_domain, check_tol, dtype_eps
from ._radius import bisect, finish, info, radius_setup
from ._verify import ibp_proven_margin, verify_and_shrink


# ---------------------------------------------------------------------------
# IBP for finite nets (App. H.2)
# ---------------------------------------------------------------------------
def _per_layer(value, n_layers, name, caller, low=None):
    if value is None:
        return None
    if isinstance(value, numbers.Real) or getattr(value, "shape", None) == ():
        v = check_real(value, name, caller=caller, low=low)
        return [v] * n_layers
    vals = list(value)
    if len(vals) != n_layers:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be a scalar or have one value per layer ({n_layers}); "
            f"got {len(vals)}."
        )
    return [check_real(v, f"{name}[{i}]", caller=caller, low=low) for i, v in enumerate(vals)]


def _check_net(net, params, W_std, b_std, caller, xp=None):
    if params is None:
        params = getattr(net, "params", None)
    try:
        layers = [tuple(layer) for layer in params]
    except TypeError:
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a list of (W, b) pairs.") from None
    if not layers or any(len(layer) != 2 for layer in layers):
        raise InvalidParameterError(f"The 'params' parameter of {caller} must be a non-empty list of (W, b) pairs.")
    L = len(layers)
    ws = _per_layer(W_std if W_std is not None else getattr(net, "W_std", 1.0), L, "W_std", caller, low=0.0)
    bs = _per_layer(b_std if b_std is not None else getattr(net, "b_std", 0.0), L, "b_std", caller, low=0.0)
    if xp is None:
        xp = namespace(*[layer[0] for layer in layers])
    out = []
    fan_in = None
    for i, (W, b) in enumerate(layers):
        W = check_array(W, f"params[{i}][0]", caller=caller, ndim=2, xp=xp)
        if fan_in is not None and W.shape[0] != fan_in:
            raise InvalidParameterError(
                f"The 'params' parameter of {caller}: layer {i} has fan_in {W.shape[0]}, "
                f"but the previous layer has fan_out {fan_in}."
            )
        fan_in = W.shape[1]
        if b is not None:
            b = check_array(b, f"params[{i}][1]", caller=caller, ndim=1, xp=xp, shape=(W.shape[1],))
        out.append((W, b))
    if fan_in != 1:
        raise InvalidParameterError(
            f"The 'params' parameter of {caller}: the readout must have fan_out 1; got {fan_in}."
        )
    return out, ws, bs


def _affine_interval(mu, rad, W, b, ws, bs, xp, eps):
    fan_in = W.shape[0]
    scale = ws / math.sqrt(fan_in)
    absW = xp.abs(W)
    mu_new = scale * (mu @ W)
    rad_new = abs(scale) * (rad @ absW)
    # rounding: |fl(μW) − μW| ≤ γ|μ||W|; widen the radius so the interval stays sound
    err = (fan_in + 4) * eps * abs(scale) * ((xp.abs(mu) + rad) @ absW)
    if b is not None and bs != 0.0:
        mu_new = mu_new + bs * b[None, :]
        err = err + 4 * eps * abs(bs) * xp.abs(b)[None, :]
    return mu_new, rad_new + err


def _propagate(layers, ws, bs, lo, hi, start, xp, eps):
    """Propagate pre-activation bounds (lo, hi) of layer ``start − 1`` to the output."""
    for i in range(start, len(layers)):
        lo, hi = xp.maximum(lo, 0.0), xp.maximum(hi, 0.0)  # ReLU is monotone
        mu, rad = (lo + hi) / 2.0, (hi - lo) / 2.0
        W, b = layers[i]
        mu, rad = _affine_interval(mu, rad, W, b, ws[i], bs[i], xp, eps)
        lo, hi = mu - rad, mu + rad
    return lo[:, 0], hi[:, 0]


def _forward(layers, ws, bs, x, xp):
    h = x
    for i, (W, b) in enumerate(layers):
        z = ws[i] * (h @ W) / math.sqrt(W.shape[0])
        if b is not None and bs[i] != 0.0:
            z = z + bs[i] * b[None, :]
        h = xp.maximum(z, 0.0) if i + 1 < len(layers) else z
    return h[:, 0]


def ibp_bounds(net, params, x_lower, x_upper, *, W_std=None, b_std=None):
    r"""Interval bound propagation through an NTK-parameterised ReLU net (seed 000 App. H.2, eq. (67)).

    Bounds f(x) for all x with x_lower ≤ x ≤ x_upper (elementwise), where
    f = layer_L ∘ ReLU ∘ … ∘ ReLU ∘ layer_1 and layer_l(h) = W_std·(h @ W)/√fan_in
    + b_std·b (W of shape (fan_in, fan_out), no activation on the readout).
    Centre/radius form: μ′ = W_std·(μ @ W)/√fan_in + b_std·b,
    r′ = |W_std|·(r @ |W|)/√fan_in; ReLU applied to both ends.

    Parameters
    ----------
    net : object or None
        Supplies ``W_std`` and ``b_std`` attributes (e.g. ``ntkref.nets.FullyConnected``);
        None → the keywords (defaults 1.0 and 0.0).
    params : list of (W, b)
        b may be None (no bias).  The readout has fan_out 1.
    x_lower, x_upper : arrays (n, d)
    W_std, b_std : float or sequence (one per layer), optional
        Override the net's values.  Finite and ≥ 0 (standard deviations: a
        negative value raises :class:`InvalidParameterError` naming ``W_std``/``b_std``).

    Returns
    -------
    lower, upper : arrays (n,)
        Sound: each interval is widened by (fan_in + 4)·eps·(|μ| + r)@|W| per layer
        for rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify
    >>> rng = np.random.default_rng(0)
    >>> params = [(rng.standard_normal((4, 16)), None), (rng.standard_normal((16, 1)), None)]
    >>> def f(x):                                    # layer(h) = h @ W/√fan_in, ReLU between layers
    ...     return (np.maximum(x @ params[0][0] / 2, 0) @ params[1][0] / 4)[:, 0]
    >>> x0 = rng.standard_normal((2, 4))
    >>> lo, hi = certify.ibp_bounds(None, params, x0 - 0.1, x0 + 0.1)
    >>> fx = f(x0[0] + rng.uniform(-0.1, 0.1, (1000, 4)))          # f on 1000 points of the first box
    >>> bool(lo[0] <= fx.min() and fx.max() <= hi[0])
    True
    >>> lo, hi = certify.ibp_bounds(None, params, x0, x0)           # a point: f(x₀) up to rounding
    >>> bool(np.allclose(lo, f(x0), rtol=0, atol=1e-12) and np.allclose(hi, f(x0), rtol=0, atol=1e-12))
    True
    """
    caller = "ibp_bounds"
    xp = namespace(x_lower, x_upper)
    layers, ws, bs = _check_net(net, params, W_std, b_std, caller, xp)
    d = layers[0][0].shape[0]
    xl = check_array(x_lower, "x_lower", caller=caller, ndim=2, xp=xp)
    xu = check_array(x_upper, "x_upper", caller=caller, ndim=2, xp=xp, shape=tuple(xl.shape))
    if xl.shape[1] != d:
        raise InvalidParameterError(f"The 'x_lower' parameter of {caller} must have {d} columns; got {xl.shape[1]}.")
    if not bool(xp.all(xl <= xu)):
        raise InvalidParameterError(
            f"The 'x_lower' and 'x_upper' parameters of {caller} must satisfy x_lower <= x_upper."
        )
    eps = dtype_eps(xl.dtype, xp)
    mu, rad = _affine_interval((xl + xu) / 2.0, (xu - xl) / 2.0, *layers[0], ws[0], bs[0], xp, eps)
    return _propagate(layers, ws, bs, mu - rad, mu + rad, 1, xp, eps)


def _first_layer_ball(layers, ws, bs, x0, delta, norm, domain, xp, eps):
    """Pre-activation interval of layer 1 over the ball (∩ domain)."""
    W, b = layers[0]
    dcol = delta[:, None]
    if norm == "linf" or domain is not None:
        a, c = x0 - dcol, x0 + dcol
        if domain is not None:
            a, c = xp.maximum(a, domain[0][None, :]), xp.minimum(c, domain[1][None, :])
        mu, rad = _affine_interval((a + c) / 2.0, (c - a) / 2.0, W, b, ws[0], bs[0], xp, eps)
        lo, hi = mu - rad, mu + rad
    if norm == "l2":
        # exact: max_{‖Δ‖₂ ≤ δ} ⟨Δ, W_{:,k}⟩ = δ‖W_{:,k}‖₂
        mu, rad = _affine_interval(x0, xp.zeros_like(x0), W, b, ws[0], bs[0], xp, eps)
        col = abs(ws[0]) / math.sqrt(W.shape[0]) * xp.sqrt(xp.sum(W * W, axis=0))
        rad = rad + dcol * col[None, :] * (1.0 + (W.shape[0] + 4) * eps)
        lo2, hi2 = mu - rad, mu + rad
        if domain is not None:
            lo, hi = xp.maximum(lo, lo2), xp.minimum(hi, hi2)
        else:
            lo, hi = lo2, hi2
    return lo, hi


def ibp_radius(
    net,
    params,
    x_test,
    *,
    params0=None,
    y=None,
    norm="linf",
    domain=None,
    tol=1e-4,
    max_radius=None,
    W_std=None,
    b_std=None,
    return_info=False,
):
    r"""Certified radius of a finite net by IBP (seed 000 App. H.2, Table 2), bisection as in
    :func:`certified_radius`.

    The certified function is g = f(params, ·) or, with ``params0``,
    g = f(params, ·) − f(params0, ·) (the official code's f − f₀ convention).
    The bound of g over the ball is sound in both cases: with ``params0`` the
    lower bound is fᴸ − f₀ᵁ, both from IBP over the same ball.  (The official
    code uses fᴸ − f₀(x₀), i.e. f₀ at the clean point only — not a certificate
    for f − f₀; docs/errata.md.)

    Parameters
    ----------
    net : object or None
        Supplies ``W_std``/``b_std`` (see :func:`ibp_bounds`).
    params : list of (W, b)
    x_test : array (n_test, d)
    params0 : list of (W, b) or None
        Initial parameters; same shapes as ``params``.
    y : array (n_test,) of ±1, optional
        Misclassified points get radius 0 (``info["misclassified"]``).
    norm : {"linf", "l2"}
    domain : (lo, hi) or None
    tol, max_radius, return_info : as in :func:`certified_radius`; the default
        top is ‖x₀‖ in the ball's norm (for bias-free nets g(0) = 0 there).
    W_std, b_std : float or sequence, optional
        As in :func:`ibp_bounds`: finite, W_std ≥ 0 and b_std ≥ 0 (standard deviations).

    Returns
    -------
    radii : array (n_test,) (and the info dict if ``return_info``)

    Notes
    -----
    Proven in floating point as :func:`certified_radius`: the returned radius
    is re-checked by IBP in outward-rounded interval arithmetic
    (:mod:`ntkref.intervals`), shrunk until proven (``info["verified"]``,
    ``"shrunk"``, ``"unproven"``).

    At initialisation the IBP radius scales like m^{−1/2} in the width m
    (App. H.2: the interval radius grows like √m while f = O(1)).  Each step
    costs one IBP pass (two matrix products per layer).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify
    >>> rng = np.random.default_rng(0)
    >>> params = [(rng.standard_normal((4, 16)), None), (rng.standard_normal((16, 1)), None)]
    >>> def f(x):                                    # layer(h) = h @ W/√fan_in, ReLU between layers
    ...     return (np.maximum(x @ params[0][0] / 2, 0) @ params[1][0] / 4)[:, 0]
    >>> x0 = rng.standard_normal((2, 4))
    >>> r = certify.ibp_radius(None, params, x0)
    >>> lo, hi = certify.ibp_bounds(None, params, x0 - r[:, None], x0 + r[:, None])
    >>> bool(np.all(np.where(f(x0) > 0, lo, -hi) > 0))              # IBP proves sign f constant on the balls
    True
    """
    caller = "ibp_radius"
    xp = namespace(x_test)
    layers, ws, bs = _check_net(net, params, W_std, b_std, caller, xp)
    d = layers[0][0].shape[0]
    x_test = check_array(x_test, "x_test", caller=caller, ndim=2, xp=xp)
    if x_test.shape[1] != d:
        raise InvalidParameterError(f"The 'x_test' parameter of {caller} must have {d} columns; got {x_test.shape[1]}.")
    layers0 = ws0 = bs0 = None
    if params0 is not None:
        layers0, ws0, bs0 = _check_net(net, params0, W_std, b_std, caller, xp)
        if [tuple(W.shape) for W, _ in layers0] != [tuple(W.shape) for W, _ in layers]:
            raise InvalidParameterError(f"The 'params0' parameter of {caller} must have the same shapes as 'params'.")
    check_option(norm, "norm", ("linf", "l2"), caller=caller)
    dom = check_domain(domain, x_test, xp, caller)
    tol = check_tol(tol, x_test.dtype, xp, caller)
    n = x_test.shape[0]
    eps = dtype_eps(x_test.dtype, xp)
    top = radius_setup(x_test, xp, norm, max_radius, caller)
    g0 = _forward(layers, ws, bs, x_test, xp)
    if layers0 is not None:
        g0 = g0 - _forward(layers0, ws0, bs0, x_test, xp)
    sign, at_margin, misclassified = finish(g0, y, xp, caller, n)
    active = (~at_margin) & (~misclassified)

    def bounds(delta):
        lo, hi = _first_layer_ball(layers, ws, bs, x_test, delta, norm, dom, xp, eps)
        lower, upper = _propagate(layers, ws, bs, lo, hi, 1, xp, eps)
        if layers0 is not None:
            lo0, hi0 = _first_layer_ball(layers0, ws0, bs0, x_test, delta, norm, dom, xp, eps)
            lower0, upper0 = _propagate(layers0, ws0, bs0, lo0, hi0, 1, xp, eps)
            lower, upper = lower - upper0, upper - lower0
        return lower, upper

    def margin(delta):
        lower, upper = bounds(delta)
        return xp.where(sign > 0, lower, -upper)

    dev = device_of(x_test)
    shrunk = unproven = xp.zeros((n,), dtype=xp.bool, device=dev)
    if n == 0:
        radii, capped = xp.zeros((0,), dtype=x_test.dtype, device=dev), xp.zeros((0,), dtype=xp.bool, device=dev)
        steps = 0
    else:
        radii, capped, steps = bisect(margin, top, active, tol, xp)
        # the proof: IBP re-run in outward-rounded interval arithmetic at the returned radii (_verify docstring)
        proven = ibp_proven_margin(layers, ws, bs, layers0, ws0, bs0, x_test, norm, dom, xp)
        radii, shrunk, unproven = verify_and_shrink(radii, proven, sign, top * 2.0**-60, tol, xp)
        capped = capped & ~shrunk
    if return_info:
        return radii, info(g0, sign, at_margin, misclassified, capped, steps, shrunk, unproven)
    return radii
