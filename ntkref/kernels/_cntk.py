"""Convolutional neural tangent kernel (CNTK) of seed 004 (Arora et al.).

Implements, for images of shape ``(N, C, H, W)``, the NNGP and NTK of the
infinitely wide CNN

    conv(q×q, SAME zero padding, stride 1) → ReLU   (``depth`` times)
    → readout: global average pooling + dense ("gap")  or  flatten + dense ("flatten")

in the NTK parameterization, with the neural-tangents conventions that
:func:`ntkref.kernels.fc` follows (docs/conventions.md, 'FC kernels').  Seed 004 equations implemented:

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

Accuracy (the numerics, tested against an independent 50-digit mpmath
evaluation of the recursion on adversarial images).  The ReLU angle needs
e = s − k and f = s + k (s = √(q q′)), which cancel for near-parallel and
antiparallel pixel pairs: there neural-tangents' atan2(√(q q′ − k²), k)
loses half the digits (an angle of 1e-9 comes out as ~1e-8).  Here the angle
is θ = 2·arctan √(e/f), and wherever e/f < 1/64 (or, in the first layer,
where pixel pairs can be antiparallel, f/e < 1/64) e and f are recomputed
from sums of nonnegative terms, without cancellation:

    layer 1:   e = β + ½ n n′ ‖Û_p − Û′_p′‖²,  f = β + 2b² + ½ n n′ ‖Û_p + Û′_p′‖²,
    layer ℓ>1: e = β + ½ n n′ ‖α̂_p − α̂′_p′‖² + (W²/q²) Σ_δ ẽ[p+δ, p′+δ],

with U_p the zero-padded input patch at p (C·q² values, n = W‖U_p‖/(q√C)),
α_p the patch of √(post-activation variance) of the previous layer (n its
norm times W/q), β = b²(n − n′)²/(s + n n′ + b²) the bias term
(= √((n²+b²)(n′²+b²)) − n n′ − b² ≥ 0) and ẽ = √(a a′) − E[relu u relu v]
= ½(e − s(sin θ − θ cos θ)/π) ≥ 0 the previous layer's post-activation
excess (series for θ < 0.1).  (Cauchy–Schwarz split: s − k = β + the
variance patches' misalignment + the covariance deficits.)  Every other
entry has e/f ≥ 1/64, where the direct s ∓ k costs at most ≈ 16ε in the angle.
Without biases the images are first scaled by powers of two (exact) and the
kernel by their product afterwards (positive homogeneity), so images from
1e-150 to 1e150 neither underflow nor overflow.

Measured (tests/test_cntk.py, float64): every entry within 1e-13·√(K(x,x)
K(x′,x′)) of the 50-digit value (K = the same output, nngp or ntk), on x and
−x, x and c·x, constant and zero patches, zero images, scales 1e-150..1e150,
gap and flatten, depths 1–4, 1×1 and 3×3 filters, with and without biases.
float32 inputs are computed in float32 (≈1e-6 relative).

Speed (NumPy).  The pixel-pair tensors of a pair are stored on the zero-padded
grid, flattened, so every joint shift of the patch sum is one contiguous slice
addition; pairs run in threads (NumPy's loops release the GIL; BLAS is held to
one thread); a symmetric Gram computes the pairs i ≤ j.  Small images go in
batches of pairs, every step over the batch's whole tensors, into per-thread
work buffers.  Larger images (a pair tensor of ≥ 90 000 entries: 16×16 and up
with 3×3 filters; 32×32: 1.3 M) with the GAP readout go one pair at a time, and each layer
in blocks of pixel rows of ~2¹⁶ entries (``_RowBlocks``): the patch sum of a
block (row shifts into a scratch widened by r·s₁, then column shifts), the
ReLU moments, the flags and the outputs are all computed while the block's
arrays stay in the core's cache, so only the layer's inputs and outputs pass
through memory (35 against 55 ms of CPU per 32×32 pair, depth 3, one thread);
the flagged entries are refined in groups after their blocks, with the same
steps.  The refinement runs only where flagged entries exist (a min/max over
the ratio); it gathers ~q² values per flagged entry, so where nearly every
pixel pair is (near-)parallel (e.g. two constant 32×32 images) a GAP pair
takes ~25× longer than a generic one (measured 1.26 s against 0.051 s of CPU,
one thread, on the shared 2-core machine).
"""
from __future__ import annotations

import math

import array_api_compat

from .._backend import device_of, namespace
from .._compat import scatter_flat, single_threaded_blas
from .._validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_option,
    check_real,
)

from ._fc import Kernel, _n_workers, check_finite_kernel, check_memory

__all__ = ["cntk"]

_CALLER = "cntk"
_PI = math.pi
_TAU = 1.0 / 64  # e/f below _TAU (layer 1: or above 1/_TAU) → e and f recomputed without cancellation
_SERIES_THRESHOLD = 0.1
# sin θ − θ cos θ = Σ_{n≥1} (−1)^{n+1} 2n θ^{2n+1}/(2n+1)!; 4 terms: relative truncation error < 3e-17 for θ < 0.1
_SERIES = [(-1) ** (n + 1) * 2 * n / math.factorial(2 * n + 1) for n in range(1, 5)]
# work buffers of a batch (numbers of m·N-entry float arrays), for the memory estimate
_BUFFERS = 10
_REFINE_CHUNK = 1 << 15
# NumPy, GAP readout: pairs of at least _ROWS_MIN_ENTRIES padded pixel pairs run one by one in blocks of
# pixel rows of about _BLOCK_ENTRIES entries (cache-sized), smaller ones in batches of pairs (CPU time per
# pair, depth 3, 3×3, one thread: rows/batched 1.26 at 13×13, 1.01 at 14×14, 1.07 at 15×15, 0.89 at 16×16,
# 0.65 at 20×20, 0.63 at 24×24, 0.65 at 32×32)
_ROWS_MIN_ENTRIES = 90_000
_BLOCK_ENTRIES = 1 << 16


