r"""Ball-arithmetic enclosure of the CNTK of :func:`ntkref.kernels.cntk` (seed 004, Arora et al.).

The recursion of :mod:`ntkref.kernels._cntk` (seed 004 eqs. (6)–(8) per pixel pair, the "dynamic programming"
of its Sec. 4), written out directly over pixel pairs p = (i, j), p′ = (i′, j′) of one image pair (x, x′):

    K₀[p, p′] = (1/C) Σ_c x[c, p] x′[c, p′]
    Σ_ℓ = W_ℓ² 𝒜(K_{ℓ−1}) + b_ℓ²,   Θ_ℓ = Σ_ℓ + W_ℓ² 𝒜(Θ̇_{ℓ−1})  (Θ̇₀ = 0; Θ₁ = 0 with fix_first_last)
    K_ℓ = E[relu(u)relu(v)],  Θ̇_ℓ = Θ_ℓ ⊙ (π − θ)/(2π),  (u, v) ~ N(0, [[q_p, Σ_ℓ], [Σ_ℓ, q′_{p′}]])
    nngp = W²R(K_L) + b²,  ntk = nngp + W²R(Θ̇_L)  (ntk = W²R(Θ̇_L) with fix_first_last)

with 𝒜 the q×q patch average along the spatial diagonals (zero padding), q_p = Σ_ℓ(x, x)[p, p] from the
per-image diagonal recursion q_ℓ = W_ℓ²𝒜_diag(q_{ℓ−1}/2) + b_ℓ² (q₀ = (1/C)Σ_c x[c, p]²), R the mean over all
pixel pairs (GAP) or over p = p′ (flatten; only those are computed, exactly as ``kernels.cntk``'s fast path).
A pixel pair with q_p q′_{p′} = 0 contributes 0.  The ReLU moments use the forms of :mod:`._fc`
(J(θ) = g(π − θ), θ by atan2); a pixel of an image with itself has cos θ = 1 exactly.

Rigour and tightness: every entry's ball contains the exact recursion at the float inputs (arb is rigorous;
cosines are intersected with [−1, 1]).  Beyond the first layer, cos θ of a near-parallel pixel pair of two
different images is a quotient of balls, so 1 − cos θ carries an absolute 2^-prec and √(1 − cos θ) about
2^-prec/2: such entries have radii up to ~2^-prec/2 of the kernel's scale (1e-19 at prec = 128), not 2^-prec —
still six orders below float64's 1e-13.  Cost: pure Python, O(P²q²L) ball operations per image pair for GAP
(P = H·W pixels), O(Pq²L) for flatten — about 0.01 s per pair at 4×4, depth 3 (GAP), more as P²: for small images only.
"""
from __future__ import annotations

import numpy as np

from .._lib.validation import InvalidParameterError, check_int, check_option
from ..kernels import Kernel
from ..kernels._cntk import _per_layer
from ._ball import Enclosure, check_prec, clamp_unit, flint, g_of, host_array, nonneg

__all__ = ["cntk"]


def _images(x, prec):
    """(C, H, W) float image → nested lists of exact balls [c][i][j] and q₀[p] = (1/C) Σ_c x[c, p]²."""
    arb = flint().arb
    c = x.shape[0]
    vals = [[[arb(float(v)) for v in row] for row in ch] for ch in x.tolist()]
    q0 = {(i, j): sum((vals[k][i][j] * vals[k][i][j] for k in range(c)), arb(0)) / c
          for i in range(x.shape[1]) for j in range(x.shape[2])}
    return vals, q0


