"""``ntkref compare``: recompute the reference, compare the candidate, explain a disagreement.

:func:`cmd_compare` checks the tolerances and the ``--report``/``--csv`` paths, recomputes the reference
(:mod:`ntkref.cli._compute`) and compares through :mod:`ntkref.cli._verdict`.  Kernels are compared in the
normalised measure |K − K_ref| / √(K_ref(x,x)K_ref(x′,x′)) with ntkref's own certified bound per entry
(:func:`ntkref.testing.certified_bound`); fits on g = Kα with the bound √K_ii·√(2·gap/λ) from the λ-strong
convexity of seed 000 eq. (7) in β, plus the candidate's own duality gap and KKT residual (:mod:`ntkref.kkt`);
trajectories and radii in the scaled measure |C − R| / max(1, max|R|).  On disagreement it tests the usual
convention slips — kernels: NNGP vs NTK, a constant factor (Arora et al.'s d·2^L, C·2^L, …); fits: λ′ = 2λ,
λ/2, nλ, λ/n, 1/λ — and returns a hint for each that explains the candidate.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np  # host-side reports (the computations run on the chosen backend)

from .. import kernels, kkt, machines
from .._lib.backend import to_numpy
from .._lib.validation import InvalidParameterError
from ..kernels._accuracy import certified_bound
from ._compute import (compute_certify, compute_dynamics, compute_fit, compute_kernel, get_list, kernel_call,
                       resolve_family_options)
from ._io import (EXIT_DISAGREE, EXIT_OK, CLIError, Target, check_writable, load_array, replace_atomically_or_fail,
                  split_spec)
from ._verdict import compare_arrays, csv_text, report_dict


def _fc_bound(activation, depth, dtype_name):
    """(bound, source) in the normalised measure for kernels.fc (ntkref.testing.certified_bound)."""
    return certified_bound("fc", depth=depth, activation=activation, dtype=dtype_name)


def _cntk_bound(dtype_name, params):
    """(bound, source) in the normalised measure for kernels.cntk (ntkref.testing.certified_bound)."""
    return certified_bound("cntk", depth=params["depth"], dtype=dtype_name)


def _load_candidates(args, wanted):
    """{'ntk': array} (or both kernels for --get both: a .npz holding 'nngp' and 'ntk')."""
    if len(wanted) == 1:
        return {wanted[0]: load_array(args.candidate, "--candidate")}
    path, key = split_spec(args.candidate)
    if key is not None or not path.endswith(".npz"):
        raise CLIError(f"--candidate: --get both needs a .npz archive holding both 'nngp' and 'ntk' (name the "
                       f"file, no key); got {args.candidate!r}.")
    return {k: load_array(f"{path}:{k}", "--candidate") for k in wanted}


# constant factors that are usual normalisation slips (name, value as a function of depth L, input dim d, C, P)
def _known_factors(depth, d, family, x1_shape):
    out = [("2", 2.0, "a factor 2 (a ½ convention?)"), ("1/2", 0.5, "a factor ½ (a ½ convention?)"),
           ("2^L", 2.0 ** depth, "c_σ = 2 per ReLU layer (Arora et al.'s normalisation, docs/conventions.md)"),
           ("2^-L", 0.5 ** depth, "c_σ = 2 per ReLU layer, the other way round")]
    if family == "fc":
        out += [("d", float(d), "Σ⁽⁰⁾ = xᵀx′ without 1/d (docs/conventions.md, 'FC kernels')"),
                ("d·2^L", d * 2.0 ** depth, "Arora et al.'s NTK: d·2^L·Θ (kernels.arora_ntk)"),
                ("1/d", 1.0 / d, "Σ⁽⁰⁾ divided by d twice")]
    else:
        C, P = x1_shape[1], x1_shape[2] * x1_shape[3]
        out += [("C", float(C), "Σ⁽⁰⁾ summed over channels instead of averaged (Arora et al.: C·Θ)"),
                ("C·2^L", C * 2.0 ** depth, "Arora et al.'s CNTK-GAP: C·2^L·Θ"),
                ("C·P·2^L", C * P * 2.0 ** depth, "Arora et al.'s CNTK-V (trace readout): C·P·2^L·Θ")]
    return out


def _kernel_hints(args, get, cmp, a1, a2, params, tg, diags):
    """Convention slips that explain a disagreeing kernel: the other kernel (NNGP vs NTK), a constant factor."""
    hints = []
    other = "nngp" if get == "ntk" else "ntk"
    K_other = np.asarray(to_numpy(getattr(kernel_call(args.family, a1, a2, [other], args.dtype, params), other)))
    d1, d2 = diags[other]
    scale = np.sqrt(np.maximum(d1, 0))[:, None] * np.sqrt(np.maximum(d2, 0))[None, :]
    trial = compare_arrays(other, cmp.C, K_other, scale, cmp.user_tol, cmp.bound, cmp.atol, cmp.measure)
    if trial.agree:
        hints.append({"array": get, "hypothesis": f"{other} instead of {get}",
                      "message": f"the candidate matches the {other.upper()}, not the {get.upper()} "
                                 f"(nngp vs ntk?)", "max_scaled_error": _finite_max(trial.err)})
    C, R, s = cmp.C, cmp.R, cmp.scale
    use = cmp.finite & (np.abs(R) >= 1e-3 * s) & (s > 0)
    if use.any():
        c = float(np.median(C[use] / R[use]))
        if math.isfinite(c) and c != 0 and abs(c - 1) > 1e-6:
            trial = compare_arrays(get, C, c * R, abs(c) * s, cmp.user_tol, cmp.bound, cmp.atol, cmp.measure)
            if trial.agree:
                d = int(np.prod(a1.shape[1:])) if args.family == "fc" else None
                names = [(n, why) for n, v, why in _known_factors(args.depth, d, args.family, a1.shape)
                         if abs(c / v - 1) < 1e-9]
                label = f" = {names[0][0]}: {names[0][1]}" if names else ""
                hints.append({"array": get, "hypothesis": f"factor {c!r}",
                              "message": f"the candidate is {c:.12g} × the reference{label}",
                              "max_scaled_error": _finite_max(trial.err)})
    return hints


def _finite_max(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(a)) if a.size else 0.0


def _compare_kernel(args, cands):
    wanted = list(cands)
    out, a1, a2, params, tg = compute_kernel(args, wanted)
    for g in wanted:
        if cands[g].shape != out[g].shape:
            raise CLIError(f"--candidate: {g} of shape {cands[g].shape} does not match the kernel's shape "
                           f"{out[g].shape} (n1 = rows of --x1, n2 = rows of --x2 or of --x1).")
    both = ("nngp", "ntk")
    if args.family == "cntk":  # no O(n) diagonal routine: the self-kernels' diagonals (O(n²) pairs)
        def self_diag(a):
            res = kernel_call("cntk", a, None, list(both), args.dtype, params)
            return {g: np.diagonal(np.asarray(to_numpy(getattr(res, g)))).copy() for g in both}
        s1 = self_diag(a1)
        s2 = s1 if a2 is None else self_diag(a2)
    else:
        f1 = kernels.fc_diagonal(a1, dtype=args.dtype, **params)
        f2 = f1 if a2 is None else kernels.fc_diagonal(a2, dtype=args.dtype, **params)
        s1 = {g: np.asarray(to_numpy(getattr(f1, g))) for g in both}
        s2 = {g: np.asarray(to_numpy(getattr(f2, g))) for g in both}
    diags = {g: (s1[g], s2[g]) for g in both}
    shape = out[wanted[0]].shape
    diag = np.zeros(shape, dtype=bool)
    if a2 is None:
        np.fill_diagonal(diag, True)
    rtol = args.rtol if args.rtol is not None else 1e-10
    diag_rtol = args.diag_rtol if args.diag_rtol is not None else rtol
    dtype_name = args.dtype or ("float32" if a1.dtype == tg.xp.float32 else "float64")
    x1h = load_array(args.x1, "--x1")
    x2h = None if args.x2 is None else load_array(args.x2, "--x2")
    measure = "normalised error |K - K_ref| / sqrt(K_ref(x,x) K_ref(x',x'))"
    comparisons, hints, sources = [], [], {}
    for g in wanted:
        d1, d2 = diags[g]
        scale = np.sqrt(np.maximum(d1, 0.0))[:, None] * np.sqrt(np.maximum(d2, 0.0))[None, :]
        if args.family == "cntk":
            bound, src = _cntk_bound(dtype_name, params)
        else:
            bound, src = _fc_bound(args.activation, args.depth, dtype_name)
        sources[g] = src
        cmp = compare_arrays(g, cands[g], out[g], scale, np.where(diag, diag_rtol, rtol), bound, args.atol,
                                  measure, parts={"diagonal": diag, "off-diagonal": ~diag} if a2 is None else None,
                                  inputs=(x1h, x2h))
        if not cmp.agree:
            h = _kernel_hints(args, g, cmp, a1, a2, params, tg, diags)
            cmp.convention = bool(h)
            hints += h
        comparisons.append(cmp)
    what = ", ".join(f"{k}={v!r}" for k, v in params.items())
    lines = [f"ntkref compare --kind kernel: {'/'.join(wanted)} of {args.family}({what}), shape {shape}"]
    for cmp in comparisons:
        lines += cmp.lines()
    accuracy = _fc_bound("relu", 0, dtype_name)[0]
    if args.family == "cntk":
        caveat = f" (cntk: {sources[wanted[0]]})"
    elif args.activation not in ("relu", "erf"):
        caveat = " (quadrature activations: plus the Gauss-Hermite rule's error)"
    else:
        caveat = ""
    lines.append(f"  documented accuracy of ntkref in this measure: {accuracy:g}{caveat}; "
                 f"tolerance: {rtol:g} off-diagonal, {diag_rtol:g} diagonal, atol {args.atol:g}; "
                 "per entry the larger of the tolerance and ntkref's bound applies")
    reference = {"function": f"ntkref.kernels.{args.family}", "get": wanted,
                 "params": {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items()}}
    tolerance = {"rtol": rtol, "diag_rtol": diag_rtol, "atol": args.atol,
                 "ntkref_bound_source": "; ".join(f"{g}: {s}" for g, s in sources.items())}
    return comparisons, lines, hints, reference, tolerance, {}


def _scaled(C, R, args, name, default_rtol, bound=0.0):
    """Comparison in the scaled measure |C − R| / max(1, max|R|) (fits, trajectories, radii)."""
    if C.shape != R.shape:
        raise CLIError(f"--candidate: shape {C.shape} does not match the reference {name} shape {R.shape}.")
    R = np.asarray(R, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(R)))) if R.size else 1.0
    rtol = args.rtol if args.rtol is not None else default_rtol
    measure = f"scaled error |cand - ref| / max(1, max|ref|) (max|ref| = {scale:.6g})"
    return compare_arrays(name, C, R, scale, rtol, np.asarray(bound) / scale, args.atol, measure), rtol


def _fit_bound(sol, K64, tg, n, reduction):
    """ntkref's per-entry bound on g = Kα (absolute): √K_ii·√(2·gap_sum/λ_sum) (λ-strong convexity of (7) in β:
    |g(xᵢ) − g*(xᵢ)| ≤ √K(xᵢ,xᵢ)·‖β − β*‖, machines' ``beta_error_bound``; the gap as computed, clipped at 0, plus
    its rounding estimate ``gap_rounding``) plus
    the rounding of the product Kα (n·eps·(|K||α|)ᵢ); only that rounding when λ = 0 (closed form)."""
    lam_sum = getattr(sol, "lam_sum", 0.0)
    Kh = np.asarray(to_numpy(K64), dtype=np.float64)
    a = np.asarray(to_numpy(sol.alpha_), dtype=np.float64)
    eps = np.finfo(np.float64).eps
    rounding = n * eps * (np.abs(Kh) @ np.abs(a))
    if not lam_sum > 0:
        return rounding
    mult = n if reduction == "mean" else 1
    gap = (max(float(sol.duality_gap), 0.0) + getattr(sol, "gap_rounding", 0.0)) * mult  # as beta_error_bound
    return np.sqrt(np.maximum(np.diag(Kh), 0.0)) * math.sqrt(2.0 * gap / lam_sum) + rounding


def _candidate_certificate(alpha_c, Kx, yx, loss, lam, reduction):
    """The candidate's own objective (ntkref.machines), duality gap and KKT residual (ntkref.kkt)."""
    res = {"objective": float(machines.objective(alpha_c, Kx, yx, loss, lam, reduction=reduction))}
    try:
        res["duality_gap"] = float(kkt.duality_gap(alpha_c, Kx, yx, loss, lam, reduction=reduction))
    except (InvalidParameterError, ValueError, ArithmeticError) as exc:
        res["duality_gap"], res["duality_gap_error"] = None, str(exc)
    res["kkt_residual"] = float(kkt.kkt_residual(alpha_c, Kx, yx, loss, lam, reduction=reduction))
    return res


