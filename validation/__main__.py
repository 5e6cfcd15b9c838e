"""`python -m validation`: the project's main job.

Until the seed-000 reproductions land (issue 6), this is a short demonstration
that prints NTK values on inputs that break naive implementations and checks
them against an independent 50-digit mpmath evaluation of the same recursion.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np


def _mp_ntk(x, y, depth):
    import mpmath as mp

    with mp.workdps(50):
        d = len(x)
        dot = lambda a, b: mp.fsum(mp.mpf(float(u)) * mp.mpf(float(v)) for u, v in zip(a, b))  # noqa: E731
        q1, q2, k = dot(x, x) / d, dot(y, y) / d, dot(x, y) / d
        t1, t2, tk = q1, q2, k
        for _ in range(depth):
            def dual(qa, qb, kab):
                if qa == 0 or qb == 0:
                    return mp.mpf(0), mp.mpf(0)
                th = mp.acos(max(min(kab / mp.sqrt(qa * qb), 1), -1))
                return mp.sqrt(qa * qb) * (mp.sin(th) + (mp.pi - th) * mp.cos(th)) / (2 * mp.pi), (mp.pi - th) / (2 * mp.pi)
            (f1, d1), (f2, d2), (fk, dk) = dual(q1, q1, q1), dual(q2, q2, q2), dual(q1, q2, k)
            q1, q2, k = f1, f2, fk
            t1, t2, tk = q1 + d1 * t1, q2 + d2 * t2, k + dk * tk
        return float(tk), float(mp.sqrt(t1 * t2))


def _naive_ntk(x, depth):
    """Textbook recursion with arccos of the clipped correlation (what many codes do)."""
    d = x.shape[1]
    K = x @ x.T / d
    ntk = K.copy()
    for _ in range(depth):
        q = np.sqrt(np.outer(np.diag(K), np.diag(K)))
        rho = np.clip(np.divide(K, q, out=np.zeros_like(K), where=q > 0), -1, 1)
        th = np.arccos(rho)
        K = q * (np.sin(th) + (np.pi - th) * rho) / (2 * np.pi)
        ntk = K + ntk * (np.pi - th) / (2 * np.pi)
    return ntk


def demo(depth=3, seed=0):
    from ntkref import kernels

    rng = np.random.default_rng(seed)
    d = 8
    base = rng.normal(size=d)
    v = rng.normal(size=d)
    v -= v @ base / (base @ base) * base
    v /= np.linalg.norm(v)
    b = base / np.linalg.norm(base)
    rows = [base, (math.cos(1e-9) * b + math.sin(1e-9) * v) * 3.0, -(math.cos(1e-7) * b + math.sin(1e-7) * v),
            np.zeros(d), rng.normal(size=d) * 1e150, rng.normal(size=d) * 1e-150]
    names = ["x", "x rotated 1e-9 rad", "−x rotated 1e-7 rad", "zero row", "scale 1e150", "scale 1e-150"]
    x = np.array(rows)
    t = time.perf_counter()
    K = kernels.fc(x, depth=depth).ntk
    wall = time.perf_counter() - t
    with np.errstate(all="ignore"):
        naive = _naive_ntk(x, depth)
    print(f"ntkref {__import__('ntkref').__version__}: fully connected ReLU NTK, depth {depth}, W_std = 1, no bias "
          f"(neural-tangents' convention), d = {d}; computed in {wall * 1e3:.1f} ms\n")
    print(f"{'pair':44s} {'ntkref Θ':>24s} {'rel. error':>11s} {'naive arccos':>13s}")
    worst = 0.0
    for i, j in [(0, 0), (0, 1), (0, 2), (1, 2), (0, 3), (4, 4), (4, 5), (5, 5)]:
        ref, scale = _mp_ntk(x[i], x[j], depth)
        err = abs(K[i, j] - ref) / scale if scale > 0 else abs(K[i, j])
        nerr = abs(naive[i, j] - ref) / scale if scale > 0 and np.isfinite(naive[i, j]) else float("nan")
        worst = max(worst, err)
        print(f"{names[i] + ' · ' + names[j]:44s} {K[i, j]:24.16e} {err:11.1e} {nerr:13.1e}")
    print("\nrel. error = |Θ − Θ_mpmath| / √(Θ(x,x)Θ(x',x')) against a 50-digit mpmath evaluation of the same recursion;")
    print("'naive arccos' is the textbook recursion (arccos of the clipped correlation) on the same inputs (nan: overflow or an undefined 0/0).")
    ok = worst <= 1e-13
    print(f"\naccuracy check: worst error {worst:.1e} {'<=' if ok else '>'} 1e-13 -> {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m validation", description=__doc__)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    return 0 if demo(args.depth, args.seed) else 1


if __name__ == "__main__":
    sys.exit(main())
