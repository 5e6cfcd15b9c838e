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

from .. import _diagnosis as dg
from .. import _verdicts
from .. import kernels, kkt, machines
from .._lib.backend import to_numpy
from .._lib.validation import InvalidParameterError
from ..kernels._accuracy import certified_bound
from ._compute import (_load_machine_inputs, compute_certify, compute_dynamics, compute_fit, compute_kernel, get_list,
                       kernel_call, resolve_family_options)
from ._compute import _loss as _fit_loss
from ._sample import cmd_compare_sampled
from ._io import (EXIT_DISAGREE, EXIT_OK, CLIError, Target, check_writable, load_array, replace_atomically_or_fail,
                  split_spec)
from ._verdict import compare_arrays, csv_text, report_dict, verdict_line


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


def _known_factors(depth, d, family, x1_shape):
    """Constant factors that are usual normalisation slips (:func:`ntkref._diagnosis.known_factors`, shared with
    ``ntkref.testing``): (name, value, why)."""
    return dg.known_factors(family, depth, d=d, image_shape=None if family == "fc" else x1_shape[1:])


_DIAGNOSIS_ROWS = 48  # the slips are matched on at most this many rows and columns of a large Gram
_CONDITIONING_ENTRIES = 4_000_000  # beyond this many entries κ takes its worst case (no per-layer Grams)


