r"""NNGP and NTK of fully connected networks of any depth (infinite width).

Conventions (neural-tangents' NTK parameterisation, docs/conventions.md, 'FC kernels').  With
``depth`` = L hidden layers and per-layer ``W_std`` = (W₀, …, W_L) and
``b_std`` = (b₀, …, b_L) (the last entry is the readout):

.. math::

    Σ^{(0)}(x, x') = W_0^2\,x·x'/d + b_0^2,\qquad Θ^{(0)} = Σ^{(0)},

    Σ^{(h)} = W_h^2\,E[σ(u)σ(v)] + b_h^2,\qquad
    Θ^{(h)} = Σ^{(h)} + W_h^2\,E[σ'(u)σ'(v)]\,Θ^{(h-1)},

with (u, v) ~ N(0, [[Σ^{(h−1)}(x,x), Σ^{(h−1)}(x,x')], [·, Σ^{(h−1)}(x',x')]]);
``.nngp`` = Σ^{(L)} and ``.ntk`` = Θ^{(L)}.  This is the recursion of seed 004
eqs. (6)–(8) with c_σ moved into the next layer's W² and the input divided by
d; seed 000 eq. (63) is the case L = 1, W = 1 (see :mod:`._two_layer`).

Dual activations (σ, closed forms; θ the angle of (u, v), q = E[u²]):

- ReLU (arc-cosine kernel of degree 1, Cho & Saul):
  E[σσ] = √(q₁q₂)·(sin θ + (π − θ) cos θ)/(2π), E[σ'σ'] = (π − θ)/(2π).
- erf: E[σσ] = (2/π) arcsin(2Σ₁₂/√((1+2q₁)(1+2q₂))),
  E[σ'σ'] = (4/π)/√((1+2q₁)(1+2q₂) − 4Σ₁₂²).
- any other elementwise σ (with σ'): Gauss–Hermite quadrature over the 2×2
  Gaussian, written in polar form u = √q₁ z₁, v = √q₂ (cos θ z₁ + sin θ z₂).

Numerics.  The recursion carries, per pair, the correlation ρ = cos θ *and*
the two quantities 1 − ρ and 1 + ρ, each computed without cancellation
(bias terms enter through identities such as
√((aq₁+b²)(aq₂+b²)) − a√(q₁q₂) − b² = ab²(√q₁−√q₂)²/(…) ≥ 0), and
θ = atan2(√((1−ρ)(1+ρ)), ρ).  At the input, pairs with |cos| > 0.95 get their
angle from the difference and the sum of the normalised rows,
θ = 2·atan2(‖x̂ − x̂'‖, ‖x̂ + x̂'‖), so the angle is accurate to a few ulps in
absolute terms for near-parallel and antiparallel rows alike (the arccos or
neural-tangents' atan2(√(q₁q₂ − k²), k) lose half the digits there).  Scales
are carried as √q (norms), so inputs from 1e-150 to 1e150 neither overflow
nor underflow (for erf and quadrature the post-activation scale of a tiny row
is computed without squaring it, so rows down to 1e-300 keep their scale).

Representable range (finite or an error).  Rows whose first-layer scale
W_std[0]·‖x‖/√d exceeds √(largest float)/4 (3.4e153 in float64, 4.6e18 in
float32), and W_std or b_std above that bound, are refused with an
InvalidParameterError naming the parameter and the bound; an output that still
overflows (e.g. W_std = 1e100 over several layers) raises InvalidParameterError
instead of returning inf or NaN.  A zero row has Σ(x, ·) = b² terms only and Θ(x, 0) = 0
without biases.  ReLU without biases (the common case) runs on the angle
alone — Θ(x, x') = ‖x‖‖x'‖·Θ(x̂, x̂') by positive homogeneity — with in-place
updates, so a layer costs one arctan, one square root and ~15 cheap passes
per entry (the arctan, not the matmul, is the largest single cost).

Accuracy (ReLU, measured against mpmath at 50 digits in the tests): every
entry within 1e-13·√(K(x,x)K(x',x')) in float64 (about 1e-5 in float32), the
diagonal to 1e-14 relative.  erf: the same bound, checked at row norms from
1e-300 to 3e153 (tests/test_kernels.py).  Quadrature: the rule's error, which for smooth σ falls geometrically
with the number of points (default 128 per dimension; the tests measure the convergence).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import array_api_compat

from .._lib import dispatch
from .._lib.backend import device_of, is_array, namespace
from .._lib.compat import erf as _erf
from .._lib.compat import gauss_hermite, scatter_flat, single_threaded_blas
from .._lib.memory import check_bytes
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real

__all__ = ["Kernel", "Activation", "fc", "fc_diagonal", "ACTIVATIONS"]

_PI = math.pi
_PARALLEL_THRESHOLD = 0.95  # |cos| above this: angle from difference/sum of the rows


@dataclass(frozen=True)
class Kernel:
    """NNGP and NTK Gram matrices (either may be ``None`` if not requested)."""

    nngp: object
    ntk: object


@dataclass(frozen=True)
class Activation:
    """An elementwise activation σ with its derivative σ', for quadrature.

    Both callables take and return arrays of the namespace in use.
    """

    fn: object
    derivative: object
    name: str = "custom"

    def __post_init__(self):
        for field_name in ("fn", "derivative"):
            value = getattr(self, field_name)
            if not callable(value):
                raise InvalidParameterError(
                    f"The {field_name!r} parameter of Activation must be a callable taking and returning arrays. "
                    f"Got {value!r} instead."
                )
        if not isinstance(self.name, str):
            raise InvalidParameterError(f"The 'name' parameter of Activation must be a str. Got {self.name!r} instead.")


def _tanh(x):
    return namespace(x).tanh(x)


def _dtanh(x):
    xp = namespace(x)
    return 1 - xp.tanh(x) ** 2


def _relu(x):
    xp = namespace(x)
    return xp.maximum(x, xp.zeros_like(x))


def _drelu(x):
    xp = namespace(x)
    return xp.astype(x > 0, x.dtype)


def _erf_fn(x):
    return _erf(x, namespace(x))


def _derf(x):
    xp = namespace(x)
    return (2 / math.sqrt(_PI)) * xp.exp(-(x * x))


ACTIVATIONS = {
    "relu": Activation(_relu, _drelu, "relu"),
    "erf": Activation(_erf_fn, _derf, "erf"),
    "tanh": Activation(_tanh, _dtanh, "tanh"),
}
_CLOSED_FORM = ("relu", "erf")


def _per_layer(value, name, n_layers, *, low, closed, high=None):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        values = [value] * n_layers
    else:
        try:
            values = list(value)
        except TypeError:
            raise InvalidParameterError(
                f"The {name!r} parameter of fc must be a real number or a sequence of {n_layers} "
                f"(one per layer including the readout). Got {value!r} instead."
            ) from None
        if len(values) != n_layers:
            raise InvalidParameterError(
                f"The {name!r} parameter of fc must have one value per layer including the readout "
                f"({n_layers} for this depth). Got {len(values)} values."
            )
    # ``high``: √(largest float)/4, so that W², b² and their products with a variance stay finite
    closed = "both" if high is not None and closed == "left" else closed
    return [check_real(v, name, caller="fc", low=low, high=high, closed=closed) for v in values]


def _resolve_activation(activation):
    if isinstance(activation, Activation):
        return activation, None
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise InvalidParameterError(
                f"The 'activation' parameter of fc must be one of {', '.join(map(repr, ACTIVATIONS))} "
                f"or an Activation(fn, derivative). Got {activation!r} instead."
            )
        return ACTIVATIONS[activation], activation if activation in _CLOSED_FORM else None
    raise InvalidParameterError(
        f"The 'activation' parameter of fc must be a name or an Activation(fn, derivative). Got {activation!r} instead."
    )


# ------------------------------------------------------------- representable range


def _scale_limit(dtype, xp):
    """The largest first-layer scale √q whose variance q (and a few products of it) stays finite."""
    return math.sqrt(float(xp.finfo(dtype).max)) / 4


def _dtype_name(dtype, xp):
    return "float32" if dtype == xp.float32 else "float64"


def check_input_scale(norms, name, caller, factor, xp, what="W_std[0]·‖x‖/√d"):
    """Refuse rows whose first-layer scale ``factor·‖x‖`` (√ of the first variance) is not representable.

    Raises InvalidParameterError naming ``name`` and the largest admissible row norm.
    """
    if norms.shape[0] == 0 or factor == 0.0:
        return
    largest = float(xp.max(norms))
    limit = _scale_limit(norms.dtype, xp)
    if not factor * largest <= limit:  # also catches an infinite norm
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} has a row of norm {largest:.3g}, outside the representable "
            f"range: the first-layer scale {what} = {factor * largest:.3g} must be at most {limit:.3g} in "
            f"{_dtype_name(norms.dtype, xp)} (its square, the first variance, would overflow), i.e. row norms "
            f"at most {limit / factor:.3g}. Rescale the inputs."
        )


def check_finite_kernel(value, caller, xp, params="'x1'/'x2', 'W_std' and 'b_std'"):
    """Refuse a kernel with a non-finite entry (an overflow): finite or an error, never NaN/inf."""
    if value is None or value.size == 0:
        return
    if not bool(xp.all(xp.isfinite(value))):
        raise InvalidParameterError(
            f"{caller}: the kernel for these {params} is outside the representable range of "
            f"{_dtype_name(value.dtype, xp)} (largest finite {float(xp.finfo(value.dtype).max):.3g}); "
            f"rescale the inputs or the standard deviations."
        )


# --------------------------------------------------------------------------- rows


def _row_norms(x, xp):
    """Euclidean norms of rows without overflow/underflow, and the normalised rows (0 for zero rows)."""
    scale = xp.max(xp.abs(x), axis=1, keepdims=True)
    safe = xp.where(scale > 0, scale, xp.ones_like(scale))
    y = x / safe
    norm = scale[:, 0] * xp.sqrt(xp.sum(y * y, axis=1))
    unit = y / xp.where(norm > 0, norm / safe[:, 0], xp.ones_like(norm))[:, None]
    return norm, unit


# ----------------------------------------------------------------- pair geometry


@dataclass
class _Pair:
    """Per-pair state: ρ = cos θ with 1 − ρ and 1 + ρ carried separately."""

    rho: object
    omr: object  # 1 − ρ
    opr: object  # 1 + ρ


def _input_angles(u1, u2, xp):
    """cos, 1 − cos, 1 + cos of the angle between rows of u1 and u2 (unit or zero rows)."""
    rho = u1 @ xp.matrix_transpose(u2)
    omr = 1 - rho
    opr = 1 + rho
    # Only |ρ| > 0.95 can round outside [−1, 1], and those entries are recomputed below, so no clip.
    # Two reductions decide whether any entry needs it before a mask is built.
    if rho.shape[0] * rho.shape[1] > 0 and (
        float(xp.max(rho)) > _PARALLEL_THRESHOLD or float(xp.min(rho)) < -_PARALLEL_THRESHOLD
    ):
        mask = xp.abs(rho) > _PARALLEL_THRESHOLD
        omr, opr, rho = _refine_near_parallel(u1, u2, mask, rho, omr, opr, xp)
    return _Pair(rho, omr, opr)


def _refine_near_parallel(u1, u2, mask, rho, omr, opr, xp):
    n1, n2 = rho.shape
    d = u1.shape[1]
    flat_mask = xp.reshape(mask, (-1,))
    idx = xp.nonzero(flat_mask)[0]
    k = idx.shape[0]
    chunk = max(1, (1 << 22) // max(d, 1))
    parts = []
    for start in range(0, k, chunk):
        sel = idx[start : min(start + chunk, k)]
        a = xp.take(u1, sel // n2, axis=0)
        b = xp.take(u2, sel % n2, axis=0)
        dm = xp.sqrt(xp.sum((a - b) ** 2, axis=1))
        dp = xp.sqrt(xp.sum((a + b) ** 2, axis=1))
        parts.append(2 * xp.atan2(dm, dp))
    theta = xp.concat(parts) if len(parts) > 1 else parts[0]
    half_s = xp.sin(theta / 2)
    half_c = xp.cos(theta / 2)
    values = (xp.cos(theta), 2 * half_s * half_s, 2 * half_c * half_c)
    rho_n, omr_n, opr_n = (scatter_flat(old, flat_mask, idx, v, xp) for v, old in zip(values, (rho, omr, opr)))
    return omr_n, opr_n, rho_n


def _dense_pair(pair, s1, s2, W, b, xp):
    """Angle state after an affine layer: Σ' = W²Σ + b² (s = √q per row, shapes (n1,1), (1,n2))."""
    if b == 0.0:
        return pair
    a1, a2 = W * s1, W * s2
    bb = xp.asarray(b, dtype=s1.dtype, device=device_of(s1))
    t1, t2 = xp.hypot(a1, bb), xp.hypot(a2, bb)
    S = t1 * t2
    P = a1 * a2
    b2 = b * b
    gap = W * (s1 - s2)
    excess = (gap * gap) / (S + P + b2) * b2  # = S − P − b² ≥ 0, without cancellation (nor overflow)
    safe = S > 0
    Sd = xp.where(safe, S, xp.ones_like(S))
    omr = xp.where(safe, (excess + P * pair.omr) / Sd, xp.ones_like(S))
    opr = xp.where(safe, (excess + 2 * b2 + P * pair.opr) / Sd, xp.ones_like(S))
    rho = xp.where(safe, (P * pair.rho + b2) / Sd, xp.zeros_like(S))
    return _Pair(xp.clip(rho, -1.0, 1.0), omr, opr)


