r"""Structured results of the ``ntkref.testing`` checkers: examples, per-kind summaries, reports.

Re-exported by :mod:`ntkref.testing` (``Mismatch``, ``KindSummary``, ``CheckReport``, ``REPORT_SCHEMA``,
``FAILURE_KINDS``, ``ENTRY_COLUMNS``, ``json_safe``); the CLI may use them for its own structured output.
The scaled kernel error and ntkref's own error bounds (the verdict's floor), which the CLI uses too, live in
:mod:`ntkref.kernels._accuracy` (no hypothesis).  Reports are written through the one atomic writer,
:func:`ntkref._lib.files.replace_atomically`.

Failure kinds
-------------
Kinds are by cause, not by size, and the same for ``ntkref compare`` (one diagnosis, :mod:`ntkref._diagnosis`;
kernel and fit checks — dynamics still split their finite errors at their ``convention_threshold``):

``"non_finite"``   the candidate returned inf or NaN where the reference is finite, or a finite value lost to
                   underflow/overflow (wrong only at extreme scales — R(x,x) outside [tiny^⅓, max^⅓] of the dtype —
                   and right, to its precision, on the same rows rescaled to unit norm);
``"convention"``   a named slip explains every entry compared (to within max(tolerance, precision band)): ntkref's
                   kernel recomputed under the other convention (NNGP for NTK, depth ± 1, no bias term, GAP vs
                   Flatten, …; fits: λ′ = 2λ, λ/2, nλ, λ/n, 1/λ) or a constant factor c, matched on ≥ 2 entries of
                   different scale of the *unshrunk* failure (plus the same rows at unit norm and a few generic
                   rows); the ``hint`` names the slip;
``"formula"``      any other finite error larger than the precision band: a wrong formula; no hint (no hint is
                   better than a wrong one);
``"precision"``    a finite error above the verdict tolerance but within the precision band
                   10·eps·(n_terms + κ) of the candidate's working precision eps at the input's conditioning κ
                   (arccos/arcsin of a correlation ρ: κ = min(1/√(1 − ρ²), eps^-½), the max over the layers): lost
                   digits;
``"soundness"``    (certificates) a counterexample inside a claimed radius;
``"exception"``    the candidate raised;
``"shape"``        the candidate returned the wrong shape, or (certificates, fits) an invalid value.

JSON (``CheckReport.to_dict()``, schema ``REPORT_SCHEMA``, version ``"ntkref.testing.report/2"``)
-------------------------------------------------------------------------------------------------
Every number is a JSON number; a value that is not finite is written as ``null`` and listed, with its text
(``"nan"``, ``"inf"``, ``"-inf"``), under ``non_finite`` (path → text) of the enclosing example, or in the
report's top-level ``non_finite`` list for the candidate's entries.  Top-level keys::

    schema              "ntkref.testing.report/2"
    check               "check_kernel" | "check_cntk" | "check_fit" | "check_dynamics" | "check_certificate"
    description         str, what was checked (parameters, tolerances)
    mode                "assert" (stop at the first failure) | "measure" (the whole budget)
    passed              bool
    seed                int, hypothesis seed: the same call with the same seed repeats the run
    n_examples          int, inputs tried
    n_examples_by_source {"hypothesis": int, "battery": int}
    max_error           {entry kind: number}, the largest *finite* error per entry kind over the inputs tried
                        (over the whole budget in measure mode; until the first failure in assert mode)
    n_entries           int, values compared (kernel entries, trajectory points, objectives, radii)
    n_non_finite        int, candidate values that were inf or NaN
    non_finite          [{"example": int, "source": str, "location": [int], "value": "nan"|"inf"|"-inf"}]
                        (the first 100; n_non_finite counts them all)
    tolerance           {"user": {name: number}, "ntkref_bound": number|null, "bound_source": str,
                         "n_entries_user": int, "n_entries_ntkref": int}: the verdict tolerance of each value is
                         max(user tolerance, ntkref's certified bound); the counts say which applied how often
    failures            {kind: {"count": int (examples), "n_entries": int, "worst": example,
                                "minimal": example | null}}
    failure             example | null, the reported minimal failing example (the first kind found in assert mode,
                         the most severe kind in measure mode)
    entries             [entry row] (kernel checks: the ``worst_k`` = 20 most severe failing entries by default;
                         ``to_dict(entries="failing")`` for every failing one, ``entries="all"`` / ``to_csv`` for all)
    entries_listed      {"which": "worst"|"failing"|"all"|"none", "k": int|null, "n_listed", "n_rows", "n_failing":
                         int, "n_by_kind": {kind or "ok": int}}: what ``entries`` holds out of the recorded table
    config              the checked configuration as fields: kernel checks {"family", "depth", "activation" or
                         "readout", "W_std", "b_std", "which", "dtype", "tolerances": {"diag_tol", "offdiag_tol",
                         "atol"}} (after a sweep a swept parameter is the list of the values run); {} otherwise
    coverage            kernel checks: {"how": "keywords"|"factory"|"fixed"|"reference", "swept", "pinned",
                         "assumed", "configs": [{parameters…, "n_examples", "first_example", "passed"}],
                         "exercised"/"not_exercised": {parameter: [values], "inputs": [input kinds]},
                         "input_extremes", "notes", "line"} (ntkref.testing._coverage); {} for other checks
    versions            {"ntkref", "numpy", "hypothesis", "python", "backend": str}
    duration_s          number|null, wall-clock seconds of the check
    test_id             str|null, the pytest node id (through the ``ntkref_oracle`` fixture)
    verdicts            {"n_proven": int, "n_tested": int, "n_by_basis": {"proven bound", "enclosure",
                         "tested bound": int}, "notes": [str]}: kernel checks judge each entry against the exact
                         kernel where ntkref has a proven bound (:mod:`ntkref._verdicts`) — proven by the bound, or
                         settled by a ball-arithmetic enclosure near the threshold — else by the tested bound
                         (not proven); the notes say why entries were not proven; zeros for other checks

An *example* is ``{"kind", "entry", "source", "location": [int], "candidate_value", "reference_value", "error",
"tolerance": number|null, "tolerance_source": "user"|"ntkref", "verdict_basis": str, "detail": str, "hint": str, "replay": str,
"inputs": {name: nested lists of numbers | number | null}, "config": {…} | null,
"non_finite": {path: text}}``; ``replay`` is an
``@example(...)`` line that reproduces the inputs (for a ``@given(strategy)`` test of the checker's strategy).
An *entry row* has the keys of ``ENTRY_COLUMNS``.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field

import array_api_compat
import numpy as np  # host-side test tooling: reports are NumPy/Python values by design

from .._lib.backend import to_numpy
from .._lib.files import replace_atomically
from .._lib.validation import InvalidParameterError

__all__ = ["FAILURE_KINDS", "ENTRY_COLUMNS", "REPORT_SCHEMA", "SCHEMA_VERSION", "VERDICT_BASES", "Mismatch",
           "KindSummary", "CheckReport", "json_safe", "merge_verdicts", "replay_line"]

SCHEMA_VERSION = "ntkref.testing.report/2"
WORST_K = 20
"""How many failing entries ``CheckReport.to_dict()`` lists by default (``entries="worst"``)."""
FAILURE_KINDS = ("exception", "shape", "formula", "convention", "non_finite", "soundness", "precision")
"""Failure kinds, most telling first (the order a report picks its ``failure`` in; module docstring)."""

ENTRY_COLUMNS = ("example", "source", "row", "col", "entry", "candidate", "reference", "abs_err", "scale",
                 "scaled_err", "tolerance", "tolerance_source", "proven", "verdict_basis", "kind")
"""Columns of the per-entry table of kernel checks (``kind`` is ``"ok"`` for an entry that passed; ``proven``
whether the entry's verdict is a theorem, ``verdict_basis`` what decided it: :data:`VERDICT_BASES`)."""

VERDICT_BASES = ("proven bound", "enclosure", "tested bound")
"""The basis of an entry's verdict (:mod:`ntkref._verdicts`): ntkref's proven error bound, a ball-arithmetic
enclosure of the exact kernel (entries near the threshold), or the tested — observed, not proven — bound."""


def merge_verdicts(summaries):
    """One ``verdicts`` summary (counts per basis summed, notes joined) from several reports' ones."""
    counts, notes = {}, []
    for v in summaries:
        for k, n in (v or {}).get("n_by_basis", {}).items():
            counts[k] = counts.get(k, 0) + int(n)
        for note in (v or {}).get("notes", []):
            if note not in notes:
                notes.append(note)
    return {"n_by_basis": counts, "notes": notes}

_MAX_NON_FINITE_LISTED = 100


def versions():
    """The versions a report is made with: ntkref, numpy, hypothesis, python and the array backend's name."""
    import platform

    from .. import __version__ as ntkref_version
    from .._lib.backend import backend_name

    out = {"ntkref": str(ntkref_version), "numpy": np.__version__, "python": platform.python_version()}
    try:
        import hypothesis

        out["hypothesis"] = hypothesis.__version__
    except ImportError:  # pragma: no cover - ntkref.testing needs it
        out["hypothesis"] = "not installed"
    try:
        out["backend"] = str(backend_name())
    except Exception as exc:  # noqa: BLE001 - a report is still made when the backend setting is broken
        out["backend"] = f"unknown ({type(exc).__name__})"
    return out


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------
def _text(v):
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def json_safe(value, path="", non_finite=None):
    """``value`` as JSON-ready Python data: arrays → nested lists, non-finite floats → ``None``.

    Each replaced float is recorded in ``non_finite`` (a dict, path → ``"nan"``/``"inf"``/``"-inf"``).  Arrays of
    any array library are copied to the host first; complex numbers have no JSON form and are refused
    (``InvalidParameterError`` naming ``value`` and the path).  Other objects become their ``str``.
    """
    if non_finite is None:
        non_finite = {}
    if not isinstance(value, np.ndarray) and array_api_compat.is_array_api_obj(value):
        value = np.asarray(to_numpy(value))  # explicit host copy of another library's array (reports are host data)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (complex, np.complexfloating)):
        where = f" (at {path})" if path else ""
        raise InvalidParameterError(f"The 'value' parameter of json_safe holds a complex number{where}, which JSON "
                                    f"cannot represent: {value!r}.")
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        non_finite[path] = _text(value)
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v, f"{path}.{k}" if path else str(k), non_finite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, f"{path}[{i}]", non_finite) for i, v in enumerate(value)]
    return str(value)


