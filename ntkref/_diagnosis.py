r"""Why a candidate kernel disagrees with ntkref: the one diagnosis of ``ntkref compare`` and ``ntkref.testing``.

Both front ends compare a candidate K with ntkref's reference R entry by entry in the scaled measure
e = |K − R| / s, s = √(R(x,x)R(x′,x′)) (the Cauchy–Schwarz scale of a PSD kernel; seed 001's NTK, seed 004's CNTK
in neural-tangents' conventions), and an entry is *outside* where K is not finite or |K − R| > τ·s + atol.  This
module says **why**, by cause and not by size, with one taxonomy (:data:`KINDS`):

``non_finite``  the candidate is inf or NaN, or a finite value was *lost to underflow/overflow*: the entry lies at
                an extreme scale (a row whose R(x,x) is outside [tiny^⅓, max^⅓] of the candidate's dtype, where a
                product of three kernel values leaves the normal range) and the candidate is right, to its
                precision, on every entry at normal scale it was compared on (``ntkref.testing`` adds the same rows
                rescaled to unit norm and a few generic rows, so there is always such evidence);
``convention``  a *named* slip explains every entry compared exactly (to within max(τ, the precision band) per
                entry): recomputing ntkref's kernel under the alternative convention (:func:`fc_alternatives`,
                :func:`cntk_alternatives`: NNGP for NTK, depth ± 1, no bias term, GAP vs Flatten, …) or a constant
                factor c (``candidate = c·R``) matches the candidate, and the alternative differs from R on at least
                two entries of different scale (so one entry, where any error is "a factor", names nothing);
``precision``   the error is at most the precision band
                ``PRECISION_MULTIPLE · eps · (n_terms + κ)`` of the entry, with eps the candidate's working precision
                (the machine epsilon of its dtype), n_terms the number of rounded terms (the input dimension plus the
                depth plus 2: the dot product and the layers) and κ the conditioning of the kernel map at that input
                (:func:`conditioning`: the arccos/arcsin of a correlation ρ has condition 1/√(1 − ρ²), capped at
                eps^-½ where the correlation is rounded to ±1: an angle computed from a correlation within eps of 1
                is known to √(2·eps), no better);
``formula``     everything else: an unexplained error larger than the precision can account for.  No hint: *no
                hint is better than a wrong one*.

A kind is decided from the whole set of entries compared (one example of ``ntkref.testing`` with its augmentation,
or the whole Gram of ``compare``), so a bug gets the same kind whatever input first shows it: a wrong formula is
wrong at normal scales too (``formula``, not ``non_finite``); a slip is matched on every entry (``convention``);
an underflow is right at normal scale (``non_finite``).  Per example, the kind reported first is the most telling
one, in the order :data:`PRECEDENCE`.

This module is pure NumPy on host arrays (report tooling): the callers compute the references and the
alternatives on their own backend and device and pass host copies.  It needs no hypothesis, so ``ntkref compare``
uses it without the test extra.

Examples
--------
>>> import numpy as np
>>> R = np.array([[2.0, 0.5], [0.5, 1.0]]); s = np.sqrt(np.outer(np.diag(R), np.diag(R)))
>>> d = classify(3.0 * R, R, s, tol=1e-10, band=np.full(R.shape, 1e-12), extreme=np.zeros(R.shape, bool),
...              factors=[("3", 3.0, "a factor 3")])
>>> d.kind, d.hint
('convention', 'candidate = 3 × reference on all 4 entries compared (of different scales) (= 3: a factor 3)')
>>> classify(R + 0.01, R, s, tol=1e-10, band=np.full(R.shape, 1e-12), extreme=np.zeros(R.shape, bool)).kind
'formula'
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np  # host-side report tooling: arrays are copied to the host explicitly (to_numpy)

from ._lib.backend import to_numpy

__all__ = ["KINDS", "PRECEDENCE", "PRECISION_MULTIPLE", "Alternative", "Diagnosis", "eps_of", "correlation",
           "conditioning", "precision_band", "extreme_entries", "fc_alternatives", "cntk_alternatives",
           "known_factors", "explains", "constant_factor", "classify", "kinds_given", "hint_for"]

KINDS = ("non_finite", "convention", "precision", "formula")
"""Failure kinds by cause (module docstring)."""

PRECEDENCE = ("formula", "convention", "non_finite", "precision")
"""When one example has entries of several kinds, the one reported first (a wrong formula explains the rest)."""

PRECISION_MULTIPLE = 10.0
"""The stated multiple of the working precision, eps·(n_terms + κ), within which an error is ``precision``."""

_SAME_SCALE = 1e-6  # two entries are "of different scale" when their (s, |R|/s) differ by more than this (relative)


@dataclass
class Alternative:
    """A convention slip to try: ntkref's kernel recomputed with ``params`` and ``which``."""

    label: str
    message: str
    params: dict
    which: str


