r"""Masks, the sparse network f_{m⊙w} and its Jacobian and tangent kernel (seed 003 §3.2.2, (3.11)).

A mask is a list of 0/1 arrays, one per layer, shaped like the weights (biases are never pruned).  This module
holds :func:`full_mask`, :func:`apply_mask`, :func:`mask_density`, the top-k masks :func:`magnitude_mask` and
:func:`random_mask`, and the sparse network's outputs, VJP, Jacobian J_M(x) = m ⊙ ∇f(m⊙w; x) and tangent kernel
Θ^s(x, x′) = J_M(x) J_M(x′)ᵀ (:func:`masked_apply`, :func:`masked_vjp`, :func:`masked_jacobian`,
:func:`masked_empirical_ntk`).

It is the lowest module of the package, so it also owns the helpers the others share: ``NORMS``, the parameter
and mask checks ``check_params``/``check_mask``, the overflow errors ``overflow``/``finite``, ``scaled`` (a vector
rescaled by its largest entry), ``layer_scale`` (c_ℓ), ``masked_params`` (m ⊙ w without checks), ``n_keep`` and
``topk_masks`` (the top-k rule), and ``masked_ntk`` (Θ^s without checks, also for a continuous m ∈ [0, 1]); these
are also used by :mod:`ntkref.sparsity._awt` and :mod:`ntkref.sparsity._linear`.
"""
from __future__ import annotations

import math

import numpy as np

from .._lib.backend import device_of, namespace
from .._lib.memory import check_memory
from .._lib.validation import (
    InvalidParameterError,
    check_array,
    check_option,
    check_real,
)
from ..nets._common import check_pairs

NORMS = ("linf", "l2")


# ==================================================================================================
# checks and overflow errors shared by the package
# ==================================================================================================
def layer_scale(net, ell):
    """c_ℓ with ∂f/∂W_ℓ = c_ℓ h_ℓᵀ δ_ℓ: W_std,ℓ/√fan_in_ℓ for FullyConnected, 1 for LinearModel."""
    scales = getattr(net, "layer_scales", None)
    if scales is not None:
        return scales[ell]
    return net.W_std[ell] / math.sqrt(net.fan_in[ell])


def _weights(params):
    return [W for W, _ in params]


def check_params(net, params, name, caller):
    """``params`` (the user's parameter ``name``) as a list of ``(W, b)`` pairs of finite real arrays; with a
    ``net``, one pair per layer with the net's weight shapes and bias layout.  Every error names ``name``."""
    n_layers = None if net is None or getattr(net, "fan_in", None) is None else len(net.fan_in)
    check_pairs(params, caller, n_layers, name=name)
    if n_layers is None:
        return params
    b_std = getattr(net, "b_std", (None,) * n_layers)
    for ell, ((W, b), fi, fo, bs) in enumerate(zip(params, net.fan_in, net.fan_out, b_std)):
        if tuple(W.shape) != (fi, fo):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} weight has shape {tuple(W.shape)}; the network "
                f"expects {(fi, fo)}.")
        if bs is not None and (b is None) != (bs == 0):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} bias must be {'None' if bs == 0 else 'present'}.")
        if b is not None and tuple(b.shape) != (fo,):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} bias has shape {tuple(b.shape)}; expected {(fo,)}.")
    return params


def check_mask(params, mask, caller, params_name="params"):
    if mask is None:
        raise InvalidParameterError(f"The 'mask' parameter of {caller} must be a list of 0/1 arrays. Got None.")
    if not isinstance(mask, (list, tuple)):
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must be a list of 0/1 arrays, one per layer (as returned by "
            f"full_mask). Got {type(mask).__name__} instead.")
    if len(mask) != len(params):
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must have one array per layer of {params_name!r} ({len(params)}). "
            f"Got {len(mask)}.")
    out = []
    for ell, (M, (W, _)) in enumerate(zip(mask, params)):
        xp = namespace(W)
        M = check_array(M, f"mask[{ell}]", caller=caller, xp=xp, dtype=W.dtype)
        if tuple(M.shape) != tuple(W.shape):
            raise InvalidParameterError(
                f"The 'mask[{ell}]' parameter of {caller} must have the weight's shape {tuple(W.shape)}; "
                f"got {tuple(M.shape)}.")
        if not bool(xp.all((M == 0) | (M == 1))):
            raise InvalidParameterError(f"The 'mask[{ell}]' parameter of {caller} must contain only 0 and 1.")
        out.append(M)
    return out