def _dense_scale(s, W, b, xp):
    return xp.hypot(W * s, xp.asarray(b, dtype=s.dtype, device=device_of(s))) if b != 0.0 else W * s


# ----------------------------------------------------------- dual activations


def _half_angle(pair, xp):
    """θ = 2·arctan(√((1 − ρ)/(1 + ρ))) and sin θ = √((1 − ρ)(1 + ρ)).

    arctan of the half-angle tangent is well conditioned on all of [0, π]
    (absolute error a few ulps), and NumPy's arctan is about 4× faster than
    its arctan2.  1 + ρ is floored at the smallest normal number, so exactly
    antiparallel pairs give θ = π − O(1e-154) without a division by zero.
    """
    tiny = xp.finfo(pair.opr.dtype).smallest_normal
    sin_t = xp.sqrt(pair.omr * pair.opr)
    ratio = pair.omr / xp.maximum(pair.opr, tiny)
    theta = xp.atan(xp.sqrt(ratio))
    theta *= 2
    return theta, sin_t


def _relu_layer(pair, s1, s2, xp, need_pair=True):
    """ReLU: returns (E[σσ], E[σ'σ'], pair after σ, row scales after σ).

    With ``need_pair=False`` (the last hidden layer) the angle state after σ is
    not needed and not computed (returned as ``None``).
    """
    theta, sin_t = _half_angle(pair, xp)
    pi_minus = _PI - theta
    J = pi_minus * pair.rho
    J += sin_t  # sin θ + (π − θ) cos θ  ∈ [0, π]
    nngp = s1 * s2
    nngp *= J
    nngp *= 1 / (2 * _PI)
    dot = pi_minus
    dot *= 1 / (2 * _PI)
    c = 1 / math.sqrt(2.0)
    if not need_pair:
        return nngp, dot, None, (s1 * c, s2 * c)
    # 1 − J/π = (1 − ρ) − (sin θ − θ cos θ)/π: both terms ≥ 0, the second at most half the first,
    # so no cancellation; the floor at 0 only removes rounding below zero.
    corr = theta * pair.rho
    corr -= sin_t
    corr *= 1 / _PI
    omr = corr
    omr += pair.omr
    omr = xp.clip(omr, 0.0, None)
    rho = J
    rho *= 1 / _PI
    opr = rho + 1
    return nngp, dot, _Pair(rho, omr, opr), (s1 * c, s2 * c)


