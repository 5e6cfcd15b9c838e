"""The CNTK recursion on one image pair in cache-sized blocks of pixel rows (NumPy, GAP readout, large images).

The same recursion as :mod:`._cntk_batched` (seed 004 eqs. (6)–(8) per pixel pair, with Section 4's CNTK-GAP
readout: the sum over every pixel pair), entry for entry; only the order of the patch sum's additions and
the blocking of the final sums differ.

Speed (NumPy).  Larger images (a pair tensor of ≥ 90 000 entries: 16×16 and up with 3×3 filters; 32×32:
1.3 M) with the GAP readout go one pair at a time, and each layer in blocks of pixel rows of ~2¹⁶ entries
(:class:`_RowBlocks`): the patch sum of a block (row shifts into a scratch widened by r·s₁, then column
shifts), the ReLU moments, the flags and the outputs are all computed while the block's arrays stay in the
core's cache, so only the layer's inputs and outputs pass through memory (35 against 55 ms of CPU per 32×32
pair, depth 3, one thread); the flagged entries are refined (:mod:`._cntk_refine`) in groups of
``st["refine_chunk"]`` after their blocks, with the same steps.
"""
from __future__ import annotations

from ._cntk_layout import _np
from ._cntk_refine import _PI, _TAU, _refine


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
    chunk = st["refine_chunk"]

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
            parts = [_refine(idx[j : j + chunk], layer, st, g, np)
                     for j in range(0, idx.shape[0], chunk)]
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
            if sum(p_[0].shape[0] for p_ in pending) >= chunk:
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
