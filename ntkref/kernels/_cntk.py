"""Convolutional neural tangent kernel (CNTK) of seed 004 (Arora et al.).

Implements, for images of shape ``(N, C, H, W)``, the NNGP and NTK of the
infinitely wide CNN

    conv(q×q, SAME zero padding, stride 1) → ReLU   (``depth`` times)
    → readout: global average pooling + dense ("gap")  or  flatten + dense ("flatten")

in the NTK parameterization, with the neural-tangents conventions that
:func:`ntkref.kernels.fc` follows (SPEC §2).  Seed 004 equations implemented:

- eq. (6): the covariance recursion Σ⁽ʰ⁾ = c_σ E[σ(u)σ(v)], (u, v) ~ N(0, Λ⁽ʰ⁾),
  here per pixel pair and with c_σ carried by the next layer's ``W_std²``;
- eq. (7): the derivative covariance Σ̇⁽ʰ⁾ = c_σ E[σ′(u)σ′(v)];
- eq. (8): Θ = Σ_h Σ⁽ʰ⁻¹⁾ Π_{h′≥h} Σ̇⁽ʰ′⁾, written as the layer recursion
  Θ ← Σ_new + W²·conv(Θ ⊙ Σ̇) and applied per pixel pair;
- the CNTK of the paper's Section 4 (the "dynamic programming" over pixel
  pairs; CNTK-V = vanilla/flatten readout, CNTK-GAP = global average pooling),
  including the variant with "first and last layer fixed".

Recursion (pixel pairs p = (i, j), p′ = (i′, j′); K and Θ are (H, W, H, W)
tensors for one image pair (x, x′); 𝒜 is the q×q patch *average* along the
spatial diagonals, with zero padding:
𝒜(K)[i, j, i′, j′] = (1/q²) Σ_{a,b=-r..r} K[i+a, j+b, i′+a, j′+b], r = (q−1)/2,
entries outside the image being 0):

    K₀[p, p′]  = (1/C) Σ_c x[c, p] x′[c, p′]          (neural-tangents: mean over channels)
    layer ℓ = 1..L:
        Σ_ℓ  = W_ℓ² 𝒜(K_{ℓ−1}) + b_ℓ²                   (conv; K_{ℓ−1} post-ReLU, K₀ the input)
        Θ_ℓ  = Σ_ℓ + W_ℓ² 𝒜(Θ̇_{ℓ−1})                   (Θ̇₀ = 0)
        K_ℓ  = E[relu(u) relu(v)]   over (u, v) ~ N(0, [[q_p, Σ_ℓ], [Σ_ℓ, q′_{p′}]])
        Θ̇_ℓ = Θ_ℓ ⊙ κ̇_ℓ,  κ̇_ℓ = P[u > 0, v > 0] = (π − θ)/(2π)
    readout (R = mean over all pixel pairs for "gap", mean over the
    spatial diagonal p = p′ for "flatten", i.e. (1/P)·trace):
        nngp = W_{L+1}² R(K_L) + b_{L+1}²
        ntk  = nngp + W_{L+1}² R(Θ̇_L)

where q_p = Σ_ℓ(x, x)[p, p] and q′_{p′} = Σ_ℓ(x′, x′)[p′, p′] are the per-image
variance maps.  ReLU closed forms (arc-cosine kernel of degree 1 and 0), with
s = √(q q′) and the angle computed stably as θ = atan2(√((s − k)(s + k)), k):
E[relu(u)relu(v)] = (√((s−k)(s+k)) + (π − θ) k)/(2π).  Where s = 0 (a pixel
whose pre-activation is identically zero, e.g. an all-zero patch without
bias) the pre-activation covariance k is 0, so K_ℓ = 0, and κ̇ is defined as
0 (the finite network's ReLU′(0) = 0): such pixel pairs contribute nothing.

**Vanilla fast path.**  𝒜 only mixes entries with the same spatial offset
p′ − p, the ReLU step is entrywise, and the flatten readout reads only the
offset-0 entries (p = p′).  Hence for ``readout="flatten"`` the recursion
runs on the (H, W) diagonal alone: O(P q² L) per pair instead of O(P² q² L)
(P = H·W), which is exact, not an approximation (``method="full"`` computes
the full tensor for comparison; the tests check equality).

**Relation to Arora et al.'s normalization** (seed 004 and the authors' CUDA
code, c_σ = 2, no biases, Σ⁽⁰⁾ = Σ_c x_c x′_c without 1/C, patch *sum*
instead of average inside ``conv3`` with the 1/q² put into c_σ/q² = 2/9,
GAP readout = mean over pixel pairs, vanilla readout = *trace*, "fix" =
Θ starts at 0 after the first layer and the last layer's Σ is subtracted).
With W_std = (1, √2, √2, …, √2) (first conv 1, every later conv and the
readout √2), b_std = 0, and ``filter_size=3``:

    Θ_Arora-GAP     = C · cntk(readout="gap").ntk
    Θ_Arora-vanilla = C · P · cntk(readout="flatten").ntk
    with ``fix=yes``: the same with ``fix_first_last=True``,

and with W_std = 1 everywhere (the neural-tangents default) the right-hand
sides gain a factor 2^L (L = ``depth``; every ReLU layer halves the scale):
Θ_Arora-GAP = C·2^L·cntk(W_std=1).ntk.  Arora's ``--depth`` option is L + 1
("#conv layers + 1").  The test suite checks these identities against an
independent transcription of Arora's algorithm.

**"First and last layer fixed"** (``fix_first_last=True``; Arora et al.
Sec. 4.2): the parameters (weights and biases) of the first convolution and
of the dense readout are not trained, so their gradients are dropped from
the tangent kernel: Θ_1 = 0 instead of Σ_1, and ntk = W_{L+1}² R(Θ̇_L)
without the readout's nngp term.  ``.nngp`` is unchanged.

Accuracy: float64 inputs give a relative error of about 1e-13 away from
parallel pixel pairs; near θ → 0 (e.g. the self-kernel x = x′, p = p′) the
atan2 angle inherits √ε ≈ 1e-8 relative error from the rounding of s − k,
which changes κ̇ by ≲ 3e-9 (relative) and K by far less; float32 inputs are
computed in float32 (≈1e-6 relative, ≈3e-4 on κ̇ near θ → 0).
"""
from __future__ import annotations