def _array_source(a):
    a = np.asarray(a)
    body = repr(a.tolist())  # Python float reprs round-trip exactly
    if a.dtype == np.float32:
        return f"np.array({body}, dtype=np.float32)"
    return f"np.array({body})"


def replay_line(inputs, order):
    """An ``@example(...)`` line reproducing ``inputs`` (the names in ``order``, one tuple argument).

    For a ``@given(strategy)`` test whose strategy draws the tuple ``order`` (e.g. ``(x1, x2)`` for
    :func:`ntkref.testing.kernel_inputs`); evaluating it needs ``np`` (NumPy) and hypothesis' ``example``.
    """
    parts = []
    for name in order:
        v = inputs.get(name)
        if v is None:
            parts.append("None")
        elif isinstance(v, np.ndarray):
            parts.append(_array_source(v))
        else:
            parts.append(repr(v))
    inner = ", ".join(parts) + ("," if len(parts) == 1 else "")
    return f"@example(({inner}))  # ({', '.join(order)})"


# ---------------------------------------------------------------------------------------------
# examples
# ---------------------------------------------------------------------------------------------
@dataclass
class Mismatch:
    """One disagreement between a candidate and ntkref (an example: the worst or the minimal one found).

    Attributes
    ----------
    inputs : dict
        The arrays the candidate was called with (e.g. ``{"x1": ..., "x2": None}``).
    location : tuple
        Index of the worst entry (``(i, j)`` for kernels, ``(t, i)`` for trajectories, …).
    candidate_value, reference_value : float
        The two values there (NaN if the candidate raised or returned a wrong shape).
    error : float
        The measured error there (see the checker's docstring for the measure).
    tolerance : float
        The verdict tolerance it exceeded: max(user tolerance, ntkref's certified bound).
    entry : str
        What kind of entry (``"diagonal"``, ``"off-diagonal"``, ``"objective"``, …).
    detail : str
        Anything else worth saying (an exception the candidate raised, a shape mismatch).
    kind : str
        The failure kind (:data:`FAILURE_KINDS`).
    tolerance_source : {"user", "ntkref"}
        Which of the two set the tolerance.
    verdict_basis : str
        Kernel checks: what decided the verdict of that entry (:data:`VERDICT_BASES`; ``""`` elsewhere).
    source : str
        ``"hypothesis"`` (shrunk), ``"battery"`` or ``"inputs"``.
    replay : str
        An ``@example(...)`` line reproducing the inputs.
    hint : str
        A likely explanation (convention mismatches), or ``""``.
    """

    inputs: dict
    location: tuple
    candidate_value: float
    reference_value: float
    error: float
    tolerance: float
    entry: str
    detail: str = ""
    kind: str = ""
    tolerance_source: str = "user"
    source: str = ""
    replay: str = ""
    hint: str = ""
    config: dict | None = None
    verdict_basis: str = ""

    def __str__(self):
        lines = [
            f"  [{self.kind or 'failure'}] location {self.location} ({self.entry}): candidate "
            f"{self.candidate_value!r}, reference {self.reference_value!r}",
            f"  measured error {self.error:.3e} > tolerance {self.tolerance:.3e} ({self.tolerance_source})"
            + (f"; verdict: {'proven' if self.verdict_basis in VERDICT_BASES[:2] else 'not proven'} "
               f"({self.verdict_basis})" if self.verdict_basis else ""),
        ]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.config:
            lines.append("  configuration: " + ", ".join(f"{k}={v!r}" for k, v in self.config.items()))
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        with np.printoptions(precision=17, floatmode="unique", linewidth=120, threshold=10_000):
            for name, value in self.inputs.items():
                text = f"np.{value!r}" if isinstance(value, np.ndarray) else repr(value)
                lines.append(f"  {name} = {text}")
        if self.replay:
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)

    def to_dict(self):
        """JSON-ready dict (module docstring, 'example')."""
        nf = {}
        out = {
            "kind": self.kind, "entry": self.entry, "source": self.source,
            "location": json_safe(list(self.location), "location", nf),
            "candidate_value": json_safe(float(self.candidate_value), "candidate_value", nf),
            "reference_value": json_safe(float(self.reference_value), "reference_value", nf),
            "error": json_safe(float(self.error), "error", nf),
            "tolerance": json_safe(float(self.tolerance), "tolerance", nf),
            "tolerance_source": self.tolerance_source, "verdict_basis": self.verdict_basis, "detail": self.detail,
            "hint": self.hint, "replay": self.replay,
            "inputs": json_safe(self.inputs, "inputs", nf),
            "config": None if self.config is None else json_safe(dict(self.config), "config", nf),
        }
        out["non_finite"] = nf
        return out


