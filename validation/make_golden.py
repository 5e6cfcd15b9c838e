r"""Regenerate ntkref's golden vectors (``ntkref/golden/``) from an independent mpmath evaluation.

Nothing here imports ntkref: the inputs are built from decimal literals and
650-digit rotations, and every kernel value is computed straight from its
defining formula with mpmath at 650 working digits, then rounded once to the
nearest float64.  Implementations in any language can be checked against the
files; ``tests/test_golden.py`` checks ntkref against them (to 1e-13 of the
scale √(K(x,x)K(x′,x′))) and checks that this script reproduces them.

Families and conventions (docs/conventions.md, 'FC kernels'):

- ``fc`` — neural-tangents' convention, ``depth`` = L hidden layers, per-layer
  W_std = (W₀…W_L), b_std = (b₀…b_L), readout last:
  Σ⁽⁰⁾ = W₀²·x·x′/d + b₀², Θ⁽⁰⁾ = Σ⁽⁰⁾;
  Σ⁽ʰ⁾ = W_h²·E[σ(u)σ(v)] + b_h², Θ⁽ʰ⁾ = Σ⁽ʰ⁾ + W_h²·E[σ′(u)σ′(v)]·Θ⁽ʰ⁻¹⁾,
  (u, v) ~ N(0, Σ⁽ʰ⁻¹⁾ restricted to {x, x′}); nngp = Σ⁽ᴸ⁾, ntk = Θ⁽ᴸ⁾.
  ReLU: E[σσ] = √(q₁q₂)(sin θ + (π − θ)cos θ)/(2π), E[σ′σ′] = (π − θ)/(2π),
  cos θ = k/√(q₁q₂) (a zero variance gives 0 for both: σ(0) = σ′(0) = 0).
  erf: E[σσ] = (2/π) asin(2k/√((1+2q₁)(1+2q₂))), E[σ′σ′] = (4/π)/√((1+2q₁)(1+2q₂) − 4k²).
- ``eq63`` — seed 000 eq. (63): Θ = ‖x‖‖x′‖h(u)/(2πd), h(u) = 2u(π − arccos u) + √(1 − u²), Θ(x, 0) = 0.
- ``arora`` — seed 004 eqs. (6)–(8), ReLU with c_σ = 2, Σ⁽⁰⁾ = xᵀx′ (no 1/d):
  Σ⁽ʰ⁾ = 2E[σσ], Σ̇⁽ʰ⁾ = 2E[σ′σ′], Θ⁽ᴸ⁾ = Σ_{h=1}^{L+1} Σ⁽ʰ⁻¹⁾ Π_{h′=h}^{L+1} Σ̇⁽ʰ′⁾ with Σ̇⁽ᴸ⁺¹⁾ = 1.
- ``wei`` — seed 002 App. B.1: K = (r_w²/2)K₁ + (r_u²/2)(K₁ + K₂), K₁ = xᵀx′(1 − θ/π),
  K₂ = ‖x‖‖x′‖ sin θ/π.
- ``cntk`` — seed 004's CNTK with neural-tangents' normalisation (``ntkref.kernels.cntk``):
  per pixel pair K₀ = (1/C)Σ_c x_c x′_c, Σ = W²𝒜(K) + b² (𝒜 the 3×3 patch average along
  spatial diagonals, zero padding), Θ = Σ + W²𝒜(Θ̇), K = E[relu relu], Θ̇ = Θ·P[u>0, v>0],
  readout mean over all pixel pairs (gap) or over p = p′ (flatten).  Computed at 60 digits
  (moderate image entries: no cancellation beyond that).

    python -m validation.make_golden            # rewrite ntkref/golden/{manifest.json,golden.npz}
    python -m validation.make_golden --check    # recompute and compare with the stored files
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile

import mpmath as mp
import numpy as np

VERSION = 1
DPS = 650  # working digits: products of inputs of norm 1e±100 stay exact, so no cancellation survives
HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_DIR = os.path.join(os.path.dirname(HERE), "ntkref", "golden")


# ---------------------------------------------------------------------------------------------
# inputs (deterministic on every platform: decimal literals and 650-digit rotations rounded once)
# ---------------------------------------------------------------------------------------------
def _rotated(base, other, angle, factor):
    """factor·‖base‖·(cos a·base/‖base‖ + sin a·v), v ⟂ base from ``other``, at DPS digits.

    ``angle`` is a decimal string, or "pi-<decimal>" for π minus it.
    """
    with mp.workdps(DPS):
        b = [mp.mpf(v) for v in base]
        o = [mp.mpf(v) for v in other]
        nb = mp.sqrt(mp.fsum(v * v for v in b))
        bu = [v / nb for v in b]
        proj = mp.fsum(p * q for p, q in zip(o, bu))
        w = [p - proj * q for p, q in zip(o, bu)]
        nw = mp.sqrt(mp.fsum(v * v for v in w))
        wu = [v / nw for v in w]
        a = mp.pi - mp.mpf(angle[3:]) if angle.startswith("pi-") else mp.mpf(angle)
        return [float(factor * nb * (mp.cos(a) * p + mp.sin(a) * q)) for p, q in zip(bu, wu)]


def input_sets():
    """The named input sets: ``hard`` (7 × 4) and ``moderate`` (5 × 3)."""
    r0 = [0.6, -1.2, 0.3, 2.0]
    other = [1.0, 0.5, 0.0, 0.0]
    hard = [
        r0,
        _rotated(r0, other, "1e-9", 3),  # near-parallel to r0: angle 1e-9
        _rotated(r0, other, "pi-1e-7", mp.mpf("0.5")),  # antiparallel: angle π − 1e-7
        [0.0, 0.0, 0.0, 0.0],  # zero row: Θ(x, 0) = 0 without biases
        [-0.7, 0.1, 1.5, -0.4],  # generic
        [1.1e-100, 2e-101, -3e-101, 9e-101],  # tiny norm
        [3e99, 8e99, -1.4e100, 5e99],  # huge norm
    ]
    moderate = [
        [0.5, -1.0, 2.0],
        [1.5, 0.25, -0.75],
        [-0.5, 1.0, -2.0],  # exactly antiparallel to the first row
        [0.5, -1.0, 2.0000001],
        [0.0, 3.0, 0.1],
    ]
    images = np.zeros((3, 2, 3, 3))
    for c in range(2):
        for i in range(3):
            for j in range(3):
                images[0, c, i, j] = ((7 * i + 3 * j + 5 * c) % 11 - 5) / 4  # exact binary fractions
                images[1, c, i, j] = ((2 * i + 5 * j + 3 * c + 1) % 7 - 3) / 2
    images[2, 0, 0, 0] = 1.5  # one nonzero pixel: the far corner's patch is all zero (s = 0 there)
    images[2, 1, 0, 1] = -0.5
    return {"hard": np.array(hard, dtype=np.float64), "moderate": np.array(moderate, dtype=np.float64),
            "images": images}


# ---------------------------------------------------------------------------------------------
# high-precision kernels (DPS working digits), straight from the definitions
# ---------------------------------------------------------------------------------------------
def _dot(a, b):
    return mp.fsum(mp.mpf(float(u)) * mp.mpf(float(v)) for u, v in zip(a, b))


def _relu_dual(qa, qb, k):
    if qa == 0 or qb == 0:
        return mp.mpf(0), mp.mpf(0)
    rho = k / mp.sqrt(qa * qb)
    rho = min(max(rho, mp.mpf(-1)), mp.mpf(1))
    th = mp.acos(rho)
    return mp.sqrt(qa * qb) * (mp.sin(th) + (mp.pi - th) * mp.cos(th)) / (2 * mp.pi), (mp.pi - th) / (2 * mp.pi)


def _erf_dual(qa, qb, k):
    den = (1 + 2 * qa) * (1 + 2 * qb)
    return 2 / mp.pi * mp.asin(2 * k / mp.sqrt(den)), 4 / mp.pi / mp.sqrt(den - 4 * k * k)


def _per_layer(v, n):
    return [mp.mpf(float(t)) for t in (v if isinstance(v, (list, tuple)) else [v] * n)]


def fc_pair(x, y, depth, activation, W_std, b_std):
    """(nngp, ntk) of one pair at DPS working digits (neural-tangents' convention)."""
    with mp.workdps(DPS):
        d = len(x)
        W = _per_layer(W_std, depth + 1)
        b = _per_layer(b_std, depth + 1)
        dual = _relu_dual if activation == "relu" else _erf_dual
        q1 = W[0] ** 2 * _dot(x, x) / d + b[0] ** 2
        q2 = W[0] ** 2 * _dot(y, y) / d + b[0] ** 2
        k = W[0] ** 2 * _dot(x, y) / d + b[0] ** 2
        t = k
        for h in range(1, depth + 1):
            f1, _ = dual(q1, q1, q1)
            f2, _ = dual(q2, q2, q2)
            fk, dk = dual(q1, q2, k)
            q1, q2 = W[h] ** 2 * f1 + b[h] ** 2, W[h] ** 2 * f2 + b[h] ** 2
            k = W[h] ** 2 * fk + b[h] ** 2
            t = k + W[h] ** 2 * dk * t
        return k, t


def eq63_pair(x, y):
    with mp.workdps(DPS):
        nx, ny = mp.sqrt(_dot(x, x)), mp.sqrt(_dot(y, y))
        if nx == 0 or ny == 0:
            return mp.mpf(0)
        u = min(max(_dot(x, y) / (nx * ny), mp.mpf(-1)), mp.mpf(1))
        h = 2 * u * (mp.pi - mp.acos(u)) + mp.sqrt(1 - u * u)
        return nx * ny * h / (2 * mp.pi * len(x))


def arora_pair(x, y, depth):
    with mp.workdps(DPS):
        q1, q2, k = _dot(x, x), _dot(y, y), _dot(x, y)
        sigmas, dots = [k], []
        for _ in range(depth):
            f1, _ = _relu_dual(q1, q1, q1)
            f2, _ = _relu_dual(q2, q2, q2)
            fk, dk = _relu_dual(q1, q2, k)
            q1, q2, k = 2 * f1, 2 * f2, 2 * fk
            sigmas.append(k)
            dots.append(2 * dk)
        dots.append(mp.mpf(1))  # Σ̇⁽ᴸ⁺¹⁾ = 1
        total = mp.mpf(0)
        for h in range(1, depth + 2):
            term = sigmas[h - 1]
            for hp in range(h, depth + 2):
                term *= dots[hp - 1]
            total += term
        return total


def wei_pair(x, y, r_w, r_u):
    with mp.workdps(DPS):
        nx, ny = mp.sqrt(_dot(x, x)), mp.sqrt(_dot(y, y))
        if nx == 0 or ny == 0:
            return mp.mpf(0)
        u = min(max(_dot(x, y) / (nx * ny), mp.mpf(-1)), mp.mpf(1))
        th = mp.acos(u)
        k1 = _dot(x, y) * (1 - th / mp.pi)
        k2 = nx * ny * mp.sin(th) / mp.pi
        rw, ru = mp.mpf(float(r_w)), mp.mpf(float(r_u))
        return rw ** 2 / 2 * k1 + ru ** 2 / 2 * (k1 + k2)


CNTK_DPS = 60  # images have moderate entries: 60 digits leave every float64 result exact


def _patch_average(T, H, W, q):
    """𝒜(T)[i,j,i',j'] = (1/q²) Σ_{a,b=-r..r} T[i+a, j+b, i'+a, j'+b] (zero outside the image)."""
    r = (q - 1) // 2
    out = {}
    for i in range(H):
        for j in range(W):
            for i2 in range(H):
                for j2 in range(W):
                    acc = mp.mpf(0)
                    for a in range(-r, r + 1):
                        for b in range(-r, r + 1):
                            p, pp = (i + a, j + b), (i2 + a, j2 + b)
                            if 0 <= p[0] < H and 0 <= p[1] < W and 0 <= pp[0] < H and 0 <= pp[1] < W:
                                acc += T[p + pp]
                    out[(i, j, i2, j2)] = acc / (q * q)
    return out


def cntk_pair(x, y, depth, readout, W_std, b_std, q=3):
    """(nngp, ntk) of the ReLU CNN for one image pair (C, H, W), from the recursion of seed 004 per pixel pair.

    K₀ = (1/C)Σ_c x_c x′_c; per layer Σ = W²𝒜(K) + b², Θ = Σ + W²𝒜(Θ̇) (Θ̇₀ = 0), K = E[relu relu],
    κ̇ = P[u > 0, v > 0] (0 where a variance is 0), Θ̇ = Θ·κ̇; readout R = mean over all pixel pairs (gap)
    or over p = p′ (flatten): nngp = W²R(K) + b², ntk = nngp + W²R(Θ̇).
    """
    with mp.workdps(CNTK_DPS):
        C, H, W = x.shape
        Ws = _per_layer(W_std, depth + 1)
        bs = _per_layer(b_std, depth + 1)
        pix = [(i, j) for i in range(H) for j in range(W)]
        imgs = {"x": x, "y": y}
        combos = [("x", "x"), ("x", "y"), ("y", "y")]
        K = {}
        for u, v in combos:
            K[(u, v)] = {p + pp: mp.fsum(mp.mpf(float(imgs[u][c][p])) * mp.mpf(float(imgs[v][c][pp]))
                                         for c in range(C)) / C for p in pix for pp in pix}
        Td = {uv: {key: mp.mpf(0) for key in K[uv]} for uv in combos}
        for layer in range(1, depth + 1):
            w2, b2 = Ws[layer - 1] ** 2, bs[layer - 1] ** 2
            Sig = {uv: {k: w2 * v + b2 for k, v in _patch_average(K[uv], H, W, q).items()} for uv in combos}
            The = {uv: {k: Sig[uv][k] + w2 * v for k, v in _patch_average(Td[uv], H, W, q).items()} for uv in combos}
            for u, v in combos:
                newK, newT = {}, {}
                for p in pix:
                    for pp in pix:
                        qa, qb, k = Sig[(u, u)][p + p], Sig[(v, v)][pp + pp], Sig[(u, v)][p + pp]
                        f, dd = _relu_dual(qa, qb, k)
                        newK[p + pp] = f
                        newT[p + pp] = The[(u, v)][p + pp] * dd
                K[(u, v)], Td[(u, v)] = newK, newT
        keys = [p + pp for p in pix for pp in pix] if readout == "gap" else [p + p for p in pix]
        w2, b2 = Ws[depth] ** 2, bs[depth] ** 2
        R = lambda T: mp.fsum(T[k] for k in keys) / len(keys)  # noqa: E731
        nngp = w2 * R(K[("x", "y")]) + b2
        return nngp, nngp + w2 * R(Td[("x", "y")])


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------
def case_specs():
    """Every golden case: id, family, parameters, input set, outputs."""
    specs = []
    for activation, inputs in (("relu", "hard"), ("erf", "moderate")):
        for depth in range(4):
            for W_std, b_std in ((1.0, 0.0), (1.3, 0.2)):
                tag = "nobias" if b_std == 0 else "bias"
                specs.append(dict(id=f"fc-{activation}-depth{depth}-{tag}", family="fc", inputs=inputs,
                                  params=dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std),
                                  outputs=["nngp", "ntk"]))
    specs.append(dict(id="fc-relu-depth2-perlayer", family="fc", inputs="hard",
                      params=dict(depth=2, activation="relu", W_std=[1.0, 1.4142135623730951, 0.7],
                                  b_std=[0.0, 0.1, 0.3]), outputs=["nngp", "ntk"]))
    specs.append(dict(id="fc-erf-depth2-hard", family="fc", inputs="hard",
                      params=dict(depth=2, activation="erf", W_std=1.0, b_std=0.0), outputs=["nngp", "ntk"]))
    specs.append(dict(id="eq63", family="eq63", inputs="hard", params={}, outputs=["ntk"]))
    for depth in (1, 2):
        specs.append(dict(id=f"arora-depth{depth}", family="arora", inputs="hard", params=dict(depth=depth),
                          outputs=["ntk"]))
    specs.append(dict(id="wei", family="wei", inputs="hard", params=dict(r_w=1.0, r_u=0.7), outputs=["ntk"]))
    for depth in (1, 2):
        for readout in ("gap", "flatten"):
            specs.append(dict(id=f"cntk-{readout}-depth{depth}", family="cntk", inputs="images",
                              params=dict(depth=depth, readout=readout, filter_size=3, W_std=1.0, b_std=0.0),
                              outputs=["nngp", "ntk"]))
    specs.append(dict(id="cntk-gap-depth1-bias", family="cntk", inputs="images",
                      params=dict(depth=1, readout="gap", filter_size=3, W_std=[1.2, 0.8], b_std=[0.3, 0.1]),
                      outputs=["nngp", "ntk"]))
    return specs


