r"""Structured results of ``ntkref compare``: per-entry errors, summaries, groups, JSON and CSV.

The CLI (:mod:`ntkref.cli`) computes a reference array R for the candidate C and hands both to
:func:`compare_arrays` with a per-entry *scale* s (kernels: √(R(x,x)R(x′,x′)); fits, trajectories, radii:
max(1, max|R|)), the user's tolerance τᵤ (in the scaled measure e = |C − R|/s) and ntkref's own certified error
bound b for each entry (same measure; 0 where none is stated).  The verdict of an entry is

    outside  ⇔  C not finite  or  |C − R| > τ·s + atol,     τ = max(τᵤ, b),

so the verdict never blames a candidate for the reference's own error; each entry records which of τᵤ and b
applied.  FC kernels with a proven bound are judged instead against the *exact* kernel (:mod:`ntkref._verdicts`,
:meth:`ArrayComparison.apply_verdict`): outside ⇔ |C − K*| > τᵤ·s* + atol, decided by ntkref's proven bound or,
near the threshold, a ball-arithmetic enclosure; each entry says whether its verdict is ``proven`` and its
``verdict_basis`` ("proven bound", "enclosure", "tested bound" — the rule above, not proven).  Errors are summarised over the **finite** candidate entries only (one NaN no longer turns every maximum
into inf); the non-finite entries are counted and listed apart.  Entries outside the tolerance are grouped as

``non_finite``   overflow/NaN: the candidate is inf or NaN; for kernels also a finite value lost to
                 underflow/overflow (wrong only at extreme scales, right at normal ones);
``convention``   a finite error explained by a named slip (kernels: NNGP vs NTK, depth ± 1, no bias term, W_std vs
                 W_std², GAP vs Flatten, a constant factor matched on ≥ 2 entries of different scale; fits: λ′ = 2λ,
                 λ/2, nλ, λ/n, 1/λ, …);
``formula``      (kernels) a finite error no slip explains and larger than the precision band: a wrong formula;
``precision``    a finite error within the precision band 10·eps·(n_terms + κ) of the candidate's working precision
                 at the input's conditioning (kernels), or (fits, trajectories, radii) any unexplained finite error.

Kernels are diagnosed by :mod:`ntkref._diagnosis`, the one diagnosis of :mod:`ntkref.testing` too (same kinds, same
hints).

JSON (``--report FILE.json``, :data:`SCHEMA_VERSION`).  Every number is a JSON number; a value that is not finite
(a candidate's NaN, an infinite scaled error where the scale is 0) is written as ``null`` and its text
(``"nan"``, ``"inf"``, ``"-inf"``) is given beside it (the entry's ``non_finite`` map).  Top level::

    schema     "ntkref.compare/1"
    command    "compare";  kind: "kernel" | "fit" | "dynamics" | "certify"
    agree      bool (every entry of every array within its tolerance)
    backend    where the reference was computed
    reference  {"function": str, "params": {...}}
    tolerance  {"rtol", "diag_rtol" (kernels), "atol", "ntkref_bound_source": str}
    arrays     {name: array summary}   (kernels: "ntk" and/or "nngp"; fit: "g_train"; dynamics: "g_train";
                                        certify: "radii")
    hints      [{"array", "hypothesis", "message", "max_scaled_error"}]: convention slips that explain the
               candidate (within the tolerance)
    verdicts   {"n_proven", "n_tested", "n_by_basis": {"proven bound", "enclosure", "tested bound": int}}: over
               every entry of every array, how many verdicts are proven (kernels; other kinds: all tested)
    candidate  fit only: {"objective", "duality_gap", "kkt_residual"} of the candidate α itself
    reference_certificate  fit only: {"objective", "duality_gap"} of ntkref's solution
    lines      the printed report (for people; the numbers are above)

An *array summary*: ``shape``, ``agree``, ``measure`` (the scaled error's definition), ``n_entries``,
``n_finite``, ``n_non_finite``, ``n_outside``, ``tolerance_applied`` ({"user": int, "ntkref": int}: how many
entries each tolerance decided), ``verdicts`` ({"n_proven", "n_tested", "n_by_basis": {basis: int}, "notes":
[str]}: how many verdicts are proven and why the others are not), ``errors`` ({"absolute", "relative", "scaled"}: each {"max", "median",
"location", "candidate", "reference"} over the finite entries; relative errors over the entries with R ≠ 0),
``parts`` (symmetric kernels: {"diagonal", "off_diagonal"}: {"n", "max_scaled", "location"}), ``non_finite``
(the first 100 non-finite entries), ``groups`` ({kind: {"count", "worst": [entry, …] (up to 10, worst first),
"minimal": entry | null}}), ``worst`` (the 10 entries furthest outside their tolerance, any group).

An *entry*: ``row``, ``col`` (``null`` for 1-d arrays), ``candidate``, ``reference``, ``abs_error``,
``scaled_error``, ``tolerance`` (τ used), ``tolerance_applied`` ("user" | "ntkref"), ``proven`` (bool), ``verdict_basis``
("proven bound" | "enclosure" | "tested bound"), ``ratio`` (scaled error / τ),
``part``, ``group`` ("ok" when inside), ``non_finite`` ({field: text}), and for kernels ``inputs`` ({"x1_row",
"x2_row"}: the two input rows — a one-pair minimal example).

CSV (``--csv FILE.csv``): one row per entry of every array, columns :data:`CSV_COLUMNS`; numbers written with
``repr`` (round-trip exact), non-finite values as ``nan``/``inf``/``-inf``.
"""
from __future__ import annotations