class _Net:
    def __init__(self, h, w, q, depth, ws, bs, readout, fix, prec):
        arb = flint().arb
        self.h, self.w, self.depth, self.readout, self.fix, self.prec = h, w, depth, readout, fix, prec
        r = (q - 1) // 2
        reach = max(h, w) - 1  # offsets beyond the image only read zero padding
        self.offsets = [(a, b) for a in range(-min(r, reach), min(r, reach) + 1)
                        for b in range(-min(r, reach), min(r, reach) + 1)]
        self.cw = [arb(v) * arb(v) / (q * q) for v in ws[:depth]]
        self.b2 = [arb(v) * arb(v) for v in bs[:depth]]
        self.w_out, self.b_out = arb(ws[depth]) ** 2, arb(bs[depth]) ** 2
        self.pi = arb.pi()
        self.pixels = [(i, j) for i in range(h) for j in range(w)]
        if readout == "gap":
            self.keys = [(p, pp) for p in self.pixels for pp in self.pixels]
        else:
            self.keys = [(p, p) for p in self.pixels]

    def inside(self, p):
        return 0 <= p[0] < self.h and 0 <= p[1] < self.w

    def conv_pair(self, t, p, pp):
        """Σ_δ t[p + δ, p′ + δ] over the offsets keeping both pixels inside (zero padding)."""
        arb = flint().arb
        acc = arb(0)
        for a, b in self.offsets:
            u, v = (p[0] + a, p[1] + b), (pp[0] + a, pp[1] + b)
            if self.inside(u) and self.inside(v):
                acc += t[(u, v)]
        return acc

    def variances(self, q0):
        """q_ℓ[p] for ℓ = 1..L (the per-image diagonal recursion)."""
        out, post = [], q0
        for ell in range(self.depth):
            q = {p: self.cw[ell] * self.conv_pair({(u, u): post[u] for u in self.pixels}, p, p) + self.b2[ell]
                 for p in self.pixels}
            out.append(q)
            post = {p: v / 2 for p, v in q.items()}  # E[relu(u)²] = q/2
        return out

    def relu(self, k, qa, qb, same_pixel):
        arb = flint().arb
        s2 = qa * qb
        if s2.is_zero():
            return arb(0), arb(0)
        s = s2.sqrt()
        if same_pixel:  # a pixel with itself: cos θ = 1 exactly, J(0) = π
            return s / 2, arb(1) / 2
        rho = clamp_unit(k / s)
        omr, opr = nonneg(1 - rho), nonneg(1 + rho)
        r_omr, r_opr = omr.sqrt(), opr.sqrt()
        phi = 2 * arb.atan2(r_opr, r_omr)  # π − θ
        J = g_of(phi, r_omr * r_opr, -rho, self.prec)
        return s * J / (2 * self.pi), phi / (2 * self.pi)

    def pair(self, xa, qa0, qas, xb, qb0, qbs, same):
        arb = flint().arb
        c = len(xa)
        K = {}
        for p, pp in self.keys_all_layers():
            K[(p, pp)] = sum((xa[k][p[0]][p[1]] * xb[k][pp[0]][pp[1]] for k in range(c)), arb(0)) / c
        Td = None
        for ell in range(self.depth):
            K_new, Td_new = {}, {}
            for p, pp in self.keys_all_layers():
                sigma = self.cw[ell] * self.conv_pair(K, p, pp) + self.b2[ell]
                if ell == 0:
                    theta = arb(0) if self.fix else sigma
                else:
                    theta = sigma + self.cw[ell] * self.conv_pair(Td, p, pp)
                k_post, kd = self.relu(sigma, qas[ell][p], qbs[ell][pp], same and p == pp)
                K_new[(p, pp)] = k_post
                Td_new[(p, pp)] = theta * kd
            K, Td = K_new, Td_new
        n = len(self.keys)
        nngp = self.w_out * sum((K[key] for key in self.keys), arb(0)) / n + self.b_out
        tail = self.w_out * sum((Td[key] for key in self.keys), arb(0)) / n
        return nngp, (tail if self.fix else nngp + tail)

    def keys_all_layers(self):
        # the offset-0 entries only feed offset-0 entries: the flatten readout needs only those
        return self.keys


