"""High-precision (mpmath) reference for FC NNGP/NTK recursions — an independent route.

Straight from the definitions (neural-tangents' convention, docs/conventions.md, 'FC kernels') with arccos/arcsin at
50 significant digits, starting from the exact binary values of the float inputs.
"""
import mpmath as mp
import numpy as np

DPS = 50


def _dot(a, b):
    return mp.fsum(mp.mpf(float(u)) * mp.mpf(float(v)) for u, v in zip(a, b))


def fc_pair(x, y, depth, W, b, activation="relu"):
    """(Σ(x,y), Θ(x,y), Σ(x,x), Θ(x,x), Σ(y,y), Θ(y,y)) as mpf, for 1-D float arrays x, y."""
    with mp.workdps(DPS):
        d = len(x)
        L = depth
        W = [mp.mpf(float(w)) for w in (W if np.ndim(W) else [W] * (L + 1))]
        b = [mp.mpf(float(v)) for v in (b if np.ndim(b) else [b] * (L + 1))]
        q1 = W[0] ** 2 * _dot(x, x) / d + b[0] ** 2
        q2 = W[0] ** 2 * _dot(y, y) / d + b[0] ** 2
        k = W[0] ** 2 * _dot(x, y) / d + b[0] ** 2
        t1, t2, tk = q1, q2, k
        for h in range(1, L + 1):
            if activation == "relu":
                def pair(qa, qb, kab):
                    if qa == 0 or qb == 0:
                        return mp.mpf(0), mp.mpf(0)  # σ(0)=0, and σ'(0)=0 by convention
                    rho = kab / mp.sqrt(qa * qb)
                    rho = max(min(rho, mp.mpf(1)), mp.mpf(-1))
                    th = mp.acos(rho)
                    e_ff = mp.sqrt(qa * qb) * (mp.sin(th) + (mp.pi - th) * mp.cos(th)) / (2 * mp.pi)
                    return e_ff, (mp.pi - th) / (2 * mp.pi)
            else:
                def pair(qa, qb, kab):
                    den = mp.sqrt((1 + 2 * qa) * (1 + 2 * qb))
                    e_ff = 2 / mp.pi * mp.asin(2 * kab / den)
                    e_dd = 4 / mp.pi / mp.sqrt((1 + 2 * qa) * (1 + 2 * qb) - 4 * kab ** 2)
                    return e_ff, e_dd
            f1, d1 = pair(q1, q1, q1)
            f2, d2 = pair(q2, q2, q2)
            fk, dk = pair(q1, q2, k)
            q1, q2, k = W[h] ** 2 * f1 + b[h] ** 2, W[h] ** 2 * f2 + b[h] ** 2, W[h] ** 2 * fk + b[h] ** 2
            t1 = q1 + W[h] ** 2 * d1 * t1
            t2 = q2 + W[h] ** 2 * d2 * t2
            tk = k + W[h] ** 2 * dk * tk
        return k, tk, q1, t1, q2, t2
