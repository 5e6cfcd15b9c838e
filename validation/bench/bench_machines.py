"""Benchmark: exact SVM solves (``machines.solve``, hinge) against scikit-learn's SVC, one run, JSON output.

Data: the embedded MNIST 0/1 digits (``ntkref.data``, first ``--n`` of the 2 128 images; labels
0 → −1, 1 → +1, pixels in [0, 1]) and the seed-000 two-layer ReLU NTK Gram
(``kernels.two_layer_relu_ntk``).  For ``--n`` above 2 128 the rows are MNIST-shaped synthetic
digits: an embedded digit shifted by up to 2 pixels and given pixel noise (σ = 0.1, clipped to
[0, 1]); the Gram is then built in row blocks and symmetrised in place (float64: 8n² bytes, 3.2 GB
at n = 20 000).

For each λ (sum convention, C = 1/λ, no bias) it reports, best of ``--repeat`` in the same run:

- sklearn ``SVC(kernel="precomputed", C=1/λ, tol=--sk-tol)``: time, and ntkref's duality gap of
  its coefficients α = ``dual_coef_`` in ntkref's (bias-free) problem — libsvm fits a bias, so its
  α is not the optimum of this problem (the gap says how far), and it is only float32-accurate;
- ntkref with its default checks (``check_psd=True``: the Cholesky certificate up to n = 4096, the
  Lanczos test above), with ``check_psd="lanczos"``, with ``check_psd=False``, and on a Gram checked
  once (``machines.checked_gram``, its own time reported apart; "checked"): time, duality gap
  (absolute and relative to max(1, P)), KKT residual, iterations, support vectors; the validation
  and each PSD test alone;
- ratios ntkref / sklearn; the sweep over all ``--lam`` (checks once + one fit per λ, against one SVC
  fit per λ); and peak memory: tracemalloc's peak during one solve (NumPy buffers
  included; K itself excluded, it exists before) and the process's max RSS; for CuPy the memory
  pool's bytes after the solve.

``--backend cupy`` (or torch, array_api_strict) also runs the ntkref solves with K and y moved to
that namespace (``NTKREF_DEVICE`` picks the device), next to the NumPy ones in the same run;
the transfer is not timed.  For the GPU target of issue 16 (n = 20 000, ≥ 5× NumPy):

    python validation/bench/bench_machines.py --n 20000 --backend cupy --repeat 2 --no-sklearn \
        --json machines_gpu.json

Run from the repository root.  ``--threads 1`` (default) limits BLAS to one thread, as libsvm.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import tracemalloc

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from ntkref import machines  # noqa: E402
from ntkref.machines import _gram  # noqa: E402
from ntkref._lib.backend import to_numpy  # noqa: E402


def digits(n, seed=0):
    """(x, y): the first n embedded 0/1 digits, or MNIST-shaped synthetic ones beyond 2 128 (module docstring)."""
    from ntkref.data import load_digits01

    images, labels = load_digits01()
    images = np.asarray(images).reshape(len(labels), 28, 28).astype(np.float64) / 255.0
    y0 = np.where(np.asarray(labels) == 1, 1.0, -1.0)
    if n <= len(y0):
        return images[:n].reshape(n, -1), y0[:n], "embedded MNIST 0/1 digits"
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(y0), size=n)
    x = np.empty((n, 784))
    for i0 in range(0, n, 4096):
        sel = pick[i0:i0 + 4096]
        imgs = images[sel]
        dx, dy = rng.integers(-2, 3, size=2)
        imgs = np.roll(np.roll(imgs, dx, axis=1), dy, axis=2)
        imgs = np.clip(imgs + 0.1 * rng.standard_normal(imgs.shape), 0.0, 1.0)
        x[i0:i0 + len(sel)] = imgs.reshape(len(sel), -1)
    return x, y0[pick], "MNIST-shaped synthetic digits (embedded digits shifted by <= 2 px, noise 0.1)"


def gram(x, block=2048):
    """Two-layer ReLU NTK (seed 000 eq. (63)) in row blocks, symmetrised in place (no n² temporaries)."""
    from ntkref.kernels import two_layer_relu_ntk

    n = x.shape[0]
    K = np.empty((n, n))
    for i in range(0, n, block):
        K[i:i + block] = to_numpy(two_layer_relu_ntk(x[i:i + block], x))
    for i in range(0, n, block):  # exact symmetry: the upper blocks win
        for j in range(i + block, n, block):
            K[j:j + block, i:i + block] = K[i:i + block, j:j + block].T
        d = K[i:i + block, i:i + block]
        d[...] = np.triu(d) + np.triu(d, 1).T
    return K


def best(fn, repeat):
    t_best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def peak_traced(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def ntkref_runs(K, y, lam, repeat, label, xp_name):
    rows = {}
    first = {}
    for name, psd in (("default", True), ("lanczos", "lanczos"), ("no_psd", False)):
        if xp_name != "numpy":
            # the first call on a GPU compiles its kernels (CuPy caches them on disk): timed apart, not in "best"
            t0 = time.perf_counter()
            machines.solve(K, y, "hinge", lam, check_psd=psd)
            first[name] = time.perf_counter() - t0
        t, km = best(lambda psd=psd: machines.solve(K, y, "hinge", lam, check_psd=psd), repeat)
        alpha = to_numpy(km.alpha_)
        rows[name] = {
            "time_s": t, "duality_gap": km.duality_gap,
            "relative_gap": km.duality_gap / max(1.0, km.primal_objective),
            "primal": km.primal_objective, "kkt_residual": km.kkt_residual, "n_iter": km.n_iter,
            "n_sv": int(np.sum(alpha != 0)), "converged": km.converged,
        }
    # a λ sweep's way: the default checks once (machines.checked_gram), then fits without re-checking
    t_checked_gram, G = best(lambda: machines.checked_gram(K), repeat)
    t, km = best(lambda: machines.solve(G, y, "hinge", lam), repeat)
    alpha = to_numpy(km.alpha_)
    rows["checked"] = {
        "time_s": t, "checked_gram_s": t_checked_gram, "duality_gap": km.duality_gap,
        "relative_gap": km.duality_gap / max(1.0, km.primal_objective), "primal": km.primal_objective,
        "kkt_residual": km.kkt_residual, "n_iter": km.n_iter, "n_sv": int(np.sum(alpha != 0)),
        "converged": km.converged,
    }
    t_val, _ = best(lambda: _gram.check_gram(K, "bench", psd=False), repeat)
    n = K.shape[0]
    parts = {"validation_s": t_val}
    for method in ("cholesky", "lanczos"):
        if method == "cholesky" and n > _gram._CHOLESKY_MAX_N and xp_name == "numpy":
            continue  # O(n³/3) on the host: minutes at n = 20 000, and 2 more n×n arrays
        t, _ = best(lambda method=method: _gram.refuse_indefinite(K, "bench", method=method), repeat)
        parts[f"psd_{method}_s"] = t
    if xp_name == "numpy":
        rows["default"]["peak_traced_bytes"] = peak_traced(lambda: machines.solve(K, y, "hinge", lam))
    elif xp_name == "cupy":
        import cupy

        pool = cupy.get_default_memory_pool()
        machines.solve(K, y, "hinge", lam)
        rows["default"]["cupy_pool_bytes"] = pool.total_bytes()
    if first:
        parts["first_call_s"] = first
    return {"backend": label, **parts, **rows}


def sklearn_run(K, y, lam, tol, repeat):
    from sklearn.svm import SVC

    svc = SVC(kernel="precomputed", C=1.0 / lam, tol=tol)
    t, _ = best(lambda: svc.fit(K, y), repeat)
    alpha = np.zeros(len(y))
    alpha[svc.support_] = svc.dual_coef_[0]
    gap = machines.duality_gap(alpha, K, y, "hinge", lam)
    P = machines.objective(alpha, K, y, "hinge", lam)
    return {"time_s": t, "duality_gap_ntkref_problem": gap, "relative_gap": gap / max(1.0, P),
            "bias": float(svc.intercept_[0]), "n_sv": int(len(svc.support_)),
            "peak_traced_bytes": peak_traced(lambda: SVC(kernel="precomputed", C=1.0 / lam, tol=tol).fit(K, y))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1700, help="training points (embedded digits up to 2128, synthetic above)")
    ap.add_argument("--lam", type=float, nargs="+", default=[0.1, 0.001], help="λ values, sum convention")
    ap.add_argument("--sk-tol", type=float, default=1e-3, help="sklearn SVC tol (its default)")
    ap.add_argument("--backend", default="numpy", choices=["numpy", "cupy", "torch", "array_api_strict"],
                    help="also run ntkref in this namespace (NumPy always runs, as the baseline)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (0 = library default)")
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args(argv)
    if args.threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)

    x, y, source = digits(args.n)
    t0 = time.perf_counter()
    K = gram(x)
    t_gram = time.perf_counter() - t0
    del x
    other = None
    if args.backend != "numpy":
        import importlib

        from ntkref._lib.backend import _MODULES, default_device

        xp = importlib.import_module(_MODULES[args.backend])
        dev = default_device() if os.environ.get("NTKREF_BACKEND", "numpy") == args.backend else None
        other = (xp.asarray(K, device=dev), xp.asarray(y, device=dev))
    out = {"n": len(y), "source": source, "kernel": "ntkref.kernels.two_layer_relu_ntk (seed 000 eq. (63))",
           "gram_s": t_gram, "threads": args.threads, "sk_tol": args.sk_tol, "results": []}
    for lam in args.lam:
        res = {"lam": lam, "C": 1.0 / lam, "ntkref": [ntkref_runs(K, y, lam, args.repeat, "numpy", "numpy")]}
        if other is not None:
            res["ntkref"].append(ntkref_runs(other[0], other[1], lam, args.repeat, args.backend, args.backend))
            res["speedup_vs_numpy"] = {k: res["ntkref"][0][k]["time_s"] / res["ntkref"][1][k]["time_s"]
                                       for k in ("default", "lanczos", "no_psd", "checked")}
        if not args.no_sklearn:
            sk = sklearn_run(K, y, lam, args.sk_tol, args.repeat)
            res["sklearn"] = sk
            res["ratio_to_sklearn"] = {f"{r['backend']}/{k}": r[k]["time_s"] / sk["time_s"]
                                       for r in res["ntkref"] for k in ("default", "lanczos", "no_psd", "checked")}
        out["results"].append(res)
    if not args.no_sklearn:  # the whole sweep: checks once + one fit per λ, against one SVC fit per λ
        first = out["results"][0]["ntkref"][0]["checked"]["checked_gram_s"]
        ours = first + sum(r["ntkref"][0]["checked"]["time_s"] for r in out["results"])
        theirs = sum(r["sklearn"]["time_s"] for r in out["results"])
        out["sweep"] = {"lams": args.lam, "ntkref_checked_once_s": ours, "sklearn_s": theirs, "ratio": ours / theirs}
    out["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