# ----------------------------------------------------------------------------
# layout
# ----------------------------------------------------------------------------
class _Geometry:
    """Flat zero-padded layout of the pixel-pair tensors of a batch of image pairs.

    An image lives on its (H + 2r) × (W + 2r) zero-padded grid, flattened (P̃ entries, r = (q − 1)/2); a
    pair's tensor is the P̃ × P̃ matrix of padded pixel pairs, flattened (``full``), or its diagonal p = p′
    (P̃ entries, the flatten readout).  A joint shift (p, p′) → (p + δ, p′ + δ) is one constant offset of the
    flat index, and a shift of an interior entry by |δ| ≤ r stays inside the pair's own padding, so the patch
    sum is 4r contiguous slice additions over a whole batch (padding entries must hold zeros on input).
    """

    def __init__(self, h, w, q, full):
        r = q // 2
        self.h, self.w, self.q, self.r, self.full = h, w, q, r, full
        self.hp, self.wp = h + 2 * r, w + 2 * r
        self.pt = self.hp * self.wp
        self.n = self.pt * self.pt if full else self.pt
        self.s1 = self.pt + 1 if full else 1  # joint column shift
        self.s2 = self.wp * (self.pt + 1) if full else self.wp  # joint row shift
        deltas = [(a, b) for a in range(-r, r + 1) for b in range(-r, r + 1)]
        self.img_offsets = [a * self.wp + b for a, b in deltas]
        self.pair_offsets = [a * self.s2 + b * self.s1 for a, b in deltas]

    def interior_view(self, a, m, xp):
        """The interior entries of a flat batch array (a strided view on NumPy)."""
        r = self.r
        if self.full:
            v = xp.reshape(a, (m, self.hp, self.wp, self.hp, self.wp))
            return v[:, r : self.hp - r, r : self.wp - r, r : self.hp - r, r : self.wp - r]
        v = xp.reshape(a, (m, self.hp, self.wp))
        return v[:, r : self.hp - r, r : self.wp - r]


def _np():
    import numpy

    return numpy


def _interior_flags(g, xp, device):
    """(P̃,) booleans: the pixel is inside the image (not padding)."""
    rows = xp.arange(g.pt, device=device) // g.wp
    cols = xp.arange(g.pt, device=device) % g.wp
    return (rows >= g.r) & (rows < g.hp - g.r) & (cols >= g.r) & (cols < g.wp - g.r)


def _patch_sum(a, g, xp, fast, tmp=None, out=None):
    """Σ_{|δ|≤r} a[F + offset(δ)] on a flat batch array whose padding holds zeros (the result's padding is
    garbage).  ``fast`` (NumPy): in place into ``out``, ``tmp`` as scratch; otherwise new arrays."""
    r = g.r
    if fast:
        tmp[...] = a
        for j in range(1, r + 1):
            d = j * g.s1
            tmp[d:] += a[:-d]
            tmp[:-d] += a[d:]
        out[...] = tmp
        for i in range(1, r + 1):
            d = i * g.s2
            out[d:] += tmp[:-d]
            out[:-d] += tmp[d:]
        return out
    for stride in (g.s1, g.s2):
        a = _shift_add(a, stride, r, xp)
    return a


def _shift_add(a, stride, r, xp):
    """a[F] + Σ_{j=1..r} (a[F − j·stride] + a[F + j·stride]), zero outside (standard operations only)."""
    n = a.shape[0]
    out = a
    for j in range(1, r + 1):
        d = min(j * stride, n)
        z = xp.zeros((d,), dtype=a.dtype, device=device_of(a))
        out = out + xp.concat([z, a[: n - d]]) + xp.concat([a[d:], z])
    return out


def _zero_pads(a, g, m, xp, fast, keep=None):
    """``a`` with its padding entries set to 0: slice assignments in place (NumPy), else a selection by the
    interior flags ``keep`` (m·N booleans)."""
    if g.r == 0:
        return a
    if not fast:
        return xp.where(keep, a, xp.zeros_like(a))  # the padding may hold NaN (0/0): a product would keep it
    v = a.reshape((m, g.hp, g.wp, g.hp, g.wp) if g.full else (m, g.hp, g.wp))
    r = g.r
    for ax in range(1, v.ndim):
        size = v.shape[ax]
        for sl in (slice(0, r), slice(size - r, size)):
            key = [slice(None)] * v.ndim
            key[ax] = sl
            v[tuple(key)] = 0.0
    return a


# ----------------------------------------------------------------------------
# per-image maps
# ----------------------------------------------------------------------------
def _pad_images(x, g, xp):
    """(n, C, P̃): the images on their zero-padded grids, flattened, divided by √C."""
    n, c, h, w = x.shape
    dev = device_of(x)
    y = x / math.sqrt(c)
    if g.r:
        zc = xp.zeros((n, c, h, g.r), dtype=x.dtype, device=dev)
        y = xp.concat([zc, y, zc], axis=3)
        zr = xp.zeros((n, c, g.r, g.wp), dtype=x.dtype, device=dev)
        y = xp.concat([zr, y, zr], axis=2)
    return xp.reshape(y, (n, c, g.pt))


def _variance_maps(xpad, g, cs, b2s, xp):
    """Per image and conv layer ℓ, σ_ℓ = √Σ_ℓ(x, x)[p, p] on the padded grid (0 in the padding), (n, P̃).

    Σ_1 = c₁ Σ_δ ‖x_{p+δ}‖²/C + b₁², Σ_{ℓ+1} = c_{ℓ+1} Σ_δ Σ_ℓ[p+δ]/2 + b²_{ℓ+1} (E relu(u)² = var/2),
    c = W²/q².
    """
    n = xpad.shape[0]
    img = Geometry_images(g)
    keep = xp.astype(_interior_flags(g, xp, device_of(xpad)), xpad.dtype)
    u = xp.sum(xpad * xpad, axis=1)  # (n, P̃): ‖x_p‖²/C
    sig = []
    for c, b2 in zip(cs, b2s):
        v = c * xp.reshape(_patch_sum(xp.reshape(u, (-1,)), img, xp, False), (n, g.pt)) + b2
        v = v * keep
        sig.append(xp.sqrt(v))
        u = v / 2.0
    return sig


def Geometry_images(g):
    """The geometry of single images (the diagonal layout): joint shifts are image shifts."""
    return _Geometry(g.h, g.w, g.q, False)


# ----------------------------------------------------------------------------
# refinement of flagged entries (near-parallel / antiparallel pixel pairs)
# ----------------------------------------------------------------------------
def _s_sin_minus_theta_cos(theta, s, xp):
    """s·(sin θ − θ cos θ) ≥ 0, by its series for θ < 0.1 (the difference cancels there, ≈ sθ³/3)."""
    t2 = theta * theta
    series = _SERIES[3] * t2 + _SERIES[2]
    series = series * t2 + _SERIES[1]
    series = series * t2 + _SERIES[0]
    series = series * (t2 * theta)
    direct = xp.sin(theta) - theta * xp.cos(theta)
    return s * xp.where(theta < _SERIES_THRESHOLD, series, direct)