@dataclass
class Diagnosis:
    """The outcome of :func:`classify` on one set of entries.

    ``kinds`` has one of ``"ok"`` and :data:`KINDS` per entry; ``kind`` is the example's kind (:data:`PRECEDENCE`,
    ``""`` if every entry agrees); ``hint`` the explanation (``""`` for ``formula``); ``explained_by`` the labels of
    the slips that explain the candidate; ``factor`` the constant factor c when one does.
    """

    kinds: np.ndarray
    kind: str = ""
    hint: str = ""
    explained_by: list = field(default_factory=list)
    explanations: list = field(default_factory=list)
    factor: float | None = None
    factor_names: list = field(default_factory=list)
    detail: dict = field(default_factory=dict)


def eps_of(*dtypes):
    """The working precision: the largest machine epsilon of the floating dtypes given (float64 if none)."""
    out = 0.0
    for dt in dtypes:
        try:
            dt = np.dtype(dt)
        except TypeError:
            dt = np.dtype(str(dt).split(".")[-1])
        if np.issubdtype(dt, np.floating):
            out = max(out, float(np.finfo(dt).eps))
    return out or float(np.finfo(np.float64).eps)


def _measure(K, R, s, tol, band, extreme, atol, outside):
    """The host float64 arrays of a comparison (broadcast to R's shape), finite(K), |K − R|, the scaled error and
    the verdict (default: |K − R| > τ·s + atol or K not finite); shared by :func:`classify` and
    :func:`kinds_given`."""
    K = np.asarray(to_numpy(K), dtype=np.float64)
    R = np.asarray(to_numpy(R), dtype=np.float64)
    s = np.broadcast_to(np.asarray(to_numpy(s), dtype=np.float64), R.shape)
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), R.shape)
    band = np.broadcast_to(np.asarray(band, dtype=np.float64), R.shape)
    extreme = np.broadcast_to(np.asarray(extreme, dtype=bool), R.shape)
    finite = np.isfinite(K)
    with np.errstate(all="ignore"):
        diff = np.abs(K - R)
        err = np.where(s > 0, diff / np.where(s > 0, s, 1.0), np.where(diff == 0, 0.0, np.inf))
        if outside is None:
            outside = ~finite | (diff > tol * s + atol)
    return K, R, s, tol, band, extreme, finite, diff, err, outside


def correlation(K, d1, d2):
    """ρ = K / √(K(x,x)K(x′,x′)) clipped to [−1, 1] (0 where the scale is 0)."""
    s = np.sqrt(np.maximum(np.asarray(to_numpy(d1), dtype=np.float64), 0.0))[:, None] * \
        np.sqrt(np.maximum(np.asarray(to_numpy(d2), dtype=np.float64), 0.0))[None, :]
    with np.errstate(all="ignore"):
        rho = np.where(s > 0, np.asarray(to_numpy(K), dtype=np.float64) / np.where(s > 0, s, 1.0), 0.0)
    return np.clip(np.nan_to_num(rho, nan=0.0), -1.0, 1.0)


def conditioning(correlations, eps, shape=None):
    """κ = max over the given correlation arrays of min(1/√(1 − ρ²), eps^-½) (1 where none is given).

    The angle arccos ρ (arcsin for erf) has condition number 1/√(1 − ρ²) in ρ; where ρ is within eps of ±1 the
    angle is known to √(2·eps) only, so κ is capped at eps^-½.
    """
    cap = 1.0 / math.sqrt(eps)
    out = None
    for rho in correlations:
        rho = np.asarray(rho, dtype=np.float64)
        with np.errstate(divide="ignore"):
            k = np.minimum(1.0 / np.sqrt(np.maximum(1.0 - rho * rho, 0.0)), cap)
        out = k if out is None else np.maximum(out, k)
    if out is None:
        return np.ones(shape if shape is not None else ())
    return out