FUNCTIONS = {
    "fc": "ntkref.kernels.fc(x, depth=..., activation=..., W_std=..., b_std=...) -> .nngp, .ntk",
    "eq63": "ntkref.kernels.two_layer_relu_ntk(x)",
    "arora": "ntkref.kernels.arora_ntk(x, depth=...)",
    "wei": "ntkref.kernels.wei_kernel(x, r_w=..., r_u=...)",
    "cntk": "ntkref.kernels.cntk(x, depth=..., readout=..., filter_size=3, W_std=..., b_std=...) -> .nngp, .ntk",
}


def compute_case(spec, x, rows=None):
    """Float64 matrices {output: (n, n)} of a case, from the high-precision values (rows: a subset of rows)."""
    idx = list(range(x.shape[0])) if rows is None else list(rows)
    n = len(idx)
    outs = {o: np.zeros((n, n)) for o in spec["outputs"]}
    p = spec["params"]
    for a in range(n):
        for b in range(a, n):
            xi, xj = x[idx[a]], x[idx[b]]
            if spec["family"] == "fc":
                vals = dict(zip(("nngp", "ntk"), fc_pair(xi, xj, p["depth"], p["activation"], p["W_std"], p["b_std"])))
            elif spec["family"] == "eq63":
                vals = {"ntk": eq63_pair(xi, xj)}
            elif spec["family"] == "arora":
                vals = {"ntk": arora_pair(xi, xj, p["depth"])}
            elif spec["family"] == "cntk":
                vals = dict(zip(("nngp", "ntk"), cntk_pair(xi, xj, p["depth"], p["readout"], p["W_std"], p["b_std"],
                                                           p["filter_size"])))
            else:
                vals = {"ntk": wei_pair(xi, xj, p["r_w"], p["r_u"])}
            for o in spec["outputs"]:
                outs[o][a, b] = outs[o][b, a] = float(vals[o])  # one rounding to the nearest float64
    return outs


