r"""Structured results of the ``ntkref.testing`` checkers: examples, per-kind summaries, reports.

Re-exported by :mod:`ntkref.testing` (``Mismatch``, ``KindSummary``, ``CheckReport``, ``REPORT_SCHEMA``,
``FAILURE_KINDS``, ``ENTRY_COLUMNS``, ``json_safe``); the CLI may use them for its own structured output.
The scaled kernel error and ntkref's own error bounds (the verdict's floor), which the CLI uses too, live in
:mod:`ntkref.kernels._accuracy` (no hypothesis).  Reports are written through the one atomic writer,
:func:`ntkref._lib.files.replace_atomically`.

Failure kinds
-------------
``"non_finite"``   overflow/NaN: the candidate returned inf or NaN where the reference is finite;
``"convention"``   a finite error above the check's ``convention_threshold`` (default 1e-4 of the scale in float64,
                   1e-2 in float32): a formula or convention mismatch (a constant factor, a missing 1/d, NNGP vs NTK,
                   λ vs λ/2) or a value lost to underflow — never rounding; the example's ``hint`` says which when a
                   simple rule explains it;
``"precision"``    a finite error above the verdict tolerance but at most the threshold: lost digits;
``"soundness"``    (certificates) a counterexample inside a claimed radius;
``"exception"``    the candidate raised;
``"shape"``        the candidate returned the wrong shape, or (certificates, fits) an invalid value.

JSON (``CheckReport.to_dict()``, schema ``REPORT_SCHEMA``, version ``"ntkref.testing.report/1"``)
-------------------------------------------------------------------------------------------------
Every number is a JSON number; a value that is not finite is written as ``null`` and listed, with its text
(``"nan"``, ``"inf"``, ``"-inf"``), under ``non_finite`` (path → text) of the enclosing example, or in the
report's top-level ``non_finite`` list for the candidate's entries.  Top-level keys::

    schema              "ntkref.testing.report/1"
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
    entries             [entry row] (kernel checks: the failing entries; ``to_dict(entries="all")`` for all)

An *example* is ``{"kind", "entry", "source", "location": [int], "candidate_value", "reference_value", "error",
"tolerance": number|null, "tolerance_source": "user"|"ntkref", "detail": str, "hint": str, "replay": str,
"inputs": {name: nested lists of numbers | number | null}, "non_finite": {path: text}}``; ``replay`` is an
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

__all__ = ["FAILURE_KINDS", "ENTRY_COLUMNS", "REPORT_SCHEMA", "SCHEMA_VERSION", "Mismatch", "KindSummary",
           "CheckReport", "json_safe", "replay_line"]

SCHEMA_VERSION = "ntkref.testing.report/1"
FAILURE_KINDS = ("exception", "shape", "non_finite", "soundness", "convention", "precision")
"""Failure kinds, most severe first (the order a measure-mode report picks its ``failure`` in)."""

ENTRY_COLUMNS = ("example", "source", "row", "col", "entry", "candidate", "reference", "abs_err", "scale",
                 "scaled_err", "tolerance", "tolerance_source", "kind")
"""Columns of the per-entry table of kernel checks (``kind`` is ``"ok"`` for an entry that passed)."""

_MAX_NON_FINITE_LISTED = 100


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

    def __str__(self):
        lines = [
            f"  [{self.kind or 'failure'}] location {self.location} ({self.entry}): candidate "
            f"{self.candidate_value!r}, reference {self.reference_value!r}",
            f"  measured error {self.error:.3e} > tolerance {self.tolerance:.3e} ({self.tolerance_source})",
        ]
        if self.detail:
            lines.append(f"  {self.detail}")
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
            "tolerance_source": self.tolerance_source, "detail": self.detail, "hint": self.hint,
            "replay": self.replay,
            "inputs": json_safe(self.inputs, "inputs", nf),
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
    entries : list of tuple
        Kernel checks: one row per entry compared (``ENTRY_COLUMNS``).
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
        return head

    # -- structured output ---------------------------------------------------------------------
    def entry_table(self, which="all"):
        """The per-entry table as a list of dicts (``ENTRY_COLUMNS``); ``which="failing"`` keeps the failures."""
        rows = self.entries if which == "all" else [r for r in self.entries if r[-1] != "ok"]
        return [dict(zip(ENTRY_COLUMNS, r)) for r in rows]

    def to_dict(self, entries="failing"):
        """JSON-ready dict (module docstring); ``entries`` ∈ {"failing", "all", "none"}."""
        if entries not in ("failing", "all", "none"):
            raise ValueError(f"The 'entries' parameter must be 'failing', 'all' or 'none'. Got {entries!r}.")
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
            "entries": [] if entries == "none" else [_entry_json(r) for r in self.entry_table(entries)],
        }
        if nf:  # only the user's tolerances can be inf here (e.g. diag_tol=inf): say so
            out["tolerance"]["non_finite"] = nf
        return out

    def to_json(self, path, entries="failing"):
        """Write :meth:`to_dict` to ``path`` (strict JSON: ``allow_nan=False``).

        Atomically (:func:`ntkref._lib.files.replace_atomically`): if writing fails half-way, no partial file is
        left and an existing ``path`` keeps its contents.
        """
        data = self.to_dict(entries)
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
        "detail": {"type": "string"},
        "hint": {"type": "string"},
        "replay": {"type": "string"},
        "inputs": {"type": "object"},
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
        "kind": {"enum": ["ok"] + list(FAILURE_KINDS)}, "non_finite": _NON_FINITE_MAP,
    },
}
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ntkref.testing check report",
    "type": "object",
    "required": ["schema", "check", "description", "mode", "passed", "seed", "n_examples", "n_examples_by_source",
                 "max_error", "n_entries", "n_non_finite", "non_finite", "tolerance", "failures", "failure",
                 "entries"],
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
                                     "n_entries_ntkref": {"type": "integer"}}},
        "failures": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["count", "n_entries", "worst", "minimal"],
            "properties": {"count": {"type": "integer"}, "n_entries": {"type": "integer"},
                           "worst": _EXAMPLE, "minimal": _EXAMPLE}}},
        "failure": _EXAMPLE,
        "entries": {"type": "array", "items": _ENTRY},
    },
}
"""JSON Schema of :meth:`CheckReport.to_dict` (the subset of draft 2020-12 keywords listed in its comment)."""
