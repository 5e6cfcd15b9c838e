"""Benchmark: the Dask path (dask.distributed LocalCluster) against the single-process NumPy path.

Workload (seed 000's pipeline): the two-layer ReLU NTK Gram (``kernels.fc(depth=1, W_std=1, get="ntk")``,
seed 000 eq. (63)) of n MNIST-shaped float32 rows, kernel ridge regression on it, and certified ℓ∞ radii
(``certify.certified_radius``, tight, pixel domain [0, 1]) for the test points.  Data: the embedded MNIST 0/1
digits (``ntkref.data``, 2 128 images), tiled to n rows with 1 % uniform pixel noise (clipped to [0, 1]),
labels ±1; test points are further tiles with fresh noise.

Both sides run in fresh subprocesses, one after the other, on the same inputs:

- NumPy: ``fc`` on the whole Gram (its own threads), ``krr.solve_cg`` on a float64 copy of it (the same CG,
  Nyström rank r; the Dask side's products accumulate in float64 too),
  ``certified_radius`` on all test points; time per stage and peak RSS of the process.
- Dask: a ``LocalCluster`` of W worker processes × 1 thread with ``--memory-limit`` per worker; the Gram is a
  graph of one task per upper block of ``--chunk`` rows, written block by block to Zarr (``--store``) or kept
  in the workers' memory (``--store memory``), ``krr.solve_cg`` reading only the upper blocks per product,
  radii mapped over test chunks; time per stage (after a warm-up task: imports) and the peak RSS of every
  worker (``ru_maxrss``, fresh workers per run).

``--losses hinge logistic`` adds kernel machines on the same Gram (``--machines-lam``, mean convention): NumPy
``machines.solve`` on a float64 copy of the Gram the Dask side stored (the same numbers; dense active-set / Newton, its default PSD certificate: Cholesky for
n ≤ 4096), Dask ``machines.solve`` on the stored Gram (``ntkref/_engines/dask/_machines.py``: working sets of gathered
columns / Newton-CG with block products, the Lanczos PSD test); time, duality gap, Newton steps or working-set size,
the PSD test timed apart, and the largest difference of the coefficients, relative to max|α| (the workers' and the
client's peaks cover the whole run, the machines included: the client holds the n·|W| gathered columns).

``--mode compare`` (default) runs both at each ``--n``; ``--mode target`` runs only the Dask side (the issue's
end-to-end run: ``--n 60000 --n-test 2000 --memory-limit 4GB``, which the NumPy side cannot hold next to
the workers).  Output: one JSON object (``--json PATH`` also writes it), with the ratios Dask / NumPy.

    python -m validation.bench.bench_dask --n 4000 8000                       # compare, small
    python -m validation.bench.bench_dask --n 4000 --losses hinge logistic    # + SVM and logistic machines
    python -m validation.bench.bench_dask --mode target --n 60000 --n-test 2000 --memory-limit 4GB \\
        --store /big/disk/K.zarr --json out.json                                 # the end-to-end target

Timings on a shared machine are noisy; compare ratios within one run.  While stderr is a terminal a tqdm bar
counts the runs (each side of each n: a subprocess of minutes at the target size); ``--quiet`` turns it off.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

COMMON = textwrap.dedent(
    r"""
    import json, os, resource, sys, time
    import numpy as np
    sys.path.insert(0, os.environ["NTKREF_ROOT"])
    cfg = json.loads(sys.argv[1])

    def make_data(n, n_test, seed=0):
        from ntkref.data import load_digits01
        d = load_digits01()
        imgs, labels = (d[0], d[1]) if isinstance(d, tuple) else (d["x"], d["y"])
        imgs = np.asarray(imgs, dtype=np.float64).reshape(imgs.shape[0], -1)
        if imgs.max() > 1.5:
            imgs = imgs / 255.0
        labels = np.where(np.asarray(labels) > 0, 1.0, -1.0)
        rng = np.random.default_rng(seed)
        idx = np.arange(n + n_test) % imgs.shape[0]
        x = np.clip(imgs[idx] + 0.01 * rng.random((n + n_test, imgs.shape[1])), 0.0, 1.0).astype(np.float32)
        return x[:n], labels[idx[:n]], x[n:], labels[idx[n:]]

    def peak_rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def stored_gram(path, fallback):
        if path.endswith(".zarr") and os.path.exists(path):
            import zarr
            return zarr.open_array(path, mode="r")[...]
        if path.endswith(".npy") and os.path.exists(path):
            return np.load(path)
        return fallback
    """
)

NUMPY_SIDE = COMMON + textwrap.dedent(
    r"""
    from ntkref import certify, kernels, krr
    x, y, xt, yt = make_data(cfg["n"], cfg["n_test"])
    out = {}
    t = time.perf_counter(); K = kernels.fc(x, depth=1, W_std=1.0, get="ntk").ntk; out["gram_s"] = time.perf_counter() - t
    t = time.perf_counter()
    # the same CG as the Dask side, whose products accumulate in float64: a float64 copy of K
    # (float32 vectors stall near eps32·cond, far above tol)
    m = krr.solve_cg(K.astype(np.float64), y, cfg["lam"], reduction="mean", tol=cfg["tol"], rank=cfg["rank"])
    out["krr_s"] = time.perf_counter() - t
    out.update(krr_iter=m.n_iter, krr_residual=m.residual)
    alpha = np.asarray(m.alpha_, dtype=np.float64)
    t = time.perf_counter()
    r = certify.certified_radius(alpha, x, xt, y=yt, domain=(0.0, 1.0))
    out["certify_s"] = time.perf_counter() - t
    out.update(median_radius=float(np.median(r)), certified=int(np.sum(r > 0)), peak_bytes=peak_rss())
    out["total_s"] = out["gram_s"] + out["krr_s"] + out["certify_s"]
    np.save(cfg["radii_file"], r)
    if cfg["losses"]:
        from ntkref import machines
        from ntkref.machines import _gram
        # (not timed) the dense solvers in float64, as the Dask side computes, on the very Gram the Dask side stored
        # when there is one (a Gram computed in float32 block by block differs from the whole one by float32
        # rounding, which an ill-conditioned K turns into coefficient differences far above the solvers' own)
        K64 = stored_gram(cfg["store"], K).astype(np.float64)
        del K
        t = time.perf_counter(); _gram.refuse_indefinite(K64, "bench", method="cholesky"); out["psd_s"] = time.perf_counter() - t
        for loss in cfg["losses"]:
            t = time.perf_counter()
            mm = machines.solve(K64, y, loss, cfg["machines_lam"], reduction="mean")
            out[loss] = dict(solve_s=time.perf_counter() - t, gap=mm.duality_gap, n_iter=mm.n_iter,
                             converged=mm.converged, n_sv=int(np.sum(mm.alpha_ != 0)))
            np.save(cfg["alpha_file"] + loss + ".npy", mm.alpha_)
        out["peak_bytes"] = peak_rss()
    print(json.dumps(out))
    """
)

DASK_SIDE = COMMON + textwrap.dedent(
    r"""
    import dask.array as da
    import distributed
    from ntkref import certify, kernels, krr

    def worker_peak():
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    if __name__ == "__main__":
        x, y, xt, yt = make_data(cfg["n"], cfg["n_test"])
        out = {}
        t0 = time.perf_counter()
        import dask
        if cfg["malloc_env"]:
            # distributed's workers start with MALLOC_TRIM_THRESHOLD_ set, which fixes glibc's mmap threshold at
            # 128 KiB: every block temporary is then mmap'd and page-faulted anew (kernel blocks 2x slower,
            # measured); a 256 MiB mmap threshold lets them reuse the heap
            dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": str(2**28)})
        with distributed.LocalCluster(n_workers=cfg["workers"], threads_per_worker=1, processes=True,
                                      memory_limit=cfg["memory_limit"], dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            out["cluster_s"] = time.perf_counter() - t0
            kernels.fc(da.from_array(x[:64], chunks=(32, x.shape[1])), depth=1).ntk.compute()  # warm-up: imports
            xd = da.from_array(x, chunks=(cfg["chunk"], x.shape[1]))
            t = time.perf_counter()
            K = kernels.fc(xd, depth=1, W_std=1.0, get="ntk").ntk       # lazy: one task per upper block
            out["graph_build_s"] = time.perf_counter() - t
            t = time.perf_counter()
            if cfg["store"] == "memory":
                K = K.persist()
                distributed.wait(K)
            else:
                K = kernels.store_gram(K, cfg["store"])
            out["gram_s"] = time.perf_counter() - t
            t = time.perf_counter()
            m = krr.solve_cg(K, y, cfg["lam"], reduction="mean", tol=cfg["tol"], rank=cfg["rank"])
            out["krr_s"] = time.perf_counter() - t
            out.update(krr_iter=m.n_iter, krr_residual=m.residual, krr_converged=m.converged)
            alpha = m.alpha_.compute()
            t = time.perf_counter()
            r = certify.certified_radius(alpha, x, da.from_array(xt, chunks=(cfg["test_chunk"], xt.shape[1])), y=yt,
                                       domain=(0.0, 1.0)).compute()
            out["certify_s"] = time.perf_counter() - t
            if cfg["losses"]:
                from ntkref import machines
                from ntkref._engines.dask import _machines as _dask_machines
                t = time.perf_counter()
                Kv, _, fro = _dask_machines.check_gram(K)
                out["validate_s"] = time.perf_counter() - t
                t = time.perf_counter(); _dask_machines.psd_test(Kv, fro); out["psd_s"] = time.perf_counter() - t
            for loss in cfg["losses"]:
                t = time.perf_counter()
                mm = machines.solve(K, y, loss, cfg["machines_lam"], reduction="mean")
                a = mm.alpha_.compute()
                out[loss] = dict(solve_s=time.perf_counter() - t, gap=mm.duality_gap, n_iter=mm.n_iter,
                                 converged=mm.converged, n_sv=int(np.sum(a != 0)), n_matvec=mm.n_matvec,
                                 max_working_set=mm.max_working_set, columns_gathered=mm.columns_gathered)
                np.save(cfg["alpha_file"] + loss + ".npy", a)
            out["worker_peak_bytes"] = sorted(client.run(worker_peak).values())
        out["client_peak_bytes"] = peak_rss()
        out.update(median_radius=float(np.median(r)), certified=int(np.sum(r > 0)))
        out["total_s"] = out["gram_s"] + out["krr_s"] + out["certify_s"]
        np.save(cfg["radii_file"], r)
        print(json.dumps(out))
    """
)


def run_side(code, cfg, threads=None):
    env = dict(os.environ, NTKREF_ROOT=ROOT)
    with open(os.path.join(cfg["tmp"], "side.py"), "w") as f:
        f.write(code)
    proc = subprocess.run([sys.executable, os.path.join(cfg["tmp"], "side.py"), json.dumps(cfg)], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    import tempfile

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("compare", "target"), default="compare")
    p.add_argument("--n", type=int, nargs="+", default=[4000])
    p.add_argument("--n-test", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="4GB")
    p.add_argument("--chunk", type=int, default=2500, help="rows per chunk (task = chunk × chunk block)")
    p.add_argument("--test-chunk", type=int, default=100)
    p.add_argument("--store", default=None, help="'memory', or a .zarr/.npy path (default: a .zarr in a temp dir)")
    p.add_argument("--lam", type=float, default=1e-4, help="λ, mean convention (λ_sum = n·λ)")
    p.add_argument("--tol", type=float, default=1e-6, help="relative CG residual")
    p.add_argument("--rank", type=int, default=300, help="Nyström preconditioner rank")
    p.add_argument("--losses", nargs="*", default=[], choices=("hinge", "squared_hinge", "epsilon_insensitive",
                                                                 "logistic"),
                   help="kernel machines solved on the same Gram after the KRR (machines.solve, both sides)")
    p.add_argument("--machines-lam", type=float, default=1e-3, help="λ of the machines, mean convention")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.add_argument("--malloc-default", action="store_true",
                   help="leave the workers' malloc settings as distributed sets them (default: MALLOC_MMAP_THRESHOLD_ "
                        "= 256 MiB, see the README's Dask section)")
    args = p.parse_args(argv)
    results = []
    from ntkref.cli._progress import bar

    runs = bar(len(args.n) * (2 if args.mode == "compare" else 1), "bench_dask", quiet=args.quiet, unit=" runs")
    with runs, tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            store = args.store or os.path.join(tmp, f"K{n}.zarr")
            cfg = dict(n=n, n_test=args.n_test, workers=args.workers, memory_limit=args.memory_limit,
                       chunk=args.chunk, test_chunk=args.test_chunk, store=store, lam=args.lam, tol=args.tol,
                       rank=min(args.rank, n), malloc_env=not args.malloc_default, tmp=tmp,
                       losses=list(args.losses), machines_lam=args.machines_lam)
            row = {"n": n, "config": {k: v for k, v in cfg.items() if k != "tmp"}}
            cfg["radii_file"] = os.path.join(tmp, "radii_dask.npy")
            cfg["alpha_file"] = os.path.join(tmp, "alpha_dask_")
            runs.set_postfix_str(f"n = {n}: dask")
            row["dask"] = run_side(DASK_SIDE, cfg)
            runs.update()
            if args.mode == "compare":
                cfg["radii_file"] = os.path.join(tmp, "radii_numpy.npy")
                cfg["alpha_file"] = os.path.join(tmp, "alpha_numpy_")
                runs.set_postfix_str(f"n = {n}: numpy")
                row["numpy"] = run_side(NUMPY_SIDE, cfg)
                runs.update()
                d, s = row["dask"], row["numpy"]
                if "error" not in d and "error" not in s:
                    import numpy as np

                    row["ratio_dask_over_numpy"] = {k: d[k] / s[k] for k in ("gram_s", "krr_s", "certify_s", "total_s")}
                    for loss in args.losses:
                        a_d = np.load(os.path.join(tmp, f"alpha_dask_{loss}.npy"))
                        a_s = np.load(os.path.join(tmp, f"alpha_numpy_{loss}.npy"))
                        row["ratio_dask_over_numpy"][loss] = d[loss]["solve_s"] / s[loss]["solve_s"]
                        row[f"{loss}_alpha_max_rel_diff"] = float(np.max(np.abs(a_d - a_s)) / max(np.max(np.abs(a_s)), 1e-300))
                    if args.losses:
                        row["ratio_dask_over_numpy"]["psd_s"] = d["psd_s"] / s["psd_s"]
                    row["gram_entries_per_s"] = {"dask": n * n / d["gram_s"], "numpy": n * n / s["gram_s"]}
                    row["peak_per_worker_over_numpy_peak"] = max(d["worker_peak_bytes"]) / s["peak_bytes"]
                    ra, rb = np.load(os.path.join(tmp, "radii_dask.npy")), np.load(cfg["radii_file"])
                    fin = np.isfinite(ra) & np.isfinite(rb)
                    row["radii_same_non_finite"] = bool(np.array_equal(ra[~fin], rb[~fin])
                                                        and np.array_equal(np.isfinite(ra), np.isfinite(rb)))
                    row["radii_max_rel_diff"] = (float(np.max(np.abs(ra[fin] - rb[fin]) / np.maximum(rb[fin], 1e-300)))
                                                 if fin.any() else 0.0)
            results.append(row)
            runs.write(json.dumps(row), file=sys.stdout)  # above the bar
            sys.stdout.flush()
    report = {"benchmark": "bench_dask", "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