import csv
import io
import math

import numpy as np  # host-side reports: every array is copied back explicitly (_host)

from .._lib.backend import host_float64 as _host  # explicit host copies, never implicit

__all__ = ["SCHEMA_VERSION", "CSV_COLUMNS", "GROUPS", "BASES", "ArrayComparison", "compare_arrays", "report_dict",
           "csv_text", "json_number", "verdict_totals", "verdict_line"]

SCHEMA_VERSION = "ntkref.compare/1"
GROUPS = ("non_finite", "convention", "formula", "precision")
CSV_COLUMNS = ("array", "row", "col", "candidate", "reference", "abs_error", "scaled_error", "tolerance",
               "tolerance_applied", "outside", "group", "part", "proven", "verdict_basis")
BASES = ("proven bound", "enclosure", "tested bound")
"""What decided an entry's verdict (:mod:`ntkref._verdicts`): ntkref's proven bound, a ball-arithmetic enclosure
(entries near the threshold), or the tested — observed, not proven — rule max(τ, b)."""
_LISTED = 100
_WORST = 10


def json_number(v, field, non_finite):
    """A float for JSON: itself if finite, else ``None`` with its text recorded in ``non_finite[field]``."""
    v = float(v)
    if math.isfinite(v):
        return v
    non_finite[field] = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return None