def build():
    """The manifest (dict) and the npz arrays (dict) of the current version."""
    sets = input_sets()
    cases = []
    arrays = {f"inputs__{k}": v for k, v in sets.items()}
    for spec in case_specs():
        outs = compute_case(spec, sets[spec["inputs"]])
        case = dict(spec)
        case["function"] = FUNCTIONS[spec["family"]]
        case["values"] = {o: v.tolist() for o, v in outs.items()}
        del case["outputs"]
        cases.append(case)
        for o, v in outs.items():
            arrays[f"{spec['id']}__{o}"] = v
    manifest = {
        "format": "ntkref-golden",
        "version": VERSION,
        "generated_by": "validation/make_golden.py",
        "precision": f"mpmath with {DPS} working digits from the exact binary values of the float64 inputs, "
                     "rounded once to the nearest float64",
        "check": "|K - K_golden| <= tol * sqrt(K_golden(x,x) * K_golden(x',x')) with tol = 1e-13 for ntkref "
                 "(float64); entries with a zero scale must match exactly",
        "conventions": {
            "data": "x has shape (n, d), one sample a row; every case gives the symmetric Gram matrix K(x, x)",
            "fc": "neural-tangents: Sigma0 = W0^2 x.x'/d + b0^2; per hidden layer h: nngp = W_h^2 E[s(u)s(v)] + "
                  "b_h^2, ntk = nngp + W_h^2 E[s'(u)s'(v)] ntk; depth = number of hidden layers; W_std/b_std "
                  "scalar or one per layer incl. the readout; relu: s'(0) = 0; erf: neural-tangents Erf(a=1,b=1,c=0)",
            "eq63": "seed 000 eq. (63): ||x|| ||x'|| h(u) / (2 pi d), h(u) = 2u(pi - arccos u) + sqrt(1 - u^2); "
                    "Theta(x, 0) = 0",
            "arora": "seed 004 eqs. (6)-(8), relu, c_sigma = 2, Sigma0 = x.x' (no 1/d), Sigma_dot^(L+1) = 1",
            "wei": "seed 002 App. B.1: (r_w^2/2) K1 + (r_u^2/2)(K1 + K2), K1 = x.x'(1 - theta/pi), "
                   "K2 = ||x|| ||x'|| sin(theta)/pi",
            "cntk": "images (n, C, H, W); depth x [3x3 SAME conv -> relu] -> GAP or flatten -> dense, NTK "
                    "parameterisation, neural-tangents normalisation: K0 = (1/C) sum_c x_c x'_c per pixel pair; "
                    "Sigma = W^2 A(K) + b^2 with A the 3x3 patch average along spatial diagonals (zero padding); "
                    "Theta = Sigma + W^2 A(Theta_dot) (Theta_dot = 0 before the first layer); K = E[relu relu], "
                    "kappa_dot = P[u>0, v>0] (0 where a variance is 0), Theta_dot = Theta kappa_dot; readout R = "
                    "mean over all pixel pairs (gap) or over p = p' (flatten): nngp = W^2 R(K) + b^2, "
                    "ntk = nngp + W^2 R(Theta_dot)",
        },
        "inputs": {k: {"shape": list(v.shape), "values": v.tolist(),
                       "rows": _row_notes(k)} for k, v in sets.items()},
        "npz": "golden.npz holds the same arrays: inputs__<set> and <case id>__<output>",
        "cases": cases,
    }
    return manifest, arrays


