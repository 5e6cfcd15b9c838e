"""Benchmark: proving a Gram PSD — ``machines.kernel_gram``'s O(n²) margin vs Rump's O(n³/3) Cholesky test.

For each n: random rows (d = ``--d``, with one duplicated row, so K is singular and Rump's test can prove only a
margin), the FC NTK at ``--depth``.  Times (best of ``--repeat``, same process, same data): the plain kernel
(``kernels.fc``), ``machines.kernel_gram`` (the kernel with its proven bound plus the margin), and Rump's test on
the plain Gram (``certify._checks.prove_psd``, what ``check_psd=True`` runs for n ≤ 4096).  Also the margins, both
relative to max Kᵢᵢ, and tracemalloc's peak of each step.  JSON output; ratios are what to compare (absolute
times only with the machine named in the JSON).

    python validation/bench/psd_margin.py --n 1000 2000 4000 --json validation/bench/psd_margin.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import tracemalloc

import numpy as np


def _best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return min(times), peak, out


def main(argv=None):
    from ntkref import kernels, machines
    from ntkref.certify._checks import prove_psd

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 4000])
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    for n in args.n:
        X = np.random.default_rng(0).standard_normal((n, args.d))
        X[1] = X[0]
        t_fc, m_fc, K = _best(lambda: kernels.fc(X, depth=args.depth, get="ntk").ntk, args.repeat)
        t_kg, m_kg, G = _best(lambda: machines.kernel_gram(X, depth=args.depth), args.repeat)
        t_r, m_r, (proven, margin) = _best(lambda: prove_psd(K, np), args.repeat)
        scale = float(np.max(np.diag(K)))
        rows.append({"n": n, "fc_s": t_fc, "kernel_gram_s": t_kg, "rump_s": t_r,
                     "kernel_gram_over_fc": t_kg / t_fc, "rump_over_fc": t_r / t_fc,
                     "peak_bytes": {"fc": m_fc, "kernel_gram": m_kg, "rump": m_r},
                     "margin_kernel_gram_rel": G.psd_margin / scale, "margin_rump_rel": margin / scale,
                     "rump_proved_pd": bool(proven)})
        print(json.dumps(rows[-1]))
    out = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
           "omp_threads": os.environ.get("OMP_NUM_THREADS"), "d": args.d, "depth": args.depth, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