def cntk(x1, x2=None, *, depth, readout="gap", filter_size=3, W_std=1.0, b_std=0.0, fix_first_last=False,
         prec=128):
    """Rigorous enclosures of :func:`ntkref.kernels.cntk`'s NNGP and NTK (ReLU CNN, SAME convolutions).

    Same parameters and conventions as :func:`ntkref.kernels.cntk` (``depth`` conv + ReLU layers, ``readout``
    "gap" or "flatten", odd ``filter_size``, per-layer ``W_std``/``b_std`` with the readout last,
    ``fix_first_last``), evaluated in arb balls at ``prec`` bits from the exact float pixels.  Pure Python:
    meant for small images (about 0.01 s per image pair at 4×4, depth 3, GAP; the cost grows as (H·W)²).

    Returns
    -------
    ntkref.kernels.Kernel
        ``.nngp`` and ``.ntk`` as :class:`Enclosure` of shape (n1, n2), NumPy on the host (inputs of any
        namespace are copied to the host explicitly).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.enclosures import cntk
    >>> x = np.random.default_rng(0).standard_normal((2, 1, 3, 3))
    >>> e = cntk(x, depth=2)
    >>> k = kernels.cntk(x, depth=2)
    >>> scale = np.sqrt(np.outer(np.diag(e.ntk.mid), np.diag(e.ntk.mid)))
    >>> bool((np.abs(k.ntk - e.ntk.mid) <= 1e-13 * scale).all()), bool((e.ntk.ball_rad <= 1e-17 * scale).all())
    (True, True)
    """
    fl = flint()
    x1 = host_array(x1, "x1", "cntk", 4)
    if x2 is not None:
        x2 = host_array(x2, "x2", "cntk", 4)
        if tuple(x2.shape[1:]) != tuple(x1.shape[1:]):
            raise InvalidParameterError(
                f"The 'x2' parameter of cntk must have the same (channels, height, width) as 'x1' "
                f"{tuple(x1.shape[1:])}; got {tuple(x2.shape[1:])}."
            )
    depth = check_int(depth, "depth", caller="cntk", low=1)
    check_option(readout, "readout", ("gap", "flatten"), caller="cntk")
    q = check_int(filter_size, "filter_size", caller="cntk", low=1)
    if q % 2 == 0:
        raise InvalidParameterError(f"The 'filter_size' parameter of cntk must be odd; got {q}.")
    if not isinstance(fix_first_last, bool):
        raise InvalidParameterError(f"The 'fix_first_last' parameter of cntk must be a bool; got {fix_first_last!r}.")
    ws = _per_layer(W_std, "W_std", depth)
    bs = _per_layer(b_std, "b_std", depth)
    if x1.shape[1] == 0 or x1.shape[2] == 0 or x1.shape[3] == 0:
        raise InvalidParameterError(
            f"The 'x1' parameter of cntk must have at least one channel and pixel; got shape {tuple(x1.shape)}."
        )
    prec = check_prec(prec, "cntk")
    symmetric = x2 is None
    with fl.ctx.workprec(prec):
        net = _Net(x1.shape[2], x1.shape[3], q, depth, ws, bs, readout, fix_first_last, prec)
        im1 = []
        for x in x1:
            vals, q0 = _images(x, prec)
            im1.append((vals, q0, net.variances(q0)))
        im2 = im1 if symmetric else []
        if not symmetric:
            for x in x2:
                vals, q0 = _images(x, prec)
                im2.append((vals, q0, net.variances(q0)))
        n1, n2 = len(im1), len(im2)
        nngp = np.empty((n1, n2), dtype=object)
        ntk = np.empty((n1, n2), dtype=object)
        for i in range(n1):
            for j in range(i if symmetric else 0, n2):
                a, b = im1[i], im2[j]
                v = net.pair(a[0], a[1], a[2], b[0], b[1], b[2], same=symmetric and i == j)
                nngp[i, j], ntk[i, j] = v
                if symmetric:
                    nngp[j, i], ntk[j, i] = v
        return Kernel(Enclosure(nngp, prec), Enclosure(ntk, prec))