def _row_notes(name):
    if name == "images":
        return ["image with entries ((7i + 3j + 5c) mod 11 - 5)/4", "image ((2i + 5j + 3c + 1) mod 7 - 3)/2",
                "two nonzero pixels: (c0, 0, 0) = 1.5 and (c1, 0, 1) = -0.5"]
    if name == "hard":
        return ["generic", "3 x row 0 rotated by 1e-9 rad", "0.5 x row 0 rotated by pi - 1e-7 rad (antiparallel)",
                "zero row", "generic", "norm ~1e-100", "norm ~1e100"]
    return ["generic", "generic", "exactly -row 0", "row 0 with one entry changed by 1e-7", "generic"]


def _write_atomic(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".golden-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # package data: readable by everyone (mkstemp creates 0600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write(folder=GOLDEN_DIR):
    manifest, arrays = build()
    text = json.dumps(manifest, indent=1) + "\n"
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _write_atomic(os.path.join(folder, "manifest.json"), text.encode())
    _write_atomic(os.path.join(folder, "golden.npz"), buf.getvalue())
    return manifest


def check(folder=GOLDEN_DIR):
    """Recompute everything; return the list of differences from the stored files (empty: reproduced)."""
    manifest, arrays = build()
    with open(os.path.join(folder, "manifest.json")) as f:
        stored = json.load(f)
    problems = []
    if stored.get("version") != manifest["version"]:
        problems.append(f"version {stored.get('version')} != {manifest['version']}")
    if json.loads(json.dumps(manifest)) != stored:
        problems.append("manifest.json differs from the regenerated one")
    with np.load(os.path.join(folder, "golden.npz"), allow_pickle=False) as z:
        if sorted(z.files) != sorted(arrays):
            problems.append("golden.npz has other arrays than the regenerated set")
        for k, v in arrays.items():
            if k in z.files and not np.array_equal(z[k], v):
                problems.append(f"golden.npz[{k!r}] differs")
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m validation.make_golden", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare with the stored files instead of writing")
    args = p.parse_args(argv)
    if args.check:
        problems = check()
        print("golden vectors reproduced" if not problems else "\n".join(problems))
        return 0 if not problems else 1
    m = write()
    print(f"wrote {len(m['cases'])} cases (version {m['version']}) to {GOLDEN_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
