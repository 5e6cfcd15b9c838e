"""Benchmark: ``kernels.fc(..., error_bound=True)`` (proven per-entry bounds) against the plain kernel.

Same run, same inputs, alternating calls; reports the best of ``--repeat`` wall times and the peak traced
memory (tracemalloc: NumPy's allocations) of each, and their ratios (the target: ≤ 2× time).

    python validation/bench/error_bound.py [--n 3000] [--d 100] [--depth 3] [--dtype float64] [--b-std 0.1]
        [--out file.json]

``--b-std`` > 0: ReLU with biases (ntkref/kernels/_rounding_bias.py); default 0 (the bias-free bound).
``--activation erf``: the erf bound (ntkref/kernels/_rounding_erf.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc

import numpy as np

from ntkref.kernels import fc


def _measure(x, depth, error_bound, repeat, b_std=0.0, activation="relu"):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        k = fc(x, depth=depth, error_bound=error_bound, b_std=b_std, activation=activation)
        best = min(best, time.perf_counter() - t0)
        del k
    tracemalloc.start()
    k = fc(x, depth=depth, error_bound=error_bound, b_std=b_std, activation=activation)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del k
    return best, peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--b-std", type=float, default=0.0)
    p.add_argument("--activation", default="relu", choices=("relu", "erf"))
    p.add_argument("--out")
    a = p.parse_args(argv)
    x = np.random.default_rng(0).standard_normal((a.n, a.d)).astype(a.dtype)
    fc(x[:64], depth=a.depth, error_bound=True, b_std=a.b_std, activation=a.activation)  # warm up
    rows = {}
    for label, eb in (("plain", False), ("error_bound", True)):
        rows[label] = {"time_s": None, "peak_bytes": None}
    times = {"plain": [], "error_bound": []}
    peaks = {}
    for _ in range(a.repeat):  # alternate, so that drifts of the machine hit both
        for label, eb in (("plain", False), ("error_bound", True)):
            t, peak = _measure(x, a.depth, eb, 1, a.b_std, a.activation)
            times[label].append(t)
            peaks[label] = peak
    for label in rows:
        rows[label] = {"time_s": min(times[label]), "times_s": times[label], "peak_bytes": peaks[label]}
    result = {
        "benchmark": "fc error_bound vs plain (NumPy)",
        "n": a.n, "d": a.d, "depth": a.depth, "dtype": a.dtype, "b_std": a.b_std, "activation": a.activation, "numpy": np.__version__,
        **rows,
        "time_ratio": rows["error_bound"]["time_s"] / rows["plain"]["time_s"],
        "memory_ratio": rows["error_bound"]["peak_bytes"] / rows["plain"]["peak_bytes"],
    }
    text = json.dumps(result, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