def _quoted(names):
    return ", ".join(repr(n) for n in names)


def overflow(caller, what, names, dtype="float64"):
    """The error for a result beyond the dtype's range (finite, valid inputs): names the inputs it grows with."""
    return FloatingPointError(
        f"{caller}: {what} overflows {dtype} for these inputs ({_quoted(names)}); rescale them (the result is not "
        f"representable in this dtype).")


def finite(value, caller, what, names):
    """``value`` (an array, or a list/tuple of arrays and None) if every entry is finite, else :func:`overflow`."""
    for a in (value if isinstance(value, (list, tuple)) else (value,)):
        if isinstance(a, (list, tuple)):
            finite(a, caller, what, names)
        elif a is not None:
            xp = namespace(a)
            if a.size and not bool(xp.all(xp.isfinite(a))):
                raise overflow(caller, what, names, "float32" if a.dtype == xp.float32 else "float64")
    return value


def scaled(v, xp):
    """(v / max|v|, max|v|) along the last axis: the rescaled vector has entries in [−1, 1] and a norm in [1, √d],
    so norms and inner products of directions neither overflow (|v| ~ 1e300) nor underflow (|v| ~ 1e-300)."""
    scale = xp.max(xp.abs(v), axis=-1, keepdims=True)
    return v / xp.where(scale > 0, scale, xp.ones_like(scale)), scale


# ==================================================================================================
# masks
# ==================================================================================================
def full_mask(params):
    """The all-ones mask (the dense network)."""
    check_params(None, params, "params", "full_mask")
    return [namespace(W).ones_like(W) for W, _ in params]


def apply_mask(params, mask):
    """Masked parameters m ⊙ w: every weight times its 0/1 mask, biases unchanged."""
    check_params(None, params, "params", "apply_mask")
    mask = check_mask(params, mask, "apply_mask")
    return [(W * M, b) for (W, b), M in zip(params, mask)]


def masked_params(params, mask):
    """apply_mask without checks (masks already checked)."""
    return [(W * M, b) for (W, b), M in zip(params, mask)]


def mask_density(mask):
    """Fraction of kept weights Σ m / #weights (a Python float)."""
    caller = "mask_density"
    if not isinstance(mask, (list, tuple)) or not mask:
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must be a non-empty list of 0/1 arrays, one per layer. "
            f"Got {type(mask).__name__} instead.")
    kept = total = 0
    for ell, M in enumerate(mask):
        M = check_array(M, f"mask[{ell}]", caller=caller)
        xp = namespace(M)
        if not bool(xp.all((M == 0) | (M == 1))):
            raise InvalidParameterError(f"The 'mask[{ell}]' parameter of {caller} must contain only 0 and 1.")
        kept += float(xp.sum(M))
        total += math.prod(M.shape)
    if total == 0:
        raise InvalidParameterError(f"The 'mask' parameter of {caller} holds no weights.")
    return kept / total


def n_keep(n, density, caller):
    density = check_real(density, "density", caller=caller, low=0.0, high=1.0, closed="right")
    return max(1, int(math.floor(density * n + 1e-9)))


def topk_masks(scores, shapes, density, scope, caller, like, tiebreak=None):
    """0/1 masks keeping the top-k scores (ties: larger ``tiebreak`` score, then the lower flat index).

    Pure array-API: two stable descending argsorts give the order (primary descending, then secondary descending,
    then index ascending — ``numpy.lexsort((-secondary, -primary))``), and the inverse permutation (a third
    argsort) marks the first k positions without any setitem.  ``scores``/``tiebreak`` are lists of arrays shaped
    like the weights, in ``like``'s namespace.
    """
    scope = check_option(scope, "scope", ("global", "layer"), caller=caller)
    xp = namespace(like)

    def keep_top(primary, secondary):
        k = n_keep(primary.shape[0], density, caller)
        if secondary is None:
            order = xp.argsort(primary, descending=True, stable=True)
        else:
            o1 = xp.argsort(secondary, descending=True, stable=True)
            order = xp.take(o1, xp.argsort(xp.take(primary, o1), descending=True, stable=True))
        rank = xp.argsort(order, stable=True)  # rank[i] = position of entry i in the order
        return xp.astype(rank < k, like.dtype)

    def flat(arrs):
        return xp.concat([xp.reshape(xp.asarray(a, dtype=like.dtype, device=device_of(like)), (-1,)) for a in arrs])

    if scope == "global":
        keep = keep_top(flat(scores), None if tiebreak is None else flat(tiebreak))
        out, start = [], 0
        for shp in shapes:
            size = math.prod(shp)
            out.append(xp.reshape(keep[start:start + size], shp))
            start += size
        return out
    return [xp.reshape(keep_top(flat([sc]), None if tiebreak is None else flat([tb])), shp)
            for sc, tb, shp in zip(scores, tiebreak if tiebreak is not None else [None] * len(scores), shapes)]