def _erf_variance(s, xp):
    """E[erf(u)²] for u ~ N(0, s²): (2/π) arcsin(2s²/(1 + 2s²)) = (2/π) atan2(2s², √(1 + 4s²)).

    The atan2 form has no 1 − 1/(1 + 2s²) cancellation (tiny s) and no overflow for s ≤ 1e154.
    """
    one = xp.asarray(1.0, dtype=s.dtype, device=device_of(s))
    return (2 / _PI) * xp.atan2(2 * s * s, xp.hypot(one, 2 * s))


def _erf_root(s, xp):
    """√E[erf(u)²] for u ~ N(0, s²), without the underflow of s² for tiny s.

    Below s = 1e-6, atan2(2s², h) = (2s²/h)(1 − O(s⁴)), so the root is s·√((4/π)/h) to full precision
    (a row of norm 1e-300 keeps its scale instead of becoming 0).
    """
    one = xp.asarray(1.0, dtype=s.dtype, device=device_of(s))
    h = xp.hypot(one, 2 * s)
    return xp.where(s < 1e-6, s * xp.sqrt((4 / _PI) / h), xp.sqrt(_erf_variance(s, xp)))


def _erf_layer(pair, s1, s2, xp):
    """erf (NT's Erf(a=1, b=1, c=0)) in closed form, with 1 ∓ r computed without cancellation.

    With p = √(1 + 2q), t = √q/p and u = 1/p (all ≤ 1):
    r = 2t₁t₂ρ, 1 − 2t₁t₂ = (u₁²u₂² + 2t₁²u₂² + 2t₂²u₁²)/(1 + 2t₁t₂) ≥ 0, so
    1 ∓ r = (1 − 2t₁t₂) + 2t₁t₂(1 ∓ ρ) are sums of non-negative terms at every scale.
    """
    one = xp.asarray(1.0, dtype=s1.dtype, device=device_of(s1))
    r2 = math.sqrt(2.0)
    p1, p2 = xp.hypot(one, r2 * s1), xp.hypot(one, r2 * s2)  # √(1 + 2q)
    t1, t2 = s1 / p1, s2 / p2
    u1, u2 = 1 / p1, 1 / p2
    tt = 2 * t1 * t2
    gap = ((u1 * u2) ** 2 + 2 * (t1 * u2) ** 2 + 2 * (t2 * u1) ** 2) / (1 + tt)  # 1 − 2 t₁ t₂
    r = tt * pair.rho
    omr_r = gap + tt * pair.omr  # 1 − r
    opr_r = gap + tt * pair.opr  # 1 + r
    root = xp.sqrt(omr_r * opr_r)
    nngp = (2 / _PI) * xp.atan2(r, root)
    dot = (4 / _PI) * (u1 * u2) / xp.where(root > 0, root, xp.ones_like(root))
    s_new = (_erf_root(s1, xp), _erf_root(s2, xp))
    new_pair = _pair_from_kernel(nngp, s_new[0], s_new[1], xp)
    return nngp, dot, new_pair, s_new


