"""The flat zero-padded layout of the CNTK's pixel-pair tensors, the patch sums, and the per-image maps.

The CNTK recursion of seed 004 (eqs. (6)–(8) per pixel pair, the "dynamic programming" over pixel pairs of
its Section 4; see :mod:`ntkref.kernels._cntk`) applies before every layer the q×q patch average along the
spatial diagonals, with zero padding:
𝒜(K)[i, j, i′, j′] = (1/q²) Σ_{a,b=-r..r} K[i+a, j+b, i′+a, j′+b], r = (q−1)/2.

The pixel-pair tensors of a pair are stored on the zero-padded grid, flattened (:class:`_Geometry`), so every
joint shift of the patch sum is one contiguous slice addition (:func:`_patch_sum`: in place on NumPy,
standard operations elsewhere); ``full=False`` keeps the diagonal p = p′ alone (the vanilla fast path of the
flatten readout).  Per image: the images on their padded grids divided by √C (K₀ = xᵀx′/C is their
product) and the variance maps σ_ℓ = √Σ_ℓ(x, x)[p, p] (eq. (6) on the diagonal).
"""
from __future__ import annotations

import math

from .._lib.backend import device_of


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


def _pair_inside(g, xp, dev):
    ins = _interior_flags(g, xp, dev)
    if g.full:
        return xp.reshape(ins[:, None] & ins[None, :], (-1,))
    return ins


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