def _kernel_hints(args, get, cmp, a1, a2, params, tg, diags, x1h=None, x2h=None, dtype_name="float64",
                  cand_dtype=None):
    """Why a kernel disagrees, with the diagnosis of ``ntkref.testing`` (:mod:`ntkref._diagnosis`): sets
    ``cmp.kinds`` (non_finite / convention / formula / precision per entry) and returns the hints of the slips
    that explain the candidate (none for a formula or precision failure).  ``cand_dtype``: the dtype of the
    candidate's file (``cmp.C`` is its float64 host copy), whose eps and range the diagnosis uses."""
    fam = args.family
    cdt = np.dtype(cand_dtype) if cand_dtype is not None and np.issubdtype(np.dtype(cand_dtype), np.floating) \
        else np.dtype(np.float64)
    C, R, s = cmp.C, cmp.R, cmp.scale
    n1, n2 = R.shape
    eps = dg.eps_of(dtype_name, cdt)
    # the precision band: κ from the correlations of every layer's pre-activations (FC), worst case otherwise
    if fam == "fc" and R.size <= _CONDITIONING_ENTRIES:
        rhos = []
        for ell in range(args.depth):
            p = {**params, "depth": ell}
            Kl = np.asarray(to_numpy(kernel_call("fc", a1, a2, ["nngp"], args.dtype, p).nngp))
            f1 = kernels.fc_diagonal(a1, dtype=args.dtype, **p).nngp
            f2 = f1 if a2 is None else kernels.fc_diagonal(a2, dtype=args.dtype, **p).nngp
            rhos.append(dg.correlation(Kl, np.asarray(to_numpy(f1)), np.asarray(to_numpy(f2))))
        kappa = dg.conditioning(rhos, eps, shape=R.shape)
    else:
        kappa = np.full(R.shape, 1.0 / math.sqrt(eps))
    x2r = x1h if x2h is None else x2h
    n_terms = (x1h.shape[1] if fam == "fc" else x1h.shape[1] * params.get("filter_size", 3) ** 2) + args.depth + 2
    band = dg.precision_band(kappa, n_terms, eps)

    def sq(x):
        f = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
        m = np.max(np.abs(f), axis=1)
        return np.sum((f / np.maximum(m, 1e-300)[:, None]) ** 2, axis=1) * m ** 2

    d1, d2 = diags[get]
    extreme = dg.extreme_entries(d1, d2, cdt if cdt.itemsize < np.dtype(dtype_name).itemsize else dtype_name,
                                 sq(x1h), sq(x2r))
    tol = cmp.tol
    # the slips, on a sub-Gram of at most _DIAGNOSIS_ROWS rows and columns (the worst entries' rows first)
    order = [tuple(int(i) for i in loc) for loc in cmp._order(cmp.outside)]
    rows = list(dict.fromkeys([i for i, _ in order[:_DIAGNOSIS_ROWS]] + list(range(n1))))[:_DIAGNOSIS_ROWS]
    cols = rows if a2 is None else \
        list(dict.fromkeys([j for _, j in order[:_DIAGNOSIS_ROWS]] + list(range(n2))))[:_DIAGNOSIS_ROWS]
    full = len(rows) == n1 and len(cols) == n2
    ri, ci = np.array(sorted(rows)), np.array(sorted(cols))
    sub = np.ix_(ri, ci)
    b1 = a1 if full else tg.put(x1h[ri], args.dtype)
    b2 = (a2 if full else tg.put(x2r[ci], args.dtype)) if (a2 is not None or not full) else None

    def alt_on(p, w, u1, u2):
        res = kernel_call(fam, u1, u2, [w], args.dtype, p)
        Ka = np.asarray(to_numpy(getattr(res, w)))
        if fam == "fc":
            e1 = kernels.fc_diagonal(u1, dtype=args.dtype, **p)
            e2 = e1 if u2 is None else kernels.fc_diagonal(u2, dtype=args.dtype, **p)
            g1, g2 = np.asarray(to_numpy(getattr(e1, w))), np.asarray(to_numpy(getattr(e2, w)))
        else:
            def self_diag(u):
                return np.array([float(np.asarray(to_numpy(getattr(kernel_call(fam, u[i:i + 1], None, [w],
                                                                                 args.dtype, p), w)))[0, 0])
                                 for i in range(u.shape[0])])
            g1 = self_diag(u1)
            g2 = g1 if u2 is None else self_diag(u2)
        return Ka, np.sqrt(np.maximum(g1, 0))[:, None] * np.sqrt(np.maximum(g2, 0))[None, :]

    specs = (dg.fc_alternatives if fam == "fc" else dg.cntk_alternatives)(params, get)
    alternatives = []
    for alt in specs:
        try:
            Ka, sa = alt_on(alt.params, alt.which, b1, b2)
        except (InvalidParameterError, ValueError, ArithmeticError):
            Ka, sa = None, None
        alternatives.append((alt, Ka, sa))

    def factor_alts(c):
        if not (c > 0 and (fam == "cntk" or params.get("activation") == "relu")):
            return []
        w2 = params["W_std"] * c ** (1.0 / (2 * (args.depth + 1)))
        try:
            Ka, sa = alt_on({**params, "W_std": w2}, get, b1, b2)
        except (InvalidParameterError, ValueError, ArithmeticError):
            return []
        return [(f"W_std {w2:.9g}", f"W_std = {w2:.9g} instead of {params['W_std']!r} (a W_std slip gives this "
                 "factor on a homogeneous kernel)", Ka, sa)]

    d = int(np.prod(x1h.shape[1:])) if fam == "fc" else None
    diag_sub = dg.classify(C[sub], R[sub], s[sub], tol=tol[sub], band=band[sub], extreme=extreme[sub],
                           atol=cmp.atol, alternatives=alternatives,
                           factors=_known_factors(args.depth, d, fam, x1h.shape), factor_alternatives=factor_alts,
                           outside=cmp.outside[sub])
    established = None
    if diag_sub.kind == "convention":
        if diag_sub.factor is not None:
            established = (diag_sub.factor * R, abs(diag_sub.factor) * s)
        elif full:
            established = next((Ka, sa) for alt, Ka, sa in alternatives if alt.label == diag_sub.explained_by[0])
        else:
            alt = next(a for a in specs if a.label == diag_sub.explained_by[0])
            established = alt_on(alt.params, alt.which, a1, a2)
    cmp.kinds = dg.kinds_given(C, R, s, tol=tol, band=band, extreme=extreme, atol=cmp.atol,
                               outside=cmp.outside, established=established)
    cmp.convention = bool(np.any(cmp.kinds == "convention"))
    hints = []
    if diag_sub.kind == "convention":
        for label, message in diag_sub.explanations:
            hints.append({"array": get, "hypothesis": label, "message": message,
                          "max_scaled_error": _finite_max(cmp.err[cmp.finite])})
    return hints