class ArrayComparison:
    """One candidate array against its reference, entry by entry (module docstring)."""

    def __init__(self, name, candidate, reference, scale, user_tol, bound, atol, measure, *, parts=None,
                 inputs=None):
        self.name, self.measure, self.atol = name, measure, float(atol)
        # the report is built on the host: every input is copied there explicitly (to_numpy), whatever its library
        C = _host(candidate)
        R = _host(reference)
        shape = R.shape
        self.C, self.R = C, R
        self.scale = np.broadcast_to(_host(scale), shape)
        self.user_tol = np.broadcast_to(_host(user_tol), shape)
        self.bound = np.broadcast_to(_host(bound), shape)
        self.parts = parts  # dict name -> boolean mask, or None
        self.inputs = inputs  # (x1, x2) host arrays for kernels, or None
        with np.errstate(all="ignore"):
            self.finite = np.isfinite(C)
            self.absdiff = np.abs(C - R)
            self.rel = np.where(R != 0, self.absdiff / np.abs(R), np.where(self.absdiff == 0, 0.0, np.inf))
            s = self.scale
            self.err = np.where(s > 0, self.absdiff / np.where(s > 0, s, 1.0),
                                np.where(self.absdiff == 0, 0.0, np.inf))
            self.err = np.where(self.finite, self.err, np.inf)
            self.tol = np.maximum(self.user_tol, self.bound)
            self.by_bound = self.bound > self.user_tol
            # fail closed (a NaN comparison is False): a non-finite reference or scale never passes an entry
            self.outside = ~self.finite | ~(self.absdiff <= np.where(s > 0, self.tol * s, 0.0) + self.atol)
            self.ratio = np.where(self.tol > 0, self.err / np.where(self.tol > 0, self.tol, 1.0),
                                  np.where(self.err > 0, np.inf, 0.0))
        self.convention = False  # set by the CLI when a convention hint explains this array
        self.kinds = None  # per-entry kinds set by the CLI's diagnosis (kernels: ntkref._diagnosis), or None
        self.proven = np.zeros(shape, dtype=bool)  # the tested rule until apply_verdict says otherwise
        self.basis = np.full(shape, 2, dtype=np.int8)  # codes into BASES
        self.verdict_notes = []

    def apply_verdict(self, v):
        """Take the per-entry verdict of :func:`ntkref._verdicts.judge` (FC kernels: against the exact kernel,
        proven where ntkref's bound or an enclosure decides): outside, tolerance used, proven, basis, notes."""
        self.outside = np.asarray(v["outside"], dtype=bool)
        self.tol = np.asarray(v["tol"], dtype=np.float64)
        self.by_bound = np.asarray(v["from_ntkref"], dtype=bool)
        self.proven = np.asarray(v["proven"], dtype=bool)
        self.basis = np.asarray(v["basis"], dtype=np.int8)
        self.verdict_notes = list(v["notes"])
        with np.errstate(all="ignore"):
            self.ratio = np.where(self.tol > 0, self.err / np.where(self.tol > 0, self.tol, 1.0),
                                  np.where(self.err > 0, np.inf, 0.0))

    def verdict_counts(self):
        """{basis: entries it decided} (:data:`BASES`)."""
        return dict(zip(BASES, np.bincount(self.basis.ravel(), minlength=len(BASES)).tolist()))

    # ------------------------------------------------------------------ classification
    @property
    def agree(self):
        return not bool(np.any(self.outside))

    def group(self):
        """Per entry: "ok" or one of :data:`GROUPS` (module docstring)."""
        g = np.full(self.R.shape, "ok", dtype=object)
        if self.kinds is not None:
            g[self.outside] = np.asarray(self.kinds, dtype=object)[self.outside]
            g[self.outside & (g == "ok")] = "precision"
            g[~self.finite] = "non_finite"
            return g
        g[self.outside & self.finite] = "convention" if self.convention else "precision"
        g[~self.finite] = "non_finite"
        return g

    def part_of(self, loc):
        if self.parts is None:
            return None
        for name, mask in self.parts.items():
            if mask[loc]:
                return name
        return None

    # ------------------------------------------------------------------ entries
    def entry(self, loc, group=None):
        loc = tuple(int(i) for i in loc)
        nf = {}
        e = {"row": loc[0], "col": loc[1] if len(loc) > 1 else None,
             "candidate": json_number(self.C[loc], "candidate", nf),
             "reference": json_number(self.R[loc], "reference", nf),
             "abs_error": json_number(self.absdiff[loc], "abs_error", nf),
             "scaled_error": json_number(self.err[loc], "scaled_error", nf),
             "tolerance": float(self.tol[loc]),
             "tolerance_applied": "ntkref" if self.by_bound[loc] else "user",
             "proven": bool(self.proven[loc]), "verdict_basis": BASES[self.basis[loc]],
             "ratio": json_number(self.ratio[loc], "ratio", nf),
             "part": self.part_of(loc), "group": group or str(self.group()[loc])}
        if self.inputs is not None and len(loc) == 2:
            x1, x2 = self.inputs
            e["inputs"] = {"x1_row": _host(x1[loc[0]]).tolist(),
                           "x2_row": _host((x1 if x2 is None else x2)[loc[1]]).tolist()}
        e["non_finite"] = nf
        return e

    def _order(self, mask):
        """Locations in ``mask``, furthest outside first (non-finite first, then by ratio)."""
        idx = np.flatnonzero(mask.ravel())
        key = np.where(self.finite.ravel()[idx], self.ratio.ravel()[idx], np.inf)
        idx = idx[np.argsort(-key, kind="stable")]
        return [np.unravel_index(int(i), self.R.shape) for i in idx]

    def _stat(self, arr, mask):
        """max/median of ``arr`` over ``mask`` (finite candidates), with the max's location and values."""
        if not mask.any():
            return {"max": None, "median": None, "location": None, "candidate": None, "reference": None,
                    "non_finite": {}}
        vals = np.where(mask, arr, -np.inf)
        loc = np.unravel_index(int(np.argmax(vals)), vals.shape)
        nf = {}
        return {"max": json_number(arr[loc], "max", nf), "median": json_number(np.median(arr[mask]), "median", nf),
                "location": [int(i) for i in loc], "candidate": float(self.C[loc]),
                "reference": float(self.R[loc]), "non_finite": nf}

    def summary(self):
        """The array summary of the JSON report (module docstring)."""
        groups = self.group()
        fin = self.finite
        out = {"shape": list(self.R.shape), "agree": self.agree, "measure": self.measure,
               "n_entries": int(self.R.size), "n_finite": int(fin.sum()), "n_non_finite": int((~fin).sum()),
               "n_outside": int(self.outside.sum()),
               "tolerance_applied": {"user": int((~self.by_bound).sum()), "ntkref": int(self.by_bound.sum())},
               "verdicts": {"n_proven": int(self.proven.sum()), "n_tested": int((~self.proven).sum()),
                            "n_by_basis": self.verdict_counts(), "notes": list(self.verdict_notes)},
               "errors": {"absolute": self._stat(self.absdiff, fin),
                          "relative": self._stat(self.rel, fin & (self.R != 0)),
                          "scaled": self._stat(self.err, fin)}}
        if self.parts is not None:
            out["parts"] = {}
            for name, mask in self.parts.items():
                st = self._stat(self.err, fin & mask)
                out["parts"][name.replace("-", "_")] = {"n": int(mask.sum()), "max_scaled": st["max"],
                                                        "location": st["location"], "non_finite": st["non_finite"]}
        out["non_finite"] = [self.entry(loc, "non_finite") for loc in self._order(~fin)[:_LISTED]]
        out["groups"] = {}
        for kind in GROUPS:
            mask = groups == kind
            order = self._order(mask)
            minimal = None
            if order and self.inputs is not None:
                minimal = self.entry(order[0], kind)  # one entry = one pair of input rows
            out["groups"][kind] = {"count": int(mask.sum()), "worst": [self.entry(loc, kind) for loc in order[:_WORST]],
                                   "minimal": minimal}
        out["worst"] = [self.entry(loc) for loc in self._order(self.outside)[:_WORST]]
        return out

    # ------------------------------------------------------------------ text
    def lines(self):
        """The printed report of this array (maxima over the finite entries; non-finite entries apart)."""
        prefix = f"  [{self.name}] " if self.name else "  "
        if self.R.size == 0:
            return [prefix + "(empty arrays)"]
        out = []
        fin = self.finite
        for label, arr, mask in (("absolute error |cand - ref|", self.absdiff, fin),
                                 ("relative error |cand - ref|/|ref|", self.rel, fin & (self.R != 0)),
                                 (self.measure, self.err, fin)):
            st = self._stat(arr, mask)
            if st["max"] is None and not st["non_finite"]:
                out.append(f"{prefix}max {label}: no finite entries")
                continue
            value = st["max"] if st["max"] is not None else float("inf")
            med = st["median"] if st["median"] is not None else float("inf")
            out.append(f"{prefix}max {label}: {value:.3e} at {_fmt(st['location'])} (candidate "
                       f"{st['candidate']!r}, reference {st['reference']!r}); median {med:.3e}")
        if self.parts is not None:
            for name, mask in self.parts.items():
                st = self._stat(self.err, fin & mask)
                if st["location"] is not None:
                    value = st["max"] if st["max"] is not None else float("inf")
                    out.append(f"{prefix}max {name} normalised error: {value:.3e} at {_fmt(st['location'])}")
        n_nf = int((~fin).sum())
        if n_nf:
            listed = ", ".join(f"{_fmt(loc)} {float(self.C[loc])!r}" for loc in self._order(~fin)[:5])
            more = f" (first 5: {listed}, ...)" if n_nf > 5 else f": {listed}"
            out.append(f"{prefix}{n_nf} non-finite candidate entr{'y' if n_nf == 1 else 'ies'} (overflow/NaN; "
                       f"not in the maxima above){more}")
        n_b = int(self.by_bound.sum())
        if n_b:
            out.append(f"{prefix}ntkref's own error bound exceeded the user tolerance on {n_b} of {self.R.size} "
                       f"entries (max bound {float(np.max(self.bound)):.3g}); the verdict used it there")
        c = self.verdict_counts()
        out.append(f"{prefix}verdicts: {int(self.proven.sum())} of {self.R.size} proven ({c[BASES[0]]} by ntkref's "
                   f"proven bound, {c[BASES[1]]} by an enclosure), {c[BASES[2]]} tested (not proven)")
        out += [f"{prefix}  {n}" for n in self.verdict_notes[:5]]
        if not self.agree:
            counts = {k: int(v) for k, v in zip(*np.unique(self.group()[self.outside], return_counts=True))}
            worst = self._order(self.outside)[0]
            what = ", ".join(f"{counts[k]} {k}" for k in GROUPS if k in counts)
            out.append(f"{prefix}{int(self.outside.sum())} of {self.R.size} entries outside the tolerance ({what}); "
                       f"worst at {_fmt(worst)}")
        return out


