"""Benchmark: exact SVM solve and full-batch dynamics step on an MNIST 0-vs-1 NTK (issue 3).

Loads the first ``--n`` images of digits 0 and 1 from the IDX files in ``--data``
(pixels scaled to [0, 1], no normalisation, as the official code; labels 0 → −1,
1 → +1), builds the two-layer ReLU NTK Gram matrix of seed 000 eq. (63), and
reports

1. the time of ntkref's exact SVM solve (``machines.solve``, hinge, sum
   convention, λ = ``--lam``, no bias) against scikit-learn's
   ``SVC(kernel="precomputed", C=1/λ, tol=--sk-tol)``.  sklearn fits a bias b
   (its dual has the extra constraint Σ yᵢαᵢ = 0), so the two problems differ:
   the table also shows the bias sklearn found and the largest difference of the
   decision values; the "augmented" row solves ntkref on K + c (c = ``--c-aug``),
   i.e. a bias regularised by (λ/2)·b²/c, which tends to sklearn's problem as c → ∞.
2. the time of one full-batch subgradient step of the kernel machine,
   α ← (1 − ηλ)α + η·y·𝟙(y·Kα < 1) (one n×n matrix–vector product plus O(n)),
   against the memory-bandwidth bound n²·8 bytes / bandwidth, the bandwidth
   the best of a large array sum, dot product and copy (a matvec reads K once).
3. peak Python-heap memory of the solve (tracemalloc; NumPy buffers included).

Run from the repository root:  python validation/bench/bench_machines.py --n 2000
(``--threads 1`` by default; ``--threads 0`` leaves BLAS multi-threaded.)
"""
from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
import time
import tracemalloc

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ntkref import machines  # noqa: E402


