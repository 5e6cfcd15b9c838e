"""The search engine behind the ``ntkref.testing`` checkers: assert mode and measure mode.

A checker supplies a hypothesis strategy, fixed battery cases and ``evaluate(example, recorder) -> (failures,
score)``: ``failures`` is a list of :class:`Mismatch` (at most one per failure kind: the worst value of that kind in
the example), ``score`` the example's worst error/tolerance ratio (hypothesis' ``target``).  :func:`drive` then

- ``mode="assert"``: stops at the first failing example, shrinks it (hypothesis), tries the battery only if the
  search found nothing, and reports that one failure;
- ``mode="measure"``: runs the whole budget (every hypothesis example, then every battery case), records every
  value (largest finite errors, non-finite values, per-kind counts and worst examples), then, per failure kind first
  seen in the hypothesis search, reruns the search with the same seed stopping at that kind only and lets
  hypothesis shrink it (the generation before the first failure is identical, so the rerun reaches it).

Both modes reduce the reported examples with the checker's ``reduce`` (kernels: the one or two rows involved) and
attach an ``@example(...)`` replay line and the checker's hint.

Also here, shared by every checker and strategy module of :mod:`ntkref.testing`: :class:`OracleMismatch` and
:func:`finish` (raise or return the report), the argument checks :func:`check_dtype`, :func:`check_mode`,
:func:`check_candidate`, :func:`int_range` (size ranges of the strategies), :func:`battery_flag` and
:func:`check_convention_threshold` (kernel and CNTK checkers).
"""
from __future__ import annotations

import math
import time
import warnings

import hypothesis
import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity

from .._lib.validation import InvalidParameterError, check_int, check_real
from . import _storage
from ._report import FAILURE_KINDS, CheckReport, KindSummary, replay_line

MODES = ("assert", "measure")


class Found(Exception):
    """Raised inside the hypothesis test to carry a Mismatch through shrinking."""

    def __init__(self, mismatch):
        super().__init__(str(mismatch))
        self.mismatch = mismatch


def ratio(m):
    """Error / tolerance of a mismatch (inf for non-finite values, exceptions, shapes)."""
    if m.kind in ("exception", "shape", "non_finite") or not math.isfinite(m.error):
        return math.inf
    return m.error / m.tolerance if m.tolerance > 0 else math.inf


def _target(score):
    hypothesis.target(min(score, 1e300) if math.isfinite(score) else 1e300)


class Recorder:
    """Accumulates what a run saw (see :class:`ntkref.testing.CheckReport`)."""

    def __init__(self, record_entries=False, max_table_rows=100_000):
        self.max_error = {}
        self.failures = {}
        self.first = {}  # kind -> (source, first Mismatch of that kind)
        self.n_examples = 0
        self.by_source = {}
        self.n_entries = 0
        self.n_non_finite = 0
        self.non_finite = []
        self.tol_counts = {"user": 0, "ntkref": 0}
        self.verdict_counts = {}  # basis of each verdict (ntkref._verdicts.BASES) -> values judged on it
        self.verdict_notes = []
        self.entries = []
        self.record_entries = record_entries
        self.max_table_rows = max_table_rows
        self.example = -1
        self.source = ""

    def start(self, source):
        self.example = self.n_examples
        self.n_examples += 1
        self.by_source[source] = self.by_source.get(source, 0) + 1
        self.source = source

    def error(self, entry, value):
        if math.isfinite(value):
            self.max_error[entry] = max(self.max_error.get(entry, 0.0), float(value))

    def values(self, n, n_ntkref=0):
        self.n_entries += int(n)
        self.tol_counts["ntkref"] += int(n_ntkref)
        self.tol_counts["user"] += int(n) - int(n_ntkref)

    def verdicts(self, counts, notes=()):
        """Record how many values each verdict basis decided, and why some were not proven (once each)."""
        for k, n in counts.items():
            self.verdict_counts[k] = self.verdict_counts.get(k, 0) + int(n)
        for note in notes:
            if note not in self.verdict_notes and len(self.verdict_notes) < 20:
                self.verdict_notes.append(note)

    def verdict_summary(self):
        return {"n_by_basis": dict(self.verdict_counts), "notes": list(self.verdict_notes)}

    def bad_value(self, location, value):
        self.n_non_finite += 1
        if len(self.non_finite) < 100:
            text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            self.non_finite.append((self.example, self.source, tuple(int(v) for v in location), text))

    def row(self, values):
        if self.record_entries and len(self.entries) < self.max_table_rows:
            self.entries.append((self.example, self.source) + tuple(values))

    def failure(self, m, n_entries=1):
        s = self.failures.setdefault(m.kind, KindSummary(m.kind))
        s.count += 1
        s.n_entries += int(n_entries)
        m.source = self.source
        if s.worst is None or ratio(m) > ratio(s.worst):
            s.worst = m
        self.first.setdefault(m.kind, (self.source, m))