def _unit_rows(v, xp):
    nrm = xp.sqrt(xp.sum(v * v, axis=1))
    safe = xp.where(nrm > 0, nrm, xp.ones_like(nrm))
    return v / safe[:, None], nrm


def _refine(idx, layer, st, g, xp):
    """Cancellation-free e = s − k and f = s + k at the flat batch entries ``idx`` (module docstring)."""
    pt, n = g.pt, g.n
    jj = idx // n
    loc = idx % n
    if g.full:
        pa, pb = loc // pt, loc % pt
    else:
        pa = pb = loc
    c, b2 = st["c"][layer], st["b2"][layer]
    sa, sb = st["sig_a"][layer], st["sig_b"][layer]
    s = xp.take(xp.reshape(sa, (-1,)), jj * pt + pa) * xp.take(xp.reshape(sb, (-1,)), jj * pt + pb)
    offs = xp.asarray(g.img_offsets, device=device_of(idx))
    if layer == 0:
        xa, xb = st["xa"], st["xb"]
        ch = xa.shape[1]
        chan = xp.arange(ch, device=device_of(idx))
        base_a = (jj * ch)[:, None, None] * pt + chan[None, :, None] * pt + pa[:, None, None] + offs[None, None, :]
        base_b = (jj * ch)[:, None, None] * pt + chan[None, :, None] * pt + pb[:, None, None] + offs[None, None, :]
        k_rows = idx.shape[0]
        va = xp.reshape(xp.take(xp.reshape(xa, (-1,)), xp.reshape(base_a, (-1,))), (k_rows, -1))
        vb = xp.reshape(xp.take(xp.reshape(xb, (-1,)), xp.reshape(base_b, (-1,))), (k_rows, -1))
    else:
        # √(post-activation variance) of the previous layer: σ/√2 inside, 0 in the padding
        pa_prev = xp.reshape(st["sig_a"][layer - 1], (-1,)) * (1 / math.sqrt(2.0))
        pb_prev = xp.reshape(st["sig_b"][layer - 1], (-1,)) * (1 / math.sqrt(2.0))
        k_rows, nq = idx.shape[0], len(g.img_offsets)
        va = xp.reshape(xp.take(pa_prev, xp.reshape((jj * pt + pa)[:, None] + offs[None, :], (-1,))), (k_rows, nq))
        vb = xp.reshape(xp.take(pb_prev, xp.reshape((jj * pt + pb)[:, None] + offs[None, :], (-1,))), (k_rows, nq))
    ua, na = _unit_rows(va, xp)
    ub, nb = _unit_rows(vb, xp)
    rc = math.sqrt(c)
    na, nb = rc * na, rc * nb
    dm = ua - ub
    dm = xp.sum(dm * dm, axis=1)
    half = 0.5 * na * nb
    if b2 > 0:
        gap = na - nb
        beta = b2 * (gap * gap) / (s + na * nb + b2)
    else:
        beta = xp.zeros_like(s)
    e = beta + half * dm
    if layer == 0:
        dp = ua + ub
        f = beta + 2 * b2 + half * xp.sum(dp * dp, axis=1)
    else:
        e = e + c * _previous_excess(idx, jj, pa, pb, layer, st, g, xp)
        f = 2 * s - e
    return e, f


def _previous_excess(idx, jj, pa, pb, layer, st, g, xp):
    """Σ_δ ẽ[p+δ, p′+δ] of the previous layer, ẽ = √(a a′) − E[relu u relu v] = ½(e − s(sin θ − θ cos θ)/π)."""
    pt = g.pt
    dev = device_of(idx)
    inside = xp.reshape(st["inside"], (-1,))
    e_old = st["e_prev"]
    pmt_old = st["pmt_prev"]
    sa = xp.reshape(st["sig_a"][layer - 1], (-1,))
    sb = xp.reshape(st["sig_b"][layer - 1], (-1,))
    total = xp.zeros(idx.shape, dtype=sa.dtype, device=dev)
    for o_img, o_pair in zip(g.img_offsets, g.pair_offsets):
        qa, qb = pa + o_img, pb + o_img
        ok = xp.take(inside, qa) & xp.take(inside, qb)
        fo = idx + o_pair
        s = xp.take(sa, jj * pt + qa) * xp.take(sb, jj * pt + qb)
        theta = _PI - xp.take(pmt_old, fo)
        e = xp.take(e_old, fo)
        ex = 0.5 * (e - _s_sin_minus_theta_cos(theta, s, xp) * (1 / _PI))
        ex = xp.clip(ex, min=0.0)
        total = total + xp.where(ok, ex, xp.zeros_like(ex))
    return total


# ----------------------------------------------------------------------------
# one batch of image pairs
# ----------------------------------------------------------------------------
def _batch_sums(st, g, m, xp, fast, work):
    """Σ over interior entries of 2π·K_L and 2π·Θ_L·κ̇_L for each of the m pairs of the batch."""
    depth = len(st["c"])
    dev = device_of(st["xa"])
    total = m * g.n
    keep = None
    if not fast:
        keep = xp.reshape(xp.broadcast_to(xp.reshape(_pair_inside(g, xp, dev), (1, g.n)), (m, g.n)), (-1,))
    st["inside"] = _interior_flags(g, xp, dev)

    def buf(name):
        return work[name][:total] if fast else None

    kp = thp = None  # 2π·post-activation covariance and 2π·Θ⊙κ̇ of the previous layer (padding zeroed)
    e_prev = pmt_prev = None
    for layer in range(depth):
        c, b2 = st["c"][layer], st["b2"][layer]
        if layer == 0:
            xa, xb = st["xa"], st["xb"]
            if g.full:
                if fast:
                    k0 = buf("s").reshape((m, g.pt, g.pt))
                    _np().matmul(xa.transpose((0, 2, 1)), xb, out=k0)
                    k0 = buf("s")
                else:
                    k0 = xp.reshape(xp.matmul(xp.permute_dims(xa, (0, 2, 1)), xb), (-1,))
            else:
                k0 = xp.reshape(xp.sum(xa * xb, axis=1), (-1,))
                if fast:
                    buf("s")[...] = k0
                    k0 = buf("s")
            k = _patch_sum(k0, g, xp, fast, buf("tmp"), buf("k"))
            if fast:
                k *= c
                if b2:
                    k += b2
                th = buf("th")
                if st["fix"]:
                    th[...] = 0.0
                else:
                    th[...] = k
            else:
                k = c * k + b2
                th = xp.zeros_like(k) if st["fix"] else k
        else:
            scale = c / (2 * _PI)
            if fast:
                k = _patch_sum(kp, g, xp, fast, buf("tmp"), buf("k"))
                k *= scale
                if b2:
                    k += b2
                th = _patch_sum(thp, g, xp, fast, buf("tmp"), buf("f"))
                th *= scale
                th += k
                # the names rotate: "th" now holds the old Θ′ buffer, free again
                work["th"], work["f"] = work["f"], work["th"]
            else:
                k = scale * _patch_sum(kp, g, xp, fast) + b2
                th = k + scale * _patch_sum(thp, g, xp, fast)
        last = layer == depth - 1 and not (g.full and st["diagonal_readout"])
        kp, thp = _relu_step(k, th, layer, st, g, m, xp, fast, work, buf, keep, e_prev, pmt_prev, last)
        e_prev, pmt_prev = st["e_prev"], st["pmt_prev"]
    if fast and last:
        return kp, thp
    kp, thp = xp.reshape(kp, (m, g.n)), xp.reshape(thp, (m, g.n))
    if g.full and st["diagonal_readout"]:  # flatten readout on the full tensor: the entries p = p′
        kp, thp = kp[:, :: g.pt + 1], thp[:, :: g.pt + 1]
    return xp.sum(kp, axis=1), xp.sum(thp, axis=1)