def _pair_from_kernel(k, s1, s2, xp):
    # k/s₁/s₂ rather than k/(s₁s₂): the product underflows for tiny rows (|k| ≤ s₁s₂, so no overflow)
    safe = (s1 > 0) & (s2 > 0)
    rho = xp.where(safe, (k / xp.where(s1 > 0, s1, xp.ones_like(s1))) / xp.where(s2 > 0, s2, xp.ones_like(s2)),
                   xp.zeros_like(k))
    rho = xp.clip(rho, -1.0, 1.0)
    return _Pair(rho, 1 - rho, 1 + rho)


def _quadrature_layer(pair, s1, s2, act, n_points, xp):
    """E[σσ], E[σ'σ'] by a tensor Gauss–Hermite rule in polar form."""
    z, w = gauss_hermite(n_points, xp, s1.dtype, device=array_api_compat.device(s1))
    sin_t = xp.sqrt(xp.clip(pair.omr * pair.opr, 0.0, None))
    e_ff = xp.zeros(pair.rho.shape, dtype=s1.dtype, device=device_of(s1))
    e_dd = xp.zeros(pair.rho.shape, dtype=s1.dtype, device=device_of(s1))
    zb = xp.reshape(z, (1, 1, -1))
    wb = xp.reshape(w, (1, 1, -1))
    for a in range(n_points):
        za = z[a]
        u = s1 * za
        fu, du = act.fn(u), act.derivative(u)
        v = s2[..., None] * (pair.rho[..., None] * za + sin_t[..., None] * zb)
        e_ff = e_ff + w[a] * fu * xp.sum(wb * act.fn(v), axis=-1)
        e_dd = e_dd + w[a] * du * xp.sum(wb * act.derivative(v), axis=-1)
    s_new = []
    for s in (s1, s2):
        vals = act.fn(s * xp.reshape(z, (1, -1)) if s.shape[0] != 1 else xp.reshape(z, (-1, 1)) * s)
        ax = 1 if s.shape[0] != 1 else 0
        wr = xp.reshape(w, (1, -1)) if ax == 1 else xp.reshape(w, (-1, 1))
        # √(Σ w σ²) scaled by max|σ|, so that σ² of a tiny row does not underflow to 0
        top = xp.max(xp.abs(vals), axis=ax, keepdims=True)
        top = xp.where(top > 0, top, xp.ones_like(top))
        vals = vals / top
        s_new.append(top * xp.sqrt(xp.sum(wr * vals * vals, axis=ax, keepdims=True)))
    return e_ff, e_dd, _pair_from_kernel(e_ff, s_new[0], s_new[1], xp), tuple(s_new)


# ------------------------------------------------------------------ the block


def _relu_unbiased_block(x1n, x1u, x2n, x2u, d, Ws, want_nngp, want_ntk, xp):
    """ReLU without biases, using positive homogeneity: Θ(x, x') = ‖x‖‖x'‖·Θ(x̂, x̂').

    For unit inputs q₀ = W₀²/d and q_h = W_h² q_{h−1}/2 (the diagonal), Σ^{(h)} = q_h ρ_h with
    ρ_h = J(θ_{h−1})/π, and the recursion reduces to the angle alone:
    Θ^{(h)}/q_h = ρ_h + (1 − θ_{h−1}/π)·Θ^{(h−1)}/q_{h−1}.  One outer product of the norms scales
    the result at the end, so no per-layer scale arrays are needed.  Every update is in place on
    arrays owned here (the elementwise passes, not the matmul, dominate the cost).
    """
    pair = _input_angles(x1u, x2u, xp)
    rho, omr, opr = pair.rho, pair.omr, pair.opr
    tiny = xp.finfo(rho.dtype).smallest_normal
    q = Ws[0] * Ws[0] / d
    ntk = None
    n_layers = len(Ws) - 1
    for h in range(1, n_layers + 1):
        q *= Ws[h] * Ws[h] / 2
        last = h == n_layers
        # θ/2 = arctan √((1 − ρ)/(1 + ρ)) = arctan(sin θ/(1 + ρ)); the floor on 1 + ρ (a no-op above
        # 1e-292) keeps antiparallel pairs at θ = π − O(1e-146) instead of 0/0.
        opr += tiny
        sin_t = xp.sqrt(omr * opr)
        phi = xp.atan(sin_t / opr)
        phi *= 2 / _PI  # θ/π
        omp = 1 - phi  # (π − θ)/π
        if want_ntk:
            if ntk is None:
                ntk = omp * rho
            else:
                ntk *= omp
        omp *= rho
        sin_t *= 1 / _PI
        omp += sin_t  # ρ' = J(θ)/π = ((π − θ)cos θ + sin θ)/π
        if not last:
            # 1 − ρ' = (1 − ρ) + (θ/π)ρ − sin θ/π without cancellation (see _relu_layer)
            phi *= rho
            omr += phi
            omr -= sin_t
            omr = xp.clip(omr, 0.0, None)
            opr = omp + 1
        rho = omp
        if want_ntk:
            ntk += rho
    if want_ntk and ntk is None:  # depth 0: Θ = Σ
        ntk = rho if not want_nngp else rho * 1
    scale = (x1n * math.sqrt(q))[:, None] * (x2n * math.sqrt(q))[None, :]
    nngp = None
    if want_nngp:
        nngp = rho
        nngp *= scale
    if want_ntk:
        ntk *= scale
    return nngp, ntk