def run_search(strategy, test, *, max_examples, seed, shrink=True):
    """Run ``test`` over ``strategy`` (shrinking the first failure); return the Mismatch or None."""
    max_examples = check_int(max_examples, "max_examples", caller="ntkref.testing", low=0)
    if max_examples == 0:
        return None
    config = hypothesis.settings(
        max_examples=max_examples,
        deadline=None,
        database=None,  # seeded runs use none anyway; hypothesis' other files: ntkref.testing._storage
        derandomize=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target) + ((Phase.shrink,) if shrink else ()),
        suppress_health_check=list(HealthCheck),
    )
    wrapped = hypothesis.seed(seed)(config(hypothesis.given(strategy)(test)))
    try:
        with _storage.hypothesis_home():  # hypothesis' scratch files go to the user cache, not the cwd
            wrapped()
    except Found as found:
        return found.mismatch
    return None


PICK_ORDER = ("exception", "shape", "formula", "convention", "non_finite", "soundness", "precision")
"""The kind an example with failures of several kinds is reported as (a wrong formula explains the rest)."""

BANDED = ("formula", "convention", "precision")
"""Kinds whose shrinking keeps the magnitude: a shrink step counts only if its error is ≥ 1/BAND of the worst."""

BAND = 10.0


def pick(fails):
    """The failure an example is reported by: the first kind in :data:`PICK_ORDER`, then the largest ratio."""
    return min(fails, key=lambda m: (PICK_ORDER.index(m.kind) if m.kind in PICK_ORDER else len(PICK_ORDER),
                                     -ratio(m) if not math.isnan(ratio(m)) else 0.0))


def _stop_at(kind, evaluate, floor=0.0):
    """A hypothesis test that behaves as measure mode's (same target) and stops at the first ``kind`` failure
    whose error is at least ``floor`` (shrinking then keeps both: the kind and the magnitude band)."""

    def test(example):
        scratch = Recorder()
        scratch.start("hypothesis")
        fails, score = evaluate(example, scratch)
        _target(score)
        for m in fails:
            if m.kind == kind and not (m.kind in BANDED and m.error < floor):
                raise Found(m)

    return test


def check_dtype(dtype, caller):
    """'float64' or 'float32' (a dtype or its name); anything else is an error naming 'dtype'."""
    try:
        name = str(np.dtype(dtype))
    except (TypeError, ValueError):
        name = dtype
    if name not in ("float64", "float32"):
        raise InvalidParameterError(f"The 'dtype' parameter of {caller} must be 'float64' or 'float32'. "
                                    f"Got {dtype!r} instead.")
    return name


def check_candidate(candidate, caller):
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of {caller} must be callable. Got {candidate!r}.")
    return candidate


def check_mode(mode, caller):
    if mode not in MODES:
        raise InvalidParameterError(f"The 'mode' parameter of {caller} must be one of {MODES}. Got {mode!r} instead.")
    return mode


def drive(check, **kwargs):
    """Run a checker (:func:`_drive`); the report records its wall-clock ``duration_s``."""
    started = time.perf_counter()
    report = _drive(check, **kwargs)
    report.duration_s = time.perf_counter() - started
    return report


