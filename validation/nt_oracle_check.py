r"""Run ntkref's kernel checker against neural-tangents (an optional peer library).

neural-tangents (NT) computes the ReLU angle as arctan2(√(q₁q₂ − k²), k); on the
diagonal q₁q₂ − k² is pure rounding (~eps·q²), so θ ≈ √eps instead of 0 and the
NTK diagonal is off by ~1e-8 of its value in float64 (docs/conventions.md,
'Mapping to neural-tangents (FC)').  This script shows that :func:`ntkref.testing.check_kernel` finds exactly that:

1. off-diagonal entries on generic inputs (``generic_kernel_inputs``: Gaussian rows in
   general position, d ≥ 2, scaled by 1e-2 … 1e2) with
   ``diag_tol=inf, offdiag_tol=1e-11``: passes, and the largest error seen is printed;
2. the same inputs with ``diag_tol=1e-11``: fails on the diagonal with a minimal
   example (one row) and an error ~1e-8;
3. (extra) off-diagonal entries of near-parallel/antiparallel rows: NT's error
   there is also ~√eps, so the default adversarial search fails off the diagonal too.

NT runs in its own Python (neural-tangents==0.6.5, jax==0.5.3 with x64 enabled),
as a persistent worker process fed NumPy arrays through pipes, so ntkref's
environment needs neither jax nor NT.

    python -m validation.nt_oracle_check --peer-python /path/to/nt-venv/bin/python [--depth 1] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np

WORKER = textwrap.dedent(
    r"""
    import io, struct, sys
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)
    from neural_tangents import stax
    fns = {}
    def kernel_fn(depth, W, b):
        key = (depth, W, b)
        if key not in fns:
            layers = []
            for _ in range(depth):
                layers += [stax.Dense(1, W_std=W, b_std=b), stax.Relu()]
            layers.append(stax.Dense(1, W_std=W, b_std=b))
            fns[key] = stax.serial(*layers)[2]
        return fns[key]
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = inp.read(8)
        if len(head) < 8:
            break
        (size,) = struct.unpack("<Q", head)
        with np.load(io.BytesIO(inp.read(size)), allow_pickle=False) as z:
            x1 = z["x1"]; x2 = z["x2"] if "x2" in z.files else None
            depth = int(z["depth"]); W = float(z["W"]); b = float(z["b"])
        K = np.asarray(kernel_fn(depth, W, b)(x1, x2, "ntk"), dtype=np.float64)
        buf = io.BytesIO(); np.save(buf, K, allow_pickle=False); data = buf.getvalue()
        out.write(struct.pack("<Q", len(data))); out.write(data); out.flush()
    """
)


class NTWorker:
    """A neural-tangents NTK as a callable (x1, x2=None) -> (n1, n2) float64, run in another Python."""

    def __init__(self, python, depth=1, W_std=1.0, b_std=0.0):
        self.depth, self.W, self.b = depth, float(W_std), float(b_std)
        env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
        self.proc = subprocess.Popen([python, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.calls = 0

    def __call__(self, x1, x2=None):
        arrays = {"x1": np.asarray(x1, dtype=np.float64), "depth": self.depth, "W": self.W, "b": self.b}
        if x2 is not None:
            arrays["x2"] = np.asarray(x2, dtype=np.float64)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        data = buf.getvalue()
        self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
        self.proc.stdin.flush()
        head = self.proc.stdout.read(8)
        if len(head) < 8:
            raise RuntimeError("the neural-tangents worker died (is --peer-python right?)")
        (size,) = struct.unpack("<Q", head)
        self.calls += 1
        return np.load(io.BytesIO(self.proc.stdout.read(size)), allow_pickle=False)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run(python, depth=1, max_examples=60):
    from ntkref import testing as T

    nt = NTWorker(python, depth=depth)
    results = {"neural_tangents_python": python, "depth": depth, "W_std": 1.0, "b_std": 0.0}
    try:
        generic = T.generic_kernel_inputs()
        off = T.check_kernel(nt, depth=depth, inputs=generic, diag_tol=math.inf, offdiag_tol=1e-11,
                             max_examples=max_examples, battery=False, raise_on_failure=False)
        results["offdiag_generic"] = {"passed": off.passed, "max_error": off.max_error, "n_examples": off.n_examples}
        print("1. off-diagonal, generic inputs, offdiag_tol=1e-11:\n" + str(off) + "\n")

        diag = T.check_kernel(nt, depth=depth, inputs=generic, diag_tol=1e-11, offdiag_tol=1e-11,
                              max_examples=max_examples, battery=False, raise_on_failure=False)
        f = diag.failure
        results["diagonal"] = {"passed": diag.passed, "max_error": diag.max_error,
                               "minimal_example_error": None if f is None else f.error,
                               "minimal_example_rows": None if f is None else list(f.inputs["x1"].shape),
                               "entry": None if f is None else f.entry}
        print("2. diagonal included, diag_tol=1e-11:\n" + str(diag) + "\n")

        adv = T.check_kernel(nt, depth=depth, diag_tol=math.inf, offdiag_tol=1e-11,
                             inputs=T.kernel_inputs(symmetric=False, scale_range=(1e-2, 1e2)),
                             max_examples=max_examples, raise_on_failure=False)
        f = adv.failure
        results["offdiag_adversarial"] = {"passed": adv.passed, "max_error": adv.max_error,
                                          "minimal_example_error": None if f is None else f.error}
        print("3. off-diagonal, near-parallel/antiparallel rows allowed:\n" + str(adv) + "\n")
        results["nt_calls"] = nt.calls
    finally:
        nt.close()
    return results


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m validation.nt_oracle_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--peer-python", required=True, help="a Python with neural-tangents==0.6.5, jax==0.5.3")
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--max-examples", type=int, default=60)
    p.add_argument("--out", default=None, help="write the numbers as JSON")
    args = p.parse_args(argv)
    res = run(args.peer_python, args.depth, args.max_examples)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=float)
    ok = res["offdiag_generic"]["passed"] and not res["diagonal"]["passed"]
    print("expected outcome (off-diagonal passes at 1e-11, diagonal fails at ~1e-8):", "YES" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
