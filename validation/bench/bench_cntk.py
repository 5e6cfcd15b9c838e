"""Benchmark: the CNTK-GAP of ntkref against neural-tangents, same inputs, same run (issue 17).

Workload (the issue's): GAP readout, depth 3, 3×3 filters, SAME padding, 32×32×3 images, float64
(standard normal pixels, seeded): a symmetric Gram of 10 images (x2=None) and a cross Gram 10 × 10.
ntkref runs in this process; neural-tangents 0.6.5 (stax Conv(SAME) → Relu ×3 → GlobalAvgPool → Dense,
``jax_enable_x64``, ``kernel_fn`` under ``jax.jit``) in a subprocess of the Python given by ``--nt-python``,
on the same arrays (NHWC there).  Each side is timed ``--repeats`` times per round and the best time is
kept (the 2-core machine is shared, so the least disturbed run is the measurement); neural-tangents' first
call (its compilation) is reported separately and not counted.  Two rounds alternate the sides (ntkref,
neural-tangents, ntkref, neural-tangents; ``--nt-rounds 1`` drops the last), so a change of load during
the run reaches both sides and neither keeps only a disturbed window.  The ratio is
neural-tangents' best time over ntkref's.  Agreement: the largest difference between the two Grams,
scaled by √(K(x,x)K(x′,x′)).  Process CPU times are recorded beside the wall times (both sides use both
cores: ntkref's threads, XLA's); their ratio is less disturbed by other load, but the measurement is the
wall-time ratio.

Before/after in the same run: ntkref's batched route (batches of pairs, every step over a pair's whole
tensors — the implementation before the row blocks, still the route of small images) is forced on the
same inputs and timed the same way, interleaved (``--no-batched`` skips it).

Memory: tracemalloc's peak for ntkref (NumPy registers its allocations there) at the benchmark sizes
and at a larger symmetric Gram, and the estimate of the 2 000-image Gram the function's memory guard
computes (``_plan``: outputs, per-image maps, each worker thread's arrays).

    /work/venv/bin/python validation/bench/bench_cntk.py --nt-python /work/ntvenv/bin/python \\
        [--json validation/bench/bench_cntk.json] [--repeats 3]

Without ``--nt-python`` only ntkref is timed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc

import array_api_compat
import numpy as np

from ntkref.kernels import _cntk
from ntkref.kernels._cntk import _BLOCK_ENTRIES, _Geometry, _row_work_bytes, cntk

DEPTH, Q, SHAPE = 3, 3, (3, 32, 32)

_NT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, jax
    jax.config.update("jax_enable_x64", True)
    from neural_tangents import stax
    data = np.load(sys.argv[1])
    repeats = int(sys.argv[3])
    depth, q = int(data["depth"]), int(data["q"])
    layers = []
    for _ in range(depth):
        layers += [stax.Conv(8, (q, q), padding="SAME"), stax.Relu()]
    layers += [stax.GlobalAvgPool(), stax.Dense(1)]
    kernel_fn = jax.jit(stax.serial(*layers)[2], static_argnames=("get",))
    nhwc = lambda a: np.transpose(a, (0, 2, 3, 1))
    out, timing = {}, {}
    for name, (a, b) in {"symmetric": (data["x"], None), "cross": (data["x"], data["y"])}.items():
        a, b = nhwc(a), (None if b is None else nhwc(b))
        t0 = time.perf_counter()
        k = kernel_fn(a, b, get=("nngp", "ntk"))
        k.ntk.block_until_ready()
        first = time.perf_counter() - t0
        times, cpu = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            k = kernel_fn(a, b, get=("nngp", "ntk"))
            k.ntk.block_until_ready()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        timing[name] = {"first_call_s": first, "times_s": times, "cpu_s": cpu}
        out[name + "_nngp"], out[name + "_ntk"] = np.asarray(k.nngp), np.asarray(k.ntk)
    np.savez(sys.argv[2], **out)
    print(json.dumps(timing))
    """
)


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((10,) + SHAPE), rng.standard_normal((10,) + SHAPE)