def _fc_block(x1n, x1u, x2n, x2u, d, Ws, bs, act, closed, n_points, want_ntk, xp):
    s1 = x1n[:, None] / math.sqrt(d)
    s2 = x2n[None, :] / math.sqrt(d)
    pair = _input_angles(x1u, x2u, xp)
    W, b = Ws[0], bs[0]
    nngp = (W * W) * (s1 * s2) * pair.rho + b * b
    pair = _dense_pair(pair, s1, s2, W, b, xp)
    s1, s2 = _dense_scale(s1, W, b, xp), _dense_scale(s2, W, b, xp)
    ntk = nngp if want_ntk else None
    n_layers = len(Ws) - 1
    for h, (W, b) in enumerate(zip(Ws[1:], bs[1:]), start=1):
        last = h == n_layers
        if closed == "relu":
            e_ff, e_dd, pair_a, (a1, a2) = _relu_layer(pair, s1, s2, xp, need_pair=not last)
        elif closed == "erf":
            e_ff, e_dd, pair_a, (a1, a2) = _erf_layer(pair, s1, s2, xp)
        else:
            e_ff, e_dd, pair_a, (a1, a2) = _quadrature_layer(pair, s1, s2, act, n_points, xp)
        nngp = e_ff
        if W != 1.0:
            nngp *= W * W
        if b != 0.0:
            nngp += b * b
        if want_ntk:
            e_dd *= ntk  # e_dd is a fresh array owned here
            if W != 1.0:
                e_dd *= W * W
            e_dd += nngp
            ntk = e_dd
        if not last:
            pair = _dense_pair(pair_a, a1, a2, W, b, xp)
            s1, s2 = _dense_scale(a1, W, b, xp), _dense_scale(a2, W, b, xp)
    return nngp, ntk


def _diag_recursion(xn, d, Ws, bs, act, closed, n_points, xp):
    """Exact diagonal: Σ(x, x), Θ(x, x) (θ = 0 in every layer)."""
    q_s = xn / math.sqrt(d)  # √q
    W, b = Ws[0], bs[0]
    s = _dense_scale(q_s, W, b, xp)
    nngp = s * s
    ntk = nngp
    for W, b in zip(Ws[1:], bs[1:]):
        if closed == "relu":
            a = s / math.sqrt(2.0)
            dot = xp.full(s.shape, 0.5, dtype=s.dtype, device=device_of(s))
        elif closed == "erf":
            one = xp.asarray(1.0, dtype=s.dtype, device=device_of(s))
            a = _erf_root(s, xp)
            # (1 + 2q)² − 4q² = 1 + 4q → E[σ'²] = (4/π)/√(1 + 4q)
            dot = (4 / _PI) / xp.hypot(one, 2 * s)
        else:
            z, wq = gauss_hermite(n_points, xp, s.dtype, device=array_api_compat.device(s))
            u = s[:, None] * z[None, :]
            f = act.fn(u)
            top = xp.max(xp.abs(f), axis=1)  # scaled, so that σ² of a tiny row does not underflow
            top = xp.where(top > 0, top, xp.ones_like(top))
            f = f / top[:, None]
            a = top * xp.sqrt(xp.sum(wq * f * f, axis=1))
            dot = xp.sum(wq * act.derivative(u) ** 2, axis=1)
        nngp_new = (W * W) * a * a + b * b
        ntk = nngp_new + (W * W) * dot * ntk
        nngp = nngp_new
        s = _dense_scale(a, W, b, xp)
    return nngp, ntk