@dataclass
class KindSummary:
    """All failures of one kind over a run: how many, the worst one and a shrunk minimal one.

    ``count`` is the number of examples with at least one failure of this kind, ``n_entries`` the number of
    failing values; ``worst`` has the largest error/tolerance ratio; ``minimal`` is hypothesis' shrunk example
    (then reduced to the rows involved), ``None`` in assert mode for kinds other than the one reported.
    """

    kind: str
    count: int = 0
    n_entries: int = 0
    worst: Mismatch | None = None
    minimal: Mismatch | None = None

    def to_dict(self):
        return {"count": self.count, "n_entries": self.n_entries,
                "worst": None if self.worst is None else self.worst.to_dict(),
                "minimal": None if self.minimal is None else self.minimal.to_dict()}


# ---------------------------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------------------------
@dataclass
class CheckReport:
    """Outcome of a ``check_*`` run (JSON layout: this module's docstring).

    Attributes
    ----------
    passed : bool
    n_examples : int
        Inputs tried (hypothesis examples + battery cases).
    max_error : dict
        Largest *finite* error seen per entry kind (non-finite values are counted in ``n_non_finite``):
        over the whole budget in measure mode, until the first failure in assert mode.
    failure : Mismatch or None
        The reported minimal failing example.
    source : str
        Where ``failure`` came from (``"hypothesis"``, ``"battery"``), ``""`` if passed.
    description : str
    check : str
        Which checker ran.
    mode : {"assert", "measure"}
    seed : int
    failures : dict
        kind → :class:`KindSummary`.
    n_entries, n_non_finite : int
    non_finite : list of (example, source, location, value)
    n_examples_by_source : dict
    tolerance : dict
        ``{"user": {...}, "ntkref_bound": float or None, "bound_source": str}``.
    tolerance_counts : dict
        ``{"user": n, "ntkref": n}``: how many values were judged with which tolerance.
    verdicts : dict
        Kernel checks: ``{"n_by_basis": {basis: n}, "notes": [str]}``, how many values each verdict basis
        (:data:`VERDICT_BASES`) decided and why some were not proven (e.g. python-flint missing); ``n_proven``
        and ``n_tested`` are the totals.
    entries : list of tuple
        Kernel checks: one row per entry compared (``ENTRY_COLUMNS``).
    config : dict
        The checked configuration as fields (kernel checks: ``depth``, ``activation``/``readout``, ``W_std``,
        ``b_std``, ``which``, ``dtype``, ``tolerances``; after a sweep each swept parameter is the list of the values
        run, in order).
    coverage : dict
        What the check exercised and what it did not (:mod:`ntkref.testing._coverage`); ``coverage["line"]`` is
        the one-line summary printed with the report.  Empty for checks that do not record it.
    versions : dict
        ``ntkref``, ``numpy``, ``hypothesis``, ``python`` (and the array ``backend``) the report was made with.
    duration_s : float or None
        Wall-clock seconds the check took.
    test_id : str or None
        The pytest node id when run through the ``ntkref_oracle`` fixture, else ``None``.
    """

    passed: bool
    n_examples: int
    max_error: dict = field(default_factory=dict)
    failure: Mismatch | None = None
    source: str = ""
    description: str = ""
    check: str = ""
    mode: str = "assert"
    seed: int = 0
    failures: dict = field(default_factory=dict)
    n_entries: int = 0
    n_non_finite: int = 0
    non_finite: list = field(default_factory=list)
    n_examples_by_source: dict = field(default_factory=dict)
    tolerance: dict = field(default_factory=dict)
    tolerance_counts: dict = field(default_factory=lambda: {"user": 0, "ntkref": 0})
    entries: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    coverage: dict = field(default_factory=dict)
    versions: dict = field(default_factory=lambda: versions())
    duration_s: float | None = None
    test_id: str | None = None
    verdicts: dict = field(default_factory=dict)

    @property
    def n_proven(self):
        """Values whose verdict is proven (by ntkref's proven bound or an enclosure)."""
        c = self.verdicts.get("n_by_basis", {})
        return int(c.get(VERDICT_BASES[0], 0) + c.get(VERDICT_BASES[1], 0))

    @property
    def n_tested(self):
        """Values judged by the tested (observed, not proven) bound."""
        return int(self.verdicts.get("n_by_basis", {}).get(VERDICT_BASES[2], 0))

    def verdict_line(self):
        """One line: how many verdicts are proven, on which basis (kernel checks; ``""`` otherwise)."""
        c = self.verdicts.get("n_by_basis", {})
        if not c:
            return ""
        total = self.n_proven + self.n_tested
        line = (f"verdicts: {self.n_proven} of {total} proven ({c.get(VERDICT_BASES[0], 0)} by ntkref's proven "
                f"bound, {c.get(VERDICT_BASES[1], 0)} by an enclosure), {self.n_tested} tested (not proven)")
        notes = self.verdicts.get("notes", [])
        return line + ("".join(f"\n  {n}" for n in notes[:5]))

    def __str__(self):
        errs = ", ".join(f"{k} {v:.3e}" for k, v in sorted(self.max_error.items()))
        head = (f"{self.description}\n{'PASSED' if self.passed else 'FAILED'} after {self.n_examples} inputs "
                f"({self.mode} mode); largest finite errors seen: {errs or 'none'}")
        if self.n_non_finite:
            head += f"; {self.n_non_finite} non-finite candidate value(s)"
        tc = self.tolerance_counts
        if tc.get("ntkref"):
            head += (f"\nverdict tolerance: ntkref's certified bound {self.tolerance.get('ntkref_bound')!r} "
                     f"applied to {tc['ntkref']} of {tc['ntkref'] + tc['user']} values (the user's elsewhere)")
        if self.tolerance.get("user_source"):
            head += f"\ntolerance: {self.tolerance['user_source']}"
        if self.verdict_line():
            head += "\n" + self.verdict_line()
        if self.coverage.get("line"):
            head += "\n" + self.coverage["line"]
        if self.mode == "measure" and self.failures:
            for kind in FAILURE_KINDS:
                s = self.failures.get(kind)
                if s is None:
                    continue
                head += f"\n{kind}: {s.count} example(s), {s.n_entries} value(s)"
                if s.worst is not None:
                    head += f"; worst error {s.worst.error:.3e} at tolerance {s.worst.tolerance:.3e}"
                if s.minimal is not None:
                    head += f"\n minimal example ({s.minimal.source}):\n{s.minimal}"
        elif self.failure is not None:
            head += f"\nminimal failing example (from the {self.source}):\n{self.failure}"
            s = self.failures.get(self.failure.kind)
            if s is not None and s.worst is not None and s.worst is not self.failure:
                head += (f"\nworst {self.failure.kind} error found: {s.worst.error:.3e} at tolerance "
                         f"{s.worst.tolerance:.3e} (the minimal example's: {self.failure.error:.3e})")
                if s.worst.replay:
                    head += f"\n  replay: {s.worst.replay}"
        return head

    # -- structured output ---------------------------------------------------------------------
    def entry_table(self, which="all"):
        """The per-entry table as a list of dicts (``ENTRY_COLUMNS``); ``which="failing"`` keeps the failures."""
        rows = self.entries if which == "all" else [r for r in self.entries if r[-1] != "ok"]
        return [dict(zip(ENTRY_COLUMNS, r)) for r in rows]

    def worst_entries(self, k=WORST_K):
        """The ``k`` failing entries of the table, most severe first (non-finite, then by error / tolerance)."""
        rows = self.entry_table("failing")

        def severity(r):
            cand, err, tol = r["candidate"], r["scaled_err"], r["tolerance"]
            if not (isinstance(cand, float) and math.isfinite(cand)) or not math.isfinite(err):
                return math.inf
            return err / tol if tol > 0 else math.inf

        return sorted(rows, key=severity, reverse=True)[:k]

    def to_dict(self, entries="worst", worst_k=WORST_K):
        """JSON-ready dict (module docstring).

        ``entries``: ``"worst"`` (default: the ``worst_k`` most severe failing entries — a report stays a few
        kilobytes however many entries fail), ``"failing"`` (every failing entry), ``"all"`` (the whole table, as
        :meth:`to_csv`) or ``"none"``; ``entries_listed`` says which and how many there are.
        """
        if entries not in ("worst", "failing", "all", "none"):
            raise InvalidParameterError(f"The 'entries' parameter of CheckReport.to_dict must be 'worst', 'failing', "
                                        f"'all' or 'none'. Got {entries!r} instead.")
        if isinstance(worst_k, bool) or not isinstance(worst_k, (int, np.integer)) or worst_k < 0:
            raise InvalidParameterError(f"The 'worst_k' parameter of CheckReport.to_dict must be an integer >= 0. "
                                        f"Got {worst_k!r} instead.")
        if entries == "worst":
            listed = self.worst_entries(int(worst_k))
        elif entries == "none":
            listed = []
        else:
            listed = self.entry_table(entries)
        by_kind = {}
        for r in self.entries:
            by_kind[r[-1]] = by_kind.get(r[-1], 0) + 1
        nf = {}
        tol = dict(self.tolerance)
        out = {
            "schema": SCHEMA_VERSION,
            "check": self.check,
            "description": self.description,
            "mode": self.mode,
            "passed": bool(self.passed),
            "seed": int(self.seed) if isinstance(self.seed, (int, np.integer)) else 0,
            "n_examples": int(self.n_examples),
            "n_examples_by_source": {k: int(v) for k, v in self.n_examples_by_source.items()},
            "max_error": json_safe({k: float(v) for k, v in self.max_error.items()}, "max_error", nf),
            "n_entries": int(self.n_entries),
            "n_non_finite": int(self.n_non_finite),
            "non_finite": [{"example": int(e), "source": s, "location": [int(v) for v in loc], "value": val}
                           for e, s, loc, val in self.non_finite[:_MAX_NON_FINITE_LISTED]],
            "tolerance": {
                "user": json_safe(tol.get("user", {}), "tolerance.user", nf),
                "ntkref_bound": json_safe(tol.get("ntkref_bound"), "tolerance.ntkref_bound", nf),
                "bound_source": str(tol.get("bound_source", "")),
                "n_entries_user": int(self.tolerance_counts.get("user", 0)),
                "n_entries_ntkref": int(self.tolerance_counts.get("ntkref", 0)),
            },
            "failures": {k: self.failures[k].to_dict() for k in FAILURE_KINDS if k in self.failures},
            "failure": None if self.failure is None else self.failure.to_dict(),
            "entries": [_entry_json(r) for r in listed],
            "entries_listed": {"which": entries, "k": int(worst_k) if entries == "worst" else None,
                               "n_listed": len(listed), "n_rows": len(self.entries),
                               "n_failing": sum(v for k, v in by_kind.items() if k != "ok"),
                               "n_by_kind": by_kind},
            "config": json_safe(dict(self.config), "config", {}),
            "coverage": json_safe(dict(self.coverage), "coverage", {}),
            "versions": {str(k): str(v) for k, v in self.versions.items()},
            "duration_s": (float(self.duration_s) if self.duration_s is not None and math.isfinite(self.duration_s)
                           else None),
            "test_id": None if self.test_id is None else str(self.test_id),
            "verdicts": {"n_proven": self.n_proven, "n_tested": self.n_tested,
                         "n_by_basis": {k: int(self.verdicts.get("n_by_basis", {}).get(k, 0)) for k in VERDICT_BASES},
                         "notes": [str(n) for n in self.verdicts.get("notes", [])]},
        }
        for key in ("user_source", "dtype_bound", "dtype_bound_source"):
            if key in tol:
                out["tolerance"][key] = json_safe(tol[key], f"tolerance.{key}", nf)
        if nf:  # only the user's tolerances can be inf here (e.g. diag_tol=inf): say so
            out["tolerance"]["non_finite"] = nf
        return out

    def to_json(self, path, entries="worst", worst_k=WORST_K):
        """Write :meth:`to_dict` to ``path`` (strict JSON: ``allow_nan=False``).

        Atomically (:func:`ntkref._lib.files.replace_atomically`): if writing fails half-way, no partial file is
        left and an existing ``path`` keeps its contents.
        """
        data = self.to_dict(entries, worst_k)
        replace_atomically(path, lambda fh: json.dump(data, fh, indent=1, allow_nan=False), mode="w",
                           encoding="utf-8")

    def to_csv(self, path):
        """Write the per-entry table (``ENTRY_COLUMNS``, every entry) to ``path`` as CSV.

        Numbers are written with ``repr`` (round-trip exact); non-finite values as ``nan``/``inf``/``-inf``.
        Atomically, as :meth:`to_json`.
        """

        def write(fh):
            w = csv.writer(fh)
            w.writerow(ENTRY_COLUMNS)
            for r in self.entries:
                w.writerow([repr(float(v)) if isinstance(v, float) else v for v in r])

        replace_atomically(path, write, mode="w", encoding="utf-8", newline="")


