"""Benchmark: FC NTK Gram matrices, ntkref vs neural-tangents (when importable).

Each configuration runs in a fresh subprocess; we report wall time of the
kernel call and the peak resident memory it added (peak RSS during the call,
reset through /proc/self/clear_refs just before it, minus the RSS before it;
Linux only), as a multiple of the output array's size (one n×n NTK).  Data: the first n MNIST digits of the subset
(pixels in [0, 1], d = 784) if found, else uniform random pixels.

    python -m validation.bench.bench_kernels                       # ntkref only
    python -m validation.bench.bench_kernels --peer-python PATH    # + neural-tangents
        (PATH: a Python with neural-tangents==0.6.5 jax==0.5.3 jaxlib==0.5.3)

neural-tangents runs `jax.jit(kernel_fn, static_argnames="get")` on the
whole matrix (x64 enabled for float64); the first (compiling) call is not
timed.  ntkref runs `ntkref.kernels.fc(x, depth=L, get="ntk")`.

Besides wall time the table shows CPU seconds (all threads of the process):
on a machine shared with other jobs the wall time of either side depends on
the load, and ``--repeat R`` runs the pair R times, interleaved, and keeps
each side's fastest run.
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

WORKER = textwrap.dedent(
    r"""
    import json, os, resource, sys, time
    import numpy as np
    impl, n, depth, dtype, data_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    def rss_bytes():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    def reset_peak():
        # Linux: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    def peak_bytes():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    x = np.load(data_file, allow_pickle=False)[:n].astype(dtype)
    if impl == "ntkref":
        sys.path.insert(0, sys.argv[6])
        from ntkref import kernels
        kernels.fc(x[:64], depth=depth, get="ntk")  # warm-up (imports, caches)
        base = rss_bytes()
        reset_peak()
        t, c = time.perf_counter(), time.process_time()
        out = kernels.fc(x, depth=depth, get="ntk").ntk
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    else:
        import jax
        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        from neural_tangents import stax
        layers = []
        for _ in range(depth):
            layers += [stax.Dense(512, W_std=1.0, b_std=None), stax.Relu()]
        _, _, kernel_fn = stax.serial(*layers, stax.Dense(1, W_std=1.0, b_std=None))
        kf = jax.jit(kernel_fn, static_argnames="get")
        xj = jax.numpy.asarray(x)
        # XLA keeps the buffers of the compiling call for the timed one: measure the peak from here
        base = rss_bytes()
        reset_peak()
        kf(xj, None, get="ntk").block_until_ready()  # compile at full size (not timed)
        t, c = time.perf_counter(), time.process_time()
        out = kf(xj, None, get="ntk").block_until_ready()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        out = np.asarray(out)
    peak = peak_bytes()
    print(json.dumps(dict(impl=impl, n=n, depth=depth, dtype=dtype, wall=wall, cpu=cpu,
                          peak_extra=max(peak - base, 0), out_bytes=out.size * out.dtype.itemsize,
                          checksum=float(np.sum(out[:3, :3])))))
    """
)


def load_data(data_dir, n_max):
    """First n_max MNIST digits of the subset in [0, 1] (d = 784), else uniform random pixels."""
    import numpy as np

    sys.path.insert(0, ROOT)
    x = None
    if data_dir and os.path.isdir(data_dir):
        from ntkref.datasets import load_mnist

        imgs, _ = load_mnist(data_dir)
        if imgs.shape[0] >= n_max:
            x = imgs[:n_max].reshape(n_max, -1).astype(np.float64) / 255.0
    source = "MNIST subset"
    if x is None:
        x, source = np.random.default_rng(0).random((n_max, 784)), "uniform random pixels"
    return x, source


def run(python, impl, n, depth, dtype, data_file):
    res = subprocess.run(
        [python, "-c", WORKER, impl, str(n), str(depth), dtype, data_file, ROOT],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        return dict(impl=impl, n=n, depth=depth, dtype=dtype, error=res.stderr.strip().splitlines()[-1:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def _fastest(best, new):
    """Keep the run with the smaller wall time (an error only if every run failed)."""
    if best is None or "error" in best:
        return new
    if "error" in new:
        return best
    return new if new["wall"] < best["wall"] else best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    p.add_argument("--depth", type=int, nargs="+", default=[1, 3])
    p.add_argument("--dtype", nargs="+", default=["float64", "float32"])
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "mnist-subset"))
    p.add_argument("--peer-python", default=None, help="a Python interpreter with neural-tangents installed")
    p.add_argument("--out", default=os.path.join(HERE, "out", "kernels.json"))
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration (interleaved); the fastest is kept")
    args = p.parse_args(argv)
    import tempfile

    import numpy as np

    x, source = load_data(args.data, max(args.n))
    tmp = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)
    np.save(tmp.name, x)
    print(f"data: {source}, d = {x.shape[1]}")
    rows = []
    print(f"{'n':>6} {'depth':>5} {'dtype':>8} | {'ntkref s':>8} {'cpu s':>7} {'peak/out':>8} | "
          f"{'NT s':>8} {'cpu s':>7} {'peak/out':>8} | {'ratio':>6} {'cpu ratio':>9}")
    for dtype in args.dtype:
        for depth in args.depth:
            for n in args.n:
                ours = peer = None
                for _ in range(max(1, args.repeat)):
                    ours = _fastest(ours, run(sys.executable, "ntkref", n, depth, dtype, tmp.name))
                    if args.peer_python:
                        peer = _fastest(peer, run(args.peer_python, "nt", n, depth, dtype, tmp.name))
                rows.append(dict(ntkref=ours, neural_tangents=peer))

                def fmt(r):
                    if r is None:
                        return f"{'-':>8} {'-':>7} {'-':>8}"
                    if "error" in r:
                        return f"{'error':>8} {'':>7} {'':>8}"
                    return f"{r['wall']:8.2f} {r['cpu']:7.2f} {r['peak_extra'] / r['out_bytes']:8.2f}"

                ok = peer and "error" not in peer and "error" not in ours
                ratio = ours["wall"] / peer["wall"] if ok else float("nan")
                cpu_ratio = ours["cpu"] / peer["cpu"] if ok else float("nan")
                print(f"{n:>6} {depth:>5} {dtype:>8} | {fmt(ours)} | {fmt(peer)} | {ratio:6.2f} {cpu_ratio:9.2f}",
                      flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(data=source, rows=rows), fh, indent=1)
    os.unlink(tmp.name)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