def precision_band(kappa, n_terms, eps, multiple=PRECISION_MULTIPLE):
    """Per entry: ``multiple · eps · (n_terms + κ)`` in the scaled measure (module docstring)."""
    return multiple * eps * (float(n_terms) + np.asarray(kappa, dtype=np.float64))


def extreme_entries(d1, d2, dtype, sq1=None, sq2=None):
    """Entries whose row or column has a nonzero R(x,x) — or a nonzero squared input norm ``sq1``/``sq2`` (a
    saturating kernel such as erf's stays O(1) at huge inputs) — outside [tiny^⅓, max^⅓] of ``dtype``.

    >>> extreme_entries(np.array([1.0, 1e-200]), np.array([1.0]), "float64").ravel().tolist()
    [False, True]
    """
    fi = np.finfo(np.dtype(dtype))
    lo, hi = float(fi.tiny) ** (1 / 3), float(fi.max) ** (1 / 3)

    def ext(d):
        d = np.abs(np.asarray(d, dtype=np.float64))
        return (d > 0) & ((d < lo) | (d > hi))

    e1, e2 = ext(d1), ext(d2)
    if sq1 is not None:
        e1 = e1 | ext(sq1)
    if sq2 is not None:
        e2 = e2 | ext(sq2)
    return e1[:, None] | e2[None, :]


# ---------------------------------------------------------------------------------------------
# the slips tried
# ---------------------------------------------------------------------------------------------
def _swap(which):
    return "nngp" if which == "ntk" else "ntk"


def _common(params, which, depth_low):
    out = [Alternative(f"{_swap(which)} for {which}",
                       f"the candidate matches the {_swap(which).upper()}, not the {which.upper()} "
                       f"(NNGP vs NTK swapped?)", dict(params), _swap(which))]
    L = params["depth"]
    if L - 1 >= depth_low:
        out.append(Alternative(f"depth {L - 1}", f"the candidate matches depth={L - 1}, not {L}: a layer off by one "
                               "(hidden layers vs layers, or the readout layer counted?)",
                               {**params, "depth": L - 1}, which))
    out.append(Alternative(f"depth {L + 1}", f"the candidate matches depth={L + 1}, not {L}: a layer off by one "
                           "(hidden layers vs layers, or the readout layer counted?)", {**params, "depth": L + 1},
                           which))
    W = params.get("W_std", 1.0)
    if isinstance(W, (int, float)) and W > 0 and W != 1.0:
        for w2, what in ((W * W, "W_std² (the variance) used as W_std"), (math.sqrt(W), "√W_std used as W_std "
                                                                              "(W_std taken for the variance)")):
            out.append(Alternative(f"W_std {w2:.9g}", f"the candidate matches W_std={w2:.9g}, not {W!r}: {what}",
                                   {**params, "W_std": w2}, which))
    if params.get("b_std", 0.0) != 0.0:
        out.append(Alternative("b_std 0", f"the candidate matches b_std=0, not {params['b_std']!r}: a missing bias "
                               "term (b² left out of every layer's covariance)", {**params, "b_std": 0.0}, which))
    return out


def fc_alternatives(params, which):
    """Convention slips of an FC kernel (``kernels.fc`` parameters): NNGP for NTK, depth ± 1, no bias term.

    >>> [a.label for a in fc_alternatives({"depth": 2, "activation": "relu", "W_std": 1.0, "b_std": 0.1}, "ntk")]
    ['nngp for ntk', 'depth 1', 'depth 3', 'b_std 0']
    """
    return _common(params, which, 0)


