"""`python -m validation`: the project's main job — the seed papers' figures, tables and claims reproduced.

Usage::

    python -m validation                 # the full report (~20–30 min on 2 cores) → validation/out/
    python -m validation --quick         # small sizes, a few minutes: checks the papers' qualitative claims (CI)
    python -m validation --only seed002  # one seed (seed000, seed002, seed003) or single sections
    python -m validation --only peers    # the peer audit (needs the `peers` extra; skipped with a note otherwise)
    python -m validation --mnist DIR     # a full MNIST (train-/t10k- IDX files) instead of the embedded 0/1 digits
    python -m validation demo            # NTK values on adversarial inputs vs a 50-digit mpmath evaluation
    python -m validation --quiet         # no progress: only the summary at the end

Seed 000 (Chen et al.): Tables 1–3 and Figures 1, A.1, B.2 on real MNIST digits.  Seed 002 (Wei et al.): the
kernel-vs-regularised-net sample complexity on the distribution 𝒟 (Thm 2.1) and on a teacher network (App. F.3),
margins vs width and the max-margin limit (F.2, F.4), the perturbed Wasserstein flow and regularised vs
unregularised training (§3, F.1).
Seed 003 (Shi): the NTK function-norm regulariser vs KRR (Ch. 2) and dense vs dynamics-preserving sparse vs random
sparse adversarially trained nets with Table 3.1 (Ch. 3).

Backend: ``NTKREF_BACKEND`` and ``NTKREF_DEVICE`` choose where the heavy work runs (kernels, kernel machines,
dynamics, certificates, network training, the mean-field flow): the data and the initial weights are drawn on the
host with NumPy — the same numbers on every backend — moved there with ``validation.common.on_backend``, and the
results copied back with ``host`` for the tables, claims and figures.  For example
``NTKREF_BACKEND=cupy python -m validation`` runs on the GPU, and
``NTKREF_BACKEND=array_api_strict NTKREF_DEVICE=device1 python -m validation --quick`` on the strict namespace's
second device (the CPU stand-in for a GPU: any implicit conversion to NumPy fails there).

Progress: timestamped log lines on stdout and, while stderr is a terminal, tqdm bars there (the sections and
the long loops inside them, with rate and time left); when stderr is not a terminal (a pipe, a file, CI) the
loops report as plain lines on stdout instead (count, rate and time left about every tenth of a loop; no bar
fragments, no carriage returns).  ``--quiet`` prints neither: only the summary at the end.

The report (``report.md``, ``results.json``, PNG figures) puts each table next to the paper's numbers with a
verdict per claim and states the backend and device; the exit code is 1 if any checked claim fails.  The demo prints NTK values on inputs that
break naive implementations and checks them against an independent 50-digit mpmath evaluation of the recursion.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np


def _mp_ntk(x, y, depth):
    import mpmath as mp

    with mp.workdps(50):
        d = len(x)
        dot = lambda a, b: mp.fsum(mp.mpf(float(u)) * mp.mpf(float(v)) for u, v in zip(a, b))  # noqa: E731
        q1, q2, k = dot(x, x) / d, dot(y, y) / d, dot(x, y) / d
        t1, t2, tk = q1, q2, k
        for _ in range(depth):
            def dual(qa, qb, kab):
                if qa == 0 or qb == 0:
                    return mp.mpf(0), mp.mpf(0)
                th = mp.acos(max(min(kab / mp.sqrt(qa * qb), 1), -1))
                return mp.sqrt(qa * qb) * (mp.sin(th) + (mp.pi - th) * mp.cos(th)) / (2 * mp.pi), (mp.pi - th) / (2 * mp.pi)
            (f1, d1), (f2, d2), (fk, dk) = dual(q1, q1, q1), dual(q2, q2, q2), dual(q1, q2, k)
            q1, q2, k = f1, f2, fk
            t1, t2, tk = q1 + d1 * t1, q2 + d2 * t2, k + dk * tk
        return float(tk), float(mp.sqrt(t1 * t2))


def _naive_ntk(x, depth):
    """Textbook recursion with arccos of the clipped correlation (what many codes do)."""
    d = x.shape[1]
    K = x @ x.T / d
    ntk = K.copy()
    for _ in range(depth):
        q = np.sqrt(np.outer(np.diag(K), np.diag(K)))
        rho = np.clip(np.divide(K, q, out=np.zeros_like(K), where=q > 0), -1, 1)
        th = np.arccos(rho)
        K = q * (np.sin(th) + (np.pi - th) * rho) / (2 * np.pi)
        ntk = K + ntk * (np.pi - th) / (2 * np.pi)
    return ntk


def demo(depth=3, seed=0):
    from ntkref import kernels

    from .common import backend_description, host, on_backend

    rng = np.random.default_rng(seed)
    d = 8
    base = rng.normal(size=d)
    v = rng.normal(size=d)
    v -= v @ base / (base @ base) * base
    v /= np.linalg.norm(v)
    b = base / np.linalg.norm(base)
    rows = [base, (math.cos(1e-9) * b + math.sin(1e-9) * v) * 3.0, -(math.cos(1e-7) * b + math.sin(1e-7) * v),
            np.zeros(d), rng.normal(size=d) * 1e150, rng.normal(size=d) * 1e-150]
    names = ["x", "x rotated 1e-9 rad", "−x rotated 1e-7 rad", "zero row", "scale 1e150", "scale 1e-150"]
    x = np.array(rows)
    t = time.perf_counter()
    K = host(kernels.fc(on_backend(x), depth=depth).ntk)  # on the backend; the table reads a host copy
    wall = time.perf_counter() - t
    with np.errstate(all="ignore"):
        naive = _naive_ntk(x, depth)
    print(f"ntkref {__import__('ntkref').__version__}: fully connected ReLU NTK, depth {depth}, W_std = 1, no bias "
          f"(neural-tangents' convention), d = {d}; computed on {backend_description()} in {wall * 1e3:.1f} ms\n")
    print(f"{'pair':44s} {'ntkref Θ':>24s} {'rel. error':>11s} {'naive arccos':>13s}")
    worst = 0.0
    for i, j in [(0, 0), (0, 1), (0, 2), (1, 2), (0, 3), (4, 4), (4, 5), (5, 5)]:
        ref, scale = _mp_ntk(x[i], x[j], depth)
        err = abs(K[i, j] - ref) / scale if scale > 0 else abs(K[i, j])
        nerr = abs(naive[i, j] - ref) / scale if scale > 0 and np.isfinite(naive[i, j]) else float("nan")
        worst = max(worst, err)
        print(f"{names[i] + ' · ' + names[j]:44s} {K[i, j]:24.16e} {err:11.1e} {nerr:13.1e}")
    print("\nrel. error = |Θ − Θ_mpmath| / √(Θ(x,x)Θ(x',x')) against a 50-digit mpmath evaluation of the same recursion;")
    print("'naive arccos' is the textbook recursion (arccos of the clipped correlation) on the same inputs (nan: overflow or an undefined 0/0).")
    ok = worst <= 1e-13
    print(f"\naccuracy check: worst error {worst:.1e} {'<=' if ok else '>'} 1e-13 -> {'PASS' if ok else 'FAIL'}")
    return ok


SECTIONS = ("table3", "figure1", "table2", "figureB2", "table1", "figureA1")
# seeds 002 and 003: each module has run(log, plt, outdir, *, quick) -> Section and needs no MNIST task
# "peers": the peer audit (validation/peers.py) — neural-tangents and scikit-learn checked with ntkref's tooling;
# skipped with a note in the report when the `peers` extra (neural-tangents, jax) is not importable
OTHER_SECTIONS = ("seed002_kernel_vs_net", "seed002_teacher", "seed002_margins", "seed002_flow", "seed003_regularizer",
                  "seed003_tickets", "peers")
GROUPS = {"seed000": SECTIONS, "seed002": OTHER_SECTIONS[:4], "seed003": OTHER_SECTIONS[4:6]}


def reproduce(argv=None):
    """Run the reproductions: seed 000 (data → Table 3 → Figure 1 → Table 2 → Figure B.2 → Table 1 → Figure A.1),
    then seed 002 (Appendix F, Theorem 2.1) and seed 003 (Chapters 2 and 3)."""
    import importlib
    import pathlib

    from .common import Log, Settings, backend_description, figure
    from .data import load_task
    from . import report

    p = argparse.ArgumentParser(prog="python -m validation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a few minutes): CI's check of the qualitative claims")
    p.add_argument("--mnist", metavar="DIR", help="directory with a full MNIST (train-/t10k-images/labels IDX, raw or .gz)")
    p.add_argument("--out", metavar="DIR", default=str(pathlib.Path(__file__).resolve().parent / "out"),
                   help="output directory (default: validation/out)")
    p.add_argument("--only", nargs="+", choices=SECTIONS + OTHER_SECTIONS + tuple(GROUPS),
                   help="run only these sections (or groups: seed000, seed002, seed003)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress (neither the log lines nor the bars): only the summary at the end")
    args = p.parse_args(argv)
    argv = list(argv) if argv is not None else sys.argv[1:]
    settings = Settings.quick() if args.quick else Settings.full()
    log = Log(quiet=args.quiet)
    log(f"backend: {backend_description()}")
    only = None
    if args.only is not None:
        only = {name for item in args.only for name in GROUPS.get(item, (item,))}
    wanted = [s for s in SECTIONS if (only is None or s in only) and (s != "figureA1" or settings.a1)]
    wanted_other = [s for s in OTHER_SECTIONS if only is None or s in only]
    task = None
    if wanted:
        task = load_task(args.mnist, settings.n_train, settings.n_test)
        log(f"{settings.name} reproduction of seed 000 on {task.source}: {task.n_train} train / {task.n_test} test")
    plt = None if args.no_figures else figure()
    outdir = pathlib.Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    sections, extra = [], {}
    bar = log.progress(total=len(wanted) + len(wanted_other), label="sections", unit="section")
    for key in wanted:
        bar.set_postfix(key)
        mod = importlib.import_module(f"validation.{key}")
        kw = {}
        if key == "table2":
            if "table3" not in extra:  # Table 2's SVM row is Table 3's SVM
                from . import table3

                extra["table3"] = table3.run(task, settings, Log(quiet=True)).extra
            kw["svm"] = extra["table3"]
        sec = mod.run(task, settings, log, plt, outdir, **kw)
        if key == "table3":
            extra["table3"] = sec.extra
        sections.append(sec)
        verdicts = ", ".join(c.verdict for c in sec.claims)
        log(f"{sec.title}: {sec.seconds:.0f} s; claims: {verdicts or '–'}")
        bar.update()
    for key in wanted_other:
        bar.set_postfix(key)
        mod = importlib.import_module(f"validation.{key}")
        log(f"{key}: start")
        sec = mod.run(log, plt, outdir, quick=args.quick)
        sections.append(sec)
        verdicts = ", ".join(c.verdict for c in sec.claims)
        log(f"{sec.title}: {sec.seconds:.0f} s; claims: {verdicts or '–'}")
        bar.update()
    bar.close()
    path = report.write(outdir, sections, settings=settings, task=task, total_seconds=log.elapsed(), argv=argv)
    claims = [c for s in sections for c in s.claims]
    print("\nSummary")
    for c in claims:
        print(f"  [{c.verdict}] {c.section}: {c.text} — {c.detail}")
    failed = [c for c in claims if c.failed]
    known = [c for c in claims if not c.holds and c.known_difference]
    print(f"\n{sum(c.holds for c in claims)}/{len(claims)} claims hold"
          + (f", {len(known)} documented difference(s) from the paper" if known else "")
          + (f", {len(failed)} FAILED" if failed else "") + f"; backend: {backend_description()}; report: {path} "
          f"(total {log.elapsed():.0f} s)")
    return 1 if failed else 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "demo":
        p = argparse.ArgumentParser(prog="python -m validation demo", description="NTK accuracy demo")
        p.add_argument("--depth", type=int, default=3)
        p.add_argument("--seed", type=int, default=0)
        args = p.parse_args(argv[1:])
        return 0 if demo(args.depth, args.seed) else 1
    if argv and argv[0] == "report":
        argv = argv[1:]
    return reproduce(argv)


if __name__ == "__main__":
    sys.exit(main())