def _drive(check, *, strategy, evaluate, battery_cases, order, mode, max_examples, seed, shrink, description,
          tolerance, reduce=None, hint=None, record_entries=False, pin=None):
    """Run a checker (module docstring); return its :class:`CheckReport` (the caller raises if asked).

    ``pin(diagnosis)`` (kernel checkers): called with the first failure's diagnosis before shrinking, and with
    ``None`` once the report is made, so that shrink steps are judged by the cause first found.
    """
    max_examples = check_int(max_examples, "max_examples", caller=check, low=0)
    if max_examples == 0 and not battery_cases:
        raise InvalidParameterError(
            f"The 'max_examples' parameter of {check} must be >= 1 when no fixed battery runs: with 0 nothing "
            "would be checked (a vacuous pass)."
        )
    rec = Recorder(record_entries)
    state = {"kind": None, "worst": None, "last": None}

    def finish_example(m, source):
        m.source = source
        if reduce is not None:
            m = reduce(m)
            m.source = source
        m.replay = replay_line(m.inputs, order)
        if hint is not None and m.kind in ("convention", "precision", "non_finite"):
            try:
                m.hint = hint(m) or ""
            except Exception as exc:  # a hint is a courtesy: never let it hide the report
                m.hint = f"(no hint: {type(exc).__name__}: {exc})"
        return m

    if mode == "assert":
        def test(example):
            searching = state["kind"] is None
            r = rec if searching else Recorder()  # shrink steps are not part of the budget's statistics...
            r.start("hypothesis" if searching else "shrink")
            fails, score = evaluate(example, r)
            if not searching:  # ... but the largest errors seen include them
                for entry, value in r.max_error.items():
                    rec.error(entry, value)
            if not fails:
                return
            if searching:
                m = pick(fails)
                state.update(kind=m.kind, worst=m)
                if pin is not None:
                    pin(getattr(m, "diagnosis", None))
                _target(score)
            else:  # shrinking keeps the failure: the same kind, and an error within BAND of the worst one seen
                same = [f for f in fails if f.kind == state["kind"]]
                if not same:
                    return
                m = max(same, key=ratio)
                if m.kind in BANDED:
                    if m.error > state["worst"].error:
                        state["worst"] = m
                    if m.error < state["worst"].error / BAND:
                        return
            state["last"] = m
            raise Found(m)  # one raise statement: hypothesis tells failures apart by where they are raised

        try:
            found = run_search(strategy, test, max_examples=max_examples, seed=seed, shrink=shrink)
        except hypothesis.errors.Flaky:  # a candidate that answers differently when called again: the last failure
            found = state["last"]
        source = "hypothesis" if found is not None else ""
        if found is None:
            for name, example in battery_cases:
                rec.start("battery")
                fails, _ = evaluate(example, rec)
                if fails:
                    found = pick(fails)
                    found.detail = (found.detail + f"; battery case {name!r}").lstrip("; ")
                    source = "battery"
                    break
        failures = {}
        if found is not None:
            found = finish_example(found, source)
            summary = rec.failures.get(found.kind, KindSummary(found.kind, 1, 1, found))
            worst = state["worst"] if state["worst"] is not None and state["kind"] == found.kind else summary.worst
            if worst is None or (math.isfinite(found.error) and found.error > worst.error):
                worst = found
            summary.worst = worst
            if worst is not found:
                worst.replay = replay_line(worst.inputs, order)
            if math.isfinite(found.error) and found.entry in rec.max_error:  # the reported example is "seen"
                rec.error(found.entry, found.error)
            summary.minimal = found
            failures = {found.kind: summary}
            # other kinds seen in the same example are reported with their counts (no minimal example)
            for kind, s in rec.failures.items():
                failures.setdefault(kind, s)
        if pin is not None:
            pin(None)
        return CheckReport(found is None, rec.n_examples, rec.max_error, found, source, description, check=check,
                           mode=mode, seed=seed, failures=failures, n_entries=rec.n_entries,
                           n_non_finite=rec.n_non_finite, non_finite=rec.non_finite,
                           n_examples_by_source=rec.by_source, tolerance=tolerance,
                           tolerance_counts=rec.tol_counts, entries=rec.entries,
                           verdicts=rec.verdict_summary())

    # ---- measure mode: the whole budget ----
    def test(example):
        rec.start("hypothesis")
        _, score = evaluate(example, rec)
        _target(score)

    run_search(strategy, test, max_examples=max_examples, seed=seed, shrink=False)
    for name, example in battery_cases:
        rec.start("battery")
        fails, _ = evaluate(example, rec)
        for m in fails:
            m.detail = (m.detail + f"; battery case {name!r}").lstrip("; ")
    for kind, summary in rec.failures.items():
        source, first = rec.first[kind]
        minimal = None
        if source == "hypothesis" and shrink:
            floor = summary.worst.error / BAND if math.isfinite(summary.worst.error) else 0.0
            try:
                minimal = run_search(strategy, _stop_at(kind, evaluate, floor), max_examples=max_examples,
                                     seed=seed, shrink=True)
            except hypothesis.errors.Flaky:
                minimal = None
        summary.minimal = finish_example(minimal if minimal is not None else first, source)
        summary.worst.replay = replay_line(summary.worst.inputs, order)
    failure = None
    source = ""
    for kind in FAILURE_KINDS:
        if kind in rec.failures:
            failure = rec.failures[kind].minimal
            source = failure.source
            break
    return CheckReport(failure is None, rec.n_examples, rec.max_error, failure, source, description, check=check,
                       mode=mode, seed=seed, failures=rec.failures, n_entries=rec.n_entries,
                       n_non_finite=rec.n_non_finite, non_finite=rec.non_finite, n_examples_by_source=rec.by_source,
                       tolerance=tolerance, tolerance_counts=rec.tol_counts, entries=rec.entries,
                           verdicts=rec.verdict_summary())