def _check_quadrature_resolution(xn, name, d, Ws, bs, act, n_points, xp):
    """Refuse inputs the Gauss–Hermite rule cannot resolve, rather than return a wrong kernel.

    The n-point rule integrates σ(√q·z) and σ′(√q·z) over z ~ N(0, 1); for a σ′ of width ~1 (tanh) the integrand's
    width is ~1/√q, and once it is below the spacing of the nodes (~π/√(2n) near 0) the rule misses its peak: at
    ‖x‖/√d ≈ 7 the tanh NTK came out 36 % low with 128 points.  The error of the n-point rule is estimated by the
    2n-point one (for n > 128: extrapolated from the n/2- and n/4-point rules) on the diagonal recursion (θ = 0, every row's own
    scale: where σ′(u)σ′(v) is narrowest); a relative difference above 1e-8 (float64; 1e-4 float32) in Σ(x, x)
    or Θ(x, x) is refused."""
    if xn.shape[0] == 0 or len(Ws) < 2:
        return
    tiny = float(xp.finfo(xn.dtype).smallest_normal)

    def rel_diff(m1, m2):
        a, b = _diag_recursion(xn, d, Ws, bs, act, None, m1, xp), _diag_recursion(xn, d, Ws, bs, act, None, m2, xp)
        return max(float(xp.max(xp.abs(u - v) / (xp.abs(v) + tiny))) for u, v in zip(a, b))

    if 2 * n_points <= 256:
        other, worst = 2 * n_points, rel_diff(n_points, 2 * n_points)
    else:  # past 256 points the nodes lose accuracy: e(n) ≈ e(n/2)·e(n/2)/e(n/4) (exact for algebraic
        # convergence, an overestimate for geometric), with e(m) ≈ |Q_m − Q_2m|
        other = n_points // 2
        e_half, e_quarter = rel_diff(other, n_points), rel_diff(n_points // 4, other)
        worst = e_half * min(1.0, e_half / e_quarter) if e_quarter > 0 else e_half
    tol = 1e-8 if xn.dtype == xp.float64 else 1e-4
    if not worst <= tol:
        top = float(xp.max(xn)) * Ws[0] / math.sqrt(d)
        raise InvalidParameterError(
            f"The 'quadrature_points' parameter of fc ({n_points}) does not resolve the activation at the scale of "
            f"the rows of {name!r} (largest first-layer scale W_std[0]·‖x‖/√d = {top:.3g}): its error, estimated "
            f"with the {other}-point rule, is {worst:.2g} relative on the diagonal (> {tol:g}). Increase "
            f"quadrature_points (at most 256), or rescale the inputs towards W_std·‖x‖/√d of order 1."
        )


# ------------------------------------------------------------------ public API


def _prepare(x1, x2, depth, activation, W_std, b_std, dtype, caller, x1_name="x1"):
    xp = namespace(x1, x2)
    x1 = check_array(x1, x1_name, caller=caller, ndim=2, xp=xp, dtype=dtype)
    if x2 is not None:
        # an array keeps its own floating dtype and the two are promoted (float32 with float64 is float64, in
        # either order); a list follows x1's dtype
        x2 = check_array(x2, "x2", caller=caller, ndim=2, xp=xp,
                         dtype=dtype if dtype is not None or is_array(x2) else x1.dtype)
        if x2.dtype != x1.dtype:
            wide = xp.result_type(x1.dtype, x2.dtype)
            x1, x2 = xp.astype(x1, wide), xp.astype(x2, wide)
        if x2.shape[1] != x1.shape[1]:
            raise InvalidParameterError(
                f"x1 and x2 of {caller} must have the same number of features; got {x1.shape[1]} and {x2.shape[1]}."
            )
    if x1.shape[1] == 0:
        raise InvalidParameterError(f"The {x1_name!r} parameter of {caller} must have at least one feature.")
    depth = check_int(depth, "depth", caller=caller, low=0)
    act, closed = _resolve_activation(activation)
    limit = _scale_limit(x1.dtype, xp)
    Ws = _per_layer(W_std, "W_std", depth + 1, low=0.0, closed="left", high=limit)
    bs = _per_layer(b_std, "b_std", depth + 1, low=0.0, closed="left", high=limit)
    return xp, x1, x2, depth, act, closed, Ws, bs


def fc(
    x1,
    x2=None,
    *,
    depth=1,
    activation="relu",
    W_std=1.0,
    b_std=0.0,
    get=("nngp", "ntk"),
    method="closed",
    quadrature_points=128,
    block_size=None,
    n_jobs=None,
    dtype=None,
    engine="auto",
):
    """NNGP and NTK of a fully connected network with ``depth`` hidden layers.

    Parameters
    ----------
    x1 : array, shape (n1, d)
        One sample a row.
    x2 : array, shape (n2, d), optional
        ``None`` means ``x1``; the result is then exactly symmetric and only
        blocks on and above the diagonal are computed.
    depth : int ≥ 0
        Number of hidden layers (0: a linear model, Θ = Σ = W₀²x·x'/d + b₀²).
    activation : {"relu", "erf", "tanh"} or Activation
        ReLU and erf have closed forms; anything else is integrated by
        Gauss–Hermite quadrature (``quadrature_points`` per dimension).
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats
        Per-layer weight and bias standard deviations, readout last.
    get : "nngp", "ntk" or a tuple of them
        What to compute (computing only the NTK still runs the NNGP recursion,
        but stores one output array).
    method : {"closed", "quadrature"}
        ``"quadrature"`` forces quadrature even for ReLU/erf (a test route, to measure the rule's convergence
        against the closed forms: its resolution is not checked there).  For activations without a closed form
        (tanh, an Activation) the n-point rule's error is estimated by the 2n-point rule on the diagonal and
        inputs it cannot resolve to 1e-8 (float64; 1e-4 float32) are refused, naming ``quadrature_points``:
        with the default 128 points that is W_std[0]·‖x‖/√d ≳ 2 for tanh or erf (measured against erf's
        closed form: 5.6e-12 at 1.5, 2.6e-7 at 2 — a 36 % error at 7 used to be returned silently).
    block_size : int, optional
        Rows per block; the working memory is about 12·block_size² floats per
        worker on top of the output.  Default: 768 (4096 on CuPy; smaller for
        quadrature).
    n_jobs : int, optional
        Blocks computed in parallel threads (NumPy namespace only; other
        namespaces use 1).  Default: the number of CPUs available.
    dtype : {"float64", "float32"}, optional
        Default: the inputs' floating dtype (float32 with float64 gives float64, in either order), float64 for
        integer input.
    engine : {"auto", "array_api"}
        ``"auto"`` runs ReLU without biases on CuPy arrays as one fused CUDA
        kernel over the Gram (:mod:`ntkref._engines.cuda`: the same operations per
        entry, one pass over memory instead of ~15 a layer; blocks as large
        as free device memory allows, ``block_size`` ignored) and everything
        else on the array-API path.  ``"array_api"`` forces the array-API
        path, the tested reference of the fused kernel.

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk`` arrays of shape (n1, n2) (``None`` if not in ``get``).

    Raises
    ------
    InvalidParameterError
        A row of ``x1``/``x2`` with W_std[0]·‖x‖/√d > √(largest float)/4, a
        ``W_std``/``b_std`` above that bound (the message names the parameter
        and the bound), or a kernel entry that overflows the dtype; or the
        outputs and the blocks' working memory would not fit in the memory
        available where the arrays live (host: /proc/meminfo; CuPy: the
        device's free memory), checked before anything is allocated: the
        message gives the size and the ways out (float32, fewer rows per call,
        smaller blocks).

    Notes
    -----
    Formula: see the module docstring (neural-tangents' convention; seed 004
    eqs. (6)–(8) up to the scalings tested in ``tests/test_kernels.py``).
    Cost: O(n1·n2·(d + depth)) time, O(n1·n2) output memory.
    """
    lazy = dispatch.fc.lookup(x1, x2)
    if lazy is not None:  # a Dask x1/x2: one task per block (ntkref/_engines/dask)
        return lazy(x1, x2, depth=depth, activation=activation, W_std=W_std, b_std=b_std, get=get, method=method,
                        quadrature_points=quadrature_points, block_size=block_size, n_jobs=n_jobs, dtype=dtype,
                        engine=engine)
    xp, x1, x2, depth, act, closed, Ws, bs = _prepare(x1, x2, depth, activation, W_std, b_std, dtype, "fc")
    if method not in ("closed", "quadrature"):
        raise InvalidParameterError(f"The 'method' parameter of fc must be 'closed' or 'quadrature'. Got {method!r} instead.")
    quadrature_only = closed is None  # no closed form: quadrature is the answer, and its resolution is checked
    if method == "quadrature":
        closed = None
    wanted = (get,) if isinstance(get, str) else tuple(get)
    if not wanted or any(g not in ("nngp", "ntk") for g in wanted):
        raise InvalidParameterError(f"The 'get' parameter of fc must be 'nngp', 'ntk' or both. Got {get!r} instead.")
    n_points = check_int(quadrature_points, "quadrature_points", caller="fc", low=2, high=256)
    if block_size is None:
        # CPU: blocks that stay in cache; GPU: blocks large enough to fill the device
        block_size = (4096 if array_api_compat.is_cupy_namespace(xp) else 768) if closed is not None \
            else max(16, 4096 // n_points * 8)
    block_size = check_int(block_size, "block_size", caller="fc", low=1)

    engine = check_option(engine, "engine", ("auto", "array_api"), caller="fc")
    if n_jobs is not None:
        check_int(n_jobs, "n_jobs", caller="fc", low=1)
    symmetric = x2 is None
    d = x1.shape[1]
    n1_norm, u1 = _row_norms(x1, xp)
    if symmetric:
        x2, n2_norm, u2 = x1, n1_norm, u1
    else:
        n2_norm, u2 = _row_norms(x2, xp)
    n1, n2 = x1.shape[0], x2.shape[0]
    first = Ws[0] / math.sqrt(d)
    check_input_scale(n1_norm, "x1", "fc", first, xp)
    if not symmetric:
        check_input_scale(n2_norm, "x2", "fc", first, xp)
    if quadrature_only:
        _check_quadrature_resolution(n1_norm, "x1", d, Ws, bs, act, n_points, xp)
        if not symmetric:
            _check_quadrature_resolution(n2_norm, "x2", d, Ws, bs, act, n_points, xp)
    want_ntk = "ntk" in wanted
    unbiased_relu = closed == "relu" and all(b == 0.0 for b in bs)
    # a CuPy x1: the bias-free ReLU Gram as one fused CUDA kernel (ntkref/_engines/cuda.py), same arithmetic
    fused = dispatch.fc_relu_fused.lookup(x1) if unbiased_relu and engine == "auto" else None
    _check_fc_memory(n1, n2, d, len(wanted), x1, block_size, n_points, closed, symmetric, n_jobs,
                     fused is not None, xp)
    if fused is not None and n1 * n2 > 0:
        nngp, ntk = fused(n1_norm, u1, n2_norm, u2, d, Ws, "nngp" in wanted, want_ntk, symmetric, xp)
        return Kernel(nngp, ntk)
    if array_api_compat.is_jax_namespace(xp):
        # JAX arrays are immutable: blocks are assembled by concatenation (about twice the output in memory)
        return _fc_assembled(n1_norm, u1, n2_norm, u2, d, Ws, bs, act, closed, n_points, wanted, symmetric,
                             unbiased_relu, block_size, xp)
    outs = {g: xp.zeros((n1, n2), dtype=x1.dtype, device=array_api_compat.device(x1)) for g in wanted}
    tasks = []
    for i0 in range(0, n1, block_size):
        i1 = min(i0 + block_size, n1)
        for j0 in range(i0 if symmetric else 0, n2, block_size):
            j1 = min(j0 + block_size, n2)
            if symmetric and i0 == j0 and i1 - i0 >= 64:
                # a diagonal block is computed as two half-size diagonal blocks and the block between
                # them: a quarter of its entries (below the diagonal) is then never computed
                m = (i0 + i1) // 2
                tasks += [(i0, m, i0, m), (i0, m, m, i1), (m, i1, m, i1)]
            else:
                tasks.append((i0, i1, j0, j1))

    def compute(task):
        i0, i1, j0, j1 = task
        block = _block_values(n1_norm, u1, n2_norm, u2, i0, i1, j0, j1, d, Ws, bs, act, closed, n_points, wanted,
                              unbiased_relu, xp)
        for g in wanted:
            val = block[g]
            check_finite_kernel(val, "fc", xp)
            if symmetric and i0 == j0:
                # exact symmetry: mirror the upper triangle
                val = xp.triu(val) + xp.matrix_transpose(xp.triu(val, k=1))
            outs[g][i0:i1, j0:j1] = val
            if symmetric and i0 != j0:
                outs[g][j0:j1, i0:i1] = xp.matrix_transpose(val)

    workers = _n_workers(n_jobs, xp, len(tasks))
    if workers == 1:
        for task in tasks:
            compute(task)
    else:
        # NumPy's elementwise loops release the GIL on large arrays: blocks run in parallel threads,
        # each writing a disjoint region of the output.
        from concurrent.futures import ThreadPoolExecutor

        with single_threaded_blas(xp), ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(compute, tasks):
                pass
    return Kernel(outs.get("nngp"), outs.get("ntk"))


def _check_fc_memory(n1, n2, d, n_out, x, block_size, n_points, closed, symmetric, n_jobs, fused, xp):
    """The memory guard of :func:`fc`: the outputs (twice for JAX, which concatenates) plus the blocks'
    working memory (about 12·block² floats per worker, ×(1 + n_points/3) for quadrature; none counted for
    the fused CUDA kernel, which sizes its blocks to the free memory) against :func:`ntkref._lib.memory.available_memory`."""
    itemsize = 4 if x.dtype == xp.float32 else 8
    out_bytes = n_out * n1 * n2 * itemsize * (2 if array_api_compat.is_jax_namespace(xp) else 1)
    work = 0
    if not fused and n1 * n2 > 0:
        b1, b2 = min(block_size, n1), min(block_size, n2)
        per_block = 12 * b1 * b2 * itemsize * (1 if closed is not None else 1 + n_points // 3)
        per_block += (b1 + b2) * d * itemsize
        n_tasks = -(-n1 // block_size) * -(-n2 // block_size)
        work = per_block * _n_workers(n_jobs, xp, n_tasks)
    dtype = "float32" if x.dtype == xp.float32 else "float64"
    check_bytes(
        out_bytes + work,
        f"The 'x1'/'x2' parameters ({n1} × {n2} rows, {n_out} output(s) in {dtype})",
        "fc",
        xp,
        x,
        "ways out: dtype='float32' (half the memory), get='ntk' only, a smaller block_size or n_jobs, or "
        "smaller inputs: compute the Gram in row blocks fc(x1[i:j], x2) and write each block out "
        "(e.g. with the CLI's --out)",
    )


def _block_values(n1_norm, u1, n2_norm, u2, i0, i1, j0, j1, d, Ws, bs, act, closed, n_points, wanted,
                  unbiased_relu, xp):
    want_ntk = "ntk" in wanted
    if unbiased_relu:
        nngp, ntk = _relu_unbiased_block(
            n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d, Ws, "nngp" in wanted, want_ntk, xp
        )
    else:
        nngp, ntk = _fc_block(
            n1_norm[i0:i1], u1[i0:i1, :], n2_norm[j0:j1], u2[j0:j1, :], d, Ws, bs, act, closed, n_points,
            want_ntk, xp,
        )
    return {"nngp": nngp, "ntk": ntk}


def _fc_assembled(n1_norm, u1, n2_norm, u2, d, Ws, bs, act, closed, n_points, wanted, symmetric, unbiased_relu,
                  block_size, xp):
    """:func:`fc` for namespaces without item assignment (JAX): the same blocks, joined by concatenation."""
    n1, n2 = u1.shape[0], u2.shape[0]
    starts1 = list(range(0, n1, block_size))
    starts2 = list(range(0, n2, block_size))
    blocks = {}
    for i0 in starts1:
        for j0 in starts2:
            if symmetric and j0 < i0:
                continue
            vals = _block_values(n1_norm, u1, n2_norm, u2, i0, min(i0 + block_size, n1), j0,
                                 min(j0 + block_size, n2), d, Ws, bs, act, closed, n_points, wanted,
                                 unbiased_relu, xp)
            for v in vals.values():
                check_finite_kernel(v, "fc", xp)
            if symmetric and i0 == j0:  # exact symmetry: mirror the upper triangle
                vals = {g: (None if v is None else xp.triu(v) + xp.matrix_transpose(xp.triu(v, k=1)))
                        for g, v in vals.items()}
            blocks[i0, j0] = vals
    outs = {}
    for g in wanted:
        if not starts1 or not starts2:  # an empty Gram
            outs[g] = xp.zeros((n1, n2), dtype=u1.dtype, device=array_api_compat.device(u1))
            continue
        rows = []
        for i0 in starts1:
            row = [blocks[i0, j0][g] if (i0, j0) in blocks else xp.matrix_transpose(blocks[j0, i0][g])
                   for j0 in starts2]
            rows.append(xp.concat(row, axis=1) if len(row) > 1 else row[0])
        outs[g] = xp.concat(rows, axis=0) if len(rows) > 1 else rows[0]
    return Kernel(outs.get("nngp"), outs.get("ntk"))


def _n_workers(n_jobs, xp, n_tasks, caller="fc"):
    """Worker threads for ``n_tasks`` blocks: ``n_jobs`` (default: the CPUs this process may use), 1 off NumPy."""
    if n_jobs is not None:
        n_jobs = check_int(n_jobs, "n_jobs", caller=caller, low=1)
    if not array_api_compat.is_numpy_namespace(xp) or n_tasks < 2:
        return 1
    if n_jobs is None:
        import os

        try:
            n_jobs = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            n_jobs = os.cpu_count() or 1
    return max(1, min(n_jobs, n_tasks))


def fc_diagonal(x, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, quadrature_points=128, dtype=None):
    """Diagonal Σ(x, x) and Θ(x, x) of :func:`fc` in O(n·(d + depth)).

    The angle is exactly 0 in every layer, so for ReLU the closed form is
    Σ⁽ʰ⁾ = W_h²Σ⁽ʰ⁻¹⁾/2 + b_h², Θ⁽ʰ⁾ = Σ⁽ʰ⁾ + W_h²Θ⁽ʰ⁻¹⁾/2.

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk`` of shape (n,).
    """
    xp, x, _, depth, act, closed, Ws, bs = _prepare(x, None, depth, activation, W_std, b_std, dtype, "fc_diagonal",
                                                    x1_name="x")
    n_points = check_int(quadrature_points, "quadrature_points", caller="fc_diagonal", low=2, high=256)
    xn, _ = _row_norms(x, xp)
    check_input_scale(xn, "x", "fc_diagonal", Ws[0] / math.sqrt(x.shape[1]), xp)
    if closed is None:
        _check_quadrature_resolution(xn, "x", x.shape[1], Ws, bs, act, n_points, xp)
    nngp, ntk = _diag_recursion(xn, x.shape[1], Ws, bs, act, closed, n_points, xp)
    check_finite_kernel(nngp, "fc_diagonal", xp, "'x', 'W_std' and 'b_std'")
    check_finite_kernel(ntk, "fc_diagonal", xp, "'x', 'W_std' and 'b_std'")
    return Kernel(nngp, ntk)