def cntk_alternatives(params, which):
    """Convention slips of a CNTK (``kernels.cntk`` parameters): NNGP for NTK, depth ± 1, no bias term, GAP vs
    Flatten, neural-tangents' ``fix_first_last`` the other way.

    >>> [a.label for a in cntk_alternatives({"depth": 1, "readout": "gap", "filter_size": 3, "W_std": 1.0,
    ...                                      "b_std": 0.0, "fix_first_last": False}, "ntk")]
    ['nngp for ntk', 'depth 2', 'readout flatten', 'fix_first_last True']
    """
    out = _common(params, which, 1)
    other = "flatten" if params.get("readout", "gap") == "gap" else "gap"
    out.append(Alternative(f"readout {other}", f"the candidate matches readout={other!r}, not "
                           f"{params.get('readout', 'gap')!r}: the pooling (GAP averages every pixel pair, Flatten "
                           "the same-pixel pairs)", {**params, "readout": other}, which))
    ffl = not params.get("fix_first_last", False)
    out.append(Alternative(f"fix_first_last {ffl}", f"the candidate matches fix_first_last={ffl} (neural-tangents' "
                           "first/last-layer parameterisation the other way)", {**params, "fix_first_last": ffl},
                           which))
    return out


def known_factors(family, depth, d=None, image_shape=None):
    """Constant factors that are usual normalisation slips: (name, value, why).

    >>> [n for n, v, w in known_factors("fc", 2, d=4)][:4]
    ['2', '1/2', '2^L', '2^-L']
    """
    L = int(depth)
    out = [("2", 2.0, "a factor 2 (a ½ convention?)"), ("1/2", 0.5, "a factor ½ (a ½ convention?)"),
           ("2^L", 2.0 ** L, "c_σ = 2 per ReLU layer (Arora et al.'s normalisation, docs/conventions.md)"),
           ("2^-L", 0.5 ** L, "c_σ = 2 per ReLU layer, the other way round"),
           ("2^(L+1)", 2.0 ** (L + 1), "c_σ = 2 on every layer, the readout included")]
    if family == "fc" and d:
        out += [("d", float(d), "Σ⁽⁰⁾ = xᵀx′ without 1/d (docs/conventions.md, 'FC kernels')"),
                ("d·2^L", d * 2.0 ** L, "Arora et al.'s NTK: d·2^L·Θ (kernels.arora_ntk)"),
                ("1/d", 1.0 / d, "Σ⁽⁰⁾ divided by d twice")]
    if family == "cntk" and image_shape is not None:
        C, P = int(image_shape[0]), int(image_shape[1]) * int(image_shape[2])
        out += [("C", float(C), "Σ⁽⁰⁾ summed over channels instead of averaged (Arora et al.: C·Θ)"),
                ("C·2^L", C * 2.0 ** L, "Arora et al.'s CNTK-GAP: C·2^L·Θ"),
                ("C·P·2^L", C * P * 2.0 ** L, "Arora et al.'s CNTK-V (trace readout): C·P·2^L·Θ"),
                ("H·W", float(P), "pooling normalisation: GAP divided by H·W once, not (H·W)² (or a sum over pixels "
                                  "where Flatten averages)"),
                ("1/(H·W)", 1.0 / P, "pooling normalisation: divided by H·W once too often"),
                ("(H·W)²", float(P) ** 2, "pooling normalisation: GAP summed over the pixel pairs, not averaged"),
                ("1/(H·W)²", 1.0 / P ** 2, "pooling normalisation: divided by (H·W)² once too often")]
    return [(n, v, w) for n, v, w in out if v != 1.0]


# ---------------------------------------------------------------------------------------------
# matching
# ---------------------------------------------------------------------------------------------
def _distinct(mask, s, R, n=2):
    """At least ``n`` entries of ``mask`` with different (s, |R|/s) ("of different scale")."""
    idx = np.flatnonzero(mask.ravel())
    if idx.size < n:
        return False
    sv = s.ravel()[idx]
    with np.errstate(all="ignore"):
        rv = np.where(sv > 0, np.abs(R.ravel()[idx]) / np.where(sv > 0, sv, 1.0), 0.0)
    keys = []
    for a, b in zip(sv, rv):
        if not any(abs(a - p) <= _SAME_SCALE * max(abs(a), abs(p)) and abs(b - q) <= _SAME_SCALE * max(abs(b), abs(q))
                   for p, q in keys):
            keys.append((a, b))
            if len(keys) >= n:
                return True
    return False


