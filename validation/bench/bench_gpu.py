"""GPU benchmark: the FC NTK on CuPy against a naive CuPy recursion, a jitted JAX recursion and the floor.

Every implementation runs in its own subprocess (JAX and CuPy keep separate memory pools), on the same
inputs, one after the other on the same GPU, best of ``--repeat`` runs after a warm-up at full size:

- ``ntkref``: ``ntkref.kernels.fc(x, depth=L, get="ntk")`` on a CuPy array (the fused kernel);
- ``ntkref_array_api``: the same call with ``engine="array_api"`` (the blocked array-API path);
- ``naive_cupy``: the textbook arccos recursion in plain CuPy (ρ = clip(Σ/√(q q′)), θ = arccos ρ);
- ``jax``: the same recursion under ``jax.jit`` (x64 enabled for float64; for float32 once at JAX's
  default matmul precision, which may use TF32 on the GPU, and once at ``"highest"``);
- ``floor``: one X·Xᵀ plus three elementwise passes over the n² output (no arithmetic to speak of): no
  implementation that reads the Gram of a matrix product can be faster.

Peak device memory is each pool's high-water mark during the timed call, less what was held before
it (CuPy: a counting allocator over the default pool; JAX: ``peak_bytes_in_use``), as a multiple of one
n×n output.  Accuracy: each implementation's first 256 rows × first 256 columns and its diagonal are
compared with ntkref's float64 NumPy result on the host, as max |error| / √(K(x,x)K(x′,x′)).

Data: ``uniform`` (default) draws pixels in [0, 1], d = 784 (few near-parallel pairs); ``digits``
tiles the embedded MNIST 0/1 digits with 1 % noise (many near-parallel pairs, the hard case for the
angle refinement).

    python -m validation.bench.bench_gpu                          # n = 8000, 20000, 40000; f64 and f32
    python -m validation.bench.bench_gpu --n 40000 --dtype float64 --repeat 3 --out FILE.json
    python -m validation.bench.bench_gpu --suite machines --n 1700 20000   # machines.fit, NumPy vs CuPy
    python -m validation.bench.bench_gpu --suite certify                   # certified_radius, NumPy vs CuPy

``--suite machines``: ``machines.fit(K, y, "hinge", λ)`` (λ = 0.1, sum convention) on the two-layer NTK of
``--data digits`` rows (labels from the digits), timed on NumPy (host) and on CuPy (K on the device), with
each solve's duality gap.  ``--suite certify``: ``certify.certified_radius`` (tight, ℓ∞, pixels in [0, 1])
of the KRR machine on 10 000 training and 2 000 test rows, NumPy vs CuPy.

Prints one JSON line per run and writes the whole table as JSON (``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

WORKER = textwrap.dedent(
    r"""
    import json, math, os, sys, time
    import numpy as np
    impl, n, depth, dtype, data_file, root, repeat, corner_file = sys.argv[1:9]
    n, depth, repeat = int(n), int(depth), int(repeat)
    sys.path.insert(0, root)
    x_host = np.load(data_file, allow_pickle=False)[:n].astype(dtype)
    d = x_host.shape[1]
    PI = math.pi

    def naive(xp, x, acos):
        g = x @ x.T / d
        q = xp.diagonal(g) if hasattr(xp, "diagonal") else xp.diag(g)
        nngp, ntk = g, g
        for _ in range(depth):
            s = xp.sqrt(q)
            norm = s[:, None] * s[None, :]
            rho = xp.clip(nngp / norm, -1.0, 1.0)
            th = acos(rho)
            new = norm * (xp.sin(th) + (PI - th) * xp.cos(th)) / (2 * PI)
            ntk = new + ntk * (PI - th) / (2 * PI)
            nngp = new
            q = q / 2
        return ntk

    if impl.startswith("jax"):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        prec = "highest" if impl == "jax_highest" else None
        dev = jax.devices()[0]
        def fn(x):
            if prec is None:
                return naive(jnp, x, jnp.arccos)
            with jax.default_matmul_precision(prec):
                return naive(jnp, x, jnp.arccos)
        f = jax.jit(fn)
        x = jax.device_put(jnp.asarray(x_host), dev)
        out = f(x).block_until_ready()  # compile at full size, not timed
        del out
        base = dev.memory_stats().get("bytes_in_use", 0)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            out = f(x).block_until_ready()
            times.append(time.perf_counter() - t)
            if _ < repeat - 1:
                del out
        peak = dev.memory_stats().get("peak_bytes_in_use", 0) - base
        corner = np.asarray(out[:256, :256]); diag = np.asarray(jnp.diagonal(out))
    else:
        import cupy
        pool = cupy.get_default_memory_pool()
        high = [0]
        def alloc(size):
            mem = pool.malloc(size)
            high[0] = max(high[0], pool.used_bytes())
            return mem
        cupy.cuda.set_allocator(alloc)
        x = cupy.asarray(x_host)
        sync = cupy.cuda.Device().synchronize
        if impl.startswith("ntkref"):
            from ntkref import kernels
            engine = "array_api" if impl == "ntkref_array_api" else "auto"
            run = lambda: kernels.fc(x, depth=depth, get="ntk", engine=engine).ntk
        elif impl == "naive_cupy":
            run = lambda: naive(cupy, x, cupy.arccos)
        elif impl == "floor":
            def run():
                g = x @ x.T
                g *= 0.5
                g += 1.0
                g *= 2.0
                return g
        out = run(); sync(); del out  # warm-up at full size (kernel compilation, cuBLAS handles)
        times = []
        for r in range(repeat):
            sync()
            base = pool.used_bytes(); high[0] = base
            t = time.perf_counter()
            out = run()
            sync()
            times.append(time.perf_counter() - t)
            peak = high[0] - base
            if r < repeat - 1:
                del out
        corner = cupy.asnumpy(out[:256, :256]); diag = cupy.asnumpy(cupy.diagonal(out))
    np.savez(corner_file, corner=corner.astype(np.float64), diag=diag.astype(np.float64))
    print(json.dumps(dict(impl=impl, n=n, depth=depth, dtype=dtype, best=min(times), times=times,
                          peak_extra=int(peak), out_bytes=int(n * n * np.dtype(dtype).itemsize))))
    """
)


def make_data(kind, n, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random((n, 784))
    sys.path.insert(0, ROOT)
    from ntkref.data import load_digits01

    imgs = load_digits01()[0].reshape(-1, 784).astype(np.float64)
    if imgs.max() > 1:
        imgs = imgs / 255.0
    x = imgs[rng.integers(0, imgs.shape[0], size=n)]
    return np.clip(x + 0.01 * rng.standard_normal(x.shape), 0.0, 1.0)


def reference_corner(x, depth):
    """ntkref's float64 NumPy result on the first 256 rows, and the diagonal (the accuracy yardstick)."""
    sys.path.insert(0, ROOT)
    import numpy as np

    from ntkref import kernels

    k = kernels.fc(np.asarray(x[:256], dtype=np.float64), depth=depth, get="ntk").ntk
    diag = kernels.fc_diagonal(np.asarray(x, dtype=np.float64), depth=depth).ntk
    return k, diag