def _fmt(loc):
    return "(" + ", ".join(str(int(i)) for i in loc) + ")"


def compare_arrays(name, candidate, reference, scale, user_tol, bound, atol, measure, **kw):
    """Build an :class:`ArrayComparison` (shapes must already match)."""
    return ArrayComparison(name, candidate, reference, scale, user_tol, bound, atol, measure, **kw)


def report_dict(*, kind, comparisons, backend, reference, tolerance, hints, lines, extra=None):
    """The JSON report (module docstring); ``comparisons`` is a list of :class:`ArrayComparison`."""
    out = {"schema": SCHEMA_VERSION, "command": "compare", "kind": kind,
           "agree": all(c.agree for c in comparisons), "backend": backend, "reference": reference,
           "tolerance": tolerance, "arrays": {c.name or "candidate": c.summary() for c in comparisons},
           "hints": hints, "verdicts": verdict_totals(comparisons)}
    out.update(extra or {})
    out["lines"] = list(lines)
    return out


def verdict_totals(comparisons):
    """{"n_proven", "n_tested", "n_by_basis": {basis: int}} over every entry of every array."""
    by = {k: sum(c.verdict_counts()[k] for c in comparisons) for k in BASES}
    return {"n_proven": by[BASES[0]] + by[BASES[1]], "n_tested": by[BASES[2]], "n_by_basis": by}


def verdict_line(comparisons):
    """The printed total: how many verdicts are proven, on which basis."""
    t = verdict_totals(comparisons)
    by = t["n_by_basis"]
    return (f"  verdicts proven: {t['n_proven']} of {t['n_proven'] + t['n_tested']} entries ({by[BASES[0]]} by "
            f"ntkref's proven bound, {by[BASES[1]]} by a ball-arithmetic enclosure); {t['n_tested']} judged by the "
            "tested bound (not proven)")


def csv_text(comparisons):
    """The per-entry table of every array (:data:`CSV_COLUMNS`) as CSV text."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in comparisons:
        groups = c.group()
        for flat in range(c.R.size):
            loc = np.unravel_index(flat, c.R.shape)
            w.writerow([c.name, int(loc[0]), int(loc[1]) if len(loc) > 1 else "", repr(float(c.C[loc])),
                        repr(float(c.R[loc])), repr(float(c.absdiff[loc])), repr(float(c.err[loc])),
                        repr(float(c.tol[loc])), "ntkref" if c.by_bound[loc] else "user", int(c.outside[loc]),
                        groups[loc], c.part_of(loc) or "", int(c.proven[loc]), BASES[c.basis[loc]]])
    return buf.getvalue()