import math
from .._backend import device_of, namespace
from .._validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_option,
    check_real,
)

from ._fc import Kernel

__all__ = ["cntk"]

_CALLER = "cntk"
_TWO_PI = 2.0 * math.pi
# Number of full (H, W, H, W)-sized float arrays alive at once, per pair, in the
# full-tensor path (K, Θ, padded copies, ReLU temporaries); used to turn
# ``max_memory`` into a chunk size.  Measured peak (validation/bench/bench_cntk.py)
# stays below this estimate.
_FULL_ARRAYS_PER_PAIR = 12
_DIAG_ARRAYS_PER_PAIR = 16


# ----------------------------------------------------------------------------
# building blocks (all array-API only)
# ----------------------------------------------------------------------------
def _zero_pad(a, axis, width, xp):
    """Zero-pad ``a`` by ``width`` entries on both sides of ``axis``."""
    if width == 0:
        return a
    shape = list(a.shape)
    shape[axis] = width
    zeros = xp.zeros(tuple(shape), dtype=a.dtype, device=device_of(a))
    return xp.concat([zeros, a, zeros], axis=axis)


def _slice_on(ndim, axes, start, length):
    key = [slice(None)] * ndim
    for ax in axes:
        key[ax] = slice(start, start + length)
    return tuple(key)