class OracleMismatch(AssertionError):
    """A candidate disagrees with ntkref beyond the stated tolerance (``.report`` has the details)."""

    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


def finish(report, raise_on_failure):
    """``report``, or :class:`OracleMismatch` raised with it when it failed and ``raise_on_failure``."""
    if not report.passed and raise_on_failure:
        raise OracleMismatch(report)
    return report


def int_range(value, name, low):
    """``(lo, hi)`` from an int or a ``(min, max)`` pair (each ≥ ``low``), for the strategies' size arguments."""
    if isinstance(value, (tuple, list)):
        lo, hi = (check_int(v, name, caller="ntkref.testing", low=low) for v in value)
        if hi < lo:
            raise InvalidParameterError(f"The {name!r} range must have min <= max. Got {value!r} instead.")
        return lo, hi
    v = check_int(value, name, caller="ntkref.testing", low=low)
    return v, v


def check_convention_threshold(value, dtype, caller, kinds_by_cause=False):
    """A checker's ``convention_threshold`` (default 1e-4 in float64, 1e-2 in float32).

    ``kinds_by_cause`` (the kernel checkers): the threshold no longer decides a kind (:mod:`ntkref._diagnosis`);
    a value given is validated and a ``DeprecationWarning`` says it has no effect.
    """
    if value is None:
        return 1e-4 if dtype == "float64" else 1e-2
    value = check_real(value, "convention_threshold", caller=caller, low=0.0, allow_inf=True)
    if kinds_by_cause:
        warnings.warn(f"The 'convention_threshold' parameter of {caller} has no effect: kernel failures are "
                      "classified by cause (convention only when a named slip explains them; ntkref._diagnosis).",
                      DeprecationWarning, stacklevel=3)
    return value


def battery_flag(battery, inputs, caller):
    """Whether the fixed battery runs: ``battery=None`` means only with the default strategy (no ``inputs``)."""
    if battery is None:
        return inputs is None
    if not isinstance(battery, bool):
        raise InvalidParameterError(f"The 'battery' parameter of {caller} must be True, False or None. "
                                    f"Got {battery!r} instead.")
    return battery
