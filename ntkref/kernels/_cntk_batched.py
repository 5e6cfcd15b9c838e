"""The CNTK recursion on a batch of image pairs (every namespace; NumPy in place).

Seed 004's recursion per pixel pair, eq. (6) (Σ_ℓ and K_ℓ = E[relu u relu v]), eq. (7) (κ̇_ℓ) and eq. (8)
(Θ_ℓ = Σ_ℓ + W_ℓ² 𝒜(Θ_{ℓ−1} ⊙ κ̇_{ℓ−1})), layer by layer on the pixel-pair tensors of m image pairs at
once, then the per-pair sums that Section 4's readouts (CNTK-GAP: every pixel pair; CNTK-V: the diagonal
p = p′) and the "first and last layer fixed" variant (Sec. 4.2: Θ_1 = 0) need; the recursion is written out
in :mod:`ntkref.kernels._cntk`.

Speed (NumPy).  Small images go in batches of pairs, every step over the batch's whole tensors (in place,
on the flat padded layout of :mod:`._cntk_layout`), into per-thread work buffers; other namespaces take
standard operations only (new arrays, selections instead of slice assignments).  Flagged entries
(near-parallel pixel pairs, antiparallel ones in layer 1) get their e = s − k and f = s + k from
:mod:`._cntk_refine`, in groups of ``st["refine_chunk"]``.
"""
from __future__ import annotations

from .._lib.backend import device_of
from .._lib.compat import scatter_flat

from ._cntk_layout import _interior_flags, _np, _pair_inside, _patch_sum, _zero_pads
from ._cntk_refine import _PI, _TAU, _refine


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
        chunk = st["refine_chunk"]
        for start in range(0, idx.shape[0], chunk):
            sel = idx[start : min(idx.shape[0], start + chunk)]
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