# λ′ trials of compare --kind fit: (factor as a function of (λ, n), hypothesis, message)
_LAM_TRIALS = (
    (lambda lam, n: 2 * lam, "lam' = 2 lam", "candidate matches lam' = 2 lam (λ vs λ/2 convention? e.g. the squared "
                                             "loss with ½, or KernelRidge's alpha = λ/2 read as λ)"),
    (lambda lam, n: lam / 2, "lam' = lam/2", "candidate matches lam' = lam/2 (λ/2 vs λ convention?)"),
    (lambda lam, n: n * lam, "lam' = n lam", "candidate matches lam' = n lam (sum vs mean: the candidate averages the "
                                             "loss where the sum was asked, or the other way round?)"),
    (lambda lam, n: lam / n, "lam' = lam/n", "candidate matches lam' = lam/n (mean vs sum: the candidate sums the "
                                             "loss where the mean was asked, or the other way round?)"),
    (lambda lam, n: 1 / lam, "lam' = 1/lam", "candidate matches lam' = 1/lam (C vs λ: an SVM's C = 1/λ?)"),
)


def _fit_hints(args, g_c, cmp, Kx, yx, loss, tg, K64, n):
    hints = []
    tried = set()
    for fn, hypothesis, message in _LAM_TRIALS:
        lam2 = fn(args.lam, n)
        if not (math.isfinite(lam2) and lam2 > 0) or lam2 == args.lam or lam2 in tried:
            continue
        tried.add(lam2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sol2 = machines.solve(Kx, yx, loss, lam2, reduction=args.reduction)
        except (InvalidParameterError, ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        a2 = sol2.alpha_ if sol2.alpha_.dtype == tg.xp.float64 else tg.xp.astype(sol2.alpha_, tg.xp.float64)
        R2 = np.asarray(to_numpy(K64 @ a2))
        trial, _ = _scaled(g_c, R2, args, "g_train", 1e-8, _fit_bound(sol2, K64, tg, n, args.reduction))
        if trial.agree:
            hints.append({"array": "g_train", "hypothesis": hypothesis, "lam_prime": lam2,
                          "message": f"{message} [lam' = {lam2!r}]", "max_scaled_error": _finite_max(trial.err)})
    return hints


def _compare_fit(args, candidate):
    out, (K, y, loss, sol, tg, K64) = compute_fit(args, "compare")
    if candidate.shape != out["alpha"].shape:
        raise CLIError(f"--candidate: expected coefficients alpha of shape {out['alpha'].shape}; got "
                       f"{candidate.shape}.")
    n = K.shape[0]
    g_c = np.asarray(to_numpy(K64 @ tg.put(candidate, np.float64)))
    bound = _fit_bound(sol, K64, tg, n, args.reduction)
    cmp, rtol = _scaled(g_c, out["g_train"], args, "g_train", 1e-8, bound)
    Kx, yx = tg.put(K, args.dtype), tg.put(y, args.dtype)
    cand = _candidate_certificate(tg.put(candidate, args.dtype), Kx, yx, loss, args.lam, args.reduction)
    hints = []
    if not cmp.agree:
        hints = _fit_hints(args, g_c, cmp, Kx, yx, loss, tg, K64, n)
        cmp.convention = bool(hints)
    lines = [f"ntkref compare --kind fit: loss {loss.name!r}, lam {args.lam!r}, reduction {args.reduction!r}"]
    lines += cmp.lines()
    lines.append(f"  compared on the training outputs g = K alpha (alpha is not unique when K is singular); tolerance: "
                 f"{rtol:g} (scaled), atol {args.atol:g}; ntkref's bound per entry: sqrt(K_ii)·sqrt(2·gap/lam) "
                 f"(max {float(np.max(bound)) / cmp.scale.flat[0] if bound.size else 0.0:.3g} scaled)")
    gap_c = cand["duality_gap"]
    kkt_c = cand["kkt_residual"]
    lines.append(f"  objective eq. (7): candidate {cand['objective']!r}, reference {sol.primal_objective!r} "
                 f"(reference duality gap {sol.duality_gap:.3e})")
    lines.append("  candidate's own certificate: duality gap "
                 + ("n/a" if gap_c is None else f"{gap_c:.3e}") + ", KKT residual "
                 + f"{kkt_c:.3e}")
    reference = {"function": "ntkref.machines.solve", "params": {"loss": loss.name, "lam": args.lam,
                                                                "reduction": args.reduction}}
    tolerance = {"rtol": rtol, "atol": args.atol,
                 "ntkref_bound_source": "sqrt(K_ii)·sqrt(2·gap_sum/lam_sum) + rounding (λ-strong convexity of "
                                        "eq. (7) in β; the reference's duality gap)"}
    extra = {"candidate": cand, "reference_certificate": {"objective": float(sol.primal_objective),
                                                          "duality_gap": float(sol.duality_gap)}}
    return [cmp], lines, hints, reference, tolerance, extra


def _check_tolerances(args):
    """--rtol, --diag-rtol and --atol must be finite and ≥ 0 (a NaN tolerance would make every entry agree)."""
    for flag, value in (("--rtol", args.rtol), ("--diag-rtol", args.diag_rtol), ("--atol", args.atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CLIError(f"{flag}: must be a finite number >= 0; got {value!r}.")


def _json_ready(v):
    """Replace non-finite floats by None (the report lists their texts beside them)."""
    if isinstance(v, dict):
        return {k: _json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_ready(x) for x in v]
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def cmd_compare(args):
    _check_tolerances(args)
    for option, path, ext in (("--report", args.report, ".json"), ("--csv", args.csv, ".csv")):
        if path is not None:
            if not path.endswith(ext):
                raise CLIError(f"{option}: {path!r} must end in {ext}.")
            check_writable(path, option)
    if args.kind == "kernel":
        resolve_family_options(args)
        if args.x1 is None:
            raise CLIError("compare --kind kernel needs --x1 (and optionally --x2).")
        cands = _load_candidates(args, get_list(args.get))
        comparisons, lines, hints, reference, tolerance, extra = _compare_kernel(args, cands)
    else:
        candidate = load_array(args.candidate, "--candidate")
        if args.kind == "fit":
            comparisons, lines, hints, reference, tolerance, extra = _compare_fit(args, candidate)
        elif args.kind == "dynamics":
            out = compute_dynamics(args, "compare")
            cmp, rtol = _scaled(candidate, out["g_train"], args, "g_train", 1e-8)
            lines = [f"ntkref compare --kind dynamics: mode {args.mode!r}, loss {args.loss!r}, lam {args.lam!r}"]
            lines += cmp.lines() + [f"  compared on g_train, shape (times or steps, n); tolerance: {rtol:g} "
                                    f"(scaled), atol {args.atol:g}; no stated error bound of ntkref here"]
            comparisons, hints, extra = [cmp], [], {}
            reference = {"function": f"ntkref.dynamics.{'gradient_flow' if args.mode == 'flow' else 'subgradient_descent'}",
                         "params": {"loss": args.loss, "lam": args.lam, "reduction": args.reduction}}
            tolerance = {"rtol": rtol, "atol": args.atol, "ntkref_bound_source": "none stated (0)"}
        else:
            out = compute_certify(args, "compare")
            radii = out["radii"]
            cmp, rtol = _scaled(candidate, radii, args, "radii", 1e-3, args.tol * np.abs(radii))
            lines = [f"ntkref compare --kind certify: method {args.method!r}, norm {args.norm!r}"]
            lines += cmp.lines() + [f"  certified radii (the reference's bisection tolerance is {args.tol:g} "
                                    f"relative, its per-entry bound); tolerance: {rtol:g} (scaled), atol {args.atol:g}"]
            comparisons, hints, extra = [cmp], [], {}
            reference = {"function": "ntkref.certify.certified_radius",
                         "params": {"method": args.method, "norm": args.norm, "tol": args.tol}}
            tolerance = {"rtol": rtol, "atol": args.atol,
                         "ntkref_bound_source": "tol·radius (the bisection's relative tolerance)"}
    for h in hints:
        lines.append(f"  hint: {h['message']}")
    agree = all(c.agree for c in comparisons)
    backend = Target(args.backend).description()
    lines.append(f"  reference computed on {backend}")
    lines.append("RESULT: " + ("AGREE (within tolerance)" if agree else "DISAGREE (outside tolerance)"))
    report = _json_ready(report_dict(kind=args.kind, comparisons=comparisons, backend=backend,
                                          reference=reference, tolerance=tolerance, hints=hints, lines=lines,
                                          extra=extra))
    text = json.dumps(report, indent=1, allow_nan=False)
    print(text if args.json else "\n".join(lines))
    if args.report is not None:
        replace_atomically_or_fail(args.report, "w", lambda f: f.write(text), "--report")
    if args.csv is not None:
        table = csv_text(comparisons)
        replace_atomically_or_fail(args.csv, "w", lambda f: f.write(table), "--csv")
    return EXIT_OK if agree else EXIT_DISAGREE