def _finite_max(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(a)) if a.size else 0.0


def _proven_verdict(args, g, cmp, out, a1, a2, params, bound, rtol, diag_rtol, diag):
    """The verdict of every entry against the exact kernel (:func:`ntkref._verdicts.judge`): FC kernels with
    ntkref's proven bound (``out[g + "_bound"]``, from ``kernels.fc(..., error_bound=True)``) are decided by it
    or, near the threshold, by a ball-arithmetic enclosure (a host step: the inputs the reference saw are copied
    to the host); the CNTK and configurations without a proven bound by the tested rule, marked not proven."""
    user = np.where(diag, diag_rtol, rtol)
    proof, why = None, ""
    if args.family == "cntk":
        why = "the CNTK has no proven error bound yet"
    elif g + "_bound" in out:
        _, proof, why = _verdicts.prove_fc(a1, a2, which=g, params=params, dtype=args.dtype, K=out[g],
                                           B=out[g + "_bound"])
    else:
        why = getattr(args, "_error_bound_why", "") or "no proven bound for this configuration"
    return _verdicts.judge(cmp.C, cmp.R, proof, user_tol=user, atol=args.atol, tested_bound=bound, scale=cmp.scale,
                           why=why)


def _compare_kernel(args, cands):
    wanted = list(cands)
    out, a1, a2, params, tg = compute_kernel(args, wanted, error_bound=args.family == "fc")
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
        cmp.apply_verdict(_proven_verdict(args, g, cmp, out, a1, a2, params, bound, rtol, diag_rtol, diag))
        if not cmp.agree:
            hints += _kernel_hints(args, g, cmp, a1, a2, params, tg, diags, x1h, x2h, dtype_name,
                                   getattr(cands[g], "dtype", None))
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
                 "per entry: against the exact kernel where ntkref's bound is proven (near the threshold an "
                 "enclosure decides), else the larger of the tolerance and ntkref's tested bound applies")
    lines.append(verdict_line(comparisons))
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
    ``gap_rounding``, which is now a proven bound of its rounding (ntkref.machines._proof: compensated Kα, the gap
    as a sum of Fenchel–Young terms), so max(gap, 0) + gap_rounding ≥ P(α) − P* for K ⪰ 0 and a reference with gap 0
    no longer blinds a tight --rtol: e.g. KRR on 400 MNIST digits, gap + rounding ~1e-27 where the estimate was
    ~1e-14, i.e. a bound of ~1e-13·√K_ii instead of 7.5e-7) plus the rounding of the product Kα (n·eps·(|K||α|)ᵢ,
    ≥ γ_n|K||α|); only that rounding when λ = 0 (closed form)."""
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
                                             "loss with ½, KernelRidge's alpha = λ/2 read as λ, or an SVM's "
                                             "C = 1/(2λ) where C = 1/λ belongs)"),
    (lambda lam, n: lam / 2, "lam' = lam/2", "candidate matches lam' = lam/2 (λ/2 vs λ convention? an SVM's C = 2/λ?)"),
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


def _diagnosis_dict(d):
    return {"optimal": d.optimal, "kind": d.kind, "hint": d.hint, "slips": list(d.slips),
            "relative_gap": d.relative_gap, "tol": d.tol}


def _certificate_verdict(alpha_c, Kx, yx, loss, lam, reduction, rtol, intercept=None):
    """The candidate's own certificate judged (:func:`ntkref.kkt.diagnose` at tol = the fit's tolerance)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return kkt.diagnose(alpha_c, Kx, yx, loss, lam, intercept=intercept, reduction=reduction, tol=rtol)
    except (InvalidParameterError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return None


def _fit_kinds(d, *cmps, convention=False):
    """The kind of a fit's failing entries, by cause (as ``ntkref.testing.check_fit``): a named slip is a
    ``convention``; otherwise the candidate's own certificate's kind (``formula`` for an unexplained error,
    ``precision`` for the float32-K limit) — never "precision" for an O(1) error merely because it is finite."""
    if convention:
        kind = "convention"
    elif d is not None and not d.optimal:
        kind = d.kind
    else:
        return
    for c in cmps:
        c.kinds = np.full(c.R.shape, kind, dtype=object)


def _diagnosis_hint(d, array):
    """A hint from the certificate's diagnosis: a slip it proves (convention) or the float32-K limit (precision)."""
    if d is None or d.optimal or not d.hint:
        return None
    return {"array": array, "hypothesis": " / ".join(d.slips), "kind": d.kind, "message": d.hint,
            "max_scaled_error": None}


def _read_intercept(args):
    """--intercept: a number, or a file holding one number."""
    if args.intercept is None:
        raise CLIError("compare --kind fit --fit-intercept needs --intercept B (the candidate's intercept).")
    try:
        b = float(args.intercept)
    except ValueError:
        arr = load_array(args.intercept, "--intercept")
        if arr.size != 1:
            raise CLIError(f"--intercept: expected one number; got an array of shape {arr.shape}.") from None
        b = float(np.asarray(arr, dtype=np.float64).reshape(-1)[0])
    if not math.isfinite(b):
        raise CLIError(f"--intercept: must be finite; got {args.intercept!r}.")
    return b


def _compare_fit_intercept(args, candidate):
    """``compare --kind fit --fit-intercept``: f = Kα + b and the objective P(α, b) against ntkref's exact
    machine with an intercept (:func:`ntkref.kkt.fit_with_intercept`), and the candidate's own certificate."""
    b_c = _read_intercept(args)
    tg = Target(args.backend)
    K, y, Kx, yx = _load_machine_inputs(args, "compare", tg)
    loss = _fit_loss(args)
    n = K.shape[0]
    if candidate.shape != (n,):
        raise CLIError(f"--candidate: expected coefficients alpha of shape ({n},); got {candidate.shape}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = machines.solve(Kx, yx, loss, args.lam, reduction=args.reduction, fit_intercept=True)
    K64 = Kx if Kx.dtype == tg.xp.float64 else tg.put(K, np.float64)
    a_ref = sol.alpha_ if sol.alpha_.dtype == tg.xp.float64 else tg.xp.astype(sol.alpha_, tg.xp.float64)
    a_c = tg.put(candidate, np.float64)
    f_ref = np.asarray(to_numpy(K64 @ a_ref)) + sol.intercept_
    f_c = np.asarray(to_numpy(K64 @ a_c)) + b_c
    lo, hi = sol.intercept_interval_
    # every b in [lo, hi] is optimal with alpha_ref: the outputs are known to that width on top of the β bound
    bound = _fit_bound(sol, K64, tg, n, args.reduction) + max(hi - lo, 0.0)
    cmp, rtol = _scaled(f_c, f_ref, args, "f_train", 1e-8, bound)
    p_ref = float(sol.primal_objective)
    p_c = kkt._objective(a_c, K64, tg.put(y, np.float64), loss, args.lam, b_c, args.reduction)
    scale = max(1.0, abs(p_ref))
    ref_gap = (max(float(sol.duality_gap), 0.0) + sol.gap_rounding) / scale
    obj = compare_arrays("objective", np.array([p_c]), np.array([p_ref]), scale, rtol, ref_gap, 0.0,
                         f"relative objective error |P(alpha, b) - P_ref| / max(1, |P_ref|) (P_ref = {p_ref:.6g})")
    d = _certificate_verdict(tg.put(candidate, args.dtype), Kx, yx, loss, args.lam, args.reduction, rtol, b_c)
    hints = []
    agree = cmp.agree and obj.agree
    if not agree:
        h = _diagnosis_hint(d, "f_train")
        if h is not None:
            hints.append(h)
            cmp.convention = obj.convention = d.kind == "convention"
        _fit_kinds(d, cmp, obj, convention=cmp.convention)
    lines = [f"ntkref compare --kind fit --fit-intercept: loss {loss.name!r}, lam {args.lam!r}, reduction "
             f"{args.reduction!r} (f = K alpha + b, b unregularised: scikit-learn's SVC with C = 1/lam)"]
    lines += cmp.lines() + obj.lines()
    lines.append(f"  compared on the training outputs f = K alpha + b and on the objective; tolerance: {rtol:g} "
                 f"(scaled), atol {args.atol:g}; ntkref's bound per output: sqrt(K_ii)·sqrt(2·gap/lam) + the width "
                 f"{max(hi - lo, 0.0):.3g} of the optimal intercepts [{lo!r}, {hi!r}]")
    lines.append(f"  intercept: candidate {b_c!r}, reference {sol.intercept_!r}")
    lines.append(f"  objective P(alpha, b): candidate {p_c!r}, reference {p_ref!r} (reference duality gap "
                 f"{sol.duality_gap:.3e})")
    lines.append("  candidate's own certificate (ntkref.kkt.diagnose, tol on the relative duality gap): "
                 + ("n/a" if d is None else str(d).split("; hint:")[0]))
    reference = {"function": "ntkref.machines.solve", "params": {"loss": loss.name, "lam": args.lam,
                                                                "reduction": args.reduction, "fit_intercept": True}}
    tolerance = {"rtol": rtol, "atol": args.atol,
                 "ntkref_bound_source": "outputs: sqrt(K_ii)·sqrt(2·gap_sum/lam_sum) + rounding + the width of the "
                                        "optimal intercept interval; objective: the reference's relative duality gap"}
    cand = {"objective": p_c, "intercept": b_c,
            "duality_gap": None if d is None else d.duality_gap,
            "kkt_residual": None if d is None else d.kkt_residual,
            "verdict": None if d is None else _diagnosis_dict(d)}
    extra = {"candidate": cand, "reference_certificate": {"objective": p_ref, "duality_gap": float(sol.duality_gap),
                                                          "intercept": float(sol.intercept_),
                                                          "intercept_interval": [float(lo), float(hi)]}}
    return [cmp, obj], lines, hints, reference, tolerance, extra


def _compare_fit(args, candidate):
    if getattr(args, "fit_intercept", False):
        return _compare_fit_intercept(args, candidate)
    if getattr(args, "intercept", None) is not None:
        raise CLIError("--intercept applies to compare --kind fit --fit-intercept only.")
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
    d = _certificate_verdict(tg.put(candidate, args.dtype), Kx, yx, loss, args.lam, args.reduction, rtol)
    if not cmp.agree:
        hints = _fit_hints(args, g_c, cmp, Kx, yx, loss, tg, K64, n)
        cmp.convention = bool(hints)
        if not hints:  # the certificate's slips: an intercept, C-mappings on float32 K, or the float32-K limit
            h = _diagnosis_hint(d, "g_train")
            if h is not None:
                hints.append(h)
                cmp.convention = d.kind == "convention"
        _fit_kinds(d, cmp, convention=cmp.convention)
    if d is not None:
        cand["verdict"] = _diagnosis_dict(d)
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
                 + f"{kkt_c:.3e}" + ("" if d is None else "; " + str(d).split("; hint:")[0]))
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
    if getattr(args, "sample", None) is not None or getattr(args, "rows", None) is not None:
        return cmd_compare_sampled(args)  # N random entries / K random rows of a Gram too large to read whole
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
