"""Benchmark: the cost of the proven certificates of ``machines.solve`` (issue 25, item 4), old vs new in one run.

"new" is this working tree (compensated g = Kα, the proven gap, Rump's PSD test); "old" is the package as committed
at ``--old-rev`` (default HEAD), extracted read-only with ``git archive`` into a temporary folder and run in a
subprocess with the same data.  Data: the first ``--n`` (default 1 700) embedded MNIST 0/1 digits and the
two-layer ReLU NTK Gram of ``bench_machines.py``.  For each loss: best-of-``--repeat`` wall time of
``machines.solve`` with its default checks, tracemalloc's peak during one solve (K excluded), converged,
duality gap and gap_rounding; JSON output (``--json``), and the ratio new/old per loss.

    python validation/bench/machines_proof.py --n 1700 --repeat 5 --json validation/bench/machines_proof.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CHILD = r"""
import json, sys, time, tracemalloc, warnings
import numpy as np
from ntkref import machines
K = np.load(sys.argv[1]); y = np.load(sys.argv[2]); repeat = int(sys.argv[3]); cases = json.loads(sys.argv[4])
out = {}
for loss, lam in cases:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = []
        for _ in range(repeat):
            t = time.perf_counter(); m = machines.solve(K, y, loss, lam); times.append(time.perf_counter() - t)
        tracemalloc.start(); machines.solve(K, y, loss, lam); peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    out[loss] = {"lam": lam, "time_s": min(times), "peak_bytes": peak, "converged": bool(m.converged),
                 "duality_gap": float(m.duality_gap), "gap_rounding": float(m.gap_rounding),
                 "psd_margin": float(getattr(m, "psd_margin", float("nan")))}
print(json.dumps(out))
"""


def _run(pythonpath, Kf, yf, repeat, cases):
    env = dict(os.environ, PYTHONPATH=pythonpath, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    res = subprocess.run([sys.executable, "-c", _CHILD, Kf, yf, str(repeat), json.dumps(cases)], env=env,
                         capture_output=True, text=True, check=True, cwd=pythonpath)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1700)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--old-rev", default="HEAD")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.join(REPO, "validation", "bench"))
    sys.path.insert(0, REPO)
    import numpy as np
    from bench_machines import digits, gram

    x, y, source = digits(args.n)
    K = np.asarray(gram(x))
    cases = [["hinge", 1e-2], ["squared", 0.1], ["logistic", 1e-2]]
    with tempfile.TemporaryDirectory() as tmp:
        Kf, yf = os.path.join(tmp, "K.npy"), os.path.join(tmp, "y.npy")
        np.save(Kf, K)
        np.save(yf, y)
        old_dir = os.path.join(tmp, "old")
        os.makedirs(old_dir)
        archive = subprocess.run(["git", "-C", REPO, "archive", args.old_rev, "ntkref"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", old_dir], input=archive, check=True)
        old = _run(old_dir, Kf, yf, args.repeat, cases)
        new = _run(REPO, Kf, yf, args.repeat, cases)
    report = {"n": args.n, "data": source, "old_rev": args.old_rev, "repeat": args.repeat,
              "threads": os.environ.get("OMP_NUM_THREADS", "1"), "old": old, "new": new,
              "time_ratio_new_over_old": {k: new[k]["time_s"] / old[k]["time_s"] for k in new},
              "peak_ratio_new_over_old": {k: new[k]["peak_bytes"] / max(old[k]["peak_bytes"], 1) for k in new}}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    tracemalloc  # (imported for the child's use of the same module set)
    time  # noqa: B018
    sys.exit(main())