def explains(K, K_alt, s_alt, R, s, slack, atol, use):
    """Whether ``K_alt`` explains the candidate on ``use``: every entry within slack·s_alt + atol of it, and
    ``K_alt`` differs from the reference R (beyond slack·s + atol) on ≥ 2 entries of different scale."""
    if not use.any():
        return False
    K_alt = np.asarray(K_alt, dtype=np.float64)
    if not np.all(np.isfinite(K_alt[use])):
        return False
    with np.errstate(all="ignore"):
        within = np.abs(K - K_alt) <= slack * s_alt + atol
        differs = np.abs(K_alt - R) > slack * s + atol
    return bool(np.all(within[use])) and _distinct(use & differs, s, R)


def constant_factor(K, R, s, slack, atol, use):
    """c with K = c·R on ``use`` (every entry within slack·|c|·s + atol, and c·R ≠ R on ≥ 2 entries of different
    scale), or None.  c is the median of K/R over the entries with |R| ≥ 10⁻³·s."""
    sel = use & (np.abs(R) >= 1e-3 * s) & (s > 0)
    if not sel.any():
        return None
    c = float(np.median(K[sel] / R[sel]))
    if not math.isfinite(c) or c == 0.0:
        return None
    return c if explains(K, c * R, abs(c) * s, R, s, slack, atol, use) else None


def _fmt(c):
    return f"{c:.9g}"


def classify(K, R, s, *, tol, band, extreme, atol=0.0, alternatives=(), factors=(), factor_alternatives=None,
             outside=None):
    """Diagnose the entries of one comparison (module docstring); returns a :class:`Diagnosis`.

    Parameters
    ----------
    K, R, s : host arrays of one shape
        Candidate, reference and scale √(R(x,x)R(x′,x′)).
    tol : float or array
        The verdict tolerance τ per entry (max of the user's and ntkref's bound), scaled measure.
    band : array
        The precision band per entry (:func:`precision_band`).
    extreme : bool array
        :func:`extreme_entries`.
    alternatives : sequence of (Alternative, K_alt, s_alt)
        The slips tried, evaluated on the same entries (``K_alt`` ``None`` where it could not be computed).
    factors : sequence of (name, value, why)
        Named constant factors (:func:`known_factors`).
    factor_alternatives : callable c -> list of (label, message, K_alt, s_alt), optional
        Slips that would produce a constant factor c (e.g. a W_std), verified the same way.
    outside : bool array, optional
        The verdict (default: |K − R| > τ·s + atol or K not finite).
    """
    K, R, s, tol, band, extreme, finite, diff, err, outside = _measure(K, R, s, tol, band, extreme, atol, outside)
    kinds = np.full(R.shape, "ok", dtype=object)
    out = Diagnosis(kinds)
    if not outside.any():
        return out
    kinds[outside & ~finite] = "non_finite"
    fo = outside & finite
    slack = np.maximum(tol, band)
    # convention: matched on the entries at normal scale (those at an extreme scale may be lost to underflow)
    normal = finite & ~extreme
    use = normal if _distinct(normal, s, R) else finite
    explained = []  # (label, message, K_alt, s_alt)
    for alt, K_alt, s_alt in alternatives:
        if K_alt is None:
            continue
        s_alt = np.broadcast_to(np.asarray(s_alt, dtype=np.float64), R.shape)
        if explains(K, K_alt, s_alt, R, s, slack, atol, use):
            explained.append((alt.label, alt.message, np.asarray(K_alt, dtype=np.float64), s_alt))
    c = constant_factor(K, R, s, slack, atol, use) if fo.any() else None
    if c is not None:
        # a usual factor is named when it explains the candidate itself (c is a median: rounding, wobbles)
        named = [(n, why) for n, v, why in factors
                 if abs(c / v - 1) <= 1e-6 and explains(K, v * R, abs(v) * s, R, s, slack, atol, use)]
        n_use = int(np.count_nonzero(use))
        msg = f"candidate = {_fmt(c)} × reference on all {n_use} entries compared (of different scales)"
        if named:  # several usual factors may coincide here (C = H·W = 3): all of them, none preferred
            msg += " (= " + "; or = ".join(f"{n}: {why}" for n, why in named) + ")"
        else:
            msg += " (a constant normalisation factor)"
        also = []
        if factor_alternatives is not None:
            for _label, message, K_alt, s_alt in factor_alternatives(c):
                if K_alt is not None and explains(K, K_alt, s_alt, R, s, slack, atol, use):
                    also.append(message)
        if also:
            msg += "; equivalently " + "; ".join(also)
        explained.insert(0, (f"factor {c!r}", msg, c * R, abs(c) * s))
        out.factor = c
        out.factor_names = [n for n, _ in named]
    if explained:
        _, _, K_alt, s_alt = explained[0]
        with np.errstate(all="ignore"):
            matched = np.abs(K - K_alt) <= slack * s_alt + atol
        kinds[fo & (use | matched)] = "convention"
        # entries off the matched set (extreme scales) that the slip does not explain: lost values (or rounding)
        rest = fo & ~use & ~matched
        kinds[rest & (err <= band)] = "precision"
        kinds[rest & (err > band)] = "non_finite"
        out.explained_by = [e[0] for e in explained]
        out.explanations = [(e[0], e[1]) for e in explained]
        out.hint = "; or ".join(e[1] for e in explained)
        out.kind = _first_kind(kinds)
        if out.kind != "convention":
            out.hint = _hint_for(out.kind, kinds, err, band)
        return out
    _label_unexplained(kinds, fo, err, band, extreme)
    out.kind = _first_kind(kinds)
    out.hint = _hint_for(out.kind, kinds, err, band)
    return out


