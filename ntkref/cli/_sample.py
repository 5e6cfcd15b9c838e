"""``ntkref compare --kind kernel --sample N / --rows K``: sampled checks of a Gram too large to read whole.

The candidate is a ``.npy`` file opened as a memory map (``np.load(path, mmap_mode="r")``: only the pages of the
sampled entries are read) or a Zarr array (``K.zarr``, opened read-only through the Dask engine, which owns
zarr: the seam ``ntkref._lib.dispatch.open_zarr``).  The reference ``kernels.fc`` is computed for the sampled
pairs only, on the chosen backend, and the verdict and its statistics come from
:func:`ntkref.kernels._sampled.check_sampled` (shared with ``ntkref.testing.check_gram_sample``): with 0
failures in N uniform draws, fewer than 1 − 0.05^{1/N} ≈ 3/N of the entries are wrong at 95 % confidence (the
rule of three); with k failures, the fraction k/N with its Clopper–Pearson interval — the report prints which.
"""
from __future__ import annotations

import json
import os

import numpy as np  # host-side file reads (the reference runs on the chosen backend)

from .._lib import dispatch
from ..kernels._sampled import check_sampled
from ._compute import resolve_family_options
from ._io import EXIT_DISAGREE, EXIT_OK, CLIError, Target, load_array, replace_atomically_or_fail

SCHEMA = "ntkref.compare-sample/1"


def open_candidate(spec):
    """The candidate Gram without reading it: a ``.npy`` memory map or a read-only Zarr array."""
    path = spec.rstrip(os.sep)
    if path.endswith(".zarr"):
        if not os.path.isdir(path):
            raise CLIError(f"--candidate: no such Zarr array {spec!r} (a .zarr folder).")
        return dispatch.open_zarr.get("dask")(path)
    if not path.endswith(".npy"):
        raise CLIError(f"--candidate: with --sample/--rows the Gram must be a .npy file (read as a memory map) or a "
                       f".zarr array; got {spec!r} (a .npz archive cannot be memory-mapped: save the Gram with "
                       "numpy.save, or numpy.lib.format.open_memmap for one larger than memory).")
    if not os.path.isfile(path):
        raise CLIError(f"--candidate: no such file {spec!r}.")
    with open(path, "rb") as f:
        if not f.read(6).startswith(b"\x93NUMPY"):
            raise CLIError(f"--candidate: cannot read {spec!r}: it is not a .npy file (wrong magic bytes).")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise CLIError(f"--candidate: cannot memory-map {spec!r}: {exc}") from None
    if arr.dtype.kind not in "biuf" or arr.ndim != 2:
        raise CLIError(f"--candidate: {spec!r} must be a real 2-d array; got dtype {arr.dtype}, shape {arr.shape}.")
    return arr


def _refuse_unsupported(args):
    if args.kind != "kernel":
        raise CLIError("--sample/--rows apply to --kind kernel only (fits, trajectories and radii are small: "
                       "compare them whole).")
    if args.family != "fc":
        raise CLIError("--sample/--rows support --family fc only (kernels.fc); compare a CNTK whole.")
    if args.get == "both":
        raise CLIError("--sample/--rows check one kernel at a time: --get ntk or --get nngp.")
    if args.csv is not None:
        raise CLIError("--csv is the per-entry table of a whole Gram; a sampled check lists its worst entries in "
                       "--report FILE.json.")
    for flag, value in (("--sample", args.sample), ("--rows", args.rows)):
        if value is not None and value < 1:
            raise CLIError(f"{flag}: must be >= 1; got {value}.")


def cmd_compare_sampled(args):
    """The sampled compare (called by ``cmd_compare`` when ``--sample`` or ``--rows`` is given)."""
    if args.kind == "kernel":
        resolve_family_options(args)
    _refuse_unsupported(args)
    if args.x1 is None:
        raise CLIError("compare --kind kernel needs --x1 (and optionally --x2).")
    cand = open_candidate(args.candidate)
    tg = Target(args.backend)
    x1 = load_array(args.x1, "--x1")
    x2 = None if args.x2 is None else load_array(args.x2, "--x2")
    for name, x in (("--x1", x1), ("--x2", x2)):
        if x is not None and x.ndim != 2:
            raise CLIError(f"{name}: expected a 2-d array (n, d), one sample a row; got shape {x.shape}.")
    if x2 is not None and x2.shape[1] != x1.shape[1]:
        raise CLIError(f"--x1 and --x2 must have the same number of columns; got {x1.shape} and {x2.shape}.")
    shape = (x1.shape[0], (x1 if x2 is None else x2).shape[0])
    if tuple(cand.shape) != shape:
        raise CLIError(f"--candidate: shape {tuple(cand.shape)} does not match the kernel's shape {shape} "
                       "(n1 = rows of --x1, n2 = rows of --x2 or of --x1).")
    a1 = tg.put(x1, args.dtype)
    a2 = None if x2 is None else tg.put(x2, args.dtype)
    rtol = args.rtol if args.rtol is not None else 1e-10
    common = dict(seed=0 if args.seed is None else args.seed, depth=args.depth, activation=args.activation,
                  W_std=args.W_std, b_std=args.b_std, which=args.get, tol=rtol, diag_tol=args.diag_rtol,
                  atol=args.atol, dtype=args.dtype, caller="ntkref compare --sample/--rows")
    results = []
    if args.sample is not None:
        results.append(check_sampled(cand, a1, a2, n_entries=args.sample, **common))
    if args.rows is not None:
        results.append(check_sampled(cand, a1, a2, n_rows=args.rows, **common))
    agree = all(r.passed for r in results)
    backend = tg.description()
    params = results[0].config
    lines = [f"ntkref compare --kind kernel (sampled): {args.get} of fc(depth={args.depth}, "
             f"activation={args.activation!r}, W_std={args.W_std!r}, b_std={args.b_std!r}), shape {shape}, "
             f"candidate {args.candidate} ({params['reader']})"]
    for r in results:
        lines += r.lines()
    lines.append("  measure: |K - K_ref| / (sqrt(K_ref(x,x)) sqrt(K_ref(x',x'))); per entry the larger of the "
                 "tolerance and ntkref's bound applies")
    lines.append(f"  reference computed on {backend}, for the sampled pairs only")
    lines.append("RESULT: " + ("AGREE on every sampled entry" if agree else "DISAGREE (sampled entries outside "
                                                                               "tolerance)"))
    report = {"schema": SCHEMA, "kind": "kernel", "agree": agree, "backend": backend, "candidate": args.candidate,
              "shape": list(shape), "checks": [r.to_dict() for r in results], "lines": lines}
    text = json.dumps(report, indent=1, allow_nan=False)
    print(text if args.json else "\n".join(lines))
    if args.report is not None:
        replace_atomically_or_fail(args.report, "w", lambda f: f.write(text), "--report")
    return EXIT_OK if agree else EXIT_DISAGREE