def magnitude_mask(params, density, *, scope="global"):
    r"""Keep the ⌊density·P⌋ weights of largest |w| (at least one): Algorithm 2's "mask based on magnitudes".

    ``scope="global"`` ranks all weights together; ``"layer"`` keeps ⌊density·P_ℓ⌋ in every layer.  Ties are
    broken by the lower flat index (row-major, layer order).  Computed in the weights' namespace (stable sorts).
    """
    Ws = _weights(check_params(None, params, "params", "magnitude_mask"))
    return topk_masks([namespace(W).abs(W) for W in Ws], [tuple(W.shape) for W in Ws], density, scope,
                       "magnitude_mask", Ws[0])


def random_mask(params, density, seed, *, scope="global"):
    """A uniformly random mask with exactly ⌊density·P⌋ kept weights (per layer with ``scope="layer"``).

    Drawn from ``numpy.random.default_rng(seed)`` (uniform scores for a random permutation, drawn on the host and
    moved to the weights' namespace), reproducible.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    Ws = _weights(check_params(None, params, "params", "random_mask"))
    xp = namespace(Ws[0])
    scores = [xp.asarray(rng.random(tuple(W.shape)), dtype=W.dtype, device=device_of(W)) for W in Ws]
    return topk_masks(scores, [tuple(W.shape) for W in Ws], density, scope, "random_mask", Ws[0])


# ==================================================================================================
# the sparse network f_{m⊙w}: outputs, Jacobian and tangent kernel (§3.2.2, (3.11))
# ==================================================================================================
def masked_apply(net, params, mask, x):
    """Outputs of the sparse network f_{m⊙w}(x), shape (n,) (seed 003 §3.2.2)."""
    check_params(net, params, "params", "masked_apply")
    return net.apply(masked_params(params, check_mask(params, mask, "masked_apply")), x)


def masked_vjp(net, params, mask, x, cotangent):
    r"""Σᵢ cᵢ ∇_w f_{m⊙w}(xᵢ) = m ⊙ Σᵢ cᵢ ∇f(m⊙w; xᵢ), params-shaped (biases unmasked)."""
    check_params(net, params, "params", "masked_vjp")
    mask = check_mask(params, mask, "masked_vjp")
    grads = net.vjp(masked_params(params, mask), x, cotangent)
    return [(dW * M, db) for (dW, db), M in zip(grads, mask)]


def _flat_mask(net, params, mask):
    """The mask over the Jacobian's columns (W₀ row-major, b₀, W₁, …), biases 1."""
    xp = namespace(params[0][0])
    parts = []
    for (W, b), M in zip(params, mask):
        parts.append(xp.reshape(M, (-1,)))
        if b is not None:
            parts.append(xp.ones_like(b))
    return xp.concat(parts)


