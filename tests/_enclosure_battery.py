"""Adversarial row pairs and the float64-vs-enclosure check of the FC kernels (shared by the enclosure tests and
the proven-error-bound tests).

``adversarial_pairs(rng, n, d)`` draws n pairs (x, x′) mixing: Gaussian pairs; near-parallel pairs at angles
10^-12…10^-1 (1e-9 included); x′ = x, x′ = −x and x′ = −c·x; near-antiparallel pairs; rows scaled by 10^e with
e ∈ [−300, ``max_exp``] (each row of a pair independently); subnormal rows; zero rows.
``check_fc_pairs(x1, x2, ...)`` returns the scaled errors |K_float − mid|/√(K(x,x)K(x′,x′)) of
``kernels.fc`` against the enclosures' midpoints (``enclosures.fc_pairs``; the diagonal from
``enclosures.fc_diagonal``), and the enclosures' own scaled radii, for nngp and ntk.
"""
import flint
import numpy as np

from ntkref import enclosures, kernels
from ntkref.enclosures._ball import to_float_view


#: the absolute underflow allowance of the comparison: 64 units of the smallest subnormal (3.2e-322)
UNDERFLOW = 64 * 2.0**-1074


def adversarial_pairs(rng, n, d, *, max_exp=150):
    """n adversarial pairs of rows of d features (module docstring), rows of subnormal norm included (kernels.fc
    lifts them by an exact power of two where the kernel is homogeneous: see
    test_enclosures.test_float64_fc_rows_of_subnormal_norm)."""
    x1 = rng.standard_normal((n, d))
    x2 = rng.standard_normal((n, d))
    kind = rng.integers(0, 9, size=n)
    for i in range(n):
        k = kind[i]
        if k == 1:  # near-parallel at angle 10^-12 … 10^-1
            v = rng.standard_normal(d)
            v -= (v @ x1[i]) / (x1[i] @ x1[i]) * x1[i]
            nv = np.linalg.norm(v)
            angle = 10.0 ** rng.uniform(-12, -1) if rng.random() < 0.8 else 1e-9
            x2[i] = x1[i] + (angle * np.linalg.norm(x1[i]) / nv if nv > 0 else 0.0) * v
        elif k == 2:
            x2[i] = x1[i]
        elif k == 3:
            x2[i] = -x1[i] * (1.0 if rng.random() < 0.5 else rng.uniform(0.1, 10))
        elif k == 4:  # near-antiparallel
            x2[i] = -x1[i] + 10.0 ** rng.uniform(-12, -3) * rng.standard_normal(d)
        elif k == 5:  # subnormal entries
            x1[i] = rng.integers(-3, 4, size=d) * 5e-324
        elif k == 6:
            (x1 if rng.random() < 0.5 else x2)[i] = 0.0
    # independent scales per row, 1e-300 … 10^max_exp
    for x in (x1, x2):
        scaled = rng.random(n) < 0.4
        x[scaled] *= 10.0 ** rng.uniform(-300, max_exp, size=int(scaled.sum()))[:, None]
    return x1, x2


def float_pairs(x1, x2, block=64, **kw):
    """kernels.fc on row pairs: the diagonals of blocks of the Gram (float64)."""
    out = {"nngp": [], "ntk": []}
    for s in range(0, x1.shape[0], block):
        k = kernels.fc(x1[s:s + block], x2[s:s + block], **kw)
        out["nngp"].append(np.diag(k.nngp))
        out["ntk"].append(np.diag(k.ntk))
    return {g: np.concatenate(v) if v else np.zeros(0) for g, v in out.items()}


def check_fc_pairs(x1, x2, *, depth, activation="relu", W_std=1.0, b_std=0.0, prec=80):
    """{"nngp"/"ntk": (scaled errors of kernels.fc against the midpoints, scaled ball radii, scale)}.

    Where the scale √(K(x,x)K(x′,x′)) is 0 (zero rows without bias) the error is 0 if the float value is 0
    (exactly as the enclosure says), else inf.
    """
    kw = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    enc = enclosures.fc_pairs(x1, x2, prec=prec, **kw)
    d1 = enclosures.fc_diagonal(x1, prec=prec, **kw)
    d2 = enclosures.fc_diagonal(x2, prec=prec, **kw)
    flt = float_pairs(x1, x2, **kw)
    out = {}
    for g in ("nngp", "ntk"):
        e = getattr(enc, g)
        # √K(x,x)·√K(x′,x′) in arb (K(x,x) of a row of norm 1e-300 underflows in float64, the scale does not)
        with flint.ctx.workprec(prec):
            scale = np.array([to_float_view(abs(a).sqrt() * abs(b).sqrt())[0]
                              for a, b in zip(getattr(d1, g).balls, getattr(d2, g).balls)])
        # gradual underflow: a float64 result near or below the normal range is rounded to multiples of 2^-1074,
        # and the few operations that produce it each add half a unit; differences below UNDERFLOW are not counted
        diff = np.maximum(np.abs(flt[g] - e.mid) - UNDERFLOW, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))
            brad = np.maximum(e.ball_rad - UNDERFLOW, 0.0)
            rad = np.where(scale > 0, brad / np.where(scale > 0, scale, 1.0), np.where(brad == 0, 0.0, np.inf))
        out[g] = (err, rad, scale)
    return out