def _pair_inside(g, xp, dev):
    ins = _interior_flags(g, xp, dev)
    if g.full:
        return xp.reshape(ins[:, None] & ins[None, :], (-1,))
    return ins


def _relu_step(k, th, layer, st, g, m, xp, fast, work, buf, keep, e_prev, pmt_prev, last=False):
    """The ReLU moments of one layer on the batch; returns (2π·K_post, 2π·Θ⊙κ̇), padding zeroed (``last`` on
    NumPy: their per-pair sums over the interior)."""
    sa, sb = st["sig_a"][layer], st["sig_b"][layer]
    ebuf, pbuf = ("e0", "p0") if layer % 2 == 0 else ("e1", "p1")
    if g.full:
        if fast:
            s = buf("s")
            _np().multiply(sa[:, :, None], sb[:, None, :], out=s.reshape((m, g.pt, g.pt)))
        else:
            s = xp.reshape(sa[:, :, None] * sb[:, None, :], (-1,))
    else:
        s = xp.reshape(sa * sb, (-1,))
        if fast:
            buf("s")[...] = s
            s = buf("s")
    zero_s = None
    if st["zero_sig"][layer]:
        zero_s = s == 0
    if fast:
        np = _np()
        e = np.subtract(s, k, out=buf(ebuf))
        f = np.add(s, k, out=buf("f"))
        if zero_s is not None:  # s = 0: k = 0 too; a benign ratio here, the outputs are set to 0 below
            e[zero_s] = 1.0
            f[zero_s] = 1.0
        r = np.divide(e, f, out=buf(pbuf))
    else:
        e, f = s - k, s + k
        if zero_s is not None:
            one = xp.ones_like(e)
            e, f = xp.where(zero_s, one, e), xp.where(zero_s, one, f)
        r = e / f
    # entries to refine: near-parallel (r small) anywhere, antiparallel (r large) in layer 1
    st["e_prev"], st["pmt_prev"] = e_prev, pmt_prev
    inner = g.interior_view(r, m, xp)
    flagged = float(xp.min(inner)) < _TAU
    if layer == 0 and not flagged:
        flagged = float(xp.max(inner)) > 1 / _TAU
    ref = None
    if flagged:
        inside = _pair_inside(g, xp, device_of(r))
        inside = xp.reshape(xp.broadcast_to(xp.reshape(inside, (1, g.n)), (m, g.n)), (-1,))
        cond = r < _TAU
        if layer == 0:
            cond = cond | (r > 1 / _TAU)
        cond = cond & inside
        idx = xp.nonzero(cond)[0]
        parts_e, parts_f = [], []
        for start in range(0, idx.shape[0], _REFINE_CHUNK):
            sel = idx[start : min(idx.shape[0], start + _REFINE_CHUNK)]
            pe, pf = _refine(sel, layer, st, g, xp)
            parts_e.append(pe)
            parts_f.append(pf)
        e_ref, f_ref = xp.concat(parts_e), xp.concat(parts_f)
        e = scatter_flat(e, cond, idx, e_ref, xp)
        f = scatter_flat(f, cond, idx, f_ref, xp)
        r = scatter_flat(r, cond, idx, e_ref / f_ref, xp)
        ref = (cond, idx, e_ref, f_ref)
    if fast:
        np = _np()
        t = np.sqrt(r, out=r)
        root = np.multiply(t, f, out=f)  # s·sin θ = √(e f)
        pmt = np.arctan(t, out=t)
        pmt *= -2.0
        pmt += _PI  # π − θ
    else:
        t = xp.sqrt(r)
        root = t * f
        pmt = _PI - 2.0 * xp.atan(t)
    if ref is not None:  # exact antiparallel pairs: t = ∞, f = 0, so t·f is recomputed as √e·√f
        cond, idx, e_ref, f_ref = ref
        root = scatter_flat(root, cond, idx, xp.sqrt(e_ref) * xp.sqrt(f_ref), xp)
    if zero_s is not None:  # s = 0 (k = 0): no contribution, κ̇ = 0 (relu′(0) = 0), θ = π for ẽ = 0
        if fast:
            root[zero_s] = 0.0
            pmt[zero_s] = 0.0
            e[zero_s] = 0.0
        else:
            zeros = xp.zeros_like(root)
            root, pmt, e = xp.where(zero_s, zeros, root), xp.where(zero_s, zeros, pmt), xp.where(zero_s, zeros, e)
    st["e_prev"], st["pmt_prev"] = e, pmt
    if last and fast:
        # only the sums are needed: Σ(π − θ)k + Σ s sin θ and ΣΘ(π − θ), padding zeroed in the factors
        pmt = _zero_pads(pmt, g, m, xp, fast, keep)
        root = _zero_pads(root, g, m, xp, fast, keep)
        if m == 1:
            return (np.asarray([np.vdot(pmt, k) + np.sum(root)], dtype=k.dtype),
                    np.asarray([np.vdot(th, pmt)], dtype=k.dtype))
        pm, kk, tt = pmt.reshape((m, g.n)), k.reshape((m, g.n)), th.reshape((m, g.n))
        return (np.einsum("ij,ij->i", pm, kk) + np.sum(root.reshape((m, g.n)), axis=1),
                np.einsum("ij,ij->i", tt, pm))
    if fast:
        kp = np.multiply(pmt, k, out=buf("s"))
        kp += root  # 2π·E[relu u relu v] = s sin θ + (π − θ) k
        thp = th
        thp *= pmt
    else:
        kp = pmt * k + root
        thp = th * pmt
    kp = _zero_pads(kp, g, m, xp, fast, keep)
    thp = _zero_pads(thp, g, m, xp, fast, keep)
    return kp, thp


