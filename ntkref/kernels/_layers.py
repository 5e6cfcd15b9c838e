r"""The FC recursion on blocks of pairs: the input geometry, one layer of each dual activation, and the
representable range.

Seed 004 eqs. (6)–(8) in neural-tangents' convention, as written in the module docstring of :mod:`._fc`
(its 'Dual activations' and 'Numerics' sections are the specification of this module):

- the pair state ``_Pair``: ρ = cos θ with 1 − ρ and 1 + ρ carried separately; :func:`input_angles` gets it
  from the normalised rows (|cos| > ``_PARALLEL_THRESHOLD``: θ = 2·atan2(‖x̂ − x̂'‖, ‖x̂ + x̂'‖));
  :func:`_dense_pair` carries it through Σ' = W²Σ + b² without cancellation;
- one hidden layer: :func:`relu_layer` (arc-cosine kernel), :func:`_erf_layer` (arcsin form),
  :func:`_quadrature_layer` (Gauss–Hermite in polar form, any σ with σ′);
- a block of the Gram: :func:`relu_unbiased_block` (ReLU without biases, on the angle alone by positive
  homogeneity, updates in place) and :func:`fc_block` (everything else); the exact diagonal
  :func:`diag_recursion` (θ = 0) and the quadrature's resolution check built on it;
- the representable range: :func:`scale_limit`, :func:`check_input_scale`, :func:`check_finite_kernel`,
  and :func:`row_norms` (norms without overflow or underflow).

Also used by: :mod:`._two_layer` (``row_norms``, ``input_angles``, ``relu_layer``, ``check_input_scale``,
``check_finite_kernel``), :mod:`._cntk` (``check_finite_kernel``), :mod:`ntkref.distributions` (``row_norms``,
``check_input_scale``), and the CUDA engine :mod:`ntkref._engines.cuda` (``check_finite_kernel``; its fused
kernel mirrors :func:`relu_unbiased_block` operation by operation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import array_api_compat

from .._lib.backend import device_of
from .._lib.compat import gauss_hermite, scatter_flat
from .._lib.validation import InvalidParameterError
from ._activations import PI

_PARALLEL_THRESHOLD = 0.95  # |cos| above this: angle from difference/sum of the rows


# ------------------------------------------------------------- representable range


def scale_limit(dtype, xp):
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
    limit = scale_limit(norms.dtype, xp)
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


#: rows of subnormal norm are lifted by this exact power of two (:func:`row_norms` with ``lift=True``): a norm
#: ≥ 2^-1074 (2^-149 in float32) times 2^64 is a normal float, and 2^-64 is a normal float in both dtypes
LIFT_EXPONENT = 64


def row_norms(x, xp, lift=False):
    """Euclidean norms of rows without overflow/underflow, and the normalised rows (0 for zero rows).

    A row whose norm is subnormal (below the smallest normal number: 2.2e-308 float64, 1.2e-38 float32) has
    a norm with fewer significant bits; its unit row is formed from the scaled row's own norm √Σ(x/max|x|)²
    (exact to a few ulps), not from the subnormal norm.  ``lift=True`` returns ``(norm, unit, factor)``: such
    rows' norms multiplied by 2^64 (computed as (max|x|·2^64)·√Σ(x/max|x|)², the exact power of two applied
    before the rounding: full precision), ``factor`` = 2^-64 for them and 1 elsewhere (``None`` when no row
    was lifted), so that ‖x‖ = norm·factor exactly in real arithmetic up to the one rounding of a normal row.
    Functions positively homogeneous in each row (the bias-free ReLU kernels) are evaluated on the lifted
    norms and multiplied by factor_i·factor_j (exact, a power of two) afterwards.
    """
    scale = xp.max(xp.abs(x), axis=1, keepdims=True)
    safe = xp.where(scale > 0, scale, xp.ones_like(scale))
    y = x / safe
    root = xp.sqrt(xp.sum(y * y, axis=1))
    norm = scale[:, 0] * root
    tiny = xp.finfo(x.dtype).smallest_normal
    # a normal norm: the unit row as before (norm/max|x|); a subnormal or zero one: the scaled row's own root
    unit = y / xp.where(norm >= tiny, norm / safe[:, 0], xp.where(root > 0, root, xp.ones_like(root)))[:, None]
    if not lift:
        return norm, unit
    low = (norm < tiny) & (scale[:, 0] > 0)
    if not bool(xp.any(low)):
        return norm, unit, None
    up = float(2.0 ** LIFT_EXPONENT)
    lifted = xp.where(low, (scale[:, 0] * up) * root, norm)
    factor = xp.where(low, xp.full_like(norm, 1 / up), xp.ones_like(norm))
    return lifted, unit, factor


# ----------------------------------------------------------------- pair geometry


@dataclass
class _Pair:
    """Per-pair state: ρ = cos θ with 1 − ρ and 1 + ρ carried separately."""

    rho: object
    omr: object  # 1 − ρ
    opr: object  # 1 + ρ


def input_angles(u1, u2, xp):
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


def relu_layer(pair, s1, s2, xp, need_pair=True):
    """ReLU: returns (E[σσ], E[σ'σ'], pair after σ, row scales after σ).

    With ``need_pair=False`` (the last hidden layer) the angle state after σ is
    not needed and not computed (returned as ``None``).
    """
    theta, sin_t = _half_angle(pair, xp)
    pi_minus = PI - theta
    J = pi_minus * pair.rho
    J += sin_t  # sin θ + (π − θ) cos θ  ∈ [0, π]
    nngp = s1 * s2
    nngp *= J
    nngp *= 1 / (2 * PI)
    dot = pi_minus
    dot *= 1 / (2 * PI)
    c = 1 / math.sqrt(2.0)
    if not need_pair:
        return nngp, dot, None, (s1 * c, s2 * c)
    # 1 − J/π = (1 − ρ) − (sin θ − θ cos θ)/π: both terms ≥ 0, the second at most half the first,
    # so no cancellation; the floor at 0 only removes rounding below zero.
    corr = theta * pair.rho
    corr -= sin_t
    corr *= 1 / PI
    omr = corr
    omr += pair.omr
    omr = xp.clip(omr, 0.0, None)
    rho = J
    rho *= 1 / PI
    opr = rho + 1
    return nngp, dot, _Pair(rho, omr, opr), (s1 * c, s2 * c)


def _erf_variance(s, xp):
    """E[erf(u)²] for u ~ N(0, s²): (2/π) arcsin(2s²/(1 + 2s²)) = (2/π) atan2(2s², √(1 + 4s²)).

    The atan2 form has no 1 − 1/(1 + 2s²) cancellation (tiny s) and no overflow for s ≤ 1e154.
    """
    one = xp.asarray(1.0, dtype=s.dtype, device=device_of(s))
    return (2 / PI) * xp.atan2(2 * s * s, xp.hypot(one, 2 * s))


def _erf_root(s, xp):
    """√E[erf(u)²] for u ~ N(0, s²), without the underflow of s² for tiny s.

    Below s = 1e-6, atan2(2s², h) = (2s²/h)(1 − O(s⁴)), so the root is s·√((4/π)/h) to full precision
    (a row of norm 1e-300 keeps its scale instead of becoming 0).
    """
    one = xp.asarray(1.0, dtype=s.dtype, device=device_of(s))
    h = xp.hypot(one, 2 * s)
    return xp.where(s < 1e-6, s * xp.sqrt((4 / PI) / h), xp.sqrt(_erf_variance(s, xp)))


def _erf_layer(pair, s1, s2, xp, parts=None):
    """erf (NT's Erf(a=1, b=1, c=0)) in closed form, with 1 ∓ r computed without cancellation.

    With p = √(1 + 2q), t = √q/p and u = 1/p (all ≤ 1):
    r = 2t₁t₂ρ, 1 − 2t₁t₂ = (u₁²u₂² + 2t₁²u₂² + 2t₂²u₁²)/(1 + 2t₁t₂) ≥ 0, so
    1 ∓ r = (1 − 2t₁t₂) + 2t₁t₂(1 ∓ ρ) are sums of non-negative terms at every scale.
    ``parts``: a dict that receives the intermediate arrays (the proven bound of :mod:`._rounding_erf` is
    stated in them; the values are unchanged).
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
    nngp = (2 / PI) * xp.atan2(r, root)
    dot = (4 / PI) * (u1 * u2) / xp.where(root > 0, root, xp.ones_like(root))
    s_new = (_erf_root(s1, xp), _erf_root(s2, xp))
    new_pair = _pair_from_kernel(nngp, s_new[0], s_new[1], xp)
    if parts is not None:
        parts.update(u1=u1, u2=u2, tt=tt, gap=gap, r=r, a=omr_r, b=opr_r, root=root)
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


def relu_unbiased_block(x1n, x1u, x2n, x2u, d, Ws, want_nngp, want_ntk, xp, with_scales=False):
    """ReLU without biases, using positive homogeneity: Θ(x, x') = ‖x‖‖x'‖·Θ(x̂, x̂').

    For unit inputs q₀ = W₀²/d and q_h = W_h² q_{h−1}/2 (the diagonal), Σ^{(h)} = q_h ρ_h with
    ρ_h = J(θ_{h−1})/π, and the recursion reduces to the angle alone:
    Θ^{(h)}/q_h = ρ_h + (1 − θ_{h−1}/π)·Θ^{(h−1)}/q_{h−1}.  One outer product of the norms scales
    the result at the end, so no per-layer scale arrays are needed.  Every update is in place on
    arrays owned here (the elementwise passes, not the matmul, dominate the cost).

    ``with_scales=True`` also returns (S, a1, a2): the computed row scales a = ‖x‖·√q and their outer product
    S (the quantities the proven bound of :mod:`._rounding` is stated in).
    """
    pair = input_angles(x1u, x2u, xp)
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
        phi *= 2 / PI  # θ/π
        omp = 1 - phi  # (π − θ)/π
        if want_ntk:
            if ntk is None:
                ntk = omp * rho
            else:
                ntk *= omp
        omp *= rho
        sin_t *= 1 / PI
        omp += sin_t  # ρ' = J(θ)/π = ((π − θ)cos θ + sin θ)/π
        if not last:
            # 1 − ρ' = (1 − ρ) + (θ/π)ρ − sin θ/π without cancellation (see relu_layer)
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
    a1, a2 = x1n * math.sqrt(q), x2n * math.sqrt(q)
    scale = a1[:, None] * a2[None, :]
    nngp = None
    if want_nngp:
        nngp = rho
        nngp *= scale
    if want_ntk:
        ntk *= scale
    if with_scales:
        return nngp, ntk, (scale, a1, a2)
    return nngp, ntk


def fc_block(x1n, x1u, x2n, x2u, d, Ws, bs, act, closed, n_points, want_ntk, xp):
    s1 = x1n[:, None] / math.sqrt(d)
    s2 = x2n[None, :] / math.sqrt(d)
    pair = input_angles(x1u, x2u, xp)
    W, b = Ws[0], bs[0]
    nngp = (W * W) * (s1 * s2) * pair.rho + b * b
    pair = _dense_pair(pair, s1, s2, W, b, xp)
    s1, s2 = _dense_scale(s1, W, b, xp), _dense_scale(s2, W, b, xp)
    ntk = nngp if want_ntk else None
    n_layers = len(Ws) - 1
    for h, (W, b) in enumerate(zip(Ws[1:], bs[1:]), start=1):
        last = h == n_layers
        if closed == "relu":
            e_ff, e_dd, pair_a, (a1, a2) = relu_layer(pair, s1, s2, xp, need_pair=not last)
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


def diag_recursion(xn, d, Ws, bs, act, closed, n_points, xp):
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
            dot = (4 / PI) / xp.hypot(one, 2 * s)
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


def check_quadrature_resolution(xn, name, d, Ws, bs, act, n_points, xp):
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
        a, b = diag_recursion(xn, d, Ws, bs, act, None, m1, xp), diag_recursion(xn, d, Ws, bs, act, None, m2, xp)
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