def masked_jacobian(net, params, mask, x):
    r"""J_M(x) = ∇_w f_{m⊙w}(x) = J(m⊙w; x) with pruned columns set to 0, shape (n, P) (P = 0 rows: (0, P))."""
    caller = "masked_jacobian"
    check_params(net, params, "params", caller)
    mask = check_mask(params, mask, caller)
    W0 = params[0][0]
    xp = namespace(W0, x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    flat = _flat_mask(net, params, mask)
    if x.shape[0] == 0:
        return xp.zeros((0, flat.shape[0]), dtype=W0.dtype, device=device_of(W0))
    J = net.jacobian(masked_params(params, mask), x)
    return J * flat[None, :]


def masked_empirical_ntk(net, params, mask, x1, x2=None, *, method="auto"):
    r"""Tangent kernel of the sparse net Θ^s(x, x′) = J_M(x) J_M(x′)ᵀ, shape (n1, n2).

    Computed layer by layer: with h_ℓ, δ_ℓ the activations and backprop signals of the masked net and
    c_ℓ = W_std,ℓ/√fan_in_ℓ (1 for :class:`LinearModel`),

    .. math::  Θ^s(x_a, x'_b) = \sum_ℓ c_ℓ^2 \sum_{ij} M_{ℓ,ij}\, h_{ℓ,i}(x_a) h_{ℓ,i}(x'_b)\,
               δ_{ℓ,j}(x_a) δ_{ℓ,j}(x'_b) \;+\; \sum_{ℓ:\,\text{bias}} b_{std,ℓ}^2 ⟨δ_ℓ(x_a), δ_ℓ(x'_b)⟩.

    ``method="factored"`` contracts j first (memory n1·fan_in·max(fan_out, n2), no Jacobian);
    ``"jacobian"`` forms the masked per-layer Jacobian blocks c_ℓ (h_ℓ ⊗ δ_ℓ) ⊙ M_ℓ (memory
    (n1 + n2)·fan_in·fan_out) and multiplies them; ``"auto"`` picks the smaller memory per layer.
    ``x2`` given: the mixed tangent kernel Θ^s(X, X̃) of (3.11)/(3.13) (not symmetric).  Exact up to
    rounding (tested against the explicit J_M J_Mᵀ of :func:`masked_jacobian` to 1e-12 relative).
    """
    caller = "masked_empirical_ntk"
    method = check_option(method, "method", ("auto", "factored", "jacobian"), caller=caller)
    check_params(net, params, "params", caller)
    mask = check_mask(params, mask, caller)
    W0 = params[0][0]
    xp = namespace(W0, x1, x2)
    x1 = check_array(x1, "x1", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    if x2 is not None:
        x2 = check_array(x2, "x2", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    out = masked_ntk(net, params, mask, x1, x2, method)
    return finite(out, caller, "the masked tangent kernel", ("x1", "x2", "params"))


def masked_ntk(net, params, mask, x1, x2=None, method="auto"):
    """masked_empirical_ntk without checks; also for a continuous mask m ∈ [0, 1] (Σ m_k J_k J'_k at m⊙w)."""
    p_eff = [(W * M, b) for (W, b), M in zip(params, mask)]
    h1, d1, xp = net.features(p_eff, x1, name="x1")
    if x2 is None:
        h2, d2 = h1, d1
    else:
        h2, d2, _ = net.features(p_eff, x2, name="x2")
    n1, n2 = h1[0].shape[0], h2[0].shape[0]
    # the factored route holds an (n1, fan_in, n2) array per layer, the Jacobian route (n, fan_in·fan_out) ones
    biggest = max(min(n1 * M.shape[0] * max(M.shape[1], n2), (n1 + n2) * M.shape[0] * M.shape[1]) for M in mask)
    check_memory(3 * n1 * n2 + 2 * biggest, f"The ({n1}, {n2}) masked empirical NTK of 'x1'/'x2'",
                 "masked_empirical_ntk", h1[0])
    out = None
    for ell, M in enumerate(mask):
        c2 = layer_scale(net, ell) ** 2
        fi, fo = M.shape
        how = method
        if how == "auto":
            how = "factored" if n1 * fi * max(fo, n2) <= (n1 + n2) * fi * fo else "jacobian"
        if how == "factored":
            # G[a, i, b] = Σ_j M_ij δ1[a, j] δ2[b, j]
            G = (d1[ell][:, None, :] * M[None, :, :]) @ xp.matrix_transpose(d2[ell])
            term = c2 * xp.sum(h1[ell][:, :, None] * G * xp.matrix_transpose(h2[ell])[None, :, :], axis=1)
        else:
            J1 = xp.reshape(h1[ell][:, :, None] * d1[ell][:, None, :] * M[None, :, :], (n1, fi * fo))
            J2 = xp.reshape(h2[ell][:, :, None] * d2[ell][:, None, :], (n2, fi * fo))
            term = c2 * (J1 @ xp.matrix_transpose(J2))
        if params[ell][1] is not None:
            term = term + net.b_std[ell] ** 2 * (d1[ell] @ xp.matrix_transpose(d2[ell]))
        out = term if out is None else out + term
    if x2 is None:
        out = (out + xp.matrix_transpose(out)) / 2
    return out
