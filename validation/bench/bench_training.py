"""Benchmark: a wide two-layer net trained by full-batch subgradient descent next to its kernel machine.

    python -m validation.bench.bench_training [--width 10000] [--n 128] [--steps 1000]

Reports wall time of ``nets.train`` (hinge loss, MNIST 0/1 digits or random data, d = 784), of the
same KM dynamics (``dynamics.subgradient_descent`` with K = Θ̂(w₀)), and the memory of the record:
with ``track_kernel=True`` only O(steps·n) scalars plus three n×n accumulators are stored, not the
Θ̂_t trajectory (steps·n² numbers).
"""
from __future__ import annotations

import argparse
import os
import time
import tracemalloc

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--width", type=int, default=10_000)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--tracked-steps", type=int, default=100, help="steps of the run with track_kernel=True")
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "mnist-subset"))
    args = p.parse_args(argv)
    from ntkref import dynamics, nets

    if os.path.isdir(args.data):
        from ntkref.datasets import binary_digits, load_mnist

        X, y = binary_digits(*load_mnist(args.data))
        X, y = X[: args.n], y[: args.n]
    else:
        rng = np.random.default_rng(0)
        X, y = rng.random((args.n, 784)), np.where(rng.random(args.n) > 0.5, 1.0, -1.0)
    net = nets.Antisymmetric(nets.FullyConnected(X.shape[1], args.width))
    params = net.init(0)
    lam, lr = 0.001 * args.n, 0.1 / args.n  # the paper's mean-hinge λ = 0.001, η̂ = 0.1, in the sum convention

    t = time.perf_counter()
    tr = nets.train(net, params, X, y, "hinge", lam, lr, args.steps, regularize="from_init")
    t_nn = time.perf_counter() - t
    K0 = net.empirical_ntk(params, X)
    t = time.perf_counter()
    km = dynamics.subgradient_descent(K0, y, "hinge", lam, lr, args.steps)
    t_km = time.perf_counter() - t
    gap = float(np.linalg.norm(np.asarray(tr.f_train)[-1] - np.asarray(km.g_train)[-1]))

    tracemalloc.start()
    t = time.perf_counter()
    tr2 = nets.train(net, params, X, y, "hinge", lam, lr, args.tracked_steps, regularize="from_init", track_kernel=True)
    t_tracked = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    record = sum(
        a.nbytes
        for a in (tr2.drift, tr2.convex_integrand, tr2.remainder, tr2.km_kernel, tr2.km_kernel_trapezoid, tr2.kernel0, tr2.f_train, tr2.lprime)
        if a is not None
    )
    full = args.tracked_steps * args.n * args.n * 8
    print(f"two-layer ReLU net, width {args.width}, n = {args.n}, d = {X.shape[1]}, hinge, full batch")
    print(f"  NN  {args.steps} steps: {t_nn:8.2f} s  ({1e3 * t_nn / args.steps:.2f} ms/step)")
    print(f"  KM  {args.steps} steps: {t_km:8.3f} s  ({1e3 * t_km / args.steps:.3f} ms/step)")
    print(f"  final gap ‖f_T − g_T‖ = {gap:.3e} (KM with Θ̂(w₀))")
    print(f"  with track_kernel, {args.tracked_steps} steps: {t_tracked:.2f} s ({1e3 * t_tracked / args.tracked_steps:.1f} ms/step), "
          f"peak traced memory {peak / 2**20:.1f} MiB")
    print(f"  record kept: {record / 2**20:.2f} MiB (the full Θ̂_t trajectory would be {full / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