def _shift_sum(a, axes, q, xp):
    """Σ_{s=-r..r} a shifted by s *jointly* along ``axes`` (zero outside).

    out[..., i, ..., i′, ...] = Σ_s a[..., i+s, ..., i′+s, ...].  One factor of
    the separable patch sum; a SAME, stride-1 box filter along the diagonal.
    """
    r = q // 2
    if r == 0:
        return a
    n = a.shape[axes[0]]
    padded = a
    for ax in axes:
        padded = _zero_pad(padded, ax, r, xp)
    total = padded[_slice_on(a.ndim, axes, 0, n)]
    for s in range(1, q):
        total = total + padded[_slice_on(a.ndim, axes, s, n)]
    return total


def _patch_mean_full(k, q, xp):
    """𝒜 on (m, H, W, H, W): (1/q²) Σ_{a,b} k[:, i+a, j+b, i′+a, j′+b]."""
    out = _shift_sum(k, (1, 3), q, xp)
    out = _shift_sum(out, (2, 4), q, xp)
    return out / float(q * q)


def _patch_mean_diag(k, q, xp):
    """𝒜 restricted to the offset-0 diagonal, (m, H, W): a 2-D box mean."""
    out = _shift_sum(k, (1,), q, xp)
    out = _shift_sum(out, (2,), q, xp)
    return out / float(q * q)


def _relu_moments(k, s, xp):
    """E[relu(u)relu(v)] and P[u>0, v>0] for cov k and s = √(var_u var_v).

    θ = atan2(√((s−k)(s+k)), k), both factors clipped at 0 against rounding
    (|k| ≤ s holds exactly in exact arithmetic, Cauchy–Schwarz).
    """
    below = xp.clip(s - k, min=0.0)
    above = xp.clip(s + k, min=0.0)
    root = xp.sqrt(below * above)
    theta = xp.atan2(root, k)
    rest = math.pi - theta
    k_relu = (root + rest * k) / _TWO_PI
    kdot = xp.where(s > 0, rest / _TWO_PI, xp.zeros_like(s))
    return k_relu, kdot


def _per_layer(value, name, depth):
    """Broadcast a scalar or a per-layer sequence (depth convs + readout)."""
    if isinstance(value, (list, tuple)):
        if len(value) != depth + 1:
            raise InvalidParameterError(
                f"The {name!r} parameter of {_CALLER} must be a scalar or a sequence of "
                f"depth + 1 = {depth + 1} values (one per conv layer and the readout); "
                f"got {len(value)} values."
            )
        return [check_real(v, name, caller=_CALLER, low=0.0) for v in value]
    v = check_real(value, name, caller=_CALLER, low=0.0)
    return [v] * (depth + 1)


def _variance_maps(x, ws, bs, q, xp):
    """Per-image pre-activation variances Σ_ℓ(x, x)[p, p], ℓ = 1..L, as √.

    Returns a list of L arrays of shape (n, H, W) holding √q_p, which the
    ReLU step of every pair needs.  E[relu(u)²] = var/2 gives the recursion.
    """
    c = x.shape[1]
    v = xp.sum(x * x, axis=1) / float(c)
    roots = []
    for layer in range(len(ws) - 1):
        v = ws[layer] ** 2 * _patch_mean_diag(v, q, xp) + bs[layer] ** 2
        roots.append(xp.sqrt(v))
        v = v / 2.0
    return roots