def scaled_error(corner_file, ref, ref_diag):
    import numpy as np

    got = np.load(corner_file)
    scale = np.sqrt(np.outer(ref_diag[:256], ref_diag[:256]))
    err_c = float(np.max(np.abs(got["corner"] - ref) / scale))
    err_d = float(np.max(np.abs(got["diag"] - ref_diag) / ref_diag))
    return max(err_c, err_d)


def run_one(impl, n, depth, dtype, data_file, repeat, timeout):
    fd, corner = tempfile.mkstemp(suffix=".npz")
    os.close(fd)
    try:
        res = subprocess.run(
            [sys.executable, "-c", WORKER, impl, str(n), str(depth), dtype, data_file, ROOT, str(repeat), corner],
            capture_output=True, text=True, check=False, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return dict(impl=impl, n=n, depth=depth, dtype=dtype, error=f"timed out after {timeout} s"), None
    if res.returncode != 0:
        return dict(impl=impl, n=n, depth=depth, dtype=dtype, error=res.stderr.strip().splitlines()[-3:]), None
    return json.loads(res.stdout.strip().splitlines()[-1]), corner


def _digits_with_labels(n, seed=0):
    import numpy as np

    sys.path.insert(0, ROOT)
    from ntkref.data import load_digits01

    imgs, labels = load_digits01()
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, imgs.shape[0], size=n)
    x = imgs[pick].reshape(n, 784).astype(np.float64) / 255.0
    if n > imgs.shape[0]:  # tiled: 1 % noise keeps the rows distinct
        x = np.clip(x + 0.01 * rng.standard_normal(x.shape), 0.0, 1.0)
    y = np.where(labels[pick] == 1, 1.0, -1.0)
    return x, y


def _timed(fn, sync=None):
    import time

    t = time.perf_counter()
    out = fn()
    if sync is not None:
        sync()
    return out, time.perf_counter() - t