def _time_ntkref(x, y, repeats, batched=False):
    """Best-of timings of ntkref; ``batched``: the route of small images (batches of pairs, whole tensors per
    step: the implementation before the row blocks) forced on these images, for a before/after in one run."""
    times = {"symmetric": [], "cross": []}
    cpu = {"symmetric": [], "cross": []}
    out = {}
    saved = _cntk._ROWS_MIN_ENTRIES
    if batched:
        _cntk._ROWS_MIN_ENTRIES = 1 << 62
    try:
        for _ in range(repeats):
            for name, (a, b) in {"symmetric": (x, None), "cross": (x, y)}.items():
                t0, c0 = time.perf_counter(), time.process_time()
                k = cntk(a, b, depth=DEPTH, filter_size=Q, readout="gap")
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                out[name] = k
    finally:
        _cntk._ROWS_MIN_ENTRIES = saved
    return times, cpu, out


def _peak(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _scaled(a, b, da, db):
    """max |a − b| / √(K(x,x)K(x′,x′)) with the self-kernels da, db (from ntkref)."""
    return float(np.max(np.abs(a - b) / np.sqrt(np.outer(da, db))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nt-python", help="a Python with neural-tangents 0.6.5 and jax (x64), for the peer")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nt-rounds", type=int, default=2, choices=(1, 2),
                        help="neural-tangents runs (each with its compilation): 2 = before and after ntkref's second round")
    parser.add_argument("--no-batched", action="store_true",
                        help="skip timing the batched route (the implementation before the row blocks)")
    args = parser.parse_args()
    x, y = _inputs()
    result = {"workload": {"readout": "gap", "depth": DEPTH, "filter_size": Q, "image_shape": list(SHAPE),
                           "dtype": "float64", "symmetric_images": 10, "cross_images": [10, 10]},
              "machine": {"cpus": len(os.sched_getaffinity(0)), "load_average_start": os.getloadavg()}}
    cntk(x[:1], y[:1], depth=DEPTH)  # warm-up (imports, thread pool)
    t_before, c_before, ours = _time_ntkref(x, y, args.repeats)
    if not args.no_batched:
        b_before, bc_before, batched = _time_ntkref(x, y, args.repeats, batched=True)
    nt, nt_timing = None, {"symmetric": {"times_s": [], "cpu_s": [], "first_call_s": []},
                           "cross": {"times_s": [], "cpu_s": [], "first_call_s": []}}

    def run_nt():
        nonlocal nt
        with tempfile.TemporaryDirectory() as tmp:
            inp, outp = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
            np.savez(inp, x=x, y=y, depth=DEPTH, q=Q)
            proc = subprocess.run([args.nt_python, "-c", _NT_SCRIPT, inp, outp, str(args.repeats)],
                                  check=True, capture_output=True, text=True)
            timing = json.loads(proc.stdout.strip().splitlines()[-1])
            nt = dict(np.load(outp))
        for name in ("symmetric", "cross"):
            nt_timing[name]["times_s"] += timing[name]["times_s"]
            nt_timing[name]["cpu_s"] += timing[name]["cpu_s"]
            nt_timing[name]["first_call_s"].append(timing[name]["first_call_s"])

    # rounds: ntkref, its batched route and neural-tangents alternate, so a change of load reaches every side
    if args.nt_python:
        run_nt()
    result["machine"]["load_average_mid"] = os.getloadavg()
    t_after, c_after, _ = _time_ntkref(x, y, args.repeats)
    if not args.no_batched:
        b_after, bc_after, _ = _time_ntkref(x, y, args.repeats, batched=True)
    if args.nt_python and args.nt_rounds > 1:
        run_nt()
    self_x = np.diag(ours["symmetric"].ntk)
    self_x_nngp = np.diag(ours["symmetric"].nngp)
    self_y = np.diag(cntk(y, depth=DEPTH).ntk)
    self_y_nngp = np.diag(cntk(y, depth=DEPTH).nngp)
    for name in ("symmetric", "cross"):
        best = min(t_before[name] + t_after[name])
        entry = {"ntkref_best_s": best, "ntkref_times_s": t_before[name] + t_after[name],
                 "ntkref_cpu_s": c_before[name] + c_after[name]}
        if not args.no_batched:
            b_best = min(b_before[name] + b_after[name])
            entry.update({
                "ntkref_batched_route_best_s": b_best,
                "ntkref_batched_route_times_s": b_before[name] + b_after[name],
                "ntkref_batched_route_cpu_s": bc_before[name] + bc_after[name],
                "speedup_over_batched_route": b_best / best,
                "max_scaled_difference_to_batched_route_ntk": _scaled(
                    ours[name].ntk, batched[name].ntk, self_x, self_x if name == "symmetric" else self_y),
            })
        if nt is not None:
            nt_best = min(nt_timing[name]["times_s"])
            dy, dyn = (self_x, self_x_nngp) if name == "symmetric" else (self_y, self_y_nngp)
            entry.update({
                "neural_tangents_best_s": nt_best,
                "neural_tangents_times_s": nt_timing[name]["times_s"],
                "neural_tangents_cpu_s": nt_timing[name]["cpu_s"],
                "ratio_cpu_nt_over_ntkref": min(nt_timing[name]["cpu_s"]) / min(entry["ntkref_cpu_s"]),
                "neural_tangents_first_call_s": min(nt_timing[name]["first_call_s"]),
                "ratio_nt_over_ntkref": nt_best / best,
                **({"ratio_nt_over_batched_route": nt_best / entry["ntkref_batched_route_best_s"]}
                   if "ntkref_batched_route_best_s" in entry else {}),
                "max_scaled_difference_ntk": _scaled(ours[name].ntk, nt[name + "_ntk"], self_x, dy),
                "max_scaled_difference_nngp": _scaled(ours[name].nngp, nt[name + "_nngp"], self_x_nngp, dyn),
            })
        result[name] = entry
    # memory: measured peaks, and the guard's estimate for a 2000-image symmetric Gram
    result["memory"] = {
        "tracemalloc_peak_MiB_symmetric_10": _peak(lambda: cntk(x, depth=DEPTH)) / 2**20,
        "tracemalloc_peak_MiB_cross_10x10": _peak(lambda: cntk(x, y, depth=DEPTH)) / 2**20,
        "tracemalloc_peak_MiB_symmetric_20": _peak(lambda: cntk(np.concatenate([x, y]), depth=DEPTH)) / 2**20,
    }
    # the estimate cntk itself checks before computing (outputs, per-image maps, every worker's arrays)
    g = _Geometry(32, 32, Q, True)
    n = 2000
    plan = _cntk._plan(n, n, True, SHAPE[0], g, DEPTH, "gap", 8, True, 2**28, None, array_api_compat.numpy)
    result["memory"]["estimate_GiB_symmetric_2000"] = plan[4] / 2**30
    result["memory"]["row_block_path"] = bool(plan[0])
    result["memory"]["per_worker_MiB"] = _row_work_bytes(g, 8, _BLOCK_ENTRIES) / 2**20
    result["machine"]["load_average_end"] = os.getloadavg()
    peer = f", {args.repeats * args.nt_rounds} neural-tangents runs after compilation" if nt is not None else ""
    print(f"CNTK-GAP, depth {DEPTH}, {Q}×{Q}, 32×32×3, float64 (best of {2 * args.repeats} ntkref runs{peer})")
    for name in ("symmetric", "cross"):
        e = result[name]
        line = f"  {name:<9}: ntkref {e['ntkref_best_s']:.2f} s"
        if "ntkref_batched_route_best_s" in e:
            line += f" (batched route {e['ntkref_batched_route_best_s']:.2f} s)"
        if nt is not None:
            line += (f", neural-tangents {e['neural_tangents_best_s']:.2f} s (first call "
                     f"{e['neural_tangents_first_call_s']:.1f} s): ratio {e['ratio_nt_over_ntkref']:.2f}× "
                     f"(CPU time {e['ratio_cpu_nt_over_ntkref']:.2f}×), "
                     f"max scaled difference ntk {e['max_scaled_difference_ntk']:.1e}")
        print(line)
    mem = result["memory"]
    print(f"  peak (tracemalloc): {mem['tracemalloc_peak_MiB_symmetric_10']:.0f} MiB (10 images), "
          f"{mem['tracemalloc_peak_MiB_symmetric_20']:.0f} MiB (20 images); 2000-image Gram estimate "
          f"{mem['estimate_GiB_symmetric_2000']:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