def _pair_kernels(xa, xb, ra, rb, ws, bs, q, readout, full, fix, xp):
    """nngp, ntk of the aligned pairs (xa[m], xb[m]); shapes (m,).

    ``ra``/``rb``: per-layer √variance maps of the pairs' images, (m, H, W).
    ``full``: run on the (m, H, W, H, W) pixel-pair tensor; otherwise on the
    (m, H, W) offset-0 diagonal (valid for the flatten readout only).
    """
    m, c, h, w = xa.shape
    depth = len(ws) - 1
    if full:
        xa_r = xp.reshape(xa, (m, c, h * w))
        xb_r = xp.reshape(xb, (m, c, h * w))
        k = xp.matmul(xp.permute_dims(xa_r, (0, 2, 1)), xb_r) / float(c)
        k = xp.reshape(k, (m, h, w, h, w))
        patch_mean = _patch_mean_full
    else:
        k = xp.sum(xa * xb, axis=1) / float(c)
        patch_mean = _patch_mean_diag
    t = None
    for layer in range(depth):
        w2, b2 = ws[layer] ** 2, bs[layer] ** 2
        k = w2 * patch_mean(k, q, xp) + b2
        if layer == 0:
            t = xp.zeros_like(k) if fix else k
        else:
            t = k + w2 * patch_mean(t, q, xp)
        if full:
            s = ra[layer][:, :, :, None, None] * rb[layer][:, None, None, :, :]
        else:
            s = ra[layer] * rb[layer]
        k, kdot = _relu_moments(k, s, xp)
        t = t * kdot
    if full and readout == "flatten":
        # offset-0 entries: every (P + 1)-th entry of the flattened (P, P) matrix
        p = h * w
        k = xp.reshape(k, (m, p * p))[:, :: p + 1]
        t = xp.reshape(t, (m, p * p))[:, :: p + 1]
    k = xp.reshape(k, (m, -1))
    t = xp.reshape(t, (m, -1))
    w2, b2 = ws[depth] ** 2, bs[depth] ** 2
    nngp = w2 * xp.mean(k, axis=1) + b2
    ntk_tail = w2 * xp.mean(t, axis=1)
    ntk = ntk_tail if fix else nngp + ntk_tail
    return nngp, ntk