def suite_machines(ns, lam=0.1, repeat=1):
    import cupy

    from ntkref import kernels, machines

    sync = cupy.cuda.Device().synchronize
    rows = []
    for n in ns:
        x, y = _digits_with_labels(n)
        K = kernels.fc(x, depth=1, get="ntk").ntk
        Kg, yg = cupy.asarray(K), cupy.asarray(y)
        machines.fit(Kg[:64, :64], yg[:64], "hinge", lam)  # warm-up (kernels compiled, handles made)
        row = dict(suite="machines", n=n, lam=lam, loss="hinge")
        for name, KK, yy, s in (("numpy", K, y, None), ("cupy", Kg, yg, sync)):
            best = None
            for _ in range(repeat):
                m, t = _timed(lambda: machines.solve(KK, yy, "hinge", lam), s)
                best = t if best is None else min(best, t)
            row[f"{name}_s"] = best
            row[f"{name}_gap"] = float(m.duality_gap)
            row[f"{name}_converged"] = bool(m.converged)
        row["speedup"] = row["numpy_s"] / row["cupy_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def suite_certify(n_train=10000, n_test=2000):
    import cupy
    import numpy as np

    from ntkref import certify, kernels, machines

    sync = cupy.cuda.Device().synchronize
    x, y = _digits_with_labels(n_train + n_test, seed=1)
    xtr, ytr, xte = x[:n_train], y[:n_train], x[n_train:]
    K = kernels.fc(xtr, depth=1, W_std=1.0, get="ntk").ntk
    alpha = machines.fit(K, ytr, "squared", 0.1)
    row = dict(suite="certify", n_train=n_train, n_test=n_test, method="tight", norm="linf")
    res = {}
    for name, conv, s in (("numpy", lambda a: a, None), ("cupy", cupy.asarray, sync)):
        args = (conv(alpha), conv(xtr), conv(xte))
        if name == "cupy":
            certify.certified_radius(args[0], args[1], args[2][:16], domain=(0.0, 1.0))  # warm-up
        r, t = _timed(lambda: certify.certified_radius(*args, method="tight", norm="linf", domain=(0.0, 1.0)), s)
        res[name] = r if name == "numpy" else cupy.asnumpy(r)
        row[f"{name}_s"] = t
    row["speedup"] = row["numpy_s"] / row["cupy_s"]
    row["max_radius_difference"] = float(np.max(np.abs(res["numpy"] - res["cupy"])))
    print(json.dumps(row), flush=True)
    return [row]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=("kernel", "machines", "certify"), default="kernel")
    p.add_argument("--n", type=int, nargs="+", default=[8000, 20000, 40000])
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    p.add_argument("--data", choices=("uniform", "digits"), default="uniform")
    p.add_argument("--impl", nargs="+",
                   default=["ntkref", "ntkref_array_api", "naive_cupy", "jax", "jax_highest", "floor"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=int, default=300, help="seconds per implementation and size")
    p.add_argument("--out", default=os.path.join(HERE, "out", "gpu.json"))
    args = p.parse_args(argv)
    import numpy as np

    if args.suite != "kernel":
        rows = suite_machines(args.n, repeat=args.repeat) if args.suite == "machines" else suite_certify()
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(dict(suite=args.suite, rows=rows), fh, indent=1)
        os.replace(tmp, args.out)
        print(f"wrote {args.out}")
        return

    x = make_data(args.data, max(args.n))
    fd, data_file = tempfile.mkstemp(suffix=".npy")
    os.close(fd)
    np.save(data_file, x)
    ref, ref_diag = reference_corner(x, args.depth)
    rows = []
    try:
        for dtype in args.dtype:
            for n in args.n:
                for impl in args.impl:
                    if impl == "jax_highest" and dtype == "float64":
                        continue  # float64 has one precision
                    row, corner = run_one(impl, n, args.depth, dtype, data_file, args.repeat, args.timeout)
                    if corner is not None:
                        row["max_scaled_error"] = scaled_error(corner, ref, ref_diag[:n])
                        os.unlink(corner)
                        row["peak_over_output"] = row["peak_extra"] / row["out_bytes"]
                    row["data"] = args.data
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        os.unlink(data_file)
    # ratios against the peers of the same (n, dtype)
    for row in rows:
        if row["impl"] != "ntkref" or "best" not in row:
            continue
        for other in rows:
            if other["n"] == row["n"] and other["dtype"] == row["dtype"] and "best" in other and other is not row:
                row[f"ratio_to_{other['impl']}"] = row["best"] / other["best"]
    gpu = None
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except Exception:  # noqa: BLE001 - the report says it could not name the card
        pass
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    summary = dict(gpu=gpu, depth=args.depth, d=784, data=args.data, repeat=args.repeat, rows=rows)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(summary, fh, indent=1)
    os.replace(tmp, args.out)
    for row in rows:
        if row["impl"] == "ntkref" and "best" in row:
            ratios = {k[9:]: round(v, 3) for k, v in row.items() if k.startswith("ratio_to_")}
            print(f"n={row['n']} {row['dtype']}: ntkref {row['best']:.4f} s, peak/out {row['peak_over_output']:.2f}, "
                  f"err {row['max_scaled_error']:.1e}; ratios {ratios}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
