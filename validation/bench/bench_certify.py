"""Benchmark: certified ℓ∞ radii of the infinite-width two-layer ReLU net (NTK-KRR) on MNIST 0 vs 1.

Seed 000 §4.2 / App. H.1, Tables 2–3.  Data: the embedded MNIST 0/1 digits (``ntkref.data.load_digits01()``,
2 128 real images) by default, or ``--mnist DIR``: a directory of IDX files (raw or .gz), either a subset
``images-idx3-ubyte``/``labels-idx1-ubyte`` or a full MNIST ``train-…``/``t10k-…`` (both splits pooled); its
zeros and ones are used, pixels in [0, 1] (the official code's ``normalize: False``), labels 0 → −1, 1 → +1.
Split (seeded permutation): the first 1 000 as training points, the rest as test points.
α = (Θ + (λ/2)I)⁻¹y (KRR, the official ``regression.py`` convention) with Θ the seed-000 eq. (63) kernel,
computed here by a private closed form.

Timed:
1. ``ntkref.certify.certified_radius`` (vectorised bisection, all points at once) on all test points, and on
   2 000 points (the test points repeated to reach 2 000: only a timing, the subset has fewer);
2. a per-point bisection loop like the paper's code (``robust_svm.py``: δ ∈ [0, 0.3], start 0.05, at most
   1 000 steps, stop when 0 ≤ margin bound < 1e-3), on a few points, extrapolated to 2 000.

Run: ``python validation/bench/bench_certify.py [--quick] [--mnist DIR]``.  Prints a small report.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ntkref import certify


def load_images(mnist_dir=None):
    """(images (n, 784) uint8, labels (n,), description) from ``mnist_dir``, or the embedded 0/1 digits.

    ``mnist_dir``: ``images-idx3-ubyte[.gz]``/``labels-idx1-ubyte[.gz]`` (a subset), else the standard
    ``train-…``/``t10k-…`` files of a full MNIST, both splits pooled (the benchmark draws its own split).
    """
    if mnist_dir is None:
        from ntkref.data import load_digits01

        images, labels = load_digits01()
        return images, labels, "the embedded MNIST 0/1 digits (ntkref.data.load_digits01)"
    from ntkref.datasets import load_mnist

    try:
        images, labels = load_mnist(mnist_dir)
    except FileNotFoundError:
        parts = [load_mnist(mnist_dir, split) for split in ("train", "test")]
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
    return images.reshape(len(labels), -1), labels, str(mnist_dir)


def ntk_gram(a, b):
    """Seed 000 eq. (63), Θ = ‖a‖‖b‖h(u)/(2πd), stable angle θ = atan2(‖b̂ − u â‖, u) (private closed form)."""
    d = a.shape[1]
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    u = np.clip((a / na[:, None]) @ (b / nb[:, None]).T, -1.0, 1.0)
    s = np.sqrt(np.maximum(1.0 - u * u, 0.0))
    th = np.arctan2(s, u)
    return na[:, None] * nb[None, :] * (2 * u * (np.pi - th) + s) / (2 * np.pi * d)


def paper_style_loop(alpha, x_train, x0, method="paper"):
    """One point at a time, the official code's search: δ ∈ [0, 0.3], start 0.05, T = 1000, stop at 0 ≤ m < 1e-3."""
    x0 = x0[None, :]
    g0 = float(alpha @ ntk_gram(x0, x_train)[0])
    sign = 1.0 if g0 > 0 else -1.0
    delta, lo, hi = 0.05, 0.0, 0.3
    for step in range(1000):
        lower, upper = certify.output_bounds(alpha, x_train, x0, delta, method=method)
        margin = float(lower[0]) if sign > 0 else -float(upper[0])
        if 0 <= margin < 1e-3:
            break
        if margin > 0:
            lo = delta
        else:
            hi = delta
        delta = (lo + hi) / 2
    return lo if margin < 0 else delta, step + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer points in the per-point loop")
    ap.add_argument("--lam", type=float, default=1.0, help="KRR λ (seed 000 eq. (7); α = (Θ + λ/2 I)⁻¹ y)")
    ap.add_argument("--table3", action="store_true", help="also sweep λ as in seed 000 Table 3 (KRR)")
    ap.add_argument("--mnist", metavar="DIR", default=None,
                    help="directory of MNIST IDX files (default: the embedded 0/1 digits of ntkref.data)")
    args = ap.parse_args()

    images, labels, source = load_images(args.mnist)
    keep = (labels == 0) | (labels == 1)
    X = images[keep].reshape(int(keep.sum()), -1).astype(np.float64) / 255.0
    y = np.where(labels[keep] == 1, 1.0, -1.0)
    perm = np.random.default_rng(0).permutation(len(y))
    X, y = X[perm], y[perm]
    n_train = 1000
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    print(f"MNIST 0 vs 1 from {source}: {len(y)} images ({int((y > 0).sum())} ones); "
          f"train {len(ytr)}, test {len(yte)}; d = {X.shape[1]}")

    t = time.perf_counter()
    K = ntk_gram(Xtr, Xtr)
    alpha = np.linalg.solve(K + (args.lam / 2) * np.eye(n_train), ytr)
    acc = np.mean(np.sign(alpha @ ntk_gram(Xte, Xtr).T) == yte)
    print(f"KRR λ = {args.lam}: fit {time.perf_counter() - t:.2f} s, test accuracy {acc:.4f}")

    rows = []
    for method, domain, exact in (("tight", None, False), ("paper", None, False), ("tight", (0.0, 1.0), False),
                                  ("tight", (0.0, 1.0), True)):
        t, c = time.perf_counter(), time.process_time()
        r, info = certify.certified_radius(alpha, Xtr, Xte, method=method, domain=domain, exact_domain=exact,
                                           y=yte, return_info=True)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        ok = ~info["misclassified"]
        rows.append((method, domain, dt, r, ok))
        label = f"{method:5s} domain={str(domain):10s}{' exact' if exact else '      '}"
        print(f"certified_radius {label}: {len(Xte)} points in {dt:6.2f} s wall, {dc:6.2f} s CPU "
              f"({info['steps']} steps); "
              f"radius over correctly classified: mean {r[ok].mean():.4e} ± {r[ok].std():.4e}, median "
              f"{np.median(r[ok]):.4e}; misclassified {int((~ok).sum())}")
    r_t, r_p = rows[0][3], rows[1][3]
    both = (r_p > 0) & rows[0][4]
    ratio = r_t[both] / r_p[both]
    print(f"tight / paper radius: min {ratio.min():.3f}, median {np.median(ratio):.3f};"
          f" tight >= paper on every point: {bool(np.all(r_t >= r_p))}")
    r_d, r_e = rows[2][3], rows[3][3]
    print(f"tight with domain [0,1] / tight: median {np.median(r_d[both] / r_t[both]):.3f}; "
          f"exact domain / cheap domain: median {np.median(r_e[both] / r_d[both]):.4f}")

    reps = int(np.ceil(2000 / len(Xte)))
    X2000 = np.concatenate([Xte] * reps)[:2000]
    for method in ("tight", "paper"):
        t, c = time.perf_counter(), time.process_time()
        _, info = certify.certified_radius(alpha, Xtr, X2000, method=method, return_info=True)
        print(f"certified_radius method={method}: 2000 points (test points repeated) x {n_train} train: "
              f"{time.perf_counter() - t:.2f} s wall, {time.process_time() - c:.2f} s CPU ({info['steps']} steps)")

    if args.table3:
        Kte = ntk_gram(Xte, Xtr)
        print("Table-3-like sweep (KRR, this subset: 1000 train; the paper used 12 665): "
              "λ, test accuracy, mean certified ℓ∞ radius over correctly classified test points (paper | tight)")
        for lam in (0.0, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0):
            a_l = np.linalg.solve(K + (lam / 2) * np.eye(n_train), ytr)
            acc_l = np.mean(np.sign(Kte @ a_l) == yte)
            means = []
            for method in ("paper", "tight"):
                r, info = certify.certified_radius(a_l, Xtr, Xte, method=method, y=yte, return_info=True)
                means.append(r[~info["misclassified"]].mean())
            print(f"  λ = {lam:g}: accuracy {acc_l:.4f}, radius paper {means[0]:.4e} | tight {means[1]:.4e}")

    n_loop = 3 if args.quick else 8
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall times include contention)")
    t = time.perf_counter()
    steps = []
    for k in range(n_loop):
        _, s = paper_style_loop(alpha, Xtr, Xte[k])
        steps.append(s)
    dt = time.perf_counter() - t
    print(f"per-point paper-style loop (method=paper): {n_loop} points in {dt:.2f} s, steps/point {steps}; "
          f"extrapolated to 2000 points: {dt / n_loop * 2000:.0f} s")


if __name__ == "__main__":
    main()