def _entry_json(row):
    out = {}
    nf = {}
    for k, v in row.items():
        out[k] = json_safe(v, k, nf)
    out["non_finite"] = nf
    return out


# ---------------------------------------------------------------------------------------------
# JSON schema (draft 2020-12 subset: type, properties, required, items, enum, additionalProperties)
# ---------------------------------------------------------------------------------------------
_NUM_OR_NULL = {"type": ["number", "null"]}
_NON_FINITE_MAP = {"type": "object", "additionalProperties": {"enum": ["nan", "inf", "-inf"]}}
_EXAMPLE = {
    "type": ["object", "null"],
    "required": ["kind", "entry", "source", "location", "candidate_value", "reference_value", "error", "tolerance",
                 "tolerance_source", "detail", "hint", "replay", "inputs", "non_finite"],
    "properties": {
        "kind": {"enum": list(FAILURE_KINDS)},
        "entry": {"type": "string"},
        "source": {"type": "string"},
        "location": {"type": "array", "items": {"type": ["integer", "string"]}},
        "candidate_value": _NUM_OR_NULL,
        "reference_value": _NUM_OR_NULL,
        "error": _NUM_OR_NULL,
        "tolerance": _NUM_OR_NULL,
        "tolerance_source": {"enum": ["user", "ntkref"]},
        "verdict_basis": {"enum": [""] + list(VERDICT_BASES)},
        "detail": {"type": "string"},
        "hint": {"type": "string"},
        "replay": {"type": "string"},
        "inputs": {"type": "object"},
        "config": {"type": ["object", "null"]},
        "non_finite": _NON_FINITE_MAP,
    },
}
_ENTRY = {
    "type": "object",
    "required": list(ENTRY_COLUMNS) + ["non_finite"],
    "properties": {
        "example": {"type": "integer"}, "source": {"type": "string"}, "row": {"type": "integer"},
        "col": {"type": "integer"}, "entry": {"type": "string"}, "candidate": _NUM_OR_NULL,
        "reference": _NUM_OR_NULL, "abs_err": _NUM_OR_NULL, "scale": _NUM_OR_NULL, "scaled_err": _NUM_OR_NULL,
        "tolerance": _NUM_OR_NULL, "tolerance_source": {"enum": ["user", "ntkref"]},
        "proven": {"type": "boolean"}, "verdict_basis": {"enum": list(VERDICT_BASES)},
        "kind": {"enum": ["ok"] + list(FAILURE_KINDS)}, "non_finite": _NON_FINITE_MAP,
    },
}
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ntkref.testing check report",
    "type": "object",
    "required": ["schema", "check", "description", "mode", "passed", "seed", "n_examples", "n_examples_by_source",
                 "max_error", "n_entries", "n_non_finite", "non_finite", "tolerance", "failures", "failure",
                 "entries", "entries_listed", "config", "coverage", "versions", "duration_s", "test_id", "verdicts"],
    "properties": {
        "schema": {"enum": [SCHEMA_VERSION]},
        "check": {"enum": ["check_kernel", "check_cntk", "check_fit", "check_dynamics", "check_certificate"]},
        "description": {"type": "string"},
        "mode": {"enum": ["assert", "measure"]},
        "passed": {"type": "boolean"},
        "seed": {"type": "integer"},
        "n_examples": {"type": "integer"},
        "n_examples_by_source": {"type": "object", "additionalProperties": {"type": "integer"}},
        "max_error": {"type": "object", "additionalProperties": {"type": "number"}},
        "n_entries": {"type": "integer"},
        "n_non_finite": {"type": "integer"},
        "non_finite": {"type": "array", "items": {
            "type": "object", "required": ["example", "source", "location", "value"],
            "properties": {"example": {"type": "integer"}, "source": {"type": "string"},
                           "location": {"type": "array", "items": {"type": "integer"}},
                           "value": {"enum": ["nan", "inf", "-inf"]}}}},
        "tolerance": {"type": "object", "required": ["user", "ntkref_bound", "bound_source", "n_entries_user",
                                                     "n_entries_ntkref"],
                      "properties": {"user": {"type": "object", "additionalProperties": _NUM_OR_NULL},
                                     "ntkref_bound": _NUM_OR_NULL, "bound_source": {"type": "string"},
                                     "n_entries_user": {"type": "integer"},
                                     "n_entries_ntkref": {"type": "integer"},
                                     "user_source": {"type": "string"}, "dtype_bound": _NUM_OR_NULL,
                                     "dtype_bound_source": {"type": "string"}}},
        "failures": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["count", "n_entries", "worst", "minimal"],
            "properties": {"count": {"type": "integer"}, "n_entries": {"type": "integer"},
                           "worst": _EXAMPLE, "minimal": _EXAMPLE}}},
        "failure": _EXAMPLE,
        "entries": {"type": "array", "items": _ENTRY},
        "entries_listed": {"type": "object", "required": ["which", "k", "n_listed", "n_rows", "n_failing",
                                                          "n_by_kind"],
                           "properties": {"which": {"enum": ["worst", "failing", "all", "none"]},
                                          "k": {"type": ["integer", "null"]}, "n_listed": {"type": "integer"},
                                          "n_rows": {"type": "integer"}, "n_failing": {"type": "integer"},
                                          "n_by_kind": {"type": "object", "additionalProperties": {"type": "integer"}}}},
        "config": {"type": "object", "properties": {
            "depth": {"type": ["integer", "array", "null"]}, "which": {"type": ["string", "array", "null"]},
            "dtype": {"enum": ["float64", "float32"]}, "tolerances": {"type": "object"}}},
        "coverage": {"type": "object", "properties": {
            "how": {"enum": ["keywords", "factory", "fixed", "reference"]},
            "configs": {"type": "array", "items": {"type": "object", "required": ["n_examples", "first_example",
                                                                                  "passed"],
                                                   "properties": {"n_examples": {"type": "integer"},
                                                                  "first_example": {"type": "integer"},
                                                                  "passed": {"type": ["boolean", "null"]}}}},
            "exercised": {"type": "object", "additionalProperties": {"type": "array"}},
            "not_exercised": {"type": "object", "additionalProperties": {"type": "array"}},
            "line": {"type": "string"}}},
        "versions": {"type": "object", "required": ["ntkref", "numpy", "hypothesis", "python"],
                     "additionalProperties": {"type": "string"}},
        "duration_s": _NUM_OR_NULL,
        "test_id": {"type": ["string", "null"]},
        "verdicts": {"type": "object", "required": ["n_proven", "n_tested", "n_by_basis", "notes"],
                     "properties": {"n_proven": {"type": "integer"}, "n_tested": {"type": "integer"},
                                    "n_by_basis": {"type": "object", "additionalProperties": {"type": "integer"}},
                                    "notes": {"type": "array", "items": {"type": "string"}}}},
    },
}
"""JSON Schema of :meth:`CheckReport.to_dict` (the subset of draft 2020-12 keywords listed in its comment)."""