# ----------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------
def cntk(
    x1,
    x2=None,
    *,
    depth,
    readout="gap",
    filter_size=3,
    W_std=1.0,
    b_std=0.0,
    fix_first_last=False,
    method=None,
    max_memory=2**28,
):
    r"""NNGP and NTK of the infinitely wide ReLU CNN (seed 004, CNTK).

    Architecture: ``depth`` × [conv q×q (SAME zero padding, stride 1) → ReLU],
    then a dense readout after global average pooling (``"gap"``, CNTK-GAP)
    or after flattening (``"flatten"``, vanilla CNTK-V), all in the NTK
    parameterization with neural-tangents' conventions (see the module
    docstring for the recursion, seed 004 eqs. (6)–(8) per pixel pair):

    .. math::
        K_0 = \tfrac1C x^\top x',\quad
        \Sigma_\ell = W_\ell^2\,\mathcal A(K_{\ell-1}) + b_\ell^2,\quad
        \Theta_\ell = \Sigma_\ell + W_\ell^2\,\mathcal A(\Theta_{\ell-1}\odot\dot\kappa_{\ell-1}),

    K_ℓ, κ̇_ℓ the ReLU arc-cosine moments of Σ_ℓ per pixel pair, and readout
    nngp = W²R(K_L) + b², ntk = nngp + W²R(Θ_L ⊙ κ̇_L) with R the mean over
    all pixel pairs (gap) or over the diagonal p = p′ (flatten).

    Parameters
    ----------
    x1 : array, shape (n1, C, H, W)
        Images, channels first.
    x2 : array, shape (n2, C, H, W), optional
        Second set; ``None`` means ``x1``, and then only the pairs i ≤ j are
        computed and the result is mirrored (exactly symmetric).
    depth : int ≥ 1
        Number of conv + ReLU layers L (Arora et al.'s ``--depth`` is L + 1).
    readout : {"gap", "flatten"}
        Global average pooling (mean over all P² pixel pairs) or flatten
        (mean over the P offset-0 pairs, i.e. (1/P)·trace).
    filter_size : odd int ≥ 1
        q; ``filter_size=1`` makes every pixel an independent FC net over
        the channels (the kernel is then the mean of FC kernels over pixel
        pairs, tested).
    W_std, b_std : float ≥ 0 or sequence of depth + 1 floats
        Weight and bias standard deviations, per conv layer and readout.
    fix_first_last : bool
        Drop the first conv's and the readout's parameters from the tangent
        kernel (Arora et al.'s "fix" variant, Sec. 4.2).  ``.nngp`` unchanged.
    method : {None, "full", "diagonal"}
        ``None``: "diagonal" (O(P) per pair, exact) for flatten, "full"
        (O(P²) per pair) for gap.  ``"full"`` with flatten computes the whole
        pixel-pair tensor (for validation).  "diagonal" with gap is an error.
    max_memory : int
        Approximate bound, in bytes, on the working memory of one batch of
        image pairs (the batch holds ≥ 1 pair whatever the bound).

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk``, arrays of shape (n1, n2) in the namespace and
        floating dtype of the inputs (float64 for integer inputs).

    Notes
    -----
    Arora et al.'s values (c_σ = 2, no 1/C, patch sums, trace for vanilla)
    are Θ_Arora-GAP = C·ntk and Θ_Arora-V = C·P·ntk with
    ``W_std=[1, √2, …, √2]``; see the module docstring.  Accuracy: ≈1e-13
    relative in float64, ≈1e-8 on entries with near-parallel pixel pairs
    (angle rounding), ≈1e-6 / 3e-4 in float32.  Cost per pair: O(L q P²)
    (gap) or O(L q P) (flatten) with separable patch sums.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((3, 2, 5, 5))
    >>> k = cntk(x, depth=2, readout="flatten")
    >>> k.ntk.shape
    (3, 3)
    """
    xp = namespace(x1, x2)
    x1 = check_array(x1, "x1", caller=_CALLER, ndim=4, xp=xp)
    symmetric = x2 is None
    if not symmetric:
        x2 = check_array(x2, "x2", caller=_CALLER, ndim=4, xp=xp)
        if tuple(x2.shape[1:]) != tuple(x1.shape[1:]):
            raise InvalidParameterError(
                f"The 'x2' parameter of {_CALLER} must have the same (channels, height, width) "
                f"as 'x1' {tuple(x1.shape[1:])}; got {tuple(x2.shape[1:])}."
            )
        dtype = xp.result_type(x1.dtype, x2.dtype)
        x1, x2 = xp.astype(x1, dtype), xp.astype(x2, dtype)
    depth = check_int(depth, "depth", caller=_CALLER, low=1)
    check_option(readout, "readout", ("gap", "flatten"), caller=_CALLER)
    q = check_int(filter_size, "filter_size", caller=_CALLER, low=1)
    if q % 2 == 0:
        raise InvalidParameterError(
            f"The 'filter_size' parameter of {_CALLER} must be odd (SAME padding is "
            f"symmetric only for odd sizes); got {q}."
        )
    if not isinstance(fix_first_last, bool):
        raise InvalidParameterError(
            f"The 'fix_first_last' parameter of {_CALLER} must be a bool; got {fix_first_last!r}."
        )
    check_option(method, "method", (None, "full", "diagonal"), caller=_CALLER)
    if method == "diagonal" and readout == "gap":
        raise InvalidParameterError(
            f"The 'method' parameter of {_CALLER} cannot be 'diagonal' with readout='gap': "
            "global average pooling needs every pixel pair."
        )
    full = readout == "gap" or method == "full"
    max_memory = check_int(max_memory, "max_memory", caller=_CALLER, low=1)
    ws = _per_layer(W_std, "W_std", depth)
    bs = _per_layer(b_std, "b_std", depth)
    if x1.shape[1] == 0 or x1.shape[2] == 0 or x1.shape[3] == 0:
        raise InvalidParameterError(
            f"The 'x1' parameter of {_CALLER} must have at least one channel and pixel; "
            f"got shape {tuple(x1.shape)}."
        )

    xb_all = x1 if symmetric else x2
    n1, n2 = x1.shape[0], xb_all.shape[0]
    _, c, h, w = x1.shape
    p = h * w
    itemsize = 4 if x1.dtype == xp.float32 else 8
    per_pair = itemsize * (
        _FULL_ARRAYS_PER_PAIR * (h + q) * (w + q) * p if full else _DIAG_ARRAYS_PER_PAIR * (h + q) * (w + q) + 2 * c * p
    )
    chunk = max(1, max_memory // per_pair)

    roots1 = _variance_maps(x1, ws, bs, q, xp)
    roots2 = roots1 if symmetric else _variance_maps(xb_all, ws, bs, q, xp)

    def pairs_values(ia, ib):
        """nngp, ntk for the index pairs (ia[k], ib[k]), in chunks of ``chunk``."""
        nngp_parts, ntk_parts = [], []
        for start in range(0, ia.shape[0], chunk):
            sa, sb = ia[start : start + chunk], ib[start : start + chunk]
            xa, xb = xp.take(x1, sa, axis=0), xp.take(xb_all, sb, axis=0)
            ra = [xp.take(r, sa, axis=0) for r in roots1]
            rb = [xp.take(r, sb, axis=0) for r in roots2]
            g, t = _pair_kernels(xa, xb, ra, rb, ws, bs, q, readout, full, fix_first_last, xp)
            nngp_parts.append(g)
            ntk_parts.append(t)
        return xp.concat(nngp_parts), xp.concat(ntk_parts)

    # Blocks of images: a block of b × b images gives ≤ b² pairs; b ≈ √chunk
    # keeps the index arrays small and a block ≈ one chunk of pairs.
    side = max(1, math.isqrt(chunk - 1) + 1)
    device = device_of(x1)
    dev_idx = dict(device=device)
    rows_nngp, rows_ntk = [], []
    blocks = {}
    for i0 in range(0, n1, side):
        i1 = min(n1, i0 + side)
        row_g, row_t = [], []
        for j0 in range(0, n2, side):
            j1 = min(n2, j0 + side)
            if symmetric and j0 < i0:
                g, t = blocks[(j0, i0)]
                row_g.append(xp.permute_dims(g, (1, 0)))
                row_t.append(xp.permute_dims(t, (1, 0)))
                continue
            ia = xp.arange(i0, i1, **dev_idx)
            ib = xp.arange(j0, j1, **dev_idx)
            bi, bj = i1 - i0, j1 - j0
            grid_a = xp.broadcast_to(ia[:, None], (bi, bj))
            grid_b = xp.broadcast_to(ib[None, :], (bi, bj))
            if symmetric and i0 == j0:
                # upper triangle only, then every (a, b) reads pair (min, max)
                upper = grid_a <= grid_b
                g_vals, t_vals = pairs_values(grid_a[upper], grid_b[upper])
                la = xp.arange(bi, **dev_idx)
                lo = xp.minimum(la[:, None], la[None, :])
                hi = xp.maximum(la[:, None], la[None, :])
                pos = xp.reshape(lo * bi - (lo * (lo - 1)) // 2 + (hi - lo), (-1,))
                g = xp.reshape(xp.take(g_vals, pos), (bi, bj))
                t = xp.reshape(xp.take(t_vals, pos), (bi, bj))
            else:
                g_vals, t_vals = pairs_values(xp.reshape(grid_a, (-1,)), xp.reshape(grid_b, (-1,)))
                g = xp.reshape(g_vals, (bi, bj))
                t = xp.reshape(t_vals, (bi, bj))
            if symmetric:
                blocks[(i0, j0)] = (g, t)
            row_g.append(g)
            row_t.append(t)
        rows_nngp.append(xp.concat(row_g, axis=1))
        rows_ntk.append(xp.concat(row_t, axis=1))
    if n1 == 0 or n2 == 0:
        empty = xp.zeros((n1, n2), dtype=x1.dtype, device=device)
        return Kernel(empty, empty)
    return Kernel(xp.concat(rows_nngp, axis=0), xp.concat(rows_ntk, axis=0))