# ----------------------------------------------------------------------------
# one image pair in cache-sized blocks of pixel rows (NumPy, GAP readout, large images)
# ----------------------------------------------------------------------------
class _RowBlocks:
    """The interior pixels p̃ of the first image, in runs along an image row: block (a, b) is the pair
    tensor's rows p̃ ∈ [a, b), the flat entries [a·P̃, b·P̃) (every p̃′, padding included).

    A layer is computed block by block, every step of it on the block while the block's ~8 arrays stay in
    the core's cache; only the layer's inputs (the previous layer's 2π·K and 2π·Θ⊙κ̇) and outputs pass
    through memory.  The patch sum of a block reads its source at joint shifts of up to ±r rows and ±r
    columns; the full arrays carry ``margin`` zeros at both ends, so every such read is in bounds (reads
    beyond the pair's own entries only reach padding entries of the block, whose results are discarded).
    """

    def __init__(self, g, block_entries):
        r = g.r
        self.margin = r * (g.wp + 1)
        per = max(1, block_entries // g.pt)  # rows p̃ per block
        pieces = -(-g.w // per)
        size = -(-g.w // pieces)  # balanced pieces of an image row
        self.blocks = [(i * g.wp + c0, i * g.wp + min(g.wp - r, c0 + size))
                       for i in range(r, g.hp - r) for c0 in range(r, g.wp - r, size)]
        self.longest = max(b - a for a, b in self.blocks) * g.pt


def _row_work(g, dtype, block_entries):
    """Per-worker arrays of the row-block path: full-size (with margins, zero-initialized: the padding rows
    are never written and must read as 0) and block-size scratch."""
    np = _np()
    rb = _RowBlocks(g, block_entries)
    size = g.n + 2 * rb.margin
    full = {name: np.zeros(size, dtype=dtype) for name in ("kp0", "kp1", "tp0", "tp1", "e0", "e1", "pm0", "pm1")}
    halo = rb.longest + 2 * g.r * g.s1
    block = {"tk": np.empty(halo, dtype=dtype), "tt": np.empty(halo, dtype=dtype)}
    block.update({name: np.empty(rb.longest, dtype=dtype) for name in ("k", "th", "s", "f", "r", "e", "pm")})
    return rb, full, block


def _row_work_bytes(g, itemsize, block_entries):
    """Bytes of :func:`_row_work`."""
    rb = _RowBlocks(g, block_entries)
    return itemsize * (8 * (g.n + 2 * rb.margin) + 2 * (rb.longest + 2 * g.r * g.s1) + 7 * rb.longest)


def _block_patch_sum(src, lo, size, g, margin, tmp, out):
    """out = Σ_{|a|,|b|≤r} src[F + a·s2 + b·s1] for the flat entries F ∈ [lo, lo + size) (``src`` with its
    margins): the row shifts first, into ``tmp`` over the block widened by r·s1 on both sides, then the
    column shifts."""
    r = g.r
    if r == 0:
        out[...] = src[margin + lo : margin + lo + size]
        return out
    np = _np()
    s1, s2, h = g.s1, g.s2, r * g.s1
    width = size + 2 * h
    t0 = margin + lo - h
    tmp = tmp[:width]
    np.add(src[t0 - r * s2 : t0 - r * s2 + width], src[t0 + r * s2 : t0 + r * s2 + width], out=tmp)
    for a in range(-r + 1, r):
        tmp += src[t0 + a * s2 : t0 + a * s2 + width]
    np.add(tmp[:size], tmp[2 * h : 2 * h + size], out=out)
    for b in range(-r + 1, r):
        out += tmp[h + b * s1 : h + b * s1 + size]
    return out


def _fill_block_pads(a, rows, g, value=0.0):
    """Set the entries of a block whose second pixel p̃′ is padding (its rows p̃ are interior) to ``value``:
    the first and last r grid rows of every p̃′ grid, and the right r columns of each grid row with the left
    r columns of the next (adjacent in the flat layout, so one strided assignment of 2r values per grid row)."""
    r, wp = g.r, g.wp
    if r:
        v = a.reshape((rows, g.hp, wp))
        v[:, :r, :] = value
        v[:, g.hp - r :, :] = value
        a[wp - r : wp - r + (rows * g.hp - 1) * wp].reshape((-1, wp))[:, : 2 * r] = value


def _pair_sums_rows(st, g, work):
    """Σ over interior entries of 2π·K_L and 2π·Θ_L·κ̇_L for one pair (NumPy, GAP readout), layer by layer
    and within a layer block of pixel rows by block (:class:`_RowBlocks`).

    The same recursion, ReLU moments, flags and refinement as :func:`_batch_sums` / :func:`_relu_step`,
    entry for entry; only the order of the patch sum's additions and the blocking of the final sums differ.
    """
    np = _np()
    rb, full, blk = work
    margin, n, pt = rb.margin, g.n, g.pt
    depth = len(st["c"])
    fix = st["fix"]

    def view(name):
        return full[name][margin : margin + n]

    # the first layer's source K₀ = x_aᵀ x_b on the padded grids (exactly 0 where either pixel is padding)
    np.matmul(st["xa"][0].T, st["xb"][0], out=view("kp1").reshape((pt, pt)))
    ksum = tsum = 0.0
    for layer in range(depth):
        last = layer == depth - 1
        cur, prev = layer % 2, 1 - layer % 2
        src_k, src_t = full[f"kp{prev}"], full[f"tp{prev}"]
        e_all, pm_all = view(f"e{cur}"), view(f"pm{cur}")
        kp_all, tp_all = view(f"kp{cur}"), view(f"tp{cur}")
        b2 = st["b2"][layer]
        scale = st["c"][layer] if layer == 0 else st["c"][layer] / (2 * _PI)
        sa, sb = st["sig_a"][layer][0], st["sig_b"][layer][0]
        zero_sig = st["zero_sig"][layer]
        pending = []  # flagged entries (near-parallel, or antiparallel in layer 1): (flat index, k, Θ)

        def flush():
            """The pending entries: cancellation-free e and f, then the same steps as in the blocks."""
            nonlocal ksum, tsum
            if not pending:
                return
            idx = np.concatenate([p_[0] for p_ in pending])
            ks = np.concatenate([p_[1] for p_ in pending])
            ths = None if pending[0][2] is None else np.concatenate([p_[2] for p_ in pending])
            pending.clear()
            parts = [_refine(idx[j : j + _REFINE_CHUNK], layer, st, g, np)
                     for j in range(0, idx.shape[0], _REFINE_CHUNK)]
            e_ref = np.concatenate([p_[0] for p_ in parts])
            f_ref = np.concatenate([p_[1] for p_ in parts])
            pmt = _PI - 2.0 * np.arctan(np.sqrt(e_ref / f_ref))
            root = np.sqrt(e_ref) * np.sqrt(f_ref)  # exact antiparallel pairs: f = 0, e/f = ∞
            kp = pmt * ks + root
            if last:
                ksum += float(np.sum(kp))
                if ths is not None:
                    tsum += float(np.vdot(ths, pmt))
            else:
                e_all[idx], pm_all[idx], kp_all[idx] = e_ref, pmt, kp
                tp_all[idx] = 0.0 if ths is None else ths * pmt

        for a, b in rb.blocks:
            if sum(p_[0].shape[0] for p_ in pending) >= _REFINE_CHUNK:
                flush()  # the entries of earlier blocks (their block's own writes are done)
            lo, hi = a * pt, b * pt
            size, rows = hi - lo, b - a
            k = _block_patch_sum(src_k, lo, size, g, margin, blk["tk"], blk["k"][:size])
            k *= scale
            if b2:
                k += b2
            if layer == 0:
                th = None if fix else k  # Θ₁ = Σ₁ (0 with the first layer fixed)
            else:
                th = _block_patch_sum(src_t, lo, size, g, margin, blk["tt"], blk["th"][:size])
                th *= scale
                th += k
            s = blk["s"][:size]
            np.multiply.outer(sa[a:b], sb, out=s.reshape((rows, pt)))
            # e and π − θ are kept for the next layer's refinement (the last layer's in scratch)
            e = np.subtract(s, k, out=blk["e"][:size] if last else e_all[lo:hi])
            f = np.add(s, k, out=blk["f"][:size])
            zero_s = None
            if zero_sig:
                zero_s = s == 0
                e[zero_s] = 1.0
                f[zero_s] = 1.0
            ratio = np.divide(e, f, out=blk["r"][:size])
            _fill_block_pads(ratio, rows, g, 1.0)  # a benign ratio in the padding: the flags read only the interior
            flagged = float(ratio.min()) < _TAU
            if layer == 0 and not flagged:
                flagged = float(ratio.max()) > 1 / _TAU
            loc = None
            if flagged:  # refined after their blocks, in groups; a benign placeholder until then
                cond = ratio < _TAU
                if layer == 0:
                    cond |= ratio > 1 / _TAU
                loc = np.nonzero(cond)[0]
                pending.append((loc + lo, k[loc], None if th is None else th[loc]))
                ratio[loc] = 1.0
            t = np.sqrt(ratio, out=ratio)
            root = np.multiply(t, f, out=f)  # s·sin θ = √(e f)
            pmt = np.arctan(t, out=blk["pm"][:size] if last else pm_all[lo:hi])
            pmt *= -2.0
            pmt += _PI  # π − θ
            if zero_s is not None:  # s = 0 (k = 0): no contribution, κ̇ = 0, θ = π for ẽ = 0
                root[zero_s] = 0.0
                pmt[zero_s] = 0.0
                e[zero_s] = 0.0
            if last:
                _fill_block_pads(pmt, rows, g)
                _fill_block_pads(root, rows, g)
                if loc is not None:  # their terms are added after the layer
                    pmt[loc] = 0.0
                    root[loc] = 0.0
                ksum += float(np.vdot(pmt, k)) + float(np.sum(root))
                if th is not None:
                    tsum += float(np.vdot(th, pmt))
                continue
            kp = np.multiply(pmt, k, out=kp_all[lo:hi])
            kp += root  # 2π·E[relu u relu v] = s sin θ + (π − θ) k
            tp = tp_all[lo:hi]
            if th is None:
                tp[...] = 0.0
            else:
                np.multiply(th, pmt, out=tp)
            _fill_block_pads(kp, rows, g)
            _fill_block_pads(tp, rows, g)
        flush()
        st["e_prev"], st["pmt_prev"] = e_all, pm_all
    dtype = blk["k"].dtype
    return np.asarray([ksum], dtype=dtype), np.asarray([tsum], dtype=dtype)


# ----------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------
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


def _check_pixel_scale(x, name, w0, xp):
    """Refuse pixel values whose squares (summed over channels, times W_std[0]²) would overflow.

    The recursion starts from K₀ = xᵀx'/C, so every |pixel value| must be at most
    √(largest float)/(4·√C·max(1, W_std[0])); beyond that InvalidParameterError names ``name``.
    """
    if x.shape[0] == 0:
        return
    c = x.shape[1]
    largest = float(xp.max(xp.abs(x)))
    limit = math.sqrt(float(xp.finfo(x.dtype).max)) / 4 / math.sqrt(c) / max(1.0, w0)
    if not largest <= limit:
        dtype = "float32" if x.dtype == xp.float32 else "float64"
        raise InvalidParameterError(
            f"The {name!r} parameter of {_CALLER} has a pixel value of magnitude {largest:.3g}, outside the "
            f"representable range: with {c} channel(s) and W_std[0] = {w0:.3g}, |values| must be at most "
            f"{limit:.3g} in {dtype} (the first-layer variances would overflow). Rescale the inputs."
        )


def _power_of_two_scales(x, xp):
    """(n,) powers of two 2^e with max|x_i| / 2^e in [1, 2) (1 for zero images): exact rescaling factors."""
    n = x.shape[0]
    big = xp.max(xp.abs(xp.reshape(x, (n, -1))), axis=1)
    safe = xp.where(big > 0, big, xp.ones_like(big))
    expo = xp.floor(xp.log2(safe))
    two = xp.asarray(2.0, dtype=x.dtype, device=device_of(x))
    return xp.pow(two, expo)


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
    n_jobs=None,
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
        image pairs per worker thread (a batch holds ≥ 1 pair whatever the
        bound).  Large GAP pairs on NumPy run one at a time in blocks of
        pixel rows whatever the bound (a 32×32 pair takes about 8 × 10.7 MB
        per thread, plus ~30 MB for the refinement of flagged entries).
    n_jobs : int ≥ 1, optional
        Worker threads over batches of pairs (NumPy only; default: the
        available cores).  Other namespaces run one batch at a time.

    Returns
    -------
    Kernel
        ``.nngp`` and ``.ntk``, arrays of shape (n1, n2) in the namespace and
        floating dtype of the inputs (float64 for integer inputs).

    Raises
    ------
    InvalidParameterError
        A pixel value of ``x1``/``x2`` above √(largest float)/(4·√C·max(1, W_std[0]))
        (the message names the parameter and the bound), or a kernel entry that
        overflows the dtype (never inf or NaN); or the outputs, the per-image
        maps and the workers' batches would not fit in the memory available where
        the arrays live (checked before computing; the message gives the size
        and the ways out).

    Notes
    -----
    Arora et al.'s values (c_σ = 2, no 1/C, patch sums, trace for vanilla)
    are Θ_Arora-GAP = C·ntk and Θ_Arora-V = C·P·ntk with
    ``W_std=[1, √2, …, √2]``; see the module docstring.

    Accuracy (float64): every entry within 1e-13·√(K(x,x)·K(x′,x′)) of the
    exact value of the recursion, K the same output (``nngp`` or ``ntk``),
    measured against a 50-digit mpmath evaluation on adversarial images
    (antiparallel and parallel pixel pairs of equal and unequal norms, zero
    patches and images, scales 1e-150 to 1e150, biases, depths 1–4, 1×1 and
    3×3 filters, both readouts); near-parallel and antiparallel pixel pairs
    get their angle without cancellation (module docstring).  float32: ≈1e-6
    relative.  Cost per pair: O(L q P²) (gap) or O(L q P) (flatten).

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
    if n_jobs is not None:
        n_jobs = check_int(n_jobs, "n_jobs", caller=_CALLER, low=1)
    ws = _per_layer(W_std, "W_std", depth)
    bs = _per_layer(b_std, "b_std", depth)
    if x1.shape[1] == 0 or x1.shape[2] == 0 or x1.shape[3] == 0:
        raise InvalidParameterError(
            f"The 'x1' parameter of {_CALLER} must have at least one channel and pixel; "
            f"got shape {tuple(x1.shape)}."
        )

    _check_pixel_scale(x1, "x1", ws[0], xp)
    if not symmetric:
        _check_pixel_scale(x2, "x2", ws[0], xp)
    xb_all = x1 if symmetric else x2
    n1, n2 = x1.shape[0], xb_all.shape[0]
    _, c, h, w = x1.shape
    device = device_of(x1)
    g = _Geometry(h, w, q, full)
    itemsize = 4 if x1.dtype == xp.float32 else 8
    fast = array_api_compat.is_numpy_namespace(xp)

    rows, per_batch, batches, workers, needed = _plan(n1, n2, symmetric, c, g, depth, readout, itemsize, fast,
                                                      max_memory, n_jobs, xp)
    check_memory(
        needed,
        f"The 'x1'/'x2' parameters ({n1} × {n2} images of {c}×{h}×{w}, in "
        f"{'float32' if itemsize == 4 else 'float64'})",
        _CALLER,
        xp,
        x1,
        "ways out: float32 inputs (half the memory), a smaller max_memory or n_jobs, or fewer images per call: "
        "compute the Gram in row blocks cntk(x1[i:j], x2) and write each block out (e.g. with the CLI's --out)",
    )
    if n1 == 0 or n2 == 0:
        empty = xp.zeros((n1, n2), dtype=x1.dtype, device=device)
        return Kernel(empty, empty)
    import numpy as np  # errstate: the padding holds 0/0 and ∞·0 (also inside NumPy-backed namespaces)

    with np.errstate(all="ignore"):
        nngp, ntk = _gram(x1, x2, symmetric, ws, bs, depth, q, g, readout, fix_first_last, batches, per_batch,
                          workers, fast, rows, xp)
    out = Kernel(nngp, ntk)
    for value in (out.nngp, out.ntk):
        check_finite_kernel(value, _CALLER, xp)
    return out


class _Batches:
    """The batches (i, j0, j1) of a Gram, in row order, generated on iteration; ``len`` without listing them."""

    def __init__(self, n1, n2, symmetric, per_batch):
        self.n1, self.n2, self.symmetric, self.per_batch = n1, n2, symmetric, per_batch

    def __iter__(self):
        for i in range(self.n1):
            for j0 in range(i if self.symmetric else 0, self.n2, self.per_batch):
                yield i, j0, min(self.n2, j0 + self.per_batch)

    def __len__(self):
        per, n2 = self.per_batch, self.n2
        if not self.symmetric:
            return self.n1 * (-(-n2 // per))
        return sum(-(-(n2 - i) // per) for i in range(self.n1))


def _plan(n1, n2, symmetric, c, g, depth, readout, itemsize, fast, max_memory, n_jobs, xp):
    """The work plan of a Gram: (row-block path?, pairs per batch, batches, worker threads, estimated bytes).

    The estimate (what :func:`cntk` checks against the available memory before computing): the two outputs
    (assembled by concatenation, about twice, where arrays are not writable in place) and the per-pair sums,
    the per-image maps, and each worker's arrays for one batch.
    """
    n_pairs = n1 * (n1 + 1) // 2 if symmetric else n1 * n2  # a symmetric Gram: the pairs i ≤ j
    per_pair = itemsize * (_BUFFERS * g.n + 2 * (c + depth) * g.pt) + g.n  # + the refinement's flags
    rows = fast and readout == "gap" and g.n >= _ROWS_MIN_ENTRIES
    if rows:  # one pair at a time, in blocks of pixel rows
        per_pair = _row_work_bytes(g, itemsize, _BLOCK_ENTRIES) + itemsize * 2 * (c + depth) * g.pt
        # the flagged entries waiting for their refinement (≤ _REFINE_CHUNK + a block: index, k, Θ and five
        # results each) and one refinement group's gathers (patches of C·q² values and their indices)
        pending = _REFINE_CHUNK + _RowBlocks(g, _BLOCK_ENTRIES).longest
        per_pair += pending * (8 + 7 * itemsize) + _REFINE_CHUNK * 4 * (c * g.q * g.q) * 8
        per_batch = 1
    elif fast:
        # one pair a batch when its tensors exceed ~2M entries (cache-sized passes), more for small images
        per_batch = max(1, min(max_memory // per_pair, max(1, (1 << 21) // g.n)))
    else:
        per_batch = max(1, max_memory // per_pair)
    # batches: runs of ≤ per_batch pairs (i, j0..j1) along a row (j ≥ i for a symmetric Gram), generated as
    # they are taken (a list, or one future per batch, would cost ~1.7 kB a pair: 3.4 GB for 2 000 images)
    batches = _Batches(n1, n2, symmetric, per_batch)
    workers = _n_workers(n_jobs, xp, len(batches), _CALLER)
    outputs = 2 * n1 * n2 * itemsize * (1 if fast else 3) + (0 if fast else 8 * n1 * n2 + 32 * n_pairs)
    maps = itemsize * (c + depth) * g.pt * (n1 + (0 if symmetric else n2))
    return rows, per_batch, batches, workers, outputs + maps + workers * per_pair * min(per_batch, max(1, n_pairs))


def _gram(x1, x2, symmetric, ws, bs, depth, q, g, readout, fix, batches, per_batch, workers, fast, rows, xp):
    """The (n1, n2) nngp and ntk, batch by batch (threads over batches on NumPy)."""
    n1 = x1.shape[0]
    n2 = n1 if symmetric else x2.shape[0]
    device = device_of(x1)
    h, w = g.h, g.w
    # without biases the kernel is positively homogeneous in each image: compute on x/2^e, scale back
    homogeneous = all(b == 0.0 for b in bs)
    if homogeneous:
        sc1 = _power_of_two_scales(x1, xp)
        x1n = x1 / sc1[:, None, None, None]
        sc2 = sc1 if symmetric else _power_of_two_scales(x2, xp)
        x2n = x1n if symmetric else x2 / sc2[:, None, None, None]
    else:
        x1n, x2n = x1, (x1 if symmetric else x2)
    cs = [wl * wl / (q * q) for wl in ws[:depth]]
    b2s = [bl * bl for bl in bs[:depth]]
    pad1 = _pad_images(x1n, g, xp)
    pad2 = pad1 if symmetric else _pad_images(x2n, g, xp)
    sig1 = _variance_maps(pad1, g, cs, b2s, xp)
    sig2 = sig1 if symmetric else _variance_maps(pad2, g, cs, b2s, xp)
    inside_img = _interior_flags(g, xp, device)
    zero1 = [xp.any((s == 0) & inside_img[None, :], axis=1) for s in sig1]
    zero2 = zero1 if symmetric else [xp.any((s == 0) & inside_img[None, :], axis=1) for s in sig2]
    n_inner = (h * w) ** 2 if readout == "gap" else h * w
    w2, b2 = ws[depth] ** 2, bs[depth] ** 2
    per_entry = w2 / (2 * _PI * n_inner)
    shared = {"inside": inside_img} if rows else {}  # the image's interior flags, for the refinement

    def run(batch, work):
        i, j0, j1 = batch
        m = j1 - j0
        sa = xp.full((m,), i, device=device)
        sb = xp.arange(j0, j1, device=device)
        st = {
            "c": cs,
            "b2": b2s,
            "fix": fix,
            "diagonal_readout": readout == "flatten",
            "xa": xp.take(pad1, sa, axis=0),
            "xb": xp.take(pad2, sb, axis=0),
            "sig_a": [xp.take(s, sa, axis=0) for s in sig1],
            "sig_b": [xp.take(s, sb, axis=0) for s in sig2],
            "zero_sig": [bool(za[i]) or bool(xp.any(zb[j0:j1])) for za, zb in zip(zero1, zero2)],
            **shared,
        }
        if rows:
            ksum, tsum = _pair_sums_rows(st, g, work)
        else:
            ksum, tsum = _batch_sums(st, g, m, xp, fast, work)
        nngp_v = ksum * per_entry + b2
        tail = tsum * per_entry
        ntk_v = tail if fix else nngp_v + tail
        if homogeneous:
            factor = sc1[i] * sc2[j0:j1]
            nngp_v, ntk_v = nngp_v * factor, ntk_v * factor
        return nngp_v, ntk_v

    if fast:
        np = _np()
        dtype = x1.dtype
        nngp = np.empty((n1, n2), dtype=dtype)
        ntk = np.empty((n1, n2), dtype=dtype)

        def store(batch, values):
            i, j0, j1 = batch
            for out, v in zip((nngp, ntk), values):
                out[i, j0:j1] = v
                if symmetric:
                    out[j0:j1, i] = v  # exactly symmetric: one value for (i, j) and (j, i)

        def new_work():
            if rows:
                return _row_work(g, dtype, _BLOCK_ENTRIES)
            return {name: np.empty(per_batch * g.n, dtype=dtype)
                    for name in ("s", "k", "th", "f", "tmp", "e0", "e1", "p0", "p1")}

        with single_threaded_blas(xp):
            if workers == 1:
                work = new_work()
                for batch in batches:
                    store(batch, run(batch, work))
            else:
                # each worker takes the next batch from one shared iterator (a bounded number in flight)
                import threading
                from concurrent.futures import ThreadPoolExecutor

                taken = iter(batches)
                lock = threading.Lock()
                failed = threading.Event()

                def worker():
                    work = new_work()
                    with np.errstate(all="ignore"):  # thread-local
                        while not failed.is_set():
                            with lock:
                                batch = next(taken, None)
                            if batch is None:
                                return
                            try:
                                store(batch, run(batch, work))
                            except BaseException:
                                failed.set()
                                raise

                with ThreadPoolExecutor(max_workers=workers) as pool:
                    for future in [pool.submit(worker) for _ in range(workers)]:
                        future.result()
        return nngp, ntk
    # other namespaces: one batch at a time, assembled by a gather (no item assignment needed)
    parts = [run(batch, None) for batch in batches]
    nngp_v = xp.concat([p_[0] for p_ in parts])
    ntk_v = xp.concat([p_[1] for p_ in parts])
    if symmetric:
        la = xp.arange(n1, device=device)
        lo = xp.minimum(la[:, None], la[None, :])
        hi = xp.maximum(la[:, None], la[None, :])
        pos = xp.reshape(lo * n1 - (lo * (lo - 1)) // 2 + (hi - lo), (-1,))
    else:
        pos = xp.arange(n1 * n2, device=device)
    return xp.reshape(xp.take(nngp_v, pos), (n1, n2)), xp.reshape(xp.take(ntk_v, pos), (n1, n2))