def _label_unexplained(kinds, fo, err, band, extreme):
    """precision within the band; beyond it formula, or non_finite (lost) at extreme scales when the candidate is
    right to its precision at every normal-scale entry."""
    within = fo & (err <= band)
    beyond = fo & (err > band)
    kinds[within] = "precision"
    wrong_at_normal = bool(np.any(beyond & ~extreme))
    kinds[beyond & ~extreme] = "formula"
    kinds[beyond & extreme] = "formula" if wrong_at_normal else "non_finite"


def kinds_given(K, R, s, *, tol, band, extreme, atol=0.0, outside=None, established=None):
    """Per-entry kinds of a smaller example under an explanation already established on a larger one.

    ``established`` is ``(K_alt, s_alt)`` of the slip (or ``None``): an entry outside the tolerance that ``K_alt``
    explains (within max(τ, band)·s_alt + atol) is ``convention`` — no "two entries of different scale" needed
    here, the slip was established on the unshrunk failure; the others are labelled as in :func:`classify`.

    >>> import numpy as np
    >>> R = np.array([[1.0]]); kinds_given(2 * R, R, R, tol=1e-10, band=R * 1e-12, extreme=R < 0,
    ...                                    established=(2 * R, 2 * R)).tolist()
    [['convention']]
    """
    K, R, s, tol, band, extreme, finite, diff, err, outside = _measure(K, R, s, tol, band, extreme, atol, outside)
    kinds = np.full(R.shape, "ok", dtype=object)
    kinds[outside & ~finite] = "non_finite"
    fo = outside & finite
    if established is not None:
        K_alt, s_alt = (np.asarray(a, dtype=np.float64) for a in established)
        with np.errstate(all="ignore"):
            matched = np.isfinite(K_alt) & (np.abs(K - K_alt) <= np.maximum(tol, band) * s_alt + atol)
        kinds[fo & matched] = "convention"
        fo = fo & ~matched
    _label_unexplained(kinds, fo, err, band, extreme)
    return kinds


def hint_for(kind, kinds, err, band):
    """The hint of a kind that no slip explains (``""`` for ``formula``)."""
    return _hint_for(kind, kinds, err, band)


def _first_kind(kinds):
    present = set(np.unique(kinds).tolist()) - {"ok"}
    for k in PRECEDENCE:
        if k in present:
            return k
    return ""


def _hint_for(kind, kinds, err, band):
    if kind == "precision":
        m = kinds == "precision"
        return (f"errors up to {float(np.max(err[m])):.2e}, within {PRECISION_MULTIPLE:g}·eps·(n_terms + κ) of the "
                "candidate's working precision at these inputs' conditioning (ill-conditioned angles): lost "
                "digits, not a wrong formula")
    if kind == "non_finite":
        if np.any((kinds == "non_finite") & np.isfinite(err)):
            return ("values lost to underflow/overflow: wrong only where the kernel values lie at extreme scales "
                    "(R(x,x) outside [tiny^(1/3), max^(1/3)] of the dtype), right to its precision at normal "
                    "scales")
        return ""
    return ""