def read_idx(path):
    """Minimal IDX reader (big-endian header: 0, 0, type 0x08 = uint8, ndim; then dims)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        data = fh.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (header {zero}, {dtype:#x}).")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in os.listdir(data_dir):
        if name.startswith(stem):
            return os.path.join(data_dir, name)
    raise FileNotFoundError(f"no {stem}* file in {data_dir}")


def load_01(data_dir, n):
    images = read_idx(find(data_dir, "images"))
    labels = read_idx(find(data_dir, "labels"))
    keep = np.nonzero((labels == 0) | (labels == 1))[0][:n]
    x = images[keep].reshape(len(keep), -1).astype(np.float64) / 255.0
    y = np.where(labels[keep] == 1, 1.0, -1.0)
    return x, y


def ntk_gram(x):
    try:
        from ntkref.kernels import two_layer_relu_ntk

        return np.asarray(two_layer_relu_ntk(x)), "ntkref.kernels.two_layer_relu_ntk"
    except Exception:  # closed form of seed 000 eq. (63)
        norms = np.linalg.norm(x, axis=1)
        u = np.clip((x @ x.T) / np.outer(norms, norms), -1.0, 1.0)
        h = 2 * u * (np.pi - np.arccos(u)) + np.sqrt(1 - u * u)
        K = np.outer(norms, norms) * h / (2 * np.pi * x.shape[1])
        return (K + K.T) / 2, "closed form in script"


def best_time(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="training points (digits 0 and 1)")
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "mnist-subset"))
    ap.add_argument("--lam", type=float, default=0.064, help="λ, sum convention (Table 3's SVM: 0.064)")
    ap.add_argument("--sk-tol", type=float, default=1e-6, help="sklearn SVC tol (KKT violation)")
    ap.add_argument("--c-aug", type=float, default=100.0, help="constant added to K for the bias comparison")
    ap.add_argument("--lr", type=float, default=0.1, help="η of the dynamics step (needs ηλ < 1)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS threads (threadpoolctl); 0 = library default. 1 gives stable numbers on a shared "
                         "machine and matches libsvm, which is single-threaded")
    args = ap.parse_args(argv)
    if args.threads > 0:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(args.threads)
        except ImportError:
            print("threadpoolctl not installed: BLAS thread count left at the library default")

    x, y = load_01(args.data, args.n)
    n = len(y)
    t0 = time.perf_counter()
    K, kernel_src = ntk_gram(x)
    t_kernel = time.perf_counter() - t0
    print(f"n = {n} (zeros {int(np.sum(y < 0))}, ones {int(np.sum(y > 0))}), d = {x.shape[1]}, "
          f"kernel from {kernel_src} in {t_kernel:.3f} s, λ = {args.lam} (C = {1 / args.lam:.4g})")

    rows = []
    # ---- exact solve (with and without the PSD check)
    t_psd, km = best_time(lambda: machines.solve(K, y, "hinge", args.lam), args.repeat)
    t_nopsd, _ = best_time(lambda: machines.solve(K, y, "hinge", args.lam, check_psd=False), args.repeat)
    alpha = np.asarray(km.alpha_)
    n_sv = int(np.sum(alpha != 0))
    n_bound = int(np.sum(np.abs(alpha * args.lam - y) < 1e-12))
    rows.append(("ntkref solve (hinge, PSD check)", t_psd, f"gap {km.duality_gap:.2e}, {km.n_iter} it, "
                 f"{n_sv} SV ({n_bound} at C), conv {km.converged}"))
    rows.append(("ntkref solve (check_psd=False)", t_nopsd, ""))
    Ka = K + args.c_aug
    t_aug, km_aug = best_time(lambda: machines.solve(Ka, y, "hinge", args.lam, check_psd=False), args.repeat)
    rows.append((f"ntkref solve on K + {args.c_aug:g}", t_aug, f"gap {km_aug.duality_gap:.2e}, {km_aug.n_iter} it"))

    try:
        from sklearn.svm import SVC

        svc = SVC(kernel="precomputed", C=1.0 / args.lam, tol=args.sk_tol, shrinking=True)
        t_sk, _ = best_time(lambda: svc.fit(K, y), args.repeat)
        dec = svc.decision_function(K)
        g = K @ alpha
        g_aug = Ka @ np.asarray(km_aug.alpha_)
        rows.append(("sklearn SVC(precomputed)", t_sk,
                     f"bias {float(svc.intercept_[0]):.3g}, {len(svc.support_)} SV, "
                     f"max|dec - g| {np.max(np.abs(dec - g)):.3g}, max|dec - g_aug| {np.max(np.abs(dec - g_aug)):.3g}"))
    except ImportError:
        rows.append(("sklearn SVC(precomputed)", float("nan"), "scikit-learn not installed"))

    # ---- dynamics step vs bandwidth bound
    # bandwidth: the best of three streaming kernels over an array 4× the size of K (out of cache):
    # a sum and a BLAS dot (read once) and a copy (read + write: 2× the bytes)
    big = np.ones(max(4 * K.size, 32 * 2**20 // 8))
    ones = np.ones_like(big)
    dst = np.empty_like(big)
    t_sum, _ = best_time(lambda: float(big.sum()), 5)
    t_dot, _ = best_time(lambda: float(big @ ones), 5)  # reads 2 arrays
    t_copy, _ = best_time(lambda: np.copyto(dst, big), 5)
    bandwidth = max(big.nbytes / t_sum, 2 * big.nbytes / t_dot, 2 * big.nbytes / t_copy)
    del big, ones, dst
    eta, lam = args.lr, args.lam
    a = np.zeros(n)

    def step(a=a):
        g = K @ a
        return (1 - eta * lam) * a + eta * y * (y * g < 1)

    for _ in range(3):
        a = step(a)
    t_step, _ = best_time(lambda: step(a), max(args.repeat, 10))
    t_bound = K.nbytes / bandwidth
    rows.append(("dynamics step α ← (1−ηλ)α + η·y·𝟙(yKα<1)", t_step,
                 f"bandwidth bound {t_bound * 1e3:.3f} ms ({bandwidth / 1e9:.1f} GB/s), ratio {t_step / t_bound:.2f}"))

    # ---- peak memory of one solve
    tracemalloc.start()
    machines.solve(K, y, "hinge", args.lam)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows.append(("peak traced memory of solve", float("nan"), f"{peak / 2**20:.1f} MiB (K itself {K.nbytes / 2**20:.1f} MiB)"))

    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'time':>10}  notes")
    for what, t, note in rows:
        ts = "" if t != t else f"{t * 1e3:8.2f} ms"
        print(f"{what:<{width}}  {ts:>10}  {note}")


if __name__ == "__main__":
    main()
