"""The ReLU angle of the CNTK's near-parallel and antiparallel pixel pairs, without cancellation.

The ReLU moments of seed 004's recursion, eq. (6) (Σ = c_σ E[σ(u)σ(v)]) and eq. (7) (Σ̇ = c_σ E[σ′(u)σ′(v)]),
per pixel pair in closed form (see :mod:`ntkref.kernels._cntk`), need the angle θ between the two
pre-activations.  Both routes (:mod:`._cntk_batched`, :mod:`._cntk_rows`) flag the entries below and
refine them here, in groups.

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

The refinement runs only where flagged entries exist (a min/max over the ratio e/f); it gathers ~q² values
per flagged entry, so where nearly every pixel pair is (near-)parallel (e.g. two constant 32×32 images) a
GAP pair takes ~25× longer than a generic one (measured 1.26 s against 0.051 s of CPU, one thread, on the
shared 2-core machine).
"""
from __future__ import annotations

import math

from .._lib.backend import device_of

_PI = math.pi
_TAU = 1.0 / 64  # e/f below _TAU (layer 1: or above 1/_TAU) → e and f recomputed without cancellation
_SERIES_THRESHOLD = 0.1
# sin θ − θ cos θ = Σ_{n≥1} (−1)^{n+1} 2n θ^{2n+1}/(2n+1)!; 4 terms: relative truncation error < 3e-17 for θ < 0.1
_SERIES = [(-1) ** (n + 1) * 2 * n / math.factorial(2 * n + 1) for n in range(1, 5)]


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
